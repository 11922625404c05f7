"""Private releases of simple statistics, each with the sensitivity it is charged at.

Every function here takes the noise (from a calibration), returns the noisy value together
with the :class:`~dpmt.privacy.ledger.Release` describing it (or, for the item offsets, the
post-processed offsets; :func:`item_offsets_release` is their release), and records that
release in ``ledger`` when one is given. The sensitivity is computed *inside* the module that
enforces it (capping / clipping / the lattice), so the bound and the code that makes it true
live together; the plan (:mod:`dpmt.train.plan`) builds its releases with the same functions.
Privacy unit: one user (add/remove-one).

**Integer releases (issue 24).** Every statistic published directly is an integer plus exact
discrete Gaussian noise (:mod:`dpmt.privacy.discrete_gaussian`, Canonne, Kamath & Steinke,
NeurIPS 2020), so a release has no floating-point structure that could reveal the exact
value (Mironov, CCS 2012): the item counts and the user count are integers; the rating sum
and the per-item label sums are first put on a public lattice — each value is rounded to a
multiple of 2^(−b) (:func:`lattice_bits`) and summed as an integer number of lattice units.
The rounding is stochastic and unbiased (⌊v⌋ + Bernoulli(v − ⌊v⌋) in lattice units, coins from
the capping stream): it changes no sensitivity (a rounded value stays within the clipped
range's lattice bound) and adds a variance ≤ 1/4 lattice unit² per value instead of a bias.
Estimates made from the noisy integers (the mean, the shrunk offsets) are post-processing.
"""

from __future__ import annotations

import math
import random

import numpy as np

from dpmt.data.splits import cap_mask
from dpmt.errors import ConfigError, DataError, check_range
from dpmt.privacy.discrete_gaussian import discrete_gaussian_tail, sample_discrete_gaussian
from dpmt.privacy.ledger import PrivacyLedger, Release

DISCRETE_GAUSSIAN = "discrete_gaussian"

#: the lattice: a release summed on the lattice 2^(−b) has a per-user L2 sensitivity of at
#: most this many lattice units (b the largest integer in [0, MAX_LATTICE_BITS] that keeps
#: it so). It bounds the discrete Gaussian's σ in lattice units (≈ z·4096), which keeps the
#: accountant's tables small, while the lattice stays fine: 1/128 for labels clipped to ±2
#: with k = 100, 1/8 for ratings in [1, 5] with k = 100.
LATTICE_TARGET = 4096
MAX_LATTICE_BITS = 20


def lattice_bits(per_user_bound: float) -> int:
    """b for a statistic whose per-user L2 bound is ``per_user_bound`` (in value units): the
    largest b ∈ [0, MAX_LATTICE_BITS] with per_user_bound·2^b ≤ :data:`LATTICE_TARGET`
    (0 when even b = 0 exceeds it). Public: depends on public constants only."""
    check_range("per-user bound", per_user_bound, low=0.0, low_open=True)
    b = math.floor(math.log2(LATTICE_TARGET / float(per_user_bound)))
    b = max(0, min(MAX_LATTICE_BITS, b))
    while b > 0 and per_user_bound * 2.0 ** b > LATTICE_TARGET:   # log2 rounding
        b -= 1
    return b


def to_lattice(values, bits: int, rng: np.random.Generator) -> np.ndarray:
    """``values`` in units of 2^(−bits), rounded stochastically and without bias to int64:
    ⌊v⌋ + Bernoulli(v − ⌊v⌋) (scaling by a power of two is exact in float64)."""
    q = np.ldexp(np.asarray(values, dtype=np.float64), int(bits))
    f = np.floor(q)
    return (f + (rng.random(q.shape) < (q - f))).astype(np.int64)


def _key_to_rng(key) -> np.random.Generator:
    """A numpy Generator seeded from a JAX key (legacy callers of :func:`cap_per_user`)."""
    import jax

    bits = np.asarray(jax.random.bits(key, (4,), dtype=np.uint32))
    return np.random.default_rng(bits)


def _as_generator(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, random.Random):
        raise ConfigError("capping takes a numpy Generator (NoiseSource.numpy_rng(label)), "
                          "not a random.Random")
    return _key_to_rng(rng)


def _as_random(rng) -> random.Random:
    if not isinstance(rng, random.Random):
        raise ConfigError("discrete Gaussian noise takes a random.Random bit source "
                          f"(NoiseSource.random(label)), got {type(rng).__name__}")
    return rng


