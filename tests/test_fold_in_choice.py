"""The private choice of the fold-in (issue 28, ``TrainConfig(fold_in="private")``): the
sensitivity of the released sums and the neighbour-stable split, the noise of the release,
its place in the plan and the ledger, the model it gives (save/load, scorer), resume, and the
config checks. Small data only."""

import functools
import math
from unittest import mock

import jax
import numpy as np
import pytest

import dpmt
from dpmt.config import NonPrivate, TrainConfig, route
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError
from dpmt.scoring import make_scorer
from dpmt.solvers import noise as normal_sampler
from dpmt.train import fold_in_choice as fc
from dpmt.train.plan import make_plan, sampler_draws

from _interrupt import fit_interrupted_after_first_iteration

EX = dpmt.ExecutionConfig(progress=False)
K = fc.N_CANDIDATES


@functools.lru_cache(maxsize=None)
def _data():
    return dpmt.data.make_synthetic(300, 80, 5000, seed=5)


def _sums(V, cfg, data, key, prior=None, share=1.0):
    return fc.recall_sums(V, prior, cfg.user_clip, fc.candidates(cfg.reg, cfg.gravity), data,
                          key, share)


def _with_user(r: Ratings, items) -> Ratings:
    """``r`` plus one more user (the last index) who rated ``items``."""
    items = np.asarray(items, np.int32)
    return Ratings(user=np.r_[r.user, np.full(items.size, r.n_users, np.int32)],
                   item=np.r_[r.item, items], value=np.r_[r.value, np.ones(items.size,
                                                                         np.float32)],
                   user_ids=np.arange(r.n_users + 1), item_ids=r.item_ids)


# -- (1) sensitivity: one user moves S by a vector of [0, 1]^K ------------------------------
def test_one_user_moves_the_sums_by_at_most_one_per_candidate():
    data = _data()
    rng = np.random.default_rng(0)
    cfg = TrainConfig(dim=4, reg=3.0, gravity=0.5)
    V = rng.normal(size=(data.n_items, 4)).astype(np.float32)
    S = _sums(V, cfg, data, 12345)
    assert S.shape == (K,) and np.all(S >= 0) and np.all(S <= data.n_users)
    biggest = 0.0
    for n_items in (1, 5, 20, 60, 80):            # up to every item: one user, many ratings
        new = rng.choice(data.n_items, n_items, replace=False)
        S2 = _sums(V, cfg, _with_user(data, new), 12345)
        diff = S2 - S
        assert np.all(diff >= -1e-9) and np.all(diff <= 1 + 1e-9), n_items
        assert np.linalg.norm(diff) <= fc.sensitivity() + 1e-9
        biggest = max(biggest, float(diff.max()))
    assert biggest > 0                             # the added user does count
    assert fc.sensitivity() == math.sqrt(K) == 3.0


def test_a_users_split_is_a_function_of_the_key_and_their_own_ratings():
    data = _data()
    mask = fc.target_mask(data, key=7)
    share = mask.mean()
    assert abs(share - fc.TARGET_SHARE) < 0.02    # ~20% of 5000 ratings
    # another user added (any index order): nobody else's targets change
    plus = _with_user(data, [1, 2, 3, 40])
    np.testing.assert_array_equal(fc.target_mask(plus, key=7)[:len(data.user)], mask)
    # the same user's ratings listed in another order: the same targets
    perm = np.random.default_rng(1).permutation(len(data.user))
    shuffled = Ratings(user=data.user[perm], item=data.item[perm], value=data.value[perm],
                       user_ids=data.user_ids, item_ids=data.item_ids)
    np.testing.assert_array_equal(fc.target_mask(shuffled, key=7), mask[perm])
    # another key, another split
    assert np.mean(fc.target_mask(data, key=8) != mask) > 0.2


