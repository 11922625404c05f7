"""The private alternating-minimisation loop: privacy plan, ledger, determinism, API, outputs.

Also the five accounting defects of the reference implementation (Krichene et al. 2023's protocol; listed in the README).
"""

import json
import math

import jax
import numpy as np
import pytest

import dpmt
from dpmt.config import ExecutionConfig, GDConfig, NonPrivate, TrainConfig, route
from dpmt.data import load, per_user_split
from dpmt.errors import ConfigError, DpmtError, PrivacyBudgetError
from dpmt.train import compute_weights, fit, planned_releases, run
from dpmt import weighting

QUIET = ExecutionConfig(progress=False)

SMALL = dict(dim=4, iterations=2, budget=10.0, reg=1.0, gravity=0.1, solver="ssp")
# strongly personalised planted preferences (rank 4, no popularity-only picks), so that
# collaborative filtering has a clear edge over popularity at this tiny size; run() and
# run_grid() (default per-user split, seed 0) train on the very ratings of `split`, so their
# kernels are the shapes compiled already
SPEC = ("synthetic:users=300,items=120,interactions=6000,alpha=1.0,seed=1,rank=4,noise=0.0,"
        "concentration=0.05")


@pytest.fixture(scope="module")
def split():
    return per_user_split(load(SPEC), seed=0)


def test_private_fit_spends_at_most_target_and_ledger_is_complete(split):
    cfg = TrainConfig(weights="adaptive", **SMALL, privacy=dict(epsilon=2.0))
    res = fit(split.train, cfg, test=split.test)
    names = [r.name for r in res.ledger.releases]
    # (ε < 3: fold_in="auto" makes no fold-in choice)
    assert names == ["item_counts", "iter0/gramian", "iter0/ssp_A", "iter0/ssp_b",
                     "iter1/gramian", "iter1/ssp_A", "iter1/ssp_b"]
    assert res.epsilon <= 2.0 * (1 + 1e-6)
    assert res.epsilon == pytest.approx(2.0, rel=1e-3)  # calibrated to use the budget
    m = res.metrics
    assert set(m["overall"]) >= {"recall@20", "ndcg@20"}
    assert len(m["buckets"]) == 5
    assert m["privacy"]["epsilon"] == pytest.approx(res.epsilon)
    assert np.all(np.isfinite(res.item_embeddings))


def test_same_noise_seed_same_model_and_no_seed_fresh_noise(split):
    cfg = TrainConfig(weights="adaptive", **SMALL, privacy=dict(epsilon=5.0, noise_seed=3))
    a = fit(split.train, cfg)
    b = fit(split.train, cfg)
    c = fit(split.train, cfg.replace(privacy=dict(noise_seed=4)))
    d = fit(split.train,
            cfg.replace(privacy=dict(noise_seed=None)))     # secret key from OS entropy
    e = fit(split.train, cfg.replace(privacy=dict(noise_seed=None)))
    np.testing.assert_array_equal(a.item_embeddings, b.item_embeddings)
    assert not np.allclose(a.item_embeddings, c.item_embeddings)
    assert not np.allclose(d.item_embeddings, e.item_embeddings)


def test_nonprivate_als_beats_popularity_on_planted_data(split):
    from dpmt.train import popularity_metrics

    res = fit(split.train, TrainConfig(dim=8, iterations=6, reg=1.0,
                                       gravity=0.5, privacy=NonPrivate()), test=split.test)
    pop = popularity_metrics(split.train, split.test)
    assert res.ledger is None and math.isinf(res.metrics["privacy"]["epsilon"])
    # measured 0.78 vs 0.46: a clear margin, not a coin flip
    assert res.metrics["overall"]["recall@20"] > pop["overall"]["recall@20"] + 0.1


def test_unmeetable_budget_refused_before_touching_data(split, monkeypatch):
    import dpmt.train.training_run as tr

    touched = []
    monkeypatch.setattr(tr, "private_counts", lambda *a, **k: touched.append(1))
    cfg = TrainConfig(weights="adaptive", **SMALL,
                      privacy=dict(epsilon=0.5, count_noise_multiplier=0.5))
    with pytest.raises(PrivacyBudgetError, match="alone spend"):
        fit(split.train, cfg)
    assert touched == []


