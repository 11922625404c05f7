"""Finite hypothesis classes as {0,1} matrices, with exact Littlestone dimension.

A class ``H`` over a finite domain is a matrix ``M`` of shape ``(n_hypotheses, n_points)``
with ``M[h, x] = h(x)``. A *version space* (a subset of ``H``) is a Python ``int`` used as a
bitset over hypotheses: bit ``h`` set means hypothesis ``h`` is alive. Restricting a version
space to a labelled example ``(x, y)`` is one AND with a precomputed mask, so the
version-space bookkeeping of SOA costs a few big-integer operations per round.

Littlestone dimension (Littlestone 1988; Definition 6 of Sanyal 2026)::

    Ldim(∅) = -1,  Ldim({h}) = 0,
    Ldim(V) = max over points x splitting V of 1 + min(Ldim(V_{x→0}), Ldim(V_{x→1}))
              (0 if no point splits V).

:meth:`HypothesisClass.ldim` computes it exactly with these prunings (none changes the
value; tests compare against a naive recursion):

* memoisation on the bitset, shared by every caller of the same class object (so SOA's
  queries are cached across rounds and across SOA instances);
* points that do not split ``V`` are skipped, and points inducing the same split
  ``{V_0, V_1}`` (as an unordered pair) are evaluated once;
* the upper bound ``Ldim(V) <= floor(log2 |V|)`` stops the search as soon as it is met;
* splits are tried most balanced first, and a split is abandoned without recursing when
  ``1 + floor(log2(smaller side))`` cannot beat the best value so far; the smaller side is
  evaluated first and the larger side only if the smaller one leaves room for improvement.

Nothing is special-cased for particular classes: on thresholds, every realisable version
space is an interval and the memo simply ends up holding intervals.
"""

from __future__ import annotations

import sys

import numpy as np

from dpmt.errors import ConfigError

__all__ = ["HypothesisClass", "point_functions", "thresholds", "from_table"]

# Deep recursions are possible for adversarial classes (each level removes >= 1 hypothesis).
_MIN_RECURSION_LIMIT = 20_000
# The Ldim memo is cleared when it exceeds this many version spaces (bounds memory; the
# values are recomputed on demand).
_MAX_CACHE = 2_000_000


def _column_masks(matrix: np.ndarray) -> list[int]:
    """For each point x, the bitset of hypotheses h with h(x) = 1."""
    n_h, n_x = matrix.shape
    # packbits along the hypothesis axis, little-endian bit order: bit h of the int = row h.
    packed = np.packbits(np.ascontiguousarray(matrix.T), axis=1, bitorder="little")
    return [int.from_bytes(packed[x].tobytes(), "little") for x in range(n_x)]


