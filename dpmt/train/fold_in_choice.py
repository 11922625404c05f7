"""A private choice of the fold-in's ridge λ and gravity α0 (``fold_in="private"``, and
``"auto"`` at ε ≥ 3: the default; issue 28).

A user's embedding is solved from the released V and the user's own ratings only
(:mod:`dpmt.scoring`), so the fold-in may use another (λ, α0) than training did at no privacy
cost (joint DP). *Which* one suits the data is a data-dependent choice, and this module makes
it as one Gaussian release charged to the run's ledger, after the last sweep:

1. Every training user j's ratings are split into a history H_j and targets T_j: rating
   (j, i) is a target when h(key, s_j, i) < :data:`TARGET_SHARE`, with h a keyed 64-bit hash
   (:func:`target_mask`) and s_j a salt from j's own items — so j's split is a function of the
   trainer's secret key and j's own ratings only, and adding or removing a user changes no
   other user's split.
2. For each candidate c = (λ_c, α0_c) of :func:`candidates` (the training's own first, then
   :data:`CANDIDATES`; K = :data:`N_CANDIDATES` in all), user j is folded in on H_j against the
   released V with (λ_c, α0_c) as the model folds in (:func:`fold_in`: the exact clipped
   ridge solve of :func:`dpmt.solvers.user_step.solve_users`, in numpy so that no history
   shape compiles a kernel) and scored as the model scores (the popularity prior included),
   H_j excluded; r_jc = Recall@20 of T_j = hits / min(20, |T_j|) ∈ [0, 1] (0 without targets,
   :func:`user_recall`). Above :data:`MAX_USERS` released users, each user is scored with
   probability MAX_USERS / n̂, by a keyed hash of their own ratings (:func:`scored_users`).
3. The release is S̃ = S + N(0, σ² I_K), S_c = Σ_j r_jc (:func:`recall_sums`). One user adds
   or removes a vector of [0, 1]^K, so the L2 sensitivity is √K (:func:`sensitivity`); V is
   already released, so the release composes adaptively with the training's (Dong, Roth & Su
   2022, Theorem 3.2) and the plan calibrates its σ with the others
   (``privacy.fold_in_noise_ratio``).
4. The choice is post-processing of S̃ (:func:`choose`): the noisy argmax.

Measured (``experiments/charged_foldin.py``, QUALITY.md "A private choice of the fold-in"):
on the 8 generators of ``experiments/solver_rule.py`` and ML-100K, test Recall@20 against the
defaults without it, −0.0008 / −0.0000 / +0.0043 / +0.0094 on average at ε = 1 / 2 / 5 / 20
(so ``fold_in="auto"`` makes it from ε = 3); on generator B, whose defaults fell with ε, it
reaches the tuned best at ε = 5 and 20 (+0.018, +0.035).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from dpmt.data.ratings import Ratings

#: the fold-in candidates (λ, α0) after the training's own: larger ridges without gravity
#: (generators that the defaults overfit), and a smaller ridge or more gravity (ML-100K)
CANDIDATES: tuple[tuple[float, float], ...] = (
    (3.0, 0.5), (3.0, 0.0), (10.0, 0.0), (30.0, 0.0), (10.0, 0.5), (30.0, 0.5), (1.0, 0.5),
    (3.0, 2.0))
#: K: the coordinates of the release (the training's own and :data:`CANDIDATES`)
N_CANDIDATES = 1 + len(CANDIDATES)
#: the expected share of a training user's ratings held out as targets
TARGET_SHARE = 0.2
#: the rank cut-off of the recall each user adds
RECALL_AT = 20
#: users scored at once (bounds the dense (users × items) score block) …
BATCH_USERS = 1024
#: … and their padded histories (users × longest history) at most this many entries
MAX_PADDED = 1 << 20
#: above this many (released) users, each is scored with probability MAX_USERS / n̂ (the
#: cost of the choice stays that of ~MAX_USERS users)
MAX_USERS = 10_000

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def sensitivity() -> float:
    """√K: one user moves every coordinate of S by at most 1 (r_jc ∈ [0, 1])."""
    return math.sqrt(N_CANDIDATES)


def candidates(reg: float, gravity: float) -> tuple[tuple[float, float], ...]:
    """The K candidates: the training's own (λ, α0) first, then :data:`CANDIDATES` (the own
    one may appear twice: K, hence the sensitivity, stays fixed before any data is read)."""
    return ((float(reg), float(gravity)),) + CANDIDATES


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (a bijection with full avalanche)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def target_mask(ratings: Ratings, key: int, salts: np.ndarray | None = None) -> np.ndarray:
    """bool (nnz,): which ratings are targets. Rating (j, i) is one when
    mix(key ⊕ mix(s_j) ⊕ mix(i)) / 2⁶⁴ < :data:`TARGET_SHARE`, with the salt s_j the sum of
    mix(i) over j's own items: a function of ``key`` (secret, 64-bit) and user j's own
    ratings only (``salts``: :func:`_salts`, when the caller has them)."""
    h_item = _item_hashes(ratings)
    salts = _salts(ratings, h_item) if salts is None else salts
    with np.errstate(over="ignore"):
        h = _mix(np.uint64(key) ^ _mix(salts[ratings.user]) ^ h_item)
    return h < np.uint64(int(TARGET_SHARE * 2.0 ** 64))


def _subset(r: Ratings, mask: np.ndarray) -> Ratings:
    return Ratings(user=r.user[mask], item=r.item[mask], value=r.value[mask],
                   user_ids=r.user_ids, item_ids=r.item_ids)


def _item_hashes(ratings: Ratings) -> np.ndarray:
    """mix(i) (nnz,) uint64 of every rating's item."""
    return _mix(ratings.item.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))