def test_weights_respect_budget_for_every_scheme(split):
    counts = np.maximum(split.train.item_counts(), 1).astype(float)
    for w in ["uniform", "tail", "adaptive", "adaptive-normalized"]:
        cfg = TrainConfig(weights=w, budget=7.0)
        ww = compute_weights(cfg, split.train, counts, float(split.train.n_users), seed=0)
        b = weighting.user_sq_norms(ww, split.train.user, split.train.n_users)
        assert b.max() <= 7.0 + 1e-9, w
        assert ww.min() >= 0


def test_recommend_folds_in_a_new_user(split):
    res = fit(split.train, TrainConfig(dim=8, iterations=4, privacy=NonPrivate()))
    hist_rows = split.train.by_user.row(0)[0]
    hist = split.train.item_ids[hist_rows]                 # raw ids in, raw ids out
    top, top_scores = res.recommend(hist, k=10)
    assert len(top) == 10 and len(set(top.tolist())) == 10
    assert not set(top.tolist()) & set(hist.tolist())
    scores = res.score(hist)                       # ⟨u, v_i⟩ + ‖u‖·π_i
    np.testing.assert_allclose(scores, res.item_embeddings @ res.fold_in(hist)
                               + np.linalg.norm(res.fold_in(hist)) * (res.item_prior()
                                                                      if res.item_prior()
                                                                      is not None else 0.0),
                               rtol=1e-5, atol=1e-6)
    scores[hist_rows] = -np.inf
    assert top_scores[0] == pytest.approx(scores.max(), rel=1e-6)
    assert res.item_index([top[0]])[0] == int(np.argmax(scores))
    with pytest.raises(DpmtError, match="not in this model"):
        res.recommend(np.array([10**6]))


def test_gd_solver_runs_private_and_accounts_each_step(split):
    cfg = TrainConfig(weights="adaptive", gd=GDConfig(steps=3, sampling_rate=0.5),
                      **{**SMALL, "solver": "gd"}, privacy=dict(epsilon=3.0))
    res = fit(split.train, cfg, test=split.test)
    gd = [r for r in res.ledger.releases if r.name.endswith("/gd")]
    assert len(gd) == 2 and all(r.count == 3 and r.sampling_rate == 0.5 for r in gd)
    assert res.epsilon <= 3.0 * (1 + 1e-6)
    assert np.all(np.isfinite(res.item_embeddings))


# -- the reference implementation's five accounting defects (README) -----------------------
def test_b_noise_sensitivity_includes_the_label_range():
    """The b-noise sensitivity is √β·C·y_max, with labels clipped to |y| ≤ y_max."""
    from dpmt.solvers.ssp import ssp_sensitivities

    _, s1 = ssp_sensitivities(4.0, 0.5, 1.0)
    _, s3 = ssp_sensitivities(4.0, 0.5, 3.0)
    assert s3 == pytest.approx(3 * s1) and s1 == pytest.approx(2 * 0.5 * 1.0)
    plan = dpmt.train.make_plan(TrainConfig(budget=4.0, user_clip=0.5, solver="ssp"))
    assert plan.iterations[0].item[1].sensitivity == pytest.approx(s1)  # b̂; y_max = 1
    assert [p.sensitivity for p in planned_releases(TrainConfig(budget=4.0, user_clip=0.5,
                                                                 solver="ssp"))
            if p.name == "iter0/ssp_b"] == [pytest.approx(s1)]


def test_private_mean_is_charged_for_all_k_ratings_of_a_user():
    from dpmt.privacy import private_mean

    import random

    from dpmt.privacy.mechanisms import mean_lattice

    _, (rs, rc) = private_mean(np.array([1.0, 5.0]), np.array([0, 0]), low=-3, high=2, k=7,
                               sum_noise_std=1.0, count_noise_std=1.0,
                               cap_rng=np.random.default_rng(0), noise_rng=random.Random(0))
    bits, step = mean_lattice(7, -3, 2)      # the sum is released on a lattice of 2^-bits
    assert rs.sensitivity == step == 7 * math.ceil(3 * 2**bits) and rc.sensitivity == 7


