"""Private hyper-parameter selection: random repetitions, a noisy score, one calibration.

The scheme is that of Papernot & Steinke, *Hyperparameter Tuning with Renyi Differential
Privacy* (ICLR 2022). Let Q be one *repetition*: draw a candidate uniformly from the grid,
train it (a DP run), and release its validation score with Gaussian noise; Q's output is
(candidate, model, noisy score). The selection algorithm A draws a random number of
repetitions K, runs Q K times with fresh randomness, and outputs only the repetition with
the best noisy score. If Q is (λ, ε(λ))-RDP at every order λ, then:

* K ~ truncated negative binomial D_{η,γ} (their Definition 1; η = 0 the logarithmic,
  η = 1 the geometric distribution; K ≥ 1 always), their Theorem 2: A is (λ, ε′)-RDP with
  ε′ = ε(λ) + (1 + η)(1 − 1/λ̂) ε(λ̂) + (1 + η) log(1/γ)/λ̂ + log(E[K])/(λ − 1) for any λ̂ ≥ 1;
* K ~ Poisson(μ), their Theorem 6: ε′ = ε(λ) + μ δ̂ + log(μ)/(λ − 1), where δ̂ is Q's δ at
  ε̂ = log(1 + 1/(λ − 1)).

``dp_accounting`` implements both as ``RepeatAndSelectDpEvent(event, mean, shape)``
(shape = η, ∞ for Poisson), in its RDP accountant only (the PLD accountant refuses the
event), so everything here is accounted with RDP.

What A may publish is the selected repetition's output. K itself, which candidates were
drawn, and the losers' scores are internal randomness and intermediate results of A: the
theorems do not cover them (revealing K turns A into best-of-K for a known K, whose cost
can approach K runs), so the applications keep them private.

**K = 0.** The Poisson distribution puts mass e^(−μ) on K = 0. The paper's algorithm then
outputs nothing (a fixed, data-independent ⊥) and its guarantee covers that outcome; drawing
K again until K ≥ 1 would be a different distribution (a zero-truncated Poisson), which
Theorem 6 does not cover — a second attempt is a second execution of A and composes with the
first. :func:`draw_repetitions` therefore returns 0 and the caller outputs nothing. The
truncated negative binomial never draws 0.

**The score.** For one trained model, each validation user's Recall@20 lies in [0, 1] and
depends on the data only through that user's own history and targets (the fold-in is against
the released V), so the *sum* over validation users has L2 sensitivity 1 under add/remove of
one user; :func:`noisy_score` adds N(0, σ²). The validation set is the same for every
repetition, so ranking noisy sums ranks the noisy means too (same denominator); the sum is
released rather than the mean because the number of evaluated users is itself data.

**Calibration.** :func:`calibrate_selection` takes a function from a per-run ε to the
training plan of that run (the caller's ``make_plan``) and bisects on that per-run ε: the
score's noise multiplier is tied to the run's base multiplier s (the calibration scale, e.g.
that of Â for SSP or of each noisy-GD step) as z_score = r · s, r = ``score_noise_ratio``, so
that one number moves every noise level together; the largest per-run ε whose whole
selection event has RDP ε(δ) ≤ the target is kept.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np

from dpmt.errors import ConfigError, PrivacyBudgetError, check_range
from dpmt.privacy.ledger import Release, Selection, epsilon_of

SCORE_RELEASE = "validation_score"
#: the smallest per-run ε the bisection tries (TrainConfig's lower bound)
MIN_RUN_EPSILON = 0.01


# -- the number of repetitions ---------------------------------------------------------------
def tnb_mean(gamma: float, shape: float) -> float:
    """E[K] for K ~ D_{η,γ}, the truncated negative binomial (Papernot & Steinke 2022,
    Definition 1): η(1/γ − 1)/(1 − γ^η) for η > 0, (1/γ − 1)/log(1/γ) for η = 0."""
    if gamma >= 1.0:
        return 1.0
    if shape == 0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return shape * (1.0 / gamma - 1.0) / -math.expm1(shape * math.log(gamma))


def tnb_gamma(mean: float, shape: float) -> float:
    """The γ ∈ (0, 1] of D_{η,γ} with E[K] = ``mean`` (bisection on log γ; E[K] decreases in
    γ). It is at least the γ ``dp_accounting`` uses for the same mean (which returns the
    lower end of its bracket), so the accountant's bound covers the distribution drawn."""
    check_range("mean number of runs", mean, low=1.0, high=1e6)
    check_range("shape", shape, low=0.0, high=1e6)
    if mean == 1.0:
        return 1.0
    if shape == 1.0:
        return 1.0 / mean
    lo, hi = 1e-300, 1.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if tnb_mean(mid, shape) > mean:
            lo = mid
        else:
            hi = mid
        if hi / lo - 1.0 < 1e-13:
            break
    return hi


