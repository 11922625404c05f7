"""Non-private reference models: the ceiling the private models are measured against.

* **EASE** (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019): an
  item-item model with a closed form and one hyper-parameter λ. With X the users × items
  0/1 matrix of the training positives and G = XᵀX + λI,

      P = G⁻¹,   B_ij = −P_ij / P_jj  (i ≠ j),   B_jj = 0,

  and a user with history x (1 × m) scores items by s = x·B (eq. (8) of the paper). It
  reads every training rating exactly: not private, never released — a baseline only.

The m × m matrices are dense float32 (as in the paper's reference code), built and
inverted in place with LAPACK (``?potrf`` + ``?potri``: about m³ flops, one thread, and two
m × m arrays at the peak, 5.7 GB at ML-20M's 26,744 items); a user's scores are a sparse sum of
the rows of B of the items in their history, never a dense X·B.
"""

from __future__ import annotations

import numpy as np

from dpmt.errors import ConfigError, check_range
from dpmt.runtime import lapack_threads

#: largest catalogue EASE is built for: two m × m float32 arrays (G and its inverse, 7.2 GB
#: at 30,000 items) must fit in memory beside the data
MAX_EASE_ITEMS = 30_000
#: columns of XᵀX built per sparse product (bounds the sparse intermediate's size)
_GRAM_BLOCK = 2048


def _positives_matrix(ratings, n_items: int):
    """The users × items 0/1 CSR matrix of ``ratings`` (a repeated pair counts once)."""
    import scipy.sparse as sp

    X = sp.csr_matrix((np.ones(len(ratings.item), np.float32),
                       (np.asarray(ratings.user, np.int64), np.asarray(ratings.item, np.int64))),
                      shape=(int(ratings.n_users), n_items))
    X.data[:] = 1.0
    return X


def ease_gram(train) -> np.ndarray:
    """XᵀX (m, m) float32 of the training positives (X users × items, entries 1): the part
    of EASE that does not depend on λ (computed once for a grid of λ). Built by blocks of
    columns, so no sparse product with up to m² entries is ever held whole."""
    m = int(train.n_items)
    if m > MAX_EASE_ITEMS:
        raise ConfigError(f"EASE builds an items × items matrix: {m} items is above "
                          f"{MAX_EASE_ITEMS}")
    X = _positives_matrix(train, m).tocsc()
    XT = X.T.tocsr()
    G = np.empty((m, m), np.float32)
    for j0 in range(0, m, _GRAM_BLOCK):
        j1 = min(m, j0 + _GRAM_BLOCK)
        G[:, j0:j1] = (XT @ X[:, j0:j1]).toarray()
    return G


def ease_weights(train, reg: float, gram: np.ndarray | None = None) -> np.ndarray:
    """EASE's item-item matrix B (m, m) float32 from the positives of ``train`` (a
    :class:`~dpmt.data.Ratings`; every entry counts as 1), ridge ``reg`` = λ; ``gram``:
    :func:`ease_gram` of ``train`` when already computed (not modified)."""
    from scipy.linalg import lapack

    check_range("reg", reg, low=0.0, low_open=True)
    G = ease_gram(train) if gram is None else gram
    m = G.shape[0]
    # P = (G + λI)⁻¹ by Cholesky, in one working copy: G + λI is symmetric positive definite
    # for λ > 0 (float32 as in the paper's reference code; λ ≥ 1 keeps it well conditioned)
    P = np.array(G, dtype=np.float32, order="F", copy=True)
    P[np.diag_indices(m)] += np.float32(reg)
    # one thread: scipy's bundled OpenBLAS with 2 threads segfaults in spotrf at ML-20M's
    # m = 26,744 (reproduced on the 2-core machine; 8,000 runs); with one it takes ~3 minutes
    with lapack_threads(1):
        c, info = lapack.spotrf(P, lower=1, overwrite_a=1, clean=0)
        if info == 0:
            c, info = lapack.spotri(c, lower=1, overwrite_c=1)
    if info != 0:
        raise ConfigError(f"EASE: XᵀX + {reg:g}·I is not numerically positive definite in "
                          f"float32 (LAPACK info {info}); use a larger λ")
    # ?potri fills the lower triangle: mirror it, one block of columns at a time
    for j0 in range(0, m, _GRAM_BLOCK):
        j1 = min(m, j0 + _GRAM_BLOCK)
        c[j0:j1, j1:] = c[j1:, j0:j1].T
        blk = c[j0:j1, j0:j1]
        c[j0:j1, j0:j1] = np.tril(blk) + np.tril(blk, -1).T
    # P is symmetric: its transpose is the same matrix in C order, the order the row sums
    # of ease_score_fn read fast (a Fortran-ordered B is copied on every sparse product)
    B = c.T
    d = np.diag(B).copy()
    B /= -d[None, :]                       # B_ij = −P_ij / P_jj
    B[np.diag_indices(m)] = 0.0
    return B


def ease_score_fn(B: np.ndarray, history):
    """Score function ``users (b,) -> (b, m)`` of EASE for the users of ``history`` (a
    Ratings in the model's item index: the users' own positives), s_u = x_u·B: the sum of
    the rows of B of the user's items (a sparse product, |x_u|·m flops per user)."""
    m = int(history.n_items)
    if B.shape != (m, m):
        raise ConfigError(f"B is {B.shape}; the history indexes {m} items")
    X = _positives_matrix(history, m)
    B = np.ascontiguousarray(B, np.float32)
    return lambda users: np.asarray(X[np.asarray(users, np.int64)] @ B, np.float32)
