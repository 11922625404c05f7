"""Name-and-Shame SOA predictor (Fact 5): (0, γ)-JDP and ≤ d/γ expected mistakes."""

import itertools

import numpy as np
import pytest
from scipy import stats

from dpmt import online
from dpmt.errors import DpmtError
from dpmt.online.hypotheses import HypothesisClass, point_functions, thresholds
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.streams import realisable_stream, threshold_stream

ALPHA = 1e-6  # false-failure probability of each statistical assertion below


def run_loop(p, xs, ys):
    out, marks = [], []
    for x, y in zip(np.asarray(xs).tolist(), np.asarray(ys).tolist()):
        m = p.mistakes
        out.append(p.predict(x)); p.update(y)
        marks.append(int(p.mistakes != m))
    return np.array(out), np.array(marks, np.uint8)


def negbin_trials_isf(successes, gamma, alpha):
    """Upper alpha-quantile of the number of Bernoulli(gamma) trials for `successes`."""
    return stats.nbinom.isf(alpha, successes, gamma) + successes


@pytest.mark.parametrize("case", ["thresholds", "random", "point3_hard"])
@pytest.mark.parametrize("gamma", [0.05, 0.3])
def test_mistake_bound_negative_binomial(case, gamma):
    # Mistakes are dominated by the trials needed for d retained mistakes (NegBin(d, γ)),
    # so the sum over R independent runs is dominated by NegBin(dR, γ) trials: assert the
    # sum stays below its upper 1e-6 quantile, and the mean below d/γ + slack.
    rng = np.random.default_rng(7)
    R = 120
    if case == "thresholds":
        H = thresholds(63); st = threshold_stream(63, 2000, seed=3)
    elif case == "random":
        H = HypothesisClass((rng.random((40, 12)) < 0.5).astype(np.uint8))
        st = realisable_stream(H, 2000, seed=4)
    else:  # worst case for d = 1: always the informative example with label 1
        H = point_functions(3); st = online.streams.Stream(np.zeros(2000), np.ones(2000))
    d = H.littlestone_dimension()
    total = sum(NameAndShame(H, gamma, seed=s).run(st.xs, st.ys) for s in range(R))
    assert total <= negbin_trials_isf(d * R, gamma, ALPHA)


def test_mistakes_on_hard_stream_are_geometric():
    # POINT3, stream (0, 1) repeated: NS predicts 0 until a (0,1) is retained, so
    # M = min(Geometric(γ), T): mean 1/γ. This checks the retention rate itself.
    H = point_functions(3)
    gamma, T, R = 0.2, 200, 1000
    xs, ys = np.zeros(T, int), np.ones(T, int)
    M = np.array([NameAndShame(H, gamma, seed=s).run(xs, ys) for s in range(R)])
    mean, sd = 1 / gamma, np.sqrt(1 - gamma) / gamma
    z = stats.norm.isf(ALPHA / 2)
    assert abs(M.mean() - mean) <= z * sd / np.sqrt(R) + 0.01
    assert M.min() >= 1


class FixedCoins(NameAndShame):
    """NameAndShame with a given retention pattern (for exact privacy computations)."""

    def __init__(self, H, gamma, pattern):
        self._pattern = list(pattern)
        retained = [i for i, r in enumerate(self._pattern) if r]
        self._gaps = iter(np.diff([-1] + retained).tolist() + [10 ** 9])
        super().__init__(H, gamma, seed=0)

    def _next_gap(self):
        return next(self._gaps)


def exact_other_round_distribution(H, gamma, xs, ys, i):
    """Exact law of the outputs of all rounds but i, over all 2^T retention patterns."""
    T = len(xs)
    law = {}
    for pattern in itertools.product([0, 1], repeat=T):
        prob = np.prod([gamma if r else 1 - gamma for r in pattern])
        p = FixedCoins(H, gamma, pattern)
        out, _ = run_loop(p, xs, ys)
        key = tuple(np.delete(out, i).tolist())
        law[key] = law.get(key, 0.0) + prob
    return law


@pytest.mark.parametrize("seed", range(6))
def test_exact_joint_privacy_small_streams(seed):
    # (0, γ)-JDP ⇔ total variation ≤ γ between the laws of the other rounds' outputs for
    # every pair of streams differing at one round. Computed exactly (2^T patterns).
    rng = np.random.default_rng(seed)
    H = thresholds(4) if seed % 2 else HypothesisClass((rng.random((6, 4)) < .5).astype(int))
    gamma, T = 0.3, 6
    xs = rng.integers(0, H.n_points, T); ys = rng.integers(0, 2, T)
    for i in range(T - 1):
        for x2, y2 in [(int(rng.integers(H.n_points)), 1 - int(ys[i])), (int(xs[i]), 1 - int(ys[i]))]:
            xs2, ys2 = xs.copy(), ys.copy(); xs2[i], ys2[i] = x2, y2
            P = exact_other_round_distribution(H, gamma, xs, ys, i)
            Q = exact_other_round_distribution(H, gamma, xs2, ys2, i)
            tv = 0.5 * sum(abs(P.get(k, 0) - Q.get(k, 0)) for k in set(P) | set(Q))
            assert tv <= gamma + 1e-12
    assert abs(sum(P.values()) - 1) < 1e-12


