"""Bucket boundaries of a bucketed layout (:mod:`dpmt.solvers.layout`): where to cut rows
sorted by length so that a fixed number of buckets pads the fewest slots.

A row of length ``n`` goes to the bucket of the smallest boundary ``B_k ≥ n`` and is padded to
that bucket's width (its longest row). The geometric grid ``1, ⌈g⌉, ⌈g²⌉, …`` fixes the
number of buckets (each one a compiled kernel instance); :func:`optimal_boundaries` places
that many where the rows are. Host-side numpy only.
"""

from __future__ import annotations

import math

import numpy as np


def _boundaries(max_len: int, growth: float) -> np.ndarray:
    bounds = [1]
    x = 1.0
    while bounds[-1] < max_len:
        x *= growth
        nb = max(int(math.ceil(x - 1e-9)), bounds[-1] + 1)
        bounds.append(nb)
    return np.asarray(bounds, np.int64)


#: A bucket is one more kernel instance for every kernel that reads the layout, so the
#: default layout keeps one only where it saves more than ``BUCKET_COST_D2 / d²`` padded
#: slots (a padded slot's work grows as d², a compilation does not; BENCHMARKS.md, "Fewer
#: layout buckets where the data are small": 2²⁸ slowed a 2.4M-rating iteration, 2²⁷ not).
BUCKET_COST_D2 = float(2**27)
#: ... with d taken as at least this: below it a slot's work is the gather's, not d²'s (so at
#: most 2²⁷/16² = 512k slots per bucket, however small d is)
BUCKET_COST_MIN_DIM = 16


def default_bucket_cost(dim: int) -> float:
    """Padded slots one more bucket must save: ``BUCKET_COST_D2 / max(dim, 16)²``."""
    return BUCKET_COST_D2 / max(int(dim), BUCKET_COST_MIN_DIM) ** 2


#: Candidate bucket widths of :func:`optimal_boundaries` are thinned to about this many.
_MAX_CANDIDATES = 512


def optimal_boundaries(lens: np.ndarray, n_buckets: int,
                       include: np.ndarray | None = None,
                       bucket_cost: float = 0.0) -> np.ndarray:
    """Bucket boundaries ``B_1 < … < B_K`` (K ≤ ``n_buckets``) that minimise the padded slots
    ``Σ_b n_b · B_b`` of rows of lengths ``lens`` (a row of length ``n`` goes to the bucket of
    the smallest ``B_k ≥ n``; every boundary is a length that occurs, so it is its bucket's
    width), plus ``bucket_cost`` slots per bucket (what compiling one more kernel instance
    costs, in padded slots; 0: the fewest slots).

    Dynamic programme over the sorted distinct lengths ``ℓ_1 < … < ℓ_U`` with ``N(ℓ)`` the
    number of rows of length ≤ ℓ:

        C_1(j) = N(ℓ_j)·ℓ_j,    C_k(j) = min_{i<j} C_{k-1}(i) + (N(ℓ_j) − N(ℓ_i))·ℓ_j,

    answer ``min_k C_k(U) + k·bucket_cost``, ``O(K·U²)``. For more than ``_MAX_CANDIDATES`` distinct lengths the
    candidates are thinned to the largest length under each point of a fine geometric grid
    (ratio 1.02) plus ``include`` (so the result is never worse than a grid whose bucket
    widths are in ``include``), the largest length always kept.
    """
    lens = np.asarray(lens, np.int64)
    uniq, cnt = np.unique(lens, return_counts=True)
    if len(uniq) > _MAX_CANDIDATES:
        ratio = max(1.02, float(uniq[-1]) ** (1.0 / _MAX_CANDIDATES))
        grid = ratio ** np.arange(int(np.ceil(np.log(uniq[-1]) / np.log(ratio))) + 1)
        pick = np.searchsorted(uniq, grid, side="right") - 1
        keep = set(pick[pick >= 0].tolist()) | {len(uniq) - 1}
        if include is not None:
            keep |= set(np.searchsorted(uniq, np.asarray(include, np.int64)).tolist())
        keep = np.asarray(sorted(k for k in keep if 0 <= k < len(uniq)), np.int64)
    else:
        keep = np.arange(len(uniq))
    cum = np.cumsum(cnt)[keep].astype(np.float64)       # N(ℓ) at each candidate
    width = uniq[keep].astype(np.float64)
    U = len(keep)
    K = max(1, min(int(n_buckets), U))
    cost = cum * width                                   # C_1
    back = np.zeros((K, U), np.int64)
    best_k, best = 0, cost[-1] + bucket_cost
    tri = np.tril(np.ones((U, U), bool), -1)             # i < j
    for k in range(1, K):
        M = cost[None, :] + (cum[:, None] - cum[None, :]) * width[:, None]
        M = np.where(tri, M, np.inf)
        back[k] = np.argmin(M, axis=1)
        cost = M[np.arange(U), back[k]]
        cost[0] = np.inf                                 # k+1 buckets need ≥ k+1 candidates
        if cost[-1] + (k + 1) * bucket_cost < best:
            best_k, best = k, cost[-1] + (k + 1) * bucket_cost
    bounds, j = [], U - 1
    for k in range(best_k, -1, -1):
        bounds.append(int(width[j]))
        j = back[k, j]
    return np.asarray(bounds[::-1], np.int64)


def _grid_or_optimal(lens: np.ndarray, growth: float, boundaries: str,
                     bucket_cost: float = 0.0) -> np.ndarray:
    """Bucket boundaries of rows of lengths ``lens``: the geometric grid, or (``"optimal"``)
    at most as many buckets as the grid fills, placed where the rows are
    (:func:`optimal_boundaries`; with ``bucket_cost`` 0, never more padding than the grid)."""
    bounds = _boundaries(int(lens.max()), growth)
    if boundaries != "optimal":
        return bounds
    grid_bid = np.searchsorted(bounds, lens, side="left")
    widths = [int(lens[grid_bid == k].max()) for k in np.unique(grid_bid)]
    return optimal_boundaries(lens, len(widths), include=np.asarray(widths),
                              bucket_cost=bucket_cost)


def _slots(lens: np.ndarray, bounds: np.ndarray) -> int:
    """Slots of rows of lengths ``lens`` in buckets ``bounds`` (each bucket as wide as its
    longest row; chunk padding not counted)."""
    if not len(lens):
        return 0
    bid = np.searchsorted(bounds, lens, side="left")
    return int(sum(int(lens[bid == k].max()) * int((bid == k).sum()) for k in np.unique(bid)))
