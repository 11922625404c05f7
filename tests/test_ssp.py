"""SSP (Algorithm 1): sensitivity, exactness without noise, noise calibration, robustness."""

import jax
import numpy as np
import pytest
from scipy import stats

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError
from dpmt.solvers.layout import task_layout
from dpmt.solvers.ssp import (gramian_sensitivity, noisy_gramian, privatize_statistics,
                              project_psd, ssp_item_step, ssp_sensitivities, ssp_solve,
                              weighted_statistics)

ALPHA = 1e-6  # false-failure rate of each two-sided statistical check


def random_ratings(n=60, m=30, nnz=600, seed=0):
    rng = np.random.default_rng(seed)
    key = np.unique(rng.integers(0, n, nnz) * m + rng.integers(0, m, nnz))
    return Ratings(key // m, key % m, rng.uniform(-1, 1, len(key)), np.arange(n), np.arange(m))


def chi2_std_ok(x, sigma, alpha=ALPHA):
    """Two-sided chi-square test that zero-mean samples ``x`` have std ``sigma``."""
    x = np.asarray(x, np.float64).ravel()
    s = np.sum(x ** 2) / sigma ** 2
    lo, hi = stats.chi2.ppf([alpha / 2, 1 - alpha / 2], df=x.size)
    return lo <= s <= hi, (s / x.size) ** 0.5


# One dataset and layout for the whole module, so the jitted kernels compile once.
R = random_ratings()
D = 4
LAYOUT = task_layout(R, dim=D)


def stacked_norms(A1, b1, A2, b2):
    dA = np.asarray(A1, np.float64) - np.asarray(A2, np.float64)
    db = np.asarray(b1, np.float64) - np.asarray(b2, np.float64)
    return np.sqrt(np.sum(dA ** 2)), np.sqrt(np.sum(db ** 2))


def test_sensitivity_bound_attained_and_respected():
    beta, C, y_max = 3.0, 0.7, 2.5
    sens_A, sens_b = ssp_sensitivities(beta, C, y_max)
    assert sens_A == pytest.approx(np.sqrt(beta) * C ** 2)
    assert sens_b == pytest.approx(np.sqrt(beta) * C * y_max)
    rng = np.random.default_rng(1)
    r, n = R, R.n_users
    X = rng.normal(size=(n, D))
    X *= (C * rng.uniform(0.2, 1.0, n) / np.linalg.norm(X, axis=1))[:, None]
    w = rng.uniform(0.1, 1.0, r.nnz)
    for j in range(n):                                  # scale each user to Σ w² ≤ β
        s = r.user == j
        if s.any():
            w[s] *= np.sqrt(beta * rng.uniform(0.3, 1.0) / np.sum(w[s] ** 2))
    y = rng.uniform(-y_max, y_max, r.nnz)
    # the worst user: ‖u‖ = C, Σ w² = β, |y| = y_max
    j = int(np.argmax(r.user_counts()))
    X[j] *= C / np.linalg.norm(X[j])
    s = r.user == j
    w[s] *= np.sqrt(beta / np.sum(w[s] ** 2))
    y[s] = y_max * np.sign(y[s])
    X, w, y = (a.astype(np.float32) for a in (X, w, y))
    A, b = weighted_statistics(LAYOUT, X, w, y)
    # removing the user for real (a new layout without its ratings) ...
    keep = r.user != j
    A2, b2 = weighted_statistics(task_layout(r.select(keep), dim=D), X, w[keep], y[keep])
    dA, db = stacked_norms(A, b, A2, b2)
    assert dA == pytest.approx(sens_A, rel=1e-4)
    assert db == pytest.approx(sens_b, rel=1e-4)
    # ... equals zeroing its weights (same layout: no recompilation for the other users)
    dA0, db0 = stacked_norms(A, b, *weighted_statistics(LAYOUT, X, np.where(keep, w, 0), y))
    assert dA0 == pytest.approx(dA, rel=1e-5) and db0 == pytest.approx(db, rel=1e-5)
    for other in rng.choice(np.setdiff1d(np.unique(r.user), [j]), 8, replace=False):
        w_o = np.where(r.user == other, 0, w).astype(np.float32)
        dA, db = stacked_norms(A, b, *weighted_statistics(LAYOUT, X, w_o, y))
        assert 0 < dA <= sens_A * (1 + 1e-5) and 0 < db <= sens_b * (1 + 1e-5)
    assert gramian_sensitivity(C) == pytest.approx(C ** 2)
    with pytest.raises(ConfigError):
        ssp_sensitivities(0.0, C, y_max)


def weighted_ridge_lstsq(r, X, w, y, reg, extra=None):
    d = X.shape[1]
    out = np.zeros((r.n_items, d))
    for i in range(r.n_items):
        s = r.item == i
        Xi = X[r.user[s]].astype(np.float64)
        sw = np.sqrt(w[s].astype(np.float64))
        P = reg * np.eye(d) + (0 if extra is None else extra)
        R = np.linalg.cholesky(P).T                       # Rᵀ R = λ I + extra
        M = np.vstack([sw[:, None] * Xi, R])
        rhs = np.concatenate([sw * y[s], np.zeros(d)])
        out[i] = np.linalg.lstsq(M, rhs, rcond=None)[0]
    return out


def test_noise_off_equals_weighted_least_squares():
    rng = np.random.default_rng(2)
    r = R
    X = rng.normal(size=(r.n_users, D)).astype(np.float32)
    w = rng.uniform(0.1, 2.0, r.nnz).astype(np.float32)
    y = rng.normal(size=r.nnz).astype(np.float32)
    A, b = weighted_statistics(LAYOUT, X, w, y)
    # chunked layout: same statistics
    A2, b2 = weighted_statistics(task_layout(r, dim=D, max_chunk_bytes=2000), X, w, y)
    np.testing.assert_allclose(A2, A, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b2, b, rtol=1e-5, atol=1e-5)
    theta = ssp_solve(A, b, None, 0.0, 0.0, reg=0.3)
    np.testing.assert_allclose(theta, weighted_ridge_lstsq(r, X, w, y, 0.3), atol=2e-4,
                               rtol=1e-3)
    B = rng.normal(size=(D, D))
    extra = (B @ B.T * 0.2).astype(np.float32)
    ref = weighted_ridge_lstsq(r, X, w, y, 0.3, extra)
    for psd in ("project", "floor"):
        theta = ssp_solve(A, b, None, 0.0, 0.0, reg=0.3, extra=extra, psd=psd)
        np.testing.assert_allclose(theta, ref, atol=2e-4, rtol=1e-3)


def test_released_noise_std_and_symmetry():
    m, d = R.n_items, D
    sigma_A, sigma_b = 0.7, 1.9
    A = np.zeros((m, d, d), np.float32)
    b = np.zeros((m, d), np.float32)
    draws = [privatize_statistics(A, b, jax.random.key(k), sigma_A, sigma_b) for k in range(60)]
    A_hat = np.concatenate([np.asarray(x[0]) for x in draws])       # (60 m, d, d)
    b_hat = np.concatenate([np.asarray(x[1]) for x in draws])
    np.testing.assert_array_equal(A_hat, np.swapaxes(A_hat, 1, 2))    # exactly symmetric
    iu = np.triu_indices(d, 1)
    ok, est = chi2_std_ok(A_hat[:, iu[0], iu[1]], sigma_A)
    assert ok, f"off-diagonal std {est} vs {sigma_A}"
    ok, est = chi2_std_ok(A_hat[:, np.arange(d), np.arange(d)], sigma_A)
    assert ok, f"diagonal std {est} vs {sigma_A}"
    ok, est = chi2_std_ok(b_hat, sigma_b)
    assert ok, f"b std {est} vs {sigma_b}"
    # distinct upper-triangle entries, and A vs b noise, uncorrelated (6 sd bound)
    n = A_hat.shape[0]
    assert abs(np.corrcoef(A_hat[:, 0, 1], A_hat[:, 0, 2])[0, 1]) < 6 / np.sqrt(n)
    assert abs(np.corrcoef(A_hat[:, 0, 0], b_hat[:, 0])[0, 1]) < 6 / np.sqrt(n)


def test_solve_uses_released_statistics_and_is_layout_independent():
    rng = np.random.default_rng(3)
    r = R
    d, reg, key = D, 0.5, jax.random.key(11)
    X = rng.normal(size=(r.n_users, d)).astype(np.float32)
    w = rng.uniform(0.1, 1.0, r.nnz).astype(np.float32)
    y = rng.normal(size=r.nnz).astype(np.float32)
    L2 = task_layout(r, dim=d, growth=1.3, max_chunk_bytes=1500)
    t1 = ssp_item_step(LAYOUT, X, w, y, key, 0.4, 0.3, reg)
    t2 = ssp_item_step(L2, X, w, y, key, 0.4, 0.3, reg)
    np.testing.assert_allclose(t1, t2, rtol=1e-4, atol=1e-5)
    # equals the exact solve of the released statistics (projected)
    A, b = weighted_statistics(LAYOUT, X, w, y)
    A_hat, b_hat = privatize_statistics(A, b, key, 0.4, 0.3)
    P = np.asarray(project_psd(A_hat), np.float64) + reg * np.eye(d)
    ref = np.linalg.solve(P, np.asarray(b_hat, np.float64)[..., None])[..., 0]
    np.testing.assert_allclose(t1, ref, rtol=1e-3, atol=1e-4)
    # batching of the solve does not change the noise either
    t3 = ssp_solve(A, b, key, 0.4, 0.3, reg, batch_size=7)
    np.testing.assert_allclose(t1, t3, rtol=1e-5, atol=1e-6)
    assert not np.allclose(t1, ssp_solve(A, b, jax.random.key(12), 0.4, 0.3, reg))


@pytest.mark.parametrize("d,psd", [
    (2, "project"), (32, "floor"), (128, "project"),
    pytest.param(2, "floor", marks=pytest.mark.slow),
    pytest.param(32, "project", marks=pytest.mark.slow),
    pytest.param(128, "floor", marks=pytest.mark.slow)])
def test_never_nan_with_tiny_tasks_and_huge_noise(d, psd):
    rng = np.random.default_rng(d)
    m = 6
    A = np.zeros((m, d, d), np.float32)
    A[0] = np.outer(np.ones(d), np.ones(d)) * 1e-3        # a one-rating task
    b = np.zeros((m, d), np.float32)
    extra = rng.normal(size=(d, d)).astype(np.float32)     # not even PSD: projected
    for sigma, reg in ((1e4, 1e-4), (1e2, 1e-6), (1.0, 1e-3)):
        theta = ssp_solve(A, b, jax.random.key(d), sigma, sigma, reg, extra=extra, psd=psd)
        theta = np.asarray(theta)
        assert np.all(np.isfinite(theta))
        # ‖θ‖ ≤ ‖b̂‖ / λ  since the system matrix is ≥ λI
        assert np.all(np.linalg.norm(theta, axis=1) <= sigma * 20 * np.sqrt(d) / reg)


def test_project_psd_and_noisy_gramian():
    rng = np.random.default_rng(4)
    M = rng.normal(size=(5, 6, 6)).astype(np.float32)
    M = M + np.swapaxes(M, 1, 2)
    P = np.asarray(project_psd(M), np.float64)
    lam, Q = np.linalg.eigh(M.astype(np.float64))
    ref = np.einsum("nik,nk,njk->nij", Q, np.maximum(lam, 0), Q)
    np.testing.assert_allclose(P, ref, atol=1e-4)
    U = rng.normal(size=(30, 4)).astype(np.float32)
    G = np.asarray(noisy_gramian(U, jax.random.key(0), 0.5))
    np.testing.assert_allclose(G, G.T, atol=1e-6)
    assert np.linalg.eigvalsh(G.astype(np.float64)).min() > -1e-4
    with pytest.raises(ConfigError):
        ssp_solve(M, np.zeros((5, 6), np.float32), None, 1.0, 1.0, 0.1)   # noise needs a key
    with pytest.raises(ConfigError):
        ssp_solve(M, np.zeros((5, 6), np.float32), None, 0.0, 0.0, 0.0)   # reg must be > 0
