"""Evaluation metrics: Recall@k, NDCG@k, RMSE — overall and per item-popularity bucket.

Definitions (the protocol of Krichene et al. 2023, §5; Liang et al. 2018 for Recall):

* For an evaluation user ``u`` with history ``H_u`` and targets ``P_u`` (targets that are also
  in the history are dropped: they cannot be recommended), items are ranked by score with the
  history excluded; ties are broken by the lower item index (``jax.lax.top_k``'s order).
* ``Recall@k = |top-k ∩ P_u| / min(k, |P_u|)``.
* ``NDCG@k = DCG@k / IDCG@k`` with binary relevance, ``DCG@k = Σ_{r<k} rel_r / log2(r + 2)``
  and the ideal DCG over ``min(k, |P_u|)`` relevant items.
* Averages are over users with ``|P_u| ≥ 1``.
* Popularity buckets (:func:`dpmt.data.stats.popularity_buckets`): items sorted by *training* count (ties by
  index), split into 5 equal-size buckets (sizes differ by at most one), least popular first.
  A sliced metric for bucket ``b`` ranks only bucket ``b``'s items, uses only targets in
  ``b``, and averages over users with at least one target in ``b``.
* ``RMSE = sqrt(mean((⟨u_j, v_i⟩ + offset − r_ij)²))``; per bucket over the ratings of the
  bucket's items.

Ranking is vectorised: per batch of users one ``(B, m)`` score matrix (``U_b Vᵀ`` or any score
function, e.g. the popularity baseline), history masked to −inf by a scatter, and one
``jax.lax.top_k`` per slice; no Python loop over users.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.errors import ConfigError, DataError, check_range

_HI = jax.lax.Precision.HIGHEST
ScoreFn = Callable[[jax.Array], jax.Array]


# -- popularity -------------------------------------------------------------------------------
def popularity_scores(train) -> np.ndarray:
    """The popularity baseline's score of every item: its training count, float32 (m,)."""
    return train.item_counts().astype(np.float32)


def popularity_score_fn(train) -> ScoreFn:
    """Score function ``users (B,) -> (B, m)`` of the popularity baseline."""
    return item_score_fn(popularity_scores(train))


def item_score_fn(scores) -> ScoreFn:
    """Score function ``users (B,) -> (B, m)`` that ranks every user by one item score
    vector (popularity from exact or released counts). One module-level jitted kernel, so a
    new score vector does not compile again."""
    s = jnp.asarray(np.asarray(scores, np.float32))
    return lambda users: _broadcast_scores(s, users)


@jax.jit
def _broadcast_scores(scores, users):
    return jnp.broadcast_to(scores, (users.shape[0], scores.shape[0]))


@jax.jit
def _dot_scores(U, V, rows):
    return jnp.matmul(U[rows], V.T, precision=_HI)


@jax.jit
def _prior_scores(U, V, prior, rows):
    """⟨u, v_i⟩ + ‖u‖·π_i (:meth:`dpmt.model.Model.item_prior`)."""
    Ub = U[rows]
    return (jnp.matmul(Ub, V.T, precision=_HI)
            + jnp.linalg.norm(Ub, axis=1, keepdims=True) * prior[None, :])


# -- padded per-user item lists -------------------------------------------------------------------
def _list_width(r, users: np.ndarray) -> int:
    """Padded list width for ``users``: their longest list, rounded up to a power of two."""
    lens = r.by_user.lengths[users]
    width = max(1, int(lens.max()) if len(lens) else 1)
    return 1 << (width - 1).bit_length()


