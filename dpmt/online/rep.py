"""The replacement mechanism ``Rep(U, V, D, a, b)`` (Definition 10 and Lemma 11, Sanyal 2026).

Given two online prediction sequences ``U = (u_t)``, ``V = (v_t)`` (supplied before each
prediction) and labels ``y_t`` (after it), ``Rep`` outputs ``w_t = u_t`` when ``u_t = v_t``;
on disagreement rounds it follows ``U`` until a Mirror instance on the disagreement bits
``Δ_t = 1{u_t ≠ v_t}`` answers ⊤ *and* an acceptance test passed::

    μ_t = Mirror(a/2, b/2, D)(Δ_t)                                          (Fact 4)
    c   = #{first D disagreement rounds with v_t = y_t}   (all of them if fewer than D)
    ξ   ~ Laplace(scale 4/a) conditioned on |ξ| ≤ D/8,  independent of the Mirror
    acc = 1{c + ξ ≥ D/2}
    w_t = v_t if (μ_t = ⊤ and acc = 1) else u_t

The Mirror answers ⊥ on the first ``D`` disagreement rounds, so ``acc`` is only used once the
labels of all rounds entering ``c`` are known: the mechanism is online.

**Privacy (Lemma 12's per-replacement step, with exact constants).** Changing one triple
``(u_i, v_i, y_i)`` changes ``c`` by at most 2 (round ``i`` itself and one round entering or
leaving the first-``D`` window). The acceptance bit is then ``(a/2, δ_acc)``-DP with the
exact value (:func:`acceptance_delta`)::

    δ_acc = (e^{a/2} − 1) · m / (2 (1 − m)),     m = e^{−aD/32}

(proof: with β = 4/a and B = D/8 the truncated survival function
``S(τ) = (e^{−τ/β} − m)/(2(1−m))`` on ``[0, B]`` gives ``S(τ−2) − e^{2/β}S(τ) =
(e^{2/β} − 1) m / (2(1−m))`` for ``τ ∈ [2, B]``, less elsewhere (``e^x + e^{−x} ≥ 2`` on
``[0, 2)``, monotonicity beyond ``B``; symmetric for the other outcome and for shifts of 1);
the paper's cruder bound is ``(1 + e^{a/2}) m``). The Mirror is ``(a/2, δ_M)``-jointly
private with δ_M from its ramp's accounting. Basic composition: Rep is
``(a, δ_M + δ_acc)``-jointly private, and the constructor refuses ``D`` unless this is at most
``(a, b)``.

**Split of ``a`` (option ``share``, dpmt's generalisation).** Definition 10 gives the Mirror
``a/2`` and the acceptance test ``a/2`` (Laplace scale ``4/a``). Nothing in the proof above uses
the halves: with ``share = ρ`` the Mirror is ``Mirror(ρa, b/2, D)`` and the acceptance test
spends ``ε_acc = (1−ρ)a`` with Laplace scale ``β = 2/ε_acc`` (still truncated to ``D/8``), and
the same argument gives ``δ_acc = (e^{ε_acc} − 1) m / (2(1 − m))``, ``m = e^{−ε_acc D/16}``;
basic composition again gives ``(ρa + (1−ρ)a, δ_M + δ_acc) = (a, δ_M + δ_acc)``. The default
``ρ = 1/2`` is Definition 10 exactly. A larger ``ρ`` shortens the Mirror window
(``W ∝ (ρa)^{−2}``), the only size that matters in practice, at the price of a larger
acceptance minimum ``∝ 1/((1−ρ)a)`` (usually far below ``W``). Lemma 11 only uses
``|ξ| ≤ D/8``, so it holds for every ``ρ``.

**Lemma 11** (tested for every seed and for extreme values of the randomness): for ``D`` with
``W ≤ D`` (Mirror window) — the constructor enforces it — and every ``K ≤ D/4``:
(i) if ``M(V; S_{1:r}) < K`` then ``M(W; S_{1:r}) ≤ K + 2D``; (ii) if
``M(U; S_{1:t−1}) ≤ D/4`` then ``w_t = u_t``.
"""

from __future__ import annotations

import decimal
import math

import numpy as np

from dpmt.errors import ConfigError, check_range
from dpmt.online.mirror import Mirror, RampDesign, mirror_window

__all__ = ["Replacement", "acceptance_delta", "acceptance_prob", "acceptance_delta_exact",
           "acceptance_min_D", "rep_min_D", "truncated_laplace", "check_share"]


def check_share(share: float) -> float:
    """Validate the Mirror's share ``ρ ∈ (0, 1)`` of a replacement's ``a``."""
    check_range("Rep mirror share", share, low=0, high=1, low_open=True, high_open=True)
    return float(share)


