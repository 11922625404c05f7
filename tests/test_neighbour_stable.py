"""Neighbour-stable splits (issue 24, finding 6): adding or removing one user changes nothing
about anyone else — no other user's role (train / validation / test) and no other rating's
part. Otherwise a guarantee for "one user" would not hold for the dataset: removing a user
would move others in or out of training.

Also finding 3: the held-out-users split keeps the item index space (it is not cut down to
the items the train users rated, which depends on who is in the data); and finding 4: the
streamed-ratings histogram (``dpmt stream``) moves by at most √k in L2 when one user is
added or removed, even a user who re-rates one item many times."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import Ratings, heldout_users_split, per_user_split, random_split
from dpmt.online.ratings_stream import private_item_counts


def _raw(n_users=240, n_items=150, seed=0, min_per_user=5):
    rng = np.random.default_rng(seed)
    u, i = [], []
    for user in range(n_users):                              # test data only
        k = int(rng.integers(min_per_user, 40))
        u.append(np.full(k, 10_000 + 7 * user))
        i.append(rng.choice(n_items, k, replace=False) + 500)
    u, i = np.concatenate(u), np.concatenate(i)
    return u, i, rng.integers(1, 6, len(u)).astype(np.float32)


def _ratings(u, i, v, drop=None, extra=None):
    keep = np.ones(len(u), bool) if drop is None else u != drop
    u, i, v = u[keep], i[keep], v[keep]
    if extra is not None:                                    # a new user with some ratings
        eu, ei = extra
        u, i = np.r_[u, eu], np.r_[i, ei]
        v = np.r_[v, np.ones(len(eu), np.float32)]
    return Ratings.from_raw(u, i, v, name="n")


def _pairs(r: Ratings):
    return zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist())


def _parts(split) -> dict:
    """{(raw user, raw item): the set of parts it is in} over every Ratings of the split
    (a per-user or random split's history is the user's training ratings)."""
    out = {}
    for name, r in (("train", split.train),
                    ("validation-targets", split.validation.targets),
                    ("validation-history", split.validation.history),
                    ("test-targets", split.test.targets),
                    ("test-history", split.test.history)):
        for p in _pairs(r):
            out.setdefault(p, set()).add(name)
    return {p: frozenset(v) for p, v in out.items()}


def _roles(split) -> dict:
    """{raw user: role} (train / validation / test) of a held-out-users split."""
    out = {}
    for role, rs in (("train", [split.train]),
                     ("validation", [split.validation.targets, split.validation.history]),
                     ("test", [split.test.targets, split.test.history])):
        for r in rs:
            for uid in r.user_ids[np.unique(r.user)].tolist():
                assert out.setdefault(uid, role) == role
    return out


def _without(d: dict, user) -> dict:
    return {k: v for k, v in d.items() if (k[0] if isinstance(k, tuple) else k) != user}


SPLITS = {
    "per_user_split": lambda r: per_user_split(r, (0.6, 0.2, 0.2), seed=3),
    "random_split": lambda r: random_split(r, (0.6, 0.2, 0.2), seed=3),
    "heldout_users_split": lambda r: heldout_users_split(
        r, validation_fraction=0.15, test_fraction=0.2, seed=3),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_removing_one_user_changes_nothing_for_anyone_else(name):
    u, i, v = _raw()
    split = SPLITS[name]
    full = split(_ratings(u, i, v))
    parts = _parts(full)
    assert len(set(parts.values())) >= 3
    users = np.unique(u)
    for drop in users[[0, 1, 17, 60, 121, len(users) - 1]].tolist():
        less = split(_ratings(u, i, v, drop=drop))
        assert _parts(less) == _without(parts, drop), f"removing user {drop}"
        if name == "heldout_users_split":                  # every other user's role
            assert _roles(less) == _without(_roles(full), drop), f"removing user {drop}"


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_adding_one_user_changes_nothing_for_anyone_else(name):
    u, i, v = _raw(seed=1)
    split = SPLITS[name]
    base = split(_ratings(u, i, v))
    more = split(_ratings(u, i, v, extra=(np.full(30, 99_999), np.arange(30) + 500)))
    assert _without(_parts(more), 99_999) == _parts(base)
    if name == "heldout_users_split":
        assert _without(_roles(more), 99_999) == _roles(base)


def test_heldout_roles_depend_on_the_user_alone_with_counts():
    """With the int API (numbers of users → fractions of the users) a user can change role
    only if their hash lies between the old and the new threshold (n/N vs n/(N−1));
    today's permutation moved users wholesale."""
    from dpmt.data.splits import _id_hashes, _split_key, _unit

    u, i, v = _raw(n_users=300, seed=2)
    full = heldout_users_split(_ratings(u, i, v), 30, 40, seed=9)
    roles = _roles(full)
    n = len(roles)
    users = np.unique(u)
    for drop in users[[0, 5, 150, 299]].tolist():
        less = _roles(heldout_users_split(_ratings(u, i, v, drop=drop), 30, 40, seed=9))
        moved = [x for x in less if less[x] != roles[x]]
        if moved:
            h = _unit(_id_hashes(np.array(moved), _split_key(9, "heldout/role")))
            edges = [(40 / n, 40 / (n - 1)), (70 / n, 70 / (n - 1))]
            assert all(any(a <= x < b for a, b in edges) for x in h), (drop, moved)
        assert len(moved) <= 2


