"""Exact user step: dense numpy reference, clipping, fold-in."""

import numpy as np
import pytest

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError
from dpmt.solvers.layout import task_layout, user_layout
from dpmt.solvers.user_step import solve_users


def ratings(n=50, m=35, nnz=500, seed=0):
    rng = np.random.default_rng(seed)
    key = np.unique(rng.integers(0, n - 3, nnz) * m + rng.integers(0, m, nnz))  # 3 users empty
    return Ratings(key // m, key % m, rng.uniform(1, 5, len(key)), np.arange(n), np.arange(m))


def dense_reference(r, V, y, reg, alpha0, C):
    V = V.astype(np.float64)
    d = V.shape[1]
    U = np.zeros((r.n_users, d))
    G = V.T @ V
    for j in range(r.n_users):
        s = r.user == j
        if not s.any():
            continue
        Vi = V[r.item[s]]
        A = Vi.T @ Vi + alpha0 * G + reg * np.eye(d)
        U[j] = np.linalg.solve(A, Vi.T @ y[s])
    if C is not None:
        U *= np.minimum(1.0, C / np.maximum(np.linalg.norm(U, axis=1), 1e-300))[:, None]
    return U


R = ratings()
D = 5
UL = user_layout(R, dim=D, max_chunk_bytes=3000)   # several chunks per bucket


def test_equals_dense_solve_and_clip():
    rng = np.random.default_rng(1)
    V = rng.normal(size=(R.n_items, D)).astype(np.float32)
    for alpha0 in (0.0, 0.3):                             # one compiled kernel
        U = np.asarray(solve_users(UL, V, R.value, reg=0.7, alpha0=alpha0))
        np.testing.assert_allclose(U, dense_reference(R, V, R.value, 0.7, alpha0, None),
                                   rtol=2e-4, atol=2e-5)
        assert np.all(U[-3:] == 0)                       # users without ratings
    # implicit feedback (labels None = 1) with the clip
    ref = dense_reference(R, V, np.ones(R.nnz), 0.7, 0.2, None)
    C = 0.5 * np.median(np.linalg.norm(ref, axis=1))
    Uc = np.asarray(solve_users(UL, V, None, reg=0.7, alpha0=0.2, clip_norm=C))
    np.testing.assert_allclose(Uc, dense_reference(R, V, np.ones(R.nnz), 0.7, 0.2, C),
                               rtol=2e-4, atol=2e-5)
    norms = np.linalg.norm(Uc, axis=1)
    assert norms.max() <= C * (1 + 1e-6)
    assert np.sum(np.isclose(norms, C, rtol=1e-5)) >= R.n_users // 3   # clipping was active


def test_fold_in_of_evaluation_users_and_confidence_weights():
    rng = np.random.default_rng(2)
    V = rng.normal(size=(R.n_items, D)).astype(np.float32)
    hist = R.select(R.user < 10)                          # held-out users' history only
    U = np.asarray(solve_users(user_layout(hist, dim=D), V, hist.value, reg=1.0))
    ref = dense_reference(hist, V, hist.value, 1.0, 0.0, None)
    np.testing.assert_allclose(U, ref, rtol=2e-4, atol=2e-5)
    assert np.all(U[10:] == 0)
    # confidence weights c_ij: equal to duplicating ratings with integer weights
    c = rng.integers(1, 3, R.nnz).astype(np.float32)
    Uw = np.asarray(solve_users(UL, V, R.value, reg=0.7, weights=c))
    rep = np.repeat(np.arange(R.nnz), c.astype(int))
    Rd = R.select(rep)
    ref = dense_reference(Rd, V, Rd.value, 0.7, 0.0, None)
    np.testing.assert_allclose(Uw, ref, rtol=2e-4, atol=2e-5)


def test_bad_arguments():
    V = np.zeros((R.n_items, D), np.float32)
    with pytest.raises(ConfigError):
        solve_users(UL, V, None, reg=0.0, alpha0=0.0)
    with pytest.raises(ConfigError):
        solve_users(UL, V, None, reg=1.0, clip_norm=0.0)
    with pytest.raises(ConfigError):
        solve_users(task_layout(R, dim=D), V, None, reg=1.0)   # wrong orientation