def acceptance_delta(a: float, D: float, share: float = 0.5) -> float:
    """Closed-form δ of the acceptance bit at ``ε_acc = (1 − share)·a`` (default ``a/2``;
    see module docstring)."""
    e = (1.0 - share) * a
    x = e * D / 16.0
    if x > 700:
        return 0.0 if x > 745 else math.expm1(e) * math.exp(-x) / 2.0
    m = math.exp(-x)
    return math.expm1(e) * m / (2.0 * (1.0 - m)) if m < 1 else 1.0


def acceptance_min_D(a: float, delta: float, share: float = 0.5) -> int:
    """Smallest integer ``D`` with :func:`acceptance_delta` ``(a, D, share) ≤ delta``."""
    e = (1.0 - share) * a
    r = delta / math.expm1(e)
    # m/(1-m) ≤ 2r  ⟺  m ≤ 2r/(1+2r)
    D = max(1, math.ceil(16.0 / e * math.log((1 + 2 * r) / (2 * r))))
    if D > 1 << 50:  # beyond exact float steps: pad by a relative margin instead
        D = math.ceil(D * (1 + 1e-9)) + 1
        if acceptance_delta(a, D, share) > delta:
            raise ConfigError(f"acceptance test: no delay found for a={a:g}, δ={delta:g}")
        return D
    while acceptance_delta(a, D, share) > delta:
        D += 1
    while D > 1 and acceptance_delta(a, D - 1, share) <= delta:
        D -= 1
    return D


def acceptance_prob(c, D: float, a: float, share: float = 0.5):
    """``P[acc = 1 | c] = P[ξ ≥ D/2 − c]`` for the truncated Laplace ξ of scale
    ``2/((1 − share)a)`` (``4/a`` by default), vectorised in c."""
    beta = 2.0 / ((1.0 - share) * a)
    B = D / 8.0
    m = math.exp(-B / beta)
    tau = D / 2.0 - np.asarray(c, float)
    with np.errstate(over="ignore"):
        up = (np.exp(-np.abs(tau) / beta) - m) / (2.0 * (1.0 - m))
    p = np.where(tau >= 0, up, 1.0 - up)
    p = np.where(tau > B, 0.0, np.where(tau <= -B, 1.0, p))
    return np.clip(p, 0.0, 1.0)


def acceptance_delta_exact(a: float, D: int, digits: int = 60, share: float = 0.5) -> float:
    """δ at ``ε_acc = (1 − share)a`` by enumerating every count ``c ∈ [0, D]`` and shift
    ``|j| ≤ 2``, in ``digits``-digit decimal arithmetic (the float formula cancels
    catastrophically)."""
    ctx = decimal.Context(prec=digits)
    Dec = decimal.Decimal
    e_acc = ctx.multiply(Dec(repr(float(a))), 1 - Dec(repr(float(share))))
    beta = ctx.divide(Dec(2), e_acc)
    B = ctx.divide(Dec(int(D)), Dec(8))
    m = ctx.exp(-ctx.divide(B, beta))
    den = 2 * (1 - m)
    half = ctx.divide(Dec(int(D)), Dec(2))

    def P(c):  # P[acc = 1 | c]
        tau = half - c
        if tau > B:
            return Dec(0)
        if tau <= -B:
            return Dec(1)
        up = ctx.divide(ctx.exp(-ctx.divide(abs(tau), beta)) - m, den)
        return up if tau >= 0 else 1 - up

    p = [P(c) for c in range(int(D) + 1)]
    e = ctx.exp(e_acc)
    worst = Dec(0)
    for j in (1, 2):
        for c in range(int(D) + 1 - j):
            x, y = p[c], p[c + j]
            for u, w in ((x, y), (y, x)):
                worst = max(worst, u - e * w, (1 - u) - e * (1 - w))
    return float(worst)


def truncated_laplace(rng: np.random.Generator, scale: float, bound: float) -> float:
    """One draw of Laplace(scale) conditioned on ``|ξ| ≤ bound`` (inverse CDF)."""
    m = math.exp(-bound / scale)
    u = rng.random()
    if u < 0.5:
        x = scale * math.log(m + 2.0 * u * (1.0 - m))
    else:
        x = -scale * math.log(m + 2.0 * (1.0 - u) * (1.0 - m))
    return min(bound, max(-bound, x))


def rep_min_D(a: float, b: float, design: RampDesign | None = None,
              share: float = 0.5) -> int:
    """Smallest ``D`` that Definition 10 allows here: ``D ≥ W`` (Mirror(share·a, b/2)
    window, for Lemma 11(i)) and ``δ_M + δ_acc ≤ b``."""
    share = check_share(share)
    design = design if design is not None else mirror_window(share * a, b / 2.0)
    room = b - design.delta
    if room <= 0:
        raise ConfigError("the Mirror's δ leaves no room for the acceptance test")
    return max(int(design.W), acceptance_min_D(a, room, share))


