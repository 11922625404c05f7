"""The rating task: private rating prediction (RMSE), labels centred by a private global mean
and private item offsets, clipped to the range the sensitivities assume."""

import numpy as np
import pytest

import dpmt
from dpmt.config import ExecutionConfig, NonPrivate, PrivacyConfig, TrainConfig, route
from dpmt.data import random_split
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.privacy.randomness import NoiseSource

QUIET = ExecutionConfig(progress=False)


@pytest.fixture(scope="module")
def ratings():
    """Explicit 1–5 star ratings with planted item biases and a rank-2 taste structure."""
    rng = np.random.default_rng(0)
    n_u, n_i, per_user = 400, 120, 25
    bias = rng.normal(0, 0.8, n_i)
    pop = rng.zipf(1.6, n_i).astype(float)
    P, Q = rng.normal(0, 0.6, (n_u, 2)), rng.normal(0, 0.6, (n_i, 2))
    users, items = [], []
    for u in range(n_u):
        it = rng.choice(n_i, size=per_user, replace=False, p=pop / pop.sum())
        users += [u] * per_user
        items += list(it)
    users, items = np.array(users), np.array(items)
    r = 3.6 + bias[items] + (P[users] * Q[items]).sum(1) + rng.normal(0, 0.4, len(users))
    r = np.clip(np.round(r), 1, 5)
    return Ratings(user=users, item=items, value=r.astype(np.float32), user_ids=np.arange(n_u),
                   item_ids=np.arange(n_i) + 100, name="planted-ratings",
                   items_public=True)     # the planted catalogue: ids 100..219


@pytest.fixture(scope="module")
def split(ratings):
    return random_split(ratings, seed=1234)


def _cfg(**kw):
    base = dict(task="rating", split="random", gravity=0.0, dim=2, reg=20.0, user_clip=0.5,
                budget=10.0, iterations=2, epsilon=5.0, weights="uniform", solver="ssp")
    base.update(kw)
    return TrainConfig(**route(base))


def test_the_plan_charges_the_mean_the_offsets_and_the_label_range():
    import math

    from dpmt.privacy.mechanisms import mean_lattice, offsets_lattice
    from dpmt.train.plan import make_plan

    cfg = _cfg(label_clip=1.5, budget=9.0, user_clip=0.5)
    plan = make_plan(cfg)
    k = cfg.effective_count_cap
    # integer releases on a public lattice (discrete Gaussian): sensitivities in lattice units
    bits, step = mean_lattice(k, 0.5, 5.0)
    assert plan.mean_sum.sensitivity == step == k * math.ceil(5.0 * 2**bits)   # k · max|r|
    assert plan.mean_count.sensitivity == pytest.approx(k)
    assert plan.item_offsets.sensitivity == pytest.approx(np.sqrt(k) * offsets_lattice(k, 1.5)[1])
    assert plan.mean_sum.mechanism == plan.item_offsets.mechanism == "discrete_gaussian"
    # b-statistics: √β · C · y_max with y_max the label clip, not 1
    assert plan.iterations[0].item[1].sensitivity == pytest.approx(3.0 * 0.5 * 1.5)  # b̂
    assert plan.epsilon <= 5.0 * (1 + 1e-6)
    names = [r.name for r in plan.releases()]
    assert names[:4] == ["rating_mean/sum", "rating_mean/count", "item_counts", "item_offsets"]


@pytest.fixture
def seen_labels(monkeypatch):
    """The labels each fit hands to the solvers (make_steps), as a dict filled on each fit."""
    import dpmt.train.training_run as setup

    seen = {}
    real = setup.make_steps

    def spy(cfg, train, w, *, labels=None, **k):
        seen["labels"] = np.asarray(labels)
        return real(cfg, train, w, labels=labels, **k)

    monkeypatch.setattr(setup, "make_steps", spy)
    return seen


def test_the_solver_sees_labels_inside_the_clipped_range(split, seen_labels):
    """Regression: whatever the ratings, the labels reaching the solvers satisfy the bound
    |y| ≤ label_clip that the b-sensitivity assumes."""
    dpmt.fit(split.train, _cfg(label_clip=0.75), execution=QUIET)
    y = seen_labels["labels"]
    assert y.shape == (split.train.nnz,)
    assert np.abs(y).max() <= 0.75 + 1e-6
    assert np.mean(np.isclose(np.abs(y), 0.75)) > 0.05          # the clip is active here