def test_the_fold_in_is_the_models_and_the_recall_its_ranking_with_the_history_excluded():
    data = _data()
    cfg = TrainConfig(dim=4, reg=3.0, gravity=0.5, popularity_prior=0.5)
    V = np.random.default_rng(2).normal(size=(data.n_items, 4)).astype(np.float32) * 0.3
    counts = np.bincount(data.item, minlength=data.n_items).astype(np.float64)
    mask = fc.target_mask(data, key=3)
    targets = {j: data.item[mask & (data.user == j)] for j in range(data.n_users)}
    hists = [data.item[~mask & (data.user == j)] for j in range(data.n_users)]
    for lam, a0 in ((3.0, 0.5), (30.0, 0.0), (1.0, 2.0)):
        scorer = make_scorer(V, cfg.replace(fold_in_reg=lam, fold_in_gravity=a0), counts)
        U_model = scorer.fold_in(hists, [np.ones(len(h), np.float32) for h in hists])
        L = max(len(h) for h in hists)
        rows = np.array([np.r_[h, -np.ones(L - len(h), int)] for h in hists])
        lens = np.array([len(h) for h in hists])
        U = fc.fold_in(V, rows, lens, lam, a0, cfg.user_clip)
        np.testing.assert_allclose(U, U_model, rtol=2e-4, atol=1e-6)
        assert np.any(np.linalg.norm(U, axis=1) >= cfg.user_clip * (1 - 1e-9))  # C bites
        # the sum over users of the model's own Recall@20, history excluded
        want = 0.0
        s_all = scorer.scores(U_model.astype(np.float32), prior=scorer.prior())
        for j in range(data.n_users):
            if len(targets[j]) == 0:
                continue
            s = s_all[j].astype(np.float64)
            s[hists[j]] = -np.inf
            top = np.argsort(-s, kind="stable")[:20]
            want += len(np.intersect1d(top, targets[j])) / min(20, len(targets[j]))
        got = fc.recall_sums(V, scorer.prior(), cfg.user_clip, [(lam, a0)], data, 3)
        # float32 scores from another solve: a near-tie at rank 20 may flip one user
        assert got[0] == pytest.approx(want, abs=1.01), (lam, a0)


@pytest.mark.parametrize("m", [fc.BLOCKS_FROM_ITEMS - 1, fc.BLOCKS_FROM_ITEMS, 5003])
def test_the_cut_off_is_the_partitions_on_wide_catalogues_with_ties_and_history(m):
    """The block-maxima cut-off equals numpy's partition bit for bit (a lower bound that were
    too high would drop hits; one too low only costs time): rows with a popularity slope,
    ties at rank 20, rows that are mostly history (−inf); and with a NaN score."""
    rng = np.random.default_rng(m)
    n, k = 64, fc.RECALL_AT
    s = (rng.normal(size=(n, 8)) @ rng.normal(size=(8, m))).astype(np.float32)
    s += np.linspace(3, 0, m, dtype=np.float32)                 # popular items first
    s[rng.random((n, m)) < 0.1] = -np.inf                        # excluded history
    s[0] = np.round(s[0])                                        # many ties
    s[1, : m - 25] = -np.inf                                     # 25 items left to rank
    s[2, ::3] = -np.inf                                          # whole blocks excluded
    want = np.partition(s, m - k, axis=1)[:, m - k]
    np.testing.assert_array_equal(fc._kth_largest(s, k), want)
    nan = s.copy()
    nan[3, 7] = np.nan                     # no bound from a NaN maximum: the partition's
    np.testing.assert_array_equal(fc._kth_largest(nan, k),
                                  np.partition(nan, m - k, axis=1)[:, m - k])
    t_row = np.repeat(np.arange(n), 5)
    t_item = rng.integers(0, m, size=5 * n)
    hit = s[t_row, t_item] >= want[t_row]
    np.testing.assert_array_equal(fc._hits(s, t_row, t_item),
                                  np.bincount(t_row[hit], minlength=n))


def test_scored_users_are_a_keyed_function_of_their_own_ratings():
    data = _data()
    keep = fc.scored_users(data, key=5, share=0.3)
    assert abs(keep.mean() - 0.3) < 0.08
    plus = _with_user(data, [1, 2, 3])
    np.testing.assert_array_equal(fc.scored_users(plus, key=5, share=0.3)[:-1], keep)
    assert fc.scored_users(data, key=5, share=1.0).all()
    # fewer users, a smaller sum: each user still adds at most 1 per candidate
    cfg = TrainConfig(dim=4, reg=3.0, gravity=0.5)
    V = np.random.default_rng(4).normal(size=(data.n_items, 4)).astype(np.float32)
    assert np.all(_sums(V, cfg, data, 9, share=0.3) < _sums(V, cfg, data, 9))


