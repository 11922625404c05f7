"""Empirical privacy audits: statistical lower bounds on ε from canary membership tests.

**What an audit is.** A mechanism ``M`` is run many times on two neighbouring datasets
(privacy unit: one user, add/remove-one): ``D`` and ``D' = D + canary``, where the canary user
is built to be as influential as the claimed sensitivity bound allows. Each release is reduced
to one real *score* (a likelihood-ratio statistic for the canary, e.g. the projection of the
release onto the canary's contribution). If ``M`` is ``(ε, δ)``-DP then for every event ``S``

    P[M(D') ∈ S] ≤ e^ε P[M(D) ∈ S] + δ     and     P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] + δ,

so each threshold test ``S = {score ≥ t}`` (or ``{score < t}``) gives
``ε ≥ log((P₁(S) − δ) / P₂(S))``. With ``TPR = P[score ≥ t | D']`` and
``FPR = P[score ≥ t | D]`` this is ``ε ≥ log((1 − δ − FNR) / FPR)``, plus its mirror images
(``log((1 − δ − FPR) / FNR)`` and the two with the score negated). The probabilities are
estimated from the trials with one-sided **Clopper–Pearson** bounds (``scipy.stats.beta``),
each at ``α/2`` so that the union bound gives confidence ``1 − α`` for

    ε_lb = log((P₁_lower − δ) / P₂_upper)        (0 when P₁_lower ≤ δ).

**Threshold choice: held-out split** (:func:`epsilon_lower_bound`). Trials are i.i.d., so the
first ``selection_fraction`` of each score sample picks the test (threshold and which of the
four events) by maximising the same Clopper–Pearson bound, and the bound is then computed
*once* on the remaining trials at that test. The reported ``ε_lb`` is therefore a valid
``1 − α`` lower confidence bound with no multiple-comparison penalty over thresholds. With
``n_candidates = K > 1`` the ``K`` best tests of the selection half are all evaluated on the
held-out half with a Bonferroni correction (``α/K`` each) and the largest bound is reported.
(``jax_privacy.auditing.CanaryScoreAuditor`` offers the same Clopper–Pearson bound with a
Bonferroni correction over *every* observed threshold, ``α/(2N)``, or the same split; dpmt does
not depend on it: see ``_WHY_NOT_JAX_PRIVACY``.)

Alongside ``ε_lb`` an audit reports the point estimate ``ε̂`` at the chosen test and a two-sided
``1 − α`` interval for the ε that test certifies (Clopper–Pearson at ``α/4`` on each end of each
probability).

**Gaussian mechanisms: the GDP audit** (:func:`gdp_lower_bound`). The threshold bound is
assumption-free but weak: at 4,000 trials it missed a 2× sensitivity error (issue 24). A
Gaussian mechanism claims a whole curve: noise σ on a statistic of L2 sensitivity Δ is
exactly μ-GDP with μ = Δ/σ (Dong, Roth & Su, JRSS-B 2022): *every* test has errors on or
above ``β = Φ(Φ⁻¹(1 − α) − μ)``, and the claimed ε is that curve's ε(δ). One test's
(FPR, FNR), with Clopper–Pearson upper bounds at ``α/2`` each, gives the lower confidence
bound ``μ_lb = Φ⁻¹(1 − FPR_upper) − Φ⁻¹(FNR_upper)`` and ``ε_lb = ε(μ_lb, δ)``, the exact
ε(δ) of μ_lb-GDP (:func:`gdp_epsilon`): the GDP audit of Nasr, Hayes, Steinke, Balle,
Tramèr, Jagielski, Carlini & Terzis, "Tight Auditing of Differentially Private Machine
Learning" (USENIX Security 2023). A test in the middle of the score distribution (FPR,
FNR ≈ 0.4, known to ±0.01 from a few thousand trials) pins μ to a few hundredths, where an
(ε, δ) test needs FPR ≈ 1e-3. ``ε_lb > claimed ε`` shows (with probability ≤ α of a false
alarm) that the mechanism is not the Gaussian mechanism the claim rests on. It applies to
claims that *are* Gaussian-mechanism claims (post-processing of Gaussian noise with the
stated sensitivity/noise ratio); other mechanisms (the online ones) keep the threshold
bound. Under Poisson sampling at rate q the claim is the subsampled Gaussian's trade-off
(``N(0, 1)`` vs ``(1 − q)N(0, 1) + qN(μ, 1)``): ``μ_lb = Φ⁻¹(1 − FPR) + Φ⁻¹((TPR −
(1 − q)FPR)/q)`` at the same bounds, ε from the caller's accountant (``epsilon_of_mu``).

The per-mechanism audits fix the test in advance (``threshold`` = the midpoint of the two
*noiseless* projections, :func:`midpoint_threshold`, a function of the datasets only), so
every trial evaluates it; without one, ``selection_fraction`` of the trials choose it.
Measured power (``docs/audit_power.md``): claimed ε = 2 at δ = 1e-5 (μ = 0.50), a
sensitivity error of ×1.25 is flagged in ≥ 95% of audits at 4,000 trials per dataset
(×1.5: always), ×1.07 at 50,000.

These are the generic statistics only. The per-mechanism audits (canary datasets for SSP,
noisy GD, private counts, the spectral start, Mirror and Combine_D, each with broken twins)
are an audit harness outside the library, in ``experiments/audits.py`` (run by
``scripts/privacy_audit.py``); they reduce each release to a score and call
:func:`make_result`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy import special, stats
from scipy.optimize import brentq

from dpmt.errors import ConfigError, check_range

__all__ = [
    "AuditResult", "EpsilonBound", "GaussianBound", "clopper_pearson_lower",
    "clopper_pearson_upper", "epsilon_lower_bound", "gdp_lower_bound", "gdp_epsilon", "gdp_mu",
    "midpoint_threshold", "make_result", "format_table", "bernoulli_llr",
]

_WHY_NOT_JAX_PRIVACY = (
    "jax-privacy 2.0.0's auditing module (CanaryScoreAuditor) computes the same Clopper-Pearson "
    "bound, but importing it runs jax_privacy/__init__, which imports the whole library "
    "(matrix factorisation, noise addition, batch selection) and pulls pydantic, chex, absl and "
    "optax>=0.2.8 as dependencies; its default Bonferroni correction is over every observed "
    "threshold (alpha/(2N)), much more conservative than a held-out split. The maths needed "
    "here is ~60 lines of numpy/scipy, so dpmt implements it directly.")

# Scores of impossible events (log of a zero probability) are mapped to ±_BIG so sums stay
# finite; an event impossible under one distribution never happens in its own samples.
_BIG = 1e6


# ----------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------
def clopper_pearson_upper(k, n: int, alpha: float) -> np.ndarray:
    """One-sided ``1 − α`` Clopper–Pearson upper bound on a binomial probability from ``k``
    successes in ``n`` trials (1 when ``k = n``)."""
    k = np.asarray(k, np.float64)
    with np.errstate(invalid="ignore"):
        ub = stats.beta.ppf(1.0 - alpha, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, ub)


def clopper_pearson_lower(k, n: int, alpha: float) -> np.ndarray:
    """One-sided ``1 − α`` Clopper–Pearson lower bound (0 when ``k = 0``)."""
    k = np.asarray(k, np.float64)
    with np.errstate(invalid="ignore"):
        lb = stats.beta.ppf(alpha, np.maximum(k, 1e-300), n - k + 1)
    return np.where(k <= 0, 0.0, lb)


# The four threshold tests. For each: which sample plays P₁ (the left side of the DP
# inequality) and whether the event is {score >= t} or {score < t}.
_EVENTS = (
    ("in", "ge"),    # TPR  <= e^ε FPR + δ      (the usual one: canary present → high score)
    ("out", "lt"),   # TNR  <= e^ε FNR + δ      (its symmetric counterpart)
    ("out", "ge"),   # FPR  <= e^ε TPR + δ      (the score negated)
    ("in", "lt"),    # FNR  <= e^ε TNR + δ
)


def _event_counts(sorted_in, sorted_out, thresholds, event):
    """(k₁, n₁, k₂, n₂): counts of the event in the P₁ sample and in the P₂ sample."""
    first, side = event
    n_in, n_out = len(sorted_in), len(sorted_out)
    lt_in = np.searchsorted(sorted_in, thresholds, side="left")     # #scores < t
    lt_out = np.searchsorted(sorted_out, thresholds, side="left")
    c_in = lt_in if side == "lt" else n_in - lt_in
    c_out = lt_out if side == "lt" else n_out - lt_out
    if first == "in":
        return c_in, n_in, c_out, n_out
    return c_out, n_out, c_in, n_in


def _eps_lb(k1, n1, k2, n2, delta, alpha):
    """ε lower bound from CP bounds at α/2 on each probability (vectorised)."""
    p1 = clopper_pearson_lower(k1, n1, alpha / 2)
    p2 = clopper_pearson_upper(k2, n2, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(p1 > delta, np.log(np.maximum(p1 - delta, 1e-300)) - np.log(p2), 0.0)
    return np.maximum(eps, 0.0)


@dataclasses.dataclass(frozen=True)
class EpsilonBound:
    """The result of :func:`epsilon_lower_bound`.

    Attributes:
      lower: one-sided ``confidence`` lower bound on ε (held-out half, chosen test).
      estimate: point estimate ``log((p̂₁ − δ)/p̂₂)`` at the chosen test (inf if p̂₂ = 0).
      ci: two-sided ``confidence`` interval for the ε the chosen test certifies.
      threshold, event: the chosen test (``event`` is e.g. ``"in:ge"`` = P₁ from D', S =
        {score ≥ t}).
      counts: (k₁, n₁, k₂, n₂) on the held-out half.
      confidence, delta, strategy: as used.
    """

    lower: float
    estimate: float
    ci: tuple[float, float]
    threshold: float
    event: str
    counts: tuple[int, int, int, int]
    confidence: float
    delta: float
    strategy: str


def epsilon_lower_bound(scores_in, scores_out, delta: float, *, confidence: float = 0.95,
                        selection_fraction: float = 0.5, n_candidates: int = 1
                        ) -> EpsilonBound:
    """Lower confidence bound on ε at δ from canary scores (held-out threshold selection).

    Args:
      scores_in: scores of releases on ``D'`` (canary present), any order, i.i.d.
      scores_out: scores of releases on ``D`` (canary absent).
      delta: the δ of the claim being audited, ``0 ≤ δ < 1``.
      confidence: ``1 − α``.
      selection_fraction: share of each sample used to choose the test; the rest gives the
        bound.
      n_candidates: number K of tests taken from the selection half and evaluated on the
        held-out half (Bonferroni: α/K each).

    Returns:
      an :class:`EpsilonBound`.
    """
    check_range("delta", delta, low=0.0, high=1.0, high_open=True)
    check_range("confidence", confidence, low=0.0, high=1.0, low_open=True, high_open=True)
    check_range("selection_fraction", selection_fraction, low=0.0, high=1.0, low_open=True,
                high_open=True)
    check_range("n_candidates", n_candidates, low=1, integer=True)
    s_in = np.asarray(scores_in, np.float64).ravel()
    s_out = np.asarray(scores_out, np.float64).ravel()
    if np.isnan(s_in).any() or np.isnan(s_out).any():
        raise ConfigError("audit scores contain NaN")
    n_sel_in = int(len(s_in) * selection_fraction)
    n_sel_out = int(len(s_out) * selection_fraction)
    if min(n_sel_in, n_sel_out, len(s_in) - n_sel_in, len(s_out) - n_sel_out) < 10:
        raise ConfigError(f"too few trials for an audit (got {len(s_in)} and {len(s_out)}); "
                          "need at least 20 per dataset")
    alpha = 1.0 - confidence
    sel_in, ev_in = np.sort(s_in[:n_sel_in]), np.sort(s_in[n_sel_in:])
    sel_out, ev_out = np.sort(s_out[:n_sel_out]), np.sort(s_out[n_sel_out:])

    # 1. selection half: every threshold (midpoints between distinct scores, and ±inf) × event
    u = np.unique(np.concatenate([sel_in, sel_out]))
    u = u[np.isfinite(u)]
    mids = 0.5 * (u[1:] + u[:-1]) if len(u) > 1 else u
    thresholds = np.concatenate([[-np.inf], u[:1] - 1.0, mids, u[-1:] + 1.0, [np.inf]])
    cands = []
    for e in _EVENTS:
        eps = _eps_lb(*_event_counts(sel_in, sel_out, thresholds, e), delta, alpha)
        top = np.argsort(-eps, kind="stable")[:n_candidates]
        cands += [(float(eps[i]), float(thresholds[i]), e) for i in top]
    cands.sort(key=lambda c: -c[0])
    cands = cands[:n_candidates]

    # 2. held-out half: the bound at the chosen test(s), Bonferroni over the K candidates
    a_k = alpha / len(cands)
    best = None
    for _, t, e in cands:
        k1, n1, k2, n2 = (int(np.asarray(x).item()) if np.ndim(x) else int(x)
                          for x in _event_counts(ev_in, ev_out, np.array([t]), e))
        lb = float(_eps_lb(k1, n1, k2, n2, delta, a_k))
        if best is None or lb > best[0]:
            best = (lb, t, e, (k1, n1, k2, n2))
    lb, t, e, (k1, n1, k2, n2) = best
    p1_hat, p2_hat = k1 / n1, k2 / n2
    est = (math.log(p1_hat - delta) - math.log(p2_hat)) if p2_hat > 0 and p1_hat > delta \
        else (math.inf if p1_hat > delta else 0.0)
    # two-sided interval for log((p1 - δ)/p2): CP at α/4 on each end of each probability
    lo = float(_eps_lb(k1, n1, k2, n2, delta, a_k / 2))
    p1_hi = float(clopper_pearson_upper(k1, n1, a_k / 4))
    p2_lo = float(clopper_pearson_lower(k2, n2, a_k / 4))
    hi = (math.log(p1_hi - delta) - math.log(p2_lo)) if p2_lo > 0 else math.inf
    strategy = (f"held-out split ({selection_fraction:.0%} selects the test, "
                f"{1 - selection_fraction:.0%} bounds it)"
                + (f", Bonferroni over {len(cands)} candidates" if len(cands) > 1 else ""))
    return EpsilonBound(lower=max(lb, 0.0), estimate=max(est, 0.0), ci=(lo, max(hi, lo)),
                        threshold=t, event=f"{e[0]}:{e[1]}", counts=(k1, n1, k2, n2),
                        confidence=confidence, delta=float(delta), strategy=strategy)


# ----------------------------------------------------------------------------------------
# Gaussian mechanisms: the GDP (f-DP) audit
# ----------------------------------------------------------------------------------------
def gdp_epsilon(mu: float, delta: float) -> float:
    """Exact ε(δ) of μ-GDP: the root of ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ`` (Balle &
    Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 2.13); 0 when ``μ ≤ 0`` or the curve already
    meets δ at ε = 0, ``inf`` for ``μ = inf``."""
    check_range("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    mu = float(mu)
    if not mu > 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    def gap(e):     # scipy.special: Φ and log Φ without scipy.stats' per-call overhead
        return float(special.ndtr(-e / mu + mu / 2)
                     - math.exp(e + special.log_ndtr(-e / mu - mu / 2)) - delta)

    if gap(0.0) <= 0:
        return 0.0
    # the zCDP conversion (ρ = μ²/2) bounds ε from above: ε ≤ ρ + 2√(ρ log(1/δ))
    hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    return float(brentq(gap, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP curve has ε(δ) = ``epsilon`` (inverse of :func:`gdp_epsilon`)."""
    check_range("epsilon", epsilon, low=0.0, low_open=True)
    hi = 1.0
    while gdp_epsilon(hi, delta) < epsilon:
        hi *= 2.0
    return float(brentq(lambda m: gdp_epsilon(m, delta) - epsilon, 1e-9, hi, xtol=1e-12,
                        rtol=1e-12))


