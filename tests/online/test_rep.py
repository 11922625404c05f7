"""Rep(U, V, D) (Definition 10): Lemma 11 for every seed/randomness, exact privacy."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dpmt.errors import ConfigError
from dpmt.online.accounting import hockey_stick_both
from dpmt.online.mirror import mirror_window
from dpmt.online.rep import (Replacement, acceptance_delta, acceptance_delta_exact,
                             acceptance_min_D, acceptance_prob, rep_min_D, truncated_laplace)

A, B = 4.0, 2e-3  # a replacement with a short Mirror window (W = 29) for fast tests


class ConstRng:
    def __init__(self, u):
        self.u = u

    def random(self, size=None):
        return np.full(size, self.u) if size is not None else self.u


def _run(rep, us, vs, ys):
    out = []
    for u, v, y in zip(us, vs, ys):
        out.append(rep.step(int(u), int(v)))
        rep.observe(int(y))
    return np.array(out)


@pytest.mark.parametrize("a,D", [(4.0, 64), (1.0, 800), (0.5, 1601), (2.0, 203)])
def test_acceptance_delta_closed_form_vs_enumeration(a, D):
    exact = acceptance_delta_exact(a, D)
    closed = acceptance_delta(a, D)
    assert exact <= closed * (1 + 1e-9) + 1e-300
    if D % 8 == 0:  # the grid of thresholds hits the truncation point: equality
        assert exact == pytest.approx(closed, rel=1e-6)
    # the paper's cruder bound (1 + e^{a/2}) e^{-aD/32} is larger
    assert closed <= (1 + math.exp(a / 2)) * math.exp(-a * D / 32)


def test_acceptance_min_D_is_minimal():
    for a, d in [(4.0, 1e-3), (0.3, 1e-7), (1.0, 1e-9)]:
        D = acceptance_min_D(a, d)
        assert acceptance_delta(a, D) <= d < acceptance_delta(a, D - 1)


def test_truncated_laplace_law():
    """Kolmogorov–Smirnov against the truncated CDF (false-failure rate 1e-4)."""
    rng = np.random.default_rng(3)
    scale, bound = 2.0, 3.0
    xs = np.array([truncated_laplace(rng, scale, bound) for _ in range(20000)])
    assert np.all(np.abs(xs) <= bound)
    m = math.exp(-bound / scale)

    def cdf(x):
        x = np.asarray(x)
        lo = (np.exp(np.minimum(x, 0) / scale) - m) / (2 * (1 - m))
        hi = 1 - (np.exp(-np.maximum(x, 0) / scale) - m) / (2 * (1 - m))
        return np.where(x < 0, lo, hi)

    assert stats.kstest(xs, cdf).pvalue > 1e-4


def test_acceptance_prob_matches_sampling():
    a, D = 4.0, 64
    rng = np.random.default_rng(0)
    xi = np.array([truncated_laplace(rng, 4 / a, D / 8) for _ in range(40000)])
    for c in (26, 30, 32, 36):
        emp = np.mean(c + xi >= D / 2)
        p = float(acceptance_prob(c, D, a))
        assert abs(emp - p) < 5 * math.sqrt(p * (1 - p) / xi.size) + 1e-9


def _lemma11_stream(rng, T, D, K):
    y = rng.integers(0, 2, T)
    # V: fewer than K mistakes (property (i) applies), or many (only (ii) may apply)
    v_err = rng.choice(T, size=int(rng.integers(0, 3 * K)), replace=False)
    u_err = rng.choice(T, size=int(rng.integers(0, 2 * D)), replace=False)
    v = y.copy()
    v[v_err] ^= 1
    u = y.copy()
    u[u_err] ^= 1
    if rng.random() < 0.3:  # U good early, bad late
        late = np.arange(T) > rng.integers(T)
        u[late] = 1 - y[late]
    return u, v, y


def _check_lemma11(u, v, y, w, D, K, W=None):
    """(i) in its sharp form M(W) ≤ K + D + W_Mirror (≤ K + 2D since W_Mirror ≤ D), (ii)."""
    T = len(y)
    mw = np.cumsum(w != y)
    mv = np.cumsum(v != y)
    mu_before = np.concatenate([[0], np.cumsum(u != y)[:-1]])
    bound = K + D + (D if W is None else W)
    assert bound <= K + 2 * D
    for r in range(T):  # (i)
        if mv[r] < K:
            assert mw[r] <= bound
    ok = mu_before <= D / 4  # (ii)
    assert np.array_equal(w[ok], u[ok])


def test_lemma11_many_seeds():
    D = rep_min_D(A, B)
    K = D // 4
    design = mirror_window(A / 2, B / 2)
    rng = np.random.default_rng(11)
    accepted = 0
    for seed in range(300):
        u, v, y = _lemma11_stream(rng, 5 * D, D, K)
        rep = Replacement(A, B, D, seed=seed, design=design)
        w = _run(rep, u, v, y)
        _check_lemma11(u, v, y, w, D, K, design.W)
        accepted += bool(rep.accepted)
    assert 20 < accepted < 280  # both branches of the acceptance test were exercised


@pytest.mark.parametrize("xi_side", [-1, 1])
@pytest.mark.parametrize("coin", [0.0, 1 - 2.0 ** -53])
def test_lemma11_extreme_randomness(xi_side, coin):
    """Lemma 11 holds for every value of the randomness: extreme ξ = ±D/8 and coins."""
    D = rep_min_D(A, B)
    K = D // 4
    design = mirror_window(A / 2, B / 2)
    rng = np.random.default_rng(12)
    for _ in range(60):
        u, v, y = _lemma11_stream(rng, 5 * D, D, K)
        rep = Replacement(A, B, D, rng=ConstRng(coin), design=design, xi=xi_side * D / 8)
        _check_lemma11(u, v, y, _run(rep, u, v, y), D, K, design.W)


def test_replay_equals_loop():
    D = rep_min_D(A, B)
    design = mirror_window(A / 2, B / 2)
    rng = np.random.default_rng(4)
    for seed in range(40):
        u, v, y = _lemma11_stream(rng, 4 * D, D, D // 4)
        r1 = Replacement(A, B, D, seed=seed, design=design)
        r2 = Replacement(A, B, D, seed=seed, design=design)
        cut = int(rng.integers(len(y)))
        w1 = _run(r1, u, v, y)
        w2 = np.concatenate([r2.replay(u[:cut], v[:cut], y[:cut]), _run(r2, u[cut:], v[cut:],
                                                                         y[cut:])])
        assert np.array_equal(w1, w2)
        assert (r1.c, r1.dis, r1.mirror.n, r1.accepted) == (r2.c, r2.dis, r2.mirror.n,
                                                            r2.accepted)


def _exact_law(us, vs, ys, a, D, design, skip, share=0.5):
    """Exact law of Rep's outputs on rounds != skip, as {outcome tuple: probability}."""
    W = design.W
    dis = np.flatnonzero(us != vs)
    c = int(np.sum(vs[dis[:D]] == ys[dis[:D]]))
    p_acc = float(acceptance_prob(c, D, a, share))
    keep = [t for t in range(len(us)) if t != skip]
    law = {}
    base = us.copy()
    law[tuple(base[keep])] = law.get(tuple(base[keep]), 0.0) + (1 - p_acc)
    window = [t for k, t in enumerate(dis, start=1) if D < k <= D + W]
    after = [t for k, t in enumerate(dis, start=1) if k > D + W]
    probs = [design.probs[k - D - 1] for k in range(D + 1, D + 1 + len(window))]
    for bits in itertools.product([0, 1], repeat=len(window)):
        w = us.copy()
        w[after] = vs[after]
        pr = p_acc
        for t, bt, p in zip(window, bits, probs):
            if bt:
                w[t] = vs[t]
            pr *= p if bt else 1 - p
        key = tuple(w[keep])
        law[key] = law.get(key, 0.0) + pr
    return law