def test_private_rmse_beats_the_private_global_mean(split):
    m = dpmt.fit(split.train, _cfg(epsilon=5.0), test=split.test, execution=QUIET)
    assert m.epsilon <= 5.0 * (1 + 1e-6)
    from dpmt.train.evaluate import mean_rating_metrics

    base = mean_rating_metrics(m.label_offset, split.train, split.test, {})
    assert m.metrics["overall"]["rmse"] < base["overall"]["rmse"] - 0.05
    assert len(m.metrics["buckets"]) == 5


def test_a_rating_model_saves_loads_and_predicts(split, tmp_path):
    m = dpmt.fit(split.train, _cfg(), execution=QUIET)
    m.save(tmp_path / "m")
    back = Model.load(tmp_path / "m")
    assert back.label_offset == pytest.approx(m.label_offset)
    np.testing.assert_allclose(back.item_offsets, m.item_offsets)
    hist = split.train.item_ids[split.train.by_user.row(0)[0]]
    vals = split.train.by_user.row(0)[1]
    p1 = m.predict(hist, vals, [100, 101, 102])
    np.testing.assert_allclose(back.predict(hist, vals, [100, 101, 102]), p1, rtol=1e-5)
    assert np.all((p1 >= 0.5) & (p1 <= 5))
    with pytest.raises(DataError, match="pass values"):
        m.fold_in(hist)
    implicit = dpmt.fit(split.train, TrainConfig(dim=2, iterations=1, privacy=NonPrivate()),
                        execution=QUIET)
    with pytest.raises(ConfigError, match="rating models"):
        implicit.predict(hist, vals, [100])


def test_ratings_outside_the_stated_range_are_refused(split):
    bad = Ratings(user=split.train.user, item=split.train.item,
                  value=np.where(np.arange(split.train.nnz) == 0, 7.0, split.train.value),
                  user_ids=split.train.user_ids, item_ids=split.train.item_ids)
    with pytest.raises(DataError, match="rating range"):
        dpmt.fit(bad, _cfg(), execution=QUIET)
    dpmt.fit(bad, _cfg(rating_range="0,10", iterations=1), execution=QUIET)


def test_rating_task_configuration_is_checked():
    with pytest.raises(ConfigError, match="split='random'"):
        TrainConfig(task="rating", data=dict(split="heldout-users"))
    with pytest.raises(ConfigError, match="task='rating'"):
        TrainConfig(data=dict(split="random"))
    with pytest.raises(ConfigError, match="label_clip"):
        TrainConfig(task="rating", label_clip=0, data=dict(split="random"))


def test_rating_runs_resume_with_the_released_mean(tmp_path, monkeypatch, split, factors_on):
    from dpmt.train import checkpoint as ck

    real, calls = ck.Checkpoint.save, []

    def save(self, *a, **k):
        real(self, *a, **k)
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(ck.Checkpoint, "save", save)
    with pytest.raises(KeyboardInterrupt):
        dpmt.fit(split.train, _cfg(iterations=3), execution=QUIET, run_dir=tmp_path)
    monkeypatch.undo()
    import dpmt.train.defaults as defaults

    monkeypatch.setattr(defaults, "RATING_FACTORS_SCALE", 0.0)     # undone above: factors on
    # the interrupted run's secret noise key is in its private state; an uninterrupted run
    # from the same key is the reference
    import json

    with np.load(tmp_path / "checkpoint.npz") as z:
        src = NoiseSource.from_private_state(json.loads(str(z["noise"])))
    ref = dpmt.fit(split.train, _cfg(iterations=3), execution=QUIET, noise=src)
    m = dpmt.fit(split.train, _cfg(iterations=3), execution=QUIET, run_dir=tmp_path,
                 resume=True)
    assert m.label_offset == ref.label_offset
    np.testing.assert_allclose(m.item_embeddings, ref.item_embeddings, atol=1e-6)
    assert np.any(m.item_embeddings)                  # factors trained (factors_on)
    assert len(m.ledger) == len(ref.ledger)