def test_counts_are_released_and_charged_once_for_every_weight_scheme(split, monkeypatch):
    """tail and adaptive weights read one counts release, charged exactly once."""
    import dpmt.train.training_run as tr

    calls = []
    real = tr.private_counts
    monkeypatch.setattr(tr, "private_counts", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = fit(split.train, TrainConfig(weights="tail", **SMALL, privacy=dict(epsilon=4.0)))
    assert calls == [1]
    assert [r.name for r in res.ledger.releases].count("item_counts") == 1


def test_training_never_reads_exact_counts(split, monkeypatch):
    """Exact item counts are read only for the evaluation buckets, never by training."""
    from dpmt.data.ratings import Ratings

    def forbidden(self):
        raise AssertionError("training read exact item counts")

    monkeypatch.setattr(Ratings, "item_counts", forbidden)
    for w in ["tail", "adaptive", "adaptive-normalized", "uniform"]:
        fit(split.train, TrainConfig(weights=w, **SMALL,
                                     privacy=dict(epsilon=4.0)))  # no evaluation


def test_sampled_gd_draws_poisson_batches_and_is_accounted_as_poisson():
    import dp_accounting

    from dpmt.solvers.noisy_gd import noisy_gd_dp_event, poisson_sample

    ev = noisy_gd_dp_event(1.0, 10, sampling_rate=0.1)
    assert isinstance(ev, dp_accounting.SelfComposedDpEvent)
    assert isinstance(ev.event, dp_accounting.PoissonSampledDpEvent)
    sizes = [int(np.asarray(poisson_sample(jax.random.PRNGKey(s), 1000, 0.1)).sum())
             for s in range(50)]
    assert len(set(sizes)) > 5  # batch sizes vary: Poisson, not fixed-size shuffling
    assert abs(np.mean(sizes) - 100) < 10


# -- run directory and config --------------------------------------------------------------
def test_run_writes_complete_run_directory(tmp_path):
    cfg = TrainConfig(weights="adaptive", **SMALL, data=dict(dataset=SPEC),
                      privacy=dict(epsilon=3.0))
    res = run(cfg, out_dir=tmp_path / "r", execution=QUIET)
    out = tmp_path / "r"
    for f in ["trainer/config.json", "model/ledger.json", "trainer/metrics.json",
              "model/item_embeddings.npz", "trainer/train.log", "model/model.json",
              "trainer/checkpoint.npz", "trainer/PRIVATE.txt"]:
        assert (out / f).exists(), f
    # the shareable folder holds the model's three files and nothing else
    assert sorted(p.name for p in (out / "model").iterdir()) == [
        "item_embeddings.npz", "ledger.json", "model.json"]
    m = json.loads((out / "trainer" / "metrics.json").read_text())
    assert "recall@20" in m["overall"] and len(m["buckets"]) == 5
    assert m["privacy"]["epsilon"] <= 3.0 * (1 + 1e-6)
    assert m["privacy"]["privacy_unit"].startswith("one user")
    led = json.loads((out / "model" / "ledger.json").read_text())
    assert led["epsilon"] == pytest.approx(res.epsilon)
    z = np.load(out / "model" / "item_embeddings.npz")
    np.testing.assert_array_equal(z["V"], res.item_embeddings)
    assert TrainConfig.from_dict(json.loads((out / "trainer" / "config.json").read_text())) \
        == cfg
    assert not list(out.rglob("*.tmp*"))


@pytest.mark.parametrize("bad, msg", [
    (dict(epsilon=0.0), r"epsilon must be in \[0.01, 100\]"),
    (dict(delta=1.0), r"delta must be in \[1e-12, 0.1\]"),
    (dict(dim=0), r"dim must be in \[1, 4096\]"),
    (dict(mu=-1.0), r"mu must be in \[0, 1000000\]"),
    (dict(weights="nope"), "weights must be one of"),
    (dict(solver="ssp", gd=GDConfig(encoder="mlp")), "needs solver='gd'"),
    (dict(gd="steps=3"), "gd must be a GDConfig"),
    (dict(seed=2**64), r"seed must be in \[0, 2147483647\]"),
    (dict(weights="uniform", budget=2.5), "must be an integer"),
])
def test_config_validation(bad, msg):
    with pytest.raises(ConfigError, match=msg):
        TrainConfig(**route(bad))


def test_public_entry_point():
    assert dpmt.fit is fit
    assert dpmt.TrainConfig is TrainConfig
    assert dpmt.Model is dpmt.model.Model and dpmt.run is run


def test_noise_free_gd_converges_to_ssp_solution(split):
    """With noise off (non-private) and clipping inactive, noisy GD on the same weighted
    objective (incl. the gravity term) reaches the SSP item solution."""
    import jax.numpy as jnp

    from dpmt.solvers import layout as L
    from dpmt.solvers.encoders import EmbeddingEncoder, embedding_params, item_embeddings
    from dpmt.solvers.noisy_gd import noisy_gd
    from dpmt.solvers.ssp import gramian, ssp_item_step
    from dpmt.solvers.user_step import solve_users
    import optax

    tr = split.train
    items, users = L.task_layout(tr, dim=4), L.user_layout(tr, dim=4)
    V0 = 0.3 * jax.random.normal(jax.random.PRNGKey(0), (tr.n_items, 4))
    U = solve_users(users, V0, reg=1.0, alpha0=0.1, clip_norm=1.0)
    extra = 0.1 * gramian(U)
    w = jnp.asarray(np.random.default_rng(0).uniform(0.5, 1.5, tr.nnz), jnp.float32)
    v_ssp = ssp_item_step(items, U, w, None, None, 0.0, 0.0, 1.0, extra=extra)
    enc = EmbeddingEncoder(n_items=tr.n_items, dim=4)
    p = noisy_gd(enc, embedding_params(V0), items, U, w, None, steps=400, clip_norm=1e6,
                 noise_multiplier=0.0, key=jax.random.PRNGKey(1), num_users=1.0,
                 optimizer=optax.sgd(0.01), reg=1.0, extra_quadratic=extra)
    np.testing.assert_allclose(np.asarray(item_embeddings(enc, p)), np.asarray(v_ssp),
                               atol=2e-3)


def test_a_non_private_fit_is_reproducible_from_its_config_and_data(split):
    """A non-private run noises nothing: its random start (and weights' choices) come from
    the data seed, so the same config and data give the same model (this failed while they
    came from fresh OS entropy); a private run without a noise seed still draws a fresh
    secret, so two such fits differ."""
    r = split.train
    cfg = TrainConfig(dim=4, iterations=2, privacy=NonPrivate())
    a, b = (np.asarray(fit(r, cfg, execution=QUIET).item_embeddings) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    other = np.asarray(fit(r, cfg.replace(data=dict(seed=1)), execution=QUIET).item_embeddings)
    assert not np.allclose(a, other)
    priv = cfg.replace(privacy=dict(epsilon=5.0))
    p, q = (np.asarray(fit(r, priv, execution=QUIET).item_embeddings) for _ in range(2))
    assert not np.allclose(p, q)


def test_the_grids_non_private_als_row_trains_without_privacy(monkeypatch):
    """`dpmt compare` and `dpmt demo` label a row "ALS (non-private)": its fit must be
    non-private. Adding the benchmark's noise seed as privacy=dict(...) to NonPrivate() made
    it a private ε = 5 fit (it scored popularity's level in the demo while labelled ∞)."""
    import dataclasses

    from dpmt.apps import compare
    from dpmt.config import TrainConfig
    from dpmt.train import loop

    seen = []
    real_fit = loop.fit

    def spy(train, cfg, **kw):
        seen.append(cfg)
        return real_fit(train, cfg, **kw)

    monkeypatch.setattr(loop, "fit", spy)
    base = TrainConfig(dim=4, iterations=1, data=dict(dataset=SPEC))
    points = [p for p in compare.build_grid(base, ["uniform"], [5.0], ["gd"])
              if p.label == "ALS (non-private)" or p.label.startswith("DP")]
    assert [p.label for p in points] == ["ALS (non-private)", "DP uniform gd ε=5"]
    assert not points[0].config.private and points[0].config.solver == "ssp"
    # the grid's ALS point at this test's size (d = 4, one sweep instead of its d = 16 and
    # 6 sweeps): still a NonPrivate() config, which run_grid must not make private
    points[0] = dataclasses.replace(points[0], config=points[0].config.replace(
        dim=4, iterations=1))
    assert not points[0].config.private
    rows = compare.run_grid(base, points, [0], progress=False)
    by_label = {r["method"]: r for r in rows}
    assert [c.private for c in seen] == [False, True]
    assert by_label["ALS (non-private)"]["epsilon"] == float("inf")
    assert seen[1].privacy.noise_seed == 0          # the private row keeps its seeded noise
    assert by_label["DP uniform gd ε=5"]["epsilon"] <= 5.0 + 1e-6
