"""Combine_D (Algorithm 4, Lemma 13): condition on D, exact mistake bound, privacy by PLD."""

import math

import numpy as np
import pytest

from dpmt.errors import ConfigError
from dpmt.online.accounting import bernoulli_product_delta
from dpmt.online.combiner import (Combiner, combiner_epsilon, combiner_min_D,
                                  expected_mistakes, prob_first)


@pytest.mark.parametrize("eps,delta", [(0.5, 5e-7), (1.0, 1e-3), (0.1, 1e-9)])
def test_min_D_is_lemma13_condition(eps, delta):
    D = combiner_min_D(eps, delta)
    assert combiner_epsilon(D, delta) <= eps < combiner_epsilon(D - 1, delta)
    Combiner(D, eps, delta)
    with pytest.raises(ConfigError, match="Lemma 13"):
        Combiner(D - 1, eps, delta)
    lam = math.log(1 / delta)
    assert combiner_epsilon(D, delta) == pytest.approx(
        64 / D + math.sqrt(128 * lam / D) + 16 * lam / (3 * D))


def _sequences(rng, T, kind):
    y = rng.integers(0, 2, T)
    if kind == "random":
        u = np.where(rng.random(T) < rng.uniform(0, .5), 1 - y, y)
        v = np.where(rng.random(T) < rng.uniform(0, .5), 1 - y, y)
    elif kind == "u_good_late":   # V good first, U good later
        cut = int(rng.integers(T))
        u = np.where(np.arange(T) < cut, 1 - y, y)
        v = np.where(np.arange(T) < cut, y, 1 - y)
    else:  # alternating blocks of who is right
        blk = (np.arange(T) // int(rng.integers(5, 200))) % 2 == 0
        u = np.where(blk, y, 1 - y)
        v = 1 - u
    return u, v, y


def test_expected_mistakes_bound_exact():
    """Lemma 13: E M ≤ 3 min(M(U), M(V)) + 2D, expectation computed exactly."""
    rng = np.random.default_rng(0)
    for D in (1, 10, 200):
        for kind in ("random", "u_good_late", "blocks"):
            for _ in range(10):
                u, v, y = _sequences(rng, 3000, kind)
                em = expected_mistakes(u, v, y, D)
                assert em <= 3 * min(np.sum(u != y), np.sum(v != y)) + 2 * D + 1e-9


def test_monte_carlo_matches_exact_expectation():
    """Mean mistakes over 400 runs within 5 standard errors of the exact expectation."""
    rng = np.random.default_rng(1)
    u, v, y = _sequences(rng, 1500, "u_good_late")
    D = 30
    em = expected_mistakes(u, v, y, D)
    runs = []
    for seed in range(400):
        c = Combiner(D, 100.0, 0.5, seed=seed)
        m = 0
        for a, b, t in zip(u.tolist(), v.tolist(), y.tolist()):
            m += c.choose(a, b) != t
            c.observe(t)
        runs.append(m)
    runs = np.array(runs)
    assert abs(runs.mean() - em) < 5 * runs.std(ddof=1) / math.sqrt(runs.size) + 1e-9


def _probs(u, v, y, D, skip):
    """P[output = u_t] on disagreement rounds t != skip (deterministic counters)."""
    c1 = c2 = 0
    out = []
    for t in range(len(u)):
        if u[t] != v[t]:
            if t != skip:
                out.append(prob_first(c1, c2, D))
            if u[t] == y[t]:
                c1 += 1
            else:
                c2 += 1
        elif t != skip:
            out.append(1.0)  # agreement: deterministic (same on both streams here)
    return np.array(out)


@pytest.mark.parametrize("kind", ["random", "u_good_late", "blocks"])
def test_privacy_pld_on_neighbouring_streams(kind):
    """Neighbouring triple streams (round 0 changed in each of the ways that move the
    counters): dp_accounting PLD of the exact Bernoulli products stays below δ_c at
    ε_c = combiner_epsilon(D, δ_c). The disagreement pattern after round 0 is kept fixed,
    so the other rounds' output laws are products of Bernoulli pairs."""
    eps_c, delta_c = 1.0, 1e-3
    D = combiner_min_D(eps_c, delta_c)
    rng = np.random.default_rng(2)
    u, v, y = _sequences(rng, 3000, kind)
    worst = 0.0
    # (u, v, y) at round 0: a U-win, a V-win, an agreement; all ordered pairs of changes
    for first, second in [((1, 0, 1), (1, 0, 0)), ((1, 0, 0), (1, 0, 1)),
                          ((1, 0, 1), (0, 0, 0)), ((0, 0, 0), (1, 0, 0))]:
            u1, v1, y1 = u.copy(), v.copy(), y.copy()
            u2, v2, y2 = u.copy(), v.copy(), y.copy()
            u1[0], v1[0], y1[0] = first
            u2[0], v2[0], y2[0] = second
            p1, p2 = _probs(u1, v1, y1, D, 0), _probs(u2, v2, y2, D, 0)
            worst = max(worst, bernoulli_product_delta(p1, p2, eps_c, discretization=2e-4))
    assert worst <= delta_c
    # the check has power: with D/30 (below Lemma 13's condition) the same stream fails
    u1, v1, y1 = u.copy(), v.copy(), y.copy()
    u1[0], v1[0], y1[0] = 1, 0, 0
    u[0], v[0], y[0] = 1, 0, 1
    small = D // 30
    assert bernoulli_product_delta(_probs(u, v, y, small, 0), _probs(u1, v1, y1, small, 0),
                                   eps_c, discretization=2e-4) > delta_c


def test_choose_matches_probability():
    """Frequency of choosing u at fixed counters vs prob_first (z < 5)."""
    D = 20
    c = Combiner(D, 100.0, 0.5, seed=3)
    c.c1, c.c2 = 7, 2
    n = 20000
    hits = 0
    for _ in range(n):
        hits += c.choose(1, 0) == 1
        c._dis = False  # keep the counters fixed
    p = prob_first(7, 2, D)
    assert abs(hits / n - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_agreement_is_deterministic_and_counters():
    c = Combiner(5, 100.0, 0.5, seed=0)
    assert c.choose(1, 1) == 1 and c.choose(0, 0) == 0
    c.choose(1, 0)
    c.observe(1)
    c.choose(0, 1)
    c.observe(1)
    c.choose(1, 1)
    c.observe(0)
    assert (c.c1, c.c2) == (1, 1)
