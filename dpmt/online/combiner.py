"""``Combine_D(U, V)`` (Algorithm 4 and Lemma 13, Sanyal 2026).

Counters ``c1, c2`` of the disagreement rounds won by ``U`` and by ``V``. On round ``t``, with
``u_t, v_t`` supplied before predicting::

    p_t = (D + c1)² / ((D + c1)² + (D + c2)²);   predict u_t with probability p_t, else v_t
    then, with y_t:  c1 += 1{u_t ≠ v_t, u_t = y_t};   c2 += 1{u_t ≠ v_t, v_t = y_t}

with a fresh uniform draw per choice (drawn in blocks, only on disagreement rounds; on
agreement rounds the output is the common bit).

**Privacy (Lemma 13).** Changing one triple changes each counter by at most one; the
privacy loss ``L`` of the outputs on the other rounds satisfies
``|Z_t| ≤ 4/D``, ``E L ≤ 64/D``, ``Var L ≤ 64/D``, ``|Z_t − E Z_t| ≤ 8/D``, and Bernstein's
inequality with ``λ = ln(1/δ_c)`` gives ``P[L > ε_c] ≤ δ_c`` for::

    ε_c(D, δ_c) = 64/D + sqrt(128 λ / D) + 16 λ / (3D)

so ``Combine_D`` is ``(ε_c, δ_c)``-jointly private on streams of triples (the paper takes
``δ_c = δ/2``, ``λ = log(2/δ)``, and requires ``ε_c ≤ ε/2``). :func:`combiner_min_D` is the
smallest ``D`` meeting a target; :class:`Combiner` refuses smaller ``D``.

**Mistakes (Lemma 13).** For fixed sequences, ``E M ≤ 3 min(M(U), M(V)) + 2D``;
:func:`expected_mistakes` computes ``E M`` exactly (the counters are deterministic given
``U, V, y``).
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.errors import ConfigError, check_range

__all__ = ["Combiner", "combiner_epsilon", "combiner_min_D", "prob_first", "expected_mistakes"]

_BLOCK = 1024


def combiner_epsilon(D: float, delta: float) -> float:
    """``ε_c = 64/D + sqrt(128λ/D) + 16λ/(3D)``, ``λ = ln(1/δ)`` (Lemma 13)."""
    check_range("combiner D", D, low=0, low_open=True)
    check_range("combiner delta", delta, low=0, high=1, low_open=True, high_open=True)
    lam = math.log(1.0 / delta)
    return 64.0 / D + math.sqrt(128.0 * lam / D) + 16.0 * lam / (3.0 * D)


def combiner_min_D(epsilon: float, delta: float) -> int:
    """Smallest integer ``D`` with ``combiner_epsilon(D, δ) ≤ ε`` (Lemma 13's condition)."""
    check_range("combiner epsilon", epsilon, low=0, low_open=True)
    lam = math.log(1.0 / delta)
    # with x = 1/sqrt(D):  (64 + 16λ/3) x² + sqrt(128λ) x − ε ≤ 0
    A = 64.0 + 16.0 * lam / 3.0
    Bc = math.sqrt(128.0 * lam)
    x = 2 * epsilon / (Bc + math.sqrt(Bc * Bc + 4 * A * epsilon))  # stable root
    D = max(1, math.ceil(1.0 / (x * x)))
    # correct floating-point rounding: smallest D with ε_c(D) ≤ ε (ε_c decreases in D)
    lo, hi = max(0, D - 2 - D // 10 ** 9), D
    while combiner_epsilon(hi, delta) > epsilon:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 1 and combiner_epsilon(mid, delta) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


def prob_first(c1: int, c2: int, D: float) -> float:
    """``p = (D+c1)² / ((D+c1)² + (D+c2)²)``."""
    a = (D + c1) ** 2
    b = (D + c2) ** 2
    return a / (a + b)


def expected_mistakes(us, vs, ys, D: float) -> float:
    """Exact ``E M(Combine_D(U, V); S)`` for fixed sequences."""
    us = np.asarray(us)
    vs = np.asarray(vs)
    ys = np.asarray(ys)
    m = float(np.sum((us == vs) & (us != ys)))
    c1 = c2 = 0
    for t in np.flatnonzero(us != vs):
        p = prob_first(c1, c2, D)
        if us[t] == ys[t]:
            m += 1.0 - p
            c1 += 1
        else:
            m += p
            c2 += 1
    return m


class Combiner:
    """``Combine_D`` online.

    Args:
      D: prior offset of the counters.
      epsilon, delta: the joint-privacy target ``(ε_c, δ_c)``; ``D`` must satisfy
        ``combiner_epsilon(D, δ_c) ≤ ε_c`` (else :class:`ConfigError`).
      rng / seed: randomness for the choices.

    ``choose(u, v) -> int`` then ``observe(y)``. ``privacy()`` returns
    ``(combiner_epsilon(D, δ_c), δ_c)``.
    """

    __slots__ = ("D", "delta", "c1", "c2", "_rng", "_coins", "_ci", "_u", "_v", "_dis")

    def __init__(self, D: int, epsilon: float, delta: float, *,
                 rng: np.random.Generator | None = None, seed=None):
        check_range("combiner D", D, low=1, integer=True)
        check_range("combiner epsilon", epsilon, low=0, low_open=True)
        check_range("combiner delta", delta, low=0, high=1, low_open=True, high_open=True)
        need = combiner_min_D(epsilon, delta)
        if D < need:
            raise ConfigError(
                f"combiner D={D} is below Lemma 13's condition for (ε={epsilon:g}, "
                f"δ={delta:g}): need D >= {need} (64/D + sqrt(128λ/D) + 16λ/(3D) ≤ ε, "
                f"λ = ln(1/δ))")
        self.D = int(D)
        self.delta = float(delta)
        self.c1 = 0
        self.c2 = 0
        self._rng = rng if rng is not None else np.random.default_rng(seed)
        self._coins = np.empty(0)
        self._ci = 0
        self._u = self._v = 0
        self._dis = False

    def privacy(self) -> tuple[float, float]:
        """``(ε_c, δ_c)`` from Lemma 13 for the ``D`` in use."""
        return combiner_epsilon(self.D, self.delta), self.delta

    def choose(self, u: int, v: int) -> int:
        self._u, self._v = u, v
        if u == v:
            self._dis = False
            return u
        self._dis = True
        if self._ci >= self._coins.size:
            self._coins = self._rng.random(_BLOCK)
            self._ci = 0
        r = self._coins[self._ci]
        self._ci += 1
        a = (self.D + self.c1) ** 2
        b = (self.D + self.c2) ** 2
        return u if r * (a + b) < a else v

    def observe(self, y: int) -> None:
        if self._dis:
            if self._u == y:
                self.c1 += 1
            else:
                self.c2 += 1
            self._dis = False
