"""The privacy ledger: every data-dependent release, as a ``dp_accounting`` event, composed.

**Privacy unit: one user (add/remove-one).** Two datasets are neighbours if one is the other
plus all the ratings of one extra user (which items they rated and how). Every sensitivity
recorded here is the L2 sensitivity of a release under that relation, and the ε reported is
for ``dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE``.

A :class:`Release` is one Gaussian mechanism (optionally Poisson-subsampled, optionally
repeated ``count`` times) described by its name, L2 sensitivity Δ and noise standard deviation
σ; its noise multiplier is z = σ/Δ and its event is ``GaussianDpEvent(z)`` (wrapped in
``PoissonSampledDpEvent`` / ``SelfComposedDpEvent`` as needed) — or one *discrete Gaussian*
mechanism (``mechanism="discrete_gaussian"``, :mod:`dpmt.privacy.discrete_gaussian`): an
integer statistic of which one user changes at most ``coordinates`` coordinates by at most
the integer ``step`` each, plus N_Z(0, σ²) per coordinate (σ = ``noise_std``, the discrete
Gaussian's parameter, in the statistic's integer units; Δ = ``sensitivity`` ≥ step·√coordinates
its L2 sensitivity in the same units).

ε at δ (:func:`epsilon_of`):

* **PLD** (default): the privacy loss distributions of the releases, composed —
  each group of Gaussian releases with one (z, q) exactly as ``dp_accounting.pld.
  PLDAccountant`` composes its ``SelfComposedDpEvent`` (so an all-Gaussian ledger gives the
  accountant's ε), each group of discrete Gaussian releases with one (σ, step) as the
  discrete-Gaussian PLD self-composed over every coordinate it moves
  (:func:`~dpmt.privacy.discrete_gaussian.discrete_gaussian_pld`).
* **RDP**: a discrete Gaussian release is entered as ``GaussianDpEvent(σ/Δ)``. This is an
  upper bound: the Rényi divergence of N_Z(0, σ²) and N_Z(μ, σ²) for an integer shift μ is at
  most αμ²/(2σ²) (Canonne, Kamath & Steinke, NeurIPS 2020, Proposition 5), exactly the
  Gaussian's, and Rényi divergences of independent coordinates add, so the release is
  (α, αΔ²/(2σ²))-RDP like a Gaussian with multiplier σ/Δ. The same holds for
  :func:`compose` / :meth:`PrivacyLedger.event` (the events given to
  ``RepeatAndSelectDpEvent``, which is RDP).

**Extra δ.** A release may carry ``delta`` > 0, charged additively: with Σδ the sum over
the releases, ε is reported at δ_acc = δ − (1 + δ)·Σδ (:func:`accounted_delta`). That is
valid for
(a) a part of the mechanism that is (0, δ)-DP and independent of the rest — private partition
selection: the event that an item only the added user rated passes the threshold (basic
composition);
(b) the 64-bit normal sampler of :mod:`dpmt.solvers.noise` when ``delta`` is its
``tail_delta(draws) + edge_delta(z, …)`` (that module's coupling argument: a run whose ideal
version is (ε, δ)-DP is (ε, δ + tail + Σ edge)-DP; a bare total-variation distance T would
cost (1 + e^ε)·T instead);
(c) a sampler conditioned on its reachable range, of tail mass Σδ: its hockey-stick
divergence is at most (δ_acc + Σδ)/(1 − Σδ) ≤ δ, whence the factor (1 + δ).
A ledger whose Σδ leaves no δ_acc > 0 is refused (:class:`~dpmt.errors.PrivacyBudgetError`).
Under a charged selection see :func:`epsilon_of`.

A ledger may also record how its model was *selected* among candidate runs (a
:class:`Selection`, written by ``dpmt tune``). A charged (private) selection makes the
recorded releases one repetition of a random number of repetitions, and the ledger's event
``RepeatAndSelectDpEvent(compose(releases), mean, shape)`` (Papernot & Steinke, ICLR 2022),
which ``dp_accounting`` accounts with RDP only. An uncharged (literature) selection changes
no ε; it is recorded so that the ledger says the choice among candidates is not covered.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

import dp_accounting

from dpmt._io import atomic_write_text
from dpmt.errors import ConfigError, PrivacyBudgetError, check_range
from dpmt.privacy.discrete_gaussian import discrete_gaussian_pld

PRIVACY_UNIT = "one user (add/remove-one): all ratings of a user are protected together"

#: what an ε printed for ML-100K does not cover (issue 24, finding 9)
ML100K_TUNING_NOTE = ("the constants of dpmt's default rule (dpmt/train/defaults.py) and the "
                      "spectral row scaling were chosen on ML-100K validation users: the ε of "
                      "an ML-100K run does not cover that choice")

# RDP orders: the usual dense grid (as in TF Privacy / dp_accounting examples), extended.
RDP_ORDERS = ([1 + x / 20.0 for x in range(1, 100)] + list(range(6, 64))
              + [64, 80, 96, 128, 192, 256, 384, 512, 1024])
#: the integer orders of :data:`RDP_ORDERS`, those of a composition with Poisson-subsampled
#: releases. At an integer order the subsampled Gaussian's RDP is an exact finite sum
#: (Mironov, Talwar & Zhang 2019, "Rényi differential privacy of the sampled Gaussian
#: mechanism"); at a fractional one dp_accounting sums a series that is ~10x slower
#: and may not converge (it then drops the order, with a warning). Any subset of orders
#: gives a valid bound; without the fractional ones ε moved by ≤ 0.2% in our checks, and a
#: private tuning with sampling, which calibrates a plan per step of its bisection, went
#: from minutes to seconds.
RDP_INTEGER_ORDERS = [o for o in RDP_ORDERS if float(o).is_integer()]

# PLD grid step for privacy-loss values. The PLD accountant's ε is a pessimistic upper bound at
# any step; 1e-3 differs from 1e-4 by < 1e-6 relative on our compositions and is ~10× faster.
PLD_DISCRETIZATION = 1e-3

# Below this noise multiplier the PLD accountant's memory explodes; fall back to RDP.
_PLD_MIN_MULTIPLIER = 0.05

# Relative slack when comparing ε to a budget: the PLD accountant's ε is an upper bound
# computed on a grid; calibration targets the budget exactly, so allow rounding noise.
_BUDGET_RTOL = 1e-6


MECHANISMS = ("gaussian", "discrete_gaussian")


@dataclasses.dataclass(frozen=True)
class Release:
    """One (possibly repeated, possibly subsampled) Gaussian or discrete Gaussian release.

    Attributes:
      name: what was released (e.g. ``"item_counts"``, ``"iter3/ssp_A"``).
      sensitivity: L2 sensitivity Δ > 0 under add/remove of one user (for a discrete
        Gaussian, in the statistic's integer units, and ≥ step·√coordinates).
      noise_std: the noise per coordinate: the standard deviation σ of a Gaussian, or the
        parameter σ of the discrete Gaussian N_Z(0, σ²) (whose standard deviation is a
        little smaller).
      count: how many times this mechanism is applied (self-composition), ≥ 1.
      sampling_rate: Poisson sampling probability q of users per application, or None
        (every user participates). Gaussian releases only.
      mechanism: ``"gaussian"`` (default) or ``"discrete_gaussian"``.
      coordinates: discrete Gaussian only: the most coordinates one user changes.
      step: discrete Gaussian only: the most (integer) change of one coordinate by one user.
      delta: extra δ charged by basic composition (see the module docstring), ≥ 0.
      draws: how many continuous normals the release draws (informational: their sampler's
        tail mass is what ``delta`` charges, computed by the plan), ≥ 0.
    """

    name: str
    sensitivity: float
    noise_std: float
    count: int = 1
    sampling_rate: float | None = None
    mechanism: str = "gaussian"
    coordinates: int | None = None
    step: int | None = None
    delta: float = 0.0
    draws: int = 0

    def __post_init__(self):
        check_range(f"{self.name}: sensitivity", self.sensitivity, low=0.0, low_open=True)
        check_range(f"{self.name}: noise_std", self.noise_std, low=0.0, low_open=True)
        check_range(f"{self.name}: count", self.count, low=1, integer=True)
        if self.sampling_rate is not None:
            check_range(f"{self.name}: sampling_rate", self.sampling_rate, low=0.0, high=1.0,
                        low_open=True)
        if self.mechanism not in MECHANISMS:
            raise ConfigError(f"{self.name}: mechanism must be one of {', '.join(MECHANISMS)} "
                              f"(got {self.mechanism!r})")
        check_range(f"{self.name}: delta", self.delta, low=0.0, high=1.0, high_open=True)
        check_range(f"{self.name}: draws", self.draws, low=0, integer=True)
        if self.mechanism == "discrete_gaussian":
            if self.coordinates is None or self.step is None:
                raise ConfigError(f"{self.name}: a discrete Gaussian release needs the "
                                  "coordinates one user changes and the step of each")
            check_range(f"{self.name}: coordinates", self.coordinates, low=1, integer=True)
            check_range(f"{self.name}: step", self.step, low=1, integer=True)
            if self.sampling_rate is not None:
                raise ConfigError(f"{self.name}: a subsampled discrete Gaussian is not "
                                  "supported")
            floor = self.step * math.sqrt(self.coordinates)
            if self.sensitivity < floor * (1 - 1e-12):
                raise ConfigError(
                    f"{self.name}: the L2 sensitivity {self.sensitivity:g} is below "
                    f"step·√coordinates = {floor:g}: the RDP bound would not hold")
        elif self.coordinates is not None or self.step is not None:
            raise ConfigError(f"{self.name}: coordinates and step describe discrete Gaussian "
                              "releases only")

    @property
    def noise_multiplier(self) -> float:
        """z = σ / Δ."""
        return self.noise_std / self.sensitivity

    @property
    def discrete(self) -> bool:
        return self.mechanism == "discrete_gaussian"

    def dp_event(self) -> dp_accounting.DpEvent:
        """The Gaussian event (for a discrete Gaussian, the RDP upper bound
        ``GaussianDpEvent(σ/Δ)``: see the module docstring)."""
        event: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(self.noise_multiplier)
        if self.sampling_rate is not None and self.sampling_rate < 1.0:
            event = dp_accounting.PoissonSampledDpEvent(self.sampling_rate, event)
        if self.count > 1:
            event = dp_accounting.SelfComposedDpEvent(event, int(self.count))
        return event

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not self.discrete:
            del d["coordinates"], d["step"]
        if not self.draws:
            del d["draws"]
        d["noise_multiplier"] = self.noise_multiplier
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Release":
        coords, step = d.get("coordinates"), d.get("step")
        return cls(name=d["name"], sensitivity=float(d["sensitivity"]),
                   noise_std=float(d["noise_std"]), count=int(d.get("count", 1)),
                   sampling_rate=d.get("sampling_rate"),
                   mechanism=d.get("mechanism", "gaussian"),
                   coordinates=None if coords is None else int(coords),
                   step=None if step is None else int(step),
                   delta=float(d.get("delta", 0.0)), draws=int(d.get("draws", 0)))


SELECTION_MODES = ("private", "literature")

#: what an uncharged selection's outputs say
NOT_CHARGED = ("the selection among the candidates was NOT charged to the privacy budget (as "
               "in the literature: ε covers one training run, not the choice among N "
               "candidates)")


@dataclasses.dataclass(frozen=True)
class Selection:
    """How a ledger's model was chosen among ``candidates`` candidate configurations.

    Attributes:
      mode: ``"private"`` — private selection by random repetitions (Papernot & Steinke,
        ICLR 2022): the number of repetitions K is random with mean ``mean`` (Poisson when
        ``shape`` is None, else the truncated negative binomial with that shape η; η = 0 is
        the logarithmic, η = 1 the geometric distribution); the ledger's releases are one
        repetition's and its ε is that of ``RepeatAndSelectDpEvent``. ``"literature"`` — the
        best candidate by exact validation score, not charged (ε is one run's).
      candidates: the size of the grid.
      mean, shape: the distribution of K (private mode only).
    """

    mode: str
    candidates: int
    mean: float | None = None
    shape: float | None = None

    def __post_init__(self):
        if self.mode not in SELECTION_MODES:
            raise ConfigError(f"selection mode must be one of {', '.join(SELECTION_MODES)} "
                              f"(got {self.mode!r})")
        check_range("candidates", self.candidates, low=1, integer=True)
        if self.charged:
            if self.mean is None:
                raise ConfigError("a private selection needs the mean number of repetitions")
            check_range("mean number of runs", self.mean, low=1.0, high=1e6)
            if self.shape is not None:
                check_range("shape", self.shape, low=0.0, high=1e6)
        elif self.mean is not None or self.shape is not None:
            raise ConfigError("a literature selection has no repetition distribution")

    @property
    def charged(self) -> bool:
        return self.mode == "private"

    @property
    def distribution(self) -> str | None:
        if not self.charged:
            return None
        return "poisson" if self.shape is None else "truncated negative binomial"

    def wrap(self, event: dp_accounting.DpEvent) -> dp_accounting.DpEvent:
        """The event of the whole selection, given one repetition's ``event``."""
        if not self.charged:
            return event
        shape = math.inf if self.shape is None else float(self.shape)
        return dp_accounting.dp_event.RepeatAndSelectDpEvent(event, float(self.mean), shape)

    def note(self) -> str:
        if not self.charged:
            return NOT_CHARGED
        shape = "" if self.shape is None else f", shape η = {self.shape:g}"
        n = f"{self.candidates} candidate" + ("s" if self.candidates > 1 else "")
        return (f"private selection among {n} (Papernot & Steinke "
                f"2022): a random number K of repetitions ({self.distribution}, mean "
                f"{self.mean:g}{shape}), each a uniformly drawn candidate trained and scored "
                "privately; the releases listed are one repetition's, and ε covers the whole "
                "tuning (RDP accountant)")

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "charged": self.charged, "candidates": self.candidates,
                "distribution": self.distribution, "mean": self.mean, "shape": self.shape,
                "note": self.note()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Selection":
        return cls(mode=d["mode"], candidates=int(d["candidates"]), mean=d.get("mean"),
                   shape=d.get("shape"))


def make_accountant(accountant: str = "pld", sampled: bool = False
                    ) -> dp_accounting.PrivacyAccountant:
    """A fresh ``dp_accounting`` accountant for add/remove-one neighbours; ``sampled``: the
    events it will compose include Poisson-subsampled releases (RDP: at
    :data:`RDP_INTEGER_ORDERS`)."""
    if accountant == "pld":
        return dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    if accountant == "rdp":
        return dp_accounting.rdp.RdpAccountant(
            orders=RDP_INTEGER_ORDERS if sampled else RDP_ORDERS)
    raise ConfigError(f"accountant must be 'pld' or 'rdp' (got {accountant!r})")


def compose(releases: Iterable[Release]) -> dp_accounting.DpEvent:
    """The ``ComposedDpEvent`` of the releases' events (a discrete Gaussian as its RDP bound
    ``GaussianDpEvent(σ/Δ)``: the event of the RDP accountant and of a selection).

    Releases with the same noise multiplier and sampling rate are merged into one
    ``SelfComposedDpEvent`` (the same composition, written so the PLD accountant can use its
    fast self-composition instead of one convolution per release).
    """
    groups: dict[tuple[float, float | None], int] = {}
    for r in releases:
        key = (r.noise_multiplier, r.sampling_rate)
        groups[key] = groups.get(key, 0) + r.count
    events = [Release("_", 1.0, z, n, q).dp_event() for (z, q), n in groups.items()]
    return dp_accounting.ComposedDpEvent(events)


def extra_delta(releases: Iterable[Release]) -> float:
    """Σ of the releases' extra δ (partition selection, sampler tails)."""
    return math.fsum(r.delta for r in releases)


def accounted_delta(delta: float, extra: float) -> float:
    """δ_acc = δ − (1 + δ)·Σδ: the δ left to the accountant once the extra δ is charged
    (module docstring); refused with :class:`PrivacyBudgetError` when nothing is left."""
    avail = delta - (1.0 + delta) * extra if extra else delta
    if not avail > 0:
        raise PrivacyBudgetError(
            f"the releases' extra δ (private partition selection, sampler tails) sums to "
            f"{extra:.4g}, which leaves no δ for the noise at δ = {delta:g}; raise δ or lower "
            "the extra δ (e.g. give the public item catalogue instead of selecting items)")
    return avail


@functools.lru_cache(maxsize=256)
def _gaussian_group_pld(z: float, q: float | None, n: int):
    """The PLD ``dp_accounting.pld.PLDAccountant`` composes for ``Release("_", 1, z, n, q)
    .dp_event()`` (the same calls: its ε is the accountant's, to the last bit)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    rel = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    if q is not None and q < 1.0:
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=z, value_discretization_interval=PLD_DISCRETIZATION,
            sampling_prob=q, neighboring_relation=rel).self_compose(n)
    return pld_lib.from_gaussian_mechanism(
        standard_deviation=z / math.sqrt(n), value_discretization_interval=PLD_DISCRETIZATION,
        neighboring_relation=rel)


def privacy_loss_distribution(releases: Iterable[Release]):
    """The composed ``dp_accounting`` PLD of ``releases`` (grid :data:`PLD_DISCRETIZATION`).

    Gaussian releases with one (z, q) form one group, composed as ``PLDAccountant`` composes
    its ``SelfComposedDpEvent`` (an all-Gaussian ledger's PLD is the accountant's); discrete
    Gaussian releases with one (σ, step) form one group, the discrete-Gaussian PLD
    self-composed over Σ coordinates·count
    (:func:`~dpmt.privacy.discrete_gaussian.discrete_gaussian_pld`).
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    gauss: dict[tuple[float, float | None], int] = {}
    discrete: dict[tuple[float, int], int] = {}
    for r in releases:
        if r.discrete:
            key = (float(r.noise_std), int(r.step))
            discrete[key] = discrete.get(key, 0) + int(r.coordinates) * int(r.count)
        else:
            key = (r.noise_multiplier, r.sampling_rate)
            gauss[key] = gauss.get(key, 0) + int(r.count)
    pld = pld_lib.identity(value_discretization_interval=PLD_DISCRETIZATION)
    for (z, q), n in gauss.items():
        pld = pld.compose(_gaussian_group_pld(z, q, n))
    for (sigma, step), times in discrete.items():
        pld = pld.compose(discrete_gaussian_pld(sigma, step, times, PLD_DISCRETIZATION))
    return pld


def epsilon_of(releases: Iterable[Release], delta: float, accountant: str = "pld",
               selection: Selection | None = None, *, extra: float = 0.0) -> float:
    """ε at δ of the composition of ``releases`` (0 for no release); with a charged
    ``selection``, of its ``RepeatAndSelectDpEvent`` around that composition (RDP).

    The releases' extra δ (plus ``extra``, e.g. that of releases still to come) is charged
    first: ε is the accountant's at δ_acc = δ − (1 + δ)·Σδ (:func:`accounted_delta`).

    Under a charged selection the repetition is not RDP once it has extra δ, so the bound
    is by coupling: each repetition equals an RDP one except with probability ≤ Σδ (the
    partition-selection event, the sampler's tail), so the whole selection differs from the
    RDP one with probability ≤ E[K]·Σδ on either neighbour, and ε is the smallest found with
    δ_RDP(ε) + (1 + e^ε)·E[K]·Σδ ≤ δ (fixed-point iteration on ε).

    Raises :class:`PrivacyBudgetError` when the extra δ leaves nothing for the noise.
    """
    releases = list(releases)
    if not releases:
        return 0.0
    extra = float(extra) + extra_delta(releases)
    if selection is not None and selection.charged:
        _check_selection_accountant(selection, accountant)
        return _selection_epsilon(releases, delta, selection, extra)
    avail = accounted_delta(delta, extra)
    if accountant == "pld" and min(r.noise_multiplier for r in releases) < _PLD_MIN_MULTIPLIER:
        # The PLD grid grows like 1/z²; at such multipliers ε is huge anyway, and RDP is
        # also a valid upper bound.
        accountant = "rdp"
    if accountant == "pld":
        return float(privacy_loss_distribution(releases).get_epsilon_for_delta(avail))
    acc = make_accountant(accountant, sampled=is_sampled(releases))
    acc.compose(compose(releases))
    return float(acc.get_epsilon(avail))


def is_sampled(releases: Iterable) -> bool:
    """Whether any release (or planned release) is Poisson-subsampled."""
    return any(r.sampling_rate is not None for r in releases)


def _selection_epsilon(releases: list[Release], delta: float, selection: Selection,
                       extra: float) -> float:
    acc = make_accountant("rdp", sampled=is_sampled(releases))
    acc.compose(selection.wrap(compose(releases)))
    if not extra:
        return float(acc.get_epsilon(delta))
    c = float(selection.mean) * extra
    eps = 0.0
    for _ in range(200):
        slack = delta - (1.0 + math.exp(min(eps, 700.0))) * c
        if not slack > 0:
            break
        new = float(acc.get_epsilon(slack))
        if new - eps <= 1e-10 * (1.0 + eps):
            cand = new + 1e-9 * (1.0 + new)
            if acc.get_delta(cand) + (1.0 + math.exp(min(cand, 700.0))) * c <= delta:
                return cand
        eps = max(new, eps)
    raise PrivacyBudgetError(
        f"the releases' extra δ ({extra:.4g} per repetition, {c:.4g} over the mean "
        f"{selection.mean:g} repetitions) leaves no δ for a private selection at δ = "
        f"{delta:g}; raise δ, lower the mean number of repetitions, or give the public item "
        "catalogue instead of selecting items")


def _check_selection_accountant(selection: Selection | None, accountant: str) -> None:
    if selection is not None and selection.charged and accountant != "rdp":
        raise ConfigError("a private selection (RepeatAndSelectDpEvent) is accounted by "
                          f"dp_accounting's RDP accountant only; use accountant='rdp' (got "
                          f"{accountant!r})")


class PrivacyLedger:
    """Records every release, composes them, reports (ε, δ); refuses to exceed a budget.

    Privacy unit: one user (add/remove-one). See the module docstring.

    Args:
      delta: the δ at which ε is reported, 0 < δ < 1.
      epsilon_budget: if given, :meth:`record` refuses (raises
        :class:`~dpmt.errors.PrivacyBudgetError`, recording nothing) any release that would
        take ε(δ) above it.
      accountant: ``"pld"`` (default, tight) or ``"rdp"``.
      selection: how the model was chosen among candidates (:class:`Selection`), or None
        (one run). A charged selection needs ``accountant="rdp"``.
    """

    def __init__(self, delta: float, epsilon_budget: float | None = None,
                 accountant: str = "pld", selection: Selection | None = None):
        check_range("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
        if epsilon_budget is not None:
            check_range("epsilon_budget", epsilon_budget, low=0.0, low_open=True)
        make_accountant(accountant)  # validates the name
        _check_selection_accountant(selection, accountant)
        self.selection = selection
        self.delta = float(delta)
        self.epsilon_budget = None if epsilon_budget is None else float(epsilon_budget)
        self.accountant = accountant
        self._releases: list[Release] = []
        self._epsilon = 0.0

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    def __len__(self) -> int:
        return len(self._releases)

    def epsilon(self, delta: float | None = None) -> float:
        """ε of everything recorded so far, at ``delta`` (default: the ledger's δ)."""
        if delta is None or delta == self.delta:
            return self._epsilon
        return epsilon_of(self._releases, delta, self.accountant, self.selection)

    def event(self) -> dp_accounting.DpEvent:
        event = compose(self._releases)
        return event if self.selection is None else self.selection.wrap(event)

    def would_spend(self, release: Release) -> float:
        """ε(δ) after recording ``release``, without recording it."""
        return epsilon_of([*self._releases, release], self.delta, self.accountant,
                          self.selection)

    def record(self, release: Release) -> Release:
        """Record a release; raise :class:`PrivacyBudgetError` (recording nothing) if it
        would exceed the budget."""
        if any(r.name == release.name for r in self._releases):
            raise ConfigError(f"release {release.name!r} is already in the ledger: names must be "
                              "unique so that a resumed run never charges a release twice")
        eps = self.would_spend(release)
        if (self.epsilon_budget is not None
                and eps > self.epsilon_budget * (1 + _BUDGET_RTOL) + 1e-9):
            raise PrivacyBudgetError(
                f"release {release.name!r} would bring ε to {eps:.4g} at δ={self.delta:g}, "
                f"above the budget ε={self.epsilon_budget:g}; nothing was released. Increase the "
                "noise, release less, or raise the budget.")
        self._releases.append(release)
        self._epsilon = eps
        return release

    def __contains__(self, name: str) -> bool:
        return any(r.name == name for r in self._releases)

    # -- reporting and persistence -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = {
            "privacy_unit": PRIVACY_UNIT,
            "neighboring_relation": "add_or_remove_one",
            "accountant": self.accountant,
            "delta": self.delta,
            "epsilon": self._epsilon,
            "epsilon_budget": self.epsilon_budget,
            "extra_delta": extra_delta(self._releases),
            "releases": [r.to_dict() for r in self._releases],
        }
        if self.selection is not None:
            d["selection"] = self.selection.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PrivacyLedger":
        sel = d.get("selection")
        led = cls(delta=d["delta"], epsilon_budget=d.get("epsilon_budget"),
                  accountant=d.get("accountant", "pld"),
                  selection=None if sel is None else Selection.from_dict(sel))
        led._releases = [Release.from_dict(r) for r in d.get("releases", [])]
        led._epsilon = epsilon_of(led._releases, led.delta, led.accountant, led.selection)
        return led

    def save(self, path: str | os.PathLike) -> None:
        """Write ``ledger.json`` atomically (temp file + rename)."""
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "PrivacyLedger":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def summary(self) -> str:
        """A text table of the releases (mechanism: G Gaussian, DG discrete Gaussian, with
        the coordinates × step one user moves) and the total."""
        lines = [f"Privacy ledger (unit: {PRIVACY_UNIT}; accountant: {self.accountant})",
                 f"{'release':<28} {'mech.':>12} {'sens.':>10} {'noise std':>12} {'z':>9} "
                 f"{'count':>6} {'q':>7} {'extra δ':>9}"]
        for r in self._releases:
            q = "-" if r.sampling_rate is None else f"{r.sampling_rate:.3g}"
            mech = f"DG {r.coordinates}×{r.step}" if r.discrete else "G"
            xd = f"{r.delta:.3g}" if r.delta else "-"
            lines.append(f"{r.name:<28} {mech:>12} {r.sensitivity:>10.4g} {r.noise_std:>12.4g} "
                         f"{r.noise_multiplier:>9.4g} {r.count:>6d} {q:>7} {xd:>9}")
        budget = "" if self.epsilon_budget is None else f" (budget {self.epsilon_budget:g})"
        if self.selection is not None:
            lines.append(f"selection: {self.selection.note()}")
        extra = extra_delta(self._releases)
        if extra:
            lines.append(f"extra δ (partition selection, sampler tails): {extra:.4g}, charged "
                         "within δ by basic composition")
        lines.append(f"total: ε = {self._epsilon:.4f} at δ = {self.delta:g}{budget}")
        return "\n".join(lines)


def gaussian_epsilon(noise_multiplier: float, delta: float, count: int = 1) -> float:
    """ε of ``count`` compositions of the Gaussian mechanism with multiplier z (PLD)."""
    return epsilon_of([Release("g", 1.0, noise_multiplier, count)], delta)

