"""Preprocessing (binarize, count filters, per-user caps) and train/validation/test splits.

Splits are **neighbour-stable**: a user's role (train / validation / test, in
:func:`heldout_users_split`) is decided by a keyed hash of that user's raw id alone, and
which part each of a user's ratings goes to (:func:`per_user_split`, :func:`random_split`,
the history/target split of held-out users) by keyed hashes of (raw user id, raw item id)
of that user's own ratings. Adding or removing one user therefore changes nothing about
anyone else's role or any other user's ratings' parts (``tests/test_neighbour_stable.py``),
so a guarantee stated for a training set holds for the dataset, whichever users it holds.

The key is derived from the ``seed`` argument. The split seed is **public**: knowing it
tells which part a given user (or rating) *would* be in if present, never whether anyone is
present; it is never used for noise. Hashes: BLAKE2b keyed with SHA-256(seed, purpose) over
each distinct raw id (64 bits), combined per rating by the murmur3 64-bit finaliser
(vectorised); ids compare as text (``7`` and ``"7"`` hash alike).

A :class:`Split` holds ``train`` and two :class:`EvalSet` (``validation``, ``test``); all
Ratings in one split share one index space (same ``user_ids`` / ``item_ids``). Evaluation is
always: fold in each evaluation user from ``history``, rank all items, exclude ``history``,
compare with ``targets``.

:func:`cap_ratings_per_user` (preprocessing, not a split) draws its subsets from
``default_rng(seed)``: the ratings the privacy mechanism
:func:`dpmt.privacy.mechanisms.cap_per_user` keeps with that generator (both are
:func:`cap_mask`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError, check_range

__all__ = [
    "EvalSet", "Split", "binarize", "filter_min_counts", "cap_mask", "cap_ratings_per_user",
    "per_user_split",
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


def _ranks_by_bits(user: np.ndarray, n_users: int, bits: np.ndarray):
    """Each user's ratings ordered by ``bits`` (uint64 (nnz,), e.g. keyed hashes).

    Returns (rank int64 (nnz,), count int64 (nnz,)) as :func:`_random_ranks`. One
    ``np.sort`` of packed int64 keys ``user | top bits | position`` (a lexsort is ~4x slower
    on 20M entries). With 20+ bits, ties are rare (about n_u²/2^(bits+1) pairs per user) and
    broken by position (the input order, which selecting other users' ratings keeps).
    """
    n = len(user)
    counts = np.bincount(user, minlength=n_users)
    bu = max(1, int(n_users - 1).bit_length())
    bi = max(1, int(n - 1).bit_length())
    br = 63 - bu - bi
    if br >= 20:
        key = user.astype(np.int64) << (br + bi)
        key |= (bits >> np.uint64(64 - br)).astype(np.int64) << bi
        key |= np.arange(n, dtype=np.int64)
        key.sort()
        order = key & ((1 << bi) - 1)
    else:                                                # huge inputs
        order = np.lexsort((np.arange(n), bits, user))
    start = np.cumsum(counts) - counts
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - start[user[order]]
    return rank, counts[user]


# -- keyed hashes (neighbour-stable splits) ---------------------------------------------------
def _split_key(seed, purpose: str) -> bytes:
    """The 32-byte hash key of ``purpose`` for split seed ``seed`` (public)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"a split seed is an integer (got {seed!r})")
    return hashlib.sha256(b"dpmt-split\x00" + str(int(seed)).encode() + b"\x00"
                          + purpose.encode()).digest()


def _id_text(v) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).encode("utf-8", "surrogatepass")


def _id_hashes(ids: np.ndarray, key: bytes) -> np.ndarray:
    """BLAKE2b-64 keyed with ``key`` of every raw id (as text), uint64 (len(ids),): a
    function of the key and that id alone."""
    base = hashlib.blake2b(key=key, digest_size=8)
    out = np.empty(len(ids), np.uint64)
    for j, v in enumerate(np.asarray(ids).tolist()):
        h = base.copy()
        h.update(_id_text(v))
        out[j] = int.from_bytes(h.digest(), "little")
    return out


