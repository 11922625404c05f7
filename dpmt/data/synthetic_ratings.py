"""Synthetic *explicit* ratings shaped like MovieLens-10M: planted biases + low rank + noise.

Generative model (:func:`make_explicit_synthetic`), with d = ``rank``:

* Which pairs are rated: :func:`dpmt.data.synthetic.make_synthetic` with ``noise=1``
  (popularity only): item popularity p ∝ (r+1)^(−alpha) (Zipf, ranks randomly permuted over
  item ids), user activity n_j ∝ LogNormal(0, σ) water-filled to ``min_per_user`` <= n_j <=
  ``max_per_user`` with Σ n_j = ``n_ratings`` exactly, and each user's n_j distinct items a
  draw without replacement from p. Each (user, item) pair at most once; which items a user
  rates does not depend on the user's taste (missing at random given popularity).
* The rating of pair (j, i):

      r_ji = clip(round₀.₅(μ + b_j + b_i + ⟨x_j, y_i⟩ + e_ji), 0.5, 5)

  with μ = ``global_mean``, b_j ~ N(0, ``user_bias_std``²), b_i = ``item_bias_std`` · z_i +
  ``popularity_bias`` · s_i (z_i ~ N(0, 1), s_i the standardised log p_i: popular items
  are rated higher, as in MovieLens), x_j, y_i ~ N(0, (``factor_std``²/d)^(1/2) I_d) so that
  ⟨x_j, y_i⟩ has variance ``factor_std``², e_ji ~ N(0, ``noise_std``²), and round₀.₅ rounds
  to the nearest half star (the ML-10M scale 0.5, 1, ..., 5).

With the defaults the parts' standard deviations are 0.45 (user), ≈ 0.46 (item), 0.4 (low
rank) and 0.8 (noise). At the default sizes the ratings' mean is ≈ 3.53 and their spread
≈ 1.03 (ML-10M: 3.51, 1.06; μ = 3.4 is below the data's mean because popular items, which
get most ratings, have the larger b_i), and the planted model itself, clipped, has RMSE
≈ 0.755 (noise, half-star rounding, the clips); ML-10M's best factorisations reach ≈ 0.78.

Datasets by name (:func:`dpmt.data.load`): ``explicit-synthetic`` (the ML-10M sizes:
70,000 users, 10,000 items, 10M ratings) or ``explicit-synthetic:users=5000,items=1000,
ratings=200000,seed=0`` (any parameter of :func:`make_explicit_synthetic`; ``scale=0.1``
multiplies users and ratings). The name does not start with ``synthetic`` on purpose: those
datasets are implicit feedback, and these are ratings (``task="rating"``, or binarised at
``positive_threshold`` for the implicit task).

Pure numpy, deterministic in ``seed``; the ratings are computed in chunks of 2^20 pairs
(the default 10M ratings: about 5 s and 0.6 GB peak on one core; 200k: 0.1 s).
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from dpmt.data.ratings import Ratings
from dpmt.data.synthetic import (_planted_model, make_synthetic, refuse_file_options, spec_number,
                                 spec_pairs)
from dpmt.errors import ConfigError, DataError, check_range

__all__ = ["ExplicitTruth", "make_explicit_synthetic", "explicit_synthetic_truth",
           "parse_explicit_spec", "load_explicit_spec", "is_explicit_spec", "EXPLICIT_PREFIX",
           "QUICK_EXPLICIT_SPEC"]

#: the dataset name of :func:`make_explicit_synthetic` in :func:`dpmt.data.load`
EXPLICIT_PREFIX = "explicit-synthetic"
#: a scaled-down instance (5k users × 1k items × 200k ratings: generated in well under 1 s)
QUICK_EXPLICIT_SPEC = f"{EXPLICIT_PREFIX}:users=5000,items=1000,ratings=200000"
#: the ML-10M rating scale
STARS = (0.5, 5.0)
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class ExplicitTruth:
    """The planted model behind :func:`make_explicit_synthetic`.

    Attributes: ``global_mean`` μ; ``user_bias`` b_j (n_users,) and ``item_bias`` b_i
    (n_items,), float32; ``user_factors`` x (n_users, rank) and ``item_factors`` y
    (n_items, rank), float32; ``noise_std``; ``item_popularity`` p (n_items,), sums to 1;
    ``user_activity`` n_j (n_users,), int64.
    """

    global_mean: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    user_factors: np.ndarray
    item_factors: np.ndarray
    noise_std: float
    item_popularity: np.ndarray
    user_activity: np.ndarray

    def expected(self, users, items) -> np.ndarray:
        """μ + b_j + b_i + ⟨x_j, y_i⟩ for paired index arrays, float32 (n,): the planted
        rating before noise, rounding and clipping (chunked: no (n, rank) temporaries)."""
        users, items = np.asarray(users), np.asarray(items)
        out = np.empty(len(users), np.float32)
        for a in range(0, len(users), _CHUNK):
            u, i = users[a:a + _CHUNK], items[a:a + _CHUNK]
            out[a:a + len(u)] = (np.einsum("ij,ij->i", self.user_factors[u],
                                           self.item_factors[i])
                                 + self.user_bias[u] + self.item_bias[i] + self.global_mean)
        return out

    def predict(self, users, items) -> np.ndarray:
        """The planted expected rating clipped to the star scale: what an oracle predicts."""
        return np.clip(self.expected(users, items), *STARS)


def _sizes(n_users, n_items, n_ratings, min_per_user, max_per_user):
    check_range("n_users", n_users, low=1, integer=True)
    check_range("n_items", n_items, low=1, integer=True)
    check_range("n_ratings", n_ratings, low=1, integer=True)
    n_users, n_items, n_ratings = int(n_users), int(n_items), int(n_ratings)
    cap = max(1, int(0.7 * n_items)) if max_per_user is None else max_per_user
    check_range("max_per_user", cap, low=1, high=n_items, integer=True)
    lo = min(20, max(1, n_ratings // n_users)) if min_per_user is None else min_per_user
    check_range("min_per_user", lo, low=1, high=int(cap), integer=True)
    if not n_users * int(lo) <= n_ratings <= n_users * int(cap):
        raise ConfigError(f"n_ratings ({n_ratings}) must lie between n_users × min_per_user "
                          f"({n_users} × {lo}) and n_users × max_per_user ({n_users} × {cap}):"
                          f" change n_ratings, or add users or items")
    return n_users, n_items, n_ratings, int(lo), int(cap)


def _planted(n_users, n_items, rank, p, global_mean, user_bias_std, item_bias_std,
             popularity_bias, factor_std, seed):
    """Biases and factors, from ``default_rng([seed, 1])`` in a fixed order."""
    rng = np.random.default_rng([int(seed), 1])
    bu = rng.normal(0.0, user_bias_std, n_users)
    logp = np.log(p)
    s = (logp - logp.mean()) / (logp.std() or 1.0)
    bi = rng.normal(0.0, item_bias_std, n_items) + popularity_bias * s
    scale = (factor_std ** 2 / rank) ** 0.25
    x = rng.normal(0.0, scale, (n_users, rank))
    y = rng.normal(0.0, scale, (n_items, rank))
    f32 = lambda a: a.astype(np.float32)
    return float(global_mean), f32(bu), f32(bi), f32(x), f32(y)


def _check_model(rank, alpha, user_activity_sigma, global_mean, user_bias_std, item_bias_std,
                 popularity_bias, factor_std, noise_std, seed):
    check_range("rank", rank, low=1, integer=True)
    check_range("alpha", alpha, low=0)
    check_range("user_activity_sigma", user_activity_sigma, low=0)
    check_range("global_mean", global_mean, low=STARS[0], high=STARS[1])
    for nm, v in (("user_bias_std", user_bias_std), ("item_bias_std", item_bias_std),
                  ("factor_std", factor_std), ("noise_std", noise_std)):
        check_range(nm, v, low=0)
    check_range("popularity_bias", popularity_bias, low=-5, high=5)
    check_range("seed", seed, low=0, integer=True)


def make_explicit_synthetic(n_users: int = 70_000, n_items: int = 10_000,
                            n_ratings: int = 10_000_000, rank: int = 16, alpha: float = 0.9,
                            user_activity_sigma: float = 1.2, global_mean: float = 3.4,
                            user_bias_std: float = 0.45, item_bias_std: float = 0.45,
                            popularity_bias: float = 0.1, factor_std: float = 0.4,
                            noise_std: float = 0.8, seed: int = 0,
                            return_truth: bool = False, *, min_per_user: int | None = None,
                            max_per_user: int | None = None,
                            name: str = EXPLICIT_PREFIX):
    """Explicit half-star ratings with planted biases, a low-rank term and noise (ML-10M-like).

    r_ji = clip(round₀.₅(μ + b_j + b_i + ⟨x_j, y_i⟩ + e_ji), 0.5, 5); the model and the
    choice of rated pairs are in the module docstring.

    Parameters
    ----------
    n_users, n_items, n_ratings : int
        Sizes (default: ML-10M's 70k users, 10k items, 10M ratings).
    rank : int
        d, the dimension of the planted factors.
    alpha : float
        Zipf exponent of item popularity (0.9: the top tenth of the items get about 54% of
        the ratings at the default sizes, 49% at 5k users × 1k items × 200k ratings).
    user_activity_sigma : float
        σ of the lognormal user activity (1.2: the mean user rates about twice the median's
        count, as in ML-10M).
    global_mean, user_bias_std, item_bias_std, popularity_bias, factor_std, noise_std : float
        μ, the spreads of b_j, of b_i's random part, b_i's slope in standardised log
        popularity, of ⟨x_j, y_i⟩ and of the noise e_ji.
    seed : int
        Everything is a deterministic function of the arguments.
    return_truth : bool
        Also return the :class:`ExplicitTruth`.
    min_per_user, max_per_user : int, optional
        Floor and cap on ratings per user (default min(20, n_ratings // n_users), as every
        ML-10M user rated at least 20; and 70% of n_items, ML-10M's heaviest user's share).
    name : str
        ``Ratings.name``.

    Returns
    -------
    Ratings, or (Ratings, ExplicitTruth) with ``return_truth``
        ``user_ids = arange(n_users)``, ``item_ids = arange(n_items)``, rows grouped by user,
        values float32 in {0.5, 1, ..., 5}, no timestamps; ``items_public=True`` (the item
        universe is ``range(n_items)``, fixed by the arguments), ``implicit=False``.
    """

    n_users, n_items, n_ratings, lo, cap = _sizes(n_users, n_items, n_ratings, min_per_user,
                                                  max_per_user)
    _check_model(rank, alpha, user_activity_sigma, global_mean, user_bias_std, item_bias_std,
                 popularity_bias, factor_std, noise_std, seed)
    pairs, pt = make_synthetic(n_users, n_items, n_ratings, alpha=alpha, rank=1,
                               user_activity_sigma=user_activity_sigma, noise=1.0,
                               seed=int(seed), return_truth=True, max_per_user=cap,
                               min_per_user=lo, name=name)
    truth = ExplicitTruth(*_planted(n_users, n_items, int(rank), pt.item_popularity,
                                    global_mean, user_bias_std, item_bias_std,
                                    popularity_bias, factor_std, seed)[:5],
                          noise_std=float(noise_std), item_popularity=pt.item_popularity,
                          user_activity=pt.user_activity)
    rng = np.random.default_rng([int(seed), 2])
    value = np.empty(pairs.nnz, np.float32)
    for a in range(0, pairs.nnz, _CHUNK):
        u, i = pairs.user[a:a + _CHUNK], pairs.item[a:a + _CHUNK]
        r = truth.expected(u, i)
        r += np.float32(noise_std) * rng.standard_normal(len(u), dtype=np.float32)
        value[a:a + len(u)] = np.clip(np.round(2.0 * r) / 2.0, *STARS)
    out = dataclasses.replace(pairs, value=value, implicit=False)
    return (out, truth) if return_truth else out


def explicit_synthetic_truth(**kwargs) -> ExplicitTruth:
    """The :class:`ExplicitTruth` of ``make_explicit_synthetic(**kwargs)`` (same keyword
    arguments, ``return_truth`` aside), without drawing any rating."""

    sig = inspect.signature(make_explicit_synthetic)
    bound = sig.bind_partial(**{k: v for k, v in kwargs.items()
                                if k not in ("return_truth", "name")})
    bound.apply_defaults()
    a = bound.arguments
    n_users, n_items, n_ratings, lo, cap = _sizes(a["n_users"], a["n_items"], a["n_ratings"],
                                                  a["min_per_user"], a["max_per_user"])
    _check_model(a["rank"], a["alpha"], a["user_activity_sigma"], a["global_mean"],
                 a["user_bias_std"], a["item_bias_std"], a["popularity_bias"],
                 a["factor_std"], a["noise_std"], a["seed"])
    # make_synthetic's popularity and activity (its concentration default: 0.1)
    _, p, k, _, _ = _planted_model(n_users, n_items, n_ratings, a["alpha"], 1,
                                   a["user_activity_sigma"], 0.1, int(a["seed"]), cap, lo)
    planted = _planted(n_users, n_items, int(a["rank"]), p, a["global_mean"],
                       a["user_bias_std"], a["item_bias_std"], a["popularity_bias"],
                       a["factor_std"], a["seed"])
    return ExplicitTruth(*planted, noise_std=float(a["noise_std"]), item_popularity=p,
                         user_activity=k)


# ----------------------------------------------------------------------------------------
# "explicit-synthetic:key=value,..." dataset specs
# ----------------------------------------------------------------------------------------
_ALIASES = {"users": "n_users", "items": "n_items", "ratings": "n_ratings",
            "sigma": "user_activity_sigma"}
_INTEGER_KEYS = ("n_users", "n_items", "n_ratings", "rank", "seed", "min_per_user",
                 "max_per_user")


def is_explicit_spec(spec) -> bool:
    """Whether ``spec`` names this generator (``explicit-synthetic[:...]``)."""
    return str(spec).strip().partition(":")[0].strip() == EXPLICIT_PREFIX


def parse_explicit_spec(spec: str) -> dict:
    """``"explicit-synthetic:users=5000,items=1000,ratings=200000"`` -> keyword arguments of
    :func:`make_explicit_synthetic`. Keys: users, items, ratings, sigma, any other parameter,
    and ``scale`` (multiplies users and ratings; items unchanged)."""
    head, _, rest = str(spec).strip().partition(":")
    if head.strip() != EXPLICIT_PREFIX:
        raise DataError(f"not an {EXPLICIT_PREFIX} spec: {spec!r}")
    params = {k: p for k, p in inspect.signature(make_explicit_synthetic).parameters.items()
              if k not in ("return_truth", "name")}
    label = f"dataset {spec!r}"
    kwargs: dict = {}
    for key, val in spec_pairs(rest, label, params, _ALIASES, extra=("scale",)):
        kwargs[key] = spec_number(label, key, val, key in _INTEGER_KEYS)
    if "scale" in kwargs:
        scale = kwargs.pop("scale")
        check_range("scale", scale, low=0, low_open=True)
        for key in ("n_users", "n_ratings"):
            kwargs[key] = max(1, round(kwargs.get(key, params[key].default) * scale))
    return kwargs


def load_explicit_spec(spec: str, name: str | None = None, items=None,
                       columns=None) -> Ratings:
    """The Ratings of an ``explicit-synthetic[:...]`` spec (for :func:`dpmt.data.load`)."""
    refuse_file_options(spec, items, columns)
    return make_explicit_synthetic(**parse_explicit_spec(spec), name=name or str(spec).strip())
