"""The Standard Optimal Algorithm (Littlestone 1988) on a finite class.

Protocol (shared by every predictor in :mod:`dpmt.online`): ``predict(x) -> int`` then
``update(y)`` with the true label of that ``x``.

SOA keeps the version space ``V`` (hypotheses consistent with every example so far) and
predicts ``ŷ = 1`` iff ``Ldim(V_{x→1}) > Ldim(V_{x→0})`` (with ``Ldim(∅) = -1``).

**Tie-break** (documented, deterministic): when ``Ldim(V_{x→1}) == Ldim(V_{x→0})`` SOA
predicts 0. A mistake then restricts ``V`` to a side of Ldim at most ``Ldim(V) - 1`` (the
usual argument: if both sides had Ldim ``Ldim(V)`` then ``V`` would have Ldim
``Ldim(V) + 1``), so on a stream realisable by ``H`` SOA makes at most ``Ldim(H)`` mistakes.

**Non-realisable streams.** If the label contradicts every hypothesis left (``V`` would
become empty), the policy ``on_empty`` applies:

* ``"restart"`` (default): restart from the full class restricted to the current example
  (or the full class if no hypothesis fits even that example) and count a restart. This is
  what makes SOA usable on real, non-realisable data (e.g. streamed ratings).
* ``"keep"``: keep the last non-empty ``V`` and ignore the contradicting example.

Neither policy changes anything on realisable streams. ``restarts`` counts the events.

**Per-round cost.** ``predict`` reads a per-version-space table of codes
(:meth:`HypothesisClass._code_table`, shared by every SOA on the class): the first query of a
point for a version space does the Ldim comparison, later ones are one ``bytearray`` index;
``update`` leaves ``V`` (and its table) untouched when the point does not split it and the
label agrees. Per-round outputs equal the plain rule (tests compare against a table-free
reference round by round).

:meth:`SOA.run` processes a whole stream with exactly the same result and final state as
the per-round loop (tests check this), but skips rounds that cannot change ``V``: on a
round where every hypothesis in ``V`` agrees with the label, SOA predicts that label (no
mistake) and ``V`` is unchanged, so only "split" rounds need Python work.
"""

from __future__ import annotations

import numpy as np

from dpmt.errors import ConfigError, DpmtError
from dpmt.online.hypotheses import HypothesisClass

__all__ = ["SOA", "next_change", "check_stream"]

_POLICIES = ("restart", "keep")


def check_stream(H: HypothesisClass, xs, ys) -> tuple[np.ndarray, np.ndarray]:
    """Validate a whole stream for ``H``: int points in range and 0/1 labels, same length."""
    xs = np.asarray(xs)
    ys = np.asarray(ys)
    if xs.ndim != 1 or ys.ndim != 1 or xs.shape != ys.shape:
        raise ConfigError(f"xs and ys must be 1-D arrays of the same length "
                          f"(got shapes {xs.shape} and {ys.shape})")
    if xs.size:
        if xs.dtype.kind not in "iu" and not np.all(np.mod(xs, 1) == 0):
            raise ConfigError("points xs must be integer indices")
        if xs.min() < 0 or xs.max() >= H.n_points:
            raise ConfigError(f"points must be in [0, {H.n_points - 1}] "
                              f"(got range [{xs.min()}, {xs.max()}])")
        if not np.all((ys == 0) | (ys == 1)):
            raise ConfigError("labels ys must be 0 or 1")
    return xs.astype(np.int64), ys.astype(np.int8)


def _agree_table(H: HypothesisClass, V: int) -> np.ndarray:
    """Per point: 0/1 if every hypothesis in V gives that label, 2 if x splits V (cached)."""
    cache = H._agree_tables
    a = cache.get(V)
    if a is None:
        mem = H._members(V)
        c1 = H.matrix[mem].sum(axis=0, dtype=np.int64)
        a = np.full(H.n_points, 2, np.int8)
        a[c1 == 0] = 0
        a[c1 == mem.size] = 1
        if len(cache) > 4096:
            cache.clear()
        cache[V] = a
    return a


