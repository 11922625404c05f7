"""The Mirror interface (Fact 4 of Sanyal 2026) by the *mirror ramp* (own construction).

**Interface (Fact 4).** ``Mirror(a, b, D)`` receives an activity bit each round and answers
⊥ (``False``) or ⊤ (``True``): for every value of its randomness it answers ⊥ on every
inactive round and on the first ``D`` active rounds, and ⊤ on every active round after the
first ``D + W`` active rounds; and it is ``(a, b)``-jointly private: changing the activity bit
of one round ``i`` changes the law of the answers on all *other* rounds by at most ``(a, b)``.

**Construction (mirror ramp).** On the ``n``-th active round answer

* ⊥ if ``n ≤ D``;  ⊤ if ``n > D + W``;
* otherwise ⊤ with probability ``p_{n−D}``, a fresh coin per round, where
  ``0 < p_1 < p_2 < … < p_W < 1`` is a fixed increasing *ramp*.

**Privacy (proof).** Fix the activity bits of all rounds except ``i`` and compare bit 0 with
bit 1 at ``i``. Inactive rounds answer ⊥ on both. Active rounds before ``i`` have the same
active index ``n`` on both, hence the same law. An active round after ``i`` with index ``n``
on the first input has index ``n + 1`` on the second. The answers are independent, so the two
laws of the other rounds' answers are products ``⊗_n Bern(q_n)`` and ``⊗_n Bern(q_{n+1})``
over a contiguous range of indices ``n``, where ``q_n = 0`` (``n ≤ D``), ``p_{n−D}``
(``D < n ≤ D+W``), ``1`` (``n > D+W``). Pairs with ``q_n = q_{n+1}`` carry no loss, and a
sub-range is a marginal (post-processing) of the full range ``n = D..D+W``, so the worst case
is the full ramp: the pairs ``(0, p_1), (p_1, p_2), …, (p_{W−1}, p_W), (p_W, 1)``.
:func:`mirror_window` computes the smallest ``W`` for which the hockey-stick divergence of this
pair of products at ``ε = a`` is at most ``b`` in both directions, by exact accounting:

* ``"pld"``: ``dp_accounting`` privacy-loss distributions from the Bernoulli pmfs
  (pessimistic rounding; see :func:`dpmt.online.accounting.bernoulli_product_delta`);
* ``"rdp"``: closed-form Rényi divergences of every Bernoulli pair, summed, converted by
  ``dp_accounting`` (for long ramps);
* ``"analytic"`` (logistic ramp only, for very long ramps): with logit step
  ``λ = 2L/(W−1)``, ``L = ln((1−e)/e)``, the two endpoint pairs contribute exactly
  ``H_ε(full) = e + (1−e) H_ε(middle)`` (strip ``(p_W, 1)``: it shifts ε by ``ln p_W``; strip
  ``(0, e)``: mass ``e`` plus ``(1−e)`` times the rest at ε shifted back). For a middle pair
  with logits ``θ, θ+λ`` and ``A(θ) = log(1+e^θ)``,
  ``D_α = [A(θ+αλ) − αA(θ+λ) − (1−α)A(θ)]/(α−1) ≤ (α/2) λ² max_{[θ, θ+αλ]} A''``
  (Taylor with the non-negative kernel of mass ``α(α−1)/2``; the reverse direction uses
  ``[θ+λ−αλ, θ+λ]``). ``A'' = p(1−p)`` is unimodal with maximum 1/4 and integral 1, so the
  maxima over the ``W−1`` windows sum to at most ``1/λ + (α+3)/4`` (all but ``α+3`` windows
  are dominated by disjoint length-λ integrals on the monotone sides). Hence the middle is
  ``R(α) = αλ/2 + α(α+3)λ²/8``-RDP, converted by ``dp_accounting``.

Ramp shapes (``p_1 = e``, ``p_W = 1 − e``, symmetric ``p_{W+1−i} = 1 − p_i``):

* ``"logistic"``: equal logit steps (the notes' construction);
* ``"tempered"``: logit steps proportional to ``min(cap, (4p(1−p))^{−γ})``, i.e. larger
  steps in the tails where a step costs little (a ⊤ there is rare); ``γ``, ``cap`` and the
  endpoint mass ``e`` are fixed constants (:data:`TEMPERED`). The privacy proof above does not
  depend on the shape; the accounting is always done on the actual ramp used.

Every answer outside the window is deterministic (no coin is consulted), which gives the
"for every value of its randomness" part of Fact 4.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from dpmt.errors import ConfigError, check_range
from dpmt.online import accounting as acc

__all__ = ["Mirror", "RampDesign", "mirror_window", "ramp_probabilities", "TEMPERED"]

#: (gamma, cap, endpoint fraction e/b) of the tempered ramp.
TEMPERED = (0.25, 10.0, 0.25)
#: endpoint fraction e/b of the logistic ramp.
LOGISTIC_ENDPOINT = 0.25
#: largest windows searched with PLD (RDP window) and RDP (analytic window) accounting.
PLD_MAX_W = 600
RDP_MAX_W = 250_000
#: above this window the RDP search runs on the orders near the optimal one (see _search)
SUBORDER_MIN_W = 5000
_COIN_BLOCK = 1024


def ramp_probabilities(W: int, e: float, gamma: float = 0.0, cap: float = 1.0) -> np.ndarray:
    """The ramp ``p_1..p_W`` (increasing, from ``e`` to ``1−e``) with logit steps proportional
    to ``min(cap, (4p(1−p))^{−γ})`` (``γ = 0``: logistic)."""
    if W < 2:
        raise ConfigError(f"ramp length W must be >= 2 (got {W})")
    L = math.log1p(-e) - math.log(e)
    if gamma == 0.0:
        theta = -L + np.arange(W) * (2 * L / (W - 1))
    else:
        grid = np.linspace(-L, L, 20001)
        s = 1.0 / (1.0 + np.exp(-grid))
        step = np.minimum(cap, (4 * s * (1 - s)) ** (-gamma))
        dens = 1.0 / step
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid))])
        cum /= cum[-1]
        theta = np.interp(np.linspace(0.0, 1.0, W), cum, grid)
    theta[0], theta[-1] = -L, L
    p = 1.0 / (1.0 + np.exp(-theta))
    p[0], p[-1] = e, 1.0 - e
    if np.any(np.diff(p) <= 0):
        raise ConfigError(f"ramp of length {W} is not strictly increasing in floating point; "
                          "the privacy target needs a window too long for an explicit ramp")
    return p


@dataclass(frozen=True)
class RampDesign:
    """A ramp meeting ``(a, b)``: window ``W``, shape, and the δ(a) its accounting gives.

    ``probs`` holds ``p_1..p_W`` (``None`` for the analytic logistic ramp, whose
    ``p_i = 1/(1+exp(L − (i−1)λ))`` is computed on the fly).
    """

    a: float
    b: float
    W: int
    shape: str
    method: str
    endpoint: float
    delta: float
    probs: np.ndarray | None = field(default=None, repr=False, compare=False)

    def prob(self, i: int) -> float:
        """``p_i`` for ``1 ≤ i ≤ W``."""
        if self.probs is not None:
            return float(self.probs[i - 1])
        L = math.log1p(-self.endpoint) - math.log(self.endpoint)
        return 1.0 / (1.0 + math.exp(L - (i - 1) * (2 * L / (self.W - 1))))

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The worst-case Bernoulli pairs ``(q_n, q_{n+1})``, ``n = D..D+W`` (explicit ramps)."""
        if self.probs is None:
            raise ConfigError("the analytic ramp is too long to list its pairs")
        q = np.concatenate([[0.0], self.probs, [1.0]])
        return q[:-1], q[1:]