def draw_repetitions(rng: np.random.Generator, mean: float, shape: float | None) -> int:
    """K: Poisson(``mean``) when ``shape`` is None (K = 0 possible: see the module
    docstring), else the truncated negative binomial with shape η and E[K] = ``mean``
    (K ≥ 1): a negative binomial NB(η, γ) conditioned on K ≥ 1 (rejection), the logarithmic
    distribution for η = 0."""
    if shape is None:
        return int(rng.poisson(mean))
    gamma = tnb_gamma(mean, shape)
    if gamma >= 1.0:
        return 1
    if shape == 0:
        return int(rng.logseries(1.0 - gamma))
    for _ in range(100_000):
        ks = rng.negative_binomial(shape, gamma, size=256)
        ks = ks[ks >= 1]
        if ks.size:
            return int(ks[0])
    raise ConfigError(f"shape η = {shape:g} is too close to 0 to draw from at mean {mean:g}; "
                      "use shape 0 (the logarithmic distribution) instead")


# -- the score release ------------------------------------------------------------------------
def score_release(noise_multiplier: float) -> Release:
    """The noisy validation score as a :class:`Release`: sensitivity 1 (a sum of per-user
    values in [0, 1]), noise std = z."""
    return Release(SCORE_RELEASE, 1.0, float(noise_multiplier))


def noisy_score(sum_recall: float, sigma: float, rng: np.random.Generator) -> float:
    """ŝ = Σ_j Recall@20_j + N(0, σ²): the Gaussian mechanism on the sum over validation
    users of their Recall@20 (each in [0, 1], so sensitivity 1 under add/remove of one user
    and σ = z, the noise multiplier). Papernot & Steinke's Q releases this score; A keeps
    the repetition with the largest ŝ."""
    s = float(sum_recall)
    if not math.isfinite(s) or s < 0:
        raise ConfigError(f"the validation score must be a finite sum of recalls (got {s})")
    check_range("score noise std", sigma, low=0.0, low_open=True)
    return s + float(rng.normal(0.0, float(sigma)))


# -- the event and the calibration -------------------------------------------------------------
def event_signature(releases: Sequence[Release]) -> tuple:
    """What a plan's DP event depends on: the multiset of (noise multiplier, sampling rate)
    with its total count — not the raw σ (a candidate with another clip norm has other
    sensitivities and σ, but the same multipliers and the same event).

    Every Gaussian release without sampling enters as one: k applications at multipliers
    z_1..z_k compose to exactly one Gaussian of multiplier (Σ 1/z_k²)^(-1/2) (the same
    privacy profile, RDP and PLD alike; Dong, Roth & Su 2022, Corollary 3.3), so a run whose
    rule traded 20 noisy-GD steps for 8 at z·√(8/20) (:meth:`dpmt.train.methods.noisy_gd.
    NoisyGDMethod.equivalent_releases`) is the same repetition as the one calibrated."""
    groups: dict[tuple, int] = {}
    inv_sq, gauss_delta = 0.0, 0.0
    for r in releases:
        if r.mechanism == "gaussian" and r.sampling_rate is None:
            inv_sq += int(r.count) / float(r.noise_multiplier) ** 2
            gauss_delta += float(r.delta)
            continue
        # the mechanism and its extra δ (partition selection, sampler tails) are part of it
        key = (float(r.noise_multiplier), r.sampling_rate, r.mechanism, r.coordinates,
               float(r.delta))
        groups[key] = groups.get(key, 0) + int(r.count)
    if inv_sq:
        key = (inv_sq ** -0.5, None, "gaussian", None, gauss_delta)
        groups[key] = 1
    return tuple(sorted(((z, q, n, rest) for (z, q, *rest), n in groups.items()),
                        key=lambda t: (t[0], -1.0 if t[1] is None else t[1], t[2],
                                       repr(t[3]))))


def same_event(a: Sequence[Release], b: Sequence[Release], rtol: float = 1e-9) -> bool:
    """Whether two plans have the same DP event (multipliers and extra δ equal to ``rtol``)."""
    sa, sb = event_signature(a), event_signature(b)
    return len(sa) == len(sb) and all(
        qa == qb and na == nb and ra[:-1] == rb[:-1]
        and abs(za - zb) <= rtol * max(za, zb)
        and abs(ra[-1] - rb[-1]) <= rtol * max(ra[-1], rb[-1])
        for (za, qa, na, ra), (zb, qb, nb, rb) in zip(sa, sb))


def describe_event(releases: Sequence[Release]) -> str:
    """``name z=… [×count] [q=…]`` of every release, for messages."""
    parts = []
    for r in releases:
        p = f"{r.name} z={r.noise_multiplier:.4g}"
        if r.count > 1:
            p += f"×{r.count}"
        if r.sampling_rate is not None:
            p += f" q={r.sampling_rate:g}"
        parts.append(p)
    return f"{len(parts)} releases: " + ", ".join(parts)


