"""Preprocessing and splits: determinism, disjointness, fractions, protocol invariants."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import (
    Ratings,
    binarize,
    cap_ratings_per_user,
    filter_min_counts,
    heldout_users_split,
    make_synthetic,
    per_user_split,
    random_split,
)
from dpmt.errors import ConfigError, DataError
from dpmt.privacy import cap_per_user as privacy_cap_per_user


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


def test_cap_ratings_per_user(r):
    c = cap_ratings_per_user(r, 10, seed=1)
    uc = r.user_counts()
    np.testing.assert_array_equal(c.user_counts(), np.minimum(uc, 10))
    assert pairs(c) <= pairs(r)
    assert np.all(np.diff(np.flatnonzero(np.isin(r.timestamp, c.timestamp))) > 0)
    np.testing.assert_array_equal(c.timestamp, cap_ratings_per_user(r, 10, seed=1).timestamp)
    assert not np.array_equal(c.timestamp, cap_ratings_per_user(r, 10, seed=2).timestamp)


def test_cap_ratings_per_user_is_uniform():
    # one user with 6 ratings, cap 2: each rating kept with probability 1/3
    r = Ratings.from_raw(np.zeros(6), np.arange(6), np.ones(6))
    hits = np.zeros(6)
    for s in range(600):
        hits[cap_ratings_per_user(r, 2, seed=s).item] += 1
    assert hits.sum() == 1200
    assert np.all(np.abs(hits / 600 - 1 / 3) < 0.08)


@pytest.mark.parametrize("cap", [1, 3, 10])
@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_cap_ratings_per_user_keeps_what_the_privacy_mechanism_keeps(r, cap, seed):
    """One capping: the Ratings-level preprocessing draws exactly the numbers of the
    mechanism the privacy argument rests on, dpmt.privacy.cap_per_user, given
    default_rng(seed)."""
    keep = privacy_cap_per_user(r.user, cap, np.random.default_rng(seed))
    c = cap_ratings_per_user(r, cap, seed=seed)
    np.testing.assert_array_equal(c.user, r.user[keep])
    np.testing.assert_array_equal(c.item, r.item[keep])
    np.testing.assert_array_equal(c.timestamp, r.timestamp[keep])


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
    n = r.nnz                                        # sizes are binomial: within 4 sd
    for part, f in ((s.train, 0.8), (s.validation.targets, 0.1), (s.test.targets, 0.1)):
        assert abs(part.nnz - f * n) < 4 * np.sqrt(n * f * (1 - f)), (part.nnz, f * n)
    assert s.train.nnz + s.validation.targets.nnz + s.test.targets.nnz == r.nnz
    assert not pairs(s.train) & pairs(s.test.targets)
    assert pairs(s.train) | pairs(s.validation.targets) | pairs(s.test.targets) == pairs(r)
    assert pairs(random_split(r, seed=1234).test.targets) == pairs(s.test.targets)
    assert pairs(random_split(r, seed=1235).test.targets) != pairs(s.test.targets)
    for x in (s.train, s.validation.targets, s.test.targets):
        assert x.user_ids is r.user_ids and x.item_ids is r.item_ids


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
    # roles by hash: the held-out counts are binomial with means 60 and 70
    n = r.n_users
    assert abs(len(val_u) - 60) < 4 * np.sqrt(60) and abs(len(test_u) - 70) < 4 * np.sqrt(70)
    assert len(train_u) + len(val_u) + len(test_u) == n       # every user (>= 5) has targets
    # the item index space is kept: not cut down to the items train users rated
    for x in (s.train, s.validation.targets, s.validation.history, s.test.targets):
        assert x.n_items == r.n_items and x.item_ids is s.train.item_ids
    np.testing.assert_array_equal(s.train.item_ids, r.item_ids)
    assert s.train.items_public == r.items_public
    # each held-out user: floor(0.2 n) targets, the rest history
    for ev in (s.validation, s.test):
        t, h = ev.targets.user_counts(), ev.history.user_counts()
        n = t + h
        has = n > 0
        np.testing.assert_array_equal(t[has], np.floor(0.2 * n[has] + 1e-9))
        assert not pairs(ev.targets) & pairs(ev.history)
    # all ratings of held-out users are accounted for (items rated by no train user too)
    held = pairs(s.test.targets) | pairs(s.test.history)
    assert held == {(u, i) for u, i in pairs(r) if u in test_u}


def test_heldout_users_split_keeps_n_items():
    """Finding 3 (issue 24): the item space must not depend on which users are in the data."""
    r = binarize(rated(n_users=200, n_items=2000, seed=6))     # many items rated once
    s = heldout_users_split(r, n_validation=30, n_test=30, seed=1)
    assert s.train.n_items == r.n_items
    assert (s.train.item_counts() == 0).any()                  # some items only held out
    pub = Ratings.from_raw(r.user_ids[r.user], r.item_ids[r.item], r.value,
                           items=np.arange(4000, 8000))        # a public catalogue
    sp = heldout_users_split(pub, validation_fraction=0.1, test_fraction=0.1, seed=1)
    assert sp.train.n_items == 4000 and sp.train.items_public
    assert sp.test.targets.items_public and sp.validation.history.items_public


def test_heldout_users_split_fractions_api():
    r = filter_min_counts(binarize(rated(n_users=600, seed=3)), min_user=5)
    s = heldout_users_split(r, validation_fraction=0.1, test_fraction=0.2, seed=4)
    n = r.n_users
    nv, nt = len(s.validation.users), len(s.test.users)
    assert abs(nv - 0.1 * n) < 4 * np.sqrt(0.1 * n) and abs(nt - 0.2 * n) < 4 * np.sqrt(0.2 * n)
    a = heldout_users_split(r, n_validation=60, n_test=120, seed=4)
    b = heldout_users_split(r, validation_fraction=60 / n, test_fraction=120 / n, seed=4)
    assert pairs(a.test.targets) == pairs(b.test.targets)      # counts = fractions of users
    with pytest.raises(ConfigError, match="not both"):
        heldout_users_split(r, 10, 10, validation_fraction=0.1)
    with pytest.raises(ConfigError, match="smaller than 1"):
        heldout_users_split(r, validation_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ConfigError, match="give n_validation and n_test"):
        heldout_users_split(r)


def test_heldout_users_split_determinism():
    r = filter_min_counts(binarize(rated(seed=2)), min_user=5)
    a = heldout_users_split(r, 20, 20, seed=98765)
    b = heldout_users_split(r, 20, 20, seed=98765)
    c = heldout_users_split(r, 20, 20, seed=1)
    assert pairs(a.test.targets) == pairs(b.test.targets)
    assert pairs(a.test.targets) != pairs(c.test.targets)
    assert pairs(a.train) == pairs(b.train) != pairs(c.train)


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
def test_filter_min_counts_keeps_the_item_space_for_a_user_filter(r):
    f = filter_min_counts(r, min_user=40)
    assert f.n_users < r.n_users and f.item_ids is r.item_ids
    pub = Ratings.from_raw(r.user_ids[r.user], r.item_ids[r.item], r.value,
                           items=np.arange(5000, 5200))
    fp = filter_min_counts(pub, min_user=40)
    assert fp.n_items == 200 and fp.items_public
    assert not filter_min_counts(pub, min_user=40, min_item=2).items_public


def test_split_hashes_are_uniform_and_key_dependent():
    from dpmt.data.splits import _id_hashes, _split_key, _unit
    ids = np.arange(20000)
    u = _unit(_id_hashes(ids, _split_key(0, "x")))
    assert np.all((u >= 0) & (u < 1)) and abs(u.mean() - 0.5) < 0.01
    np.testing.assert_array_less(np.abs(np.histogram(u, 10, (0, 1))[0] - 2000), 200)
    v = _unit(_id_hashes(ids, _split_key(1, "x")))
    assert abs(np.corrcoef(u, v)[0, 1]) < 0.03
    # a raw id hashes alike as a number or as its text
    np.testing.assert_array_equal(_id_hashes(np.array([7, 12]), b"k" * 32),
                                  _id_hashes(np.array(["7", "12"]), b"k" * 32))


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