def test_heldout_users_split_keeps_the_item_space():
    u, i, v = _raw(n_items=4000, seed=4)                      # many items rated once
    r = _ratings(u, i, v)
    s = heldout_users_split(r, validation_fraction=0.2, test_fraction=0.3, seed=0)
    for x in (s.train, s.validation.targets, s.validation.history, s.test.targets,
              s.test.history):
        assert x.n_items == r.n_items
        np.testing.assert_array_equal(x.item_ids, r.item_ids)
    # items only held-out users rated are still there, with their ratings
    only_held = (s.train.item_counts() == 0) & (r.item_counts() > 0)
    assert only_held.any()
    held = set(_pairs(s.test.targets)) | set(_pairs(s.test.history)) \
        | set(_pairs(s.validation.targets)) | set(_pairs(s.validation.history))
    assert {p for p in _pairs(r) if p[1] in set(r.item_ids[only_held].tolist())} <= held


def test_the_split_seed_changes_the_split_but_not_its_stability():
    u, i, v = _raw(seed=5)
    a = _roles(heldout_users_split(_ratings(u, i, v), validation_fraction=0.2,
                                   test_fraction=0.2, seed=1))
    b = _roles(heldout_users_split(_ratings(u, i, v), validation_fraction=0.2,
                                   test_fraction=0.2, seed=2))
    assert a.keys() == b.keys() and a != b


# -- the streamed-ratings histogram (finding 4) ----------------------------------------------
def _rerating_data(n_repeats: int):
    """Users 0..29 rate 3 distinct items each once; user 30 re-rates item 7 n_repeats times
    (a stream of re-ratings) and rates items 1, 2 once."""
    u = np.r_[np.repeat(np.arange(30), 3), np.full(n_repeats, 30), [30, 30]]
    i = np.r_[np.tile([0, 3, 5], 30), np.full(n_repeats, 7), [1, 2]]
    ts = np.arange(len(u))
    return Ratings(user=u, item=i, value=np.full(len(u), 4.0), user_ids=np.arange(31),
                   item_ids=np.arange(10), timestamp=ts)


def test_a_rerating_user_moves_the_histogram_by_at_most_sqrt_k():
    """Finding 4 (issue 24): the √k sensitivity holds only for distinct (user, item) pairs.
    One user who re-rates one item 50 times must move the capped histogram by ≤ √k in L2
    (before the fix: by k on that item)."""
    k = 4
    with_user = _rerating_data(50)
    keep = np.asarray(with_user.user) != 30
    without = with_user.select(keep)
    for seed in range(5):
        # noise ~1e-9: the released counts are the capped counts (others are under the cap)
        a, info = private_item_counts(with_user, cap_k=k, noise_multiplier=1e-9, seed=seed)
        b, _ = private_item_counts(without, cap_k=k, noise_multiplier=1e-9, seed=seed)
        diff = a - b
        assert np.linalg.norm(diff) <= np.sqrt(k) + 1e-6, diff
        assert info["l2_sensitivity"] == pytest.approx(np.sqrt(k))
        assert round(diff[7]) == 1 and round(diff[1]) == 1 and round(diff[2]) == 1
        assert info["distinct_pairs"] == 30 * 3 + 3