def _validate_matrix(matrix, what: str = "matrix") -> np.ndarray:
    try:
        arr = np.asarray(matrix)
    except Exception as e:  # ragged lists etc.
        raise ConfigError(f"{what} must be a rectangular 2-D array of 0/1 labels ({e})") from None
    if arr.dtype == object:
        raise ConfigError(f"{what} must be a rectangular 2-D array of 0/1 labels "
                          "(got ragged or non-numeric entries)")
    if arr.ndim != 2:
        raise ConfigError(f"{what} must be 2-D (hypotheses x points); got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ConfigError(f"{what} must have at least one hypothesis and one point; "
                          f"got shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise ConfigError(f"{what} must hold numbers 0/1; got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ConfigError(f"{what} must hold only 0 and 1; found NaN or infinity")
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        h, x = map(int, np.argwhere(bad)[0])
        raise ConfigError(f"{what} must hold only 0 and 1; found {arr[h, x]!r} at "
                          f"hypothesis {h}, point {x}")
    return arr.astype(np.uint8)


class HypothesisClass:
    """A finite class ``H ⊆ {0,1}^X`` given by its label matrix.

    Args:
      matrix: {0,1} array of shape ``(n_hypotheses, n_points)``; ``matrix[h, x] = h(x)``.
      names: optional name per hypothesis (default ``"h0", "h1", ...``).
      point_names: optional name per point (default ``"0", "1", ...``).

    Attributes:
      matrix: read-only ``uint8`` copy of the labels.
      n_hypotheses, n_points: sizes.
      names, point_names: lists of strings.

    Version spaces are Python ints (bit ``h`` = hypothesis ``h`` alive); see :meth:`full`
    and :meth:`restrict`. ``ldim`` results are memoised on this object.
    """

    def __init__(self, matrix, names=None, point_names=None):
        arr = _validate_matrix(matrix)
        arr.setflags(write=False)
        self.matrix: np.ndarray = arr
        self.n_hypotheses: int = int(arr.shape[0])
        self.n_points: int = int(arr.shape[1])
        if names is None:
            names = [f"h{i}" for i in range(self.n_hypotheses)]
        names = [str(n) for n in names]
        if len(names) != self.n_hypotheses:
            raise ConfigError(f"names must have one entry per hypothesis "
                              f"({self.n_hypotheses}); got {len(names)}")
        if point_names is None:
            point_names = [str(i) for i in range(self.n_points)]
        point_names = [str(n) for n in point_names]
        if len(point_names) != self.n_points:
            raise ConfigError(f"point_names must have one entry per point "
                              f"({self.n_points}); got {len(point_names)}")
        self.names: list[str] = names
        self.point_names: list[str] = point_names
        self._full = (1 << self.n_hypotheses) - 1
        self._m1: list[int] = _column_masks(arr)               # h(x) = 1
        self._m0: list[int] = [self._full ^ m for m in self._m1]  # h(x) = 0
        self._masks = (self._m0, self._m1)
        self._nbytes = (self.n_hypotheses + 7) // 8
        self._nwords = (self.n_hypotheses + 63) // 64
        # column x as 64-bit words of the bitset of hypotheses with h(x) = 1
        self._cols = np.array([np.frombuffer(m.to_bytes(8 * self._nwords, "little"), "<u8")
                               for m in self._m1], dtype=np.uint64).reshape(self.n_points,
                                                                            self._nwords)
        self._memo: dict[int, int] = {}
        self._arange = np.arange(self.n_points)
        self._soa_tables: dict[int, np.ndarray] = {}
        self._agree_tables: dict[int, np.ndarray] = {}
        self._code_tables: dict[int, bytearray] = {}
        self.max_cache = _MAX_CACHE
        if sys.getrecursionlimit() < _MIN_RECURSION_LIMIT:
            sys.setrecursionlimit(_MIN_RECURSION_LIMIT)

    # -- version spaces ---------------------------------------------------------------
    def full(self) -> int:
        """The whole class as a version-space bitset."""
        return self._full

    def _check_vs(self, vs) -> int:
        if isinstance(vs, (bool, np.bool_)) or not isinstance(vs, (int, np.integer)):
            raise ConfigError(f"a version space must be an int bitset over hypotheses "
                              f"(got {type(vs).__name__})")
        vs = int(vs)
        if vs < 0 or vs >> self.n_hypotheses:
            raise ConfigError(f"version space has bits outside the {self.n_hypotheses} "
                              f"hypotheses of this class (got {vs:#x})")
        return vs

    def _check_point(self, x) -> int:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise ConfigError(f"a point must be an integer index (got {x!r})")
        if not 0 <= x < self.n_points:
            raise ConfigError(f"point index must be in [0, {self.n_points - 1}] (got {x})")
        return int(x)

    def restrict(self, vs: int, x: int, y: int) -> int:
        """``vs`` restricted to hypotheses with ``h(x) = y``."""
        x = self._check_point(x)
        if y not in (0, 1):
            raise ConfigError(f"label must be 0 or 1 (got {y!r})")
        return self._check_vs(vs) & self._masks[int(y)][x]

    def mask(self, x: int, y: int) -> int:
        """Bitset of hypotheses with ``h(x) = y``."""
        return self._masks[int(y)][self._check_point(x)]

    def members(self, vs: int) -> np.ndarray:
        """Indices (int64, increasing) of the hypotheses in ``vs``."""
        vs = self._check_vs(vs)
        return self._members(vs)

    def _members(self, vs: int) -> np.ndarray:
        if vs == 0:
            return np.zeros(0, dtype=np.int64)
        bits = np.unpackbits(np.frombuffer(vs.to_bytes(self._nbytes, "little"), np.uint8),
                             bitorder="little")
        return np.flatnonzero(bits[: self.n_hypotheses])

    def bitset(self, indices) -> int:
        """The version space containing exactly the hypotheses ``indices``."""
        idx = np.asarray(indices, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_hypotheses):
            raise ConfigError(f"hypothesis indices must be in [0, {self.n_hypotheses - 1}]")
        bits = np.zeros(self._nbytes * 8, np.uint8)
        bits[idx] = 1
        return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")

    def predict_all(self, x: int) -> np.ndarray:
        """Column ``x``: the label every hypothesis gives ``x`` (read-only view)."""
        return self.matrix[:, self._check_point(x)]

    def consistent(self, xs, ys, vs: int | None = None) -> int:
        """Version space of hypotheses (within ``vs``, default all) consistent with a sample."""
        v = self._full if vs is None else self._check_vs(vs)
        for x, y in zip(xs, ys):
            v = self.restrict(v, x, y)
        return v

    # -- Littlestone dimension ----------------------------------------------------------
    def littlestone_dimension(self) -> int:
        """Ldim of the whole class."""
        return self.ldim(self._full)

    def ldim(self, vs: int | None = None) -> int:
        """Exact Littlestone dimension of a version space (-1 if empty); memoised."""
        vs = self._full if vs is None else self._check_vs(vs)
        return self._ldim(vs)

    @property
    def ldim_cache_size(self) -> int:
        """Number of memoised version spaces (memory grows with it)."""
        return len(self._memo)

    def clear_cache(self) -> None:
        """Drop the Ldim memo and the SOA prediction tables."""
        self._memo.clear()
        self._soa_tables.clear()
        self._agree_tables.clear()
        self._code_tables.clear()

    def _ldim(self, V: int, cand: np.ndarray | None = None) -> int:
        """Ldim of bitset ``V``. ``cand``: points that may split ``V`` (a superset of them,
        e.g. the points splitting a superset of ``V``); None means all points."""
        r = self._memo.get(V)
        if r is not None:
            return r
        if V == 0:
            return -1
        size = V.bit_count()
        if size == 1:
            return 0
        if len(self._memo) > self.max_cache:
            self._memo.clear()
        ub = size.bit_length() - 1  # floor(log2 |V|)
        split_pts, c1s, mins, order = self._splits(V, size, cand)
        if split_pts.size == 0:
            self._memo[V] = 0
            return 0
        if ub <= 1:  # |V| in {2, 3} and some point splits V
            self._memo[V] = 1
            return 1
        m1 = self._m1
        seen: set[int] = set()
        best = 1  # some point splits V, so both sides are non-empty: Ldim >= 1
        for j in order.tolist():
            smin = int(mins[j])
            if smin.bit_length() <= best:  # 1 + floor(log2 smin) <= best: nothing to gain
                break                      # (sorted, so no later split can do better)
            v1 = V & m1[int(split_pts[j])]
            v0 = V ^ v1
            key = v0 if v0 < v1 else v1
            if key in seen:
                continue
            seen.add(key)
            if int(c1s[j]) <= size - int(c1s[j]):
                small, large = v1, v0
            else:
                small, large = v0, v1
            a = self._ldim(small, split_pts)
            if a + 1 <= best:
                continue
            b = self._ldim(large, split_pts)
            val = 1 + (a if a < b else b)
            if val > best:
                best = val
                if best >= ub:
                    break
        self._memo[V] = best
        return best

    def _splits(self, V: int, size: int, cand):
        """Distinct splits of V: (split_pts, c1 at them, mins, order most-balanced-first)."""
        if 8 * size > self.n_hypotheses:
            # large V: popcount of (column bitset AND V) over packed 64-bit words, whose cost
            # does not grow with |V|
            vw = np.frombuffer(V.to_bytes(8 * self._nwords, "little"), dtype="<u8")
            cols = self._cols if cand is None else self._cols[cand]
            c1 = np.bitwise_count(cols & vw).sum(axis=1, dtype=np.int64)
            pts = self._arange if cand is None else cand
            sel = (c1 > 0) & (c1 < size)
            split_pts = pts[sel]
            c1s = c1[sel]
            mins = np.minimum(c1s, size - c1s)
            return split_pts, c1s, mins, np.argsort(-mins, kind="stable")
        mem = self._members(V)
        if cand is None or 4 * cand.size > self.n_points:
            c1 = self.matrix[mem].sum(axis=0, dtype=np.int64)
            pts = self._arange
            if cand is not None:
                c1 = c1[cand]
                pts = cand
        else:
            c1 = self.matrix[mem][:, cand].sum(axis=0, dtype=np.int64)
            pts = cand
        sel = (c1 > 0) & (c1 < size)
        split_pts = pts[sel]
        c1s = c1[sel]
        mins = np.minimum(c1s, size - c1s)
        order = np.argsort(-mins, kind="stable")
        return split_pts, c1s, mins, order

    def _soa_split(self, V: int, v1: int) -> int:
        """SOA's label when ``v1 = V_{x→1}`` and ``V ^ v1`` are both non-empty:
        1 iff ``Ldim(v1) > Ldim(V ^ v1)`` (ties → 0)."""
        memo = self._memo
        a = memo.get(v1)
        if a is None:
            a = self._ldim(v1)
        v0 = V ^ v1
        b = memo.get(v0)
        if b is None:
            b = self._ldim(v0)
        return 1 if a > b else 0

    # -- SOA helpers -------------------------------------------------------------------
    def soa_label(self, vs: int, x: int) -> int:
        """SOA's prediction at ``x`` for version space ``vs`` (ties and empty ``vs`` → 0).

        Predict 1 iff ``Ldim(V_{x→1}) > Ldim(V_{x→0})``; with ``Ldim(∅) = -1`` this gives
        the unanimous label when ``x`` does not split ``V``.
        """
        V = self._check_vs(vs)
        v1 = V & self._m1[self._check_point(x)]
        if v1 == 0:
            return 0
        if v1 == V:
            return 1
        return self._soa_split(V, v1)

    def soa_labels(self, vs: int, points) -> np.ndarray:
        """SOA's predictions (uint8) at an array of points for version space ``vs``.

        Labels are computed lazily per distinct point and cached per version space, so
        predicting a long segment with a fixed version space costs one Ldim query pair per
        distinct point (the same queries the per-round SOA would make).
        """
        V = self._check_vs(vs)
        pts = np.asarray(points, dtype=np.int64)
        t = self._lazy_table(V)
        lab = t[pts]
        missing = lab < 0
        if missing.any():
            m1 = self._m1
            for x in np.unique(pts[missing]).tolist():
                v1 = V & m1[x]
                if v1 == 0:
                    t[x] = 0
                elif v1 == V:
                    t[x] = 1
                else:
                    t[x] = self._soa_split(V, v1)
            lab = t[pts]
        return lab.astype(np.uint8)

    def _lazy_table(self, V: int) -> np.ndarray:
        t = self._soa_tables.get(V)
        if t is None:
            if len(self._soa_tables) > 4096:
                self._soa_tables.clear()
            t = np.full(self.n_points, -1, np.int8)
            self._soa_tables[V] = t
        return t

    def _code_table(self, V: int) -> bytearray:
        """Per-point SOA codes for version space ``V``, filled lazily by the caller
        (:class:`~dpmt.online.soa.SOA`): ``255`` not yet known; ``0``/``1`` every hypothesis
        in ``V`` gives ``x`` that label (``x`` does not split ``V``); ``2 + ŷ`` ``x`` splits
        ``V`` and SOA predicts ``ŷ``. Cached per version space (shared by every SOA on this
        class), so a round whose point was already seen with the same ``V`` costs one
        ``bytearray`` index instead of two Ldim-memo lookups keyed on big ints."""
        t = self._code_tables.get(V)
        if t is None:
            if len(self._code_tables) > max(64, (1 << 26) // self.n_points):  # ≤ ~64 MB
                self._code_tables.clear()
            t = bytearray(b"\xff") * self.n_points
            self._code_tables[V] = t
        return t

    def soa_table(self, vs: int) -> np.ndarray:
        """SOA's prediction at every point for version space ``vs`` (uint8 copy)."""
        return self.soa_labels(vs, np.arange(self.n_points))

    def __repr__(self) -> str:
        return f"HypothesisClass(n_hypotheses={self.n_hypotheses}, n_points={self.n_points})"


def point_functions(m: int) -> HypothesisClass:
    """Point functions on ``m`` points: ``h_k(x) = 1[x == k]`` for ``k = 0..m-1``.

    ``point_functions(3)`` is POINT3 of Sanyal 2026 (Definition 5) with the paper's points
    1, 2, 3 renumbered 0, 1, 2 (so the dummy example (3, 0) is ``(2, 0)`` here and the
    informative example (1, B) is ``(0, B)``). Ldim is 1 for ``m >= 2`` and 0 for ``m = 1``.
    """
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ConfigError(f"point_functions needs an integer m >= 1 points (got {m!r})")
    m = int(m)
    return HypothesisClass(np.eye(m, dtype=np.uint8), names=[f"1[x=={k}]" for k in range(m)])


def thresholds(n: int) -> HypothesisClass:
    """Thresholds on ``n`` points: ``h_θ(x) = 1[x >= θ]`` for ``θ = 0..n`` (n+1 functions).

    Hypothesis index ``θ``; ``θ = 0`` is all-ones and ``θ = n`` is all-zeros.
    Ldim is ``floor(log2(n + 1))``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"thresholds needs an integer n >= 1 points (got {n!r})")
    n = int(n)
    theta = np.arange(n + 1)[:, None]
    x = np.arange(n)[None, :]
    return HypothesisClass((x >= theta).astype(np.uint8),
                           names=[f"1[x>={t}]" for t in range(n + 1)])


def from_table(table, names=None, point_names=None) -> HypothesisClass:
    """A class from a user-given table (rows = hypotheses, columns = points), validated."""
    return HypothesisClass(_validate_matrix(table, "table"), names=names,
                           point_names=point_names)