@pytest.mark.parametrize("share", [0.5, 0.8])
def test_rep_joint_privacy_exact_enumeration(share):
    """Exact output laws (acceptance bit × Mirror coins) on neighbouring triple streams:
    the hockey-stick divergence at ε = a stays below Rep's claimed δ (also with the Mirror
    taking a share 0.8 of a and the acceptance test 0.2)."""
    a, b = 8.0, 0.1
    design = mirror_window(share * a, b / 2)
    D = rep_min_D(a, b, design, share)
    claimed = Replacement(a, b, D, design=design, share=share).privacy()
    assert claimed[0] == a and claimed[1] <= b
    rng = np.random.default_rng(8)
    worst = 0.0
    T = 2 * D + design.W + 6
    for _ in range(250):
        y = rng.integers(0, 2, T)
        u = np.where(rng.random(T) < rng.uniform(0.2, 0.8), 1 - y, y)
        v = np.where(rng.random(T) < rng.uniform(0.0, 0.6), 1 - y, y)
        i = int(rng.integers(T))
        u2, v2, y2 = u.copy(), v.copy(), y.copy()
        u2[i], v2[i], y2[i] = rng.integers(0, 2, 3)
        l1 = _exact_law(u, v, y, a, D, design, i, share)
        l2 = _exact_law(u2, v2, y2, a, D, design, i, share)
        worst = max(worst, hockey_stick_both(l1, l2, a))
    assert worst <= claimed[1]