def cap_per_user(user_ids: np.ndarray, k: int, rng) -> np.ndarray:
    """Boolean mask keeping a uniform random sample of at most ``k`` ratings per user
    (:func:`dpmt.data.splits.cap_mask`). ``rng``: a ``np.random.Generator``
    (``NoiseSource.numpy_rng(label)``), or a JAX key (converted to one). The same sample as
    a :class:`~dpmt.data.Ratings`: :func:`dpmt.data.splits.cap_ratings_per_user`."""
    return cap_mask(user_ids, k, _as_generator(rng))


# -- the item counts -----------------------------------------------------------------------------
def count_sensitivity(k: int, include_user_count: bool = False) -> float:
    """L2 sensitivity of the per-item histogram when each user adds ≤ k distinct items: √k;
    √(k+1) when the number of users is released as one more coordinate."""
    return math.sqrt(k + (1 if include_user_count else 0))


def counts_release(k: int, noise_std: float, *, name: str = "item_counts",
                   include_user_count: bool = False, delta: float = 0.0) -> Release:
    """The counts' release: discrete Gaussian, k (+1) coordinates moved by ≤ 1 each."""
    k = int(k)
    coords = k + (1 if include_user_count else 0)
    return Release(name, count_sensitivity(k, include_user_count), float(noise_std),
                   mechanism=DISCRETE_GAUSSIAN, coordinates=coords, step=1, delta=float(delta))


def private_counts(user_ids, item_ids, n_items: int, *, k: int, noise_std: float,
                   cap_rng, noise_rng: random.Random, ledger: PrivacyLedger | None = None,
                   name: str = "item_counts", include_user_count: bool = False,
                   delta: float = 0.0, minimum: int | None = 1, aggregate=None,
                   keep: np.ndarray | None = None,
                   ) -> tuple[np.ndarray, Release] | tuple[np.ndarray, int, Release]:
    """Noisy task sizes n̂_i: the capped histogram plus discrete Gaussian noise, integers.

    Each user is capped at k of their items by a uniform random sample (so a user changes at
    most k entries of the histogram by 1 each), then n̂_i = max(1, n_i^cap + Z_i), Z_i ~
    N_Z(0, σ²) exact (:func:`~dpmt.privacy.discrete_gaussian.sample_discrete_gaussian`).
    Clamping at 1 is post-processing.

    Args:
      user_ids, item_ids: (nnz,) int rating coordinates (one per (user, item) pair).
      n_items: m.
      k: per-user cap (the reference uses k = β = 100).
      noise_std: σ, the discrete Gaussian's parameter (the plan's ``counts.noise_std``).
      cap_rng: ``np.random.Generator`` for the capping (or a JAX key).
      noise_rng: ``random.Random`` bit source for the noise (``NoiseSource.random(label)``).
      delta: the release's extra δ (private partition selection, :func:`partition_threshold`).
      minimum: the released counts are clamped at it (post-processing; None: unclamped,
        what a ranking by popularity wants).
      aggregate: sharded data (each process holds only its own users, every process calls
        this with the same ``noise_rng``): the sum over the processes of the capped histogram
        (:func:`dpmt.solvers.collectives.process_sum`), applied before the one noise draw. A
        user is in one process, so the sensitivity is unchanged.
      keep: a boolean (nnz,) cap mask to use instead of sampling one with ``cap_rng``
        (:func:`dpmt.data.splits.keyed_cap_mask`, the same on any split of the users);
        checked: a mask that keeps more than k ratings of a user is refused.

    With ``include_user_count`` the number of users n is released in the same mechanism as
    one extra coordinate (a user adds 1 to it), since the optimal weights' normalisation
    (eq. (11)) needs n and under add/remove-one n is private.

    Returns:
      ((m,) int64 noisy counts ≥ 1, [int noisy user count ≥ 1,] the Release: discrete
      Gaussian, k (+1) coordinates, step 1, L2 sensitivity √k (√(k+1))).
    """
    check_range("noise_std", noise_std, low=0.0, low_open=True)
    user_ids = np.asarray(user_ids)
    item_ids = np.asarray(item_ids)
    if len(user_ids) == 0:
        raise DataError("cannot release counts of an empty dataset")
    noise_rng = _as_random(noise_rng)
    if keep is None:
        keep = cap_per_user(user_ids, k, cap_rng)
    else:
        keep = np.asarray(keep)
        if keep.dtype != bool or keep.shape != user_ids.shape:
            raise DataError(f"keep must be a boolean mask of shape {user_ids.shape}")
        if keep.any() and int(np.bincount(user_ids[keep]).max()) > k:
            raise DataError(f"keep keeps more than k = {k} ratings of a user: the counts' "
                            "sensitivity would not hold")
    hist = np.bincount(item_ids[keep], minlength=n_items).astype(np.int64)
    if include_user_count:
        hist = np.append(hist, np.int64(len(np.unique(user_ids))))
    if aggregate is not None:
        hist = np.asarray(aggregate(hist), np.int64)
    release = counts_release(k, noise_std, name=name, include_user_count=include_user_count,
                             delta=delta)
    if ledger is not None:
        ledger.record(release)
    noisy = hist + sample_discrete_gaussian(noise_std, len(hist), noise_rng)
    if minimum is not None:
        noisy = np.maximum(noisy, minimum)
    if include_user_count:
        return noisy[:-1], int(noisy[-1]), release
    return noisy, release


