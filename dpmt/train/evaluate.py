"""Evaluation of a model and of the popularity baselines on held-out data.

The evaluated users are folded in from their history with the model's own fold-in
(:meth:`dpmt.model.Model.user_embeddings`, the exact user solve against the released V), every
item is ranked with the history excluded, and Recall/NDCG@k are computed overall and per
popularity bucket (:func:`dpmt.metrics.ranking_metrics`). The buckets are 5 equal-size
groups of items by *exact training* counts: read here, for the report only — never by
training.

Baselines:

* :func:`popularity_metrics` — score = exact training count. Not private (ε = ∞).
* :func:`private_popularity_metrics` — score = the *released* noisy counts n̂_i of the run:
  post-processing of a release already charged, so it costs nothing more. A private model
  worth deploying should beat it.
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.baselines import ease_score_fn, ease_weights
from dpmt.data.stats import popularity_buckets
from dpmt.labels import bias_refit, refit_user_offsets, user_step_labels
from dpmt.metrics import item_score_fn, ranking_metrics, rmse
from dpmt.privacy.ledger import PRIVACY_UNIT
from dpmt.registry import TASKS

KS = (10, 20, 50)


def _buckets(train, counts=None):
    counts = train.item_counts() if counts is None else np.asarray(counts)
    return popularity_buckets(counts, min(5, max(1, train.n_items))), counts


def evaluate(model, train, eval_set, ks=KS, item_counts=None) -> dict:
    """Metrics of ``model`` on ``eval_set`` (an :class:`~dpmt.data.splits.EvalSet` in the
    index space of ``train``), with the privacy summary. ``item_counts``: the exact training
    counts that define the popularity buckets (default: ``train``'s; sharded data: summed
    over the processes)."""

    buckets, counts = _buckets(train, item_counts)
    U = model.user_embeddings(eval_set.history)
    m = ranking_metrics(U, model.item_embeddings, eval_set.history, eval_set.targets, ks=ks,
                        item_buckets=buckets, item_counts=counts,
                        item_prior=model.item_prior())
    m["privacy"] = model.privacy_summary()
    return m


def _score_metrics(scores: np.ndarray, train, eval_set, ks) -> dict:
    buckets, counts = _buckets(train)
    return ranking_metrics(None, None, eval_set.history, eval_set.targets, ks=ks,
                           item_buckets=buckets, score_fn=item_score_fn(scores),
                           item_counts=counts)


def ease_metrics(train, eval_set, reg: float, ks=KS, gram=None, weights=None) -> dict:
    """The EASE baseline (:mod:`dpmt.baselines`; exact, not private) at ridge ``reg``
    (``gram``: :func:`~dpmt.baselines.ease_gram` of ``train``, for a grid of λ;
    ``weights``: :func:`~dpmt.baselines.ease_weights` at ``reg`` when already computed)."""

    buckets, counts = _buckets(train)
    B = ease_weights(train, reg, gram) if weights is None else weights
    fn = ease_score_fn(B, eval_set.history)
    m = ranking_metrics(None, None, eval_set.history, eval_set.targets, ks=ks,
                        item_buckets=buckets, score_fn=fn, item_counts=counts)
    m["privacy"] = {"epsilon": math.inf, "delta": 0.0, "private": False,
                    "privacy_unit": PRIVACY_UNIT}
    return m


def popularity_metrics(train, eval_set, ks=KS) -> dict:
    """The popularity baseline (score = exact training count; not private)."""
    m = _score_metrics(train.item_counts(), train, eval_set, ks)
    m["privacy"] = {"epsilon": math.inf, "delta": 0.0, "private": False,
                    "privacy_unit": PRIVACY_UNIT}
    return m


def private_popularity_metrics(noisy_counts: np.ndarray, train, eval_set, privacy: dict,
                               ks=KS) -> dict:
    """Popularity from the run's *released* noisy counts (free post-processing; same ε as
    the run that released them, given in ``privacy``)."""
    m = _score_metrics(noisy_counts, train, eval_set, ks)
    m["privacy"] = dict(privacy)
    return m


def evaluate_ratings(model, train, eval_set) -> dict:
    """RMSE of a rating model on ``eval_set.targets`` (overall and per popularity bucket of
    the training counts): each evaluated user folded in from their training ratings
    (``eval_set.history``) with the labels training used, y = clip(r − μ̂ − b̂_i, ±c) less
    the user's own offsets b_j + ⟨w_j, f_i⟩ (refitted to the residual of u with
    ``user_offsets``: :mod:`dpmt.labels`); predictions μ̂ + b̂_i + b_j + ⟨w_j, f_i⟩ +
    ⟨u, v_i⟩ clipped to the rating range."""

    cfg, scorer = model.config, model.scorer
    buckets, counts = _buckets(train)
    hist = eval_set.history
    # each user's own offsets, from their history only (dpmt.labels.user_step_labels)
    feats = scorer.user_features()
    labels, off, resid = user_step_labels(hist.value, scorer.offsets(hist.item), hist.user,
                                          hist.item, hist.n_users, cfg, feats)
    U = scorer.user_embeddings(hist, labels=labels)
    if bias_refit(cfg):          # refitted to the residual of u_j, as in training
        off = refit_user_offsets(resid, hist.user, hist.item, hist.n_users, U,
                                 model.item_embeddings, cfg, feats)
    tg = eval_set.targets
    m = rmse(U, model.item_embeddings, tg,
             offset=scorer.offsets(tg.item) + off.per_rating(tg.user, tg.item),
             item_buckets=buckets, clip=cfg.data.rating_bounds)
    _bucket_ranges(m, buckets, counts)
    m["privacy"] = model.privacy_summary()
    return m


def mean_rating_metrics(offset, train, eval_set, privacy: dict) -> dict:
    """A mean baseline: every rating of item i predicted as ``offset`` (a scalar: the global
    mean; or (m,) per item: global mean + item offsets). The run's released values are free
    post-processing (same ε); exact means are not private."""

    buckets, counts = _buckets(train)
    tg = eval_set.targets
    off = np.asarray(offset, np.float64)
    per_rating = off[tg.item] if off.ndim == 1 else float(off)
    zeros = np.zeros((tg.n_users, 1), np.float32)
    m = rmse(zeros, np.zeros((train.n_items, 1), np.float32), tg, offset=per_rating,
             item_buckets=buckets)
    _bucket_ranges(m, buckets, counts)
    m["privacy"] = dict(privacy)
    return m


def _bucket_ranges(m: dict, buckets, counts) -> None:
    for b, e in enumerate(m["buckets"]):
        c = np.asarray(counts)[buckets == b]
        if c.size:
            e["min_count"], e["max_count"] = int(c.min()), int(c.max())


def released_baselines(model, train, eval_set):
    """(name, metrics) of the baselines that are free post-processing of a private model's
    own releases (same ε): private popularity from its counts; for a rating model its private
    global mean and item offsets."""
    privacy = model.privacy_summary()
    if TASKS[model.config.task].labelled:
        yield "private global mean", mean_rating_metrics(model.label_offset, train, eval_set,
                                                         privacy)
        if model.item_offsets is not None:
            yield "private item offsets", mean_rating_metrics(
                model.scorer.offsets(np.arange(model.n_items)), train, eval_set, privacy)
    elif model.item_counts is not None:
        yield "private popularity", private_popularity_metrics(model.item_counts, train,
                                                               eval_set, privacy)


def combine_over_processes(metrics: dict, aggregate) -> dict:
    """The metrics of every process's evaluation users together (sharded data): each group's
    (overall, bucket) means weighted by its ``users``, summed over the processes with
    ``aggregate`` (:func:`dpmt.solvers.collectives.process_sum`); the buckets must be the
    same on every process (:func:`evaluate`'s ``item_counts`` summed first)."""
    groups = [metrics["overall"], *metrics.get("buckets", [])]
    names = sorted(k for k in groups[0] if k.startswith(("recall@", "ndcg@")))
    users = np.array([g["users"] for g in groups], np.int64)
    sums = np.array([[0.0 if not g["users"] else g[k] * g["users"] for k in names]
                     for g in groups], np.float64)
    users = np.asarray(aggregate(users), np.int64)
    # float32 across processes (the exchange's dtype): means of ≤ 1 values, ample here
    sums = np.asarray(aggregate(sums.astype(np.float32)), np.float64)
    out = dict(metrics)
    new = []
    for g, n, row in zip(groups, users, sums):
        g = dict(g, users=int(n))
        g.update({k: (float(v / n) if n else math.nan) for k, v in zip(names, row)})
        new.append(g)
    out["overall"], out["buckets"] = new[0], new[1:]
    return out
