"""Mirror (Fact 4) by the mirror ramp: deterministic edges, window sizes, exact privacy."""

import itertools

import numpy as np
import pytest

from dpmt.errors import ConfigError
from dpmt.online.accounting import (bernoulli_product_delta, bernoulli_product_rdp_delta,
                                    hockey_stick_both)
from dpmt.online.mirror import Mirror, mirror_window, ramp_probabilities


class ConstRng:
    """A stand-in generator whose coins are all equal to ``u`` (extreme randomness)."""

    def __init__(self, u):
        self.u = u

    def random(self, size=None):
        return np.full(size, self.u) if size is not None else self.u


def _answers(m: Mirror, activity):
    return [m.step(bool(a)) for a in activity]


@pytest.mark.parametrize("a,b,D", [(2.0, 1e-3, 0), (2.0, 1e-3, 7), (1.0, 1e-6, 25)])
def test_edges_hold_for_every_seed(a, b, D):
    design = mirror_window(a, b)
    W = design.W
    rng = np.random.default_rng(1)
    for seed in range(150):
        act = rng.random(D + W + 60) < rng.uniform(0.2, 1.0)
        m = Mirror(a, b, D, seed=seed, design=design)
        out = _answers(m, act)
        n = np.cumsum(act)
        for t, (ac, o) in enumerate(zip(act, out)):
            if not ac or n[t] <= D:
                assert o is False
            elif n[t] > D + W:
                assert o is True


@pytest.mark.parametrize("D", [0, 4])
def test_edges_hold_for_extreme_coins_and_window_is_used(D):
    """Coins fixed at 0 (most ⊤) and at 1−2⁻⁵³ (most ⊥): still ⊥ for the first D active
    rounds and ⊤ after D+W; the first ⊤ is at active round D+1 resp. D+W+1, and a coin
    between p_{W−1} and p_W gives the first ⊤ at D+W: the window is used in full."""
    a, b = 2.0, 1e-3
    design = mirror_window(a, b)
    W = design.W
    p = design.probs
    act = np.ones(D + W + 10, bool)
    lo = _answers(Mirror(a, b, D, rng=ConstRng(0.0), design=design), act)
    hi = _answers(Mirror(a, b, D, rng=ConstRng(1 - 2.0 ** -53), design=design), act)
    mid = _answers(Mirror(a, b, D, rng=ConstRng(0.5 * (p[-2] + p[-1])), design=design), act)
    assert lo.index(True) == D          # 0-based index: active round D+1
    assert hi.index(True) == D + W      # active round D+W+1
    assert mid.index(True) == D + W - 1  # active round D+W
    for out, first in ((lo, D), (hi, D + W), (mid, D + W - 1)):
        assert all(out[first:]) and not any(out[:first])


def test_ramp_is_increasing_symmetric_and_meets_target():
    for shape in ("tempered", "logistic"):
        d = mirror_window(2.0, 1e-3, shape=shape, method="pld")
        p = d.probs
        assert np.all(np.diff(p) > 0)
        np.testing.assert_allclose(p + p[::-1], 1.0, atol=1e-12)
        assert p[0] == pytest.approx(d.endpoint) and d.delta <= 1e-3


@pytest.mark.parametrize("a,b", [(1.0, 1e-6), (2.0, 1e-3)])
def test_window_is_minimal_for_its_accounting(a, b):
    d = mirror_window(a, b)
    assert d.delta <= b
    from dpmt.online.mirror import TEMPERED, _delta_explicit
    g, cap, frac = TEMPERED
    prev = ramp_probabilities(d.W - 1, frac * b, g, cap)
    assert _delta_explicit(prev, a, d.method) > b


def test_notes_cross_check_logistic_rdp_windows():
    """The notes' W (exact Rényi accounting of the logistic ramp, e = b/4): 664, 49.
    Ours with the same ramp and RDP accounting must be within 10%; PLD and the tempered
    ramp must do better."""
    for (a, b), notes in {(1.0, 1e-6): 664, (2.0, 1e-3): 49}.items():
        w_rdp = mirror_window(a, b, shape="logistic", method="rdp").W
        assert abs(w_rdp - notes) <= 0.1 * notes
        w_pld = mirror_window(a, b, shape="logistic", method="pld").W
        assert w_pld <= w_rdp
        assert mirror_window(a, b).W < 0.7 * w_rdp


def test_analytic_design_is_private_by_exact_pld():
    """The closed-form (curvature) design must pass an independent PLD check."""
    a, b = 2.0, 1e-3
    d = mirror_window(a, b, shape="logistic", method="analytic")
    p = np.array([d.prob(i) for i in range(1, d.W + 1)])
    q = np.concatenate([[0.0], p, [1.0]])
    assert bernoulli_product_delta(q[:-1], q[1:], a, discretization=1e-4) <= b
    assert d.W >= mirror_window(a, b, shape="logistic", method="pld").W


def _delta_neighbours(m_factory, act, i, a):
    """δ(a) between the laws of the other rounds' answers for activity bit i = 0 vs 1."""
    x0 = np.array(act, bool)
    x1 = x0.copy()
    x0[i], x1[i] = False, True
    p0 = m_factory().top_probabilities(x0)
    p1 = m_factory().top_probabilities(x1)
    keep = np.arange(len(act)) != i
    return bernoulli_product_delta(p0[keep], p1[keep], a, discretization=1e-4)


