"""Task-user weights for multi-task learning under user-level DP (public API).

Krichene et al., "Multi-Task Differential Privacy Under Distribution Skew" (ICML 2023).
Notation: tasks (items) i = 1..m with sizes n_i = |Ω_i|, users j = 1..n, Ω^j the tasks of
user j. A DP solver on the weighted objective L_w(θ) = Σ_(i,j) w_ij ℓ(θ_i; x_ij, y_ij) has
user-level sensitivity governed by Σ_i w_ij² (the paper's constraint (9)), so the privacy
budget of one user is the constraint Σ_{i∈Ω^j} w_ij² ≤ β. Utility is governed by
Σ_i 1 / (ω_i² n_i^γ) (γ = 0: Lipschitz bounded losses; γ = 1: strongly convex), and
minimising it under Σ_i n_i ω_i² = n β̄ (problem (10)) gives the closed form (11):

    ω_i = (n β̄ / Σ_i' n_i'^(1−2μ))^(1/2) · n_i^(−μ),   μ = (1+γ)/4.

All functions are pure, accept numpy or JAX arrays, and return arrays of the same kind.
Per-rating arrays (``user_ids``, ``item_ids``, returned weights) are aligned with a
:class:`dpmt.data.Ratings`' coordinate arrays.

Typical use in your own code::

    from dpmt import weighting
    omega = weighting.task_weights(noisy_counts, gamma=1.0, budget=100.0, n_users=n)
    w = weighting.clip_to_budget(omega, ratings.user, ratings.item, budget=100.0)
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.errors import ConfigError, DataError, check_range

__all__ = [
    "task_weights",
    "clip_to_budget",
    "normalized_user_weights",
    "improvement_ratios",
    "uniform_sample_weights",
    "tail_weights",
    "user_sq_norms",
    "optimal_exponent",
]

# Scaling a user's weights by sqrt(β/s) can overshoot β by a rounding error; shrink by a
# hair so Σ_i w_ij² ≤ β holds exactly in floating point (this only ever lowers sensitivity).
_SAFETY = {np.dtype(np.float64): 1.0 - 1e-12, np.dtype(np.float32): 1.0 - 1e-6}


def _is_jax(x) -> bool:
    return type(x).__module__.startswith(("jax", "jaxlib"))


def _xp(*arrays):
    if any(_is_jax(a) for a in arrays):
        import jax.numpy as jnp

        return jnp
    return np


def optimal_exponent(gamma: float) -> float:
    """μ = (1 + γ) / 4, the exponent of the optimal task weights (the paper's eq. (11))."""
    check_range("gamma", gamma, low=0.0)
    return (1.0 + gamma) / 4.0


def _validate_counts(counts):
    xp = _xp(counts)
    if not _is_jax(counts):
        c = np.asarray(counts, dtype=np.float64)
        if c.ndim != 1 or c.size == 0:
            raise DataError(f"task counts must be a non-empty 1-D array (got shape {c.shape})")
        if not np.all(np.isfinite(c)):
            raise DataError("task counts contain NaN or infinite values")
        if np.any(c < 1):
            bad = int(np.flatnonzero(c < 1)[0])
            raise DataError(
                f"task {bad} has count {c[bad]:g} < 1: an empty task has no weight. Clamp noisy "
                "counts at 1 (dpmt.privacy.private_counts does) or drop empty tasks first.")
        return c
    return xp.asarray(counts)


def task_weights(counts, *, gamma: float = 1.0, mu: float | None = None, budget: float = 1.0,
                 n_users: int | None = None, c_n: float = 1.0):
    """Optimal task weights ω_i ∝ n_i^(−μ) (Krichene et al. 2023, eq. (11)).

    With n = ``n_users`` and β̄ = β / c(n)::

        ω_i = (n β̄ / Σ_i' n_i'^(1−2μ))^(1/2) · n_i^(−μ),    so that  Σ_i n_i ω_i² = n β̄.

    μ = (1+γ)/4 unless ``mu`` is given (γ = 0 Lipschitz bounded losses, μ = 1/4; γ = 1
    strongly convex, μ = 1/2). ``mu=0`` gives the uniform weights ω_i = (n β̄ / Σ_i n_i)^(1/2).

    Our c(n): the paper takes c(n) = c·log n so that, w.h.p. under its Assumption 4.1, *every*
    user's B_j = Σ_{i∈Ω^j} ω_i² stays below β. dpmt enforces the constraint with probability
    one by :func:`clip_to_budget` instead, so c(n) only trades how many users get scaled down
    against how much budget the typical user leaves unused. The default ``c_n=1`` puts the
    *average* user exactly at the budget (mean_j B_j = β̄ = β); pass ``c_n=math.log(n)`` for
    the paper's choice.

    If ``n_users`` is None, n is unknown and the weights are returned in shape-only form,
    scaled so that the largest single weight equals √β (one task alone never exceeds the
    budget); :func:`clip_to_budget` then enforces the per-user budget.

    Args:
      counts: (m,) task sizes n_i ≥ 1 (exact or privately estimated, clamped at 1).
      gamma: loss curvature exponent γ ≥ 0 (ignored when ``mu`` is given).
      mu: explicit exponent μ ≥ 0.
      budget: β > 0, the per-user budget on Σ_i w_ij².
      n_users: number of users n.
      c_n: c(n) > 0.

    Returns:
      (m,) float weights ω_i > 0, same array kind (numpy/JAX) as ``counts``.
    """
    check_range("budget", budget, low=0.0, low_open=True)
    check_range("c_n", c_n, low=0.0, low_open=True)
    mu = optimal_exponent(gamma) if mu is None else mu
    check_range("mu", mu, low=0.0)
    c = _validate_counts(counts)
    xp = _xp(c)
    shape = c ** (-mu)
    if n_users is None:
        return shape / xp.max(shape) * math.sqrt(budget)
    check_range("n_users", n_users, low=1, integer=True)
    beta_bar = budget / c_n
    scale = xp.sqrt(n_users * beta_bar / xp.sum(c ** (1.0 - 2.0 * mu)))
    return scale * shape


def user_sq_norms(per_rating_w, user_ids, n_users: int | None = None):
    """B_j = Σ_{i∈Ω^j} w_ij² for every user j; (n_users,) array."""
    xp = _xp(per_rating_w, user_ids)
    if xp is np:
        w = np.asarray(per_rating_w, dtype=np.float64)
        return np.bincount(np.asarray(user_ids), weights=w * w,
                           minlength=0 if n_users is None else n_users)
    import jax

    if n_users is None:
        n_users = int(xp.max(user_ids)) + 1
    return jax.ops.segment_sum(per_rating_w * per_rating_w, user_ids, num_segments=n_users)


def clip_to_budget(task_w, user_ids, item_ids, budget: float, n_users: int | None = None):
    """Per-(i, j) weights scaled down per user to meet the budget (the paper's w*).

        w*_ij = ω_i · min(1, sqrt(β / Σ_{i'∈Ω^j} ω_{i'}²)),

    so Σ_i w*_ij² ≤ β for every user with probability one (users already under budget keep
    w*_ij = ω_i). The scale factor is shrunk by a relative 1e-12 (float64) / 1e-6 (float32)
    so the inequality also holds after rounding.

    Args:
      task_w: (m,) task weights ω_i ≥ 0.
      user_ids, item_ids: (nnz,) int indices of each rating (one per (i, j) ∈ Ω).
      budget: β > 0.
      n_users: number of users (needed only for JAX inputs under ``jit``).

    Returns:
      (nnz,) weights w*_ij aligned with ``user_ids``/``item_ids``.
    """
    check_range("budget", budget, low=0.0, low_open=True)
    xp = _xp(task_w, user_ids, item_ids)
    if xp is np:
        task_w = np.asarray(task_w, dtype=np.float64)
        if task_w.ndim != 1 or not np.all(np.isfinite(task_w)) or np.any(task_w < 0):
            raise DataError("task weights must be a 1-D array of finite values ≥ 0")
        user_ids = np.asarray(user_ids)
        item_ids = np.asarray(item_ids)
        if len(user_ids) != len(item_ids):
            raise DataError("user_ids and item_ids must have the same length")
    w = task_w[item_ids]
    b = user_sq_norms(w, user_ids, n_users)
    dtype = np.dtype(np.float64) if xp is np else np.dtype(w.dtype)
    safety = _SAFETY.get(dtype, 1.0 - 1e-6)
    scale = xp.where(b > budget, xp.sqrt(budget / xp.where(b > 0, b, 1.0)) * safety, 1.0)
    return w * scale[user_ids]


def normalized_user_weights(counts, user_ids, item_ids, *, mu: float, budget: float,
                            n_users: int | None = None):
    """The reference implementation's variant: every user exactly at the budget.

        w_ij = √β · n_i^(−μ) / sqrt(Σ_{i'∈Ω^j} n_{i'}^(−2μ)),

    hence Σ_i w_ij² = β for every user (up to rounding, never above). μ = 0 spreads the budget
    uniformly over the user's items.
    """
    check_range("mu", mu, low=0.0)
    check_range("budget", budget, low=0.0, low_open=True)
    c = _validate_counts(counts)
    xp = _xp(c, user_ids, item_ids)
    raw = (c ** (-mu))[item_ids]
    b = user_sq_norms(raw, user_ids, n_users)
    dtype = np.dtype(np.float64) if xp is np else np.dtype(raw.dtype)
    safety = _SAFETY.get(dtype, 1.0 - 1e-6)
    # users with no ratings have b = 0 and are never indexed; avoid the 0-division warning
    return raw * (math.sqrt(budget) * safety / xp.sqrt(xp.where(b > 0, b, 1.0)))[user_ids]


def improvement_ratios(counts) -> tuple[float, float]:
    """Predicted gain of optimal over uniform weights (Krichene et al. 2023, Section 4).

        R0 = (m Σ_i n_i)^(1/2) / Σ_i n_i^(1/2)          (Lipschitz bounded case, γ = 0)
        R1 = (Σ_i 1/n_i)(Σ_i n_i) / m²                  (strongly convex case, γ = 1)

    Both are ≥ 1 (Cauchy-Schwarz), = 1 iff all n_i are equal; for n_1 = m^(1+ν) and the
    other n_i constant, R0 ≈ m^(ν/2) and R1 ≈ m^ν as m → ∞.
    """
    c = np.asarray(_validate_counts(np.asarray(counts)), dtype=np.float64)
    m = len(c)
    r0 = math.sqrt(m * c.sum()) / np.sqrt(c).sum()
    r1 = (1.0 / c).sum() * c.sum() / m**2
    return float(r0), float(r1)


def _rank_within_user(user_ids: np.ndarray, *sort_keys: np.ndarray) -> np.ndarray:
    """Rank (0-based) of each rating among its user's ratings, ascending by ``sort_keys``
    (the first key is primary, later keys break ties)."""
    order = np.lexsort(tuple(reversed(sort_keys)) + (user_ids,))
    u_sorted = user_ids[order]
    starts = np.r_[0, np.flatnonzero(np.diff(u_sorted)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(u_sorted)]))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - run_start
    return rank