def test_rep_refuses_small_D_and_bad_xi():
    D = rep_min_D(A, B)
    with pytest.raises(ConfigError, match="too small"):
        Replacement(A, B, D - 1)
    with pytest.raises(ConfigError):
        Replacement(A, B, D, xi=D)
    eps, dl = Replacement(A, B, D).privacy()
    assert eps == A and dl <= B


@pytest.mark.parametrize("a,D,share", [(4.0, 64, 0.8), (1.0, 1600, 0.9), (2.0, 203, 0.7),
                                       (0.5, 800, 0.95)])
def test_acceptance_with_mirror_share(a, D, share):
    """With the Mirror taking ``share·a``: the acceptance test spends ``(1−share)a`` with
    Laplace scale ``2/((1−share)a)``; the closed-form δ bounds the exact enumeration (equal
    when D/8 is an integer), the minimal D is minimal, and the default share is Definition 10
    exactly (scale 4/a, δ at a/2)."""
    exact = acceptance_delta_exact(a, D, share=share)
    closed = acceptance_delta(a, D, share)
    assert exact <= closed * (1 + 1e-9) + 1e-300
    if D % 8 == 0:
        assert exact == pytest.approx(closed, rel=1e-6)
    d = closed * 3
    Dm = acceptance_min_D(a, d, share)
    assert acceptance_delta(a, Dm, share) <= d < acceptance_delta(a, Dm - 1, share)
    assert acceptance_delta(a, D, 0.5) == acceptance_delta(a, D)
    rng1, rng2 = np.random.default_rng(5), np.random.default_rng(5)
    r = Replacement(A, B, rep_min_D(A, B, share=share) + 40, rng=rng1, share=share)
    assert r.xi == truncated_laplace(rng2, 2.0 / ((1 - share) * A), r.D / 8)
    assert r.mirror.a == share * A and r.privacy() == (A, r.mirror.design.delta + r.delta_acc)
    assert r.privacy()[1] <= B


def test_share_validation():
    with pytest.raises(ConfigError, match="share"):
        Replacement(A, B, 500, share=1.0)
    with pytest.raises(ConfigError, match="share"):
        rep_min_D(A, B, share=0.0)
