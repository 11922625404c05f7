"""Lower-bound streams (Algorithm 1, Theorem 2) and realisable streams."""

import numpy as np
import pytest
from scipy import stats

from dpmt import online
from dpmt.errors import DpmtError
from dpmt.online.hypotheses import HypothesisClass, point_functions, thresholds
from dpmt.online.soa import SOA
from dpmt.online.streams import (littlestone_tree_adversary, log3_floor, point3_adversary,
                                 point3_p, realisable_stream, threshold_stream)

ALPHA = 1e-6


def realised_by(H, st, h):
    return np.array_equal(H.matrix[h, st.xs], st.ys)


@pytest.mark.parametrize("T", [1, 2, 3, 8, 9, 10, 26, 27, 100, 729, 1000, 12345])
def test_point3_structure(T):
    H = point_functions(3)
    for seed in range(20):
        st = point3_adversary(T, 1.0, seed=seed)
        assert len(st) == T
        assert realised_by(H, st, st.info["target"])
        dummy = (st.xs == 2) & (st.ys == 0)
        info = st.xs == 0
        assert np.all(dummy | info)                     # only the two example types
        assert np.all(st.ys[info] == st.info["B"])      # one fixed informative label
        pos = np.flatnonzero(info)
        assert pos.tolist() == st.info["informative"]
        L = log3_floor(T)
        assert st.info["L"] == L
        if T >= 3:
            assert len(pos) <= L and np.all(pos < 3 ** L)
        else:
            assert pos.tolist() == [0]


def test_point3_recursion_geometry():
    # Each insertion lies in the first third of its stage's interval and the recursion
    # continues in the middle third, strictly after it: so every later insertion comes
    # after every earlier one, at distance < 2 * 3^(L - stage) (within the stage interval).
    L = 8
    for seed in range(200):
        st = point3_adversary(3 ** L, 1.0, seed=seed)
        pos = st.info["informative"]
        assert pos == sorted(set(pos))
        for a, b in zip(pos, pos[1:]):
            assert 0 < b - a < 2 * 3 ** (L - 1)


def test_point3_expected_informative_count_and_fair_bit():
    # E[#informative] = L p / 3 and B ~ Bernoulli(1/2); normal-approximation bands at ALPHA.
    T, p, R = 3 ** 9, 0.6, 3000
    L = 9
    counts = np.array([len(point3_adversary(T, p, seed=s).info["informative"]) for s in range(R)])
    q = p / 3
    mean, var = L * q, L * q * (1 - q)  # Binomial(L, p/3)
    z = stats.norm.isf(ALPHA / 2)
    assert abs(counts.mean() - mean) <= z * np.sqrt(var / R)
    Bs = np.array([point3_adversary(T, p, seed=s).info["B"] for s in range(R)])
    assert abs(Bs.mean() - 0.5) <= z * 0.5 / np.sqrt(R)


def test_point3_seeded_and_iterable():
    a, b = point3_adversary(500, 0.9, seed=11), point3_adversary(500, 0.9, seed=11)
    assert np.array_equal(a.xs, b.xs) and a.info["B"] == b.info["B"]
    pairs = list(online.point3_adversary(500, 0.9, seed=11))
    assert len(pairs) == 500 and all(isinstance(x, int) and isinstance(y, int) for x, y in pairs)
    assert pairs == list(zip(a.xs.tolist(), a.ys.tolist()))
    it = point3_adversary(3, 1.0, seed=0)
    assert next(it) in [(2, 0), (0, 0), (0, 1)]


def test_point3_p_formula():
    assert point3_p(3 ** 6, 1e-9) == pytest.approx(6 ** (-1 / 3))
    assert point3_p(3 ** 6, 0.5) == pytest.approx(1 / (0.5 * 6))
    assert point3_p(10, 0.0) == pytest.approx(2 ** (-1 / 3))  # δ = 0: 1/(δL) = ∞
    assert point3_p(2, 0.5) == 1.0


@pytest.mark.parametrize("make, d", [(lambda: thresholds(63), 6), (lambda: thresholds(7), 3),
                                     (lambda: HypothesisClass(
                                         [[(i >> j) & 1 for j in range(4)] for i in range(16)]), 4)])
def test_tree_adversary_realisable(make, d):
    H = make()
    assert H.littlestone_dimension() == d
    for seed in range(10):
        st = littlestone_tree_adversary(H, 3000, 1.0, seed=seed)
        assert realised_by(H, st, st.info["target"])
        k = st.info["phases"]
        assert k == d - 1
        root = st.info["root"]
        nodes = st.info["nodes"]
        assert len(set(nodes)) == len(nodes) and root not in nodes
        # dummy is (root, 0); informative examples of phase i use node i with its label
        n = st.info["phase_length"]
        for i, (x, B, pos) in enumerate(zip(nodes, st.info["labels"], st.info["informative"])):
            assert all(i * n <= s < (i + 1) * n for s in pos)
            assert np.all(st.xs[pos] == x) and np.all(st.ys[pos] == B)
        other = np.ones(len(st), bool)
        for pos in st.info["informative"]:
            other[pos] = False
        assert np.all(st.xs[other] == root) and np.all(st.ys[other] == 0)
        # the path is a shattered-tree path: the version space keeps Ldim >= d-1-i
        V = H.restrict(H.full(), root, 0)
        assert H.ldim(V) >= d - 1
        for i, (x, B) in enumerate(zip(nodes, st.info["labels"])):
            assert H.ldim(H.restrict(V, x, 1 - B)) >= d - 2 - i  # the other edge too
            V = H.restrict(V, x, B)
            assert H.ldim(V) >= d - 2 - i
        assert SOA(H).run(st.xs, st.ys) <= d


def test_tree_adversary_errors():
    with pytest.raises(DpmtError, match="Ldim"):
        littlestone_tree_adversary(point_functions(3), 100, 1.0)
    with pytest.raises(DpmtError, match="p"):
        littlestone_tree_adversary(thresholds(7), 100, 0.0)
    st = littlestone_tree_adversary(thresholds(7), 1, 1.0)  # T smaller than d-1 phases
    assert len(st) == 1 and st.info["phases"] == 1


@pytest.mark.parametrize("dist", ["uniform", "boundary"])
def test_threshold_stream(dist):
    H = thresholds(100)
    for seed in range(10):
        st = threshold_stream(100, 2000, seed=seed, dist=dist)
        assert realised_by(H, st, st.info["theta"])
        assert st.xs.min() >= 0 and st.xs.max() < 100
    st = threshold_stream(100, 5000, seed=1, theta=50, dist="boundary")
    assert np.mean(np.abs(st.xs - 50) < 10) > 0.5  # concentrated near the boundary
    with pytest.raises(DpmtError, match="dist"):
        threshold_stream(10, 10, dist="gauss")
    with pytest.raises(DpmtError, match="theta"):
        threshold_stream(10, 10, theta=11)
    with pytest.raises(DpmtError, match="T"):
        threshold_stream(10, 0)


def test_realisable_stream():
    rng = np.random.default_rng(0)
    H = HypothesisClass((rng.random((9, 5)) < 0.5).astype(int))
    st = realisable_stream(H, 300, seed=2)
    assert realised_by(H, st, st.info["target"])
    st = realisable_stream(H, 300, seed=2, target=4, probs=[1, 0, 0, 0, 1])
    assert set(st.xs.tolist()) <= {0, 4} and realised_by(H, st, 4)
    with pytest.raises(DpmtError, match="probs"):
        realisable_stream(H, 10, probs=[1, 2])
    with pytest.raises(DpmtError, match="target"):
        realisable_stream(H, 10, target=9)