def _delta_explicit(p: np.ndarray, a: float, method: str, orders=None) -> float:
    q = np.concatenate([[0.0], p, [1.0]])
    if method == "pld":
        # the upward rounding bias of the PLD is <= (#blocks) * h; keep it below 2% of a
        h = min(1e-3, 0.02 * a * 8 / len(q))
        return acc.bernoulli_product_delta(q[:-1], q[1:], a, discretization=h, block=8)
    return acc.bernoulli_product_rdp_delta(q[:-1], q[1:], a,
                                           acc.RDP_ORDERS if orders is None else orders)


def _near_orders(p: np.ndarray, a: float) -> np.ndarray:
    """The Rényi orders of :data:`~dpmt.online.accounting.RDP_ORDERS` within a factor 4 of the
    optimal conversion order for ramp ``p`` at ``ε = a`` (both directions). Any subset of
    orders gives a valid (possibly looser) δ bound, so a search on them stays private."""
    q = np.concatenate([[0.0], p, [1.0]])
    r_pq, _, r_qp, _ = acc.bernoulli_product_rdp(q[:-1], q[1:], acc.RDP_ORDERS)
    best = []
    for r in (r_pq, r_qp):
        if np.any(r > 0):
            best.append(acc.rdp_to_order(acc.RDP_ORDERS, r, a))
    if not best:
        return acc.RDP_ORDERS
    lo, hi = max(1.0, min(best) / 4.0), max(best) * 4.0
    sub = acc.RDP_ORDERS[(acc.RDP_ORDERS >= lo) & (acc.RDP_ORDERS <= hi)]
    return sub if sub.size >= 4 else acc.RDP_ORDERS


