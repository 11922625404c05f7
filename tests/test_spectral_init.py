"""The private spectral start (issue 10, ``TrainConfig(init="spectral")``): the sensitivity
of the released co-occurrence, its noise, its place in the plan and the ledger, resume, the
quality of the non-private start on a planted low-rank synthetic, and the config checks.
Small data only (the whole file runs in well under 20 s on 2 cores)."""

import functools
from unittest import mock

import jax
import numpy as np
import pytest

import dpmt
from dpmt.config import NonPrivate, TrainConfig, route
from dpmt.errors import ConfigError
from dpmt.solvers import spectral_init as si
from dpmt.train.plan import make_plan, releases_counts, sampler_draws

from _interrupt import fit_interrupted_after_first_iteration

EX = dpmt.ExecutionConfig(progress=False)


@functools.lru_cache(maxsize=None)
def _data():
    # uniform popularity and activity: 1-3 buckets per layout instead of 5-7, so each fit
    # compiles 2-3x faster; these tests read the release and the ledger, not the spread
    return dpmt.data.make_synthetic(300, 80, 4000, seed=5, alpha=0.0, user_activity_sigma=0.0)


def _base_pairs(rng, n_users=40, n_items=30, per_user=5):
    users = np.repeat(np.arange(n_users), per_user)
    items = np.concatenate([rng.choice(n_items, per_user, replace=False)
                            for _ in range(n_users)])
    return users, items


# -- (1) sensitivity ------------------------------------------------------------------------
def test_one_user_moves_the_statistic_by_frobenius_norm_at_most_one():
    rng = np.random.default_rng(0)
    users, items = _base_pairs(rng)
    top = si.top_items(np.bincount(items, minlength=30), 20)         # 10 items left out
    C = si.cooccurrence(users, items, 40, top)
    outside = np.setdiff1d(np.arange(30), top)
    for s in (1, 2, 7, 20, 30):                                      # up to every item
        new = rng.choice(30, s, replace=False)
        C2 = si.cooccurrence(np.r_[users, np.full(s, 40)], np.r_[items, new], 41, top)
        norm = np.linalg.norm(C2 - C)
        if np.isin(new, top).any():
            assert norm == pytest.approx(1.0, abs=1e-9), s          # = 1, whatever s
        else:
            assert norm == 0.0
    # a user whose items all lie outside the top K contributes nothing
    C3 = si.cooccurrence(np.r_[users, np.full(outside.size, 40)], np.r_[items, outside], 41,
                         top)
    np.testing.assert_array_equal(C3, C)
    # and the bound holds for every real user (remove-one), including the heaviest
    for j in range(40):
        keep = users != j
        Cj = si.cooccurrence(users[keep], items[keep], 40, top)
        assert np.linalg.norm(C - Cj) <= 1.0 + 1e-9
    assert si.spectral_sensitivity() == 1.0


def test_statistic_matches_its_formula():
    rng = np.random.default_rng(1)
    users, items = _base_pairs(rng, 12, 9, 4)
    top = np.array([4, 0, 7, 2, 8])
    X = np.zeros((12, top.size))
    for u, i in zip(users, items):
        if i in top:
            X[u, list(top).index(i)] = 1.0
    n = X.sum(axis=1, keepdims=True)
    X = np.where(n > 0, X / np.sqrt(np.maximum(n, 1)), 0.0)
    np.testing.assert_allclose(si.cooccurrence(users, items, 12, top), X.T @ X, atol=1e-12)
    np.testing.assert_array_equal(si.top_items([3.0, 9.0, -1.0, 9.0, 5.0], 3), [1, 3, 4])