@pytest.mark.parametrize("broken", [False, True])
def test_private_item_offsets_audit(broken):
    """Empirical audit of the item-offset release: a canary user with k ratings at +c on k
    items. Calibrated to ε = 1 the lower bound stays ≤ 1; with a tenth of the noise (a wrong
    sensitivity) the audit catches it."""
    import random

    from dpmt.audit import epsilon_lower_bound
    from dpmt.privacy import PlannedRelease, calibrate
    from dpmt.privacy.mechanisms import item_offsets_release, private_item_offsets

    rng = np.random.default_rng(0)
    k, c, m, n_users, trials = 4, 2.0, 12, 40, 1500
    users = np.repeat(np.arange(n_users), 3)
    items = rng.integers(k, m, len(users))                  # others never rate items 0..k-1
    labels = rng.uniform(-c, c, len(users))
    cu, ci = np.full(k, n_users), np.arange(k)              # the canary's k ratings
    r0 = item_offsets_release(k, c, 1.0)
    sigma = calibrate([PlannedRelease("item_offsets", r0.sensitivity, mechanism=r0.mechanism,
                                      coordinates=r0.coordinates, step=r0.step)],
                      1.0, 1e-5).releases[0].noise_std
    if broken:
        sigma /= 10
    counts = np.full(m, 10.0)                               # released counts: public here

    def scores(with_canary, seed0):
        u = np.r_[users, cu] if with_canary else users
        i = np.r_[items, ci] if with_canary else items
        y = np.r_[labels, np.full(k, c)] if with_canary else labels
        out = []
        for t in range(trials):
            b = private_item_offsets(y, u, i, m, counts, k=k, clip=c, noise_std=sigma,
                                     cap_rng=np.random.default_rng(seed0 + t),
                                     noise_rng=random.Random(seed0 + t))
            out.append(b[:k].sum())
        return np.array(out)

    bound = epsilon_lower_bound(scores(True, 0), scores(False, 10**6), 1e-5)
    if broken:
        assert bound.lower > 1.0, bound
    else:
        assert bound.lower <= 1.0, bound


# -- the user bias (issue 28): solved from a user's own ratings, never released --------------
@pytest.fixture(scope="module")
def biased_split():
    """Ratings with strong planted user biases (some users rate everything high, some low)."""
    rng = np.random.default_rng(3)
    n_u, n_i, per_user = 300, 80, 30
    ub, ib = rng.normal(0, 0.9, n_u), rng.normal(0, 0.5, n_i)
    users = np.repeat(np.arange(n_u), per_user)
    items = np.concatenate([rng.choice(n_i, per_user, replace=False) for _ in range(n_u)])
    r = np.clip(np.round(3.5 + ub[users] + ib[items] + rng.normal(0, 0.5, users.size)), 1, 5)
    rat = Ratings(user=users, item=items, value=r.astype(np.float32), user_ids=np.arange(n_u),
                  item_ids=np.arange(n_i), name="planted-user-bias", items_public=True)
    return random_split(rat, seed=1234)


def test_centre_by_user_is_each_users_shrunk_mean_and_keeps_the_clip():
    from dpmt.labels import centre_by_user, user_biases

    y = np.array([1.0, 2.0, -2.0, 0.5, 0.5], np.float32)
    users = np.array([0, 0, 1, 2, 2])
    b = user_biases(y, users, 4, reg=1.0)
    np.testing.assert_allclose(b, [3.0 / 3, -2.0 / 2, 1.0 / 3, 0.0])
    out, b2 = centre_by_user(y, users, 4, 1.0, clip=1.1)
    np.testing.assert_allclose(b2, b)
    np.testing.assert_allclose(out, np.clip(y - b[users], -1.1, 1.1), rtol=1e-6)
    # a user's bias reads that user's ratings only: others' ratings change nothing of it
    y2, users2 = np.r_[y, 9.0, -9.0], np.r_[users, 3, 3]
    np.testing.assert_allclose(user_biases(y2, users2, 4, 1.0)[:3], b[:3])


