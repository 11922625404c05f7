"""Noise calibration: one scale for a planned list of releases, hitting a target (ε, δ).

A plan is a list of :class:`PlannedRelease`. Each has a fixed L2 sensitivity and either a
fixed noise multiplier (e.g. user-chosen noise on the item counts) or a *relative* noise
multiplier r_k; the calibrated releases get z_k = s · r_k for one scale s found with
``dp_accounting.calibrate_dp_mechanism`` (bisection over s on the composed event), the
smallest s with ε(δ) ≤ target. The split of the budget between releases is therefore explicit
(the ratios r_k and the fixed multipliers) and reported in the result.

A budget the fixed releases alone exceed is refused with
:class:`~dpmt.errors.PrivacyBudgetError` *before* any data is touched.

**Discrete Gaussian releases** (``mechanism="discrete_gaussian"``) are calibrated the same
way: z_k = s·r_k is σ/Δ, with σ the discrete Gaussian's *parameter* (in the statistic's
integer units) and Δ the L2 sensitivity in the same units. The RDP bracket treats them as
Gaussians (a valid RDP bound, see :mod:`dpmt.privacy.ledger`); the PLD refinement is done on
the ledger's own ε (:func:`~dpmt.privacy.ledger.epsilon_of`: the discrete Gaussian's PLD), so
the achieved ε is what the ledger will report, ≤ the target. **Extra δ** (a release's
``delta``) is fixed by the plan and charged first: the noise is calibrated at
δ_acc = δ − (1 + δ)·Σδ (:func:`~dpmt.privacy.ledger.accounted_delta`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math

import dp_accounting
from scipy import optimize

from dpmt.errors import ConfigError, PrivacyBudgetError, check_range
from dpmt.privacy.ledger import (Release, accounted_delta, epsilon_of, is_sampled,
                                 make_accountant)

log = logging.getLogger("dpmt.privacy.calibration")


@dataclasses.dataclass(frozen=True)
class PlannedRelease:
    """A release whose noise is still to be chosen.

    Attributes:
      name, sensitivity, count, sampling_rate, mechanism, coordinates, step, delta, draws:
        as in :class:`~dpmt.privacy.ledger.Release`.
      noise_ratio: relative noise multiplier r_k (z_k = s · r_k); larger means noisier.
      noise_multiplier: if set, this release's z is fixed and not calibrated.
    """

    name: str
    sensitivity: float
    count: int = 1
    sampling_rate: float | None = None
    noise_ratio: float = 1.0
    noise_multiplier: float | None = None
    mechanism: str = "gaussian"
    coordinates: int | None = None
    step: int | None = None
    delta: float = 0.0
    draws: int = 0

    def __post_init__(self):
        check_range(f"{self.name}: noise_ratio", self.noise_ratio, low=0.0, low_open=True)
        if self.noise_multiplier is not None:
            check_range(f"{self.name}: noise_multiplier", self.noise_multiplier, low=0.0,
                        low_open=True)
        self.release(1.0)        # validates the mechanism's fields as a Release does

    def release(self, scale: float) -> Release:
        z = self.noise_multiplier if self.noise_multiplier is not None else scale * self.noise_ratio
        return Release(self.name, self.sensitivity, z * self.sensitivity, self.count,
                       self.sampling_rate, mechanism=self.mechanism,
                       coordinates=self.coordinates, step=self.step, delta=self.delta,
                       draws=self.draws)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The result: the scale s, the concrete releases, and the ε they achieve at δ."""

    scale: float
    releases: tuple[Release, ...]
    epsilon: float
    delta: float

    def by_name(self, name: str) -> Release:
        for r in self.releases:
            if r.name == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"scale": self.scale, "epsilon": self.epsilon, "delta": self.delta,
                "releases": [r.to_dict() for r in self.releases]}


def calibrate(plan: list[PlannedRelease], epsilon: float, delta: float,
              accountant: str = "pld", tol: float = 1e-4) -> Calibration:
    """Find the smallest noise scale s with ε(δ) ≤ ``epsilon`` (see :func:`_calibrate`).

    Results are memoised on (plan, ε, δ, accountant, tol): a grid validated up front and then
    trained calibrates each configuration once.
    """
    return _calibrate_cached(tuple(plan), float(epsilon), float(delta), accountant, tol)


@functools.lru_cache(maxsize=256)
def _calibrate_cached(plan: tuple, epsilon, delta, accountant, tol) -> Calibration:
    return _calibrate(list(plan), epsilon, delta, accountant, tol)


