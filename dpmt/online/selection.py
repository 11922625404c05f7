"""Private sparse selection over lists of candidates (the ``Select`` of Fact 3, Sanyal 2026).

Input: ``k`` lists ``C_1..C_k`` of candidates from a universe ``U``, each of size at most ``s``.
The score of ``v ∈ U`` is its count ``c(v) = #{i : v ∈ C_i}``. **Sparse exponential
mechanism** (construction of this module, the interface of Fact 3 / [Lyu26, Lemma 3.1])::

    P[v] = e^{ε c(v)} / Z  for c(v) ≥ 1,      P[⊥] = Γ / Z,      Z = Γ + Σ_{c(v) ≥ 1} e^{ε c(v)}

where ``ε`` is the *temperature* and ``Γ`` the weight of ⊥ (it stands in for the universe of
zero-count candidates, which is never enumerated).

**Privacy (proof).** Let the inputs differ in ``g`` lists (``g = 1``: replacement of one
list). Every count changes by at most ``g``, and at most ``g·s`` candidates have count 0 on one
input and count ``≤ g`` on the other. Hence
``Z' ≤ Γ + e^{gε}(Z − Γ) + g s e^{gε} ≤ e^{gε} Z`` provided ``Γ (e^{gε} − 1) ≥ g s e^{gε}``
(and symmetrically). Then, for a candidate in both supports,
``P[v]/P'[v] = e^{ε(c−c')} Z'/Z ≤ e^{2gε}``; ``P[⊥]/P'[⊥] = Z'/Z ≤ e^{gε}``; and the outputs
possible under one input only have total probability ``≤ g s e^{gε}/Γ``. So the mechanism is

    (2 g ε,  g s e^{gε} / Γ)-DP   whenever   Γ (e^{gε} − 1) ≥ g s e^{gε}.

(With ``g = 1`` and ``Γ = s e^ε/δ`` this is the ``(2ε, δ)`` of the notes.) Tests check it by
exact enumeration of the output distributions on neighbouring inputs.

**Utility (Fact 3 with explicit constants).** With ``lo = 3k/5`` and ``hi = 9k/10``:
``P[return v with c(v) < lo] ≤ k s e^{ε(⌈lo⌉−1)}/Γ`` (since ``Z ≥ Γ``), and if some count is
``≥ hi`` then ``P[⊥] ≤ Γ e^{−ε ⌈hi⌉}``. :func:`selection_failure_bound` returns the larger of
the two; :func:`balanced_gamma` picks the ``Γ`` equalising them,
``Γ = sqrt(k s) e^{ε(⌈lo⌉−1+⌈hi⌉)/2}``, and a privacy floor may raise it further (a larger
``Γ`` only lowers the privacy δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpmt.errors import ConfigError, check_range

__all__ = ["SparseSelection", "sparse_selection_privacy", "gamma_for_privacy",
           "balanced_gamma", "selection_failure_bound"]


def sparse_selection_privacy(epsilon: float, log_gamma: float, s: int,
                             g: int = 1) -> tuple[float, float]:
    """``(2gε, g s e^{gε}/Γ)`` for inputs differing in ``g`` lists (``Γ = e^{log_gamma}``).

    Raises :class:`ConfigError` when ``Γ (e^{gε} − 1) < g s e^{gε}`` (privacy not established).
    """
    ge = g * epsilon
    # condition  log Γ + log(e^{gε} − 1) ≥ log(g s) + gε
    if log_gamma + math.log(math.expm1(ge)) < math.log(g * s) + ge:
        raise ConfigError(
            f"sparse selection: the weight of ⊥ is too small to establish privacy for {g} "
            f"changed list(s) (need log Γ ≥ {math.log(g * s) + ge - math.log(math.expm1(ge)):.4g},"
            f" got {log_gamma:.4g})")
    return 2 * ge, math.exp(math.log(g * s) + ge - log_gamma)


def gamma_for_privacy(epsilon: float, s: int, delta: float, g: int = 1) -> float:
    """Smallest ``log Γ`` making the mechanism ``(2gε, δ)``-DP for ``g`` changed lists."""
    ge = g * epsilon
    return max(math.log(g * s) + ge - math.log(delta),
               math.log(g * s) + ge - math.log(math.expm1(ge)))


def balanced_gamma(epsilon: float, k: int, s: int) -> float:
    """``log Γ`` equalising the two failure terms of :func:`selection_failure_bound`."""
    lo = math.ceil(3 * k / 5) - 1
    hi = math.ceil(9 * k / 10)
    return 0.5 * (math.log(k * s) + epsilon * (lo + hi))


def selection_failure_bound(epsilon: float, log_gamma: float, k: int, s: int) -> float:
    """Upper bound on the probability that a call violates Fact 3's two properties."""
    lo = math.ceil(3 * k / 5) - 1
    hi = math.ceil(9 * k / 10)
    t1 = math.log(k * s) + epsilon * lo - log_gamma
    t2 = log_gamma - epsilon * hi
    x = max(t1, t2)
    return 1.0 if x >= 0 else math.exp(x)