# -- private partition selection ---------------------------------------------------------------
def partition_threshold(k: int, sigma: float, delta_ps: float) -> int:
    """The smallest integer τ with k·P(1 + Z ≥ τ) ≤ δ_ps, Z ~ N_Z(0, σ²).

    Private partition selection (Korolova, Kenthapadi, Mishra & Ntoulas, WWW 2009; Gopi,
    Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin, *Differentially Private Set Union*, ICML
    2020; Desfontaines, Voss, Gipson & Mandayam, *Differentially private partition
    selection*, PETS 2022): without a public item catalogue, the items released are those
    whose noisy capped count reaches τ (:func:`select_items`). An item that only the added
    user rated has count 1 in the capped histogram (0 and absent without them); the user has
    at most k such items, so the probability that any of them is kept is at most
    k·P(1 + Z ≥ τ) ≤ δ_ps. That part of the output is (0, δ_ps)-DP and independent of the
    noisy counts of the items both neighbours share (the discrete Gaussian release), so the
    counts release carries ``delta = δ_ps`` (basic composition in the ledger).

    The tail is summed from the exact pmf (:func:`~dpmt.privacy.discrete_gaussian.
    discrete_gaussian_tail`). τ ≥ 2 whenever δ_ps < 1/2, so the clamp of the counts at 1
    never lets an item through.
    """
    check_range("k", k, low=1, integer=True)
    check_range("sigma", sigma, low=0.0, low_open=True)
    check_range("delta_ps", delta_ps, low=0.0, high=0.5, low_open=True, high_open=True)
    k = int(k)

    def ok(u: int) -> bool:                     # u = τ − 1: k·P(Z ≥ u) ≤ δ_ps
        return k * discrete_gaussian_tail(sigma, u) <= delta_ps

    lo, hi = 0, 1                               # not ok(0): k·P(Z ≥ 0) > k/2 > δ_ps
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi + 1


def select_items(noisy_counts, threshold: int) -> np.ndarray:
    """The items kept by private partition selection: noisy count ≥ ``threshold``
    (:func:`partition_threshold`). Post-processing of the counts release."""
    return np.asarray(noisy_counts) >= int(threshold)


# -- the rating mean -----------------------------------------------------------------------------
def mean_lattice(k: int, low: float, high: float) -> tuple[int, int]:
    """(b, step) of the rating sum: ratings clipped to [low, high] on the lattice 2^(−b)
    (b = :func:`lattice_bits` of k·max(|low|, |high|)), so one rating is at most
    L = ⌈max(|low|, |high|)·2^b⌉ lattice units and one user's ≤ k ratings move the sum by at
    most step = k·L."""
    check_range("k", k, low=1, integer=True)
    check_range("high - low", high - low, low=0.0, low_open=True)
    r_max = max(abs(float(low)), abs(float(high)))
    if r_max == 0:
        raise ConfigError("the rating range must not be [0, 0]")
    b = lattice_bits(int(k) * r_max)
    return b, int(k) * int(math.ceil(math.ldexp(r_max, b)))