def _fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finaliser (a bijection with full avalanche), uint64 in place."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xC4CEB9FE1A85EC53)
        x ^= x >> np.uint64(33)
    return x


def _pair_hashes(r: Ratings, seed, purpose: str) -> np.ndarray:
    """A 64-bit hash of (key, raw user id, raw item id) of every rating, uint64 (nnz,)."""
    hu = _id_hashes(r.user_ids, _split_key(seed, purpose + "/user"))
    hi = _id_hashes(r.item_ids, _split_key(seed, purpose + "/item"))
    with np.errstate(over="ignore"):
        x = hu[r.user] ^ _fmix64(hi[r.item] * np.uint64(0x9E3779B97F4A7C15))
    return _fmix64(x)


def _unit(h: np.ndarray) -> np.ndarray:
    """uint64 hashes → float64 uniform in [0, 1) (the top 53 bits)."""
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


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
    single pass, identical to Liang et al. (2018), and each user is kept or dropped on their
    own count alone.

    Returns a Ratings compacted to the remaining users. With ``min_item <= 1`` the item index
    space (``item_ids``, ``items_public``) is kept as it is: an item left without ratings
    stays, since dropping it would make the item space depend on which users are in the data.
    With ``min_item >= 2`` items are dropped by their counts, so the item space is compacted
    too and depends on the data (``items_public`` False).
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
    return r.select(mask).compact(keep_items=min_item <= 1)


def keyed_uniforms(r: Ratings, seed: int, purpose: str) -> np.ndarray:
    """A key in [0, 1) per rating, float64 (nnz,): a keyed hash of (seed, purpose, raw user
    id, raw item id), so the same rating gets the same key whichever process holds it."""
    return _unit(_pair_hashes(r, int(seed), purpose))


def keyed_cap_mask(r: Ratings, k: int, seed: int) -> np.ndarray:
    """Boolean mask keeping at most ``k`` ratings per user: the ``k`` with the smallest keyed
    hash of (seed, raw user id, raw item id). A function of each user's own ratings and the
    seed only — not of the other users, their order or which process holds them — so every
    split of the users over processes caps alike (sharded data, :mod:`dpmt.data.shards`).
    With a secret seed (the run's noise source) it is a uniform random sample per user."""
    check_range("k", k, low=1, integer=True)
    if r.nnz == 0:
        return np.zeros(0, bool)
    rank, _ = _ranks_by_bits(r.user, r.n_users, _pair_hashes(r, int(seed), "cap"))
    return rank < k


