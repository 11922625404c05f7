"""(ε, δ) helpers for :mod:`dpmt.online` (Mirror, Rep, sparse selection, combiner, JDP predictor).

Everything here is either exact arithmetic on finite distributions, a call into
``dp_accounting`` (privacy-loss distributions, Rényi-DP conversion), or a stated closed form:

* :func:`hockey_stick` — exact ``δ(ε) = Σ_o [P(o) − e^ε Q(o)]_+`` for two finite pmfs
  (the test oracle; no discretisation).
* :func:`bernoulli_product_pld` / :func:`bernoulli_product_delta` — ``δ(ε)`` for two products
  of independent Bernoulli distributions ``P = ⊗ Bern(p_j)``, ``Q = ⊗ Bern(q_j)``, via
  ``dp_accounting``'s PLD built from probability mass functions
  (``from_two_probability_mass_functions``, pessimistic rounding, both directions). To keep
  the rounding bias small, ``block`` consecutive factors are first merged *exactly* into one
  distribution on ``2**block`` outcomes, so the loss of every block is rounded up once (total
  upward bias at most ``ceil(m / block) · discretization`` in ε; the result is an upper bound
  on the true δ).
* :func:`bernoulli_product_rdp_delta` — the same quantity bounded through closed-form Rényi
  divergences of Bernoulli pairs (exact per factor, summed = composition), converted by
  ``dp_accounting.rdp.compute_delta``; factors with ``q_j = 0 < p_j`` have infinite Rényi
  divergence and are handled separately (see the function docstring). Linear in the number of
  factors and without discretisation, so it serves very long products.
* :func:`bit_delta` — exact δ between two one-bit mechanisms.
* :func:`basic_composition` (Σε, Σδ) and :func:`group_privacy` (Fact 1 of Sanyal 2026 in its
  exact form ``(gε, δ Σ_{j<g} e^{jε})``).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from dpmt.errors import ConfigError

__all__ = [
    "hockey_stick", "hockey_stick_both", "bit_delta", "bernoulli_product_pld",
    "bernoulli_product_delta", "bernoulli_product_rdp", "bernoulli_product_rdp_delta",
    "rdp_to_delta", "rdp_to_order", "rdp_to_epsilon", "basic_composition", "group_privacy",
    "RDP_ORDERS",
]

#: Rényi orders used by the RDP bounds here (dense near 1, up to 10^4).
RDP_ORDERS = np.unique(np.concatenate([
    np.linspace(1.02, 2.0, 25), np.linspace(2.0, 20.0, 37), np.geomspace(20.0, 1e4, 28)]))


# -------------------------------------------------------------------------------- exact pmfs
def hockey_stick(p_upper, p_lower, epsilon: float) -> float:
    """Exact ``Σ_o [P(o) − e^ε Q(o)]_+`` for two pmfs given as aligned arrays (or dicts).

    This is the smallest δ with ``P(E) ≤ e^ε Q(E) + δ`` for every event ``E``.
    """
    if isinstance(p_upper, dict) or isinstance(p_lower, dict):
        keys = set(p_upper) | set(p_lower)
        p = np.array([p_upper.get(k, 0.0) for k in keys], float)
        q = np.array([p_lower.get(k, 0.0) for k in keys], float)
    else:
        p = np.asarray(p_upper, float)
        q = np.asarray(p_lower, float)
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


def hockey_stick_both(p, q, epsilon: float) -> float:
    """``max(H_ε(P‖Q), H_ε(Q‖P))``: the δ of (ε, δ)-indistinguishability of P and Q."""
    return max(hockey_stick(p, q, epsilon), hockey_stick(q, p, epsilon))


def bit_delta(p1: float, p2: float, epsilon: float) -> float:
    """Exact δ(ε) between Bern(p1) and Bern(p2), both directions."""
    e = math.exp(epsilon)
    return max(0.0, p1 - e * p2, p2 - e * p1, (1 - p1) - e * (1 - p2), (1 - p2) - e * (1 - p1))


# ------------------------------------------------------------------- products of Bernoullis
def _check_probs(qs, ps) -> tuple[np.ndarray, np.ndarray]:
    qs = np.asarray(qs, float).ravel()
    ps = np.asarray(ps, float).ravel()
    if qs.shape != ps.shape:
        raise ConfigError(f"Bernoulli parameter lists differ in length ({qs.size} vs {ps.size})")
    if qs.size and (min(qs.min(), ps.min()) < 0 or max(qs.max(), ps.max()) > 1):
        raise ConfigError("Bernoulli parameters must lie in [0, 1]")
    keep = qs != ps  # identical factors carry no privacy loss
    return qs[keep], ps[keep]


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def _block_log_pmfs(q: np.ndarray, p: np.ndarray) -> tuple[dict, dict]:
    """Exact log-pmfs of ⊗Bern(q_j) and ⊗Bern(p_j) over the 2^m outcomes of one block."""
    m = q.size
    bits = ((np.arange(1 << m)[:, None] >> np.arange(m)[None, :]) & 1).astype(bool)
    with np.errstate(invalid="ignore"):
        lq = np.where(bits, _log(q)[None, :], _log1m(q)[None, :]).sum(axis=1)
        lp = np.where(bits, _log(p)[None, :], _log1m(p)[None, :]).sum(axis=1)
    return dict(enumerate(lq.tolist())), dict(enumerate(lp.tolist()))


def _log1m(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log1p(-x)


def bernoulli_product_pld(qs: Sequence[float], ps: Sequence[float], *,
                          discretization: float = 1e-4, block: int = 8):
    """``dp_accounting`` PLD of ``P = ⊗Bern(p_j)`` against ``Q = ⊗Bern(q_j)`` (both directions).

    ``get_delta_for_epsilon`` of the result is an upper bound on
    ``max(H_ε(P‖Q), H_ε(Q‖P))`` (pessimistic rounding; blocks of ``block`` factors are merged
    exactly first, see the module docstring). Returns ``None`` when all factors are equal.
    """
    qs, ps = _check_probs(qs, ps)
    if qs.size == 0:
        return None
    if not 1 <= block <= 12:
        raise ConfigError(f"block must be in [1, 12] (got {block})")
    plds = []
    for s in range(0, qs.size, block):
        lq, lp = _block_log_pmfs(qs[s:s + block], ps[s:s + block])
        plds.append(_pld.from_two_probability_mass_functions(
            lq, lp, pessimistic_estimate=True, value_discretization_interval=discretization,
            symmetric=False))
    while len(plds) > 1:  # balanced tree of compositions
        nxt = [plds[i].compose(plds[i + 1]) for i in range(0, len(plds) - 1, 2)]
        if len(plds) % 2:
            nxt.append(plds[-1])
        plds = nxt
    return plds[0]


def bernoulli_product_delta(qs, ps, epsilon: float, *, discretization: float = 1e-4,
                            block: int = 8) -> float:
    """Upper bound (PLD, pessimistic) on the δ(ε) between ⊗Bern(p_j) and ⊗Bern(q_j)."""
    pld = bernoulli_product_pld(qs, ps, discretization=discretization, block=block)
    if pld is None:
        return 0.0
    return float(min(1.0, max(0.0, pld.get_delta_for_epsilon(epsilon))))


def _bern_rdp(p: np.ndarray, q: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """Σ_j D_α(Bern(p_j) ‖ Bern(q_j)) for each order α; requires q_j > 0 where p_j > 0 and
    q_j < 1 where p_j < 1 (finite divergence)."""
    a = orders[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(p > 0, a * _log(p) + (1 - a) * _log(q), -np.inf)
        t0 = np.where(p < 1, a * _log1m(p) + (1 - a) * _log1m(q), -np.inf)
    return (np.logaddexp(t1, t0) / (a - 1)).sum(axis=1)


def bernoulli_product_rdp(qs, ps, orders=RDP_ORDERS, chunk: int = 1 << 16):
    """Rényi divergences of the two products, both directions, with infinite parts split off.

    Returns ``(rdp_pq, mass_pq, rdp_qp, mass_qp)``: ``rdp_pq[α] = Σ D_α(Bern(p_j)‖Bern(q_j))``
    over the factors where it is finite, and ``mass_pq = 1 − Π(1 − p_j)`` over the factors
    with ``q_j = 0 < p_j`` (or ``1 − Π p_j`` over ``q_j = 1 > p_j``), i.e. the P-probability
    of an outcome impossible under Q; symmetrically for Q‖P.
    """
    qs, ps = _check_probs(qs, ps)
    orders = np.asarray(orders, float)

    def one(p, q):
        inf0 = (q == 0) & (p > 0)  # P can output 1 where Q cannot
        inf1 = (q == 1) & (p < 1)  # P can output 0 where Q cannot
        bad = inf0 | inf1
        stay = np.where(inf0, 1 - p, np.where(inf1, p, 1.0))
        mass = float(-np.expm1(np.sum(np.log(stay[bad])))) if bad.any() else 0.0
        pf, qf = p[~bad], q[~bad]
        r = np.zeros(orders.size)
        for s in range(0, pf.size, chunk):
            r += _bern_rdp(pf[s:s + chunk], qf[s:s + chunk], orders)
        return r, mass

    r_pq, m_pq = one(ps, qs)
    r_qp, m_qp = one(qs, ps)
    return r_pq, m_pq, r_qp, m_qp


def rdp_to_delta(orders, rdp, epsilon: float) -> float:
    """δ from a Rényi-DP curve (``dp_accounting.rdp.compute_delta``).

    For curves so small that ``dp_accounting``'s KL branch underflows (``e^{-r} = 1``), the
    same conversion it uses, ``δ = min_α exp((α−1)(r_α − ε + log(1−1/α)) − log α)``
    [Canonne–Kamath–Steinke 2020, Prop. 12], is evaluated directly in log space.
    """
    try:
        return float(_rdp.compute_delta(list(orders), list(rdp), epsilon)[0])
    except (ValueError, OverflowError):
        best = math.inf
        for a, r in zip(orders, rdp):
            if a > 1.01 and math.isfinite(r):
                best = min(best, (a - 1) * (r - epsilon + math.log1p(-1 / a)) - math.log(a))
        return float(min(1.0, math.exp(best))) if best < math.inf else 1.0


def rdp_to_order(orders, rdp, epsilon: float) -> float:
    """The order at which :func:`rdp_to_delta`'s conversion is optimal (``dp_accounting``)."""
    try:
        return float(_rdp.compute_delta(list(orders), list(rdp), epsilon)[1])
    except (ValueError, OverflowError):
        best, arg = math.inf, float(orders[-1])
        for a, r in zip(orders, rdp):
            if a > 1.01 and math.isfinite(r):
                v = (a - 1) * (r - epsilon + math.log1p(-1 / a)) - math.log(a)
                if v < best:
                    best, arg = v, float(a)
        return arg