# -- (2) the release's noise ---------------------------------------------------------------
def test_fit_adds_the_plans_noise_to_the_exact_sums_and_charges_it_once():
    cfg = TrainConfig(fold_in="private", dim=4, iterations=2,
                      privacy=dict(epsilon=3.0, noise_seed=11))
    seen = {}
    real_sums, real_choose = fc.recall_sums, fc.choose

    def sums_spy(*a, **k):
        seen["exact"] = real_sums(*a, **k)
        return seen["exact"]

    def choose_spy(s):
        seen["noisy"] = np.array(s)
        return real_choose(s)

    with mock.patch.object(fc, "recall_sums", sums_spy), \
            mock.patch.object(fc, "choose", choose_spy):
        model = dpmt.fit(_data(), cfg, execution=EX)
    plan = make_plan(cfg, draws=sampler_draws(cfg, _data().n_items))
    sigma = plan.fold_in.noise_std
    assert sigma > 0
    src = dpmt.privacy.randomness.NoiseSource.from_seed(11)
    z = np.asarray(normal_sampler.normal(src.jax_key("fold_in_choice/noise"), (K,)),
                   np.float64)
    np.testing.assert_allclose(seen["noisy"] - seen["exact"], sigma * z, rtol=1e-9,
                               atol=1e-9)
    assert [r.name for r in model.ledger.releases].count("fold_in_choice") == 1
    assert model.ledger.releases[-1] == plan.fold_in
    lam, a0 = fc.candidates(3.0, 0.5)[int(np.argmax(seen["noisy"]))]
    assert (model.config.fold_in_reg, model.config.fold_in_gravity) == (lam, a0)


def test_the_sampler_gives_the_release_unit_normals():
    z = np.concatenate([np.asarray(normal_sampler.normal(jax.random.PRNGKey(s), (K,)))
                        for s in range(2000)])
    assert z.std() == pytest.approx(1.0, abs=0.03) and abs(z.mean()) < 0.03


# -- (3) the plan and the ledger ------------------------------------------------------------
def test_plan_has_the_release_last_at_its_ratio_and_the_total_is_calibrated():
    cfg = TrainConfig(fold_in="private", dim=4, iterations=2, privacy=dict(epsilon=2.0))
    plan = make_plan(cfg)
    names = [r.name for r in plan.releases()]
    assert names == ["item_counts", "iter0/gramian", "iter0/gd", "iter1/gramian", "iter1/gd",
                     "fold_in_choice"]
    assert plan.fold_in.sensitivity == pytest.approx(3.0)
    z_gd = plan.iterations[0].item[0].noise_multiplier
    assert plan.fold_in.noise_multiplier == pytest.approx(0.5 * z_gd, rel=1e-6)
    base = make_plan(TrainConfig(fold_in="training", dim=4, iterations=2,
                                 privacy=dict(epsilon=2.0)))
    # the release is paid from the same ε: more noise on the training's releases
    assert z_gd > base.iterations[0].item[0].noise_multiplier
    assert plan.epsilon <= 2.0 * (1 + 1e-6)
    model = dpmt.fit(_data(), cfg, execution=EX)
    assert [r.name for r in model.ledger.releases] == names
    assert model.ledger.epsilon() <= 2.0 * (1 + 1e-6)
    assert "fold_in_choice" in model.ledger.summary()
    assert "fold_in" in model.auto_settings


def test_training_fold_in_plans_nothing_more():
    for kw in (dict(), dict(solver="ssp", weights="adaptive")):
        kw = dict(dim=4, iterations=2, accountant="rdp", **kw)
        plain = make_plan(TrainConfig(**route(dict(fold_in="training", **kw))))
        assert plain.fold_in is None
        chosen = make_plan(TrainConfig(**route(dict(fold_in="private", **kw))))
        assert [r.name for r in chosen.releases()][:-1] == [r.name for r in plain.releases()]