def test_the_solver_sees_bias_centred_labels_inside_the_clip(biased_split, seen_labels):
    """The user bias is taken out before the item step, and the clip applied after it, so
    |y| ≤ label_clip (the b-sensitivity's bound) holds with the bias on."""
    seen = seen_labels
    tr = biased_split.train
    dpmt.fit(tr, _cfg(label_clip=0.75, noise_seed=0), execution=QUIET)
    y = seen["labels"]
    assert np.abs(y).max() <= 0.75 + 1e-6
    # centred per user: each user's mean label is near 0 (it is not without the bias)
    per_user = np.bincount(tr.user, y, tr.n_users) / np.maximum(np.bincount(tr.user), 1)
    dpmt.fit(tr, _cfg(label_clip=0.75, noise_seed=0, user_bias=False), execution=QUIET)
    raw = np.bincount(tr.user, seen["labels"], tr.n_users) / np.maximum(np.bincount(tr.user), 1)
    assert np.abs(per_user).mean() < 0.5 * np.abs(raw).mean()


def test_the_user_bias_lowers_rmse_and_predict_agrees_with_the_evaluation(biased_split,
                                                                          factors_on):
    cfg = _cfg(epsilon=5.0, noise_seed=0)
    with_bias = dpmt.fit(biased_split.train, cfg, test=biased_split.test, execution=QUIET)
    without = dpmt.fit(biased_split.train, cfg.replace(user_bias=False), test=biased_split.test,
                       execution=QUIET)
    assert with_bias.metrics["overall"]["rmse"] < without.metrics["overall"]["rmse"] - 0.1
    # Model.predict (one user folded in) gives the evaluation's prediction for that user
    from dpmt.train.evaluate import evaluate_ratings

    tg, hist = biased_split.test.targets, biased_split.test.history
    j = int(tg.user[0])
    h_items, h_vals = hist.by_user.row(j)
    t_items = tg.item[tg.user == j]
    p = with_bias.predict(hist.item_ids[h_items], h_vals, tg.item_ids[t_items])
    one = biased_split.test.__class__(history=hist.select(hist.user == j),
                                      targets=tg.select(tg.user == j))
    m = evaluate_ratings(with_bias, biased_split.train, one)
    truth = tg.value[tg.user == j]
    assert m["overall"]["rmse"] == pytest.approx(float(np.sqrt(np.mean((p - truth) ** 2))),
                                                 rel=1e-4)


# -- the rating defaults (issue 28): the task's rule, the budget split, the bias model -------
@pytest.fixture
def factors_on(monkeypatch):
    """Private rating runs train their factors whatever n̂·ε (the rule's threshold at 0)."""
    import dpmt.train.defaults as defaults

    monkeypatch.setattr(defaults, "RATING_FACTORS_SCALE", 0.0)


def test_the_rating_rule_picks_its_settings_and_follows_replace():
    from dpmt.tasks import IMPLICIT_SETTINGS, PRIVACY_SETTINGS, RATING_NONPRIVATE

    def settings(c, names):                 # count_noise_ratio lives in c.privacy
        return {k: getattr(c.privacy if k in PRIVACY_SETTINGS else c, k) for k in names
                if k not in PRIVACY_SETTINGS or c.private}

    cfg = TrainConfig(task="rating", data=dict(split="random"), privacy=dict(epsilon=1.0))
    assert (cfg.solver, cfg.gravity, cfg.user_clip, cfg.iterations) == ("ssp", 0.0, 1.0, 2)
    assert (cfg.label_clip, cfg.effective_count_cap, cfg.privacy.count_noise_ratio) == \
        (1.0, 50, 0.15)
    five = cfg.replace(privacy=dict(epsilon=5.0))          # the rule re-applied by replace
    assert (five.label_clip, five.effective_count_cap) == (1.5, 100)
    nonpriv = cfg.replace(privacy=NonPrivate())
    assert settings(nonpriv, RATING_NONPRIVATE) == {
        k: v for k, v in RATING_NONPRIVATE.items() if k not in PRIVACY_SETTINGS}
    # a value given is kept, through replace too; the implicit task keeps its defaults
    mine = TrainConfig(task="rating", gravity=0.3, label_clip=2.0, data=dict(split="random"))
    one = mine.replace(privacy=dict(epsilon=1.0))
    assert (one.gravity, one.label_clip) == (0.3, 2.0)
    assert settings(TrainConfig(), IMPLICIT_SETTINGS) == IMPLICIT_SETTINGS
    # a PrivacyConfig given whole follows the task's rule, and is not changed in place
    p = PrivacyConfig(epsilon=1.0)
    assert cfg.replace(privacy=p).privacy.count_noise_ratio == 0.15
    assert TrainConfig(privacy=p).privacy.count_noise_ratio == 1.0
    assert p.count_noise_ratio is None
    assert TrainConfig().replace(task="rating", data=dict(split="random")).solver == "ssp"
    # a stored config holds the numbers it trained with
    assert TrainConfig.from_dict(cfg.stored()) == cfg


