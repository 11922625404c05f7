"""Private releases of simple statistics, each with the sensitivity it is charged at.

Every function here takes the noise standard deviation (from a calibration), returns the
noisy value together with the :class:`~dpmt.privacy.ledger.Release` describing it, and records
that release in ``ledger`` when one is given. The sensitivity is computed *inside* the
function that enforces it (capping / clipping), so the bound and the code that makes it true
live together. Privacy unit: one user (add/remove-one).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from dpmt.errors import DataError, check_range
from dpmt.privacy.ledger import PrivacyLedger, Release


def _key_to_rng(key: jax.Array) -> np.random.Generator:
    """A numpy Generator seeded from a JAX key (for host-side sampling of index sets)."""
    bits = np.asarray(jax.random.bits(key, (4,), dtype=np.uint32))
    return np.random.default_rng(bits)


def cap_per_user(user_ids: np.ndarray, k: int, key: jax.Array) -> np.ndarray:
    """Boolean mask keeping a uniform random sample of at most ``k`` ratings per user.

    Vectorised: one random key per rating, ranked within each user.
    """
    check_range("k", k, low=1, integer=True)
    user_ids = np.asarray(user_ids)
    rng = _key_to_rng(key)
    order = np.lexsort((rng.random(len(user_ids)), user_ids))
    u_sorted = user_ids[order]
    starts = np.r_[0, np.flatnonzero(np.diff(u_sorted)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(u_sorted)]))
    keep = np.empty(len(order), dtype=bool)
    keep[order] = (np.arange(len(order)) - run_start) < k
    return keep


def count_sensitivity(k: int, include_user_count: bool = False) -> float:
    """L2 sensitivity of the per-item histogram when each user adds ≤ k distinct items: √k;
    √(k+1) when the number of users is released as one more coordinate."""
    return math.sqrt(k + (1 if include_user_count else 0))


def private_counts(user_ids, item_ids, n_items: int, *, k: int, noise_std: float,
                   key: jax.Array, ledger: PrivacyLedger | None = None,
                   name: str = "item_counts", include_user_count: bool = False,
                   ) -> tuple[np.ndarray, Release] | tuple[np.ndarray, float, Release]:
    """Noisy task sizes n̂_i (Gaussian mechanism on the capped histogram).

    Each user is capped at k of their items by a uniform random sample (so a user changes at
    most k entries of the histogram by 1 each: L2 sensitivity √k), then
    n̂_i = max(1, n_i^cap + N(0, σ²)). Clamping at 1 is post-processing.

    Args:
      user_ids, item_ids: (nnz,) int rating coordinates (one per (user, item) pair).
      n_items: m.
      k: per-user cap (the reference uses k = β = 100).
      noise_std: σ.
      key: JAX PRNG key (sampling and noise).

    With ``include_user_count`` the number of users n is released in the same Gaussian
    mechanism as one extra coordinate (a user adds 1 to it: sensitivity √(k+1)), since the
    optimal weights' normalisation (eq. (11)) needs n and under add/remove-one n is private.

    Returns:
      ((m,) float64 noisy counts ≥ 1, [noisy user count ≥ 1,] the Release).
    """
    check_range("noise_std", noise_std, low=0.0, low_open=True)
    user_ids = np.asarray(user_ids)
    item_ids = np.asarray(item_ids)
    if len(user_ids) == 0:
        raise DataError("cannot release counts of an empty dataset")
    k_cap, k_noise = jax.random.split(key)
    keep = cap_per_user(user_ids, k, k_cap)
    hist = np.bincount(item_ids[keep], minlength=n_items).astype(np.float64)
    if include_user_count:
        hist = np.append(hist, float(len(np.unique(user_ids))))
    noise = np.asarray(jax.random.normal(k_noise, hist.shape, dtype=np.float32), np.float64)
    release = Release(name, count_sensitivity(k, include_user_count), float(noise_std))
    if ledger is not None:
        ledger.record(release)
    noisy = np.maximum(hist + noise_std * noise, 1.0)
    if include_user_count:
        return noisy[:-1], float(noisy[-1]), release
    return noisy, release


def item_sum_sensitivity(k: int, clip: float) -> float:
    """L2 sensitivity of per-item sums of labels clipped to [−c, c] when each user adds ≤ k
    distinct items: √k·c."""
    return math.sqrt(k) * float(clip)


def private_item_offsets(labels, user_ids, item_ids, n_items: int, noisy_counts, *, k: int,
                         clip: float, noise_std: float, key: jax.Array, prior_std: float = 0.4,
                         label_std: float = 1.0) -> np.ndarray:
    """Private per-item offsets b̂_i, shrunk towards 0 by the known noise, clipped to ±c.

    S̃_i = Σ_{j: kept} clip(y_ij, ±c) + N(0, σ²) over a uniform sample of ≤ k ratings per user
    (L2 sensitivity √k·c, :func:`item_sum_sensitivity`). With ñ_i the *released* noisy count,
    a N(0, τ²) prior on b_i and per-rating spread ν, the posterior mean of b_i given
    S̃_i ≈ ñ_i b_i + e_i, Var(e_i) = ñ_i ν² + σ², is

        b̂_i = ñ_i τ² S̃_i / (ñ_i² τ² + ñ_i ν² + σ²),

    so a rarely rated item, whose sum is mostly noise, gets an offset near 0. τ (``prior_std``)
    and ν (``label_std``) are public constants; σ is the release's known noise. Post-processing
    of two releases; the caller charges the sum's release. Returns float64 (n_items,).
    """
    check_range("noise_std", noise_std, low=0.0, low_open=True)
    y = np.clip(np.asarray(labels, np.float64), -clip, clip)
    item_ids = np.asarray(item_ids)
    k_cap, k_noise = jax.random.split(key)
    keep = cap_per_user(np.asarray(user_ids), k, k_cap)
    sums = np.bincount(item_ids[keep], weights=y[keep], minlength=n_items)
    sums = sums + noise_std * np.asarray(jax.random.normal(k_noise, (n_items,)), np.float64)
    n = np.maximum(np.asarray(noisy_counts, np.float64)[:n_items], 1.0)
    t2, v2 = prior_std ** 2, label_std ** 2
    return np.clip(n * t2 * sums / (n * n * t2 + n * v2 + noise_std ** 2), -clip, clip)


def private_mean(values, user_ids, *, low: float, high: float, k: int, sum_noise_std: float,
                 count_noise_std: float, key: jax.Array, ledger: PrivacyLedger | None = None,
                 name: str = "rating_mean") -> tuple[float, tuple[Release, Release]]:
    """Private global mean of ratings (for centring explicit ratings).

    Each user is capped at k ratings (uniform sample) and ratings are clipped to
    [low, high]. Adding or removing one user changes the sum by at most k·max(|low|, |high|)
    and the count by at most k, so the two Gaussian releases have L2 sensitivities
    k·r_max and k. (The reference implementation charged the sum as if each user had one
    rating — its defect 2.) The estimate is clip(S̃ / max(C̃, 1), low, high).

    Returns:
      (mean, (sum release, count release)).
    """
    check_range("high - low", high - low, low=0.0, low_open=True)
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        raise DataError("cannot release the mean of an empty dataset")
    if not np.all(np.isfinite(values)):
        raise DataError("ratings contain NaN or infinite values")
    k_cap, k_s, k_c = jax.random.split(key, 3)
    keep = cap_per_user(np.asarray(user_ids), k, k_cap)
    clipped = np.clip(values[keep], low, high)
    r_max = max(abs(low), abs(high))
    rel_sum = Release(f"{name}/sum", k * r_max, float(sum_noise_std))
    rel_cnt = Release(f"{name}/count", float(k), float(count_noise_std))
    if ledger is not None:
        ledger.record(rel_sum)
        ledger.record(rel_cnt)
    s = clipped.sum() + sum_noise_std * float(jax.random.normal(k_s))
    c = keep.sum() + count_noise_std * float(jax.random.normal(k_c))
    return float(np.clip(s / max(c, 1.0), low, high)), (rel_sum, rel_cnt)
