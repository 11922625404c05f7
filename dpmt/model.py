"""A trained model: the released item embeddings, and everything you do with them.

``Model`` has the shape of the recommender libraries people know (implicit's
``recommend`` / ``similar_items`` / ``recalculate_user`` / ``save`` / ``load``):

    model = dpmt.fit(train, dpmt.TrainConfig(epsilon=5))     # or dpmt.Model.load("runs/x")
    ids, scores = model.recommend([50, 172, 133], k=10)      # raw item ids in and out
    ids, scores = model.similar_items(50, k=10)              # the item itself first
    model.save("runs/x")

**Privacy.** The model files hold only what training released under user-level DP (the item
embeddings V, the noisy item counts n̂, the ledger) and public metadata (raw item ids, the
config). No user data and no user embedding is stored. Recommending for a user folds their
embedding in from *their own* history against the released V (the exact user solve
u = (Σ_{i∈H} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_{i∈H} y_i v_i, clipped to ‖u‖ ≤ C): that is joint
differential privacy (Kearns et al. 2014; Chien et al. 2021) — what user j sees depends on
others' data only through V — and the embedding is never released.

The fold-in, the evaluation and training's user step are one function
(:func:`dpmt.solvers.user_step.solve_users`), so ``recommend`` reproduces the ranking the
evaluation scores.

File format (a directory; open formats, versioned): ``model.json`` (format name and
version, config, dimensions, the ε spent, the fingerprint of the arrays),
``item_embeddings.npz`` (``V`` float32 (m, d), ``item_ids`` (m,), optionally
``item_counts`` float (m,) — the released noisy counts — and ``item_offsets``, a rating
model's released item offsets), and ``ledger.json``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from dpmt.config import BASE_REG, TrainConfig
from dpmt.errors import ConfigError, DataError
from dpmt.privacy.ledger import ML100K_TUNING_NOTE, PRIVACY_UNIT, PrivacyLedger
from dpmt.item_ids import coerce_item_ids
from dpmt.labels import centre_by_user, rating_labels
from dpmt.ranking import top_k
from dpmt.model_files import load_model, save_model
from dpmt.privacy.randomness import SEEDED_WARNING



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
      label_offset: for a rating model (``config.task == "rating"``), the released private
        global mean μ̂; ``item_offsets`` the released per-item offsets b̂_i (or None). It was
        trained on y = clip(r − μ̂ − b̂_i, ±c) and predicts μ̂ + b̂_i + ⟨u, v_i⟩.
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
        V = np.asarray(self.item_embeddings, np.float32)
        if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1:
            raise DataError(f"item_embeddings must be a non-empty (m, d) array "
                            f"(got shape {V.shape})")
        if not np.all(np.isfinite(V)):
            raise DataError("item_embeddings contain NaN or infinite values")
        ids = np.asarray(self.item_ids)
        if ids.shape != (V.shape[0],):
            raise DataError(f"item_ids must have one id per row of item_embeddings "
                            f"({V.shape[0]}; got shape {ids.shape})")
        if len(np.unique(ids)) != len(ids):
            raise DataError("item_ids contain duplicates")
        self.item_embeddings, self.item_ids = V, ids
        if self.config is not None and self.config.reg is None:
            # fit() writes the λ its rule chose; a model built by hand folds in with λ = 3
            self.config = self.config.replace(reg=BASE_REG)
        order = np.argsort(ids, kind="stable")
        self._sorted_ids, self._sorted_rows = ids[order], order

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

    # -- ids ----------------------------------------------------------------------------
    def item_index(self, item_ids, *, unknown: str = "error") -> np.ndarray:
        """Dense rows of raw ``item_ids`` (int64). ``unknown='error'`` raises a DataError
        naming the ids the model does not have; ``'drop'`` leaves them out."""
        ids = np.asarray(item_ids)
        if ids.ndim != 1:
            raise DataError(f"item ids must be a 1-D sequence (got shape {ids.shape})")
        if ids.size == 0:
            return np.zeros(0, np.int64)
        ids = self._coerce_ids(ids)
        pos = np.searchsorted(self._sorted_ids, ids)
        pos = np.minimum(pos, len(self._sorted_ids) - 1)
        found = self._sorted_ids[pos] == ids
        if not np.all(found):
            if unknown == "drop":
                return self._sorted_rows[pos[found]].astype(np.int64)
            missing = [str(x) for x in ids[~found][:5]]
            raise DataError(f"item id(s) {', '.join(missing)}"
                            f"{' …' if (~found).sum() > 5 else ''} are not in this model "
                            f"({self.n_items} items, e.g. {self.item_ids[0]}); they were "
                            "never rated in the training data")
        return self._sorted_rows[pos].astype(np.int64)

    def _coerce_ids(self, ids: np.ndarray) -> np.ndarray:
        return coerce_item_ids(ids, self.item_ids.dtype.kind)

    # -- fold-in and scores ---------------------------------------------------------------
    def fold_in(self, history, values=None) -> np.ndarray:
        """The user embedding u (d,) float32 of one user from their own history (raw ids).

        The exact user solve against the released V (see the module docstring); computed,
        never stored or released. ``values``: optional labels y_i (default 1)."""
        return self.fold_in_batch([history], None if values is None else [values])[0]

    def fold_in_batch(self, histories: Sequence, values: Sequence | None = None
                      ) -> np.ndarray:
        """User embeddings (n, d) float32 of many users (each a sequence of raw ids)."""
        rows, vals = self._histories(histories, values)
        return self._solve(rows, vals)

    def recalculate_user(self, history, values=None) -> np.ndarray:
        """implicit's name for :meth:`fold_in`."""
        return self.fold_in(history, values)

    def offsets(self, rows) -> np.ndarray:
        """μ̂ + b̂_i of dense ``rows`` (a rating model's baseline prediction)."""
        b = 0.0 if self.item_offsets is None else np.asarray(self.item_offsets)[rows]
        return self.label_offset + b

    def rating_labels(self, rows, values) -> tuple[np.ndarray, float]:
        """(labels, b_j) of one user of a rating model, as training made them: y = clip(r −
        μ̂ − b̂_i, ±c), then the user's own bias b_j out of them
        (:func:`dpmt.labels.centre_by_user`; b_j = 0 without ``user_bias``)."""
        cfg = self.config
        y = rating_labels(values, self.offsets(rows), cfg.label_clip)
        if not cfg.rating_user_bias:
            return y, 0.0
        y, b = centre_by_user(y, np.zeros(len(y), np.int64), 1, cfg.user_bias_reg,
                              cfg.label_clip)
        return y, float(b[0])

    def predict(self, history, values, items) -> np.ndarray:
        """A rating model's predicted ratings μ̂ + b̂_i + b_j + ⟨u, v_i⟩ of ``items`` (raw
        ids) for a user who rated ``history`` with ``values`` (u and the user's bias b_j
        folded in from them), clipped to the rating range."""
        if self.label_offset is None:
            raise ConfigError("predict() is for rating models (TrainConfig(task='rating')); "
                              "an implicit model ranks: use recommend() or score()")
        u = self.fold_in(history, values)
        _, b = self.rating_labels(self.item_index(history), np.asarray(values, np.float64))
        lo, hi = self.config.data.rating_bounds
        rows = self.item_index(items)
        pred = self.offsets(rows) + b + self.item_embeddings[rows] @ u
        return np.clip(pred, lo, hi)

    def item_prior(self) -> np.ndarray | None:
        """The popularity prior π (m,) float32 of the scores, or None (η = 0, a rating model,
        or no released counts).

        s_i(u) = ⟨u, v_i⟩ + ‖u‖·π_i with π_i = η·ρ_V·p_i, where p is log(1 + max(n̂_i, 0))
        of the *released* noisy counts standardised over items (mean 0, std 1) and
        ρ_V = (mean_i ‖v_i‖²)^½. Both factors are scale-free, so η means the same at any
        d, λ or C: η = 1 lets the popularity term move a score by about one typical
        ‖u‖‖v‖. Post-processing of released values only: no privacy cost. The model is
        then never far below private popularity (η → ∞ is private popularity).
        """
        cfg = self.config
        if (not cfg.uses_popularity_prior or cfg.popularity_prior is None
                or self.item_counts is None):     # None: unresolved (fit() resolves it)
            return None
        p = np.log1p(np.maximum(np.asarray(self.item_counts, np.float64), 0.0))
        p = (p - p.mean()) / max(float(p.std()), 1e-12)
        rho = math.sqrt(float(np.mean(np.sum(
            np.square(self.item_embeddings.astype(np.float64)), axis=1))))
        return (cfg.popularity_prior * rho * p).astype(np.float32)

    def _scores(self, U: np.ndarray, rows: np.ndarray | None = None, *,
                prior: np.ndarray | None = None) -> np.ndarray:
        """s = U Vᵀ (+ ‖u‖ π with the popularity prior ``prior``, :meth:`item_prior`) for
        rows U (n, d): (n, m), or (n, |rows|) for item ``rows``."""
        V = self.item_embeddings if rows is None else self.item_embeddings[rows]
        s = U @ V.T
        if prior is not None:
            s = s + np.linalg.norm(U, axis=1, keepdims=True) * (
                prior if rows is None else prior[rows])[None, :]
        return s

    def score(self, history, items=None, values=None) -> np.ndarray:
        """Scores s_i = ⟨u, v_i⟩ (+ ‖u‖·π_i, :meth:`item_prior`) of ``items`` (raw ids;
        default every item, in model order)."""
        u = self.fold_in(history, values)
        rows = None if items is None else self.item_index(items)
        return self._scores(u[None, :], rows, prior=self.item_prior())[0]

    @property
    def item_factors(self) -> np.ndarray:
        """implicit's name for :attr:`item_embeddings` (m, d)."""
        return self.item_embeddings

    @property
    def user_factors(self) -> None:
        """None: user embeddings are solved on the user's side from their own history and
        never released (joint DP); ``recommend`` folds each user in."""
        return None

    def recommend(self, history, user_items=None, N: int | None = None, *, k: int = 10,
                  values=None, exclude_history: bool = True, **implicit_kw
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (raw item ids, scores) for one user with ``history`` (raw ids).

        An empty history has no signal for the fold-in: the model then ranks by the released
        item counts (private popularity), or refuses if it has none. With ``user_items`` (a
        scipy.sparse row or matrix), implicit's call instead: ``recommend(userid,
        user_items[userid], N=10, filter_already_liked_items=True, filter_items=None,
        items=None)`` (:func:`dpmt.implicit_api.recommend`)."""
        if user_items is not None and not isinstance(user_items, (int, np.integer)):
            from dpmt import implicit_api

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
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"k must be an integer >= 1 (got {k!r})")
        if (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                or batch_size < 1):
            raise ConfigError(f"batch_size must be an integer >= 1 (got {batch_size!r})")
        k, batch_size = int(min(k, self.n_items)), int(batch_size)
        rows, vals = self._histories(histories, values)
        out_ids = np.empty((len(rows), k), dtype=self.item_ids.dtype)
        out_scores = np.empty((len(rows), k), np.float32)
        prior = self.item_prior()                 # once, not per batch
        for s in range(0, len(rows), batch_size):
            r, v = rows[s:s + batch_size], vals[s:s + batch_size]
            scores = self._scores(self._solve(r, v), prior=prior)
            lens = np.array([len(h) for h in r])
            if np.any(lens == 0):
                scores[lens == 0] = self._empty_history_scores()
            if exclude_history and lens.sum():      # one scatter for the whole batch
                scores[np.repeat(np.arange(len(r)), lens), np.concatenate(r)] = -np.inf
            top = top_k(scores, k)
            out_ids[s:s + len(r)] = self.item_ids[top]
            out_scores[s:s + len(r)] = np.take_along_axis(scores, top, axis=1)
        return out_ids, out_scores

    def _empty_history_scores(self) -> np.ndarray:
        if self.item_counts is None:
            raise DataError("cannot recommend for an empty history: the fold-in has no "
                            "signal and this model has no released item counts to rank by "
                            "popularity; pass at least one item the user liked")
        return np.asarray(self.item_counts, np.float32)

    def similar_items(self, item_id, k: int = 10, *, N: int | None = None, filter_items=None,
                      items=None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` items most similar to ``item_id`` by cosine similarity of their
        released embeddings: (raw ids, similarities), the item itself first (similarity 1).
        Post-processing of V only: no privacy cost. implicit's ``N``, ``filter_items``,
        ``items`` and an array of ids are accepted too (:func:`dpmt.implicit_api.similar_items`)."""
        if N is not None or filter_items is not None or items is not None \
                or np.ndim(item_id) > 0:
            from dpmt import implicit_api

            return implicit_api.similar_items(self, item_id, k if N is None else N,
                                              filter_items=filter_items, items=items)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"k must be an integer >= 1 (got {k!r})")
        row = int(self.item_index([item_id])[0])
        V = self.item_embeddings.astype(np.float64)
        norms = np.linalg.norm(V, axis=1)
        sims = (V @ V[row]) / np.maximum(norms * norms[row], 1e-30)
        sims[row] = np.inf            # itself first, whatever the round-off
        top = top_k(sims[None, :], int(min(k, self.n_items)))[0]
        out = sims[top].astype(np.float32)
        out[0] = 1.0 if norms[row] > 0 else 0.0
        return self.item_ids[top], out

    def _histories(self, histories, values):
        if isinstance(histories, (str, bytes)) or not hasattr(histories, "__len__"):
            raise DataError("histories must be a sequence of item-id sequences")
        if values is not None and (isinstance(values, (str, bytes))
                                   or not hasattr(values, "__len__")):
            raise DataError("values must be a sequence with one sequence of ratings per "
                            f"history (got {type(values).__name__})")
        if values is not None and len(values) != len(histories):
            raise DataError(f"values must have one entry per history ({len(histories)}; got "
                            f"{len(values)})")
        rows, vals = [], []
        for n, h in enumerate(histories):
            h = np.asarray(h)
            if h.ndim != 1:
                raise DataError(f"history {n} must be a 1-D sequence of item ids (got shape "
                                f"{h.shape})")
            r = self.item_index(h)
            if len(np.unique(r)) != len(r):
                raise DataError(f"history {n} lists an item more than once")
            if values is None:
                if self.label_offset is not None:
                    raise DataError("a rating model folds a user in from their ratings: pass "
                                    "values= (one rating per history item)")
                v = np.ones(len(r), np.float32)
            else:
                v = np.asarray(values[n], np.float64)
                if v.shape != (len(r),) or not np.all(np.isfinite(v)):
                    raise DataError(f"values of history {n} must be {len(r)} finite numbers, "
                                    f"one per item (got {np.ravel(values[n]).tolist()[:5]})")
                if self.label_offset is not None:      # the labels training used
                    v, _ = self.rating_labels(r, v)
                v = v.astype(np.float32)
            rows.append(r)
            vals.append(v)
        return rows, vals

    def _solve(self, rows: list[np.ndarray], vals: list[np.ndarray]) -> np.ndarray:
        """The exact user solve of :func:`dpmt.solvers.user_step.solve_users` (the one
        training and evaluation use) on the given histories (dense rows)."""
        from dpmt.data.ratings import Ratings

        n = len(rows)
        if n == 0:
            return np.zeros((0, self.dim), np.float32)
        lens = np.array([len(r) for r in rows], np.int64)
        if lens.sum() == 0:
            return np.zeros((n, self.dim), np.float32)
        user = np.repeat(np.arange(n, dtype=np.int32), lens)
        item = np.concatenate(rows).astype(np.int32)
        value = np.concatenate(vals).astype(np.float32)
        r = Ratings(user=user, item=item, value=np.ones_like(value), user_ids=np.arange(n),
                    item_ids=np.arange(self.n_items))
        return self.user_embeddings(r, labels=None if np.all(value == 1.0) else value)

    def user_embeddings(self, ratings, labels=None) -> np.ndarray:
        """Fold in every user of ``ratings`` (a :class:`~dpmt.data.Ratings` whose item indices
        are this model's rows): U (n_users, d) float32. The evaluation calls this on the
        evaluation users' histories; :meth:`fold_in` on one user's. ``labels``: y per rating
        (default 1, implicit feedback, as in training; the ratings' values are not read)."""
        import jax.numpy as jnp

        from dpmt.solvers.layout import user_layout
        from dpmt.solvers.user_step import solve_users

        if ratings.n_items != self.n_items:
            raise DataError(f"the ratings index {ratings.n_items} items; this model has "
                            f"{self.n_items}")
        cfg = self.config
        if labels is not None:
            labels = jnp.asarray(np.asarray(labels, np.float32))
        U = solve_users(user_layout(ratings, dim=self.dim), jnp.asarray(self.item_embeddings),
                        labels=labels, reg=cfg.reg, alpha0=cfg.gravity,
                        clip_norm=cfg.user_clip)
        return np.asarray(U, np.float32)

    # -- reports -----------------------------------------------------------------------------
    def privacy_summary(self) -> dict:
        cfg = self.config
        if self.ledger is None:
            return {"epsilon": math.inf, "delta": 0.0, "private": False,
                    "privacy_unit": PRIVACY_UNIT}
        return {"epsilon": self.ledger.epsilon(), "delta": cfg.privacy.delta,
                "target_epsilon": cfg.privacy.epsilon, "private": True,
                "privacy_unit": PRIVACY_UNIT,
                "accountant": cfg.privacy.accountant, "releases": len(self.ledger),
                "noise": self.noise_note()}

    def report(self) -> str:
        """A few lines: what was trained, the privacy spent, the metrics, the time."""
        cfg = self.config
        target = cfg.privacy.epsilon
        sel = None if self.ledger is None else getattr(self.ledger, "selection", None)
        if sel is not None and sel.charged and self.ledger.epsilon_budget is not None:
            target = self.ledger.epsilon_budget     # the whole tuning's target, not one run's
        name = ("non-private (ε = ∞)" if not cfg.private else
                f"DP ε={self.epsilon:.3g} (target {target:g}"
                + (", private selection included" if sel is not None and sel.charged else "")
                + f"), δ={cfg.privacy.delta:g}")
        lines = [f"{cfg.data.dataset}: {cfg.solver} / {cfg.weights if cfg.private else 'all-ones'} "
                 f"weights, d={cfg.dim}, {cfg.iterations} iterations, {name}",
                 f"privacy unit: {PRIVACY_UNIT}"]
        if self.private and self.noise_reproducible:
            lines.append(f"WARNING: {SEEDED_WARNING}")
        if self.private and cfg.data.dataset == "ml-100k":
            lines.append(f"note: {ML100K_TUNING_NOTE}")
        if self.auto_settings:
            lines.append(f"chosen by rule from the released statistics: {self.auto_settings}")
        if self.metrics:
            from dpmt.metrics import format_metrics, format_rmse

            lines += (format_rmse(self.metrics) if "rmse" in self.metrics.get("overall", {})
                      else format_metrics(self.metrics))
        t = f"time: {self.seconds:.1f}s"
        if self.compile_seconds > 0.05:
            t += f" (of which ~{self.compile_seconds:.1f}s compilation)"
        lines.append(t)
        return "\n".join(lines)

    # -- files ---------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """SHA-256 (hex, 16 chars) of the released arrays: V, the item ids, the released
        counts and offsets. :meth:`save` extends it over the ledger and ``model.json``."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.item_embeddings).tobytes())
        h.update(np.asarray(self.item_ids).astype(str).astype("U").tobytes())
        for name, a in (("counts", self.item_counts), ("offsets", self.item_offsets)):
            if a is not None:
                a = np.ascontiguousarray(a)
                h.update(f"{name}:{a.dtype.str}:".encode())
                h.update(a.tobytes())
        return h.hexdigest()[:16]

    def save(self, path: str | os.PathLike) -> Path:
        """Write the *shareable* model into directory ``path``
        (:func:`dpmt.model_files.save_model`: the released arrays, the ledger, ``model.json``
        last; nothing private)."""
        return save_model(self, path)

    def noise_note(self) -> dict:
        """Where the noise came from, as ``model.json`` states it."""
        if not self.private:
            return {"source": "none", "note": "non-private model: ε = ∞"}
        if self.noise_reproducible:
            return {"source": "user-given seed", "note": SEEDED_WARNING}
        return {"source": "secret key from OS entropy",
                "note": "the key stays in the trainer's private state; no published file "
                        "lets a noise draw be regenerated"}

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Model":
        """Read a model written by :meth:`save`, or the ``model/`` folder of a
        ``dpmt train --out`` run directory (:func:`dpmt.model_files.load_model`, which
        refuses, saying what is wrong, anything that is not an intact model of this format)."""
        return load_model(cls, path)