# -- (2) noise ------------------------------------------------------------------------------
def test_noise_std_is_the_plans_sigma():
    cfg = TrainConfig(init="spectral", dim=4, iterations=2, privacy=dict(epsilon=2.0))
    sigma = make_plan(cfg).spectral.noise_std
    K = 300                                                # 45,150 upper-triangle entries
    E = np.asarray(si.release(np.zeros((K, K)), jax.random.PRNGKey(3), sigma), np.float64)
    np.testing.assert_array_equal(E, E.T)
    upper = E[np.triu_indices(K)]
    assert upper.std() == pytest.approx(sigma, rel=0.02)  # SE of the std ≈ 0.3%
    assert np.diag(E).std() == pytest.approx(sigma, rel=0.1)     # σ on the diagonal too
    assert abs(upper.mean()) < 0.02 * sigma
    # exactly the noisy Gramian's mechanism at size K
    from dpmt.solvers.ssp import symmetric_noise

    np.testing.assert_array_equal(E, np.asarray(symmetric_noise(jax.random.PRNGKey(3), K,
                                                                sigma)))
    assert not np.any(np.asarray(si.release(np.eye(5), jax.random.PRNGKey(0), 0.0))
                      - np.eye(5))                          # σ = 0: the exact statistic


def test_fit_releases_with_the_plans_sigma_and_charges_it():
    cfg = TrainConfig(init="spectral", dim=4, iterations=2, spectral_items=50,
                      privacy=dict(epsilon=3.0))
    calls = []
    real = si.release

    def spy(C, key, sigma):
        calls.append((np.asarray(C), sigma))
        return real(C, key, sigma)

    with mock.patch.object(si, "release", spy):
        model = dpmt.fit(_data(), cfg, execution=EX)
    plan = make_plan(cfg, draws=sampler_draws(cfg, _data().n_items))   # fit's own plan
    assert len(calls) == 1 and calls[0][0].shape == (50, 50)
    assert calls[0][1] == plan.spectral.noise_std > 0
    assert [r.name for r in model.ledger.releases].count("spectral_init") == 1
    assert model.ledger.releases[1] == plan.spectral


# -- (3) the plan and the ledger ----------------------------------------------------------
def test_plan_has_the_release_after_the_counts_and_the_ledger_total_is_calibrated():
    cfg = TrainConfig(init="spectral", dim=4, iterations=2, privacy=dict(epsilon=2.0))
    plan = make_plan(cfg)
    names = [r.name for r in plan.releases()]
    assert names == ["item_counts", "spectral_init", "iter0/gramian", "iter0/gd",
                     "iter1/gramian", "iter1/gd"]
    assert plan.spectral.sensitivity == 1.0
    assert plan.spectral.noise_multiplier == pytest.approx(plan.iterations[0].gramian
                                                           .noise_multiplier)
    model = dpmt.fit(_data(), cfg, execution=EX)
    assert [r.name for r in model.ledger.releases] == names
    # fit's plan also charges the sampler's δ of the data's draws: ε a hair above
    assert model.ledger.epsilon() == pytest.approx(plan.epsilon, rel=1e-5)
    fitted = make_plan(cfg, draws=sampler_draws(cfg, _data().n_items))
    assert model.ledger.epsilon() == pytest.approx(fitted.epsilon, rel=1e-9)
    assert model.ledger.epsilon() <= cfg.privacy.epsilon * (1 + 1e-6)
    assert "spectral_init" in model.ledger.summary()


def test_its_own_noise_ratio_scales_its_noise_and_the_plan_stays_within_the_target():
    base = make_plan(TrainConfig(init="spectral", dim=4, iterations=2, privacy=dict(epsilon=2.0)))
    cfg = TrainConfig(init="spectral", dim=4, iterations=2,
                      privacy=dict(epsilon=2.0, spectral_noise_ratio=0.25))
    plan = make_plan(cfg)
    z_spec, z_gd = plan.spectral.noise_multiplier, plan.iterations[0].item[0].noise_multiplier
    assert z_spec == pytest.approx(0.25 * z_gd, rel=1e-6)
    # less noise on this release leaves more on the others, at the same total ε
    assert z_gd > base.iterations[0].item[0].noise_multiplier
    assert plan.epsilon <= cfg.privacy.epsilon * (1 + 1e-6)
    assert plan.epsilon == pytest.approx(base.epsilon, rel=1e-2)


