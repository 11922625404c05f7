"""Empirical privacy audits: the statistics (dpmt.audit), then every mechanism and its
deliberately broken twin (experiments.audits).

Each mechanism test asserts that the empirical lower bound on ε stays below the claimed ε
(at 99% confidence); each twin asserts that the same audit catches the broken mechanism
(lower bound above the claim, at 95% confidence). Seeds are fixed, so every test is
deterministic; the false-failure rates stated in the comments are over the choice of seed,
measured with ``scripts/privacy_audit.py``-style repeats
(``experiments.audits.repeat_rates``) over seeds 0..99 at the default sizes here, plus the
guarantee where one exists.

Sizes: 4,000 releases per dataset (Mirror: 10,000, it is cheap and its twin needs the
power); the ``slow`` versions use 50,000.
"""

import functools
import math

import numpy as np
import pytest
from scipy import stats

from dpmt import audit
from dpmt.errors import ConfigError
from experiments import audits

PASS_CONF = 0.99    # real mechanisms: false failure <= 1% guaranteed (Clopper-Pearson)
TWIN_CONF = 0.95    # broken twins: "caught" means the violation is shown at 95% confidence
TRIALS = {"ssp_A": 4000, "ssp_b": 4000, "noisy_gd": 4000, "counts": 4000,
          "counts_many": 4000, "mirror": 10_000, "combiner": 4000, "spectral_init": 4000}
FULL = 50_000

_KW = {"ssp_A": (audits.audit_ssp, {"statistic": "A"}),
       "ssp_b": (audits.audit_ssp, {"statistic": "b"}),
       "noisy_gd": (audits.audit_noisy_gd, {}),
       "counts": (audits.audit_counts, {}),
       "counts_many": (audits.audit_counts, {"canary_items": 200}),
       "mirror": (audits.audit_mirror, {}),
       "combiner": (audits.audit_combiner, {}),
       "spectral_init": (audits.audit_spectral_init, {})}


@functools.lru_cache(maxsize=None)
def run(name: str, broken: bool, trials: int | None = None) -> audit.AuditResult:
    fn, kw = _KW[name]
    return fn(trials or TRIALS[name], broken=broken,
              confidence=TWIN_CONF if broken else PASS_CONF, seed=0, **kw)


# ------------------------------------------------------------------------------------------
# The harness
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k,n", [(0, 50), (1, 50), (17, 50), (49, 50), (50, 50), (3, 4000)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    # one-sided bounds at alpha are the ends of the two-sided exact interval at 2*alpha
    alpha = 0.025
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
    assert audit.clopper_pearson_lower(k, n, alpha) == pytest.approx(ci.low, abs=1e-12)
    assert audit.clopper_pearson_upper(k, n, alpha) == pytest.approx(ci.high, abs=1e-12)


def _rr_scores(eps, n, rng):
    """Randomised response: exactly eps-DP (delta = 0) one-bit releases."""
    p = math.exp(eps) / (1 + math.exp(eps))
    return (rng.random(n) < p).astype(float), (rng.random(n) < 1 - p).astype(float)


def test_bound_is_a_valid_lower_bound_on_randomised_response():
    # 200 independent audits of a mechanism whose true epsilon is exactly 1: at 95%
    # confidence at most ~5% may exceed 1. False failure (more than 25 of 200 exceed):
    # P[Bin(200, 0.05) > 25] < 1e-3, and far less since exceeding needs both CP bounds to fail.
    rng = np.random.default_rng(0)
    over = 0
    for _ in range(200):
        s_in, s_out = _rr_scores(1.0, 2000, rng)
        over += audit.epsilon_lower_bound(s_in, s_out, 0.0).lower > 1.0
    assert over <= 25


def test_bound_has_power_on_randomised_response():
    # 50,000 trials per side certify most of eps = 1 (CP half-width ~0.01 on each
    # probability); false failure: the bound falls below 0.9 with probability < 1e-6.
    s_in, s_out = _rr_scores(1.0, 50_000, np.random.default_rng(1))
    b = audit.epsilon_lower_bound(s_in, s_out, 0.0)
    assert 0.9 <= b.lower <= 1.0 <= b.ci[1]
    assert b.estimate == pytest.approx(1.0, abs=0.05)


def test_identical_distributions_certify_nothing():
    # true epsilon 0; a bound above 0.3 needs a 35% relative error in a probability
    # estimated from >= 100 events: false failure < 1e-6.
    rng = np.random.default_rng(2)
    b = audit.epsilon_lower_bound(rng.normal(size=4000), rng.normal(size=4000), 1e-5)
    assert b.lower < 0.3


