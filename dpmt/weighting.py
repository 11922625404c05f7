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

Input validation: numpy inputs and concrete JAX arrays are checked (counts: non-empty 1-D,
finite, ≥ 1; id arrays: 1-D, integer dtype, non-negative, in range of the task array, equal
lengths; parameters β, γ, μ, c(n): finite and in range), and bad input raises
:class:`~dpmt.errors.DataError` / :class:`~dpmt.errors.ConfigError`. Only JAX tracers (inside
``jax.jit`` etc.) skip the value checks. Empty rating arrays (nnz = 0) are valid and give an
empty (0,) result. The formulas are evaluated in log space / on rescaled values, so results
are finite for any valid input; a weight whose exact value lies outside the float range
(e.g. a huge μ) raises a ``DataError`` instead of silently becoming 0 or inf.

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


def _is_tracer(x) -> bool:
    """True for abstract JAX values (under jit/grad/vmap), whose values cannot be checked."""
    if not _is_jax(x):
        return False
    import jax

    return isinstance(x, jax.core.Tracer)


def _xp(*arrays):
    if any(_is_jax(a) for a in arrays):
        import jax.numpy as jnp

        return jnp
    return np


# -- validation helpers ---------------------------------------------------------------------
def _param(name: str, value, **kw) -> float:
    """check_range plus finiteness; returns the value as a float."""
    try:
        check_range(name, value, **kw)
        v = float(value)
    except OverflowError:
        raise ConfigError(f"{name} must be a finite number (got {value!r})") from None
    if not math.isfinite(v):
        raise ConfigError(f"{name} must be finite (got {value!r})")
    return v


def _check_n_users(n_users, low: int = 1) -> int | None:
    if n_users is None:
        return None
    try:
        check_range("n_users", n_users, low=low, integer=True)
    except OverflowError:
        raise ConfigError(f"n_users must be a finite integer (got {n_users!r})") from None
    return int(n_users)