def _user_lists(r, users: np.ndarray, width: int | None = None, rows: int | None = None):
    """Padded item lists of ``users`` in ratings ``r``: int32 (rows, width), pad = -1 (also
    the extra rows beyond ``len(users)`` when ``rows`` is given). Built per batch of users:
    for all users at once the (n, width) index arrays are O(n · max list length) — 20 GB at
    ML-20M scale."""
    csr = r.by_user
    lens = csr.lengths[users]
    if width is None:
        width = _list_width(r, users)
    if rows is not None and rows > len(users):
        users = np.concatenate([users, np.zeros(rows - len(users), users.dtype)])
        lens = np.concatenate([lens, np.zeros(rows - len(lens), lens.dtype)])
    slot = np.arange(width)[None, :]
    valid = slot < lens[:, None]
    src = np.where(valid, csr.indptr[users][:, None] + slot, 0)
    items = np.where(valid, csr.indices[src] if len(csr.indices) else 0, -1)
    return items.astype(np.int32)


def _targets_minus_history(history, targets, n_items):
    """Targets with (user, item) pairs in the history removed (as a new Ratings)."""
    hk = history.user.astype(np.int64) * n_items + history.item
    tk = targets.user.astype(np.int64) * n_items + targets.item
    hk = np.sort(hk)                       # sorted search: np.isin's hashing is slow here
    at = np.minimum(np.searchsorted(hk, tk), max(len(hk) - 1, 0))
    keep = ~(hk[at] == tk) if len(hk) else np.ones(len(tk), bool)
    # duplicates in targets count once
    _, first = np.unique(tk, return_index=True)
    uniq = np.zeros(len(tk), bool)
    uniq[first] = True
    return targets.select(keep & uniq)


@functools.partial(jax.jit, static_argnames=("ks", "n_buckets"))
def _batch_metrics(scores, hist, tgt, item_bucket, *, ks, n_buckets):
    """Per-user metrics of one batch.

    scores (B, m) float; hist (B, Lh) int32 (-1 pad); tgt (B, Lt) int32 (-1 pad);
    item_bucket (m,) int32. Returns recall, ndcg (B, 1 + n_buckets, len(ks)) and n_rel
    (B, 1 + n_buckets).
    """
    B, m = scores.shape
    b_idx = jnp.arange(B)[:, None]
    s = jnp.asarray(scores, jnp.float32)
    # history -> -inf (pad entries -1 mapped out of range and dropped)
    s = s.at[b_idx, jnp.where(hist >= 0, hist, m)].set(-jnp.inf, mode="drop")
    rel = jnp.zeros((B, m), jnp.bool_).at[b_idx, jnp.where(tgt >= 0, tgt, m)].set(
        True, mode="drop")
    kmax = min(max(ks), m)
    disc = 1.0 / jnp.log2(jnp.arange(kmax, dtype=jnp.float32) + 2.0)
    cdisc = jnp.concatenate([jnp.zeros(1), jnp.cumsum(disc)])          # IDCG by count

    def one_slice(sl):
        # slice 0: every item; slice b + 1: bucket b's items only
        in_b = ((sl == 0) | (item_bucket == sl - 1))[None, :]
        s_sl = jnp.where(in_b, s, -jnp.inf)
        rel_sl = rel & in_b
        vals, idx = jax.lax.top_k(s_sl, kmax)
        hit = jnp.take_along_axis(rel_sl, idx, axis=1) & (vals > -jnp.inf)
        n_rel = rel_sl.sum(axis=1)
        r_k, n_k = [], []
        for k in ks:
            kk = min(k, kmax)
            hits = hit[:, :kk].sum(axis=1)
            denom = jnp.minimum(k, n_rel)
            r_k.append(jnp.where(n_rel > 0, hits / jnp.maximum(denom, 1), 0.0))
            dcg = (hit[:, :kk] * disc[:kk]).sum(axis=1)
            idcg = cdisc[jnp.minimum(denom, kmax)]
            n_k.append(jnp.where(n_rel > 0, dcg / jnp.maximum(idcg, 1e-12), 0.0))
        return jnp.stack(r_k, -1), jnp.stack(n_k, -1), n_rel

    # one loop body for the 1 + n_buckets slices (lax.map, in turn: one (B, m) top-k live at
    # a time), not one unrolled copy each: the kernel compiles ~n_buckets times faster
    if not n_buckets:
        recall, ndcg, n_rel = one_slice(0)
        return recall[:, None], ndcg[:, None], n_rel[:, None]
    recall, ndcg, n_rel = jax.lax.map(one_slice, jnp.arange(1 + n_buckets))
    return recall.transpose(1, 0, 2), ndcg.transpose(1, 0, 2), n_rel.T