def next_change(H: HypothesisClass, V: int, xs: np.ndarray, ys: np.ndarray, t: int) -> int:
    """First round ``s >= t`` at which ``V`` is not unanimous and correct on ``(xs[s], ys[s])``
    (``len(xs)`` if none). Scans in growing chunks, so the cost is proportional to the gap."""
    agree = _agree_table(H, V)
    T = len(xs)
    chunk = 64
    while t < T:
        e = min(T, t + chunk)
        a = agree[xs[t:e]]
        hit = np.flatnonzero(a != ys[t:e])  # a == 2 never equals a label
        if hit.size:
            return t + int(hit[0])
        t = e
        chunk = min(chunk * 4, 1 << 20)
    return T


class SOA:
    """Standard Optimal Algorithm with bitset version spaces.

    Args:
      H: the class.
      version_space: starting version space (default: all of ``H``); must be non-empty.
      on_empty: ``"restart"`` or ``"keep"`` (see module docstring).

    Attributes:
      version_space: current bitset. mistakes: mistakes so far. restarts: empty-V events.
      rounds: completed rounds.
    """

    def __init__(self, H: HypothesisClass, version_space: int | None = None,
                 on_empty: str = "restart"):
        if not isinstance(H, HypothesisClass):
            raise ConfigError(f"SOA needs a HypothesisClass (got {type(H).__name__})")
        if on_empty not in _POLICIES:
            raise ConfigError(f"on_empty must be one of {_POLICIES} (got {on_empty!r})")
        self.H = H
        V = H.full() if version_space is None else H._check_vs(version_space)
        if V == 0:
            raise ConfigError("SOA needs a non-empty starting version space")
        self.version_space: int = V
        self.on_empty = on_empty
        self.mistakes: int = 0
        self.restarts: int = 0
        self.rounds: int = 0
        self._m1 = H._m1
        self._n = H.n_points
        self._x = None
        self._c = 0      # code of the last prediction (see HypothesisClass._code_table)
        self._tV = None  # version space whose code table is self._tab
        self._tab = None

    def predict(self, x: int) -> int:
        V = self.version_space
        if V is not self._tV:  # a new version space: fetch its (shared) code table
            self._tab = self.H._code_table(V)
            self._tV = V
        try:
            if not 0 <= x < self._n:
                raise ConfigError(f"point must be in [0, {self._n - 1}] (got {x!r})")
            c = self._tab[x]
        except TypeError:
            raise ConfigError(f"point must be an integer index (got {x!r})") from None
        if c == 255:  # first query of x for this V: the Ldim comparison, then cached
            v1 = V & self._m1[x]
            if v1 == 0:
                c = 0
            elif v1 == V:
                c = 1
            else:
                c = 2 + self.H._soa_split(V, v1)
            self._tab[x] = c
        self._x = x
        self._c = c
        return c & 1

    def update(self, y: int) -> None:
        x = self._x
        if x is None:
            raise DpmtError("SOA.update called without a preceding predict(x)")
        c = self._c
        if y == c:  # x does not split V and the label agrees: correct, V unchanged
            self.rounds += 1
            self._x = None
            return
        if y != 0 and y != 1:
            raise ConfigError(f"label must be 0 or 1 (got {y!r})")
        y = 1 if y else 0
        if y != c & 1:
            self.mistakes += 1
        V = self.version_space
        # x splits V: restrict; otherwise the label contradicts every hypothesis in V
        new = V & self.H._masks[y][x] if c >= 2 else 0
        if new == 0:
            self.restarts += 1
            if self.on_empty == "restart":
                new = self.H.full() & self.H._masks[y][x]
                if new == 0:
                    new = self.H.full()
            else:
                new = V
        self.version_space = new
        self.rounds += 1
        self._x = None

    # -- whole streams -------------------------------------------------------------------
    def run(self, xs, ys, return_mistakes: bool = False):
        """Feed a whole stream; same result and final state as the predict/update loop.

        Returns the number of mistakes made on this stream, or with
        ``return_mistakes=True`` a uint8 array of per-round mistake indicators.
        """
        xs, ys = check_stream(self.H, xs, ys)
        T = len(xs)
        marks = np.zeros(T, np.uint8) if return_mistakes else None
        m0 = self.mistakes
        r0 = self.rounds
        t = 0
        while t < T:
            t = next_change(self.H, self.version_space, xs, ys, t)
            if t >= T:
                break
            x = int(xs[t]); y = int(ys[t])
            before = self.mistakes
            self.predict(x)
            self.update(y)
            if marks is not None and self.mistakes != before:
                marks[t] = 1
            t += 1
        self.rounds = r0 + T  # skipped rounds are completed rounds too
        return marks if return_mistakes else self.mistakes - m0
