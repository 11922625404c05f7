"""Weight formulas (Krichene et al. 2023, eq. (11)) and the per-user budget."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmt import weighting
from dpmt.errors import DpmtError


def test_task_weights_hand_computed():
    counts = np.array([1.0, 4.0, 16.0])
    # mu = 1/2 (gamma = 1): omega_i = (n beta / sum n_i^0)^(1/2) n_i^(-1/2) = (10*2/3)^(1/2) / sqrt(n_i)
    w = weighting.task_weights(counts, gamma=1.0, budget=2.0, n_users=10)
    expected = math.sqrt(10 * 2.0 / 3.0) * np.array([1.0, 0.5, 0.25])
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    # mu = 1/4 (gamma = 0): sum n_i^(1/2) = 1 + 2 + 4 = 7
    w0 = weighting.task_weights(counts, gamma=0.0, budget=2.0, n_users=10)
    np.testing.assert_allclose(w0, math.sqrt(20 / 7) * counts ** -0.25, rtol=1e-12)


@pytest.mark.parametrize("mu", [0.0, 0.25, 1 / 3, 0.5, 1.0])
def test_task_weights_power_law_and_normalisation(mu):
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 1000, size=50).astype(float)
    n, beta, c_n = 300, 5.0, 2.0
    w = weighting.task_weights(counts, mu=mu, budget=beta, n_users=n, c_n=c_n)
    # omega is proportional to n^-mu: log-log slope exactly -mu
    slope = np.polyfit(np.log(counts), np.log(w), 1)[0]
    assert slope == pytest.approx(-mu, abs=1e-9)
    # sum_i n_i omega_i^2 = n beta / c(n)
    assert np.sum(counts * w**2) == pytest.approx(n * beta / c_n, rel=1e-12)


def test_mu_zero_is_uniform():
    counts = np.array([3.0, 7.0, 100.0])
    w = weighting.task_weights(counts, mu=0.0, budget=4.0, n_users=20)
    np.testing.assert_allclose(w, math.sqrt(20 * 4.0 / counts.sum()))


def test_shape_only_when_n_unknown():
    w = weighting.task_weights(np.array([1.0, 4.0]), mu=0.5, budget=9.0)
    np.testing.assert_allclose(w, [3.0, 1.5])


def test_bad_counts_and_params_raise_clear_errors():
    with pytest.raises(DpmtError, match="count 0 < 1"):
        weighting.task_weights(np.array([0.0, 2.0]), n_users=3)
    with pytest.raises(DpmtError, match="NaN"):
        weighting.task_weights(np.array([np.nan, 2.0]), n_users=3)
    with pytest.raises(DpmtError, match="budget must be > 0"):
        weighting.task_weights(np.array([1.0]), budget=0.0, n_users=3)
    with pytest.raises(DpmtError, match="mu must be >= 0"):
        weighting.task_weights(np.array([1.0]), mu=-0.1, n_users=3)
    with pytest.raises(DpmtError, match="non-empty"):
        weighting.task_weights(np.array([]), n_users=3)


@st.composite
def rating_graphs(draw):
    n_users = draw(st.integers(1, 12))
    n_items = draw(st.integers(1, 15))
    pairs = draw(st.sets(st.tuples(st.integers(0, n_users - 1), st.integers(0, n_items - 1)),
                         min_size=1, max_size=80))
    u, i = map(np.array, zip(*sorted(pairs)))
    return u, i, n_items


@settings(max_examples=150, deadline=None)
@given(rating_graphs(), st.floats(0.0, 1.5), st.floats(0.01, 50.0), st.integers(1, 40))
def test_clip_to_budget_holds_for_every_user(graph, mu, beta, n):
    u, i, m = graph
    counts = np.maximum(np.bincount(i, minlength=m), 1).astype(float)
    omega = weighting.task_weights(counts, mu=mu, budget=beta, n_users=n)
    w = weighting.clip_to_budget(omega, u, i, beta)
    b = weighting.user_sq_norms(w, u)
    assert np.all(b <= beta)
    # users under budget keep omega exactly; users over are scaled to (almost exactly) beta
    raw = weighting.user_sq_norms(omega[i], u)
    under = raw <= beta
    np.testing.assert_allclose(b[under], raw[under], rtol=1e-12)
    np.testing.assert_allclose(b[~under], beta, rtol=1e-9)


@settings(max_examples=100, deadline=None)
@given(rating_graphs(), st.floats(0.0, 1.5), st.floats(0.01, 50.0))
def test_normalized_weights_hit_budget_exactly(graph, mu, beta):
    u, i, m = graph
    counts = np.maximum(np.bincount(i, minlength=m), 1).astype(float)
    w = weighting.normalized_user_weights(counts, u, i, mu=mu, budget=beta)
    b = weighting.user_sq_norms(w, u)
    present = np.bincount(u) > 0
    assert np.all(b[present] <= beta)
    np.testing.assert_allclose(b[present], beta, rtol=1e-9)
    # within a user, w is proportional to n_i^-mu
    for j in np.unique(u):
        sel = u == j
        ratio = w[sel] / counts[i[sel]] ** (-mu)
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)


def test_jax_inputs_supported():
    import jax.numpy as jnp

    counts = jnp.array([1.0, 4.0, 9.0])
    u = jnp.array([0, 0, 1, 1, 1])
    i = jnp.array([0, 1, 0, 1, 2])
    omega = weighting.task_weights(counts, mu=0.5, budget=1.0, n_users=2)
    w = weighting.clip_to_budget(omega, u, i, 1.0, n_users=2)
    assert float(weighting.user_sq_norms(w, u, 2).max()) <= 1.0
    np.testing.assert_allclose(
        np.asarray(w), weighting.clip_to_budget(np.asarray(omega, float), np.asarray(u),
                                                np.asarray(i), 1.0), rtol=1e-5)


def test_improvement_ratios_bounds_and_equality():
    r0, r1 = weighting.improvement_ratios(np.full(20, 7.0))
    assert r0 == pytest.approx(1.0) and r1 == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    for _ in range(20):
        c = rng.integers(1, 500, size=30).astype(float)
        r0, r1 = weighting.improvement_ratios(c)
        assert r0 >= 1 - 1e-12 and r1 >= 1 - 1e-12


def _extreme_counts(m, nu):
    c = np.ones(m)
    c[0] = m ** (1 + nu)
    return c


@pytest.mark.parametrize("nu", [0.25, 0.5, 0.75])
def test_r0_asymptotics(nu):
    """n_1 = m^(1+nu), other n_i = 1: R0 ~ m^(nu/2) (for nu < 1). The correction factor
    1/(1 + m^((nu-1)/2)) vanishes slowly, so test the growth exponent between m = 1e5 and 1e6."""
    r_a = weighting.improvement_ratios(_extreme_counts(10**5, nu))[0]
    r_b = weighting.improvement_ratios(_extreme_counts(10**6, nu))[0]
    assert np.log10(r_b / r_a) == pytest.approx(nu / 2, abs=0.05)


@pytest.mark.parametrize("nu", [0.5, 1.0, 2.0])
def test_r1_asymptotics(nu):
    """R1 = m^nu (1 + O(m^-nu)): within 1% at m = 1e6."""
    m = 10**6
    r1 = weighting.improvement_ratios(_extreme_counts(m, nu))[1]
    assert r1 / m**nu == pytest.approx(1.0, rel=0.01)


def test_uniform_and_tail_baselines():
    u = np.array([0, 0, 0, 0, 1, 1])
    i = np.array([0, 1, 2, 3, 0, 3])
    w = weighting.uniform_sample_weights(u, k=2, seed=0)
    assert np.bincount(u, weights=w).tolist() == [2.0, 2.0]
    counts = np.array([50.0, 3.0, 1.0, 10.0])
    t = weighting.tail_weights(counts, u, i, k=2, seed=0)
    # user 0's two least popular items are 2 and 1; user 1 keeps both (0 and 3)
    assert t.tolist() == [0, 1, 1, 0, 1, 1]