@pytest.mark.parametrize("a,b", [(2.0, 1e-3), (1.0, 1e-6)])
def test_privacy_on_neighbouring_activity_sequences(a, b):
    """PLD (pessimistic, so an upper bound) of the exact Bernoulli products from the
    mechanism's own probabilities on random neighbouring activity sequences."""
    design = mirror_window(a, b)
    D = 3
    rng = np.random.default_rng(5)
    T = D + design.W + 20
    worst = 0.0
    cases = [(np.ones(T, bool), 0)]  # the whole ramp shifts: the worst case
    for _ in range(12):
        act = rng.random(T) < rng.uniform(0.3, 1.0)
        cases.append((act, int(rng.integers(T))))
    for act, i in cases:
        worst = max(worst, _delta_neighbours(lambda: Mirror(a, b, D, design=design), act, i, a))
    assert worst <= b
    assert worst > 0.3 * b  # the worst case is close to the target: the check is not vacuous


def test_privacy_exhaustive_exact_small():
    """Every activity sequence of length 9 and every round: exact output laws by
    enumeration, exact hockey-stick divergence ≤ b (no discretisation anywhere)."""
    a, b, D = 4.0, 0.05, 1
    design = mirror_window(a, b)
    assert design.W <= 6
    T = 9
    outs = np.array(list(itertools.product([0, 1], repeat=T - 1)), bool)

    def law(p):
        return np.prod(np.where(outs, p[None, :], 1 - p[None, :]), axis=1)

    worst = 0.0
    for bits in itertools.product([0, 1], repeat=T):
        act = np.array(bits, bool)
        for i in range(T):
            x0, x1 = act.copy(), act.copy()
            x0[i], x1[i] = False, True
            keep = np.arange(T) != i
            p0 = Mirror(a, b, D, design=design).top_probabilities(x0)[keep]
            p1 = Mirror(a, b, D, design=design).top_probabilities(x1)[keep]
            if np.array_equal(p0, p1):
                continue
            worst = max(worst, hockey_stick_both(law(p0), law(p1), a))
    assert worst <= b
    assert worst <= design.delta + 1e-15  # PLD design value is an upper bound of the exact
    assert worst > 0.5 * design.delta


def test_rdp_bound_dominates_pld_and_is_valid():
    a, b = 2.0, 1e-3
    d = mirror_window(a, b)
    q0, q1 = d.pairs()
    pld = bernoulli_product_delta(q0, q1, a, discretization=1e-5)
    rdp = bernoulli_product_rdp_delta(q0, q1, a)
    assert pld <= rdp + 1e-12


def test_frequencies_follow_the_ramp():
    """Empirical P[⊤] at window positions vs the ramp (binomial z-scores < 5; false-failure
    rate below 1e-5 per position)."""
    a, b, D = 2.0, 1e-3, 2
    design = mirror_window(a, b)
    W = design.W
    reps = 3000
    counts = np.zeros(W)
    for s in range(reps):
        m = Mirror(a, b, D, seed=s, design=design)
        out = _answers(m, np.ones(D + W, bool))
        counts += np.array(out[D:D + W])
    p = design.probs
    z = (counts - reps * p) / np.sqrt(reps * p * (1 - p))
    assert np.all(np.abs(z) < 5)


def test_bad_parameters():
    with pytest.raises(ConfigError):
        Mirror(1.0, 1e-6, -1)
    with pytest.raises(ConfigError):
        mirror_window(0.0, 1e-6)
    with pytest.raises(ConfigError):
        mirror_window(1.0, 1.5)
    with pytest.raises(ConfigError):
        mirror_window(1.0, 1e-6, shape="square")
    with pytest.raises(ConfigError):  # a design for a weaker target cannot serve a stronger
        Mirror(1.0, 1e-6, 3, design=mirror_window(2.0, 1e-3))


@pytest.mark.slow
def test_slow_half_epsilon_window_and_full_ramp_check():
    """(a, b) = (0.5, 1e-6): the notes' logistic-RDP window 2444 within 10%, and the default
    design's full ramp passes an independent fine PLD check."""
    a, b = 0.5, 1e-6
    w_rdp = mirror_window(a, b, shape="logistic", method="rdp").W
    assert abs(w_rdp - 2444) <= 244
    d = mirror_window(a, b)
    q0, q1 = d.pairs()
    assert bernoulli_product_delta(q0, q1, a, discretization=2e-5, block=10) <= b


def test_long_window_search_on_near_orders(monkeypatch):
    """Windows above SUBORDER_MIN_W are searched on the Rényi orders near the optimum: the
    design's δ is a valid all-orders bound (≤ b), and the window is within 1% of the one
    found with every order."""
    from dpmt.online import mirror
    from dpmt.online.mirror import TEMPERED, _delta_explicit
    a, b = 0.2, 6e-8
    fast = mirror.mirror_window.__wrapped__(a, b)
    assert fast.W > mirror.SUBORDER_MIN_W and fast.method == "rdp"
    g, cap, frac = TEMPERED
    assert _delta_explicit(ramp_probabilities(fast.W, frac * b, g, cap), a, "rdp") <= b
    assert fast.delta <= b
    monkeypatch.setattr(mirror, "SUBORDER_MIN_W", 10 ** 9)
    full = mirror.mirror_window.__wrapped__(a, b)
    assert abs(fast.W - full.W) <= 0.01 * full.W