def mean_releases(k: int, low: float, high: float, sum_noise_std: float,
                  count_noise_std: float, name: str = "rating_mean") -> tuple[Release, Release]:
    """The mean's two discrete Gaussian releases: the sum in lattice units (one coordinate,
    step k·L: :func:`mean_lattice`) and the count of kept ratings (one coordinate, step k)."""
    _, step = mean_lattice(k, low, high)
    rel_sum = Release(f"{name}/sum", float(step), float(sum_noise_std),
                      mechanism=DISCRETE_GAUSSIAN, coordinates=1, step=step)
    rel_cnt = Release(f"{name}/count", float(k), float(count_noise_std),
                      mechanism=DISCRETE_GAUSSIAN, coordinates=1, step=int(k))
    return rel_sum, rel_cnt


def private_mean(values, user_ids, *, low: float, high: float, k: int, sum_noise_std: float,
                 count_noise_std: float, cap_rng, noise_rng: random.Random,
                 ledger: PrivacyLedger | None = None, name: str = "rating_mean",
                 ) -> tuple[float, tuple[Release, Release]]:
    """Private global mean of ratings (for centring explicit ratings).

    Each user is capped at k ratings (uniform sample), ratings are clipped to [low, high]
    and put on the lattice 2^(−b) (:func:`mean_lattice`, unbiased stochastic rounding).
    Adding or removing one user changes the lattice sum by at most step = k·L and the count
    by at most k, so the two discrete Gaussian releases are S̃ = Σ + Z_S (σ = ``sum_noise_std``,
    in lattice units) and C̃ = count + Z_C (σ = ``count_noise_std``). (The reference
    implementation charged the sum as if each user had one rating — its defect 2.) The
    estimate clip(2^(−b)·S̃ / max(C̃, 1), low, high) is post-processing of the two integers.

    Returns:
      (mean, (sum release, count release)).
    """
    check_range("sum_noise_std", sum_noise_std, low=0.0, low_open=True)
    check_range("count_noise_std", count_noise_std, low=0.0, low_open=True)
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        raise DataError("cannot release the mean of an empty dataset")
    if not np.all(np.isfinite(values)):
        raise DataError("ratings contain NaN or infinite values")
    bits, step = mean_lattice(k, low, high)
    rel_sum, rel_cnt = mean_releases(k, low, high, sum_noise_std, count_noise_std, name)
    noise_rng = _as_random(noise_rng)
    gen = _as_generator(cap_rng)
    keep = cap_per_user(np.asarray(user_ids), k, gen)
    unit = step // int(k)
    lat = np.clip(to_lattice(np.clip(values[keep], low, high), bits, gen), -unit, unit)
    if ledger is not None:
        ledger.record(rel_sum)
        ledger.record(rel_cnt)
    s = int(lat.sum()) + int(sample_discrete_gaussian(sum_noise_std, 1, noise_rng)[0])
    c = int(keep.sum()) + int(sample_discrete_gaussian(count_noise_std, 1, noise_rng)[0])
    mean = math.ldexp(s, -bits) / max(c, 1)
    return float(np.clip(mean, low, high)), (rel_sum, rel_cnt)


# -- the item offsets ----------------------------------------------------------------------------
def offsets_lattice(k: int, clip: float) -> tuple[int, int]:
    """(b, step) of the per-item label sums: labels clipped to ±c on the lattice 2^(−b)
    (b = :func:`lattice_bits` of √k·c), one label at most step = ⌈c·2^b⌉ lattice units."""
    check_range("k", k, low=1, integer=True)
    check_range("clip", clip, low=0.0, low_open=True)
    b = lattice_bits(math.sqrt(int(k)) * float(clip))
    return b, int(math.ceil(math.ldexp(float(clip), b)))


def item_sum_sensitivity(k: int, clip: float) -> float:
    """L2 sensitivity, in lattice units (:func:`offsets_lattice`), of the per-item sums of
    labels clipped to ±c when each user adds ≤ k distinct items: √k·step."""
    return math.sqrt(int(k)) * offsets_lattice(k, clip)[1]


def item_offsets_release(k: int, clip: float, noise_std: float,
                         name: str = "item_offsets") -> Release:
    """The per-item label sums' release: discrete Gaussian, k coordinates moved by ≤ step
    lattice units each (σ = ``noise_std`` in lattice units)."""
    _, step = offsets_lattice(k, clip)
    return Release(name, item_sum_sensitivity(k, clip), float(noise_std),
                   mechanism=DISCRETE_GAUSSIAN, coordinates=int(k), step=step)