class Replacement:
    """``Rep(U, V, D, a, b)`` online (Definition 10).

    Args:
      a, b: privacy target of this replacement (``(a, b)``-jointly private on its stream of
        triples ``(u_t, v_t, y_t)``).
      D: delay; must satisfy :func:`rep_min_D` (ConfigError otherwise).
      rng / seed: randomness (ξ is the first draw, then the Mirror's coins).
      design: Mirror ramp for ``(share·a, b/2)`` (default :func:`mirror_window`).
      xi: optional fixed value of ξ (``|ξ| ≤ D/8``), to test "every value of the randomness".
      share: the Mirror's share ``ρ`` of ``a`` (default 1/2, Definition 10; the acceptance
        test gets ``(1−ρ)a``, see module docstring).

    Per round: ``step(u, v) -> w`` then ``observe(y)``. ``replay(us, vs, ys)`` feeds many past
    rounds at once (same result as the loop). ``privacy()`` returns ``(a, δ_M + δ_acc)``.
    """

    __slots__ = ("a", "b", "D", "mirror", "xi", "c", "dis", "_acc", "_pend", "_v",
                 "delta_acc", "share")

    def __init__(self, a: float, b: float, D: int, *, rng: np.random.Generator | None = None,
                 seed=None, design: RampDesign | None = None, xi: float | None = None,
                 share: float = 0.5):
        check_range("Rep a", a, low=0, low_open=True)
        check_range("Rep b", b, low=0, high=1, low_open=True, high_open=True)
        check_range("Rep D", D, low=1, integer=True)
        self.a, self.b, self.D = float(a), float(b), int(D)
        self.share = check_share(share)
        design = (design if design is not None
                  else mirror_window(self.share * self.a, self.b / 2))
        need = rep_min_D(self.a, self.b, design, self.share)
        if self.D < need:
            raise ConfigError(
                f"Rep delay D={self.D} is too small for (a={self.a:g}, b={self.b:g}): need "
                f"D >= {need} (Mirror window W={design.W} for Lemma 11(i), and the acceptance "
                f"test's truncation must keep δ within b)")
        rng = rng if rng is not None else np.random.default_rng(seed)
        if xi is None:
            xi = truncated_laplace(rng, 2.0 / ((1.0 - self.share) * self.a), self.D / 8.0)
        elif abs(xi) > self.D / 8.0:
            raise ConfigError(f"xi must satisfy |xi| <= D/8 = {self.D / 8} (got {xi})")
        self.xi = float(xi)
        self.mirror = Mirror(self.share * self.a, self.b / 2, self.D, rng=rng, design=design)
        self.delta_acc = acceptance_delta(self.a, self.D, self.share)
        self.c = 0          # v-wins among the first D disagreements
        self.dis = 0        # disagreement rounds seen (including a pending one)
        self._acc = None    # acceptance bit, fixed once D disagreements are labelled
        self._pend = False  # last step was a disagreement awaiting its label
        self._v = 0

    def privacy(self) -> tuple[float, float]:
        """``(a, δ)`` with ``δ = δ_Mirror + δ_acc`` (exact for the parameters used)."""
        return self.a, self.mirror.design.delta + self.delta_acc

    @property
    def accepted(self):
        """The acceptance bit (``None`` until the first D disagreements are labelled)."""
        return self._acc

    def _decide(self) -> bool:
        if self._acc is None:
            self._acc = bool(self.c + self.xi >= self.D / 2.0)
        return self._acc

    def step(self, u: int, v: int) -> int:
        """Output for this round, given ``u_t`` and ``v_t``."""
        if u == v:
            self._pend = False
            return u
        self.dis += 1
        self._pend = self.dis <= self.D
        self._v = v
        top = self.mirror.step(True)
        if top and self._decide():
            return v
        return u

    def observe(self, y: int) -> None:
        """Label of the round just predicted."""
        if self._pend:
            if self._v == y:
                self.c += 1
            self._pend = False

    def replay(self, us, vs, ys) -> np.ndarray:
        """Feed past rounds ``(u_s, v_s, y_s)`` in order; returns the outputs ``w_s``."""
        us = np.asarray(us, np.int8)
        vs = np.asarray(vs, np.int8)
        ys = np.asarray(ys, np.int8)
        out = us.copy()
        dis_idx = np.flatnonzero(us != vs)
        # disagreements that stay within the first D need no coin: count them in bulk
        room = max(0, self.D - self.dis)
        head = dis_idx[:room]
        if head.size:
            self.c += int(np.sum(vs[head] == ys[head]))
            self.dis += head.size
            self.mirror.skip_active(head.size)
        for s in dis_idx[room:]:
            out[s] = self.step(int(us[s]), int(vs[s]))
            self.observe(int(ys[s]))
        self._pend = False
        return out