def _gdp_epsilon(mu, delta):
    """Exact epsilon(delta) of mu-GDP (Dong, Roth & Su 2019, Corollary 2.13)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    d = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    return brentq(d, 0.0, 100.0)


def test_gaussian_bound_respects_the_exact_trade_off():
    # N(mu, 1) vs N(0, 1) is exactly mu-GDP; its epsilon(delta) bounds any valid lower bound.
    mu, delta = 2.0, 1e-5
    rng = np.random.default_rng(3)
    b = audit.epsilon_lower_bound(rng.normal(mu, 1, 20_000), rng.normal(0, 1, 20_000), delta)
    true_eps = _gdp_epsilon(mu, delta)                       # 10.0
    # 2.0: power (the best test at this size certifies ~3); false failure < 1e-6
    assert 2.0 < b.lower < true_eps
    assert b.event in ("in:ge", "out:lt")    # the natural direction is chosen


def test_bonferroni_over_candidates_and_negated_scores():
    rng = np.random.default_rng(4)
    s_in, s_out = rng.normal(-2, 1, 5000), rng.normal(0, 1, 5000)   # canary lowers the score
    one = audit.epsilon_lower_bound(s_in, s_out, 1e-5)
    three = audit.epsilon_lower_bound(s_in, s_out, 1e-5, n_candidates=3)
    assert one.event in ("out:ge", "in:lt") and one.lower > 1.5
    assert "Bonferroni over 3" in three.strategy and three.lower > 1.5


def test_harness_rejects_bad_input():
    x = np.zeros(100)
    with pytest.raises(ConfigError, match="NaN"):
        audit.epsilon_lower_bound(np.r_[x, np.nan], x, 1e-5)
    with pytest.raises(ConfigError, match="too few trials"):
        audit.epsilon_lower_bound(x[:10], x[:10], 1e-5)
    with pytest.raises(ConfigError, match="delta"):
        audit.epsilon_lower_bound(x, x, 1.0)
    with pytest.raises(ConfigError, match="confidence"):
        audit.epsilon_lower_bound(x, x, 1e-5, confidence=1.0)
    with pytest.raises(ConfigError, match="trials"):
        audits.audit_mirror(10)


def test_bernoulli_llr_matches_direct_computation():
    p_in = np.array([0.0, 0.3, 0.5, 1.0, 0.2, 0.6])
    p_out = np.array([0.1, 0.3, 0.4, 0.9, 0.2, 1.0])
    bits = np.array([[0, 1, 1, 1, 0, 1],     # possible under both
                     [0, 0, 0, 0, 1, 1],     # a 0 where p_in = 1: impossible under "in"
                     [1, 0, 1, 1, 0, 1],     # a 1 where p_in = 0: impossible under "in"
                     [0, 1, 0, 1, 1, 0]])    # a 0 where p_out = 1: impossible under "out"
    llr = audit.bernoulli_llr(bits, p_in, p_out)
    direct = sum(math.log((pi if x else 1 - pi) / (po if x else 1 - po))
                 for x, pi, po in zip(bits[0], p_in, p_out))
    assert llr[0] == pytest.approx(direct)
    assert llr[1] < -1e5 and llr[2] < -1e5 and llr[3] > 1e5


# ------------------------------------------------------------------------------------------
# Mechanisms and their broken twins
#
# False-failure rates, over the choice of seed (measured with experiments.audits.repeat_rates
# on the same datasets: 100 seeds for Mirror/Combiner, 40 for the others; bound mean ± sd):
#   real audits (fail if bound > claim): guaranteed <= 1% by Clopper-Pearson (99%, held-out
#     threshold) whatever the mechanism's true epsilon up to the claim; measured 0 failures,
#     bounds SSP A 0.43 ± 0.20, SSP b 0.47 ± 0.14, GD 0.45 ± 0.23, counts 0.45 ± 0.21 (claims
#     2.0), Mirror 0.16 ± 0.09 (claim 1.0), Combiner 0.00 ± 0.01 (claim 2.0): the claims are
#     >= 6 sd away, so the actual rate is far below 1%.
#   twins (fail if bound <= claim): measured 0 misses, bounds SSP A 5.92 ± 0.32, SSP b
#     5.88 ± 0.32, counts 5.63 ± 0.31, Combiner 4.08 ± 0.34 (claims 2.0; >= 6 sd margin,
#     rate < 1e-9 under a normal approximation), GD 6.29 ± 0 (the bound's ceiling at 2,000
#     held-out trials: no false positive is possible at that separation), Mirror 2.35 ± 0.33
#     at 10,000 trials (claim 1.0; 4 sd, rate ~3e-5 under a normal approximation).
#   spectral start (30 seeds, claim 2.0): real 0.47 ± 0.19 (max 0.80), twin 4.82 ± 0.33
#     (min 4.21): 0 failures, 0 misses.
# ------------------------------------------------------------------------------------------
def _moderate(r):
    assert 0.9 <= r.claimed_epsilon <= 4.0 and 0 < r.delta <= 1e-5


@pytest.mark.parametrize("stat", ["A", "b"])
def test_ssp_item_step_audit(stat):
    r = run(f"ssp_{stat}", False)
    _moderate(r)
    # the canary is as influential as the sensitivity bound allows
    assert r.details["canary_norm_over_sensitivity"] == pytest.approx(1.0, abs=1e-5)
    assert r.epsilon_lb <= r.claimed_epsilon, r.summary()


@pytest.mark.parametrize("stat", ["A", "b"])
def test_ssp_audit_catches_noise_10x_too_small(stat):
    r = run(f"ssp_{stat}", True)
    assert r.epsilon_lb > r.claimed_epsilon, r.summary()


def test_noisy_gd_audit():
    r = run("noisy_gd", False)
    _moderate(r)
    assert r.details["canary_gradient_norm"] > 1e4            # clipped from ~2e6 ...
    assert r.details["canary_contribution_norm"] == pytest.approx(1.0, rel=1e-4)  # ... to G
    assert r.epsilon_lb <= r.claimed_epsilon, r.summary()


def test_noisy_gd_audit_catches_disabled_clipping():
    r = run("noisy_gd", True)
    assert r.details["canary_contribution_norm"] > 1e5
    assert r.epsilon_lb > r.claimed_epsilon, r.summary()


@pytest.mark.parametrize("name", ["counts", "counts_many"])
def test_private_counts_audit(name):
    # "counts": canary rates k = 2 items (contribution exactly the sensitivity sqrt(k+1));
    # "counts_many": the twin's canary (200 items) against the correct per-user cap
    r = run(name, False)
    _moderate(r)
    assert r.details["sensitivity"] == pytest.approx(math.sqrt(3))
    assert r.epsilon_lb <= r.claimed_epsilon, r.summary()


def test_private_counts_audit_catches_disabled_cap():
    r = run("counts", True)
    assert r.details["canary_items"] == 200
    assert r.epsilon_lb > r.claimed_epsilon, r.summary()


def test_spectral_init_audit():
    # the spectral start's noisy co-occurrence: a one-item canary moves the upper triangle by
    # exactly the sensitivity 1
    r = run("spectral_init", False)
    _moderate(r)
    assert r.details["canary_norm_over_sensitivity"] == pytest.approx(1.0, abs=1e-6)
    assert r.epsilon_lb <= r.claimed_epsilon, r.summary()


def test_spectral_init_audit_catches_dropped_normalisation():
    r = run("spectral_init", True)
    assert r.details["canary_norm_over_sensitivity"] > 5        # 8 items, x_jk = 1: √36
    assert r.epsilon_lb > r.claimed_epsilon, r.summary()


def test_mirror_audit():
    r = run("mirror", False)
    _moderate(r)
    assert r.epsilon_lb <= r.claimed_epsilon, r.summary()


def test_mirror_audit_catches_too_short_ramp():
    r = run("mirror", True)
    assert r.details["W"] < run("mirror", False).details["W"] / 10
    assert r.epsilon_lb > r.claimed_epsilon, r.summary()


def test_combiner_audit():
    r = run("combiner", False)
    _moderate(r)
    assert r.details["D_used"] == r.details["D_required"]
    assert r.epsilon_lb <= r.claimed_epsilon, r.summary()


def test_combiner_audit_catches_understated_D():
    r = run("combiner", True)
    assert r.epsilon_lb > r.claimed_epsilon, r.summary()


def test_table_lists_every_audit():
    pairs = [(run(n, False), run(n, True)) for n in ("ssp_A", "counts", "mirror")]
    table = audit.format_table(pairs)
    assert table.count("ok / caught") == 3
    for r, t in pairs:
        assert r.mechanism in table and t.break_kind in table
    assert "held-out split" in table


# ------------------------------------------------------------------------------------------
# Full size (make test-slow). False-failure rates: as above or smaller (more trials give
# the real audits tighter bounds below the same truth, and the twins more power).
# ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_KW))
def test_full_size_audit_and_twin(name):
    real, twin = run(name, False, FULL), run(name, True, FULL)
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()


@pytest.mark.slow
def test_full_size_poisson_sampled_gd():
    # DP-SGD variant: Poisson sampling q = 0.5 amplifies privacy; the claim is the
    # subsampled Gaussian's epsilon (PoissonSampledDpEvent). The same clipping break.
    real = audits.audit_noisy_gd(FULL, sampling_rate=0.5, confidence=PASS_CONF)
    twin = audits.audit_noisy_gd(FULL, sampling_rate=0.5, broken=True, confidence=TWIN_CONF)
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()


@pytest.mark.slow
def test_full_size_counts_without_user_count():
    real = audits.audit_counts(FULL, include_user_count=False, confidence=PASS_CONF)
    twin = audits.audit_counts(FULL, include_user_count=False, broken=True,
                               confidence=TWIN_CONF)
    assert real.details["sensitivity"] == pytest.approx(math.sqrt(2))
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()
