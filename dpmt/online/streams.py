"""Seeded labelled streams: the paper's lower-bound adversaries and realisable streams.

Every function returns a :class:`Stream`: an iterator of ``(x, y)`` pairs (Python ints,
like a generator) that also exposes the whole stream as arrays (``.xs``, ``.ys``) and what
generated it (``.info``), so experiments can feed it to the vectorised ``run`` paths.

POINT3 encoding. The paper's POINT3 lives on ``{1, 2, 3}`` with ``f_j = 1[x = j]``; here it is
``point_functions(3)`` on points ``{0, 1, 2}`` (paper point ``j`` is index ``j − 1``). So the
dummy example (3, 0) is ``(2, 0)`` and the informative example (1, B) is ``(0, B)``. Every
stream of these two examples is realisable: by ``f_1`` (index 0) when ``B = 1`` and by
``f_2`` (index 1) when ``B = 0``.
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.errors import ConfigError, check_range
from dpmt.online.hypotheses import HypothesisClass

__all__ = ["Stream", "point3_adversary", "littlestone_tree_adversary", "threshold_stream",
           "realisable_stream", "point3_p", "POINT3_DUMMY", "POINT3_INFORMATIVE_X",
           "log3_floor"]

POINT3_DUMMY = (2, 0)        # paper's (3, 0)
POINT3_INFORMATIVE_X = 0     # paper's point 1


class Stream:
    """A finite labelled stream; iterate for ``(x, y)`` pairs (once, like a generator).

    Attributes: ``xs`` (int64), ``ys`` (int8) arrays; ``info`` dict (generator parameters,
    realising hypothesis index ``target`` when known, ...). ``len(stream)`` is T.
    """

    def __init__(self, xs, ys, info=None):
        self.xs = np.asarray(xs, dtype=np.int64)
        self.ys = np.asarray(ys, dtype=np.int8)
        if self.xs.shape != self.ys.shape or self.xs.ndim != 1:
            raise ConfigError("a stream needs 1-D xs and ys of the same length")
        self.info = dict(info or {})
        self._it = None

    def __len__(self) -> int:
        return len(self.xs)

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, int]:
        if self._it is None:
            self._it = zip(self.xs.tolist(), self.ys.tolist())
        return next(self._it)

    def pairs(self):
        """A fresh iterator over ``(x, y)`` (independent of this object's position)."""
        return zip(self.xs.tolist(), self.ys.tolist())

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.xs, self.ys

    def __repr__(self) -> str:
        keys = ", ".join(f"{k}={v!r}" for k, v in self.info.items()
                         if isinstance(v, (int, float, str)))
        return f"Stream(T={len(self)}, {keys})"


def _check_T(T) -> int:
    check_range("T", T, low=1, integer=True)
    return int(T)


def log3_floor(T: int) -> int:
    """``floor(log3 T)`` in exact integer arithmetic."""
    L, p = 0, 3
    while p <= T:
        L += 1
        p *= 3
    return L


def _algorithm1_positions(N: int, p: float, rng: np.random.Generator) -> tuple[list[int], int]:
    """Algorithm 1 of Sanyal 2026 on a horizon of N rounds (0-indexed positions).

    Runs on the first ``3^L`` rounds, ``L = floor(log3 N)``, the rest staying dummy; for
    ``N < 3`` one informative example at the first round (the paper's small-N case).
    Returns (sorted informative positions, L).
    """
    if N < 3:
        return [0], 0
    L = log3_floor(N)
    lo, length = 0, 3 ** L              # A_0 = rounds [lo, lo + length)
    pos = []
    for _ in range(L):
        third = length // 3
        J = int(rng.integers(1, 4))     # J_{t+1} uniform on {1, 2, 3}
        if J == 2:
            s = lo + int(rng.integers(third))  # uniform round of the first third
            if rng.random() < p:
                pos.append(s)
        lo += (J - 1) * third
        length = third
    return sorted(pos), L


def point3_adversary(T: int, p: float, seed=0) -> Stream:
    """The POINT3 adversary of Algorithm 1 (Sanyal 2026), as a stream of length ``T``.

    All rounds start as the dummy ``(2, 0)``; a fair bit ``B`` is drawn; for
    ``L = floor(log3 T)`` stages the current interval (initially the first ``3^L`` rounds)
    is cut into thirds, one third ``J`` is drawn uniformly, and if ``J`` is the middle third
    then with probability ``p`` a uniform round of the *first* third becomes the informative
    example ``(0, B)``; the recursion continues in third ``J``. Rounds after ``3^L`` stay
    dummy. Expected number of informative examples: ``L·p/3``. For ``T < 3`` the first round
    is informative (the paper's small-horizon case).

    ``info``: ``B``, ``L``, ``p``, ``informative`` (positions), ``target`` (realising
    hypothesis of ``point_functions(3)``: 0 if ``B = 1`` else 1).
    """
    T = _check_T(T)
    check_range("p", p, low=0, high=1, low_open=True)
    rng = np.random.default_rng(seed)
    B = int(rng.integers(2))
    pos, L = _algorithm1_positions(T, float(p), rng)
    xs = np.full(T, POINT3_DUMMY[0], np.int64)
    ys = np.full(T, POINT3_DUMMY[1], np.int8)
    xs[pos] = POINT3_INFORMATIVE_X
    ys[pos] = B
    return Stream(xs, ys, {"kind": "point3_adversary", "T": T, "p": float(p), "B": B, "L": L,
                           "informative": list(pos), "target": 0 if B == 1 else 1,
                           "seed": seed if isinstance(seed, int) else None})


def point3_p(T: int, delta: float, a0: float = 1.0) -> float:
    """The paper's insertion probability ``p = a0 · min(L^{-1/3}, 1/(δ L))``, capped at 1."""
    L = max(1, log3_floor(int(T)))
    inv = math.inf if delta <= 0 else 1.0 / (delta * L)
    return float(min(1.0, a0 * min(L ** (-1.0 / 3.0), inv)))


def _best_split(H: HypothesisClass, V: int) -> tuple[int, int]:
    """A point maximising ``min(Ldim(V_{x→0}), Ldim(V_{x→1}))`` (smallest index on ties):
    the root of a deepest tree shattered by V. Returns (x, that min) or (-1, -1)."""
    best, bx = -1, -1
    for x in range(H.n_points):
        v1 = V & H._m1[x]
        v0 = V ^ v1
        if v1 and v0:
            m = min(H._ldim(v0), H._ldim(v1))
            if m > best:
                best, bx = m, x
    return bx, best


def littlestone_tree_adversary(H: HypothesisClass, T: int, p: float, seed=0) -> Stream:
    """Theorem 2 / Figure 3 of Sanyal 2026: POINT3-style phases down a shattered tree.

    Requires ``d = Ldim(H) >= 2``. Take a depth-``d`` tree shattered by ``H`` (built from
    exact Ldim: each node is a point maximising the smaller side's Ldim, smallest index on
    ties), follow the zero edge at its root ``x0`` and use ``(x0, 0)`` as the dummy example
    throughout. Split the horizon into ``k = min(d − 1, T)`` phases of ``n = floor(T/k)``
    rounds (leftover rounds dummy). In phase ``i`` at node ``x_i`` draw a fair bit ``B_i``,
    run Algorithm 1 on the phase with informative example ``(x_i, B_i)`` and insertion
    probability ``p``, then follow the edge labelled ``B_i``. The labels follow one
    root-to-leaf path, so the stream is realisable (``info['target']`` realises it).

    The paper chooses each phase's hard stream and label using the learner's distribution;
    this algorithm-agnostic version draws them at random (as in Algorithm 1), which is what
    the experiments can run.
    """
    if not isinstance(H, HypothesisClass):
        raise ConfigError(f"littlestone_tree_adversary needs a HypothesisClass "
                          f"(got {type(H).__name__})")
    T = _check_T(T)
    check_range("p", p, low=0, high=1, low_open=True)
    d = H.littlestone_dimension()
    if d < 2:
        raise ConfigError(f"littlestone_tree_adversary needs Ldim(H) >= 2 (this class has "
                          f"Ldim {d}); for POINT3 use point3_adversary")
    rng = np.random.default_rng(seed)
    V = H.full()
    x0, _ = _best_split(H, V)
    V = V & H._masks[0][x0]             # follow the zero edge at the root
    k = min(d - 1, T)
    n = T // k
    xs = np.full(T, x0, np.int64)
    ys = np.zeros(T, np.int8)
    nodes, labels, informative = [], [], []
    for i in range(k):
        x, m = _best_split(H, V)
        if x < 0:  # cannot happen while Ldim(V) >= 1; kept as a guard
            break
        B = int(rng.integers(2))
        pos, _ = _algorithm1_positions(n, float(p), rng)
        pos = [i * n + s for s in pos]
        xs[pos] = x
        ys[pos] = B
        nodes.append(x)
        labels.append(B)
        informative.append(pos)
        V = V & H._masks[B][x]
    target = int(H._members(V)[0])
    assert np.array_equal(H.matrix[target, xs], ys)
    return Stream(xs, ys, {"kind": "littlestone_tree_adversary", "T": T, "p": float(p),
                           "d": d, "root": x0, "phases": k, "phase_length": n,
                           "nodes": nodes, "labels": labels, "informative": informative,
                           "target": target})


def threshold_stream(n: int, T: int, seed=0, theta: int | None = None,
                     dist: str = "uniform", width: float | None = None) -> Stream:
    """A stream realisable by a threshold ``1[x >= θ]`` on ``n`` points (``thresholds(n)``).

    ``θ`` is uniform on ``0..n`` unless given. ``dist``: ``"uniform"`` (x uniform on
    ``0..n-1``) or ``"boundary"`` (x = θ + round(Laplace(width)), clipped; default width
    ``n/32``: most points near the boundary, where learners err). ``info['target'] = θ``.
    """
    check_range("n", n, low=1, integer=True)
    n = int(n)
    T = _check_T(T)
    rng = np.random.default_rng(seed)
    if theta is None:
        theta = int(rng.integers(n + 1))
    check_range("theta", theta, low=0, high=n, integer=True)
    theta = int(theta)
    if dist == "uniform":
        xs = rng.integers(0, n, T)
    elif dist == "boundary":
        w = max(1.0, n / 32) if width is None else float(width)
        check_range("width", w, low=0, low_open=True)
        xs = np.clip(np.rint(theta - 0.5 + rng.laplace(scale=w, size=T)), 0, n - 1)
        xs = xs.astype(np.int64)
    else:
        raise ConfigError(f"dist must be 'uniform' or 'boundary' (got {dist!r})")
    ys = (xs >= theta).astype(np.int8)
    return Stream(xs, ys, {"kind": "threshold_stream", "n": n, "T": T, "dist": dist,
                           "target": theta, "theta": theta})


def realisable_stream(H: HypothesisClass, T: int, seed=0, target: int | None = None,
                      probs=None) -> Stream:
    """A stream realisable by ``H``: x i.i.d. from ``probs`` (default uniform) over the
    points, labelled by hypothesis ``target`` (default: uniform over ``H``)."""
    if not isinstance(H, HypothesisClass):
        raise ConfigError(f"realisable_stream needs a HypothesisClass (got {type(H).__name__})")
    T = _check_T(T)
    rng = np.random.default_rng(seed)
    if target is None:
        target = int(rng.integers(H.n_hypotheses))
    check_range("target", target, low=0, high=H.n_hypotheses - 1, integer=True)
    if probs is not None:
        probs = np.asarray(probs, dtype=float)
        if probs.shape != (H.n_points,) or np.any(probs < 0) or not np.isfinite(probs).all() \
                or probs.sum() <= 0:
            raise ConfigError(f"probs must be {H.n_points} non-negative finite weights")
        probs = probs / probs.sum()
    xs = rng.choice(H.n_points, size=T, p=probs)
    ys = H.matrix[int(target), xs].astype(np.int8)
    return Stream(xs, ys, {"kind": "realisable_stream", "T": T, "target": int(target)})

