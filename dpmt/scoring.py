"""The scorer of a :class:`dpmt.model.Model`: users folded in against the released item
embeddings V, their scores, the popularity prior, the top k; a rating model's predictions.

**Fold-in.** A user's embedding is solved from *their own* history H (dense rows, labels
y_i) against the released V (λ = ``reg``, α0 = ``gravity``, C = ``user_clip``; ``fold_in_reg``
/ ``fold_in_gravity`` in their place when set, e.g. by ``fold_in="private"``)::

    u = (Σ_{i∈H} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_{i∈H} y_i v_i,   clipped to ‖u‖ ≤ C

— :func:`dpmt.solvers.user_step.solve_users`, the one user solve training and the evaluation
use, so a recommendation reproduces the ranking the evaluation scores. What user j gets
depends on others' data only through V (joint DP); u is computed, never stored or released.

**Scores** s_i(u) = ⟨u, v_i⟩ + ‖u‖·π_i, with the popularity prior π_i = η·ρ_V·p_i where
p = log(1 + max(n̂, 0)) of the released counts standardised over items (mean 0, std 1) and
ρ_V = (mean_i ‖v_i‖²)^½ (no prior: π = 0). The top k ranks them, ties to the lower row
(:func:`dpmt.ranking.top_k`); an empty history ranks by the released counts n̂.

Which scorer a model has is its task's registry entry (:data:`dpmt.registry.TASKS`):

* :class:`ImplicitScorer` (an entry without ``labelled``): labels y_i = 1, or the values
  given.
* :class:`RatingScorer` (``labelled``): the labels training used,
  y_i = clip(r_i − μ̂ − b̂_i, ±c) less the user's own bias b_j (:mod:`dpmt.labels`), and
  predictions r̂_i = clip(μ̂ + b̂_i + b_j + ⟨u, v_i⟩, [lo, hi]) (``rating_bounds``).

The prior applies where the entry ranks (its ``ranking`` capability, η > 0, released
counts: :attr:`dpmt.config.TrainConfig.uses_popularity_prior`). Everything here is
post-processing of released values: no privacy cost.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from dpmt.config import TrainConfig
from dpmt.data.ratings import Ratings
from dpmt.errors import DataError
from dpmt.labels import (bias_refit, item_statistics, refit_user_offsets, slopes,
                         user_step_labels)
from dpmt.ranking import top_k
from dpmt.registry import TASKS
from dpmt.solvers.layout import user_layout
from dpmt.solvers.user_step import solve_users


def released_embeddings(item_embeddings) -> np.ndarray:
    """The released V as float32 (m, d), refused unless non-empty and finite."""
    V = np.asarray(item_embeddings, np.float32)
    if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1:
        raise DataError(f"item_embeddings must be a non-empty (m, d) array "
                        f"(got shape {V.shape})")
    if not np.all(np.isfinite(V)):
        raise DataError("item_embeddings contain NaN or infinite values")
    return V


class Scorer:
    """Scores of users folded in against ``item_embeddings`` V (m, d) float32 with the
    fold-in parameters of ``config``; ``item_counts``: the released counts n̂ (or None)."""

    labelled = False      # the labels are ratings (RatingScorer)

    def __init__(self, item_embeddings: np.ndarray, config: TrainConfig,
                 item_counts: np.ndarray | None = None):
        self.item_embeddings, self.config, self.item_counts = (item_embeddings, config,
                                                              item_counts)

    @property
    def n_items(self) -> int:
        return int(self.item_embeddings.shape[0])

    @property
    def dim(self) -> int:
        return int(self.item_embeddings.shape[1])

    def labels(self, rows: np.ndarray, values: np.ndarray | None) -> np.ndarray:
        """The labels y (float32) of one user's history ``rows`` with their ``values``
        (float64, or None)."""
        raise NotImplementedError

    # -- fold-in ------------------------------------------------------------------------
    def user_embeddings(self, ratings, labels=None) -> np.ndarray:
        """U (n_users, d) float32: every user of ``ratings`` (item indices = rows of V)
        folded in; ``labels`` y per rating (default 1; the ratings' values are not read)."""
        if ratings.n_items != self.n_items:
            raise DataError(f"the ratings index {ratings.n_items} items; this model has "
                            f"{self.n_items}")
        cfg = self.config
        if labels is not None:
            labels = jnp.asarray(np.asarray(labels, np.float32))
        U = solve_users(user_layout(ratings, dim=self.dim), jnp.asarray(self.item_embeddings),
                        labels=labels, reg=cfg.fold_in_ridge, alpha0=cfg.fold_in_alpha0,
                        clip_norm=cfg.user_clip)
        return np.asarray(U, np.float32)

    def fold_in(self, rows: list[np.ndarray], labels: list[np.ndarray]) -> np.ndarray:
        """U (n, d) float32 of n users given as their histories' dense ``rows`` and
        ``labels``."""
        n = len(rows)
        if n == 0:
            return np.zeros((0, self.dim), np.float32)
        lens = np.array([len(r) for r in rows], np.int64)
        if lens.sum() == 0:
            return np.zeros((n, self.dim), np.float32)
        user = np.repeat(np.arange(n, dtype=np.int32), lens)
        item = np.concatenate(rows).astype(np.int32)
        value = np.concatenate(labels).astype(np.float32)
        r = Ratings(user=user, item=item, value=np.ones_like(value), user_ids=np.arange(n),
                    item_ids=np.arange(self.n_items))
        return self.user_embeddings(r, labels=None if np.all(value == 1.0) else value)

    # -- scores -------------------------------------------------------------------------
    def prior(self) -> np.ndarray | None:
        """π (m,) float32 (π_i = η·ρ_V·p_i, see the module docstring), or None: the task
        does not rank, η = 0 or unresolved, or no released counts."""
        cfg = self.config
        if (not cfg.uses_popularity_prior or cfg.popularity_prior is None
                or self.item_counts is None):     # None: unresolved (fit() resolves it)
            return None
        p = np.log1p(np.maximum(np.asarray(self.item_counts, np.float64), 0.0))
        p = (p - p.mean()) / max(float(p.std()), 1e-12)
        rho = math.sqrt(float(np.mean(np.sum(
            np.square(self.item_embeddings.astype(np.float64)), axis=1))))
        return (cfg.popularity_prior * rho * p).astype(np.float32)

    def scores(self, U: np.ndarray, rows: np.ndarray | None = None, *,
               prior: np.ndarray | None = None) -> np.ndarray:
        """s = U Vᵀ (+ ‖u‖ π with ``prior`` π) for users U (n, d): (n, m), or (n, |rows|)
        for item ``rows``."""
        V = self.item_embeddings if rows is None else self.item_embeddings[rows]
        s = U @ V.T
        if prior is not None:
            s = s + np.linalg.norm(U, axis=1, keepdims=True) * (
                prior if rows is None else prior[rows])[None, :]
        return s

    def empty_history_scores(self) -> np.ndarray:
        """The scores of a user with no history: the released counts n̂ (float32)."""
        if self.item_counts is None:
            raise DataError("cannot recommend for an empty history: the fold-in has no "
                            "signal and this model has no released item counts to rank by "
                            "popularity; pass at least one item the user liked")
        return np.asarray(self.item_counts, np.float32)

    def top(self, rows: list[np.ndarray], labels: list[np.ndarray], k: int, *,
            exclude_history: bool = True, batch_size: int = 4096
            ) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` (k ≤ m) of n users given as histories: (rows (n, k) int64, scores
        (n, k) float32), ``batch_size`` users at a time; a row with fewer than k candidates
        (its history excluded) is padded with score −inf."""
        out_rows = np.empty((len(rows), k), np.int64)
        out_scores = np.empty((len(rows), k), np.float32)
        prior = self.prior()                      # once, not per batch
        for s in range(0, len(rows), batch_size):
            r, v = rows[s:s + batch_size], labels[s:s + batch_size]
            scores = self.scores(self.fold_in(r, v), prior=prior)
            lens = np.array([len(h) for h in r])
            if np.any(lens == 0):
                scores[lens == 0] = self.empty_history_scores()
            if exclude_history and lens.sum():      # one scatter for the whole batch
                scores[np.repeat(np.arange(len(r)), lens), np.concatenate(r)] = -np.inf
            best = top_k(scores, k)
            out_rows[s:s + len(r)] = best
            out_scores[s:s + len(r)] = np.take_along_axis(scores, best, axis=1)
        return out_rows, out_scores

    def similar(self, row: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` (≤ m) rows closest to ``row`` by cosine cos(v_i, v_row) of the released
        embeddings, and the cosines (float32): ``row`` itself first (1; 0 if v_row = 0)."""
        V = self.item_embeddings.astype(np.float64)
        norms = np.linalg.norm(V, axis=1)
        sims = (V @ V[row]) / np.maximum(norms * norms[row], 1e-30)
        sims[row] = np.inf            # itself first, whatever the round-off
        best = top_k(sims[None, :], k)[0]
        out = sims[best].astype(np.float32)
        out[0] = 1.0 if norms[row] > 0 else 0.0
        return best, out


class ImplicitScorer(Scorer):
    """Implicit feedback: every history item has label 1 unless values are given."""

    def labels(self, rows, values):
        if values is None:
            return np.ones(len(rows), np.float32)
        return np.asarray(values).astype(np.float32)


class RatingScorer(Scorer):
    """The rating task: labels from the ratings (centred by the released mean μ̂
    ``label_offset`` and item offsets b̂ ``item_offsets``, or none), and predictions."""

    labelled = True

    def __init__(self, item_embeddings, config, item_counts=None, *, label_offset: float,
                 item_offsets: np.ndarray | None = None):
        super().__init__(item_embeddings, config, item_counts)
        if label_offset is None:
            raise DataError(f"a model of task {config.task!r} predicts ratings from its "
                            "released mean μ̂: label_offset is missing")
        self.label_offset, self.item_offsets = label_offset, item_offsets

    def offsets(self, rows) -> np.ndarray:
        """μ̂ + b̂_i of dense ``rows`` (the baseline prediction)."""
        b = 0.0 if self.item_offsets is None else np.asarray(self.item_offsets)[rows]
        return self.label_offset + b

    def user_features(self) -> np.ndarray | None:
        """The item statistics f_i (:func:`dpmt.labels.item_statistics`) of the released
        offsets and counts: what the user slopes read (None: no slopes)."""
        if not slopes(self.config):
            return None
        return item_statistics(self.item_offsets, self.item_counts)

    def rating_labels(self, rows, values):
        """(labels, the user's :class:`~dpmt.labels.UserOffsets`) of one user as training
        made them (:func:`dpmt.labels.user_step_labels`): the labels u is solved from,
        y = clip(r − μ̂ − b̂_i − b_j − ⟨w_j, f_i⟩, ±c), and the user's first offsets (b_j = 0
        without ``user_bias``)."""
        rows = np.asarray(rows, np.int64)
        y, off, _ = user_step_labels(values, self.offsets(rows), np.zeros(len(rows), np.int64),
                                     rows, 1, self.config, self.user_features())
        return y, off

    def labels(self, rows, values):
        if values is None:
            raise DataError("a rating model folds a user in from their ratings: pass "
                            "values= (one rating per history item)")
        return self.rating_labels(rows, values)[0].astype(np.float32)

    def predict(self, u: np.ndarray, history: np.ndarray, values: np.ndarray,
                rows: np.ndarray) -> np.ndarray:
        """r̂ of item ``rows`` for the user u who rated ``history`` (rows) with ``values``:
        clip(μ̂ + b̂_i + b_j + ⟨w_j, f_i⟩ + ⟨u, v_i⟩) to the rating bounds. The user's offsets
        come from the labels less the first offsets, refitted to the residual of u as
        training does (``user_offsets``)."""
        history = np.asarray(history, np.int64)
        zero = np.zeros(len(history), np.int64)
        feats = self.user_features()
        _, off, resid = user_step_labels(np.asarray(values, np.float64),
                                         self.offsets(history), zero, history, 1, self.config,
                                         feats)
        if bias_refit(self.config):       # refitted to the residual of u
            off = refit_user_offsets(resid, zero, history, 1, u[None], self.item_embeddings,
                                     self.config, feats)
        lo, hi = self.config.data.rating_bounds
        pred = (self.offsets(rows) + off.per_rating(np.zeros(len(rows), np.int64), rows)
                + self.item_embeddings[rows] @ u)
        return np.clip(pred, lo, hi)


def make_scorer(item_embeddings: np.ndarray, config: TrainConfig,
                item_counts: np.ndarray | None = None, label_offset: float | None = None,
                item_offsets: np.ndarray | None = None) -> Scorer:
    """The scorer of a model of ``config.task``: :class:`RatingScorer` for a ``labelled``
    registry entry, else :class:`ImplicitScorer` (which refuses label offsets: they belong
    to a rating model)."""
    if TASKS[config.task].labelled:
        return RatingScorer(item_embeddings, config, item_counts, label_offset=label_offset,
                            item_offsets=item_offsets)
    if label_offset is not None or item_offsets is not None:
        raise DataError(f"a model of task {config.task!r} ranks items: it has no "
                        "label_offset or item_offsets (those are a rating model's)")
    return ImplicitScorer(item_embeddings, config, item_counts)
