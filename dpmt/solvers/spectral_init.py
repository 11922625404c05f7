"""Private spectral start of the item embeddings (issue 10): ``TrainConfig(init="spectral")``.

The random start (:func:`dpmt.train.training_run.initial_items`) knows nothing about the data, so the
first sweeps of private alternating minimisation spend budget finding the item space. This
module releases one more statistic, the normalised item co-occurrence of the K most popular
items, and starts V from its top eigenvectors: a noisy covariance followed by its top
eigenvectors is the *Analyze Gauss* mechanism of Dwork, Talwar, Thakurta & Zhang, "Analyze
Gauss: Optimal Bounds for Privacy-Preserving Principal Component Analysis", STOC 2014.

**The statistic.** ``top`` (K,) are the K = min(m, ``spectral_items``) items with the largest
*released* noisy counts n̂_i (public once released: choosing them is post-processing). User
j's row is ``x_j ∈ R^K``, ``x_jk = 1/√|S_j|`` for k ∈ S_j = the user's rated items among
``top`` (users with none give ``x_j = 0``), and

    C = Σ_j x_j x_jᵀ                         (K, K), symmetric PSD, float64
    Ĉ = C + E                                E symmetric, upper triangle i.i.d. N(0, σ²)

**Sensitivity** (add/remove one user; one rating per (user, item) pair, which ``fit``
enforces): the other users' rows do not change (``top`` is fixed by the released counts), so
``‖ΔC‖_F = ‖x_j x_jᵀ‖_F = ‖x_j‖² = |S_j| · 1/|S_j| = 1`` for any user with an item in
``top``, 0 otherwise: :data:`SENSITIVITY` = 1, whatever the number of items a user rated (no
per-user cap is needed). The noise is the noisy Gramian's
(:func:`~dpmt.solvers.ssp.symmetric_noise` at size K): the Gaussian mechanism on the upper
triangle T(C), whose change ``‖T(ΔC)‖ ≤ ‖ΔC‖_F`` is bounded by the same 1 (see
:func:`~dpmt.solvers.ssp.ssp_sensitivities`), so ``σ = z · 1`` for the noise multiplier z
the plan calibrates.

**The start** (post-processing of Ĉ only): the eigenvectors of the d' = min(d, K) largest
eigenvalues of Ĉ (one ``jnp.linalg.eigh``), each signed so that its entries sum to ≥ 0
(eigenvectors have no sign; this only makes the start deterministic), stacked as K rows of
length d', and **each row scaled to the random start's expected row norm** over those d'
columns, ``scale · √(d' (1/d + 1/4))`` (= ``scale · √(1 + d/4)`` for d ≤ K; ``E‖v_i‖² =
scale² (1 + d/4)`` for :func:`~dpmt.train.training_run.initial_items`), so the K rows also have the
random start's expected Frobenius norm. The m − K other rows, rows at round-off level
(e.g. an item nobody rated, in a non-private run) and, when d > K, the last d − K columns
keep the data-independent random start's values.

Why per row and not per column (the first design scaled each column to the random start's
expected column norm, ``scale · √(K (1/d + 1/4))``, which gives the same Frobenius norm):
eigenvectors of a co-occurrence concentrate on the head items, so equal column norms give
the head rows entries several times the random start's and the tail rows almost none
(likely why it did worse; not isolated further). Validation Recall@20 at η = 0
(``experiments/defaults_sweep.py`` grids, 2026-12-01), per column vs per row: the 50k-user
synthetic without noise 0.194 vs 0.251 (random start 0.275), at ε = 5 / 20 0.282 / 0.227 vs
0.291 / 0.264; ML-100K held-out users (3 seeds) at ε = 1 / 5 / 20 0.125 / 0.253 / 0.296 vs
0.128 / 0.253 / 0.300. The choice was made on those validation figures (not charged, as for
the other defaults). Neither beats the random start everywhere: see the sweeps.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from dpmt.errors import check_range
from dpmt.solvers.ssp import symmetric_noise

#: rows of the eigenvector block below this fraction of the largest row norm count as 0
_ZERO_ROW = 1e-4
#: Frobenius sensitivity of C under add/remove of one user (see the module docstring)
SENSITIVITY = 1.0


def spectral_sensitivity() -> float:
    """``‖x_j x_jᵀ‖_F = ‖x_j‖² ≤ 1``: the L2 sensitivity of the released co-occurrence."""
    return SENSITIVITY


def spectral_noise_draws(K: int) -> int:
    """Normals released by :func:`release` of a ``(K, K)`` co-occurrence: ``K(K+1)/2``, the
    upper triangle of :func:`~dpmt.solvers.ssp.symmetric_noise` (64-bit normals of
    :mod:`dpmt.solvers.noise`), for the sampler's δ (:func:`~dpmt.solvers.noise.tail_delta`,
    :func:`~dpmt.solvers.noise.edge_delta`). ``K = len(top_items(counts, spectral_items))``,
    i.e. ``min(n_items, spectral_items)``."""
    K = int(K)
    if K < 0:
        raise ValueError(f"spectral_noise_draws needs K ≥ 0; got {K}")
    return K * (K + 1) // 2


def top_items(counts, k: int) -> np.ndarray:
    """The ``k`` items with the largest ``counts`` (released noisy counts in a private run),
    largest first, ties broken by the smaller item index. int64 (min(k, m),)."""
    check_range("k", k, low=1, integer=True)
    c = np.asarray(counts, np.float64)
    order = np.argsort(-c, kind="stable")
    return order[:min(int(k), c.size)].astype(np.int64)


def _user_scale(n_in_top: np.ndarray) -> np.ndarray:
    """``1/√|S_j|`` per user (0 for users with no item in ``top``): what bounds
    ``‖x_j‖² ≤ 1``. float64 (n_users,)."""
    n = np.asarray(n_in_top, np.float64)
    return np.where(n > 0, 1.0 / np.sqrt(np.maximum(n, 1.0)), 0.0)


def cooccurrence(user, item, n_users: int, top) -> np.ndarray:
    """The exact statistic ``C = Σ_j x_j x_jᵀ`` (before noise), float64 (K, K).

    Args:
      user, item: int (nnz,) the training pairs, at most one per (user, item).
      n_users: number of users (rows of the implicit user × K matrix X, ``C = XᵀX``).
      top: int (K,) the item indices kept (:func:`top_items`), distinct.
    """

    user = np.asarray(user, np.int64)
    item = np.asarray(item, np.int64)
    top = np.asarray(top, np.int64)
    K = top.size
    pos = np.full(int(max(item.max(initial=-1), top.max(initial=-1))) + 1, -1, np.int64)
    pos[top] = np.arange(K)
    col = pos[item]
    keep = col >= 0
    u, c = user[keep], col[keep]
    scale = _user_scale(np.bincount(u, minlength=n_users))
    X = sp.csr_matrix((scale[u], (u, c)), shape=(n_users, K), dtype=np.float64)
    return np.asarray((X.T @ X).toarray(), np.float64)


def release(C, key: jax.Array, sigma) -> jax.Array:
    """``Ĉ = C + E``, E the noisy Gramian's symmetric noise at size K
    (:func:`~dpmt.solvers.ssp.symmetric_noise` of ``key``) with std ``sigma`` on the upper
    triangle, diagonal included (``sigma = 0``: C itself, the non-private run): the
    :func:`spectral_noise_draws` ``(K)`` 64-bit normals of :mod:`dpmt.solvers.noise`.
    Traceable (the audit vmaps it over keys). float32 (K, K)."""

    C = jnp.asarray(C, jnp.float32)
    return C + symmetric_noise(key, C.shape[-1], jnp.asarray(sigma, jnp.float32))


def spectral_rows(C_hat, dim: int, scale: float) -> np.ndarray:
    """The top ``min(dim, K)`` eigenvectors of ``C_hat`` (largest eigenvalue first) as
    columns, signed, each row scaled to ``scale · √(d' (1/dim + 1/4))`` (module docstring);
    rows at round-off level (below 1e-4 of the largest) are set to 0.
    float32 (K, d' = min(dim, K))."""
    C_hat = jnp.asarray(C_hat, jnp.float32)
    K = C_hat.shape[-1]
    d = min(int(dim), K)
    _, vecs = jnp.linalg.eigh(0.5 * (C_hat + C_hat.T))       # ascending eigenvalues
    top = np.asarray(vecs[:, ::-1][:, :d], np.float64)
    top = top * np.where(top.sum(axis=0) < 0, -1.0, 1.0)
    norm = np.linalg.norm(top, axis=1, keepdims=True)
    # a row at round-off level (an item outside the top eigenvectors' support, e.g. one that
    # nobody rated in a non-private run) has no direction to scale up: it stays 0
    ok = norm > _ZERO_ROW * norm.max(initial=0.0)
    row_norm = scale * math.sqrt(d * (1.0 / dim + 0.25))
    top = np.where(ok, top / np.where(ok, norm, 1.0), 0.0) * row_norm
    return top.astype(np.float32)


def spectral_start(V_random, top, C_hat, scale: float) -> jax.Array:
    """The initial V: ``V_random`` (m, d) with rows ``top`` (their first min(d, K) columns)
    replaced by :func:`spectral_rows` of ``C_hat`` (K, K), except the rows it sets to 0.
    float32 (m, d)."""
    V = np.array(V_random, np.float32)
    rows = spectral_rows(C_hat, V.shape[1], scale)
    ok = np.any(rows != 0, axis=1)
    V[np.asarray(top, np.int64)[ok], :rows.shape[1]] = rows[ok]
    return jnp.asarray(V)