def _analytic_delta(W: int, e: float, a: float) -> float:
    """δ(a) bound of the logistic ramp from the curvature bound (see module docstring)."""
    L = math.log1p(-e) - math.log(e)
    lam = 2.0 * L / (W - 1)
    # orders around the Gaussian optimum  α* = 1 + a/λ  (plus a fixed grid)
    astar = 1.0 + a / lam
    orders = np.unique(np.concatenate([acc.RDP_ORDERS, astar * np.geomspace(0.2, 5.0, 61)]))
    orders = orders[orders > 1.0]
    rdp = orders * lam / 2.0 + orders * (orders + 3.0) * lam * lam / 8.0
    return min(1.0, e + (1.0 - e) * acc.rdp_to_delta(orders, rdp, a))


def _analytic_window(a: float, b: float) -> tuple[int, float, float]:
    """Smallest W (and its endpoint e, δ) with the analytic bound ≤ b (logistic ramp)."""
    best = None
    for frac in (0.125, 0.25, 0.5):
        e = frac * b
        lo, hi = 1.0, 2.0
        while _analytic_delta(int(hi), e, a) > b:
            lo, hi = hi, hi * 2.0
            if hi > 1e300:
                raise ConfigError(f"Mirror window for a={a:g}, b={b:g} is beyond floating point")
        while hi - lo > max(1.0, 1e-9 * hi):
            mid = math.floor((lo + hi) / 2)
            if mid <= lo:
                break
            if _analytic_delta(int(mid), e, a) <= b:
                hi = float(mid)
            else:
                lo = float(mid)
        W = int(hi)
        d = _analytic_delta(W, e, a)
        if best is None or W < best[0]:
            best = (W, e, d)
    return best


def _search(a: float, b: float, make, method: str, start: int) -> tuple[int, float]:
    """Smallest W with δ(make(W)) ≤ b: galloping from ``start``, then bisection (to within
    0.5% above 5000).

    The returned W is one whose δ was computed and found ≤ b (the privacy guarantee never
    relies on monotonicity of δ in W; only the minimality does). For RDP searches from
    ``start > SUBORDER_MIN_W`` the δ's are computed on the orders near the optimal one
    (:func:`_near_orders`, 3–4× faster), and the δ returned for the final W is the smaller of
    that bound and the bound on all orders (both are valid upper bounds)."""
    cache = {}
    orders = None
    if method == "rdp" and start > SUBORDER_MIN_W:
        orders = _near_orders(make(max(2, int(start))), a)

    def ok(W):
        if W not in cache:
            cache[W] = _delta_explicit(make(W), a, method, orders)
        return cache[W] <= b

    W, d = _search_loop(ok, cache, start)
    if orders is not None:
        d = min(d, _delta_explicit(make(W), a, method))
    return W, d