def selection_epsilon(releases: Sequence[Release], delta: float,
                      selection: Selection) -> float:
    """RDP ε at δ of ``RepeatAndSelectDpEvent(compose(releases), mean, shape)``."""
    return epsilon_of(releases, delta, "rdp", selection)


@dataclasses.dataclass(frozen=True)
class SelectionCalibration:
    """The result: the per-run ε given to the training plan, one repetition's releases
    (training, then the score), and the ε of the whole selection at δ (RDP)."""

    run_epsilon: float
    releases: tuple[Release, ...]
    score: Release
    epsilon: float
    repetition_epsilon: float
    delta: float
    selection: Selection

    def to_dict(self) -> dict:
        return {"per_run_epsilon": self.run_epsilon, "epsilon": self.epsilon,
                "repetition_epsilon": self.repetition_epsilon, "delta": self.delta,
                "accountant": "rdp", "score": self.score.to_dict(),
                "selection": self.selection.to_dict()}


def calibrate_selection(run_plan: Callable[[float], tuple[Sequence[Release], float]], *,
                        epsilon: float, delta: float, selection: Selection,
                        score_noise_ratio: float = 1.0, rtol: float = 1e-4
                        ) -> SelectionCalibration:
    """The largest per-run ε whose selection event meets (``epsilon``, ``delta``).

    Args:
      run_plan: per-run ε ↦ (the releases of one training run calibrated to it, the run's
        base noise multiplier s); raises :class:`PrivacyBudgetError` for a per-run ε it
        cannot meet (treated as too small).
      epsilon, delta: the target for the whole selection.
      selection: a charged :class:`Selection` (the distribution of K).
      score_noise_ratio: r in z_score = r · s.
      rtol: relative precision of the per-run ε (geometric bisection on [0.01, ε]).

    Raises:
      PrivacyBudgetError: when no per-run ε in [0.01, ε] meets the target.
    """
    check_range("epsilon", epsilon, low=MIN_RUN_EPSILON, high=100.0)
    check_range("score_noise_ratio", score_noise_ratio, low=0.0, high=1e6, low_open=True)
    if not selection.charged:
        raise ConfigError("calibrate_selection is for a private selection")

    def attempt(e: float):
        try:
            releases, scale = run_plan(e)
        except PrivacyBudgetError:
            return None
        score = score_release(score_noise_ratio * float(scale))
        rep = (*releases, score)
        try:
            eps = selection_epsilon(rep, delta, selection)
        except PrivacyBudgetError:
            # the releases' extra δ (the sampler's tails) enters the selection as
            # (1 + e^ε′)·E[K]·δ_extra: past some ε′ it uses up δ. That is a per-run ε too
            # LARGE (the bisection's upper side), never a reason to give up the search.
            eps = math.inf
        return rep, score, eps

    best, best_e = None, None
    lo, hi = MIN_RUN_EPSILON, float(epsilon)
    first = attempt(lo)
    if first is not None and math.isinf(first[2]):
        raise PrivacyBudgetError(
            f"a private selection cannot meet δ = {delta:g}: even with every run at ε = {lo:g} "
            f"the releases' extra δ (the noise sampler's tails), multiplied by (1 + e^ε) over "
            f"the mean {selection.mean:g} repetitions, uses up δ; raise --delta or lower "
            "--mean-runs")
    if first is not None and first[2] > epsilon:
        raise PrivacyBudgetError(
            f"a private selection cannot meet ε = {epsilon:g} at δ = {delta:g}: even with "
            f"every run at ε = {lo:g} the selection costs ε = {first[2]:.4g} (mean "
            f"{selection.mean:g} repetitions, score noise ratio {score_noise_ratio:g}); raise "
            "--epsilon or --score-noise-ratio, lower --mean-runs, or train fewer releases "
            "per run (fewer --iterations)")
    if first is not None:
        best, best_e = first, lo
    top = attempt(hi)
    if top is not None and top[2] <= epsilon:
        best, best_e, lo = top, hi, hi
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        r = attempt(mid)
        if r is None:
            lo = mid
        elif r[2] <= epsilon:
            best, best_e, lo = r, mid, mid
        else:
            hi = mid
    if best is None:
        raise PrivacyBudgetError(
            f"no per-run noise level meets ε = {epsilon:g} at δ = {delta:g} for this "
            "private selection (the fixed-noise releases alone exceed it); raise --epsilon "
            "or lower the fixed noise (e.g. --count-noise)")
    rep, score, eps = best
    one = epsilon_of(rep, delta, "rdp")
    return SelectionCalibration(float(best_e), tuple(rep[:-1]), score, float(eps), float(one),
                                float(delta), selection)
