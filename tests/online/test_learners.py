"""Private learners: Name-and-Shame learner and AboveThreshold-switching learner."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmt import online
from dpmt.errors import DpmtError
from dpmt.online.hypotheses import point_functions, thresholds
from dpmt.online.learners import AboveThresholdLearner, NameAndShameLearner, compose_pure_dp
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.streams import point3_adversary, threshold_stream


def loop(p, xs, ys, hyps=None):
    marks = []
    for x, y in zip(np.asarray(xs).tolist(), np.asarray(ys).tolist()):
        if hyps is not None:
            hyps.append(np.array(p.hypothesis()))
        m = p.mistakes
        yhat = p.predict(x)
        if hyps is not None:
            assert yhat == hyps[-1][x]  # the prediction is the released hypothesis at x
        p.update(y)
        marks.append(int(p.mistakes != m))
    return np.array(marks, np.uint8)


def test_ns_learner_matches_predictor_and_releases_private_hypotheses():
    H = thresholds(31)
    st = threshold_stream(31, 500, seed=2)
    for seed in range(5):
        a = NameAndShameLearner(H, 0.2, seed=seed)
        b = NameAndShame(H, 0.2, seed=seed)
        hyps = []
        la = loop(a, st.xs, st.ys, hyps)
        assert np.array_equal(la, b.run(st.xs, st.ys, return_mistakes=True))
        assert a.privacy() == (0.0, 0.2)
    # coupling: if round i is not retained, the WHOLE released sequence (round i included)
    # is identical on the neighbouring stream
    i = 100
    xs2, ys2 = st.xs.copy(), st.ys.copy(); xs2[i] = (xs2[i] + 7) % 31; ys2[i] = 1 - ys2[i]
    n_diff = 0
    for seed in range(100):
        a, b = NameAndShameLearner(H, 0.2, seed=seed), NameAndShameLearner(H, 0.2, seed=seed)
        ha, hb = [], []
        loop(a, st.xs[: i], st.ys[: i], ha); loop(b, xs2[: i], ys2[: i], hb)
        r0 = a.retained
        loop(a, st.xs[i:i + 1], st.ys[i:i + 1], ha); loop(b, xs2[i:i + 1], ys2[i:i + 1], hb)
        retained_i = a.retained > r0
        loop(a, st.xs[i + 1:], st.ys[i + 1:], ha); loop(b, xs2[i + 1:], ys2[i + 1:], hb)
        same = all(np.array_equal(u, v) for u, v in zip(ha, hb))
        if not retained_i:
            assert same
        n_diff += not same
    assert n_diff <= stats.binom.isf(1e-6, 100, 0.2)  # false-failure rate 1e-6


def test_compose_pure_dp_is_basic_composition_at_delta0():
    assert compose_pure_dp([0.1] * 10, 0.0) == pytest.approx(1.0, abs=2e-3)
    assert compose_pure_dp([0.3, 0.2], 0.0) == pytest.approx(0.5, abs=2e-3)
    # many compositions: ε at δ = 0 must still be the sum (a dense FFT composition loses the
    # ~1e-61-probability top atom and under-reports it)
    assert compose_pure_dp([0.015] * 200, 0.0) == pytest.approx(3.0, abs=1e-3)
    assert compose_pure_dp([], 0.0) == 0.0


def exact_rr_delta(k, e0, eps):
    """Exact δ(ε) of k-fold binary randomized response with parameter e0 (test oracle)."""
    p = np.exp(e0) / (1 + np.exp(e0))
    j = np.arange(k + 1)
    logc = np.array([math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1) for i in j])
    logP = logc + j * np.log(p) + (k - j) * np.log(1 - p)
    L = (2 * j - k) * e0
    return float(np.sum(np.exp(logP) * np.maximum(0.0, 1 - np.exp(eps - L))))


@pytest.mark.parametrize("k, e0, delta", [(40, 0.05, 1e-6), (10, 0.3, 1e-3), (200, 0.01, 1e-8)])
def test_compose_pure_dp_matches_exact_composition(k, e0, delta):
    eps = compose_pure_dp([e0] * k, delta)
    assert eps < k * e0                                   # better than basic composition
    assert exact_rr_delta(k, e0, eps) <= delta * (1 + 1e-6)  # valid
    assert exact_rr_delta(k, e0, eps - 0.01) > delta          # and nearly tight


@pytest.mark.parametrize("eps, c", [(1.0, 3), (0.5, 9)])
def test_at_privacy_is_eps_zero(eps, c):
    L = AboveThresholdLearner(thresholds(15), eps, horizon=1000, max_switches=c, seed=0)
    e, d = L.privacy()
    assert d == 0.0
    assert eps - 3e-3 <= e <= eps
    assert L.epsilon0 == pytest.approx(eps / (2 * c), rel=1e-3)
    assert e == pytest.approx(compose_pure_dp([L.epsilon0] * (2 * c), 0.0))


def test_at_exponential_mechanism_is_eps0_dp():
    # Exact check of the selection step: changing one example changes every log-probability
    # ratio by at most ε0.
    H = thresholds(20)
    L = AboveThresholdLearner(H, 1.0, horizon=100, max_switches=2, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        cnt = rng.integers(0, 5, size=(H.n_points, 2))
        x, y, x2, y2 = rng.integers(H.n_points), rng.integers(2), rng.integers(H.n_points), rng.integers(2)
        if cnt[x, y] == 0:
            continue
        cnt2 = cnt.copy(); cnt2[x, y] -= 1; cnt2[x2, y2] += 1
        L._cnt = cnt; p = L.selection_probabilities()
        L._cnt = cnt2; q = L.selection_probabilities()
        assert np.max(np.abs(np.log(p) - np.log(q))) <= L.epsilon0 + 1e-9


@pytest.mark.parametrize("seed", range(16))
def test_at_run_equals_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 64))
    H = thresholds(n)
    T = int(rng.integers(1, 8000))
    eps = [0.5, 2.0, 8.0, 30.0][seed % 4]  # large ε: many switches within T
    st = threshold_stream(n, T, seed=seed, dist="boundary" if seed % 2 else "uniform")
    xs, ys = st.xs, st.ys
    if seed % 5 == 0:
        ys = rng.integers(0, 2, T)  # non-realisable
    a = AboveThresholdLearner(H, eps, horizon=max(T, 10), seed=seed)
    b = AboveThresholdLearner(H, eps, horizon=max(T, 10), seed=seed)
    la = loop(a, xs, ys)
    lb = b.run(xs, ys, return_mistakes=True)
    assert np.array_equal(la, lb)
    assert (a.mistakes, a.switches, a.current, a.rounds, a._qused) == \
        (b.mistakes, b.switches, b.current, b.rounds, b._qused)
    assert np.array_equal(a._cnt, b._cnt)
    # continuing works the same way (the noise sequences stay aligned)
    assert np.array_equal(b.run(xs[::-1], ys[::-1], return_mistakes=True),
                          loop(a, xs[::-1], ys[::-1]))
    assert (a.mistakes, a.switches, a.current) == (b.mistakes, b.switches, b.current)


def test_at_switches_happen_and_bounded():
    H = thresholds(15)
    st = threshold_stream(15, 20000, seed=0, theta=8)
    L = AboveThresholdLearner(H, 50.0, horizon=20000, max_switches=3, seed=1)
    L.run(st.xs, st.ys)
    assert 1 <= L.switches <= 3


def test_at_mistakes_grow_with_horizon():
    # The learner's price: the threshold grows like log(T)/ε0, and so do the mistakes.
    H = thresholds(63)
    def mean_mistakes(T):
        return np.mean([AboveThresholdLearner(H, 1.0, horizon=T, seed=s).run(
            *threshold_stream(63, T, seed=s).arrays()) for s in range(30)])
    m3, m5 = mean_mistakes(10 ** 3), mean_mistakes(10 ** 5)
    assert m5 > m3


def test_learner_errors():
    H = thresholds(5)
    with pytest.raises(DpmtError, match="epsilon"):
        AboveThresholdLearner(H, 0.0, 10)
    with pytest.raises(DpmtError, match="epsilon"):
        AboveThresholdLearner(H, math.inf, 10)
    with pytest.raises(DpmtError, match="horizon"):
        AboveThresholdLearner(H, 1.0, 0)
    with pytest.raises(DpmtError, match="max_switches"):
        AboveThresholdLearner(H, 1.0, 10, max_switches=0)
    with pytest.raises(DpmtError, match="beta"):
        AboveThresholdLearner(H, 1.0, 10, beta=1.0)
    L = AboveThresholdLearner(H, 1.0, 10)
    with pytest.raises(DpmtError):
        L.update(0)
    with pytest.raises(DpmtError, match="point"):
        L.predict(5)
    for bad in (1.5, "2", None):
        with pytest.raises(DpmtError, match="point"):
            L.predict(bad)
    with pytest.raises(DpmtError, match="gamma"):
        NameAndShameLearner(H, 0.0)


def test_public_learners():
    H = point_functions(3)
    st = point3_adversary(1000, 1.0, seed=0)
    for L in (online.NameAndShameLearner(H, 0.5, seed=0),
              online.AboveThresholdLearner(H, 1.0, horizon=1000, seed=0)):
        for x, y in st.pairs():
            L.predict(x); L.update(y)
        assert L.rounds == 1000
