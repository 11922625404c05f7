"""Sparse selection: exact privacy under list replacement by enumeration, law, utility."""

import itertools
import math

import numpy as np
import pytest

from dpmt.errors import ConfigError
from dpmt.online.accounting import hockey_stick_both
from dpmt.online.selection import (SparseSelection, balanced_gamma, gamma_for_privacy,
                                   selection_failure_bound, sparse_selection_privacy)

U = 5          # universe {0..4}
S = 2          # list size bound
ALL_LISTS = [c for r in range(S + 1) for c in itertools.combinations(range(U), r)]


def _law(sel: SparseSelection, lists) -> dict:
    counts = np.zeros(U, np.int64)
    for lst in lists:
        counts[list(lst)] += 1
    cand, probs, pbot = sel.distribution(counts)
    law = {int(c): float(p) for c, p in zip(cand, probs)}
    law["bot"] = pbot
    return law


@pytest.mark.parametrize("eps,delta,g", [(0.3, 0.05, 1), (1.0, 0.01, 1), (0.5, 0.05, 2)])
def test_privacy_exact_enumeration(eps, delta, g):
    """Exact output laws on neighbouring inputs (g lists replaced by every possible
    combination of lists of size ≤ s, for random base inputs of k = 4 lists): the exact
    hockey-stick divergence at the claimed ε never exceeds the claimed δ."""
    lg = gamma_for_privacy(eps, S, delta, g)
    sel = SparseSelection(eps, S, lg)
    e_claim, d_claim = sel.privacy(g)
    assert e_claim == pytest.approx(2 * g * eps) and d_claim <= delta * (1 + 1e-12)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(60):
        base = [ALL_LISTS[i] for i in rng.integers(len(ALL_LISTS), size=4)]
        law0 = _law(sel, base)
        pos = rng.choice(4, size=g, replace=False)
        for repl in itertools.product(range(len(ALL_LISTS)), repeat=g):
            other = list(base)
            for p, r in zip(pos, repl):
                other[p] = ALL_LISTS[r]
            worst = max(worst, hockey_stick_both(law0, _law(sel, other), e_claim))
    assert worst <= d_claim
    # the δ part is needed: at ε = 2gε the pure-DP bound fails for some neighbours
    assert worst > 0


def test_privacy_condition_refused():
    with pytest.raises(ConfigError, match="too small"):
        sparse_selection_privacy(0.1, math.log(S / 0.1) - 1.0, S, 1)
    lg = gamma_for_privacy(0.1, S, 1e-3, 1)
    e, d = sparse_selection_privacy(0.1, lg, S, 1)
    assert d <= 1e-3 * (1 + 1e-12)


def test_sampling_follows_the_law():
    """Chi-square goodness of fit of 20000 draws (false-failure rate 1e-6)."""
    from scipy import stats
    sel = SparseSelection(0.7, 3, 1.5)
    counts = np.array([0, 1, 3, 2, 0, 4])
    cand, probs, pbot = sel.distribution(counts)
    rng = np.random.default_rng(1)
    draws = [sel.select_counts(counts, rng) for _ in range(20000)]
    obs = np.array([sum(d is None for d in draws)] + [sum(d == c for d in draws) for c in cand])
    exp = 20000 * np.concatenate([[pbot], probs])
    assert stats.chisquare(obs, exp).pvalue > 1e-6
    assert set(d for d in draws if d is not None) <= set(cand.tolist())


def test_utility_bound_holds_empirically():
    """With k lists and one candidate in 9k/10 of them, the empirical rate of ⊥ or of a
    candidate in fewer than 3k/5 lists is below the bound (plus 4 standard errors)."""
    k, s, eps = 200, 50, 0.3
    lg = balanced_gamma(eps, k, s)
    sel = SparseSelection(eps, s, lg)
    bound = selection_failure_bound(eps, lg, k, s)
    assert bound < 0.05
    rng = np.random.default_rng(2)
    counts = np.zeros(k * s, np.int64)
    counts[0] = math.ceil(0.9 * k)
    counts[1:k * s // 2] = math.ceil(3 * k / 5) - 1  # many near-misses
    fails = 0
    n = 4000
    for _ in range(n):
        z = sel.select_counts(counts, rng)
        fails += z is None or counts[z] < 3 * k / 5
    assert fails / n <= bound + 4 * math.sqrt(bound / n)


def test_select_lists_checks_size():
    sel = SparseSelection(0.5, 2, 10.0)
    with pytest.raises(ConfigError):
        sel.select_lists([[0, 1, 2]], 5, np.random.default_rng(0))
    z = sel.select_lists([[1], [1], [1, 2]], 5, np.random.default_rng(0))
    assert z in (None, 1, 2)
