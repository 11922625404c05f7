"""Preprocessing and splits: determinism, disjointness, fractions, protocol invariants."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import (
    Ratings,
    binarize,
    cap_per_user,
    filter_min_counts,
    heldout_users_split,
    make_synthetic,
    per_user_split,
    random_split,
)
from dpmt.errors import ConfigError, DataError


def pairs(r: Ratings) -> set:
    return set(zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist()))


def rated(n_users=300, n_items=120, per_user=None, seed=0) -> Ratings:
    """Explicit ratings 1..5 (half stars), distinct pairs, raw ids offset from indices."""
    rng = np.random.default_rng(seed)
    per_user = rng.integers(1, 60, n_users) if per_user is None else per_user
    users, items = [], []
    for u, k in enumerate(per_user):                          # test data only
        users.append(np.full(k, u))
        items.append(rng.choice(n_items, k, replace=False))
    u = np.concatenate(users)
    i = np.concatenate(items)
    v = rng.integers(2, 11, len(u)) / 2
    return Ratings.from_raw(u + 1000, i + 5000, v, timestamp=np.arange(len(u)), name="t")


@pytest.fixture(scope="module")
def r():
    return rated()


# ---------------------------------------------------------------------------------------
# preprocessing
# ---------------------------------------------------------------------------------------
def test_binarize(r):
    b = binarize(r, 3.5)
    assert b.nnz == int((r.value > 3.5).sum()) and np.all(b.value == 1.0)
    assert pairs(b) == {p for p, v in zip(zip(r.user_ids[r.user].tolist(),
                                              r.item_ids[r.item].tolist()), r.value) if v > 3.5}
    assert b.n_users == r.n_users and b.n_items == r.n_items    # index space kept
    assert binarize(r, 4.0).nnz == int((r.value > 4.0).sum())   # strict
    with pytest.raises(DataError, match=r"binarize\(threshold=5\) kept no ratings.*max 5"):
        binarize(r, 5)


def test_filter_min_counts_fixed_point():
    # user 0 has 2 items (a, b); item b is rated only by user 0; item a by users 0, 1, 2.
    # min_user=2, min_item=2: pass 1 drops (0, b) -> user 0 drops to 1 -> pass 2 drops it.
    u = np.array([0, 0, 1, 1, 2, 2])
    i = np.array([0, 1, 0, 2, 0, 2])
    r = Ratings.from_raw(u, i, np.ones(6))
    f = filter_min_counts(r, min_user=2, min_item=2)
    assert pairs(f) == {(1, 0), (1, 2), (2, 0), (2, 2)}
    assert f.n_users == 2 and f.n_items == 2                    # compacted
    assert f.user_counts().min() >= 2 and f.item_counts().min() >= 2
    one = filter_min_counts(r, min_user=2, min_item=2, max_rounds=1)
    assert (0, 0) in pairs(one)                                 # a single pass is not enough


def test_filter_min_counts_empty_names_filter(r):
    with pytest.raises(DataError, match=r"filter_min_counts\(min_user=1000, min_item=1\) "
                                        r"removed every rating"):
        filter_min_counts(r, min_user=1000)


def test_cap_per_user(r):
    c = cap_per_user(r, 10, seed=1)
    uc = r.user_counts()
    np.testing.assert_array_equal(c.user_counts(), np.minimum(uc, 10))
    assert pairs(c) <= pairs(r)
    assert np.all(np.diff(np.flatnonzero(np.isin(r.timestamp, c.timestamp))) > 0)
    np.testing.assert_array_equal(c.timestamp, cap_per_user(r, 10, seed=1).timestamp)
    assert not np.array_equal(c.timestamp, cap_per_user(r, 10, seed=2).timestamp)


def test_cap_per_user_is_uniform():
    # one user with 6 ratings, cap 2: each rating kept with probability 1/3
    r = Ratings.from_raw(np.zeros(6), np.arange(6), np.ones(6))
    hits = np.zeros(6)
    for s in range(600):
        hits[cap_per_user(r, 2, seed=s).item] += 1
    assert hits.sum() == 1200
    assert np.all(np.abs(hits / 600 - 1 / 3) < 0.08)


# ---------------------------------------------------------------------------------------
# per-user split
# ---------------------------------------------------------------------------------------
def test_per_user_split_partition_and_determinism(r):
    s = per_user_split(r, (0.8, 0.1, 0.1), seed=0)
    tr, va, te = pairs(s.train), pairs(s.validation.targets), pairs(s.test.targets)
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert tr | va | te == pairs(r)
    for x in (s.train, s.validation.history, s.validation.targets, s.test.targets):
        assert x.user_ids is r.user_ids and x.item_ids is r.item_ids
    s2 = per_user_split(r, (0.8, 0.1, 0.1), seed=0)
    assert pairs(s2.test.targets) == te
    assert pairs(per_user_split(r, (0.8, 0.1, 0.1), seed=1).test.targets) != te


def test_per_user_split_fractions_and_small_users():
    r = rated(n_users=400, per_user=np.r_[np.ones(50, int), np.full(350, 40)])
    s = per_user_split(r, (0.6, 0.3, 0.1), seed=0)
    # every user keeps >= 1 training rating; single-rating users are train-only
    assert np.all(s.train.user_counts() >= 1)
    assert s.validation.targets.user_counts()[:50].sum() == 0
    big = np.arange(50, 400)
    n = 40 * 350
    for part, f in ((s.train, 0.6), (s.validation.targets, 0.3), (s.test.targets, 0.1)):
        counts = part.user_counts()[big]
        assert abs(counts.sum() / n - f) < 0.01
        assert np.all(np.abs(counts - 40 * f) < 1 + 1e-9)          # within 1 per user


def test_per_user_split_history_is_train_of_eval_users(r):
    s = per_user_split(r, seed=3)
    users = set(s.test.users.tolist())
    assert set(np.unique(s.test.history.user).tolist()) == users
    assert pairs(s.test.history) == {p for p, u in zip(
        zip(s.train.user_ids[s.train.user].tolist(), s.train.item_ids[s.train.item].tolist()),
        s.train.user) if u in users}


@pytest.mark.parametrize("fr", [(0.5, 0.5), (0.8, 0.3, 0.1), (0, 0.5, 0.5), (1, -0.5, 0.5)])
def test_bad_fractions(r, fr):
    with pytest.raises(ConfigError, match="fraction"):
        per_user_split(r, fr)


def test_random_split(r):
    s = random_split(r, (0.8, 0.1, 0.1), seed=1234)
    assert s.train.nnz == round(0.8 * r.nnz)
    assert s.validation.targets.nnz == round(0.1 * r.nnz)
    assert s.train.nnz + s.validation.targets.nnz + s.test.targets.nnz == r.nnz
    assert not pairs(s.train) & pairs(s.test.targets)
    assert pairs(random_split(r, seed=1234).test.targets) == pairs(s.test.targets)


# ---------------------------------------------------------------------------------------
# held-out users split (Liang et al. 2018)
# ---------------------------------------------------------------------------------------
def test_heldout_users_split_invariants():
    r = binarize(rated(n_users=500, n_items=3000, seed=5))     # many rare items
    r = filter_min_counts(r, min_user=5)
    s = heldout_users_split(r, n_validation=60, n_test=70, seed=98765)

    def uid(x):
        return set(x.user_ids[x.user].tolist())

    train_u = uid(s.train)
    val_u = uid(s.validation.targets) | uid(s.validation.history)
    test_u = uid(s.test.targets) | uid(s.test.history)
    assert not train_u & val_u and not train_u & test_u and not val_u & test_u
    assert len(train_u) == r.n_users - 130
    assert len(val_u) <= 60 and len(test_u) <= 70 and len(test_u) > 50
    # items restricted to (and compacted to) items seen in training
    assert np.all(s.train.item_counts() > 0)
    assert s.test.targets.n_items == s.train.n_items < r.n_items
    # each held-out user: floor(0.2 n) targets, the rest history
    for ev in (s.validation, s.test):
        t, h = ev.targets.user_counts(), ev.history.user_counts()
        n = t + h
        has = n > 0
        np.testing.assert_array_equal(t[has], np.floor(0.2 * n[has] + 1e-9))
        assert not pairs(ev.targets) & pairs(ev.history)
    # all ratings of held-out users on train items are accounted for
    held = pairs(s.test.targets) | pairs(s.test.history)
    train_items = set(s.train.item_ids.tolist())
    expected = {(u, i) for u, i in pairs(r) if u in test_u and i in train_items}
    assert held == expected


def test_heldout_users_split_determinism():
    r = filter_min_counts(binarize(rated(seed=2)), min_user=5)
    a = heldout_users_split(r, 20, 20, seed=98765)
    b = heldout_users_split(r, 20, 20, seed=98765)
    c = heldout_users_split(r, 20, 20, seed=1)
    assert pairs(a.test.targets) == pairs(b.test.targets)
    assert pairs(a.test.targets) != pairs(c.test.targets)


def test_heldout_users_split_too_many_heldout(r):
    with pytest.raises(ConfigError, match="must be smaller than the number of users"):
        heldout_users_split(r, r.n_users, 1)


def test_splits_on_synthetic_at_scale():
    r = make_synthetic(n_users=3000, n_items=500, n_interactions=60_000, seed=0)
    s = per_user_split(r, seed=0)
    assert s.train.nnz + s.validation.targets.nnz + s.test.targets.nnz == r.nnz
    h = heldout_users_split(filter_min_counts(r, min_user=5), 300, 300)
    assert h.test.targets.nnz > 0 and len(h.test.users) <= 300


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def test_random_ranks_are_permutations_per_user():
    from dpmt.data.splits import _random_ranks
    user = np.random.default_rng(0).integers(0, 50, 5000).astype(np.int32)
    rank, n = _random_ranks(user, 60, np.random.default_rng(1))
    order = np.lexsort((rank, user))
    counts = np.bincount(user, minlength=60)
    start = np.cumsum(counts) - counts
    np.testing.assert_array_equal(rank[order], np.arange(5000) - start[user[order]])
    np.testing.assert_array_equal(n, counts[user])


def test_stable_argsort_int_matches_numpy():
    from dpmt.data.ratings import stable_argsort_int
    rng = np.random.default_rng(0)
    for keys in (rng.integers(0, 30, 10_000).astype(np.int32), rng.integers(0, 2**40, 500),
                 rng.integers(-5, 5, 300), np.zeros(0, np.int64)):
        np.testing.assert_array_equal(stable_argsort_int(keys),
                                      np.argsort(keys, kind="stable"))
