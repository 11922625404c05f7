"""The labels of the rating task: centred by the released offsets, less each user's own bias,
clipped to the range the sensitivities assume (training, the evaluation and the fold-in).

A rating model predicts r̂_ij = μ̂ + b̂_i + b_j + ⟨w_j, f_i⟩ + ⟨u_j, v_i⟩. μ̂, b̂_i and v_i are
released; b_j (the user's bias), w_j (the user's slopes on the item statistics f_i) and u_j
are solved from user j's own ratings and never released (joint DP, Kearns et al. 2014), like
u_j in Chien et al. 2021. f_i (:func:`item_statistics`) is post-processing of what the model
releases anyway — the standardised item offset b̂_i and log popularity log ñ_i — so the
slopes cost no privacy: a user who follows the consensus more or less than others, or who
likes rare films more, gets that from their own ratings.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: ratings per chunk of the per-rating scores (bounds the gathered (chunk, d) blocks)
_CHUNK = 1 << 18
#: ridge of the user slopes w_j on the standardised item statistics (``user_offsets="slopes"``):
#: of 30, 100, 300, the least validation RMSE summed over ML-100K and the 5k-user explicit
#: synthetic at ε = 1, 5, 20 (experiments/rating_sweep.py; ML-100K alone preferred 30, the
#: synthetic, whose users rate 32 items and have no slopes planted, 300)
SLOPE_REG = 100.0


def bias_refit(cfg) -> bool:
    """Whether a rating model refits each user's offsets to the residual of u_j
    (``user_offsets`` "refit" or "slopes", with ``user_bias``)."""
    return cfg.rating_user_bias and cfg.user_offsets != "mean"


def slopes(cfg) -> bool:
    """Whether a rating model's user offsets include slopes on the item statistics
    (``user_offsets="slopes"``, the default)."""
    return bias_refit(cfg) and cfg.user_offsets == "slopes"


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


def item_statistics(item_offsets, item_counts) -> np.ndarray | None:
    """f_i (m, 2) float64: the item offsets b̂_i and log(max(ñ_i, 1)), each standardised over
    the items (a constant column stays 0); None without both. Computed from a model's
    released arrays alone (post-processing): the same for training, evaluation and fold-in."""
    if item_offsets is None or item_counts is None:
        return None
    cols = [np.asarray(item_offsets, np.float64),
            np.log(np.maximum(np.asarray(item_counts, np.float64), 1.0))]
    out = []
    for c in cols:
        sd = float(c.std())
        out.append((c - c.mean()) / sd if sd > 1e-12 else np.zeros_like(c))
    return np.stack(out, 1)


@dataclasses.dataclass
class UserOffsets:
    """Each user's own part of a rating prediction, b_j + ⟨w_j, f_i⟩: ``bias`` b (n_users,)
    and ``slopes`` W (n_users, p) on the item statistics ``features`` f (m, p) (None: no
    slopes). Solved from each user's own ratings, never released."""

    bias: np.ndarray
    slopes: np.ndarray | None = None
    features: np.ndarray | None = None

    def per_rating(self, users, items) -> np.ndarray:
        """b_j + ⟨w_j, f_i⟩ for each (user, item) pair, float64."""
        users = np.asarray(users, np.int64)
        out = self.bias[users].astype(np.float64)
        if self.slopes is not None:
            out = out + np.einsum("np,np->n", self.slopes[users],
                                  self.features[np.asarray(items, np.int64)])
        return out


