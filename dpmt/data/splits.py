"""Preprocessing (binarize, count filters, per-user caps) and train/validation/test splits.

Every function is deterministic given its ``seed`` (``np.random.default_rng(seed)``) and
vectorised: per-user random permutations come from one sort of (user, random key) pairs,
never from a Python loop over users.

A :class:`Split` holds ``train`` and two :class:`EvalSet` (``validation``, ``test``); all
Ratings in one split share one index space (same ``user_ids`` / ``item_ids``). Evaluation is
always: fold in each evaluation user from ``history``, rank all items, exclude ``history``,
compare with ``targets``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError, check_range

__all__ = [
    "EvalSet", "Split", "binarize", "filter_min_counts", "cap_per_user", "per_user_split",
    "heldout_users_split", "random_split",
]


@dataclasses.dataclass(frozen=True)
class EvalSet:
    """Evaluation data: fold in from ``history``, predict ``targets``.

    Both share the split's index space. ``history`` holds ratings of the evaluation users
    only (those with at least one target).
    """

    history: Ratings
    targets: Ratings

    @property
    def users(self) -> np.ndarray:
        """Sorted dense indices of the users with at least one target, int32."""
        return np.flatnonzero(self.targets.user_counts()).astype(np.int32)

    def __repr__(self) -> str:
        return (f"EvalSet(users={len(self.users)}, history={self.history.nnz}, "
                f"targets={self.targets.nnz})")


@dataclasses.dataclass(frozen=True)
class Split:
    """``train`` ratings plus ``validation`` and ``test`` evaluation sets."""

    train: Ratings
    validation: EvalSet
    test: EvalSet

    def __repr__(self) -> str:
        return (f"Split(users={self.train.n_users}, items={self.train.n_items}, "
                f"train={self.train.nnz}, validation={self.validation!r}, "
                f"test={self.test!r})")


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _random_ranks(user: np.ndarray, n_users: int, rng: np.random.Generator):
    """A uniformly random order of each user's ratings.

    Returns (rank int64 (nnz,), count int64 (nnz,)): ``rank`` is 0..n_u-1 within the user,
    a random permutation per user; ``count`` is the user's number of ratings n_u.

    One ``np.sort`` of packed int64 keys ``user | random bits | position`` (a float
    argsort is ~4x slower on 20M entries). With 20+ random bits, ties are rare (about
    n_u²/2^(bits+1) pairs per user) and broken by position.
    """
    n = len(user)
    counts = np.bincount(user, minlength=n_users)
    bu = max(1, int(n_users - 1).bit_length())
    bi = max(1, int(n - 1).bit_length())
    br = 63 - bu - bi
    if br >= 20:
        key = user.astype(np.int64) << (br + bi)
        key |= rng.integers(0, 1 << br, n, dtype=np.int64) << bi
        key |= np.arange(n, dtype=np.int64)
        key.sort()
        order = key & ((1 << bi) - 1)
    else:                                                # huge inputs: float keys
        order = np.argsort(user + rng.random(n), kind="stable")
    start = np.cumsum(counts) - counts
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - start[user[order]]
    return rank, counts[user]


def _check_fractions(fractions) -> tuple[float, float, float]:
    try:
        f = tuple(float(x) for x in fractions)
    except (TypeError, ValueError):
        raise ConfigError(f"fractions must be three numbers (got {fractions!r})") from None
    if len(f) != 3 or any(not math.isfinite(x) or x < 0 for x in f):
        raise ConfigError(f"fractions must be three non-negative numbers (train, validation, "
                          f"test), got {fractions!r}")
    if abs(sum(f) - 1.0) > 1e-6:
        raise ConfigError(f"fractions must sum to 1 (got {fractions!r}, sum {sum(f):g})")
    if f[0] <= 0:
        raise ConfigError(f"the train fraction must be > 0 (got {fractions!r})")
    return f


def _eval_set(train: Ratings, targets: Ratings) -> EvalSet:
    has = targets.user_counts() > 0
    return EvalSet(history=train.select(has[train.user], name=f"{targets.name}-history"),
                   targets=targets)


def _nonempty(r: Ratings, what: str) -> None:
    if r.nnz == 0:
        raise DataError(f"{what}: the input has no ratings")


# ----------------------------------------------------------------------------------------
# preprocessing
# ----------------------------------------------------------------------------------------
def binarize(r: Ratings, threshold: float = 3.5) -> Ratings:
    """Keep ratings ``> threshold`` as positives with value 1.0; drop the rest.

    The index space is kept (users/items left without ratings stay in ``user_ids`` /
    ``item_ids``; :func:`filter_min_counts` or ``Ratings.compact`` drops them).
    """
    check_range("threshold", threshold)
    _nonempty(r, f"binarize(threshold={threshold:g})")
    keep = r.value > threshold
    if not keep.any():
        raise DataError(f"binarize(threshold={threshold:g}) kept no ratings: all {r.nnz} "
                        f"ratings of {r.name!r} are <= {threshold:g} (max "
                        f"{float(r.value.max()):g}); lower the threshold")
    out = r.select(keep)
    return out.with_values(np.ones(out.nnz, np.float32))


def filter_min_counts(r: Ratings, min_user: int = 1, min_item: int = 1,
                      max_rounds: int = 100) -> Ratings:
    """Drop users with < ``min_user`` and items with < ``min_item`` ratings, then compact.

    Iterates to a fixed point (dropping items can push users below ``min_user`` and back),
    so every remaining user and item meets its minimum; at most ``max_rounds`` rounds.
    With ``min_item <= 1`` (as in the ML-20M protocol, users with >= 5 positives) this is a
    single pass, identical to Liang et al. (2018). Returns a compacted Ratings (new indices).
    """
    check_range("min_user", min_user, low=0, integer=True)
    check_range("min_item", min_item, low=0, integer=True)
    check_range("max_rounds", max_rounds, low=1, integer=True)
    what = f"filter_min_counts(min_user={min_user}, min_item={min_item})"
    _nonempty(r, what)
    mask = np.ones(r.nnz, bool)
    for _ in range(int(max_rounds)):
        uc = np.bincount(r.user[mask], minlength=r.n_users)
        ic = np.bincount(r.item[mask], minlength=r.n_items)
        new = mask & (uc[r.user] >= min_user) & (ic[r.item] >= min_item)
        if not new.any():
            raise DataError(
                f"{what} removed every rating of {r.name!r} ({r.nnz} ratings; the most "
                f"active user has {int(r.user_counts().max())}, the most rated item "
                f"{int(r.item_counts().max())}); lower the minimums")
        if new.sum() == mask.sum():
            break
        mask = new
    return r.select(mask).compact()


def cap_per_user(r: Ratings, cap: int, seed: int = 0) -> Ratings:
    """At most ``cap`` ratings per user, a uniform random subset (kept in input order).

    Users with <= ``cap`` ratings keep all of them. The index space is kept.
    """
    check_range("cap", cap, low=1, integer=True)
    if r.nnz == 0:
        return r
    rank, _ = _random_ranks(r.user, r.n_users, np.random.default_rng(seed))
    return r.select(np.flatnonzero(rank < cap))


# ----------------------------------------------------------------------------------------
# splits
# ----------------------------------------------------------------------------------------
def per_user_split(r: Ratings, fractions=(0.8, 0.1, 0.1), seed: int = 0) -> Split:
    """Split each user's ratings at random into train / validation / test.

    For a user with n ratings the boundaries are ``floor(n·f_train + U)`` and
    ``floor(n·(f_train + f_val) + U)`` with one U ~ Uniform[0, 1) per user (randomised
    rounding): each part's expected size is exactly n·f, the realised size is within 1 of
    it, and the overall fractions match closely. Every user keeps at least one training
    rating (so they can be folded in); a user with a single rating is train-only, and small
    users often have no validation or test rating. ``EvalSet.history`` is the user's
    training ratings. Index space unchanged.
    """
    f = _check_fractions(fractions)
    _nonempty(r, "per_user_split")
    rng = np.random.default_rng(seed)
    rank, n = _random_ranks(r.user, r.n_users, rng)
    offset = rng.random(r.n_users)[r.user]
    b1 = np.clip(np.floor(n * f[0] + offset), 1, n)
    b2 = np.clip(np.floor(n * (f[0] + f[1]) + offset), b1, n)
    train = r.select(rank < b1, name=f"{r.name}-train")
    val = r.select((rank >= b1) & (rank < b2), name=f"{r.name}-validation")
    test = r.select(rank >= b2, name=f"{r.name}-test")
    return Split(train, _eval_set(train, val), _eval_set(train, test))


def random_split(r: Ratings, fractions=(0.8, 0.1, 0.1), seed: int = 1234) -> Split:
    """Random split of the ratings themselves (ML-10M RMSE protocol: 80/10/10, seed 1234).

    Sizes are ``round(nnz·f)`` for train and validation, the rest test. Unlike
    :func:`per_user_split`, an evaluation user may have no training rating (cold start).
    ``EvalSet.history`` is the training ratings of the evaluation users.
    """
    f = _check_fractions(fractions)
    _nonempty(r, "random_split")
    perm = np.random.default_rng(seed).permutation(r.nnz)
    n1 = int(round(r.nnz * f[0]))
    n2 = min(r.nnz, n1 + int(round(r.nnz * f[1])))
    part = np.empty(r.nnz, np.int8)
    part[perm[:n1]], part[perm[n1:n2]], part[perm[n2:]] = 0, 1, 2
    train = r.select(part == 0, name=f"{r.name}-train")
    val = r.select(part == 1, name=f"{r.name}-validation")
    test = r.select(part == 2, name=f"{r.name}-test")
    return Split(train, _eval_set(train, val), _eval_set(train, test))


def heldout_users_split(r: Ratings, n_validation: int, n_test: int, seed: int = 98765,
                        history_fraction: float = 0.8) -> Split:
    """Held-out-users protocol of Liang et al. (2018), as used for ML-20M Recall@20.

    1. Users with ratings are shuffled (``default_rng(seed).permutation``); the last
       ``n_test`` are test users, the ``n_validation`` before them validation users, the
       rest train users.
    2. Only items rated by some train user are kept (the item index space is compacted to
       them); held-out ratings of other items are dropped.
    3. Each held-out user's remaining n items are split at random: ``floor((1 -
       history_fraction)·n)`` targets, the rest history. Users with fewer than 5 items
       under the default 0.8 get no targets (as in the reference) and are left out of the
       EvalSet (their history is dropped too).

    ``train`` holds only train users' ratings; held-out users never appear in it. Users
    are compacted to those with ratings in the input.
    """
    check_range("n_validation", n_validation, low=0, integer=True)
    check_range("n_test", n_test, low=0, integer=True)
    check_range("history_fraction", history_fraction, low=0, high=1)
    _nonempty(r, "heldout_users_split")
    r = r.compact()
    n_users = r.n_users
    n_val, n_test = int(n_validation), int(n_test)
    if n_val + n_test >= n_users:
        raise ConfigError(f"n_validation + n_test = {n_val + n_test} must be smaller than the "
                          f"number of users with ratings ({n_users}), so some train users "
                          f"remain")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n_users)
    role = np.zeros(n_users, np.int8)                    # 0 train, 1 validation, 2 test
    n_train = n_users - n_val - n_test
    role[perm[n_train:n_train + n_val]] = 1
    role[perm[n_train + n_val:]] = 2
    rating_role = role[r.user]
    train_items = np.bincount(r.item[rating_role == 0], minlength=r.n_items) > 0
    keep = train_items[r.item]
    item_map = np.cumsum(train_items) - 1
    rr = Ratings(user=r.user[keep], item=item_map[r.item[keep]], value=r.value[keep],
                 user_ids=r.user_ids, item_ids=r.item_ids[train_items],
                 timestamp=None if r.timestamp is None else r.timestamp[keep], name=r.name)
    rating_role = rating_role[keep]
    rank, n = _random_ranks(rr.user, rr.n_users, rng)
    n_targets = np.floor((1.0 - history_fraction) * n + 1e-9)
    is_target = rank < n_targets
    train = rr.select(rating_role == 0, name=f"{r.name}-train")

    def held(k: int, label: str) -> EvalSet:
        mine = rating_role == k
        targets = rr.select(mine & is_target, name=f"{r.name}-{label}")
        has = (targets.user_counts() > 0)[rr.user]       # users with at least one target
        return EvalSet(history=rr.select(mine & ~is_target & has,
                                         name=f"{r.name}-{label}-history"),
                       targets=targets)

    return Split(train, held(1, "validation"), held(2, "test"))