def _search_loop(ok, cache, start: int) -> tuple[int, float]:
    hi = max(2, int(start))
    if ok(hi):
        lo = hi
        while lo > 2 and ok(lo):
            hi, lo = lo, max(2, lo // 2)
        if ok(lo):
            return lo, cache[lo]
    else:
        lo = hi
        while not ok(hi):
            lo, hi = hi, hi * 2
    # exact minimality for short ramps; within 0.5% for long ones (cost: one evaluation each)
    while hi - lo > max(1, int(0.005 * hi) if hi > 5000 else 1):
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, cache[hi]


@functools.lru_cache(maxsize=64)
def mirror_window(a: float, b: float, shape: str = "auto", method: str = "auto") -> RampDesign:
    """Design the ramp for ``(a, b)``: smallest window ``W`` by exact accounting.

    ``shape``: ``"tempered"``, ``"logistic"`` or ``"auto"`` (tempered unless the analytic
    method is needed). ``method``: ``"pld"``, ``"rdp"``, ``"analytic"`` or ``"auto"``: RDP
    search when the analytic window is at most :data:`RDP_MAX_W`, then a PLD search below
    the RDP window when that is at most :data:`PLD_MAX_W`; the analytic (logistic) design
    beyond. Results are cached per ``(a, b, shape, method)``.
    """
    check_range("Mirror a", a, low=0, low_open=True)
    check_range("Mirror b", b, low=0, high=1, low_open=True, high_open=True)
    if shape not in ("auto", "tempered", "logistic"):
        raise ConfigError(f"unknown ramp shape {shape!r} (tempered, logistic, auto)")
    if method not in ("auto", "pld", "rdp", "analytic"):
        raise ConfigError(f"unknown accounting method {method!r} (pld, rdp, analytic, auto)")
    W_an, e_an, d_an = _analytic_window(a, b)
    if method == "analytic" or (method == "auto" and W_an > RDP_MAX_W):
        if shape == "tempered":
            raise ConfigError("the analytic accounting covers the logistic ramp only")
        return RampDesign(a, b, W_an, "logistic", "analytic", e_an, d_an, None)
    if shape == "auto":
        shape = "tempered"
    g, cap, frac = TEMPERED if shape == "tempered" else (0.0, 1.0, LOGISTIC_ENDPOINT)
    e = frac * b

    def make(W):
        return ramp_probabilities(W, e, g, cap)

    if method in ("rdp", "auto"):
        W, d = _search(a, b, make, "rdp", max(2, (2 * W_an) // 5))
        used = "rdp"
        if method == "auto" and W <= PLD_MAX_W:
            W2, d2 = _search(a, b, make, "pld", max(2, (3 * W) // 4))
            if W2 <= W:
                W, d, used = W2, d2, "pld"
    else:
        W, d = _search(a, b, make, "pld", max(2, W_an // 3))
        used = "pld"
    p = make(W)
    p.setflags(write=False)
    return RampDesign(a, b, W, shape, used, e, d, p)


class Mirror:
    """``Mirror(a, b, D)`` by the mirror ramp (see module docstring).

    Args:
      a, b: privacy target (any ``a > 0``, ``0 < b < 1``).
      D: number of active rounds always answered ⊥ (integer ``≥ 0``).
      rng: ``numpy.random.Generator`` for the coins (or ``seed``).
      design: a :class:`RampDesign` (default :func:`mirror_window(a, b)`).

    ``step(active) -> bool`` (``True`` = ⊤). ``W`` is the window; ``privacy()`` returns
    ``(a, δ)`` with the δ computed for the ramp in use. Coins are drawn in blocks and only on
    active rounds inside the window, so the ``n``-th window coin is the same however the
    rounds are fed (needed to replay a stream, Algorithm 3).
    """

    __slots__ = ("a", "b", "D", "design", "W", "n", "_rng", "_coins", "_ci", "_probs", "_hi")

    def __init__(self, a: float, b: float, D: int, *, rng: np.random.Generator | None = None,
                 seed=None, design: RampDesign | None = None):
        check_range("Mirror D", D, low=0, integer=True)
        self.design = design if design is not None else mirror_window(float(a), float(b))
        self.a = float(a)
        self.b = float(b)
        if self.design.a > self.a or self.design.delta > self.b:
            raise ConfigError(f"ramp design for (a={self.design.a:g}, δ={self.design.delta:.3g}) "
                              f"does not meet Mirror (a={self.a:g}, b={self.b:g})")
        self.D = int(D)
        self.W = int(self.design.W)
        self.n = 0
        self._rng = rng if rng is not None else np.random.default_rng(seed)
        self._coins = np.empty(0)
        self._ci = 0
        self._probs = self.design.probs
        self._hi = self.D + self.W

    def privacy(self) -> tuple[float, float]:
        """``(a, δ)``: joint privacy of the answers, δ from the ramp's accounting."""
        return self.a, float(self.design.delta)

    def prob_top(self, n: int) -> float:
        """P[⊤] on the ``n``-th active round."""
        if n <= self.D:
            return 0.0
        if n > self._hi:
            return 1.0
        return self.design.prob(n - self.D)

    def top_probabilities(self, activity) -> np.ndarray:
        """P[⊤] on every round of a whole activity sequence (0 on inactive rounds)."""
        act = np.asarray(activity, bool)
        n = np.cumsum(act)
        out = np.zeros(act.size)
        for t in np.flatnonzero(act):
            out[t] = self.prob_top(int(n[t]))
        return out

    def _coin(self) -> float:
        if self._ci >= self._coins.size:
            self._coins = self._rng.random(_COIN_BLOCK)
            self._ci = 0
        u = self._coins[self._ci]
        self._ci += 1
        return u

    def step(self, active) -> bool:
        """Answer for this round (``True`` = ⊤)."""
        if not active:
            return False
        self.n += 1
        n = self.n
        if n <= self.D:
            return False
        if n > self._hi:
            return True
        i = n - self.D
        p = self._probs[i - 1] if self._probs is not None else self.design.prob(i)
        return bool(self._coin() < p)

    def skip_active(self, count: int) -> None:
        """Register ``count`` active rounds known to fall at or before ``D`` (no coins)."""
        if self.n + count > self.D:
            raise ConfigError("skip_active may only cover the first D active rounds")
        self.n += count
