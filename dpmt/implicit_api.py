"""The calls an ``implicit`` user makes, on a :class:`dpmt.model.Model` (beside dpmt's own).

=====================================================  ==============================================
implicit (``AlternatingLeastSquares``, 0.7)             dpmt
=====================================================  ==============================================
``model.fit(user_items)`` (CSR users × items)           ``model = dpmt.fit(user_items, TrainConfig(...))``
``model.recommend(userid, user_items[userid], N=10,``   the same call: ``userid`` one row or an array
``filter_already_liked_items=True, filter_items=,``     of rows, ``user_items`` their CSR rows (or the
``items=, recalculate_user=False)``                     whole matrix); every user is folded in from
                                                        their row (``recalculate_user`` is always True:
                                                        dpmt keeps no user factors)
``model.similar_items(itemid, N=10, filter_items=,``    the same call (cosine of the released item
``items=)``                                             factors); ``itemid`` one id or an array
``model.item_factors``                                  ``model.item_factors`` (= ``item_embeddings``)
``model.user_factors``                                  ``None``: user embeddings are solved on the
                                                        user's side and never released (joint DP)
``model.partial_fit_users(userids, user_items)``        not needed: a new user is folded in from their
                                                        row at ``recommend`` time, nothing retrained;
                                                        new *items* need a new (private) training run
``model.save(path)`` / ``implicit.cpu.als.load(...)``    ``model.save(path)`` / ``dpmt.Model.load(path)``
=====================================================  ==============================================

Ids: a model trained on a matrix has the column indices as its item ids, so ids in and out
are column indices, as in implicit. For an implicit-feedback model the stored values of a row
are events (label 1, as in training); for a rating model they are the user's ratings.
"""

from __future__ import annotations

import numpy as np

from dpmt.errors import ConfigError, DataError
from dpmt.ranking import check_count, top_k


def _rows_of(model, userid, user_items):
    """(scalar?, the users' histories as raw ids, their values) from implicit's arguments."""
    import scipy.sparse as sp

    if not sp.issparse(user_items):
        raise DataError("user_items must be a scipy.sparse matrix of the users' interactions "
                        f"(got {type(user_items).__name__}), e.g. user_items[userid]")
    ui = sp.csr_matrix(user_items)
    scalar = np.ndim(userid) == 0
    ids = np.atleast_1d(np.asarray(userid))
    if ids.dtype.kind not in "iu":
        raise DataError(f"userid must be a row index or an array of them (got {userid!r})")
    if ui.shape[0] != len(ids):                  # the whole matrix: take the users' rows
        if ids.min(initial=0) < 0 or ids.max(initial=-1) >= ui.shape[0]:
            raise DataError(f"userid outside the {ui.shape[0]} rows of user_items")
        ui = ui[ids]
    if ui.shape[1] > model.n_items:
        raise DataError(f"user_items has {ui.shape[1]} columns, the model {model.n_items} "
                        "items")
    hist, vals = [], []
    for r in range(ui.shape[0]):
        lo, hi = ui.indptr[r], ui.indptr[r + 1]
        hist.append(model.item_ids[ui.indices[lo:hi]])
        vals.append(np.asarray(ui.data[lo:hi], np.float64))
    return scalar, hist, vals


def recommend(model, userid, user_items, N: int = 10, *, filter_already_liked_items=True,
              filter_items=None, items=None, recalculate_user=True):
    """implicit's ``recommend`` (see the module docstring): ``(ids, scores)``, shapes (N,)
    for one user, (n, N) for an array of users; rows with fewer candidates than N are padded
    with id −1 and score −inf (implicit pads likewise)."""
    N = check_count(N, "N")
    if not recalculate_user:
        raise ConfigError("recalculate_user=False reads stored user factors, and dpmt stores "
                          "none (user embeddings are never released): every user is folded "
                          "in from their row of user_items")
    scalar, hist, vals = _rows_of(model, userid, user_items)
    scorer = model.scorer
    U = model.fold_in_batch(hist, vals if scorer.labelled else None)
    scores = scorer.scores(U, prior=scorer.prior())
    if filter_already_liked_items:
        for r, h in enumerate(hist):
            if len(h):
                scores[r, model.item_index(h)] = -np.inf
    if filter_items is not None:
        scores[:, model.item_index(np.atleast_1d(filter_items))] = -np.inf
    if items is not None:
        keep = np.zeros(model.n_items, bool)
        keep[model.item_index(np.atleast_1d(items))] = True
        scores[:, ~keep] = -np.inf
    top = top_k(scores, min(N, model.n_items))
    out_scores = np.take_along_axis(scores, top, axis=1).astype(np.float32)
    out_ids = np.where(np.isfinite(out_scores), model.item_ids[top], -1) \
        if model.item_ids.dtype.kind in "iu" else model.item_ids[top]
    return (out_ids[0], out_scores[0]) if scalar else (out_ids, out_scores)


def similar_items(model, itemid, N: int = 10, *, filter_items=None, items=None):
    """implicit's ``similar_items``: ``(ids, cosines)`` of the N items closest to ``itemid``
    (the item itself first unless filtered), (N,) for one id, (n, N) for an array."""
    N = check_count(N, "N")
    scalar = np.ndim(itemid) == 0
    rows = model.item_index(np.atleast_1d(itemid))
    V = model.item_embeddings.astype(np.float64)
    norms = np.linalg.norm(V, axis=1)
    sims = (V[rows] @ V.T) / np.maximum(norms[rows, None] * norms[None, :], 1e-30)
    sims[np.arange(len(rows)), rows] = np.inf        # itself first, whatever the round-off
    if filter_items is not None:
        sims[:, model.item_index(np.atleast_1d(filter_items))] = -np.inf
    if items is not None:
        keep = np.zeros(model.n_items, bool)
        keep[model.item_index(np.atleast_1d(items))] = True
        sims[:, ~keep] = -np.inf
    top = top_k(sims, min(N, model.n_items))
    out = np.take_along_axis(sims, top, axis=1)
    out = np.where(np.isposinf(out), np.where(norms[rows] > 0, 1.0, 0.0)[:, None], out)
    out = out.astype(np.float32)
    ids = model.item_ids[top]
    return (ids[0], out[0]) if scalar else (ids, out)