def uniform_sample_weights(user_ids, k: int, seed: int | np.random.Generator = 0):
    """The "uniform" baseline (Chien et al. 2021): k ratings per user sampled uniformly, weight 1.

    Σ_i w_ij² = min(k, |Ω^j|) ≤ k, so pass ``budget = k`` to the privacy accounting.
    Returns (nnz,) float64 weights in {0, 1}.
    """
    check_range("k", k, low=1, integer=True)
    rng = np.random.default_rng(seed)
    user_ids = np.asarray(user_ids)
    rank = _rank_within_user(user_ids, rng.random(len(user_ids)))
    return (rank < k).astype(np.float64)


def tail_weights(counts, user_ids, item_ids, k: int, seed: int | np.random.Generator = 0):
    """The "tail" baseline (Chien et al. 2021): each user's k least popular items, weight 1.

    Popularity is ``counts`` (use *private* counts: the selection reads them, so they must
    already be a charged release; ties broken at random). Σ_i w_ij² ≤ k.
    """
    check_range("k", k, low=1, integer=True)
    c = np.asarray(_validate_counts(np.asarray(counts)))
    rng = np.random.default_rng(seed)
    user_ids = np.asarray(user_ids)
    item_ids = np.asarray(item_ids)
    rank = _rank_within_user(user_ids, c[item_ids], rng.random(len(item_ids)))
    return (rank < k).astype(np.float64)
