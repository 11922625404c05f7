"""The exact discrete Gaussian (issue 24, finding 2: floating-point structure): the sampler
against the exact pmf, the tail, its PLD against dp_accounting's, the partition threshold,
and the attack of Mironov (CCS 2012) that the integer releases defeat."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from dpmt.errors import ConfigError
from dpmt.privacy import partition_threshold, private_counts, select_items
from dpmt.privacy.discrete_gaussian import (discrete_gaussian_pld, discrete_gaussian_pmf,
                                            discrete_gaussian_tail, sample_discrete_gaussian)
from dpmt.privacy.randomness import NoiseSource

SRC = NoiseSource.from_seed(2024)


def _chi_square_p(draws: np.ndarray, sigma: float) -> float:
    """Chi-square goodness of fit of integer draws to N_Z(0, σ²), on bins of consecutive
    integers each holding ≥ 50 expected draws (the tails merged)."""
    n = len(draws)
    lo, hi = int(draws.min()) - 1, int(draws.max()) + 1
    R = max(abs(lo), abs(hi), int(12 * sigma) + 2)
    xs = np.arange(-R, R + 1)
    p = discrete_gaussian_pmf(sigma, xs)
    p = p / p.sum()
    edges, acc = [], 0.0                  # bins [edges[i], edges[i+1]) over xs indices
    start = 0
    for i, pi in enumerate(p):
        acc += pi
        if acc * n >= 50 and (1.0 - p[: i + 1].sum()) * n >= 50:
            edges.append((start, i + 1))
            start, acc = i + 1, 0.0
    edges.append((start, len(xs)))
    expected = np.array([p[a:b].sum() for a, b in edges]) * n
    idx = np.clip(draws + R, 0, len(xs) - 1)
    bin_of = np.empty(len(xs), dtype=int)
    for j, (a, b) in enumerate(edges):
        bin_of[a:b] = j
    observed = np.bincount(bin_of[idx], minlength=len(edges))
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


@pytest.mark.parametrize("sigma", [0.7, 3.0, 40.0])
def test_sampler_matches_the_exact_pmf(sigma):
    draws = sample_discrete_gaussian(sigma, 30_000, SRC.random(f"pmf/{sigma}"))
    assert draws.dtype == np.int64
    # fixed bits: deterministic; at a 1e-4 level this is the usual goodness-of-fit check
    assert _chi_square_p(draws, sigma) > 1e-4
    # ... and the check has power: the same draws against σ·1.1 are rejected
    assert _chi_square_p(draws, 1.1 * sigma) < 1e-6
    # symmetric, and the variance is the exact pmf's (≈ σ² less a tiny amount)
    xs = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3)
    var = float(np.sum(discrete_gaussian_pmf(sigma, xs) * xs.astype(float) ** 2))
    chi = (len(draws) - 1) * draws.var(ddof=1) / var
    lo, hi = stats.chi2.ppf([5e-6, 1 - 5e-6], len(draws) - 1)
    assert lo < chi < hi


def test_sampler_is_exact_integer_arithmetic_from_its_bit_source():
    a = sample_discrete_gaussian(5.0, 200, SRC.random("same"))
    b = sample_discrete_gaussian(5.0, 200, SRC.random("same"))
    c = sample_discrete_gaussian(5.0, 200, SRC.random("other"))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert sample_discrete_gaussian(7, 3, SRC.random("int sigma")).dtype == np.int64
    assert len(sample_discrete_gaussian(2.5, 0, SRC.random("none"))) == 0
    # a tiny σ puts (almost) all mass at 0; a huge one still works on integers
    assert np.all(sample_discrete_gaussian(1e-3, 100, SRC.random("tiny")) == 0)
    big = sample_discrete_gaussian(1e7, 2000, SRC.random("big"))
    assert 0.9e7 < big.std() < 1.1e7
    for bad in (0.0, -1.0, math.inf, math.nan, True):
        with pytest.raises(ConfigError):
            sample_discrete_gaussian(bad, 3, SRC.random("bad"))
    with pytest.raises(ConfigError, match="random.Random"):
        sample_discrete_gaussian(1.0, 3, np.random.default_rng(0))


@pytest.mark.parametrize("sigma", [0.7, 3.0, 40.0])
def test_tail_is_the_normalised_pmf_summed(sigma):
    R = int(60 * sigma) + 5
    w = [math.exp(-x * x / (2 * sigma * sigma)) for x in range(-R, R + 1)]
    norm = math.fsum(w)
    for t in (-3, 0, 1, 2, int(2 * sigma), int(6 * sigma) + 1):
        exact = math.fsum(w[t + R:]) / norm
        assert discrete_gaussian_tail(sigma, t) == pytest.approx(exact, rel=1e-12, abs=1e-300)
    assert discrete_gaussian_tail(sigma, 0) + discrete_gaussian_tail(sigma, 1) == \
        pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ConfigError):
        discrete_gaussian_tail(sigma, 0.5)


# -- the attack of issue 24 --------------------------------------------------------------------
def _float32_leak(n_hat: np.ndarray, h: np.ndarray, sigma: float) -> np.ndarray:
    """The reviewer's test: for h' ∈ {h−1, h, h+1}, is (n̂ − h')/σ exactly a float32 after
    float64 arithmetic? True where exactly one candidate passes and it is the true h."""
    def is_f32(x):
        return np.float64(np.float32(x)) == x

    passes = np.stack([is_f32((np.asarray(n_hat, np.float64) - (h + d)) / sigma)
                       for d in (-1, 0, 1)])
    return (passes.sum(axis=0) == 1) & passes[1]


@pytest.mark.parametrize("sigma", [3.0, 50.0])
def test_the_float32_attack_no_longer_identifies_the_count(sigma):
    n_items = 3000
    rng = np.random.default_rng(7)
    h_items = rng.integers(1, 400, n_items)
    users = np.concatenate([np.arange(c) for c in h_items])      # user j rates items …
    items = np.repeat(np.arange(n_items), h_items)
    h = np.bincount(items, minlength=n_items).astype(np.float64)
    # the old release: h + σ·z with z a float32 normal upcast to float64
    z32 = rng.standard_normal(n_items).astype(np.float32).astype(np.float64)
    old = h + sigma * z32
    assert _float32_leak(old, h, sigma).mean() > 0.99            # the attack was real
    # the new release: integers, exact discrete Gaussian noise
    k = int(np.bincount(users).max())                             # no user capped
    new, _ = private_counts(users, items, n_items, k=k, noise_std=sigma,
                            cap_rng=SRC.numpy_rng("attack/cap"),
                            noise_rng=SRC.random(f"attack/noise/{sigma}"))
    assert new.dtype == np.int64
    # the attack now picks the candidate h' with n̂ − h' ≡ 0 (mod the odd part of σ) — a
    # function of the noise alone, right for one candidate in three at best
    success = _float32_leak(new, h, sigma).mean()
    chance = 1.0 / 3.0
    assert success < chance + 5 * math.sqrt(chance * (1 - chance) / n_items), success


# -- the PLD -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma,step", [(3.0, 1), (50.0, 1), (40.0, 7)])
def test_one_coordinate_pld_is_dp_accountings(sigma, step):
    """One coordinate, no composition: the same privacy-buckets PLD as dp_accounting's
    from_discrete_gaussian_mechanism, up to one grid step (ours never rounds a loss down)."""
    h = 1e-3
    ours = discrete_gaussian_pld(sigma, step, 1, h)
    ref = pld_lib.from_discrete_gaussian_mechanism(sigma, sensitivity=step,
                                                   value_discretization_interval=h)
    for delta in (1e-5, 1e-8):
        e1, e2 = ours.get_epsilon_for_delta(delta), ref.get_epsilon_for_delta(delta)
        assert e2 - 1e-9 <= e1 <= e2 + 2 * h


@pytest.mark.parametrize("sigma,step,times", [(50.0, 1, 101), (5.0, 1, 31), (400.0, 9, 40)])
def test_composed_pld_is_an_upper_bound_and_tighter_than_rounding_each_coordinate(sigma, step,
                                                                                   times):
    h = 1e-3
    ours = discrete_gaussian_pld(sigma, step, times, h).get_epsilon_for_delta(1e-5)
    coarse = pld_lib.from_discrete_gaussian_mechanism(
        sigma, sensitivity=step, value_discretization_interval=h).self_compose(times)
    optimistic = pld_lib.from_discrete_gaussian_mechanism(
        sigma, sensitivity=step, value_discretization_interval=1e-5,
        pessimistic_estimate=False).self_compose(times)
    assert ours >= optimistic.get_epsilon_for_delta(1e-5) - 1e-9     # a valid upper bound
    assert ours <= coarse.get_epsilon_for_delta(1e-5) + 1e-9          # never looser
    assert ours <= optimistic.get_epsilon_for_delta(1e-5) * 1.01 + 3 * h


# -- private partition selection ----------------------------------------------------------------
@pytest.mark.parametrize("k,sigma,delta_ps", [(1, 3.0, 1e-6), (100, 50.0, 1e-6),
                                              (30, 12.5, 1e-9), (5, 0.7, 1e-3)])
def test_partition_threshold_is_the_smallest_safe_one(k, sigma, delta_ps):
    tau = partition_threshold(k, sigma, delta_ps)
    assert tau >= 2
    # an item only the added user rated has capped count 1: kept w.p. P(1 + Z ≥ τ)
    assert k * discrete_gaussian_tail(sigma, tau - 1) <= delta_ps
    assert k * discrete_gaussian_tail(sigma, tau - 2) > delta_ps
    counts = np.array([1, tau - 1, tau, tau + 5])
    np.testing.assert_array_equal(select_items(counts, tau), [False, False, True, True])
    with pytest.raises(ConfigError):
        partition_threshold(k, sigma, 0.7)


def test_dg_release_accounting_is_dp_accountings_discrete_gaussian():
    """The ledger's ε of a count release is that of dp_accounting's discrete-Gaussian PLD
    self-composed over the k+1 coordinates (up to its per-coordinate rounding)."""
    from dpmt.privacy import epsilon_of
    from dpmt.privacy.mechanisms import counts_release

    rel = counts_release(30, 25.0, include_user_count=True)
    assert (rel.coordinates, rel.step, rel.mechanism) == (31, 1, "discrete_gaussian")
    eps = epsilon_of([rel], 1e-5)
    fine = pld_lib.from_discrete_gaussian_mechanism(
        25.0, sensitivity=1, value_discretization_interval=2e-5).self_compose(31)
    assert eps == pytest.approx(fine.get_epsilon_for_delta(1e-5), rel=5e-3)
    gauss = dp_accounting.get_epsilon_gaussian(25.0 / math.sqrt(31), 1e-5)
    assert eps == pytest.approx(gauss, rel=0.03)


@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 2.5])
def test_bernoulli_exp_is_exact(gamma):
    """CKS Algorithm 1 (through the lazy exact Bernoulli) against exp(−γ): binomial test."""
    from fractions import Fraction

    from dpmt.privacy.discrete_gaussian import _Sampler

    s = _Sampler(SRC.random(f"bern/{gamma}"))
    g = Fraction(gamma)
    n = 40_000
    hits = sum(s.bernoulli_exp(g.numerator, g.denominator) for _ in range(n))
    assert stats.binomtest(hits, n, math.exp(-gamma)).pvalue > 1e-4
    # ... and can fail: the same count is far from exp(−1.1γ) (γ > 0)
    if gamma:
        assert stats.binomtest(hits, n, math.exp(-1.1 * gamma)).pvalue < 1e-6
    third = sum(s.bernoulli(1, 3) for _ in range(n))
    assert stats.binomtest(third, n, 1 / 3).pvalue > 1e-4