def fit_user_offsets(targets, users, items, n_users: int, bias_reg: float,
                     features=None, slope_reg: float | None = None) -> UserOffsets:
    """Per user, the ridge regression of ``targets`` on [1, f_i] over the user's ratings:
    b_j with ridge λ_b = ``bias_reg`` (no slopes: b_j = Σ y / (n_j + λ_b), :func:`user_biases`)
    and w_j with ridge ``slope_reg`` (default :data:`SLOPE_REG`). One (p+1)-system per user,
    assembled by bincounts."""
    slope_reg = SLOPE_REG if slope_reg is None else slope_reg
    users = np.asarray(users, np.int64)
    y = np.asarray(targets, np.float64)
    if features is None:
        return UserOffsets(user_biases(y, users, n_users, bias_reg))
    F = np.asarray(features, np.float64)
    X = np.concatenate([np.ones((len(users), 1)), F[np.asarray(items, np.int64)]], 1)
    q = X.shape[1]
    A = np.zeros((n_users, q, q))
    for a in range(q):
        for b in range(a, q):
            A[:, a, b] = A[:, b, a] = np.bincount(users, X[:, a] * X[:, b], n_users)
    rhs = np.stack([np.bincount(users, X[:, a] * y, n_users) for a in range(q)], 1)
    A += np.diag([float(bias_reg)] + [float(slope_reg)] * (q - 1))
    if bias_reg <= 0:                       # users without ratings: keep the systems regular
        A[:, 0, 0] += (np.bincount(users, minlength=n_users) == 0)
    sol = np.linalg.solve(A, rhs[..., None])[..., 0]
    return UserOffsets(sol[:, 0], sol[:, 1:], F)


def factor_scores(users, items, U, V) -> np.ndarray:
    """⟨u_j, v_i⟩ for each (user, item) pair, float64, in chunks."""
    users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
    U, V = np.asarray(U, np.float32), np.asarray(V, np.float32)
    scores = np.empty(len(users), np.float64)
    for a in range(0, len(users), _CHUNK):
        b = min(a + _CHUNK, len(users))
        scores[a:b] = np.einsum("nd,nd->n", U[users[a:b]], V[items[a:b]])
    return scores


def user_step_labels(values, offsets, users, items, n_users: int, cfg, features=None
                     ) -> tuple[np.ndarray, UserOffsets, np.ndarray]:
    """(y float32, the users' first :class:`UserOffsets`, residuals float64) of a rating
    model for the ratings ``values`` of (``users``, ``items``), ``offsets`` = μ̂ + b̂_i per
    rating: the labels the user step solves u_j from, each user's own offsets and r − μ̂ − b̂_i.
    One function for training, the evaluation and the fold-in.

    With ``user_offsets`` "refit" or "slopes" (the default) the user's offsets (b_j, and with
    "slopes" the slopes w_j on the item statistics ``features``) are fitted to the unclipped
    residuals — they are never released, so nothing needs bounding them — and y = clip(r − μ̂
    − b̂_i − b_j − ⟨w_j, f_i⟩, ±c); :func:`refit_user_offsets` refits them once u_j is solved.
    With "mean" (config version 3's model), b_j is the shrunk mean of the clipped labels,
    :func:`centre_by_user`, never refitted. Without ``user_bias``, nothing: y = clip(r − μ̂ − b̂_i, ±c)."""
    resid = np.asarray(values, np.float64) - offsets
    clip = cfg.label_clip
    if not cfg.rating_user_bias:
        return (np.clip(resid, -clip, clip).astype(np.float32),
                UserOffsets(np.zeros(n_users)), resid)
    if not bias_refit(cfg):
        y, b = centre_by_user(np.clip(resid, -clip, clip), users, n_users, cfg.user_bias_reg,
                              clip)
        return y, UserOffsets(b), resid
    off = fit_user_offsets(resid, users, items, n_users, cfg.user_bias_reg,
                           features if slopes(cfg) else None)
    y = np.clip(resid - off.per_rating(users, items), -clip, clip).astype(np.float32)
    return y, off, resid


def refit_user_offsets(resid, users, items, n_users: int, U, V, cfg, features=None
                       ) -> UserOffsets:
    """Each user's offsets refitted to the residual of their own factor prediction, r − μ̂ −
    b̂_i − ⟨u_j, v_i⟩ (``user_offsets`` "refit"/"slopes"): one step of block-coordinate descent on
    (u_j, b_j, w_j), which on ML-100K came within 0.001 test RMSE of solving (u_j, b_j)
    jointly (experiments/rating_sweep.py). ``U``: the users' embeddings, solved from the
    labels of :func:`user_step_labels`; ``V`` the released item embeddings. Reads user j's
    own ratings and released values only; never released (joint DP, like u_j)."""
    target = np.asarray(resid, np.float64) - factor_scores(users, items, U, V)
    return fit_user_offsets(target, users, items, n_users, cfg.user_bias_reg,
                            features if slopes(cfg) else None)