def rdp_to_epsilon(orders, rdp, delta: float) -> float:
    """ε from Rényi-DP curve (``dp_accounting.rdp.compute_epsilon``)."""
    return float(_rdp.compute_epsilon(list(orders), list(rdp), delta)[0])


def bernoulli_product_rdp_delta(qs, ps, epsilon: float, orders=RDP_ORDERS) -> float:
    """Upper bound on δ(ε) between ⊗Bern(p_j) and ⊗Bern(q_j) through Rényi DP.

    With ``P = P_∞ ⊗ P_f`` (``P_∞``: factors where Q has an impossible outcome of P-mass
    ``m``), ``H_ε(P‖Q) = m + (1−m) H_{ε'}(P_f‖Q_f) ≤ m + H_ε(P_f‖Q_f)`` for
    ``e^{ε'} = e^ε/(1−m) ≥ e^ε``, and ``H_ε(P_f‖Q_f)`` is bounded from the finite Rényi
    divergences; both directions, maximum returned.
    """
    r_pq, m_pq, r_qp, m_qp = bernoulli_product_rdp(qs, ps, orders)
    d1 = m_pq + (rdp_to_delta(orders, r_pq, epsilon) if np.any(r_pq > 0) else 0.0)
    d2 = m_qp + (rdp_to_delta(orders, r_qp, epsilon) if np.any(r_qp > 0) else 0.0)
    return float(min(1.0, max(d1, d2)))


# ------------------------------------------------------------------------------ composition
def basic_composition(parts: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """Basic (adaptive) composition: ``(Σ ε_j, Σ δ_j)``."""
    e = d = 0.0
    for pe, pd in parts:
        e += float(pe)
        d += float(pd)
    return e, d


def group_privacy(epsilon: float, delta: float, g: int) -> tuple[float, float]:
    """Group privacy (Fact 1): an (ε, δ)-DP mechanism is
    ``(gε, δ Σ_{j=0}^{g-1} e^{jε})``-DP for inputs differing in ``g`` places."""
    if g < 1:
        raise ConfigError(f"group size must be >= 1 (got {g})")
    s = g if epsilon == 0 else math.expm1(g * epsilon) / math.expm1(epsilon)
    return g * epsilon, delta * s
