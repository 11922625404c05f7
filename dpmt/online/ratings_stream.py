"""Streamed ratings: turn a ratings dataset into an online binary prediction task.

Task ("will this user like this item"): ratings are replayed in timestamp order; at round
``t`` the predictor sees ``x_t`` = the *popularity bucket* of the rated item and must
predict ``y_t = 1[rating >= like_threshold]`` (default 4 on a 1–5 scale). The hypothesis
class is thresholds over buckets, ``h_θ(x) = 1[bucket >= θ]`` ("users like items at least
this popular"), ``θ = 0..buckets``.

Popularity comes from one of:

* ``"private"`` (default): a privately released item histogram of *distinct* (user, item)
  pairs. A stream may re-rate: a (user, item) pair rated several times counts once (the
  pair's first rating in the data's order is kept; only the pair matters for a count).
  Each user then keeps at most ``cap_k`` of their distinct items (a uniformly random
  subset); per-item counts of the kept pairs get i.i.d. discrete Gaussian noise — the
  same release as training's task sizes (:func:`dpmt.privacy.private_counts`: integers, so
  no floating-point structure to read, recorded in a ledger). Adding or removing one user
  changes at most ``k`` counts, each by 1, so the L2 sensitivity is ``√k`` and the noise is
  ``σ = z·√k`` for noise multiplier ``z``. Without the de-duplication one user re-rating
  one item k times would move that count by k (L2 ``k``, not ``√k``). The release is
  ``(ε_h, δ_h)``-DP at the **user level** (add/remove one user), with ``ε_h`` from
  ``dp_accounting``'s privacy loss distribution of the discrete Gaussian; give either
  ``hist_epsilon`` (then ``σ`` is calibrated with :func:`dpmt.privacy.calibrate`) or
  ``noise_multiplier``. The item universe (the list of item ids)
  is treated as public.
* ``"exact"``: the true counts (not private; for comparison only).
* an array of public per-item scores (e.g. from public metadata).

Buckets are rank quantiles of the popularity scores (each bucket holds about the same
number of items; ties broken at random), 0 = least popular; computed from the released
scores only (post-processing).

Privacy units differ and are reported separately: the histogram protects users (once, before
the stream starts); the online predictor's (ε, δ) is per example (per rating) under joint
DP. Real ratings are not realisable by any threshold: SOA-based predictors use their
non-realisable policy (see :class:`dpmt.online.soa.SOA`), and reports show the mistakes
next to the best fixed hypothesis in hindsight (:func:`best_in_hindsight`).

**Model features** (``features="model"``): ``x_t`` is instead the bucket of the score
``⟨u_j, v_i⟩`` of a trained model's released item embeddings ``V`` (user-level DP), where
``u_j`` is folded in from user ``j``'s *earlier* ratings only (:class:`IncrementalFoldIn`;
the user's own data, never released). The fold-in follows the model's implicit-feedback
convention: the history ``H_j`` is the set of items ``j`` rated above the model's
``positive_threshold`` earlier in the stream, each with label 1, and
``u_j = clip_C((Σ_{i∈H_j} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_{i∈H_j} v_i)`` — exactly
``Model.fold_in`` of that history. A rating's own value never reaches its own ``x_t``.
Bucket edges are fixed before the stream from ``V`` and ``C`` only
(:func:`model_score_edges`), so they use no streamed data. Ratings of items the model does
not have are skipped (counted in ``skipped``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpmt.data import Ratings
from dpmt.data.stats import popularity_buckets
from dpmt.errors import ConfigError, DataError, DpmtError, check_range
from dpmt.online.hypotheses import HypothesisClass, thresholds
from dpmt.online.streams import Stream
from dpmt.privacy import PrivacyLedger, calibrate, private_counts
from dpmt.privacy.calibration import PlannedRelease
from dpmt.privacy.ledger import epsilon_of
from dpmt.privacy.mechanisms import counts_release
from dpmt.privacy.randomness import NoiseSource

__all__ = ["RatingsStream", "ratings_stream", "load_ratings", "synthetic_ratings",
           "private_item_counts", "best_in_hindsight",
           "histogram_epsilon", "distinct_pairs",
           "IncrementalFoldIn", "model_score_edges", "model_rows", "SCORE_EDGES", "FEATURES"]

FEATURES = ("popularity", "model")
SCORE_EDGES = ("reference", "range")


@dataclasses.dataclass
class RatingsStream:
    """A ratings dataset as an online task (see module docstring).

    Attributes:
      stream: the :class:`Stream` of (bucket, liked) pairs, in timestamp order.
      H: the hypothesis class (thresholds over buckets).
      bucket_of_item: bucket of every item (int64, n_items).
      order: indices into the Ratings arrays, in stream order.
      popularity: ``"private"``, ``"exact"`` or ``"public"``.
      hist_epsilon, hist_delta: user-level guarantee of the histogram (None if not private;
        ``(0, 0)`` for public scores, which use no private data).
      noise_sigma: the Gaussian noise standard deviation per count (private only).
      cap_k: per-user contribution cap (private only).
      task: a one-line statement of the prediction task.
      features: ``"popularity"`` or ``"model"``.
      skipped: ratings left out because the model does not have their item (model only).
      score_edges: the ``buckets − 1`` fixed score edges (model only).
      scores: the score ``⟨u_j, v_i⟩`` of every streamed rating (model only).
      history_threshold: a rating ``> history_threshold`` enters its user's fold-in
        history (the model's ``positive_threshold``; model only).

    With model features ``bucket_of_item`` is None (the bucket depends on the user).
    """

    stream: Stream
    H: HypothesisClass
    bucket_of_item: np.ndarray | None
    order: np.ndarray
    popularity: str
    buckets: int
    like_threshold: float
    hist_epsilon: float | None = None
    hist_delta: float | None = None
    noise_sigma: float | None = None
    cap_k: int | None = None
    dataset: str = "ratings"
    task: str = ""
    features: str = "popularity"
    skipped: int = 0
    score_edges: np.ndarray | None = None
    scores: np.ndarray | None = None
    history_threshold: float | None = None

    @property
    def xs(self) -> np.ndarray:
        return self.stream.xs

    @property
    def ys(self) -> np.ndarray:
        return self.stream.ys

    def __len__(self) -> int:
        return len(self.stream)


def synthetic_ratings(n_users: int = 300, n_items: int = 200, n_ratings: int = 20_000,
                      seed=0):
    """A small synthetic ratings set with timestamps (for tests and demos).

    Item popularity is Zipf-like; a rating is >= 4 with a probability that rises with the
    item's popularity (so thresholds over popularity buckets are a sensible, imperfect
    class). Pairs may repeat across time (a re-rating): the stream replays every rating, the
    private histogram counts each pair once.
    """

    for nm, v in (("n_users", n_users), ("n_items", n_items), ("n_ratings", n_ratings)):
        check_range(nm, v, low=1, integer=True)
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1) ** 0.9
    pop = rng.permutation(pop / pop.sum())
    item = rng.choice(n_items, size=n_ratings, p=pop)
    user = rng.integers(0, n_users, n_ratings)
    rank = np.argsort(np.argsort(-pop))            # 0 = most popular
    p_like = 0.75 - 0.45 * rank / max(1, n_items - 1)
    liked = rng.random(n_ratings) < p_like[item]
    value = np.where(liked, rng.integers(4, 6, n_ratings), rng.integers(1, 4, n_ratings))
    ts = np.sort(rng.integers(0, 10 ** 8, n_ratings))
    return Ratings(user=user, item=item, value=value.astype(np.float32),
                   user_ids=np.arange(n_users), item_ids=np.arange(n_items),
                   timestamp=ts, name="synthetic-stream")


def load_ratings(dataset: str, data_dir: str | None = None):
    """Load a dataset through ``dpmt.data.load`` (the project's loader: registry names such
    as ``ml-100k``, paths, ...); ``"synthetic-stream"`` gives :func:`synthetic_ratings`
    (explicit ratings with timestamps, no download)."""
    if dataset == "synthetic-stream":
        return synthetic_ratings()
    try:
        from dpmt.data import load  # written by the data layer (dpmt/data/fetch.py)
    except ImportError:
        load = None
    if load is None:
        raise DpmtError(f"cannot load dataset {dataset!r}: dpmt.data.load is not available in "
                        "this installation; pass a dpmt.data.Ratings object instead")
    return load(dataset) if data_dir is None else load(dataset, data_dir=data_dir)


def distinct_pairs(user: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """Sorted indices that keep one entry per distinct (user, item) pair: the pair's first
    entry in array order (a re-rated pair counts once)."""
    key = np.asarray(user, np.int64) * int(max(1, n_items)) + np.asarray(item, np.int64)
    _, first = np.unique(key, return_index=True)
    return np.sort(first)


def histogram_epsilon(noise_multiplier: float, delta: float, cap_k: int) -> float:
    """User-level ε at ``delta`` of the capped histogram: the discrete Gaussian counts
    release of :mod:`dpmt.privacy` (k coordinates moved by ≤ 1 each, σ = z·√k), accounted by
    dp_accounting's PLD — the same release and accountant as training's task sizes."""

    sigma = float(noise_multiplier) * np.sqrt(int(cap_k))
    return float(epsilon_of([counts_release(int(cap_k), sigma)], float(delta)))


def private_item_counts(ratings, *, cap_k: int = 50, hist_epsilon: float | None = 1.0,
                        hist_delta: float = 1e-6, noise_multiplier: float | None = None,
                        seed=None, noise=None) -> tuple[np.ndarray, dict]:
    """Noisy per-item counts of distinct (user, item) pairs, each user capped at ``cap_k``
    distinct items (so the L2 sensitivity is ``√cap_k``, re-ratings included): training's
    own counts release, :func:`dpmt.privacy.private_counts` (integers, exact discrete
    Gaussian, recorded in a :class:`~dpmt.privacy.PrivacyLedger`), unclamped.

    Give ``hist_epsilon`` (the noise is calibrated to it with :func:`dpmt.privacy.calibrate`)
    or ``noise_multiplier`` z (σ = z·√k; then ε is computed). Randomness: ``noise`` (a
    :class:`~dpmt.privacy.randomness.NoiseSource`), else ``seed``: None (default) draws a
    secret from OS entropy; an int makes the capping and the noise reproducible — then the
    histogram is NOT private against anyone who knows the seed. Returns
    ``(noisy_counts, info)`` with ``info`` holding ``epsilon``, ``delta``, ``sigma``,
    ``noise_multiplier``, ``cap_k``, ``l2_sensitivity``, ``distinct_pairs`` (the number of
    (user, item) pairs before capping), ``mechanism`` and the ledger (``ledger``, JSON).
    """

    check_range("cap_k", cap_k, low=1, integer=True)
    check_range("hist_delta", hist_delta, low=0, high=1, low_open=True, high_open=True)
    cap_k = int(cap_k)
    shape = counts_release(cap_k, 1.0)
    if noise_multiplier is None:
        if hist_epsilon is None:
            raise ConfigError("give hist_epsilon or noise_multiplier for the private histogram")
        check_range("hist_epsilon", hist_epsilon, low=0, low_open=True)
        planned = PlannedRelease(shape.name, shape.sensitivity, mechanism=shape.mechanism,
                                 coordinates=shape.coordinates, step=shape.step)
        sigma = calibrate([planned], float(hist_epsilon), float(hist_delta)).releases[0].noise_std
    else:
        check_range("noise_multiplier", noise_multiplier, low=0, low_open=True)
        sigma = float(noise_multiplier) * shape.sensitivity
    if noise is None:
        noise = NoiseSource.create(None if seed is None else int(seed))
    user, item = np.asarray(ratings.user), np.asarray(ratings.item)
    pairs = distinct_pairs(user, item, ratings.n_items)   # one per distinct pair
    ledger = PrivacyLedger(float(hist_delta))
    noisy, rel = private_counts(user[pairs], item[pairs], ratings.n_items, k=cap_k,
                                noise_std=sigma, cap_rng=noise.numpy_rng("histogram/cap"),
                                noise_rng=noise.random("histogram/noise"), ledger=ledger,
                                minimum=None)
    return noisy.astype(float), {
        "epsilon": float(ledger.epsilon()), "delta": float(hist_delta),
        "sigma": float(rel.noise_std), "noise_multiplier": float(rel.noise_multiplier),
        "cap_k": cap_k, "l2_sensitivity": float(rel.sensitivity),
        "distinct_pairs": int(pairs.size), "mechanism": rel.mechanism,
        "ledger": ledger.to_dict()}


def best_in_hindsight(H: HypothesisClass, xs, ys) -> tuple[int, int]:
    """(mistakes, index) of the best fixed hypothesis of ``H`` on the stream (exact,
    vectorised: ``err_h = Σ_x n0[x]·h(x) + n1[x]·(1 − h(x))``; smallest index on ties)."""
    xs = np.asarray(xs, dtype=np.int64)
    ys = np.asarray(ys, dtype=np.int64)
    if xs.size == 0:
        return 0, 0
    n1 = np.bincount(xs, weights=ys, minlength=H.n_points).astype(np.int64)
    n0 = np.bincount(xs, minlength=H.n_points) - n1
    M = H.matrix.astype(np.int64)
    err = M @ n0 + (1 - M) @ n1
    h = int(np.argmin(err))
    return int(err[h]), h


def model_rows(model_item_ids, item_ids) -> np.ndarray:
    """Row of each raw id of ``item_ids`` in a model whose rows have ``model_item_ids``
    (int64, −1 where the model does not have the item). Integer and text ids are compared
    as text when the two sides differ in kind (``5`` matches ``"5"``)."""
    mi, di = np.asarray(model_item_ids), np.asarray(item_ids)
    if mi.ndim != 1 or di.ndim != 1:
        raise DataError("item ids must be 1-D arrays")
    if mi.size == 0 or di.size == 0:
        return np.full(di.size, -1, np.int64)
    mi, di = _comparable(mi), _comparable(di)
    if (mi.dtype.kind == "i") != (di.dtype.kind == "i"):
        mi, di = mi.astype(str), di.astype(str)
    order = np.argsort(mi, kind="stable")
    sm = mi[order]
    pos = np.minimum(np.searchsorted(sm, di), sm.size - 1)
    return np.where(sm[pos] == di, order[pos], -1).astype(np.int64)


def _comparable(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iub":
        return a.astype(np.int64)
    if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        return a.astype(np.int64)
    return a.astype(str)


def model_score_edges(V, user_clip: float, buckets: int, method: str = "reference"
                      ) -> np.ndarray:
    """The ``buckets − 1`` increasing edges that quantise a score ``⟨u, v_i⟩`` into buckets
    ``0..buckets−1`` (``np.searchsorted(edges, s, side="right")``), from the released
    ``V`` (m, d) and the clip ``C = user_clip`` only — no streamed data.

    * ``"reference"`` (default): the rank quantiles ``k/buckets`` over items of
      ``⟨ū, v_i⟩`` for the public reference user ``ū = C·v̄/‖v̄‖`` (``v̄`` the mean row of
      ``V``, the direction real users' embeddings lie close to under implicit feedback;
      the top right-singular vector if ``v̄ = 0``): each bucket holds about the same
      number of items for that reference user.
    * ``"range"``: ``buckets`` equal-width bins of ``[−R, R]``, ``R = C·max_i ‖v_i‖`` (every
      score lies there, by Cauchy–Schwarz and ``‖u‖ ≤ C``); coarse, since most scores are
      far inside the bound.
    """
    check_range("buckets", buckets, low=1, integer=True)
    check_range("user_clip", user_clip, low=0, low_open=True)
    if method not in SCORE_EDGES:
        raise ConfigError(f"score edges must be one of {list(SCORE_EDGES)} (got {method!r})")
    V = np.asarray(V, np.float64)
    if V.ndim != 2 or V.shape[0] < 1 or not np.all(np.isfinite(V)):
        raise DataError("item embeddings must be a non-empty (m, d) array of finite numbers")
    B = int(buckets)
    if method == "range":
        R = float(user_clip) * float(np.linalg.norm(V, axis=1).max())
        R = R if R > 0 else 1.0
        return np.linspace(-R, R, B + 1)[1:-1]
    vbar = V.mean(axis=0)
    if np.linalg.norm(vbar) <= 1e-12 * max(1.0, float(np.abs(V).max())):
        vbar = np.linalg.svd(V, full_matrices=False)[2][0]
    ref = V @ (float(user_clip) * vbar / np.linalg.norm(vbar))
    return np.quantile(ref, np.arange(1, B) / B)


class IncrementalFoldIn:
    """Users' fold-in embeddings against released item embeddings, updated incrementally.

    User ``j``'s system is ``M_j = Σ_{i∈H_j} v_i v_iᵀ + α0 VᵀV + λI`` with right-hand side
    ``b_j = Σ_{i∈H_j} y_i v_i`` (``y_i = 1``: implicit feedback) and
    ``u_j = M_j⁻¹ b_j · min(1, C/‖M_j⁻¹ b_j‖)`` — :meth:`dpmt.model.Model.fold_in` of the
    history ``H_j``, in float64 numpy (``d`` is small). The history Grams
    ``Σ v_i v_iᵀ`` (n_users, d, d) and ``b_j`` (n_users, d) are kept per user; adding an
    item is a rank-one update and a solve is one ``np.linalg.solve`` of a d × d system.
    A history is a set: the caller adds an item at most once per user.
    """

    def __init__(self, V, n_users: int, *, reg: float, gravity: float, user_clip: float):
        V = np.asarray(V, np.float64)
        if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1 or not np.all(np.isfinite(V)):
            raise DataError("item embeddings must be a non-empty (m, d) array of finite "
                            "numbers")
        check_range("n_users", n_users, low=1, integer=True)
        check_range("reg", reg, low=0)
        check_range("gravity", gravity, low=0)
        check_range("user_clip", user_clip, low=0, low_open=True)
        if reg <= 0 and gravity <= 0:
            raise ConfigError("the fold-in needs reg > 0 or gravity > 0")
        d = V.shape[1]
        self.V, self.clip = V, float(user_clip)
        self.base = float(gravity) * (V.T @ V) + float(reg) * np.eye(d)
        self.gram = np.zeros((int(n_users), d, d))
        self.rhs = np.zeros((int(n_users), d))

    @property
    def dim(self) -> int:
        return int(self.V.shape[1])

    def _solve(self, M: np.ndarray, b: np.ndarray) -> np.ndarray:
        u = np.linalg.solve(M, b[..., None])[..., 0]
        norm = np.linalg.norm(u, axis=-1, keepdims=True)
        return u * (self.clip / np.maximum(norm, self.clip))

    def embedding(self, user: int) -> np.ndarray:
        """``u_j`` (d,) from the items added so far (0 for an empty history)."""
        return self._solve(self.base + self.gram[user], self.rhs[user])

    def add(self, user: int, row: int, y: float = 1.0) -> None:
        """Add item ``row`` (with label ``y``) to user ``user``'s history."""
        v = self.V[row]
        self.gram[user] += np.outer(v, v)
        self.rhs[user] += y * v

    def step(self, users, rows, add) -> np.ndarray:
        """Process ratings in stream order: the embedding (n, d) each rating sees — from
        the items its user added strictly before it (earlier calls, and earlier entries of
        this batch) — then the entries with ``add`` true join their user's history.
        A rating's own ``add`` never reaches its own embedding."""
        users = np.asarray(users, np.int64)
        rows = np.asarray(rows, np.int64)
        w = np.asarray(add, bool).astype(np.float64)
        n, d = users.size, self.dim
        if n == 0:
            return np.zeros((0, d))
        R = self.V[rows] * w[:, None]                         # y_i v_i (0 if not added)
        O = R[:, :, None] * self.V[rows][:, None, :]          # v_i v_iᵀ (0 if not added)
        order = np.argsort(users, kind="stable")              # by user, stream order inside
        us, O, R = users[order], O[order], R[order]
        new = np.r_[True, us[1:] != us[:-1]]
        starts = np.flatnonzero(new)
        lengths = np.diff(np.r_[starts, n])
        first = us[starts]                                    # distinct users
        # each rating's history sums: its user's state plus the user's earlier entries,
        # added one at a time in stream order (as :meth:`add` does, so no rounding ties one
        # user's numbers to another's), vectorised across users
        G = np.empty((n, d, d))
        b = np.empty((n, d))
        G[starts], b[starts] = self.gram[first], self.rhs[first]
        for k in range(1, int(lengths.max())):
            ix = starts[lengths > k] + k
            G[ix] = G[ix - 1] + O[ix - 1]
            b[ix] = b[ix - 1] + R[ix - 1]
        U = np.empty((n, d))
        U[order] = self._solve(self.base + G, b)
        last = starts + lengths - 1
        self.gram[first] = G[last] + O[last]
        self.rhs[first] = b[last] + R[last]
        return U

    def run(self, users, rows, add, chunk: int | None = None) -> np.ndarray:
        """:meth:`step` over a whole stream in chunks (bounded memory); (n, d)."""
        users = np.asarray(users, np.int64)
        chunk = int(chunk or max(256, 2 ** 20 // (self.dim * self.dim)))
        out = np.empty((users.size, self.dim))
        for a in range(0, users.size, chunk):
            out[a:a + chunk] = self.step(users[a:a + chunk], np.asarray(rows)[a:a + chunk],
                                         np.asarray(add)[a:a + chunk])
        return out


def _match_model_items(ratings, model, name: str, min_coverage: float) -> np.ndarray:
    """Model row of each item of ``ratings`` (−1: not in the model); refuses a model whose
    items do not match the dataset."""
    rows = model_rows(model.item_ids, ratings.item_ids)
    in_model = rows[np.asarray(ratings.item)] >= 0
    mdata = getattr(model.config, "dataset", "?")
    if not in_model.any():
        raise DataError(
            f"the model's item ids do not match {name}: none of its {ratings.n_items} items "
            f"is in the model ({len(model.item_ids)} items, trained on {mdata!r}; model ids "
            f"e.g. {np.asarray(model.item_ids)[:3].tolist()}, dataset ids e.g. "
            f"{np.asarray(ratings.item_ids)[:3].tolist()}); stream the dataset the model was "
            "trained on")
    cov = float(in_model.mean())
    if cov < min_coverage:
        raise DataError(
            f"the model's item ids do not match {name}: only {cov:.1%} of its ratings are of "
            f"items in the model (trained on {mdata!r}), below the minimum coverage "
            f"{min_coverage:g}; stream the model's dataset, or lower the minimum coverage")
    return rows


def _model_features(ratings, model, order, rows_of_item, buckets, score_edges):
    """(xs, scores, edges, history threshold) of the model-feature stream."""
    cfg = model.config
    V = np.asarray(model.item_embeddings, np.float64)
    users = np.asarray(ratings.user, np.int64)[order]
    rows = rows_of_item[np.asarray(ratings.item)[order]]
    thr = float(cfg.data.positive_threshold)
    cand = np.flatnonzero(np.asarray(ratings.value)[order] > thr)
    # a history is a set: only a pair's first liked rating adds the item (re-ratings don't)
    _, first = np.unique(users[cand] * V.shape[0] + rows[cand], return_index=True)
    add = np.zeros(order.size, bool)
    add[cand[first]] = True
    fold = IncrementalFoldIn(V, ratings.n_users, reg=cfg.fold_in_ridge,
                             gravity=cfg.fold_in_alpha0, user_clip=cfg.user_clip)
    U = fold.run(users, rows, add)
    scores = np.einsum("nd,nd->n", U, V[rows])
    edges = model_score_edges(V, cfg.user_clip, buckets, score_edges)
    xs = np.searchsorted(edges, scores, side="right").astype(np.int64)
    return xs, scores, edges, thr


def ratings_stream(ratings=None, *, dataset: str = "ml-100k", buckets: int = 32,
                   popularity="private", like_threshold: float = 4.0, cap_k: int = 50,
                   hist_epsilon: float | None = 1.0, hist_delta: float = 1e-6,
                   noise_multiplier: float | None = None, limit: int | None = None,
                   seed=None, data_dir: str | None = None, features: str = "popularity",
                   model=None, score_edges: str = "reference",
                   min_coverage: float = 0.5) -> RatingsStream:
    """Build the streamed-ratings task (see module docstring).

    Args:
      ratings: a :class:`dpmt.data.Ratings` (with timestamps); if None, ``dataset`` is
        loaded with ``dpmt.data.load``.
      buckets: number of buckets (the domain size).
      popularity: ``"private"``, ``"exact"`` or an array of public per-item scores
        (popularity features).
      like_threshold: ``y = 1[rating >= like_threshold]``.
      cap_k, hist_epsilon, hist_delta, noise_multiplier: the private histogram.
      limit: keep only the first ``limit`` ratings of the dataset in time order (then the
        ratings of items the model lacks are skipped).
      seed: seeds the capping, the noise and the bucket tie-breaks. None (default): fresh
        OS entropy; an int makes the stream reproducible, and then the private histogram
        is NOT private against anyone who knows the seed.
      data_dir: where ``dpmt.data.load`` keeps datasets (default: its own default).
      features: ``"popularity"`` (x = popularity bucket) or ``"model"`` (x = bucket of the
        model score ``⟨u_j, v_i⟩``, ``u_j`` from user j's earlier ratings).
      model: a trained model (``item_embeddings``, ``item_ids`` and a ``config`` with
        ``reg``, ``gravity``, ``user_clip``, ``positive_threshold``, e.g.
        :class:`dpmt.model.Model`); needed for model features. With either features, only
        ratings of items the model has are streamed (the rest counted in ``skipped``), so
        the two feature kinds see the same ratings.
      score_edges: ``"reference"`` or ``"range"`` (:func:`model_score_edges`).
      min_coverage: refuse a model whose items cover less than this share of the
        dataset's ratings (its ids do not match the dataset).
    """
    check_range("buckets", buckets, low=1, integer=True)
    check_range("like_threshold", like_threshold)
    check_range("min_coverage", min_coverage, low=0, high=1)
    if limit is not None:
        check_range("limit", limit, low=1, integer=True)
    if features not in FEATURES:
        raise ConfigError(f"features must be one of {list(FEATURES)} (got {features!r})")
    if features == "model" and model is None:
        raise ConfigError("model features need a trained model (model=...; CLI: --model DIR)")
    if model is not None and getattr(model.config, "task", "implicit") != "implicit":
        raise ConfigError(f"model features need an implicit-feedback model (task "
                          f"'implicit'); this one was trained with task "
                          f"{model.config.task!r}")
    if ratings is None:
        ratings = load_ratings(dataset, data_dir=data_dir)
        name = dataset
    else:
        name = getattr(ratings, "name", "ratings")
    if len(ratings) == 0:
        raise DataError("the ratings dataset is empty")
    ts = ratings.timestamp
    if ts is None:
        raise DataError(f"{name}: the ratings have no timestamps, so they cannot be streamed "
                        "in time order")
    rows_of_item = None
    if model is not None:
        rows_of_item = _match_model_items(ratings, model, name, float(min_coverage))
    ss = np.random.SeedSequence(seed)
    s_hist, s_buck = ss.spawn(2)
    order = np.argsort(np.asarray(ts), kind="stable")
    if limit is not None:
        order = order[: int(limit)]
    skipped = 0
    if rows_of_item is not None:
        keep = rows_of_item[np.asarray(ratings.item)[order]] >= 0
        skipped = int(order.size - keep.sum())
        order = order[keep]
        if order.size == 0:
            raise DataError(f"{name}: none of the streamed ratings is of an item in the "
                            "model (raise --limit)")
    ys = (np.asarray(ratings.value)[order] >= like_threshold).astype(np.int8)
    if features == "model":
        xs, scores, edges, thr = _model_features(ratings, model, order, rows_of_item,
                                                 int(buckets), score_edges)
        task = (f"will the user like the item (rating >= {like_threshold:g})? x = bucket of "
                f"the model score <u_j, v_i> (1 of {int(buckets)}, fixed {score_edges} edges "
                f"from the released V), u_j folded in from the user's earlier ratings > "
                f"{thr:g}; class: thresholds over buckets")
        st = Stream(xs, ys, {"kind": "ratings", "dataset": name, "features": "model",
                             "buckets": int(buckets)})
        return RatingsStream(
            stream=st, H=thresholds(int(buckets)), bucket_of_item=None, order=order,
            popularity="none", buckets=int(buckets), like_threshold=float(like_threshold),
            dataset=name, task=task, features="model", skipped=skipped, score_edges=edges,
            scores=scores, history_threshold=thr)
    info: dict = {}
    if isinstance(popularity, str) and popularity == "private":
        scores, info = private_item_counts(ratings, cap_k=cap_k, hist_epsilon=hist_epsilon,
                                           hist_delta=hist_delta,
                                           noise_multiplier=noise_multiplier,
                                           seed=None if seed is None else int(
                                               s_hist.generate_state(1)[0]))
        kind = "private"
    elif isinstance(popularity, str) and popularity == "exact":
        scores = ratings.item_counts().astype(float)
        kind = "exact"
    elif isinstance(popularity, str):
        raise ConfigError(f"popularity must be 'private', 'exact' or an array of public "
                          f"per-item scores (got {popularity!r})")
    else:
        scores = np.asarray(popularity, dtype=float)
        if scores.shape != (ratings.n_items,):
            raise ConfigError(f"public popularity scores need one value per item "
                              f"({ratings.n_items}); got shape {scores.shape}")
        kind = "public"
    bucket_of_item = popularity_buckets(scores, int(buckets), ties=np.random.default_rng(s_buck))
    xs = bucket_of_item[np.asarray(ratings.item)[order]]
    task = (f"will the user like the item (rating >= {like_threshold:g})? x = item popularity "
            f"bucket (1 of {int(buckets)}, from {kind} counts); class: thresholds over buckets")
    st = Stream(xs, ys, {"kind": "ratings", "dataset": name, "popularity": kind,
                         "buckets": int(buckets)})
    return RatingsStream(
        stream=st, H=thresholds(int(buckets)), bucket_of_item=bucket_of_item, order=order,
        popularity=kind, buckets=int(buckets), like_threshold=float(like_threshold),
        hist_epsilon=info.get("epsilon") if kind == "private" else (0.0 if kind == "public" else None),
        hist_delta=info.get("delta") if kind == "private" else (0.0 if kind == "public" else None),
        noise_sigma=info.get("sigma"), cap_k=info.get("cap_k"), dataset=name, task=task,
        skipped=skipped)
