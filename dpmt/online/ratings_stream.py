"""Streamed ratings: turn a ratings dataset into an online binary prediction task.

Task ("will this user like this item"): ratings are replayed in timestamp order; at round
``t`` the predictor sees ``x_t`` = the *popularity bucket* of the rated item and must
predict ``y_t = 1[rating >= like_threshold]`` (default 4 on a 1–5 scale). The hypothesis
class is thresholds over buckets, ``h_θ(x) = 1[bucket >= θ]`` ("users like items at least
this popular"), ``θ = 0..buckets``.

Popularity comes from one of:

* ``"private"`` (default): a privately released item histogram. Each user keeps at most
  ``cap_k`` of their ratings (a uniformly random subset, seeded); per-item counts of the kept
  ratings get i.i.d. Gaussian noise. Adding or removing one user changes at most ``k``
  counts by 1, so the L2 sensitivity is ``√k`` and the noise is ``σ = z·√k`` for noise
  multiplier ``z``. The release is ``(ε_h, δ_h)``-DP at the **user level** (add/remove one
  user), with ``ε_h`` from ``dp_accounting``'s exact analytic Gaussian-mechanism conversion
  (``get_epsilon_gaussian``); give either ``hist_epsilon`` (then ``z`` is calibrated with
  ``get_sigma_gaussian``) or ``noise_multiplier``. The item universe (the list of item ids)
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
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpmt.errors import ConfigError, DataError, DpmtError, check_range
from dpmt.online.hypotheses import HypothesisClass, thresholds
from dpmt.online.streams import Stream

__all__ = ["RatingsStream", "ratings_stream", "load_ratings", "synthetic_ratings", "private_item_counts",
           "popularity_buckets", "best_in_hindsight", "histogram_epsilon", "cap_per_user"]


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
    """

    stream: Stream
    H: HypothesisClass
    bucket_of_item: np.ndarray
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
    class). Pairs may repeat across time (a re-rating); that does not matter for streams.
    """
    from dpmt.data import Ratings

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


def cap_per_user(user: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the kept ratings: for each user a uniformly random subset of at most
    ``k`` of their ratings (vectorised; each user's choice uses only their own ratings)."""
    n = len(user)
    keys = rng.random(n)
    order = np.lexsort((keys, user))
    u_sorted = user[order]
    starts = np.r_[0, np.flatnonzero(np.diff(u_sorted)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, n])) if n else np.zeros(0, np.int64)
    rank = np.arange(n) - run_start
    return np.sort(order[rank < k])


def histogram_epsilon(noise_multiplier: float, delta: float) -> float:
    """User-level ε at ``delta`` of the capped Gaussian histogram with noise multiplier
    ``z = σ/√k`` (exact analytic Gaussian mechanism, via dp_accounting)."""
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    return float(get_epsilon_gaussian(float(noise_multiplier), float(delta)))


def private_item_counts(ratings, *, cap_k: int = 50, hist_epsilon: float | None = 1.0,
                        hist_delta: float = 1e-6, noise_multiplier: float | None = None,
                        seed=0) -> tuple[np.ndarray, dict]:
    """Gaussian-noised per-item counts with each user capped at ``cap_k`` ratings.

    Give ``hist_epsilon`` (calibrates the noise) or ``noise_multiplier`` (then ε is
    computed). Returns ``(noisy_counts, info)`` with ``info`` holding ``epsilon``,
    ``delta``, ``sigma``, ``noise_multiplier``, ``cap_k``, ``l2_sensitivity``.
    """
    from dp_accounting.gaussian_mechanism import get_sigma_gaussian

    check_range("cap_k", cap_k, low=1, integer=True)
    check_range("hist_delta", hist_delta, low=0, high=1, low_open=True, high_open=True)
    cap_k = int(cap_k)
    if noise_multiplier is None:
        if hist_epsilon is None:
            raise ConfigError("give hist_epsilon or noise_multiplier for the private histogram")
        check_range("hist_epsilon", hist_epsilon, low=0, low_open=True)
        z = float(get_sigma_gaussian(float(hist_epsilon), float(hist_delta)))
    else:
        check_range("noise_multiplier", noise_multiplier, low=0, low_open=True)
        z = float(noise_multiplier)
    eps = histogram_epsilon(z, hist_delta)
    rng = np.random.default_rng(seed)
    keep = cap_per_user(np.asarray(ratings.user), cap_k, rng)
    counts = np.bincount(np.asarray(ratings.item)[keep], minlength=ratings.n_items)
    sigma = z * np.sqrt(cap_k)
    noisy = counts + rng.normal(0.0, sigma, size=counts.shape)
    return noisy, {"epsilon": eps, "delta": float(hist_delta), "sigma": float(sigma),
                   "noise_multiplier": z, "cap_k": cap_k, "l2_sensitivity": float(np.sqrt(cap_k))}