def ranking_metrics(U_eval: jax.Array | None, V: jax.Array | None, history, targets,
                    ks: Sequence[int] = (10, 20, 50), item_buckets: np.ndarray | None = None,
                    eval_users: np.ndarray | None = None, *, score_fn: ScoreFn | None = None,
                    batch_size: int = 256, item_counts: np.ndarray | None = None,
                    item_prior: np.ndarray | None = None) -> dict:
    """Recall@k and NDCG@k, overall and per popularity bucket.

    Args:
      U_eval: float (n_eval, d) embeddings of the evaluated users (row ``r`` ↔
        ``eval_users[r]``), or (n_users, d) indexed by dense user id when ``eval_users`` is
        None. None when ``score_fn`` is given.
      V: float (m, d) item embeddings (None with ``score_fn``).
      history: :class:`~dpmt.data.ratings.Ratings` excluded from ranking (training ratings,
        or the held-out users' fold-in history).
      targets: Ratings of the relevant items ``P_u`` (values ignored).
      ks: cut-offs.
      item_buckets: int (m,) bucket id per item (from :func:`dpmt.data.stats.popularity_buckets` on the
        *training* counts), or None for overall metrics only.
      eval_users: int (n_eval,) dense ids of the users to evaluate; None = all users. Users
        without targets are skipped either way.
      score_fn: alternative to embeddings: ``users (B,) int32 -> scores (B, m)`` (e.g.
        :func:`popularity_score_fn`).
      batch_size: users per score matrix.
      item_counts: optional (m,) training counts, to report each bucket's count range.
      item_prior: optional (m,) popularity prior π: scores ⟨u, v_i⟩ + ‖u‖·π_i (with
        embeddings only).

    Returns:
      ``{"overall": {"recall@k": float, "ndcg@k": float, ..., "users": int},
      "buckets": [{...same keys..., "items": int}, ...]}`` (buckets least popular first;
      NaN where a bucket has no evaluable user).
    """
    ks = tuple(int(k) for k in ks)
    for k in ks:
        check_range("k", k, low=1, integer=True)
    if (score_fn is None) == (U_eval is None or V is None):
        raise ConfigError("pass either embeddings (U_eval, V) or score_fn, not both")
    m = history.n_items
    if targets.n_items != m:
        raise DataError("history and targets must share the item index space")
    if V is not None and V.shape[0] != m:
        raise DataError(f"V has {V.shape[0]} rows but the data has {m} items")
    n_buckets = 0
    if item_buckets is not None:
        item_buckets = np.asarray(item_buckets, np.int32)
        if item_buckets.shape != (m,):
            raise DataError(f"item_buckets must have shape ({m},)")
        n_buckets = int(item_buckets.max()) + 1
    if eval_users is None:
        eval_users = np.arange(targets.n_users)
        rows = eval_users
    else:
        eval_users = np.asarray(eval_users, np.int64)
        rows = np.arange(len(eval_users))
    if U_eval is not None and np.shape(U_eval)[0] != (len(rows) if rows is not eval_users
                                                     else targets.n_users):
        raise DataError(f"U_eval has {np.shape(U_eval)[0]} rows; expected one per "
                        f"{'eval_users entry' if rows is not eval_users else 'user'}")
    tgt = _targets_minus_history(history, targets, m)
    has = tgt.user_counts()[eval_users] > 0
    eval_users, rows = eval_users[has], rows[has]
    n_eval = len(eval_users)
    sums = np.zeros((1 + n_buckets, len(ks), 2))
    counts = np.zeros(1 + n_buckets, np.int64)
    if n_eval:
        # one width for all batches (one compiled shape); lists built batch by batch
        w_hist, w_tgt = _list_width(history, eval_users), _list_width(tgt, eval_users)
        B = max(1, min(batch_size, n_eval))
        n_batches = -(-n_eval // B)
        pad = n_batches * B - n_eval
        padn = lambda a, fill: np.concatenate([a, np.full((pad,) + a.shape[1:], fill, a.dtype)])
        users_p = padn(eval_users.astype(np.int32), eval_users[0])
        rows_p = padn(rows.astype(np.int32), rows[0])
        bucket_arr = jnp.asarray(item_buckets if item_buckets is not None
                                 else np.zeros(m, np.int32))
        if score_fn is None:
            U_eval = jnp.asarray(U_eval, jnp.float32)
            V = jnp.asarray(V, jnp.float32)
            if item_prior is not None:
                item_prior = jnp.asarray(np.asarray(item_prior, np.float32))
        for t in range(n_batches):
            sl = slice(t * B, (t + 1) * B)
            if score_fn is None and item_prior is not None:
                scores = _prior_scores(U_eval, V, item_prior, jnp.asarray(rows_p[sl]))
            elif score_fn is None:
                scores = _dot_scores(U_eval, V, jnp.asarray(rows_p[sl]))
            else:
                scores = score_fn(jnp.asarray(users_p[sl]))
            real = eval_users[sl]                         # pad users: no history, no targets
            hist_b = _user_lists(history, real, w_hist, rows=B)
            tgt_b = _user_lists(tgt, real, w_tgt, rows=B)
            rec, ndcg, nrel = _batch_metrics(scores, jnp.asarray(hist_b), jnp.asarray(tgt_b),
                                             bucket_arr, ks=ks, n_buckets=n_buckets)
            rec, ndcg, nrel = (np.asarray(x, np.float64) for x in (rec, ndcg, nrel))
            sums[..., 0] += rec.sum(0)
            sums[..., 1] += ndcg.sum(0)
            counts += (nrel > 0).sum(0)

    def entry(sl):
        out = {}
        for ki, k in enumerate(ks):
            c = counts[sl]
            out[f"recall@{k}"] = float(sums[sl, ki, 0] / c) if c else float("nan")
            out[f"ndcg@{k}"] = float(sums[sl, ki, 1] / c) if c else float("nan")
        out["users"] = int(counts[sl])
        return out

    result = {"overall": entry(0), "buckets": []}
    result["overall"]["items"] = int(m)
    result["overall"].update(random_level(ks, m))
    for b in range(n_buckets):
        e = entry(1 + b)
        sel = item_buckets == b
        e["items"] = int(sel.sum())
        e.update(random_level(ks, e["items"]))
        if item_counts is not None:
            c = np.asarray(item_counts)[sel]
            e["min_count"], e["max_count"] = int(c.min()), int(c.max())
        result["buckets"].append(e)
    return result


def random_level(ks: Sequence[int], n_items: int) -> dict:
    """Expected Recall@k of a uniformly random ranking of ``n_items`` candidates, for users
    with at most k targets: k / n_items (capped at 1). A sliced bucket ranks only its own
    items, so its random level is k/|bucket|, far above k/m (≈ 0.06 for Recall@20 on
    ML-100K's buckets of ~330 items). Returns ``{"random_recall@k": float}``."""
    return {f"random_recall@{k}": float(min(1.0, k / max(1, n_items))) for k in ks}


def format_rmse(metrics: dict) -> list[str]:
    """Text lines of an RMSE result (:func:`rmse`), buckets numbered from the tail."""
    o = metrics["overall"]
    lines = [f"RMSE: {o['rmse']:.4f} over {o['count']} test ratings"]
    buckets = metrics.get("buckets") or []
    if buckets:
        lines.append("RMSE by item popularity bucket (B1 = tail):")
        for b, e in enumerate(buckets):
            rng = (f", {e['min_count']}–{e['max_count']} training ratings"
                   if "min_count" in e else "")
            lines.append(f"  B{b + 1}: {e['rmse']:.4f}  [{e['count']} ratings{rng}]")
    return lines


def format_metrics(metrics: dict, k: int = 20) -> list[str]:
    """Text lines of :func:`ranking_metrics`' result: overall Recall/NDCG, then Recall@k per
    popularity bucket (numbered from the tail, B1 = least popular) with each bucket's
    training-count range and its random level."""
    o = metrics["overall"]
    lines = ["overall: " + ", ".join(f"{name}={v:.4f}" for name, v in o.items()
                                     if name.startswith(("recall", "ndcg")))
             + (f" (random: {o[f'random_recall@{k}']:.4f})" if f"random_recall@{k}" in o
                else "")]
    buckets = metrics.get("buckets") or []
    if buckets:
        lines.append(f"Recall@{k} by popularity bucket (B1 = tail; each bucket ranks only its "
                     "own items):")
        for b, e in enumerate(buckets):
            rng = (f", {e['min_count']}–{e['max_count']} training ratings"
                   if "min_count" in e else "")
            rnd = e.get(f"random_recall@{k}")
            lines.append(f"  B{b + 1}{' (tail)' if b == 0 else ' (head)' if b == len(buckets) - 1 else ''}"
                         f": {e[f'recall@{k}']:.4f}  [{e['items']} items{rng}"
                         + (f"; random {rnd:.4f}" if rnd is not None else "") + "]")
    return lines


# -- RMSE -------------------------------------------------------------------------------------------
@jax.jit
def _sq_errors(U, V, user, item, value, offset, lo, hi):
    pred = jnp.einsum("nd,nd->n", U[user], V[item], precision=_HI) + offset
    pred = jnp.clip(pred, lo, hi)
    return jnp.square(pred - value)


def rmse(U: jax.Array, V: jax.Array, ratings, offset=0.0, item_buckets: np.ndarray | None = None,
         clip: tuple[float, float] | None = None, chunk: int = 65536) -> dict:
    """RMSE of ``⟨u_j, v_i⟩ + offset`` (optionally clipped to ``clip``) against the ratings.

    Args:
      U: float (n_users, d) by dense user id; V: float (n_items, d).
      ratings: the evaluated :class:`~dpmt.data.ratings.Ratings`.
      offset: scalar (e.g. the private global mean) or float (nnz,) per rating.
      item_buckets: int (m,) popularity bucket per item, or None.
      clip: optional (low, high) range for predictions.
      chunk: ratings per jitted batch (fixed shape: one compile).

    Returns:
      ``{"overall": {"rmse": float, "count": int}, "buckets": [{"rmse", "count"}, ...]}``.
    """
    nnz = ratings.nnz
    off = np.broadcast_to(np.asarray(offset, np.float32), (nnz,))
    lo, hi = (-np.inf, np.inf) if clip is None else clip
    U = jnp.asarray(U, jnp.float32)
    V = jnp.asarray(V, jnp.float32)
    sq = np.zeros(nnz, np.float64)
    C = max(1, min(chunk, nnz))
    for s in range(0, nnz, C):
        e = min(s + C, nnz)
        padn = lambda a: np.concatenate([a[s:e], np.zeros(C - (e - s), a.dtype)])
        out = _sq_errors(U, V, jnp.asarray(padn(ratings.user)), jnp.asarray(padn(ratings.item)),
                         jnp.asarray(padn(ratings.value)), jnp.asarray(padn(off)),
                         jnp.float32(lo), jnp.float32(hi))
        sq[s:e] = np.asarray(out)[: e - s]
    res = {"overall": {"rmse": float(np.sqrt(sq.mean())) if nnz else float("nan"),
                       "count": int(nnz)}, "buckets": []}
    if item_buckets is not None:
        item_buckets = np.asarray(item_buckets)
        bid = item_buckets[ratings.item]
        for b in range(int(item_buckets.max()) + 1):
            sel = bid == b
            c = int(sel.sum())
            res["buckets"].append({"rmse": float(np.sqrt(sq[sel].mean())) if c else float("nan"),
                                   "count": c})
    return res
