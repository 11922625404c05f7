"""Hypothesis classes and exact Littlestone dimension."""

import math

import numpy as np
import pytest

from dpmt import online
from dpmt.errors import ConfigError, DpmtError
from dpmt.online.hypotheses import HypothesisClass, from_table, point_functions, thresholds


def naive_ldim(rows: frozenset, matrix: np.ndarray) -> int:
    """Definition 6 by plain recursion over subsets (no pruning, no bitsets)."""
    if not rows:
        return -1
    best = 0
    for x in range(matrix.shape[1]):
        r1 = frozenset(h for h in rows if matrix[h, x] == 1)
        r0 = rows - r1
        if r1 and r0:
            best = max(best, 1 + min(naive_ldim(r0, matrix), naive_ldim(r1, matrix)))
    return best


@pytest.mark.parametrize("m", [1, 2, 3, 5, 17, 64])
def test_point_functions_closed_form(m):
    H = point_functions(m)
    assert H.n_hypotheses == m and H.n_points == m
    assert H.littlestone_dimension() == (0 if m == 1 else 1)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 7, 8, 15, 16, 100, 255, 1024])
def test_thresholds_closed_form(n):
    H = thresholds(n)
    assert H.n_hypotheses == n + 1 and H.n_points == n
    assert H.littlestone_dimension() == math.floor(math.log2(n + 1))


def test_thresholds_every_interval():
    # Every realisable version space of thresholds is an interval of θ: Ldim = floor(log2 len).
    n = 40
    H = thresholds(n)
    for lo in range(n + 1):
        for hi in range(lo, n + 1):
            vs = H.bitset(np.arange(lo, hi + 1))
            assert H.ldim(vs) == (hi - lo + 1).bit_length() - 1


def test_thresholds_semantics():
    H = thresholds(5)
    # hypothesis θ labels x as 1 iff x >= θ
    for th in range(6):
        for x in range(5):
            assert H.matrix[th, x] == int(x >= th)


@pytest.mark.parametrize("seed", range(60))
def test_random_classes_agree_with_naive(seed):
    rng = np.random.default_rng(seed)
    n_h = int(rng.integers(1, 11))
    n_x = int(rng.integers(1, 6))
    p = rng.uniform(0.1, 0.9)
    M = (rng.random((n_h, n_x)) < p).astype(np.uint8)
    H = HypothesisClass(M)
    assert H.littlestone_dimension() == naive_ldim(frozenset(range(n_h)), M)
    # random sub-version-spaces, queried after the memo holds other entries
    for _ in range(10):
        sub = np.flatnonzero(rng.random(n_h) < 0.6)
        assert H.ldim(H.bitset(sub)) == naive_ldim(frozenset(sub.tolist()), M)


def test_structured_class_deep_ldim():
    # All functions on k points (the power set) has Ldim k; with duplicate rows too.
    k = 5
    M = np.array([[(i >> j) & 1 for j in range(k)] for i in range(2 ** k)], np.uint8)
    H = HypothesisClass(np.vstack([M, M[:7]]))
    assert H.littlestone_dimension() == k
    assert naive_ldim(frozenset(range(2 ** k)), M) == k


def test_empty_and_singleton():
    H = thresholds(4)
    assert H.ldim(0) == -1
    assert H.ldim(1 << 3) == 0
    # duplicate hypotheses never split: Ldim 0
    D = HypothesisClass([[0, 1, 1], [0, 1, 1]])
    assert D.littlestone_dimension() == 0


def test_restrict_members_predict_all():
    H = thresholds(6)
    V = H.full()
    assert V.bit_count() == 7
    V1 = H.restrict(V, 3, 1)  # x=3 labelled 1: θ <= 3
    assert H.members(V1).tolist() == [0, 1, 2, 3]
    V0 = H.restrict(V, 3, 0)
    assert H.members(V0).tolist() == [4, 5, 6]
    assert V0 | V1 == V and V0 & V1 == 0
    assert H.predict_all(3).tolist() == [1, 1, 1, 1, 0, 0, 0]
    assert H.consistent([3, 1], [1, 0]) == H.bitset([2, 3])
    assert not H.matrix.flags.writeable
    with pytest.raises(ValueError):
        H.matrix[0, 0] = 1


def test_point3_encoding():
    H = point_functions(3)
    # dummy (x=2, y=0) keeps f1, f2 (indices 0, 1); informative (0, B) picks one
    V = H.restrict(H.full(), 2, 0)
    assert H.members(V).tolist() == [0, 1]
    assert H.members(H.restrict(V, 0, 1)).tolist() == [0]
    assert H.members(H.restrict(V, 0, 0)).tolist() == [1]


@pytest.mark.parametrize("bad, msg", [
    ([[0, 2]], "only 0 and 1"),
    ([1, 0, 1], "2-D"),
    (np.zeros((0, 3)), "at least one"),
    ([[0, 1], [1]], "rectangular"),
    ([["a", "b"]], "0/1"),
    ([[0.5, 1.0]], "only 0 and 1"),
    ([[np.nan, 1.0]], "NaN"),
])
def test_from_table_validation(bad, msg):
    with pytest.raises(ConfigError, match=msg):
        from_table(bad)


def test_validation_messages():
    with pytest.raises(ConfigError, match="names"):
        HypothesisClass([[0, 1]], names=["a", "b"])
    with pytest.raises(ConfigError, match="point_names"):
        HypothesisClass([[0, 1]], point_names=["a"])
    H = thresholds(3)
    with pytest.raises(ConfigError, match=r"\[0, 2\]"):
        H.restrict(H.full(), 3, 1)
    with pytest.raises(ConfigError, match="label"):
        H.restrict(H.full(), 0, 2)
    with pytest.raises(ConfigError, match="outside"):
        H.ldim(1 << 10)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(DpmtError):
            thresholds(bad)
        with pytest.raises(DpmtError):
            point_functions(bad)


def test_from_table_accepts_bool_and_names():
    H = from_table([[True, False], [False, True]], names=["a", "b"])
    assert H.names == ["a", "b"] and H.matrix.dtype == np.uint8
    assert H.littlestone_dimension() == 1


def test_public_api():
    H = online.HypothesisClass(np.eye(3, dtype=int))
    assert H.littlestone_dimension() == 1
    assert online.point_functions(3).littlestone_dimension() == 1
    assert online.thresholds(7).littlestone_dimension() == 3


def test_large_and_small_version_spaces_agree_with_naive():
    # Exercises both counting paths of the exact Ldim (packed popcounts for large version
    # spaces, row gathers for small ones) against the naive recursion (memoised here only
    # to keep it fast; same definition).
    import functools
    rng = np.random.default_rng(5)
    M = (rng.random((80, 9)) < 0.5).astype(np.uint8)

    @functools.lru_cache(maxsize=None)
    def nv(rows):
        return naive_ldim_memo(rows)

    def naive_ldim_memo(rows):
        if not rows:
            return -1
        best = 0
        for x in range(M.shape[1]):
            r1 = frozenset(h for h in rows if M[h, x] == 1)
            r0 = rows - r1
            if r1 and r0:
                best = max(best, 1 + min(nv(r0), nv(r1)))
        return best

    H = HypothesisClass(M)
    assert H.littlestone_dimension() == nv(frozenset(range(80)))
    for size in (2, 3, 5, 8, 10, 20, 40, 79):
        for _ in range(3):
            sub = rng.choice(80, size, replace=False)
            assert H.ldim(H.bitset(sub)) == nv(frozenset(sub.tolist()))