# -- (4) the model -------------------------------------------------------------------------
def test_the_model_folds_in_with_the_choice_and_keeps_it_on_save(tmp_path):
    data = _data()
    cfg = TrainConfig(fold_in="private", dim=4, iterations=2, privacy=NonPrivate())
    seen = []
    real_choose = fc.choose

    def sums(*a, **k):                    # candidate 4 wins on the training users
        seen.append(np.eye(K)[4])
        return seen[-1]

    def choose(s):
        seen.append(np.array(s))
        return real_choose(s)

    with mock.patch.object(fc, "recall_sums", sums), mock.patch.object(fc, "choose", choose):
        model = dpmt.fit(data, cfg, execution=EX)
    # non-private: no release, no noise: the argmax of the exact sums (here candidate 4)
    np.testing.assert_array_equal(seen[1], seen[0])
    lam, a0 = model.config.fold_in_reg, model.config.fold_in_gravity
    assert (lam, a0) == fc.candidates(model.config.reg, model.config.gravity)[4]
    V = model.item_embeddings
    train_cfg = model.config.replace(fold_in_reg=None, fold_in_gravity=None)
    # the scorer folds in with (λ, α0) of the choice, not training's
    by_hand = make_scorer(V, train_cfg.replace(reg=lam, gravity=a0))
    np.testing.assert_allclose(model.scorer.user_embeddings(data),
                               by_hand.user_embeddings(data), rtol=1e-5, atol=1e-6)
    model.save(tmp_path / "m")
    back = dpmt.Model.load(tmp_path / "m")
    assert (back.config.fold_in_reg, back.config.fold_in_gravity) == (lam, a0)
    assert back.config.reg == model.config.reg            # training's λ is kept apart


def test_a_fold_in_set_by_hand_is_used_by_the_scorer():
    data = _data()
    V = np.random.default_rng(3).normal(size=(data.n_items, 4)).astype(np.float32)
    cfg = TrainConfig(dim=4, reg=3.0, gravity=0.5)
    a = make_scorer(V, cfg.replace(fold_in_reg=30.0, fold_in_gravity=0.0)).user_embeddings(data)
    b = make_scorer(V, cfg.replace(reg=30.0, gravity=0.0)).user_embeddings(data)
    c = make_scorer(V, cfg).user_embeddings(data)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


def test_resume_releases_it_once(tmp_path):
    cfg = TrainConfig(fold_in="private", dim=4, iterations=3,
                      privacy=dict(epsilon=3.0, noise_seed=5))
    ref = dpmt.fit(_data(), cfg, execution=EX)
    fit_interrupted_after_first_iteration(_data(), cfg, tmp_path, EX)
    resumed = dpmt.fit(_data(), cfg, execution=EX, run_dir=tmp_path, resume=True)
    assert [r.name for r in resumed.ledger.releases] == [r.name for r in ref.ledger.releases]
    assert [r.name for r in resumed.ledger.releases].count("fold_in_choice") == 1
    assert resumed.epsilon == pytest.approx(ref.epsilon)
    assert (resumed.config.fold_in_reg, resumed.config.fold_in_gravity) == \
        (ref.config.fold_in_reg, ref.config.fold_in_gravity)


# -- (5) the default's rule and config checks -------------------------------------------
def test_auto_chooses_on_private_implicit_runs_from_the_target_epsilon():
    from dpmt.config import FOLD_IN_EPSILON

    assert TrainConfig().fold_in == "auto" and FOLD_IN_EPSILON == 3.0
    assert TrainConfig(privacy=dict(epsilon=3.0)).chooses_fold_in
    assert TrainConfig().chooses_fold_in                          # ε = 5
    assert not TrainConfig(privacy=dict(epsilon=2.9)).chooses_fold_in
    assert not TrainConfig(privacy=NonPrivate()).chooses_fold_in
    assert not TrainConfig(task="rating", data=dict(split="random"),
                           privacy=dict(epsilon=20.0)).chooses_fold_in
    assert not TrainConfig(fold_in="training", privacy=dict(epsilon=20.0)).chooses_fold_in
    assert TrainConfig(fold_in="private", privacy=dict(epsilon=1.0)).chooses_fold_in
    assert TrainConfig(fold_in="private", privacy=NonPrivate()).chooses_fold_in
    # a config stored before version 7 folds in with training's λ, α0, as it was trained
    from dpmt.config_schema import CONFIG_VERSION

    d = {k: v for k, v in TrainConfig().stored().items() if k != "fold_in"}
    assert CONFIG_VERSION == 7
    assert TrainConfig.from_dict({**d, "config_version": 6}).fold_in == "training"
    assert TrainConfig.from_dict({**d, "config_version": 7}).fold_in == "auto"


@pytest.mark.parametrize("kw, match", [
    (dict(fold_in="best"), "fold_in"),
    (dict(fold_in_reg=0.0), "fold_in_reg"),
    (dict(fold_in_gravity=-1.0), "fold_in_gravity"),
    (dict(fold_in="private", task="rating", data=dict(split="random")), "implicit task"),
    (dict(privacy=dict(fold_in_noise_ratio=0.0)), "fold_in_noise_ratio"),
])
def test_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**kw)