def test_random_init_plan_is_unchanged():
    for kw in (dict(), dict(solver="ssp", weights="adaptive"),
               dict(task="rating", split="random")):
        kw = dict(dim=4, iterations=2, accountant="rdp", **kw)     # rdp: a fast calibration
        rand = make_plan(TrainConfig(**route(kw)))
        spec = make_plan(TrainConfig(**route(dict(init="spectral", **kw))))
        assert rand.spectral is None
        assert [r.name for r in spec.releases() if r.name != "spectral_init"] == \
            [r.name for r in rand.releases()]
    assert [r.name for r in make_plan(TrainConfig(dim=4, iterations=2)).releases()] == \
        ["item_counts", "iter0/gramian", "iter0/gd", "iter1/gramian", "iter1/gd",
         "fold_in_choice"]


def test_spectral_start_needs_the_counts_so_it_releases_them():
    # SSP with uniform weights and no prior releases no counts with the random start …
    kw = dict(solver="ssp", weights="uniform", popularity_prior=0.0, dim=4, iterations=2)
    assert not releases_counts(TrainConfig(**route(kw)))
    assert make_plan(TrainConfig(**route(kw))).counts is None
    # … the spectral start ranks items by them: they are released (and charged) first
    cfg = TrainConfig(**route(dict(init="spectral", **kw)))
    assert releases_counts(cfg) and make_plan(cfg).counts is not None
    assert [r.name for r in make_plan(cfg).releases()][:2] == ["item_counts", "spectral_init"]
    assert not releases_counts(TrainConfig(init="spectral", privacy=NonPrivate()))


def test_resume_does_not_release_it_again(tmp_path):
    cfg = TrainConfig(init="spectral", dim=4, iterations=3, spectral_items=40,
                      # the reference run and the resumed one share noise
                      privacy=dict(epsilon=3.0, noise_seed=5))
    ref = dpmt.fit(_data(), cfg, execution=EX)
    fit_interrupted_after_first_iteration(_data(), cfg, tmp_path, EX)
    released = []
    with mock.patch.object(si, "release", lambda *a: released.append(1)):
        resumed = dpmt.fit(_data(), cfg, execution=EX, run_dir=tmp_path, resume=True)
    assert released == []                          # not released (nor charged) twice
    assert [r.name for r in resumed.ledger.releases] == [r.name for r in ref.ledger.releases]
    assert resumed.epsilon == pytest.approx(ref.epsilon)
    np.testing.assert_allclose(resumed.item_embeddings, ref.item_embeddings, rtol=1e-5,
                               atol=1e-6)


# -- (4) quality of the start -------------------------------------------------------------
def _cos2(A, B):
    """Squared cosines of the principal angles between span(A) and span(B)."""
    qa, _ = np.linalg.qr(np.asarray(A, np.float64))
    qb, _ = np.linalg.qr(np.asarray(B, np.float64))
    return np.linalg.svd(qa.T @ qb, compute_uv=False) ** 2


