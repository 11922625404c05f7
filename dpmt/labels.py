"""The labels of the rating task: centred by the released offsets, less each user's own bias,
clipped to the range the sensitivities assume (training, the evaluation and the fold-in)."""

from __future__ import annotations

import numpy as np


def rating_labels(values, offset, clip: float) -> np.ndarray:
    """y = clip(r − offset, −c, c) float32, ``offset`` = μ̂ (+ b̂_i per rating): the labels
    the rating task trains on. |y| ≤ c is the bound the b-statistics' sensitivity √β·C·c
    assumes."""
    return np.clip(np.asarray(values, np.float64) - offset, -clip, clip).astype(np.float32)


def user_biases(labels, users, n_users: int, reg: float) -> np.ndarray:
    """b_j = Σ_{i∈I_j} y_ij / (|I_j| + λ_b): each user's mean label shrunk towards 0,
    float64 (n_users,).

    Like u_j, b_j is solved from user j's own ratings only and never released (joint DP,
    Kearns et al. 2014): training computes it for the users it trains on, and a fold-in
    (:meth:`dpmt.model.Model.predict`, the evaluation) for the user being served.
    """
    users = np.asarray(users, np.int64)
    s = np.bincount(users, weights=np.asarray(labels, np.float64), minlength=n_users)
    n = np.bincount(users, minlength=n_users)
    return s / (n + float(reg))


def centre_by_user(labels, users, n_users: int, reg: float, clip: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(y − b_j clipped to ±c float32, b (n_users,)): the labels of the factor model once
    each user's own bias :func:`user_biases` is taken out. The clip after the subtraction
    keeps |y| ≤ c, the bound the item step's sensitivity assumes, whatever b_j is."""
    b = user_biases(labels, users, n_users, reg)
    y = np.asarray(labels, np.float64) - b[np.asarray(users, np.int64)]
    return np.clip(y, -clip, clip).astype(np.float32), b