def _salts(ratings: Ratings, h_item: np.ndarray | None = None) -> np.ndarray:
    """s_j (n_users,) uint64: the sum (mod 2⁶⁴) of mix(i) over user j's items (``h_item``:
    :func:`_item_hashes`, when the caller has them)."""
    h_item = _item_hashes(ratings) if h_item is None else h_item
    salt = np.zeros(ratings.n_users, np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(salt, ratings.user, h_item)
    return salt


def scored_users(ratings: Ratings, key: int, share: float,
                 salts: np.ndarray | None = None) -> np.ndarray:
    """bool (n_users,): the users whose recalls are summed, each with probability ``share``
    by the keyed hash of their salt (a function of ``key`` and the user's own ratings; at
    ``share`` ≥ 1 every user). Bounds the cost on large data; the sensitivity stays √K.
    ``salts``: :func:`_salts`, when the caller has them."""
    if share >= 1.0:
        return np.ones(ratings.n_users, bool)
    with np.errstate(over="ignore"):
        h = _mix(np.uint64(key) ^ np.uint64(0xD1B54A32D192ED03)
                 ^ _mix(_salts(ratings) if salts is None else salts))
    return h < np.uint64(int(max(share, 0.0) * 2.0 ** 64))


def _gram(V: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_{i∈H} v_i v_iᵀ (n, d, d), Σ_{i∈H} v_i (n, d)) of padded histories ``rows``."""
    G = V[np.maximum(rows, 0)] * (rows >= 0)[..., None]            # (n, L, d)
    return np.matmul(G.transpose(0, 2, 1), G), G.sum(1)


def _solve(M: np.ndarray, b: np.ndarray, W: np.ndarray, lens: np.ndarray, reg: float,
           gravity: float, clip: float | None) -> np.ndarray:
    """u = (M + α0 W + λI)⁻¹ b per user, 0 without history, clipped to ‖u‖ ≤ C."""
    A = M + (gravity * W + reg * np.eye(W.shape[0]))
    U = np.linalg.solve(A, b[..., None])[..., 0]
    U = np.where(lens[:, None] > 0, U, 0.0)
    if clip is not None:
        U = U * np.minimum(1.0, clip / np.maximum(np.linalg.norm(U, axis=1, keepdims=True),
                                                  1e-300))
    return U


def fold_in(V: np.ndarray, rows: np.ndarray, lens: np.ndarray, reg: float, gravity: float,
            clip: float | None) -> np.ndarray:
    """U (n, d) float64: users folded in on their histories (``rows`` padded with −1, one
    user per row, ``lens`` their lengths) as :func:`dpmt.solvers.user_step.solve_users`
    does — u = (Σ_{i∈H} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_{i∈H} v_i, clipped to ‖u‖ ≤ C — in
    float64 numpy (no compilation per history shape)."""
    V = np.asarray(V, np.float64)
    M, b = _gram(V, rows)
    return _solve(M, b, V.T @ V, lens, reg, gravity, clip)


def user_recall(hits: np.ndarray, n_targets: np.ndarray) -> np.ndarray:
    """r_j = min(hits_j, 20) / min(:data:`RECALL_AT`, |T_j|) ∈ [0, 1] (users with ≥ 1
    target; hits ≤ |T_j| by construction, and ≤ 20 even where scores tie): the
    normalisation that bounds one user's term, hence the sensitivity √K."""
    return np.minimum(hits, RECALL_AT) / np.minimum(RECALL_AT, n_targets)


#: from this many items on, :func:`_kth_largest` finds the cut-off through block maxima
#: instead of a partition of every score (1024 × m float32 scores, one thread: the partition
#: is faster at m = 1682, the blocks 2.3x at m = 5000 and 5x at 20,000; the whole choice:
#: level at 5,000 items, 1.33x faster at 20,000; BENCHMARKS.md)
BLOCKS_FROM_ITEMS = 2500


def _kth_largest(scores: np.ndarray, k: int) -> np.ndarray:
    """(n,) the k-th largest entry of every row of ``scores`` (n, m), exactly (ties counted
    with multiplicity, as :func:`numpy.partition` gives it).

    Below :data:`BLOCKS_FROM_ITEMS` items: the partition. From there on, without touching
    most entries twice: the first k·⌊m/k⌋ columns split into k blocks, each block's maximum
    is an entry, so the k maxima are k entries ≥ L = their minimum, and the k-th largest is
    ≥ L; it is then the k-th largest of the few entries ≥ L, which are sorted per row."""
    n, m = scores.shape
    if m >= BLOCKS_FROM_ITEMS:
        width = m // k
        low = scores[:, :width * k].reshape(n, k, width).max(2).min(1)
        row, col = np.nonzero(scores >= low[:, None])     # row-major: rows ascending
        if np.all(np.bincount(row, minlength=n) >= k):     # else NaN scores: no bound holds
            val = scores[row, col]
            order = np.lexsort((-val, row))                # per row, largest first
            first = np.searchsorted(row, np.arange(n))
            return val[order][first + k - 1]
    return np.partition(scores, m - k, axis=1)[:, m - k]


def _hits(scores: np.ndarray, t_row: np.ndarray, t_item: np.ndarray) -> np.ndarray:
    """Per row, how many of its targets (``t_row``, ``t_item``) score at least the row's
    :data:`RECALL_AT`-th largest score, i.e. lie in its top :data:`RECALL_AT` (ties counted
    in; :func:`user_recall` caps at :data:`RECALL_AT`). float32, no index array."""
    n, m = scores.shape
    kth = _kth_largest(scores, min(RECALL_AT, m))
    hit = scores[t_row, t_item] >= kth[t_row]
    return np.bincount(t_row[hit], minlength=n)


class _Batch(NamedTuple):
    """One batch of users: their Gram sums M (n, d, d) and b (n, d), history lengths, padded
    history rows (n, L) and its valid cells, and their targets (row, item) and counts."""

    M: np.ndarray
    b: np.ndarray
    lens: np.ndarray
    rows: np.ndarray
    held: tuple
    t_row: np.ndarray
    t_item: np.ndarray
    n_t: np.ndarray


def _batches(users: np.ndarray, h_len: np.ndarray):
    """Consecutive slices of ``users`` (sorted by history length), each at most
    :data:`BATCH_USERS` users and :data:`MAX_PADDED` padded history entries."""
    s = 0
    while s < len(users):
        n = BATCH_USERS
        # sorted by length: a batch's last user has its longest history
        while n > 1 and n * max(1, int(h_len[users[min(s + n, len(users)) - 1]])) > MAX_PADDED:
            n //= 2
        yield users[s:s + n]
        s += n


def _batch_recall(p: _Batch, W, VT32, prior32, clip, reg: float, gravity: float) -> float:
    """Σ_j r_jc over one batch for the candidate (λ, α0) = (``reg``, ``gravity``)."""
    U = _solve(p.M, p.b, W, p.lens, reg, gravity, clip).astype(np.float32)
    scores = U @ VT32
    if prior32 is not None:
        scores += np.linalg.norm(U, axis=1, keepdims=True) * prior32
    r, c = p.held
    scores[r, p.rows[r, c]] = -np.inf
    return float(np.sum(user_recall(_hits(scores, p.t_row, p.t_item), p.n_t)))


def recall_sums(V: np.ndarray, prior: np.ndarray | None, clip: float | None,
                cands, ratings: Ratings, key: int, share: float = 1.0) -> np.ndarray:
    """S (K,) float64: S_c = Σ_j r_jc over the users of ``ratings`` (the training data)
    that :func:`scored_users` keeps, r_jc the Recall@:data:`RECALL_AT` of user j's targets
    (:func:`target_mask` of ``key``) when folded in on the rest with ``cands[c]`` = (λ, α0)
    against V (m, d) and scored ⟨u, v_i⟩ + ‖u‖·π_i (``prior`` π, or None), the history
    excluded; 0 without targets. Users in batches of at most :data:`BATCH_USERS` and
    :data:`MAX_PADDED` padded history entries, by history length (the padding stays
    small); a candidate listed twice is computed once."""
    salts = _salts(ratings)                             # hashed once for both
    mask = target_mask(ratings, key, salts)
    keep = scored_users(ratings, key, share, salts)
    history, targets = _subset(ratings, ~mask), _subset(ratings, mask)
    n_t = np.bincount(targets.user, minlength=ratings.n_users)
    users = np.flatnonzero((n_t > 0) & keep)           # the others add 0 to every S_c
    h_len = np.bincount(history.user, minlength=ratings.n_users)
    users = users[np.argsort(h_len[users], kind="stable")]
    h_items = history.item[np.argsort(history.user, kind="stable")]
    h_start = np.concatenate([[0], np.cumsum(h_len)])
    t_items = targets.item[np.argsort(targets.user, kind="stable")]
    t_start = np.concatenate([[0], np.cumsum(n_t)])
    V = np.asarray(V, np.float64)
    W = V.T @ V
    VT32 = V.T.astype(np.float32)
    prior32 = None if prior is None else np.asarray(prior, np.float32)[None, :]
    unique = list(dict.fromkeys((float(r), float(g)) for r, g in cands))
    sums = dict.fromkeys(unique, 0.0)
    with ThreadPoolExecutor(max_workers=min(len(unique), os.cpu_count() or 1)) as pool:
        for batch in _batches(users, h_len):
            lens = h_len[batch]
            at = np.arange(max(1, int(lens.max())))[None, :]
            valid = at < lens[:, None]
            rows = np.where(valid, h_items[np.minimum(h_start[batch][:, None] + at,
                                                      max(len(h_items) - 1, 0))], -1)
            t_idx = np.concatenate([np.arange(t_start[j], t_start[j + 1]) for j in batch])
            part = _Batch(*_gram(V, rows), lens, rows, np.nonzero(valid),
                          np.repeat(np.arange(len(batch)), n_t[batch]), t_items[t_idx],
                          n_t[batch])
            # numpy's partition and batched solve release the GIL: the candidates run in
            # parallel; each sum adds its batches in order, whatever the threads do
            for cand, r in zip(unique, pool.map(
                    lambda c, p=part: _batch_recall(p, W, VT32, prior32, clip, *c), unique)):
                sums[cand] += r
    return np.array([sums[(float(r), float(g))] for r, g in cands], np.float64)


def choose(noisy_sums: np.ndarray) -> int:
    """The candidate of the largest released sum (ties: the first, the training's own)."""
    return int(np.argmax(np.asarray(noisy_sums, np.float64)))