def _counts_np(counts) -> np.ndarray:
    """Validated task sizes as a (m,) float64 numpy array (any concrete input)."""
    try:
        c = np.asarray(counts, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DataError(f"task counts must be a non-empty 1-D array of numbers ({e})") from None
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


def _validate_counts(counts):
    """Validated counts, same array kind as given (JAX tracers pass unchecked)."""
    if not _is_jax(counts):
        return _counts_np(counts)
    import jax.numpy as jnp

    if not _is_tracer(counts):
        _counts_np(counts)
    return jnp.asarray(counts)


def _ids_np(name: str, ids, n: int | None = None, what: str = "") -> np.ndarray:
    """Validated (nnz,) index array as int64 numpy: 1-D, integer, ≥ 0, < n (if given).

    An empty array (of any dtype, e.g. the float64 of ``np.asarray([])``) is valid."""
    try:
        a = np.asarray(ids)
    except (TypeError, ValueError) as e:
        raise DataError(f"{name} must be a 1-D array of integer indices ({e})") from None
    if a.ndim != 1:
        raise DataError(f"{name} must be a 1-D array of integer indices (got shape {a.shape})")
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.dtype.kind not in "iu":
        raise DataError(f"{name} must hold integer indices (got dtype {a.dtype}); convert the "
                        "ids to contiguous integer indices first (dpmt.data.Ratings does)")
    lo, hi = a.min(), a.max()
    if lo < 0:
        pos = int(np.flatnonzero(a < 0)[0])
        raise DataError(f"{name} contains a negative index ({int(lo)} at position {pos})")
    if n is not None and hi >= n:
        pos = int(np.flatnonzero(a >= n)[0])
        raise DataError(f"{name} contains index {int(hi)} (first out of range at position "
                        f"{pos}) but there are only {n} {what} (valid indices 0..{n - 1})")
    if hi > np.iinfo(np.int64).max:
        raise DataError(f"{name} contains index {int(hi)}, too large for an int64 index")
    return a.astype(np.int64, copy=False)


def _weights_np(name: str, w) -> np.ndarray:
    try:
        a = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DataError(f"{name} must be a 1-D array of numbers ({e})") from None
    if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise DataError(f"{name} must be a 1-D array of finite values ≥ 0")
    return a


def _same_length(**arrays) -> None:
    lens = {k: len(v) for k, v in arrays.items()}
    if len(set(lens.values())) > 1:
        desc = ", ".join(f"{k} has {v}" for k, v in lens.items())
        raise DataError(f"{' and '.join(lens)} must have the same length ({desc})")


def _check_result(w, what: str, hint) -> None:
    """Raise DataError if (concrete) weights that must be > 0 underflowed or overflowed.

    ``hint()`` gives the end of the message (only built on failure)."""
    if _is_tracer(w):
        return
    a = np.asarray(w)
    bad = ~np.isfinite(a) | (a <= 0)
    if np.any(bad):
        raise DataError(f"{what}: {int(bad.sum())} of {a.size} weights are not representable "
                        f"as positive finite {a.dtype} numbers (their exact values underflow "
                        f"or overflow); {hint()}")


def _logsumexp(xp, a):
    mx = xp.max(a)
    return mx + xp.log(xp.sum(xp.exp(a - mx)))


def _segments_np(ids: np.ndarray, n_users: int | None):
    """Segment ids for per-user reductions: the ids themselves, or compacted ones when the
    largest id is far above the number of ratings (avoids huge allocations)."""
    if n_users is not None:
        return ids, n_users
    n = int(ids.max()) + 1 if ids.size else 0
    if n > 4 * ids.size + 1024:
        uniq, inv = np.unique(ids, return_inverse=True)
        return inv.reshape(-1), len(uniq)
    return ids, n


def _jax_n_users(user_ids, n_users):
    if n_users is not None:
        return n_users
    if _is_tracer(user_ids):
        raise ConfigError("n_users must be given for JAX user_ids under jit/tracing")
    import jax.numpy as jnp

    user_ids = jnp.asarray(user_ids)
    return int(jnp.max(user_ids)) + 1 if user_ids.size else 0


def _safety(dtype) -> float:
    return _SAFETY.get(np.dtype(dtype), 1.0 - 1e-6)


# -- public API -----------------------------------------------------------------------------
def optimal_exponent(gamma: float) -> float:
    """μ = (1 + γ) / 4, the exponent of the optimal task weights (the paper's eq. (11))."""
    gamma = _param("gamma", gamma, low=0.0)
    return (1.0 + gamma) / 4.0


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

    Computed in log space, log ω_i = ½(log n + log β̄ − LSE_i'((1−2μ) log n_i')) − μ log n_i
    (shape-only: ½ log β − μ (log n_i − min_i' log n_i')), so counts anywhere in the float
    range give finite weights.

    Args:
      counts: (m,) task sizes n_i ≥ 1 (exact or privately estimated, clamped at 1).
      gamma: loss curvature exponent γ ≥ 0, finite (ignored when ``mu`` is given).
      mu: explicit exponent μ ≥ 0, finite.
      budget: β > 0, finite, the per-user budget on Σ_i w_ij².
      n_users: number of users n ≥ 1.
      c_n: c(n) > 0, finite.

    Returns:
      (m,) float weights ω_i > 0, same array kind (numpy/JAX) as ``counts``.

    Raises:
      ConfigError: a parameter out of range or not finite.
      DataError: counts not a non-empty 1-D array of finite numbers ≥ 1, or weights whose
        exact values lie outside the float range (μ too large for the spread of the counts).
    """
    budget = _param("budget", budget, low=0.0, low_open=True)
    c_n = _param("c_n", c_n, low=0.0, low_open=True)
    mu = optimal_exponent(gamma) if mu is None else _param("mu", mu, low=0.0)
    n_users = _check_n_users(n_users)
    c = _validate_counts(counts)
    xp = _xp(c)
    lc = xp.log(c)
    if n_users is None:
        w = math.sqrt(budget) * xp.exp(-mu * (lc - xp.min(lc)))
    else:
        lse = _logsumexp(xp, (1.0 - 2.0 * mu) * lc)
        log_scale = 0.5 * (math.log(n_users) + math.log(budget) - math.log(c_n) - lse)
        w = xp.exp(log_scale - mu * lc)
    _check_result(w, "task_weights", lambda: (
        f"mu={mu:g} is too large for counts spanning [{float(xp.min(c)):g}, "
        f"{float(xp.max(c)):g}] (or budget/c_n/n_users too extreme); use a smaller mu"))
    return w


def user_sq_norms(per_rating_w, user_ids, n_users: int | None = None):
    """B_j = Σ_{i∈Ω^j} w_ij² for every user j; (n_users,) array.

    ``n_users`` defaults to max(user_ids) + 1 (0 for no ratings); it is required for JAX
    inputs under ``jit``."""
    n_users = _check_n_users(n_users, low=0)
    xp = _xp(per_rating_w, user_ids)
    if not (_is_tracer(per_rating_w) or _is_tracer(user_ids)):
        w_np = _weights_np("per-rating weights", per_rating_w)
        u_np = _ids_np("user_ids", user_ids, n_users, "users (n_users)")
        _same_length(per_rating_w=w_np, user_ids=u_np)
        if xp is np:
            return np.bincount(u_np, weights=w_np * w_np,
                               minlength=0 if n_users is None else n_users)
    import jax
    import jax.numpy as jnp

    per_rating_w, user_ids = jnp.asarray(per_rating_w), jnp.asarray(user_ids)
    n_users = _jax_n_users(user_ids, n_users)
    return jax.ops.segment_sum(per_rating_w * per_rating_w, user_ids, num_segments=n_users)


def clip_to_budget(task_w, user_ids, item_ids, budget: float, n_users: int | None = None):
    """Per-(i, j) weights scaled down per user to meet the budget (the paper's w*).

        w*_ij = ω_i · min(1, sqrt(β / Σ_{i'∈Ω^j} ω_{i'}²)),

    so Σ_i w*_ij² ≤ β for every user with probability one (users already under budget keep
    w*_ij = ω_i). The scale factor is shrunk by a relative 1e-12 (float64) / 1e-6 (float32)
    so the inequality also holds after rounding. The scaled weights are computed as
    (ω_i / M_j) · sqrt(β / Σ_{i'} (ω_{i'} / M_j)²) with M_j = max_{i∈Ω^j} ω_i, so huge ω do
    not overflow (a weight tiny relative to its user's largest may round down to 0).

    Args:
      task_w: (m,) task weights ω_i ≥ 0, finite.
      user_ids, item_ids: (nnz,) int indices of each rating (one per (i, j) ∈ Ω), ≥ 0, item
        ids < m, user ids < ``n_users`` if given. nnz = 0 gives an empty result.
      budget: β > 0, finite.
      n_users: number of users (needed only for JAX inputs under ``jit``).

    Returns:
      (nnz,) weights w*_ij aligned with ``user_ids``/``item_ids``.
    """
    budget = _param("budget", budget, low=0.0, low_open=True)
    n_users = _check_n_users(n_users, low=0)
    xp = _xp(task_w, user_ids, item_ids)
    if not any(_is_tracer(a) for a in (task_w, user_ids, item_ids)):
        tw = _weights_np("task weights", task_w)
        u = _ids_np("user_ids", user_ids, n_users, "users (n_users)")
        i = _ids_np("item_ids", item_ids, len(tw), "tasks (len(task_w))")
        _same_length(user_ids=u, item_ids=i)
        if xp is np:
            return _clip_np(tw, u, i, budget, n_users)
        if u.size == 0:
            return xp.zeros(0, dtype=xp.asarray(task_w).dtype)
    return _clip_jax(task_w, user_ids, item_ids, budget, n_users)


def _clip_np(tw, u, i, budget, n_users):
    w = tw[i]
    if w.size == 0:
        return w
    seg, n_seg = _segments_np(u, n_users)
    with np.errstate(over="ignore", under="ignore"):
        b = np.bincount(seg, weights=w * w, minlength=n_seg)        # may overflow to inf
        m = np.zeros(n_seg)
        np.maximum.at(m, seg, w)                                      # M_j
        m_r = m[seg]
        r = np.where(m_r > 0, w / np.where(m_r > 0, m_r, 1.0), 0.0)   # ω_i / M_j ∈ [0, 1]
        bp = np.bincount(seg, weights=r * r, minlength=n_seg)         # B_j / M_j² ∈ [1, nnz_j]
    over = _over_budget(np, b, m, bp, budget, np.dtype(np.float64))
    factor = np.sqrt(budget / np.where(bp > 0, bp, 1.0)) * _safety(np.float64)
    return np.where(over[seg], r * factor[seg], w)


def _over_budget(xp, b, m, bp, budget, dtype):
    """B_j > β: the direct sum where it is a normal number, else decided in log space."""
    fi = np.finfo(dtype)
    reliable = xp.isinf(b) | (b >= fi.tiny / fi.eps)
    safe_m = xp.where(m > 0, m, 1.0)
    safe_bp = xp.where(bp > 0, bp, 1.0)
    log_b = xp.where(m > 0, 2.0 * xp.log(safe_m) + xp.log(safe_bp), -xp.inf)
    return xp.where(reliable, b > budget, log_b > math.log(budget))


def _clip_jax(task_w, user_ids, item_ids, budget, n_users):
    import jax
    import jax.numpy as jnp

    user_ids, item_ids = jnp.asarray(user_ids), jnp.asarray(item_ids)
    n_users = _jax_n_users(user_ids, n_users)
    w = jnp.asarray(task_w)[item_ids]
    if not jnp.issubdtype(w.dtype, jnp.floating):
        w = w.astype(jnp.result_type(float))
    m = jax.ops.segment_max(w, user_ids, num_segments=n_users)
    m = jnp.where(m > 0, m, 0.0)
    m_r = m[user_ids]
    r = jnp.where(m_r > 0, w / jnp.where(m_r > 0, m_r, 1.0), 0.0)
    b = jax.ops.segment_sum(w * w, user_ids, num_segments=n_users)
    bp = jax.ops.segment_sum(r * r, user_ids, num_segments=n_users)
    over = _over_budget(jnp, b, m, bp, budget, w.dtype)
    factor = jnp.sqrt(budget / jnp.where(bp > 0, bp, 1.0)) * _safety(w.dtype)
    return jnp.where(over[user_ids], r * factor[user_ids], w)


def normalized_user_weights(counts, user_ids, item_ids, *, mu: float, budget: float,
                            n_users: int | None = None):
    """The reference implementation's variant: every user exactly at the budget.

        w_ij = √β · n_i^(−μ) / sqrt(Σ_{i'∈Ω^j} n_{i'}^(−2μ)),

    hence Σ_i w_ij² = β for every user (up to rounding, never above). μ = 0 spreads the budget
    uniformly over the user's items.

    Evaluated on per-user rescaled values (n_i / min_{i'∈Ω^j} n_i')^(−μ) ∈ (0, 1], so large
    counts or μ do not underflow as long as the weights themselves are representable; if one
    is not (e.g. μ = 2000), a DataError is raised. ``user_ids``/``item_ids`` are validated
    like in :func:`clip_to_budget` (item ids < len(counts)); nnz = 0 gives an empty result.
    """
    mu = _param("mu", mu, low=0.0)
    budget = _param("budget", budget, low=0.0, low_open=True)
    n_users = _check_n_users(n_users, low=0)
    c = _validate_counts(counts)
    xp = _xp(c, user_ids, item_ids)
    traced = any(_is_tracer(a) for a in (c, user_ids, item_ids))
    if not traced:
        u = _ids_np("user_ids", user_ids, n_users, "users (n_users)")
        i = _ids_np("item_ids", item_ids, len(c), "tasks (len(counts))")
        _same_length(user_ids=u, item_ids=i)
        if u.size == 0:
            return xp.zeros(0, dtype=xp.asarray(c).dtype)
    def hint():
        return f"mu={mu:g} is too large for the ratio of counts within a user; use a smaller mu"
    if xp is np:
        a = (-mu * np.log(c))[i]                       # log n_i^(−μ) ≤ 0
        seg, n_seg = _segments_np(u, n_users)
        top = np.full(n_seg, -np.inf)
        np.maximum.at(top, seg, a)
        with np.errstate(under="ignore", invalid="ignore"):
            r = np.exp(a - top[seg])                   # ∈ (0, 1], 1 at each user's max
            bp = np.bincount(seg, weights=r * r, minlength=n_seg)   # ∈ [1, nnz_j]
            w = r * (math.sqrt(budget) * _safety(np.float64)
                     / np.sqrt(np.where(bp > 0, bp, 1.0)))[seg]
        _check_result(w, "normalized_user_weights", hint)
        return w
    import jax
    import jax.numpy as jnp

    user_ids, item_ids = jnp.asarray(user_ids), jnp.asarray(item_ids)
    n_users = _jax_n_users(user_ids, n_users)
    a = (-mu * jnp.log(jnp.asarray(c)))[item_ids]
    top = jax.ops.segment_max(a, user_ids, num_segments=n_users)
    r = jnp.exp(a - top[user_ids])
    bp = jax.ops.segment_sum(r * r, user_ids, num_segments=n_users)
    norm = math.sqrt(budget) * _safety(r.dtype) / jnp.sqrt(jnp.where(bp > 0, bp, 1.0))
    w = r * norm[user_ids]
    if not traced:
        _check_result(w, "normalized_user_weights", hint)
    return w


def improvement_ratios(counts) -> tuple[float, float]:
    """Predicted gain of optimal over uniform weights (Krichene et al. 2023, Section 4).

        R0 = (m Σ_i n_i)^(1/2) / Σ_i n_i^(1/2)          (Lipschitz bounded case, γ = 0)
        R1 = (Σ_i 1/n_i)(Σ_i n_i) / m²                  (strongly convex case, γ = 1)

    Both are ≥ 1 (Cauchy-Schwarz), = 1 iff all n_i are equal; for n_1 = m^(1+ν) and the
    other n_i constant, R0 ≈ m^(ν/2) and R1 ≈ m^ν as m → ∞.

    Both ratios are scale invariant and are computed on n_i / max n and min n / n_i, so
    counts near the float limit do not overflow.
    """
    c = _counts_np(counts)
    m = len(c)
    hi, lo = c.max(), c.min()
    with np.errstate(under="ignore"):
        x = c / hi                                      # ∈ (0, 1]
        r0 = math.sqrt(m * x.sum()) / np.sqrt(x).sum()
        r1 = ((lo / c).sum() / m) * (x.sum() / m) * (hi / lo)
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


def _uniforms(seed, n: int) -> np.ndarray:
    """n per-rating random keys in [0, 1): ``seed``'s generator, or ``seed`` itself when it
    is already such a (n,) array (:func:`dpmt.data.splits.keyed_uniforms`: keys that are the
    same whichever process holds the user)."""
    if isinstance(seed, np.ndarray) and seed.dtype.kind == "f":
        if seed.shape != (n,):
            raise ConfigError(f"per-rating keys must have shape ({n},) (got {seed.shape})")
        return seed
    return _rng(seed).random(n)


def _rng(seed):
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"seed must be an int or a numpy Generator (got {seed!r}: {e})") \
            from None


def uniform_sample_weights(user_ids, k: int, seed: int | np.random.Generator | np.ndarray = 0):
    """The "uniform" baseline (Chien et al. 2021): k ratings per user sampled uniformly, weight 1.

    Σ_i w_ij² = min(k, |Ω^j|) ≤ k, so pass ``budget = k`` to the privacy accounting.
    Returns (nnz,) float64 weights in {0, 1} (empty for nnz = 0).
    """
    check_range("k", k, low=1, integer=True)
    user_ids = _ids_np("user_ids", user_ids)
    rank = _rank_within_user(user_ids, _uniforms(seed, len(user_ids)))
    return (rank < k).astype(np.float64)


def tail_weights(counts, user_ids, item_ids, k: int,
                 seed: int | np.random.Generator | np.ndarray = 0):
    """The "tail" baseline (Chien et al. 2021): each user's k least popular items, weight 1.

    Popularity is ``counts`` (use *private* counts: the selection reads them, so they must
    already be a charged release; ties broken at random). Σ_i w_ij² ≤ k. Item ids must be
    < len(counts); nnz = 0 gives an empty result.
    """
    check_range("k", k, low=1, integer=True)
    c = _counts_np(counts)
    user_ids = _ids_np("user_ids", user_ids)
    item_ids = _ids_np("item_ids", item_ids, len(c), "tasks (len(counts))")
    _same_length(user_ids=user_ids, item_ids=item_ids)
    rank = _rank_within_user(user_ids, c[item_ids], _uniforms(seed, len(item_ids)))
    return (rank < k).astype(np.float64)