def popularity_buckets(scores, n_buckets: int, seed=0) -> np.ndarray:
    """Rank-quantile buckets of ``scores`` (0 = lowest); ties broken uniformly at random."""
    check_range("buckets", n_buckets, low=1, integer=True)
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ConfigError("popularity scores must be a non-empty 1-D array of finite numbers")
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(scores.size), scores))
    rank = np.empty(scores.size, np.int64)
    rank[order] = np.arange(scores.size)
    return (rank * int(n_buckets)) // scores.size


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


def ratings_stream(ratings=None, *, dataset: str = "ml-100k", buckets: int = 32,
                   popularity="private", like_threshold: float = 4.0, cap_k: int = 50,
                   hist_epsilon: float | None = 1.0, hist_delta: float = 1e-6,
                   noise_multiplier: float | None = None, limit: int | None = None,
                   seed=0, data_dir: str | None = None) -> RatingsStream:
    """Build the streamed-ratings task (see module docstring).

    Args:
      ratings: a :class:`dpmt.data.Ratings` (with timestamps); if None, ``dataset`` is
        loaded with ``dpmt.data.load``.
      buckets: number of popularity buckets (the domain size).
      popularity: ``"private"``, ``"exact"`` or an array of public per-item scores.
      like_threshold: ``y = 1[rating >= like_threshold]``.
      cap_k, hist_epsilon, hist_delta, noise_multiplier: the private histogram.
      limit: keep only the first ``limit`` ratings of the stream (after ordering).
      seed: seeds the capping, the noise and the bucket tie-breaks.
      data_dir: where ``dpmt.data.load`` keeps datasets (default: its own default).
    """
    check_range("buckets", buckets, low=1, integer=True)
    check_range("like_threshold", like_threshold)
    if limit is not None:
        check_range("limit", limit, low=1, integer=True)
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
    ss = np.random.SeedSequence(seed)
    s_hist, s_buck = ss.spawn(2)
    info: dict = {}
    if isinstance(popularity, str) and popularity == "private":
        scores, info = private_item_counts(ratings, cap_k=cap_k, hist_epsilon=hist_epsilon,
                                           hist_delta=hist_delta,
                                           noise_multiplier=noise_multiplier,
                                           seed=np.random.default_rng(s_hist))
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
    bucket_of_item = popularity_buckets(scores, int(buckets), seed=np.random.default_rng(s_buck))
    order = np.argsort(np.asarray(ts), kind="stable")
    if limit is not None:
        order = order[: int(limit)]
    xs = bucket_of_item[np.asarray(ratings.item)[order]]
    ys = (np.asarray(ratings.value)[order] >= like_threshold).astype(np.int8)
    task = (f"will the user like the item (rating >= {like_threshold:g})? x = item popularity "
            f"bucket (1 of {int(buckets)}, from {kind} counts); class: thresholds over buckets")
    st = Stream(xs, ys, {"kind": "ratings", "dataset": name, "popularity": kind,
                         "buckets": int(buckets)})
    return RatingsStream(
        stream=st, H=thresholds(int(buckets)), bucket_of_item=bucket_of_item, order=order,
        popularity=kind, buckets=int(buckets), like_threshold=float(like_threshold),
        hist_epsilon=info.get("epsilon") if kind == "private" else (0.0 if kind == "public" else None),
        hist_delta=info.get("delta") if kind == "private" else (0.0 if kind == "public" else None),
        noise_sigma=info.get("sigma"), cap_k=info.get("cap_k"), dataset=name, task=task)