def private_item_offsets(labels, user_ids, item_ids, n_items: int, noisy_counts, *, k: int,
                         clip: float, noise_std: float, cap_rng, noise_rng: random.Random,
                         label_std: float = 1.0) -> np.ndarray:
    """Private per-item offsets b̂_i, shrunk by the known noise towards a popularity prior,
    clipped to ±c.

    Labels are clipped to ±c and put on the lattice 2^(−b) (:func:`offsets_lattice`,
    unbiased stochastic rounding); over a uniform sample of ≤ k ratings per user the per-item
    sums in lattice units get discrete Gaussian noise of parameter σ (``noise_std``, lattice
    units; the release is :func:`item_offsets_release`: k coordinates, step ⌈c·2^b⌉). In
    label units S̃_i = 2^(−b)·(Σ_{j: kept} y_ij + Z_i) and the noise is σ_y = 2^(−b)·σ. The
    offsets are :func:`shrunk_offsets` of S̃ and the *released* noisy counts ñ_i with that
    σ_y: post-processing of two releases; the caller charges the sums' release. Returns
    float64 (n_items,).
    """
    check_range("noise_std", noise_std, low=0.0, low_open=True)
    bits, step = offsets_lattice(k, clip)
    noise_rng = _as_random(noise_rng)
    gen = _as_generator(cap_rng)
    y = np.clip(np.asarray(labels, np.float64), -clip, clip)
    item_ids = np.asarray(item_ids)
    keep = cap_per_user(np.asarray(user_ids), k, gen)
    lat = np.clip(to_lattice(y[keep], bits, gen), -step, step)
    sums = np.rint(np.bincount(item_ids[keep], weights=lat, minlength=n_items)).astype(np.int64)
    noisy = sums + sample_discrete_gaussian(noise_std, len(sums), noise_rng)
    s = np.ldexp(noisy.astype(np.float64), -bits)[:n_items]
    sigma_y = math.ldexp(float(noise_std), -bits)
    return shrunk_offsets(s, noisy_counts[:n_items], sigma_y, clip, label_std=label_std)


def shrunk_offsets(noisy_sums, noisy_counts, sigma: float, clip: float,
                   label_std: float = 1.0, rounds: int = 20) -> np.ndarray:
    """Empirical-Bayes offsets from released per-item label sums S̃_i and counts ñ_i.

    Model: S̃_i | b_i ~ N(ñ_i b_i, V_i), V_i = ñ_i ν² + σ² (ν = ``label_std`` the spread of
    one label, σ = ``sigma`` the sums' known noise, in label units), and a prior
    b_i ~ N(a + g·log ñ_i, τ²) — popular items are rated differently from rare ones (higher,
    on MovieLens), so an item whose sum is mostly noise gets the offset of items as popular
    as it, not 0. (a, g, τ²) are fitted to the released values themselves by weighted least
    squares and the method of moments (``rounds`` alternations), and b̂_i is the posterior
    mean (τ² ñ_i S̃_i + V_i m_i) / (τ² ñ_i² + V_i), clipped to ±c. Only released values and
    public constants enter: post-processing, no privacy cost. float64 (m,).
    """
    S = np.asarray(noisy_sums, np.float64)
    n = np.maximum(np.asarray(noisy_counts, np.float64), 1.0)
    V = n * float(label_std) ** 2 + float(sigma) ** 2
    x = np.log(n)
    X = np.stack([n, n * x], 1)                     # S ≈ ñ (a + g log ñ) + noise
    coef, t2 = np.zeros(2), 0.1
    for _ in range(rounds):
        w = 1.0 / (n * n * t2 + V)
        XtW = X.T * w
        coef = np.linalg.solve(XtW @ X + 1e-9 * np.eye(2), XtW @ S)
        m = coef[0] + coef[1] * x
        r2 = ((S - n * m) ** 2 - V) / (n * n)       # unbiased for τ² item by item
        ww = (n * n * w) ** 2
        t2 = max(float(np.sum(ww * r2) / np.sum(ww)), 1e-4)
    m = np.clip(coef[0] + coef[1] * x, -clip, clip)
    return np.clip((t2 * n * S + V * m) / (t2 * n * n + V), -clip, clip)