def _mu_from_rates(p_in, p_out, q: float):
    """μ of the (sub-sampled) Gaussian trade-off through the test with ``P_in(S) = p_in`` and
    ``P_out(S) = p_out`` (vectorised; −inf where no μ ≥ 0 explains it, +inf where none does)."""
    p_in = np.asarray(p_in, np.float64)
    p_out = np.asarray(p_out, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if q >= 1.0:
            return special.ndtri(p_in) - special.ndtri(p_out)
        return -special.ndtri(p_out) + special.ndtri(
            np.clip((p_in - (1.0 - q) * p_out) / q, 0.0, 1.0))


def _mu_lb(k_in, n_in, k_out, n_out, alpha, q):
    """Lower confidence bound on μ (CP at α/2 on each rate), vectorised; NaN → −inf."""
    m = _mu_from_rates(clopper_pearson_lower(k_in, n_in, alpha / 2),
                       clopper_pearson_upper(k_out, n_out, alpha / 2), q)
    return np.nan_to_num(m, nan=-np.inf, posinf=np.inf, neginf=-np.inf)


@dataclasses.dataclass(frozen=True)
class GaussianBound:
    """The result of :func:`gdp_lower_bound`.

    Attributes:
      mu_lower: one-sided ``confidence`` lower bound on the μ of the (subsampled) Gaussian
        trade-off the mechanism can satisfy (0 if the test shows nothing); ``mu_estimate``
        the point estimate (inf when a rate is 0 or 1); ``mu_ci`` the two-sided interval.
      epsilon_lower, epsilon_estimate, epsilon_ci: the same mapped through ``ε(μ, δ)``.
      threshold, event: the test (``"in:ge"``: S = {score ≥ t}, the canary raises the score;
        ``"out:ge"``: the score negated).
      counts: (k_in, n_in, k_out, n_out), the events S among the trials that evaluate it.
      confidence, delta, sampling_rate, strategy: as used.
    """

    mu_lower: float
    mu_estimate: float
    mu_ci: tuple[float, float]
    epsilon_lower: float
    epsilon_estimate: float
    epsilon_ci: tuple[float, float]
    threshold: float
    event: str
    counts: tuple[int, int, int, int]
    confidence: float
    delta: float
    sampling_rate: float
    strategy: str


def gdp_lower_bound(scores_in, scores_out, delta: float, *, confidence: float = 0.95,
                    threshold: float | None = None, selection_fraction: float = 0.1,
                    sampling_rate: float = 1.0, epsilon_of_mu=None) -> GaussianBound:
    """Lower confidence bound on the μ (and ε) of a Gaussian mechanism from canary scores.

    Args:
      scores_in, scores_out: i.i.d. scores of releases on ``D'`` (canary present) and ``D``.
      delta: the δ at which ε is reported.
      confidence: ``1 − α``.
      threshold: a test fixed in advance (independent of the scores, e.g.
        :func:`midpoint_threshold` of the noiseless releases): S = {score ≥ threshold}, all
        trials evaluate it. ``None``: the first ``selection_fraction`` of each sample chooses
        the threshold (and, for ``sampling_rate = 1``, the sign) maximising the bound, the
        rest evaluates it.
      sampling_rate: q of Poisson sampling (1: none). For q < 1 only the add direction
        (``"in:ge"``) is tested.
      epsilon_of_mu: ``μ ↦ ε`` at ``delta`` (default: :func:`gdp_epsilon`, exact for q = 1;
        required for q < 1, e.g. the accountant's ε of the subsampled Gaussian with noise
        multiplier 1/μ).

    Returns:
      a :class:`GaussianBound`.
    """
    check_range("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    check_range("confidence", confidence, low=0.0, high=1.0, low_open=True, high_open=True)
    check_range("sampling_rate", sampling_rate, low=0.0, high=1.0, low_open=True)
    q = float(sampling_rate)
    if epsilon_of_mu is None:
        if q < 1.0:
            raise ConfigError("gdp_lower_bound with sampling_rate < 1 needs epsilon_of_mu "
                              "(the accountant's ε of the subsampled Gaussian)")
        epsilon_of_mu = lambda m: gdp_epsilon(m, delta)   # noqa: E731
    s_in = np.asarray(scores_in, np.float64).ravel()
    s_out = np.asarray(scores_out, np.float64).ravel()
    if np.isnan(s_in).any() or np.isnan(s_out).any():
        raise ConfigError("audit scores contain NaN")
    alpha = 1.0 - confidence
    if threshold is not None:
        if min(len(s_in), len(s_out)) < 20:
            raise ConfigError(f"too few trials for an audit (got {len(s_in)} and "
                              f"{len(s_out)}); need at least 20 per dataset")
        t, event, ev_in, ev_out = float(threshold), "in:ge", s_in, s_out
        strategy = "test fixed in advance (all trials evaluate it)"
    else:
        check_range("selection_fraction", selection_fraction, low=0.0, high=1.0,
                    low_open=True, high_open=True)
        n_si = int(len(s_in) * selection_fraction)
        n_so = int(len(s_out) * selection_fraction)
        if min(n_si, n_so, len(s_in) - n_si, len(s_out) - n_so) < 10:
            raise ConfigError(f"too few trials for an audit (got {len(s_in)} and "
                              f"{len(s_out)}); need at least 10 per dataset in each part")
        sel_in, sel_out = np.sort(s_in[:n_si]), np.sort(s_out[:n_so])
        ev_in, ev_out = s_in[n_si:], s_out[n_so:]
        u = np.unique(np.concatenate([sel_in, sel_out]))
        u = u[np.isfinite(u)]
        ts = 0.5 * (u[1:] + u[:-1]) if len(u) > 1 else u
        k_in = n_si - np.searchsorted(sel_in, ts, side="left")
        k_out = n_so - np.searchsorted(sel_out, ts, side="left")
        best = []
        up = _mu_lb(k_in, n_si, k_out, n_so, alpha, q)
        best.append((float(up.max(initial=-np.inf)), "in:ge", int(np.argmax(up))))
        if q >= 1.0:
            down = _mu_lb(k_out, n_so, k_in, n_si, alpha, q)
            best.append((float(down.max(initial=-np.inf)), "out:ge", int(np.argmax(down))))
        _, event, i = max(best, key=lambda b: b[0])
        t = float(ts[i])
        strategy = (f"held-out split ({selection_fraction:.0%} selects the test, "
                    f"{1 - selection_fraction:.0%} bounds it)")
    n_in, n_out = len(ev_in), len(ev_out)
    c_in, c_out = int((ev_in >= t).sum()), int((ev_out >= t).sum())
    if event == "out:ge":           # the score negated: the roles of the samples swap
        c_in, n_in, c_out, n_out = c_out, n_out, c_in, n_in
    lo = float(_mu_lb(c_in, n_in, c_out, n_out, alpha, q))
    lo2 = float(_mu_lb(c_in, n_in, c_out, n_out, alpha / 2, q))
    hi = float(np.nan_to_num(_mu_from_rates(clopper_pearson_upper(c_in, n_in, alpha / 4),
                                            clopper_pearson_lower(c_out, n_out, alpha / 4),
                                            q), nan=np.inf, posinf=np.inf, neginf=-np.inf))
    est = float(np.nan_to_num(_mu_from_rates(c_in / n_in, c_out / n_out, q), nan=0.0,
                              posinf=np.inf, neginf=-np.inf))
    mu_lo, mu_lo2, mu_est = max(lo, 0.0), max(lo2, 0.0), max(est, 0.0)
    mu_hi = max(hi, mu_lo2)

    def eps(m):
        return 0.0 if m <= 0 else (math.inf if math.isinf(m) else float(epsilon_of_mu(m)))

    if q < 1.0:
        strategy += f", Poisson-subsampled Gaussian trade-off (q = {q:g})"
    return GaussianBound(mu_lower=mu_lo, mu_estimate=mu_est, mu_ci=(mu_lo2, mu_hi),
                         epsilon_lower=eps(mu_lo), epsilon_estimate=eps(mu_est),
                         epsilon_ci=(eps(mu_lo2), eps(mu_hi)), threshold=t, event=event,
                         counts=(c_in, n_in, c_out, n_out), confidence=confidence,
                         delta=float(delta), sampling_rate=q, strategy=strategy)


def midpoint_threshold(clean_in, clean_out, direction) -> float:
    """The test fixed in advance for a projection score ``⟨release, direction⟩``: halfway
    between the noiseless releases' projections (``direction`` = their difference, so the
    canary raises the score). For a Gaussian mechanism this is the likelihood-ratio test at
    equal priors, the near-optimal point for estimating μ."""
    d = np.asarray(direction, np.float64).ravel()
    a = float(np.asarray(clean_in, np.float64).ravel() @ d)
    b = float(np.asarray(clean_out, np.float64).ravel() @ d)
    return 0.5 * (a + b)


def bernoulli_llr(bits: np.ndarray, p_in: np.ndarray, p_out: np.ndarray) -> np.ndarray:
    """Log-likelihood ratio ``log P_in(bits)/P_out(bits)`` of independent Bernoulli outputs.

    ``bits`` (trials, rounds) in {0, 1}; ``p_in``/``p_out`` (rounds,) the probabilities of a 1
    under each hypothesis. Impossible outcomes contribute ±1e6 instead of ±inf.
    """
    bits = np.asarray(bits, bool)
    p_in = np.asarray(p_in, np.float64)
    p_out = np.asarray(p_out, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        l1 = np.log(p_in) - np.log(p_out)
        l0 = np.log1p(-p_in) - np.log1p(-p_out)
    same = p_in == p_out                       # incl. both 0 or both 1: no information
    l1 = np.where(same, 0.0, np.nan_to_num(l1, nan=0.0, posinf=_BIG, neginf=-_BIG))
    l0 = np.where(same, 0.0, np.nan_to_num(l0, nan=0.0, posinf=_BIG, neginf=-_BIG))
    return np.where(bits, l1, l0).sum(axis=-1)


# ----------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class AuditResult:
    """One audit: the claim, the empirical bound, and how it was obtained.

    ``bound`` is the assumption-free threshold bound (:func:`epsilon_lower_bound`); ``gdp``,
    when present, the Gaussian-mechanism audit (:func:`gdp_lower_bound`), which then decides
    the verdict (see the module docstring for when it applies). ``passed`` is
    ``epsilon_lb <= claimed_epsilon`` (the audit found no violation); a broken twin is
    *caught* when ``passed`` is False.
    """

    mechanism: str
    broken: bool
    break_kind: str
    claimed_epsilon: float
    delta: float
    trials: int
    bound: EpsilonBound
    details: dict = dataclasses.field(default_factory=dict)
    gdp: GaussianBound | None = None

    @property
    def method(self) -> str:
        return "GDP" if self.gdp is not None else "threshold"

    @property
    def epsilon_lb(self) -> float:
        return self.gdp.epsilon_lower if self.gdp is not None else self.bound.lower

    @property
    def passed(self) -> bool:
        return self.epsilon_lb <= self.claimed_epsilon

    def summary(self) -> str:
        b = self.bound
        tag = f" [BROKEN: {self.break_kind}]" if self.broken else ""
        head = (f"{self.mechanism}{tag}: claimed ε={self.claimed_epsilon:.3f} at "
                f"δ={self.delta:.3g}; {self.trials} trials per dataset; ")
        thr = (f"threshold audit ε ≥ {b.lower:.3f} ({b.confidence:.0%} one-sided), "
               f"ε̂={b.estimate:.3f}, CI [{b.ci[0]:.3f}, {_fmt(b.ci[1])}] ({b.strategy}; test "
               f"{b.event} at t={b.threshold:.4g}, counts {b.counts})")
        if self.gdp is None:
            return head + "empirical " + thr
        g = self.gdp
        return (head + f"GDP audit ε ≥ {g.epsilon_lower:.3f} (μ ≥ {g.mu_lower:.3f}, "
                f"{g.confidence:.0%} one-sided), μ̂={_fmt(g.mu_estimate)}, μ CI "
                f"[{g.mu_ci[0]:.3f}, {_fmt(g.mu_ci[1])}], ε̂={_fmt(g.epsilon_estimate)} "
                f"({g.strategy}; test {g.event} at t={g.threshold:.4g}, counts {g.counts}); "
                + thr)

    def to_dict(self) -> dict[str, Any]:
        b = self.bound
        out = {"mechanism": self.mechanism, "broken": self.broken,
               "break_kind": self.break_kind, "claimed_epsilon": self.claimed_epsilon,
               "delta": self.delta, "trials": self.trials, "method": self.method,
               "epsilon_lb": self.epsilon_lb,
               "threshold_epsilon_lb": b.lower, "epsilon_hat": b.estimate,
               "ci_low": b.ci[0], "ci_high": b.ci[1],
               "confidence": b.confidence, "strategy": b.strategy, "event": b.event,
               "threshold": b.threshold, "counts": list(b.counts),
               "passed": self.passed}
        if self.gdp is not None:
            g = self.gdp
            out.update({"gdp_mu_lb": g.mu_lower, "gdp_mu_hat": g.mu_estimate,
                        "gdp_mu_ci": list(g.mu_ci), "gdp_epsilon_lb": g.epsilon_lower,
                        "gdp_epsilon_hat": g.epsilon_estimate,
                        "gdp_epsilon_ci": list(g.epsilon_ci), "gdp_confidence": g.confidence,
                        "gdp_strategy": g.strategy, "gdp_event": g.event,
                        "gdp_threshold": g.threshold, "gdp_counts": list(g.counts),
                        "gdp_sampling_rate": g.sampling_rate})
        out.update({f"detail_{k}": v for k, v in self.details.items()})
        return out


def make_result(mechanism: str, scores_in, scores_out, *, claimed_epsilon: float,
                delta: float, confidence: float = 0.95, gaussian: bool = False,
                threshold: float | None = None, sampling_rate: float = 1.0,
                epsilon_of_mu=None, broken: bool = False, break_kind: str = "",
                details: dict | None = None) -> AuditResult:
    """Audit a mechanism (any function dataset → release, run many times on ``D'`` and
    ``D``) from its canary scores: the threshold bound, and when ``gaussian`` the GDP audit,
    which then decides (``threshold``, ``sampling_rate``, ``epsilon_of_mu``: see
    :func:`gdp_lower_bound`). For a Gaussian mechanism the score is ``⟨release, direction⟩``,
    ``direction`` the difference of the two noiseless releases, at
    :func:`midpoint_threshold`."""
    s_in = np.asarray(scores_in, np.float64).ravel()
    s_out = np.asarray(scores_out, np.float64).ravel()
    bound = epsilon_lower_bound(s_in, s_out, delta, confidence=confidence)
    gdp = (gdp_lower_bound(s_in, s_out, delta, confidence=confidence, threshold=threshold,
                           sampling_rate=sampling_rate, epsilon_of_mu=epsilon_of_mu)
           if gaussian else None)
    return AuditResult(mechanism, bool(broken), break_kind if broken else "",
                       float(claimed_epsilon), float(delta), int(min(len(s_in), len(s_out))),
                       bound, dict(details or {}), gdp)


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _cell(r: AuditResult) -> str:
    if r.gdp is not None:
        g = r.gdp
        return (f"{g.epsilon_lower:.3f} [{g.epsilon_ci[0]:.3f}, {_fmt(g.epsilon_ci[1])}] "
                f"(GDP, μ ≥ {g.mu_lower:.3f})")
    b = r.bound
    return f"{b.lower:.3f} [{b.ci[0]:.3f}, {_fmt(b.ci[1])}] (threshold)"


def format_table(pairs: list[tuple[AuditResult, AuditResult | None]]) -> str:
    """A markdown table: mechanism, claimed ε, δ, trials, empirical bound (with CI and the
    audit that gave it) of the real mechanism, and the broken twin's (and whether the audit
    caught it). A mechanism may appear in several rows, one per twin."""
    head = ("| mechanism | claimed ε | δ | trials/dataset | empirical ε lower bound "
            "[CI] | broken twin (break) | twin's ε lower bound [CI] | verdict |")
    lines = [head, "|" + "---|" * 8]
    for real, twin in pairs:
        if twin is not None:
            verdict = ("ok" if real.passed else "VIOLATION") + " / " + \
                ("caught" if not twin.passed else "MISSED")
            tcell, tname = _cell(twin), twin.break_kind
        else:
            tcell, verdict, tname = "-", "ok" if real.passed else "VIOLATION", "-"
        lines.append(f"| {real.mechanism} | {real.claimed_epsilon:.3f} | {real.delta:.3g} | "
                     f"{real.trials} | {_cell(real)} | {tname} | {tcell} | {verdict} |")
    lines.append("")
    if pairs:
        r0 = pairs[0][0]
        conf = r0.bound.confidence
        lines.append(f"Bounds are one-sided {conf:.0%} lower confidence bounds. threshold: "
                     f"Clopper-Pearson bound of the best (ε, δ) test ({r0.bound.strategy}); "
                     "GDP: the Gaussian-mechanism (f-DP) audit, ε(δ) of the Clopper-Pearson "
                     "lower bound on μ (Nasr et al. 2023). CI: the two-sided interval of the "
                     "ε the test certifies.")
    return "\n".join(lines)