def _calibrate(plan: list[PlannedRelease], epsilon: float, delta: float,
               accountant: str = "pld", tol: float = 1e-4) -> Calibration:
    """Find the smallest noise scale s with ε(δ) ≤ ``epsilon`` for the composed plan.

    Args:
      plan: the releases of the whole run (e.g. counts + every iteration's statistics).
      epsilon, delta: target, ε > 0 and 0 < δ < 1.
      accountant: ``"pld"`` or ``"rdp"``.
      tol: relative tolerance on s (the achieved ε is within ~1e-3 relative of the target).

    Raises:
      PrivacyBudgetError: if the fixed-noise releases alone already exceed ε.
      ConfigError: on an empty plan or invalid numbers.
    """
    check_range("epsilon", epsilon, low=0.0, low_open=True)
    if not math.isfinite(epsilon):
        raise ConfigError(f"epsilon must be a finite number (got {epsilon}); for no privacy "
                          "train without noise (--no-privacy)")
    check_range("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    if not plan:
        raise ConfigError("nothing to calibrate: the plan has no releases")
    names = [p.name for p in plan]
    if len(set(names)) != len(names):
        raise ConfigError(f"release names in a plan must be unique (got {names})")
    fixed = [p.release(1.0) for p in plan if p.noise_multiplier is not None]
    free = [p for p in plan if p.noise_multiplier is None]
    extra = math.fsum(p.delta for p in plan)
    avail = accounted_delta(delta, extra)          # refuses an extra δ that leaves nothing
    eps_fixed = epsilon_of(fixed, delta, accountant,
                           extra=extra - math.fsum(r.delta for r in fixed))
    if eps_fixed >= epsilon:
        raise PrivacyBudgetError(
            f"the fixed-noise releases ({', '.join(r.name for r in fixed)}) alone spend "
            f"ε = {eps_fixed:.4g} at δ = {delta:g}, which meets or exceeds the target ε = "
            f"{epsilon:g}; raise their noise (e.g. --count-noise) or the target ε.")
    if not free:
        return Calibration(1.0, tuple(fixed), eps_fixed, delta)

    def make_event(scale: float) -> dp_accounting.DpEvent:
        return dp_accounting.ComposedDpEvent([p.release(scale).dp_event() for p in plan])

    sampled = is_sampled(plan)

    absl_log = logging.getLogger("absl")
    level = absl_log.level
    # dp_accounting's RDP logs a warning per order it cannot evaluate at large q; the orders
    # are excluded (the bound stays valid), so keep the calibration quiet.
    absl_log.setLevel(logging.ERROR)
    try:
        # RDP first: cheap and robust for any scale, and an upper bound on the noise PLD
        # needs (PLD is tighter). PLD then refines inside [lower, s_rdp], with lower pushed
        # down until it overspends (small multipliers make PLD grids huge, so never start
        # from a tiny guess).
        try:
            s_rdp = dp_accounting.calibrate_dp_mechanism(
                lambda: make_accountant("rdp", sampled=sampled), make_event, epsilon, avail,
                bracket_interval=dp_accounting.LowerEndpointAndGuess(1e-2, 1.0), tol=1e-6)
        except Exception as e:     # dp_accounting's bracketing/brentq errors: out of reach
            raise PrivacyBudgetError(
                f"no noise level reaches ε = {epsilon:g} at δ = {delta:g} for these "
                f"{sum(p.count for p in plan)} releases ({type(e).__name__}); raise ε or δ, "
                "or make fewer releases (fewer --iterations / --gd-steps)") from None
        scale = s_rdp
        if accountant != "rdp":
            try:
                lower = 0.5 * s_rdp
                while _eps(make_event(lower), avail, accountant) <= epsilon:
                    lower *= 0.5
                scale = dp_accounting.calibrate_dp_mechanism(
                    lambda: make_accountant(accountant, sampled=sampled), make_event, epsilon,
                    avail,
                    bracket_interval=dp_accounting.ExplicitBracketInterval(lower, s_rdp),
                    tol=tol * lower)
            except Exception:      # noqa: BLE001
                # the PLD refinement failed numerically: keep the RDP scale, which meets the
                # target under PLD too (RDP's ε upper-bounds PLD's) — noisier, never weaker
                log.warning("PLD calibration failed at ε=%g, δ=%g; using the RDP noise scale",
                            epsilon, delta)
                scale = s_rdp
            if any(p.mechanism != "gaussian" for p in plan):
                # the scale above treats the discrete Gaussians as Gaussians (their PLDs
                # differ slightly): refine on the ledger's own ε, starting from it
                scale = _refine(plan, scale, epsilon, delta, accountant, tol)
    finally:
        absl_log.setLevel(level)
    releases = tuple(p.release(scale) for p in plan)
    return Calibration(float(scale), releases, epsilon_of(releases, delta, accountant), delta)


def _refine(plan: list[PlannedRelease], guess: float, epsilon: float, delta: float,
            accountant: str, tol: float) -> float:
    """The smallest scale (to ``tol`` relative) whose releases have
    :func:`~dpmt.privacy.ledger.epsilon_of` ≤ ``epsilon``, bracketed from ``guess``."""

    def gap(scale: float) -> float:
        return epsilon_of([p.release(scale) for p in plan], delta, accountant) - epsilon

    factor = 1.02
    hi = guess
    while gap(hi) > 0:
        hi *= factor
        factor = factor ** 2
        if hi > 1e6 * guess:
            raise PrivacyBudgetError(f"no noise level reaches ε = {epsilon:g} at δ = "
                                     f"{delta:g} for these releases")
    lo = hi / 1.02
    while gap(lo) <= 0:
        hi, lo = lo, lo / 1.02
    root = optimize.brentq(gap, lo, hi, xtol=tol * lo)
    for candidate in (root, root + tol * lo, hi):
        if gap(candidate) <= 0:
            return float(candidate)
    return float(hi)


def _eps(event: dp_accounting.DpEvent, delta: float, accountant: str) -> float:
    acc = make_accountant(accountant)
    acc.compose(event)
    return float(acc.get_epsilon(delta))