def test_exact_privacy_is_tight_somewhere():
    # The bound is attained: POINT3, informative example at round 0 flips the later output.
    H = point_functions(3)
    gamma = 0.25
    xs = np.array([0, 0, 0]); ys = np.array([1, 1, 1])
    ys2 = ys.copy(); ys2[0] = 0
    P = exact_other_round_distribution(H, gamma, xs, ys, 0)
    Q = exact_other_round_distribution(H, gamma, xs, ys2, 0)
    tv = 0.5 * sum(abs(P.get(k, 0) - Q.get(k, 0)) for k in set(P) | set(Q))
    assert tv == pytest.approx(gamma)


@pytest.mark.parametrize("gamma", [0.1, 0.5])
def test_coupling_shared_seeds(gamma):
    # Same seed ⇒ same retention coins. If the changed round i is not retained, every other
    # round's output is identical; the fraction of seeds with any difference is ≤ γ
    # (binomial upper tail at ALPHA).
    H = thresholds(31)
    st = threshold_stream(31, 300, seed=1)
    i = 40
    xs2, ys2 = st.xs.copy(), st.ys.copy()
    xs2[i] = (xs2[i] + 13) % 31; ys2[i] = 1 - ys2[i]
    R, differ = 400, 0
    for s in range(R):
        a, b = NameAndShame(H, gamma, seed=s), NameAndShame(H, gamma, seed=s)
        oa, ob = [], []
        retained_i = None
        for t, (x, y, x2, y2) in enumerate(zip(st.xs.tolist(), st.ys.tolist(),
                                               xs2.tolist(), ys2.tolist())):
            oa.append(a.predict(x)); ob.append(b.predict(x2))
            r0 = a.retained
            a.update(y); b.update(y2)
            if t == i:
                retained_i = a.retained > r0
        same = np.array_equal(np.delete(oa, i), np.delete(ob, i))
        if not retained_i:
            assert same
        differ += not same
    assert differ <= stats.binom.isf(ALPHA, R, gamma)


@pytest.mark.parametrize("seed", range(12))
def test_run_equals_loop(seed):
    rng = np.random.default_rng(seed)
    H = thresholds(int(rng.integers(2, 200)))
    gamma = [1.0, 0.5, 0.05, 0.003][seed % 4]
    T = int(rng.integers(1, 3000))
    if seed % 3 == 0:
        xs, ys = rng.integers(0, H.n_points, T), rng.integers(0, 2, T)  # non-realisable
    else:
        st = threshold_stream(H.n_points, T, seed=seed); xs, ys = st.xs, st.ys
    a, b = NameAndShame(H, gamma, seed=seed), NameAndShame(H, gamma, seed=seed)
    _, la = run_loop(a, xs, ys)
    lb = b.run(xs, ys, return_mistakes=True)
    assert np.array_equal(la, lb)
    assert (a.mistakes, a.retained, a.rounds, a.version_space, a._gap) == \
        (b.mistakes, b.retained, b.rounds, b.version_space, b._gap)


def test_privacy_and_errors():
    H = thresholds(8)
    p = online.NameAndShame(H, 0.1, seed=0)
    assert p.privacy() == (0.0, 0.1)
    for g in (0, -0.1, 1.5, float("nan")):
        with pytest.raises(DpmtError, match="gamma"):
            NameAndShame(H, g)
    with pytest.raises(DpmtError):
        p.update(1)
    p.predict(3)
    with pytest.raises(DpmtError, match="label"):
        p.update(2)
    with pytest.raises(DpmtError):
        NameAndShame(np.eye(3), 0.5)


@pytest.mark.slow
def test_million_rounds_run_equals_loop():
    H = thresholds(1023)
    st = threshold_stream(1023, 10 ** 6, seed=9)
    for gamma in (0.01, 0.001):
        a, b = NameAndShame(H, gamma, seed=1), NameAndShame(H, gamma, seed=1)
        _, la = run_loop(a, st.xs, st.ys)
        assert np.array_equal(la, b.run(st.xs, st.ys, return_mistakes=True))


@pytest.mark.parametrize("seed", range(6))
def test_per_round_outputs_match_reference(seed):
    """Per-round predictions equal SOA of the retained sample computed from scratch (Ldim of
    both restrictions), with the same retention coins (geometric gaps from the same seed)."""
    rng = np.random.default_rng(seed)
    H = thresholds(int(rng.integers(4, 120)))
    gamma = [0.5, 0.1, 0.02][seed % 3]
    T = 1500
    if seed % 2:
        xs, ys = rng.integers(0, H.n_points, T), rng.integers(0, 2, T)
    else:
        st = threshold_stream(H.n_points, T, seed=seed); xs, ys = st.xs, st.ys
    p = NameAndShame(H, gamma, seed=seed)
    coins = np.random.default_rng(seed)
    gap = int(coins.geometric(gamma))
    R = H.full()
    mistakes = 0
    for x, y in zip(xs.tolist(), ys.tolist()):
        v1 = H.restrict(R, x, 1)
        want = int(H.ldim(v1) > H.ldim(R ^ v1))
        assert p.predict(x) == want
        p.update(y)
        mistakes += want != y
        gap -= 1
        if gap == 0:  # retained: restrict (restart policy on an empty retained sample)
            R = H.restrict(R, x, y) or (H.restrict(H.full(), x, y) or H.full())
            gap = int(coins.geometric(gamma))
        assert p.version_space == R
    assert p.mistakes == mistakes