def test_the_plan_gives_the_once_only_releases_most_of_the_budget():
    """Private rating defaults: μ̂ at MEAN_NOISE_RATIO × the counts' noise multiplier, the
    counts and the offsets' sums at count_noise_ratio × the factors' — a wrong split or a
    wrong sensitivity would move these ratios — and the whole plan within ε."""
    from dpmt.train.plan import MEAN_NOISE_RATIO, make_plan

    cfg = TrainConfig(task="rating", data=dict(split="random"), privacy=dict(epsilon=5.0))
    plan = make_plan(cfg)
    z = lambda r: r.noise_std / r.sensitivity              # noqa: E731
    assert z(plan.mean_sum) == pytest.approx(MEAN_NOISE_RATIO * z(plan.counts), rel=1e-9)
    assert z(plan.mean_count) == pytest.approx(z(plan.mean_sum), rel=1e-9)
    assert z(plan.item_offsets) == pytest.approx(z(plan.counts), rel=1e-9)
    A, b = plan.iterations[0].item
    assert z(plan.counts) == pytest.approx(0.15 * z(b), rel=1e-6)
    assert plan.epsilon <= 5.0 * (1 + 1e-6)
    k = cfg.effective_count_cap
    assert plan.counts.coordinates == k + 1 and plan.item_offsets.coordinates == k == 100


def test_without_factors_the_planned_sweeps_are_charged_and_nothing_is_trained(split,
                                                                               monkeypatch):
    """Below the n̂·ε rule the model is its biases: V = 0, the item step never runs, and the
    ledger charges every planned release (so the guarantee is the plan's)."""
    import dpmt.train.loop as loop
    from dpmt.train.plan import make_plan

    calls = []
    real = loop.iterate

    def spy(run, t):
        run.steps.item_step = run.steps.item_step._replace(
            update=lambda *a, **k: calls.append(1)) if hasattr(
                run.steps.item_step, "_replace") else run.steps.item_step
        return real(run, t)

    monkeypatch.setattr(loop, "iterate", spy)
    cfg = TrainConfig(task="rating", data=dict(split="random"),
                      privacy=dict(epsilon=1.0, noise_seed=0))
    m = dpmt.fit(split.train, cfg, test=split.test, execution=QUIET)
    assert "factors = off" in m.auto_settings
    assert not np.any(m.item_embeddings) and not calls
    plan = make_plan(cfg, draws=None)
    assert len(m.ledger) == len(plan.releases()) >= 6
    assert m.epsilon == pytest.approx(plan.epsilon, rel=1e-3) and m.epsilon <= 1.0 + 1e-6
    # the bias model still beats the run's own private global mean
    from dpmt.train.evaluate import mean_rating_metrics

    gm = mean_rating_metrics(m.label_offset, split.train, split.test, {})["overall"]["rmse"]
    assert m.metrics["overall"]["rmse"] < gm - 0.05


def test_refitted_item_step_labels_stay_inside_the_clip(split, factors_on):
    """With factors on, the item step reads clip(r − μ̂ − b̂_i − b_j − ⟨w_j, f_i⟩, ±c) with
    the user's offsets refitted after the user step: still |y| ≤ c (the b-sensitivity's
    bound), whatever the offsets are."""
    from dpmt.train.loop import iterate
    from dpmt.train.training_run import setup

    cfg = TrainConfig(task="rating", dim=2,
                      label_clip=0.5, data=dict(split="random"),
                      privacy=dict(epsilon=5.0, noise_seed=0))
    run = setup(split.train, cfg, execution=QUIET)
    assert run.factors and run.base_labels is not None
    seen = []
    real = run.steps.item_step.update

    def update(*a, **k):
        seen.append(np.asarray(run.steps.labels))
        return real(*a, **k)

    run.steps.item_step = run.steps.item_step.__class__(run.steps.item_step.init, update)
    iterate(run, 0)
    y = seen[0]
    assert y.shape == (split.train.nnz,) and np.abs(y).max() <= 0.5 + 1e-6
    assert np.mean(np.isclose(np.abs(y), 0.5)) > 0.01                  # the clip is active
    assert not np.array_equal(y, np.asarray(run.user_labels))          # refitted, not first


