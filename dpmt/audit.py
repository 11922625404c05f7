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

These are the generic statistics only. The per-mechanism audits (canary datasets for SSP,
noisy GD, private counts, Mirror and Combine_D, each with a deliberately broken twin) are an
audit harness outside the library, in ``experiments/audits.py`` (run by
``scripts/privacy_audit.py``); they reduce each release to a score and call
:func:`epsilon_lower_bound`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy import stats

from dpmt.errors import ConfigError, check_range

__all__ = [
    "AuditResult", "EpsilonBound", "clopper_pearson_lower", "clopper_pearson_upper",
    "epsilon_lower_bound", "format_table", "bernoulli_llr",
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

    ``passed`` is ``epsilon_lb <= claimed_epsilon`` (the audit found no violation); a broken
    twin is *caught* when ``passed`` is False.
    """

    mechanism: str
    broken: bool
    break_kind: str
    claimed_epsilon: float
    delta: float
    trials: int
    bound: EpsilonBound
    details: dict = dataclasses.field(default_factory=dict)

    @property
    def epsilon_lb(self) -> float:
        return self.bound.lower

    @property
    def passed(self) -> bool:
        return self.bound.lower <= self.claimed_epsilon

    def summary(self) -> str:
        b = self.bound
        tag = f" [BROKEN: {self.break_kind}]" if self.broken else ""
        return (f"{self.mechanism}{tag}: claimed ε={self.claimed_epsilon:.3f} at "
                f"δ={self.delta:.3g}; {self.trials} trials per dataset; empirical ε ≥ "
                f"{b.lower:.3f} ({b.confidence:.0%} one-sided), ε̂={b.estimate:.3f}, "
                f"CI [{b.ci[0]:.3f}, {_fmt(b.ci[1])}] ({b.strategy}; test {b.event} at "
                f"t={b.threshold:.4g}, counts {b.counts})")

    def to_dict(self) -> dict[str, Any]:
        b = self.bound
        return {"mechanism": self.mechanism, "broken": self.broken,
                "break_kind": self.break_kind, "claimed_epsilon": self.claimed_epsilon,
                "delta": self.delta, "trials": self.trials, "epsilon_lb": b.lower,
                "epsilon_hat": b.estimate, "ci_low": b.ci[0], "ci_high": b.ci[1],
                "confidence": b.confidence, "strategy": b.strategy, "event": b.event,
                "threshold": b.threshold, "counts": list(b.counts),
                "passed": self.passed, **{f"detail_{k}": v for k, v in self.details.items()}}


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def format_table(pairs: list[tuple[AuditResult, AuditResult | None]]) -> str:
    """A markdown table: mechanism, claimed ε, δ, trials, empirical bound (with CI) of the
    real mechanism, and the broken twin's bound (and whether the audit caught it)."""
    head = ("| mechanism | claimed ε | δ | trials/dataset | empirical ε lower bound "
            "[CI] | broken twin (break) | twin's ε lower bound [CI] | verdict |")
    lines = [head, "|" + "---|" * 8]
    for real, twin in pairs:
        b = real.bound
        cell = f"{b.lower:.3f} [{b.ci[0]:.3f}, {_fmt(b.ci[1])}]"
        if twin is not None:
            tb = twin.bound
            tcell = f"{tb.lower:.3f} [{tb.ci[0]:.3f}, {_fmt(tb.ci[1])}]"
            verdict = ("ok" if real.passed else "VIOLATION") + " / " + \
                ("caught" if not twin.passed else "MISSED")
            tname = twin.break_kind
        else:
            tcell, verdict, tname = "-", "ok" if real.passed else "VIOLATION", "-"
        lines.append(f"| {real.mechanism} | {real.claimed_epsilon:.3f} | {real.delta:.3g} | "
                     f"{real.trials} | {cell} | {tname} | {tcell} | {verdict} |")
    conf = pairs[0][0].bound.confidence if pairs else 0.95
    lines.append("")
    lines.append(f"Bounds are one-sided {conf:.0%} Clopper-Pearson lower confidence bounds "
                 f"({pairs[0][0].bound.strategy if pairs else ''}); CI is the two-sided "
                 f"{conf:.0%} interval of the ε certified by the chosen test.")
    return "\n".join(lines)