def cap_mask(user_ids, k: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask keeping a uniform random sample of at most ``k`` ratings per user: one
    random key per rating from ``rng``, ranked within each user (each user's sample reads
    only that user's ratings). The one capping of dpmt: the private counts, the rating mean
    and item offsets (:mod:`dpmt.privacy.mechanisms`), the online histogram and
    :func:`cap_ratings_per_user` all use it (the privacy mechanism
    :func:`dpmt.privacy.mechanisms.cap_per_user` is this mask)."""
    check_range("k", k, low=1, integer=True)
    user_ids = np.asarray(user_ids)
    order = np.lexsort((rng.random(len(user_ids)), user_ids))
    u_sorted = user_ids[order]
    starts = np.r_[0, np.flatnonzero(np.diff(u_sorted)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(u_sorted)]))
    keep = np.empty(len(order), dtype=bool)
    keep[order] = (np.arange(len(order)) - run_start) < k
    return keep


def cap_ratings_per_user(r: Ratings, cap: int, seed: int = 0) -> Ratings:
    """The :class:`Ratings` keeping at most ``cap`` ratings per user, a uniform random subset
    (kept in input order): the ratings that :func:`dpmt.privacy.mechanisms.cap_per_user`
    keeps with ``default_rng(seed)`` — both are :func:`cap_mask` with that generator (this
    module, in the data layer, cannot import the privacy layer).

    Users with <= ``cap`` ratings keep all of them. The index space is kept.
    """
    check_range("cap", cap, low=1, integer=True)
    if r.nnz == 0:
        return r
    return r.select(np.flatnonzero(cap_mask(r.user, cap, np.random.default_rng(seed))))


# ----------------------------------------------------------------------------------------
# splits
# ----------------------------------------------------------------------------------------
def per_user_split(r: Ratings, fractions=(0.8, 0.1, 0.1), seed: int = 0) -> Split:
    """Split each user's ratings into train / validation / test, neighbour-stably.

    A user's ratings are ordered by a keyed hash of (seed, raw user id, raw item id) and cut
    at ``floor(n·f_train + U)`` and ``floor(n·(f_train + f_val) + U)``, with U in [0, 1) a
    keyed hash of (seed, raw user id) (randomised rounding): each part's expected size is
    n·f, the realised size is within 1 of it, and the overall fractions match closely. So
    which part a rating goes to depends on its user's own ratings and the (public) seed
    only: adding or removing a user changes nothing for anyone else. Every user keeps at
    least one training rating (so they can be folded in); a user with a single rating is
    train-only, and small users often have no validation or test rating.
    ``EvalSet.history`` is the user's training ratings. Index space unchanged.
    """
    f = _check_fractions(fractions)
    _nonempty(r, "per_user_split")
    rank, n = _ranks_by_bits(r.user, r.n_users, _pair_hashes(r, seed, "per-user/order"))
    offset = _unit(_id_hashes(r.user_ids, _split_key(seed, "per-user/offset")))[r.user]
    b1 = np.clip(np.floor(n * f[0] + offset), 1, n)
    b2 = np.clip(np.floor(n * (f[0] + f[1]) + offset), b1, n)
    train = r.select(rank < b1, name=f"{r.name}-train")
    val = r.select((rank >= b1) & (rank < b2), name=f"{r.name}-validation")
    test = r.select(rank >= b2, name=f"{r.name}-test")
    return Split(train, _eval_set(train, val), _eval_set(train, test))


def random_split(r: Ratings, fractions=(0.8, 0.1, 0.1), seed: int = 1234) -> Split:
    """Random split of the ratings themselves (ML-10M RMSE protocol: 80/10/10, seed 1234).

    Each rating goes to train, validation or test by a keyed hash of (seed, raw user id,
    raw item id) in [0, 1) against the cumulative ``fractions``: independently per rating,
    so the part sizes are random (binomial, expected ``nnz·f``) and no rating's part depends
    on any other rating (neighbour-stable). Unlike :func:`per_user_split`, an evaluation
    user may have no training rating (cold start). ``EvalSet.history`` is the training
    ratings of the evaluation users.
    """
    f = _check_fractions(fractions)
    _nonempty(r, "random_split")
    u = _unit(_pair_hashes(r, seed, "random"))
    part = (u >= f[0]).astype(np.int8) + (u >= f[0] + f[1])
    train = r.select(part == 0, name=f"{r.name}-train")
    val = r.select(part == 1, name=f"{r.name}-validation")
    test = r.select(part == 2, name=f"{r.name}-test")
    return Split(train, _eval_set(train, val), _eval_set(train, test))


def _heldout_fractions(n_validation, n_test, validation_fraction, test_fraction,
                       n_users: int) -> tuple[float, float]:
    counts = n_validation is not None or n_test is not None
    fracs = validation_fraction is not None or test_fraction is not None
    if counts and fracs:
        raise ConfigError("give n_validation and n_test, or validation_fraction and "
                          "test_fraction, not both")
    if fracs:
        fv = 0.0 if validation_fraction is None else validation_fraction
        ft = 0.0 if test_fraction is None else test_fraction
        check_range("validation_fraction", fv, low=0, high=1)
        check_range("test_fraction", ft, low=0, high=1)
        if fv + ft >= 1:
            raise ConfigError(f"validation_fraction + test_fraction = {fv + ft:g} must be "
                              "smaller than 1, so some train users remain")
        return float(fv), float(ft)
    if n_validation is None or n_test is None:
        raise ConfigError("give n_validation and n_test (numbers of users), or "
                          "validation_fraction and test_fraction")
    check_range("n_validation", n_validation, low=0, integer=True)
    check_range("n_test", n_test, low=0, integer=True)
    n_val, n_te = int(n_validation), int(n_test)
    if n_val + n_te >= n_users:
        raise ConfigError(f"n_validation + n_test = {n_val + n_te} must be smaller than the "
                          f"number of users with ratings ({n_users}), so some train users "
                          f"remain")
    return n_val / n_users, n_te / n_users


def heldout_users_split(r: Ratings, n_validation: int | None = None,
                        n_test: int | None = None, seed: int = 98765,
                        history_fraction: float = 0.8, *,
                        validation_fraction: float | None = None,
                        test_fraction: float | None = None) -> Split:
    """Held-out-users protocol of Liang et al. (2018), as used for ML-20M Recall@20, made
    neighbour-stable.

    1. Each user with ratings gets a keyed hash h of (seed, raw user id) alone, uniform in
       [0, 1): test user if ``h < test_fraction``, validation user if ``h <
       test_fraction + validation_fraction``, train user otherwise. Adding or removing a
       user changes no one else's role. The numbers of validation and test users are
       therefore random (binomial with those means), not fixed.
       ``n_validation`` / ``n_test`` (numbers of users, the former API) are converted to the
       fractions ``n / n_users``; realised counts are then random with these means, and the
       thresholds read the number of users, so a user whose hash lies within about
       ``n / n_users²`` of a threshold can change role when the number of users changes. For
       exact neighbour stability give ``validation_fraction`` and ``test_fraction``.
    2. The item index space is kept as it is (``item_ids``, ``items_public``): it is never
       cut down to the items train users rated, which would make it depend on the data.
    3. Each held-out user's n ratings are ordered by a keyed hash of (seed, raw user id, raw
       item id): the first ``floor((1 - history_fraction)·n)`` are targets, the rest
       history. Users with fewer than 5 ratings under the default 0.8 get no targets (as in
       the reference) and are left out of the EvalSet (their history is dropped too).

    ``train`` holds only train users' ratings; held-out users never appear in it. Users
    are compacted to those with ratings in the input (items are not).
    """
    check_range("history_fraction", history_fraction, low=0, high=1)
    _nonempty(r, "heldout_users_split")
    r = r.compact(keep_items=True)
    fv, ft = _heldout_fractions(n_validation, n_test, validation_fraction, test_fraction,
                                r.n_users)
    h = _unit(_id_hashes(r.user_ids, _split_key(seed, "heldout/role")))
    role = np.where(h < ft, 2, np.where(h < ft + fv, 1, 0)).astype(np.int8)
    if not (role == 0).any():
        raise DataError(f"heldout_users_split: none of the {r.n_users} users drew the train "
                        f"role (validation fraction {fv:g}, test fraction {ft:g}); lower the "
                        f"held-out fractions or use more users")
    rating_role = role[r.user]
    rank, n = _ranks_by_bits(r.user, r.n_users, _pair_hashes(r, seed, "heldout/target"))
    n_targets = np.floor((1.0 - history_fraction) * n + 1e-9)
    is_target = rank < n_targets
    train = r.select(rating_role == 0, name=f"{r.name}-train")

    def held(k: int, label: str) -> EvalSet:
        mine = rating_role == k
        targets = r.select(mine & is_target, name=f"{r.name}-{label}")
        has = (targets.user_counts() > 0)[r.user]        # users with at least one target
        return EvalSet(history=r.select(mine & ~is_target & has,
                                        name=f"{r.name}-{label}-history"),
                       targets=targets)

    return Split(train, held(1, "validation"), held(2, "test"))