@dataclass
class SparseSelection:
    """``Select``: sparse exponential mechanism over candidate lists (see module docstring).

    Args:
      epsilon: temperature ``ε > 0`` (a call is ``(2ε, s e^ε/Γ)``-DP per replaced list).
      s: bound on every list's size (checked on each call).
      log_gamma: ``log Γ``, the log-weight of ⊥.

    ``select_counts(counts, rng)`` takes the count vector ``c(v)`` over the universe (the
    lists themselves need never be materialised); ``select_lists(lists, rng)`` takes the lists.
    Both return the index of the chosen candidate or ``None`` for ⊥.
    """

    epsilon: float
    s: int
    log_gamma: float

    def __post_init__(self):
        check_range("selection temperature epsilon", self.epsilon, low=0, low_open=True)
        check_range("list size bound s", self.s, low=1, integer=True)
        if not math.isfinite(self.log_gamma):
            raise ConfigError(f"log_gamma must be finite (got {self.log_gamma})")

    def privacy(self, g: int = 1) -> tuple[float, float]:
        """(ε, δ) of one call for inputs differing in ``g`` lists."""
        return sparse_selection_privacy(self.epsilon, self.log_gamma, self.s, g)

    def distribution(self, counts) -> tuple[np.ndarray, np.ndarray, float]:
        """Exact output law: ``(candidates, probabilities, P[⊥])`` for a count vector."""
        counts = np.asarray(counts)
        cand = np.flatnonzero(counts >= 1)
        logw = self.epsilon * counts[cand].astype(float)
        m = max(self.log_gamma, float(logw.max()) if cand.size else -math.inf)
        w = np.exp(logw - m)
        wb = math.exp(self.log_gamma - m)
        z = w.sum() + wb
        return cand, w / z, wb / z

    def select_counts(self, counts, rng: np.random.Generator):
        """Sample one output for the count vector ``counts`` (``None`` = ⊥)."""
        cand, probs, pbot = self.distribution(counts)
        u = rng.random()
        if u < pbot or cand.size == 0:
            return None
        cum = np.cumsum(probs)
        i = int(np.searchsorted(cum, u - pbot, side="right"))
        return int(cand[min(i, cand.size - 1)])

    def select_lists(self, lists, n_universe: int, rng: np.random.Generator):
        """Sample from lists of candidate indices in ``range(n_universe)``."""
        counts = np.zeros(n_universe, np.int64)
        for lst in lists:
            lst = np.unique(np.asarray(lst, np.int64))
            if lst.size > self.s:
                raise ConfigError(f"a list has {lst.size} candidates, above the bound s={self.s}")
            counts[lst] += 1
        return self.select_counts(counts, rng)