def test_nonprivate_biased_als_beats_the_bias_model_on_planted_factors(split):
    """The planted ratings have a rank-2 taste: the rating defaults' non-private biased ALS
    must beat its own bias model (μ + b_i + b_j + slopes, iterations=0) clearly, and the
    bias model the global mean."""
    from dpmt.train.evaluate import mean_rating_metrics

    cfg = TrainConfig(task="rating", dim=4, data=dict(split="random"), privacy=NonPrivate())
    als = dpmt.fit(split.train, cfg, test=split.test, execution=QUIET)
    bias = dpmt.fit(split.train, cfg.replace(iterations=0), test=split.test, execution=QUIET)
    gm = mean_rating_metrics(float(np.mean(split.train.value)), split.train, split.test,
                             {})["overall"]["rmse"]
    a, b = als.metrics["overall"]["rmse"], bias.metrics["overall"]["rmse"]
    assert a < b - 0.05 and b < gm - 0.1, (a, b, gm)


def test_user_offsets_read_only_the_users_own_ratings():
    """b_j and w_j (joint DP: never released) of a user do not move when other users'
    ratings change; with no slopes they are the shrunk mean."""
    from types import SimpleNamespace

    from dpmt.labels import fit_user_offsets, item_statistics, user_step_labels

    rng = np.random.default_rng(0)
    users, items = np.repeat(np.arange(3), 6), np.tile(np.arange(6), 3)
    r = rng.uniform(1, 5, 18)
    F = item_statistics(rng.normal(0, 0.3, 6), rng.integers(1, 50, 6))
    cfg = SimpleNamespace(label_clip=1.0, rating_user_bias=True, user_offsets="slopes",
                          user_bias_reg=2.0)
    y, off, resid = user_step_labels(r, 3.5, users, items, 3, cfg, F)
    r2 = r.copy()
    r2[users != 0] = 5.0                                     # others' ratings changed
    _, off2, _ = user_step_labels(r2, 3.5, users, items, 3, cfg, F)
    assert off.bias[0] == off2.bias[0]
    np.testing.assert_array_equal(off.slopes[0], off2.slopes[0])
    assert np.abs(y).max() <= 1.0 + 1e-6
    plain = fit_user_offsets(r - 3.5, users, items, 3, 2.0)
    np.testing.assert_allclose(plain.bias, [(r[users == j] - 3.5).sum() / 8 for j in range(3)])


def test_shrunk_offsets_follow_the_data_or_the_popularity_prior():
    """Post-processing of the released sums: with little noise b̂_i ≈ the item means; with
    noise far above the sums, each item gets the popularity trend a + g·log ñ_i fitted to
    the released values, not its noisy sum (and not 0 when popular items rate higher)."""
    from dpmt.privacy.mechanisms import shrunk_offsets

    rng = np.random.default_rng(0)
    m = 400
    n = np.exp(rng.uniform(np.log(5), np.log(2000), m)).round()
    b = 0.2 * (np.log(n) - np.log(n).mean()) + rng.normal(0, 0.3, m)
    sums = n * b + rng.normal(0, np.sqrt(n))                 # per-rating spread ν = 1
    quiet = shrunk_offsets(sums, n, 1e-3, 2.0)
    big = n > 500
    assert np.abs(quiet[big] - b[big]).max() < 0.15
    # noise σ = 300: a rare item's sum is noise, but 400 items still show the trend
    loud = shrunk_offsets(sums + rng.normal(0, 300, m), n, 300.0, 2.0)
    trend = 0.2 * (np.log(n) - np.log(n).mean())
    rare = n < 50
    assert np.corrcoef(loud[rare], np.log(n[rare]))[0, 1] > 0.95   # the prior: a line
    assert np.abs(loud[rare] - trend[rare]).mean() < 0.5 * np.abs(trend[rare]).mean()
    # and the shrinkage helps: closer to the truth than the raw noisy means
    raw = (sums + rng.normal(0, 300, m)) / n
    assert np.mean((loud - b) ** 2) < 0.2 * np.mean((raw - b) ** 2)
