"""A trained model: the released item embeddings, and everything you do with them.

``Model`` has the shape of the recommender libraries people know (implicit's
``recommend`` / ``similar_items`` / ``recalculate_user`` / ``save`` / ``load``):

    model = dpmt.fit(train, dpmt.TrainConfig(epsilon=5))     # or dpmt.Model.load("runs/x")
    ids, scores = model.recommend([50, 172, 133], k=10)      # raw item ids in and out
    ids, scores = model.similar_items(50, k=10)              # the item itself first
    model.save("runs/x")

It is the one object users hold, and it composes the pieces that do the work: the id index
(:class:`dpmt.item_ids.ItemIndex`: raw ids ↔ rows of V), the scorer of its task
(:mod:`dpmt.scoring`: the fold-in u = (Σ_{i∈H} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_{i∈H} y_i v_i
clipped to ‖u‖ ≤ C, the scores ⟨u, v_i⟩ + ‖u‖·π_i, the top k, a rating model's
predictions), persistence (:mod:`dpmt.model_files`: the directory format) and the report
(:mod:`dpmt.model_report`).

**Privacy.** The files hold only what training released under user-level DP (V, the noisy
counts n̂, a rating model's offsets, the ledger) and public metadata (item ids, config). A
user's embedding is folded in from *their own* history against the released V (joint DP,
Kearns et al. 2014; Chien et al. 2021), never stored or released.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from dpmt import implicit_api, model_report
from dpmt.config import BASE_REG, TrainConfig
from dpmt.errors import ConfigError
from dpmt.item_ids import ItemIndex
from dpmt.model_files import arrays_fingerprint, load_model, save_model
from dpmt.privacy.ledger import PrivacyLedger
from dpmt.ranking import check_count
from dpmt.scoring import Scorer, make_scorer, released_embeddings


@dataclasses.dataclass
class Model:
    """Released item embeddings with raw ids, the fold-in parameters, config and ledger.

    Attributes:
      item_embeddings: float32 (m, d) V, released.
      item_ids: (m,) raw item id of each row (int64, or str for text ids).
      config: the :class:`~dpmt.config.TrainConfig` that trained it (λ, α0, C for fold-in).
      ledger: the run's :class:`~dpmt.privacy.PrivacyLedger` (None if non-private).
      item_counts: (m,) the released noisy item counts n̂_i, or None.
      metrics: evaluation metrics of the run, if it was evaluated.
      history: per-iteration records (ε so far, seconds).
      seconds: training time (compilation included); ``compile_seconds`` the first
        iteration's excess over the later ones.
      label_offset: a rating model's (a ``labelled`` task's) released private mean μ̂;
        ``item_offsets`` its released item offsets b̂_i (or None). It was trained on
        y = clip(r − μ̂ − b̂_i − b_j − ⟨w_j, f_i⟩, ±c) and predicts μ̂ + b̂_i + b_j + ⟨w_j, f_i⟩
        + ⟨u, v_i⟩, with the user's own offsets b_j, w_j (on the item statistics f_i of b̂_i
        and ``item_counts``) folded in like u (:mod:`dpmt.labels`); an implicit model has
        neither.
    """

    item_embeddings: np.ndarray
    item_ids: np.ndarray
    config: TrainConfig
    ledger: PrivacyLedger | None = None
    item_counts: np.ndarray | None = None
    metrics: dict | None = None
    history: list[dict] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    compile_seconds: float = 0.0
    label_offset: float | None = None     # rating task: the released private mean μ̂
    item_offsets: np.ndarray | None = None  # rating task: the released item offsets b̂_i
    auto_settings: str = ""   # settings fit() chose by rule (dpmt.train.defaults), and why
    noise_reproducible: bool = False   # trained with a user-given noise seed (not private
    #                                    against whoever knows it)

    def __post_init__(self):
        self.item_embeddings = released_embeddings(self.item_embeddings)
        self._index = ItemIndex(self.item_ids, rows=self.n_items)
        self.item_ids = self._index.ids
        if self.config is not None:
            if self.config.reg is None:
                # fit() writes the λ its rule chose; a model built by hand folds in with λ = 3
                self.config = self.config.replace(reg=BASE_REG)
            _ = self.scorer    # refuses label offsets that do not fit the task

    # -- the pieces: the id index, the scorer ---------------------------------------------
    @property
    def index(self) -> ItemIndex:
        """The id index: raw item ids ↔ rows of :attr:`item_embeddings`."""
        if self._index.ids is not self.item_ids:         # item_ids were replaced
            self._index = ItemIndex(self.item_ids)
        return self._index

    @property
    def scorer(self) -> Scorer:
        """The scorer of this model's task, over its current V, config and counts."""
        return make_scorer(self.item_embeddings, self.config, self.item_counts,
                           self.label_offset, self.item_offsets)

    # -- properties -------------------------------------------------------------------
    @property
    def n_items(self) -> int:
        return int(self.item_embeddings.shape[0])

    @property
    def dim(self) -> int:
        return int(self.item_embeddings.shape[1])

    @property
    def epsilon(self) -> float:
        """ε spent by training; ∞ for a non-private model (it protects nobody)."""
        return math.inf if self.ledger is None else self.ledger.epsilon()

    @property
    def private(self) -> bool:
        return self.config.private

    @property
    def item_factors(self) -> np.ndarray:
        """implicit's name for :attr:`item_embeddings` (m, d)."""
        return self.item_embeddings

    @property
    def user_factors(self) -> None:
        """None: user embeddings are solved on the user's side from their own history and
        never released (joint DP); ``recommend`` folds each user in."""
        return None

    # -- ids, fold-in, scores -----------------------------------------------------------
    def item_index(self, item_ids, *, unknown: str = "error") -> np.ndarray:
        """Dense rows of raw ``item_ids`` (int64) (:meth:`ItemIndex.rows`): unknown ids
        refused by name (``unknown='error'``) or left out (``'drop'``)."""
        return self.index.rows(item_ids, unknown=unknown)

    def fold_in(self, history, values=None) -> np.ndarray:
        """The user embedding u (d,) float32 of one user from their own history (raw ids;
        ``values``: labels, default 1, or a rating model's ratings); never stored."""
        return self.fold_in_batch([history], None if values is None else [values])[0]

    def fold_in_batch(self, histories: Sequence, values: Sequence | None = None
                      ) -> np.ndarray:
        """User embeddings (n, d) float32 of many users (each a sequence of raw ids)."""
        scorer = self.scorer
        return scorer.fold_in(*self.index.histories(histories, values, scorer.labels))

    recalculate_user = fold_in      # implicit's name for fold_in

    def user_embeddings(self, ratings, labels=None) -> np.ndarray:
        """U (n_users, d): every user of ``ratings`` (item indices = rows) folded in."""
        return self.scorer.user_embeddings(ratings, labels)

    def predict(self, history, values, items) -> np.ndarray:
        """A rating model's predictions clip(μ̂ + b̂_i + b_j + ⟨u, v_i⟩) of ``items`` (raw ids)
        for a user who rated ``history`` with ``values`` (u and b_j folded in from them)."""
        scorer = self.scorer
        if not scorer.labelled:
            raise ConfigError("predict() is for rating models (TrainConfig(task='rating')); "
                              "an implicit model ranks: use recommend() or score()")
        u = self.fold_in(history, values)
        return scorer.predict(u, self.item_index(history), np.asarray(values, np.float64),
                              self.item_index(items))

    def item_prior(self) -> np.ndarray | None:
        """The popularity prior π_i = η·ρ_V·p_i (m,) float32 of the scores, or None (η = 0,
        a rating model, or no released counts): :meth:`dpmt.scoring.Scorer.prior`."""
        return self.scorer.prior()

    def score(self, history, items=None, values=None) -> np.ndarray:
        """Scores s_i = ⟨u, v_i⟩ (+ ‖u‖·π_i, :meth:`item_prior`) of ``items`` (raw ids;
        default every item, in model order)."""
        scorer = self.scorer
        u = self.fold_in(history, values)
        rows = None if items is None else self.item_index(items)
        return scorer.scores(u[None, :], rows, prior=scorer.prior())[0]

    def recommend(self, history, user_items=None, N: int | None = None, *, k: int = 10,
                  values=None, exclude_history: bool = True, **implicit_kw
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (raw item ids, scores) for one user with ``history`` (raw ids); an empty
        history ranks by the released counts (private popularity), or is refused without.
        With ``user_items`` (scipy.sparse rows), implicit's call ``recommend(userid,
        user_items[userid], N=10, filter_already_liked_items=True, filter_items=None,
        items=None)`` (:func:`dpmt.implicit_api.recommend`)."""
        if user_items is not None and not isinstance(user_items, (int, np.integer)):
            return implicit_api.recommend(self, history, user_items, 10 if N is None else N,
                                          **implicit_kw)
        if implicit_kw:
            raise ConfigError(f"{', '.join(implicit_kw)}: implicit's options need user_items "
                              "(the users' CSR rows)")
        k = user_items if user_items is not None else (k if N is None else N)
        ids, scores = self.recommend_batch([history], k, values=None if values is None
                                           else [values], exclude_history=exclude_history)
        keep = np.isfinite(scores[0])
        return ids[0][keep], scores[0][keep]

    def recommend_batch(self, histories: Sequence, k: int = 10, *, values=None,
                        exclude_history: bool = True, batch_size: int = 4096
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` for many users: (ids (n, k), scores (n, k)); rows with fewer than ``k``
        candidates are padded with score −inf (and an arbitrary id)."""
        k, batch_size = check_count(k, "k"), check_count(batch_size, "batch_size")
        scorer = self.scorer
        rows, labels = self.index.histories(histories, values, scorer.labels)
        top, scores = scorer.top(rows, labels, min(k, self.n_items),
                                 exclude_history=exclude_history, batch_size=batch_size)
        return self.item_ids[top], scores

    def similar_items(self, item_id, k: int = 10, *, N: int | None = None, filter_items=None,
                      items=None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` items most similar to ``item_id`` by cosine similarity of their
        released embeddings: (raw ids, similarities), the item itself first (similarity 1).
        Post-processing of V only: no privacy cost. implicit's ``N``, ``filter_items``,
        ``items`` and an array of ids are accepted too (:func:`dpmt.implicit_api.similar_items`)."""
        if N is not None or filter_items is not None or items is not None \
                or np.ndim(item_id) > 0:
            return implicit_api.similar_items(self, item_id, k if N is None else N,
                                              filter_items=filter_items, items=items)
        k = check_count(k, "k")
        row = int(self.item_index([item_id])[0])
        top, sims = self.scorer.similar(row, min(k, self.n_items))
        return self.item_ids[top], sims

    # -- reports and files --------------------------------------------------------------
    privacy_summary = model_report.privacy_summary   # ε, δ, the unit, the releases
    report = model_report.report                     # a few lines: what, ε, metrics, time
    noise_note = model_report.noise_note             # where the noise came from

    def fingerprint(self) -> str:
        """SHA-256 (hex, 16 chars) of the released arrays: V, the item ids, the released
        counts and offsets. :meth:`save` extends it over the ledger and ``model.json``."""
        return arrays_fingerprint(self.item_embeddings, self.item_ids, self.item_counts,
                                  self.item_offsets)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the *shareable* model (nothing private) into directory ``path``
        (:func:`dpmt.model_files.save_model`)."""
        return save_model(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Model":
        """Read a model written by :meth:`save`, or a ``dpmt train --out`` run directory
        (:func:`dpmt.model_files.load_model`: anything else is refused, saying why)."""
        return load_model(cls, path)