def test_non_private_spectral_start_finds_the_planted_item_space():
    # uniform popularity (alpha = 0): the expected co-occurrence's top eigenvectors then span
    # the planted item factors (plus a diagonal ≈ const·I that leaves them alone)
    rank = 4
    r, truth = dpmt.data.make_synthetic(3000, 120, 60_000, alpha=0.0, rank=rank, noise=0.05,
                                        seed=2, return_truth=True)
    cfg = TrainConfig(init="spectral", dim=rank, privacy=NonPrivate())
    V_rand = dpmt.train.training_run.initial_items(jax.random.PRNGKey(0), r.n_items, rank,
                                           cfg.init_scale)
    top = si.top_items(r.item_counts(), cfg.spectral_items)
    assert top.size == r.n_items                    # K = min(m, spectral_items)
    C = si.cooccurrence(r.user, r.item, r.n_users, top)
    V0 = np.asarray(si.spectral_start(V_rand, top, si.release(C, jax.random.PRNGKey(9), 0.0),
                                      cfg.init_scale))
    spectral, random = _cos2(V0, truth.item_factors), _cos2(V_rand, truth.item_factors)
    assert spectral.mean() > 0.9, spectral
    assert random.mean() < 0.5, random
    assert spectral.min() > random.max()
    # scaled to the random start's norm: every row at its expected row norm
    np.testing.assert_allclose(np.linalg.norm(V0, axis=1),
                               cfg.init_scale * np.sqrt(1 + rank / 4), rtol=1e-5)
    assert np.linalg.norm(V0) == pytest.approx(np.linalg.norm(V_rand), rel=0.1)


def test_items_outside_the_top_k_keep_the_random_start():
    rng = np.random.default_rng(3)
    users, items = _base_pairs(rng)
    top = si.top_items(np.bincount(items, minlength=30), 12)
    V_rand = np.asarray(dpmt.train.training_run.initial_items(jax.random.PRNGKey(1), 30, 16, 0.1))
    C = si.cooccurrence(users, items, 40, top)
    V0 = np.asarray(si.spectral_start(V_rand, top, C, 0.1))
    rest = np.setdiff1d(np.arange(30), top)
    np.testing.assert_array_equal(V0[rest], V_rand[rest])
    # d = 16 > K = 12: the top-K rows' last 4 columns keep the random start too
    np.testing.assert_array_equal(V0[top][:, 12:], V_rand[top][:, 12:])
    assert not np.allclose(V0[top][:, :12], V_rand[top][:, :12])
    # … and those rows have the random start's expected norm over their 12 columns
    np.testing.assert_allclose(np.linalg.norm(V0[top][:, :12], axis=1),
                               0.1 * np.sqrt(12 * (1 / 16 + 0.25)), rtol=1e-5)
    # an item nobody rated (a 0 row of the exact statistic, outside the top-4 eigenvectors'
    # support) keeps its random row instead of a scaled-up round-off direction
    C0 = C.copy()
    C0[3, :] = C0[:, 3] = 0.0
    V4 = np.asarray(dpmt.train.training_run.initial_items(jax.random.PRNGKey(1), 30, 4, 0.1))
    V1 = np.asarray(si.spectral_start(V4, top, C0, 0.1))
    np.testing.assert_array_equal(V1[top[3]], V4[top[3]])
    others = np.delete(top, 3)
    np.testing.assert_allclose(np.linalg.norm(V1[others], axis=1), 0.1 * np.sqrt(1 + 4 / 4),
                               rtol=1e-5)


# -- (5) configuration ----------------------------------------------------------------------
@pytest.mark.parametrize("kw,match", [
    (dict(init="pca"), "init must be one of random, spectral"),
    (dict(spectral_items=0), "spectral_items must be"),
    (dict(spectral_items=2.5), "spectral_items must be an integer"),
    (dict(spectral_items="100"), "spectral_items"),
    (dict(spectral_items=True), "spectral_items"),
    (dict(spectral_items=10**6), "spectral_items must be"),
    (dict(init="spectral", gd=dpmt.GDConfig(encoder="mlp")), "MLP encoder"),
    (dict(init="spectral", spectral_noise_ratio=0.0), "spectral_noise_ratio must be"),
])
def test_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**route(kw))


def test_cli_flags_build_the_config():
    import argparse

    from dpmt.apps.args import add_config_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_config_arguments(p)
    cfg, _ = config_from_args(p.parse_args(["--init", "spectral", "--spectral-items", "64"]))
    assert cfg.init == "spectral" and cfg.spectral_items == 64
    assert "spectral" in p.format_help() and "--spectral-items" in p.format_help()
    with pytest.raises(SystemExit):
        p.parse_args(["--init", "pca"])
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
