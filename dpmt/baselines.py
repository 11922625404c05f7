"""Non-private reference models: the ceiling the private models are measured against.

* **EASE** (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019): an
  item-item model with a closed form and one hyper-parameter λ. With X the users × items
  0/1 matrix of the training positives and G = XᵀX + λI,

      P = G⁻¹,   B_ij = −P_ij / P_jj  (i ≠ j),   B_jj = 0,

  and a user with history x (1 × m) scores items by s = x·B (eq. (8) of the paper). It
  reads every training rating exactly: not private, never released — a baseline only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.errors import ConfigError, check_range

#: largest catalogue EASE is built for (an m × m float32 matrix and its inverse)
MAX_EASE_ITEMS = 20_000


def ease_gram(train) -> np.ndarray:
    """XᵀX (m, m) float32 of the training positives (X users × items, entries 1): the part
    of EASE that does not depend on λ (computed once for a grid of λ)."""
    import scipy.sparse as sp

    m = int(train.n_items)
    if m > MAX_EASE_ITEMS:
        raise ConfigError(f"EASE builds an items × items matrix: {m} items is above "
                          f"{MAX_EASE_ITEMS}")
    X = sp.csr_matrix((np.ones(len(train.item), np.float32),
                       (np.asarray(train.user, np.int64), np.asarray(train.item, np.int64))),
                      shape=(int(train.n_users), m))
    X.data[:] = 1.0                       # a repeated pair counts once
    return np.asarray((X.T @ X).toarray(), np.float32)


def ease_weights(train, reg: float, gram: np.ndarray | None = None) -> np.ndarray:
    """EASE's item-item matrix B (m, m) float32 from the positives of ``train`` (a
    :class:`~dpmt.data.Ratings`; every entry counts as 1), ridge ``reg`` = λ; ``gram``:
    :func:`ease_gram` of ``train`` when already computed."""
    check_range("reg", reg, low=0.0, low_open=True)
    G = ease_gram(train) if gram is None else gram
    return np.asarray(_ease(jnp.asarray(G), float(reg)))


@jax.jit
def _ease(G, reg):
    G = G + reg * jnp.eye(G.shape[0], dtype=G.dtype)
    # G is symmetric positive definite: its inverse by Cholesky (float32 is what the paper's
    # reference code uses; λ ≥ 1 keeps it well conditioned)
    L = jax.scipy.linalg.cho_factor(G, lower=True)
    P = jax.scipy.linalg.cho_solve(L, jnp.eye(G.shape[0], dtype=G.dtype))
    B = -P / jnp.diag(P)[None, :]
    return B.at[jnp.diag_indices(G.shape[0])].set(0.0)


def ease_score_fn(B: np.ndarray, history):
    """Score function ``users (b,) -> (b, m)`` of EASE for the users of ``history`` (a
    Ratings in the model's item index: the users' own positives), s_u = x_u·B."""
    n, m = int(history.n_users), int(history.n_items)
    if B.shape != (m, m):
        raise ConfigError(f"B is {B.shape}; the history indexes {m} items")
    X = np.zeros((n, m), np.float32)
    X[np.asarray(history.user, np.int64), np.asarray(history.item, np.int64)] = 1.0
    Xj, Bj = jnp.asarray(X), jnp.asarray(B)
    return lambda users: _scores(Xj, Bj, jnp.asarray(users))


@jax.jit
def _scores(X, B, users):
    return jnp.matmul(X[users], B, precision=jax.lax.Precision.HIGHEST)
