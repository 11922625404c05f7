"""A second implicit-feedback generator: independent Bernoulli picks through a logistic link.

The project's own generator (:mod:`dpmt.data.synthetic`) plants a *nonnegative* topic model
and draws each user's items without replacement from a mixture. The rules behind dpmt's
defaults (:mod:`dpmt.train.defaults`) were read off data from that generator and ML-100K, so
judging them on it says little about data they were not fitted on (issue 28). This one
differs in what matters to a recommender: a signed Gaussian latent space instead of topics, a
logistic link instead of a mixture, and every (user, item) pair an independent coin:

    P(j picks i) = σ(c + a_j + b_i + s·⟨x_j, y_i⟩),

* x_j ~ N(0, I_r / r), y_i ~ N(0, I_r): ⟨x_j, y_i⟩ has variance 1 for every rank r;
  s = ``signal`` is the preference strength in logits (0: popularity and activity only);
* b_i = −α·log(rank_i + 1): Zipf-like item popularity of exponent α, popularity ranks
  assigned to item ids by a random permutation;
* a_j ~ N(0, σ²): user activity (σ = ``user_activity_sigma``);
* c: one global offset, found by bisection so that the expected number of picks is
  ``n_interactions`` (computed on up to :data:`_CALIBRATION_USERS` users, scaled to all).

The number of interactions is therefore a random variable with that mean (binomial spread,
relative std ≈ 1/√n_interactions). A user with no pick keeps one item, their most likely
one, so every user has at least one (the guarantee the protocols need); it adds at most
``n_users`` interactions. Sampled by chunks of users (one dense block of logits at a time),
no Python loop over users or items; everything is a deterministic function of the arguments.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from dpmt.data.ratings import Ratings
from dpmt.data.synthetic import refuse_file_options, spec_number, spec_pairs
from dpmt.errors import ConfigError, check_range

__all__ = ["LogisticTruth", "make_logistic_synthetic", "LOGISTIC_PREFIX", "is_logistic_spec",
           "parse_logistic_spec", "load_logistic_spec"]

#: dataset spec of this generator: ``logistic-synthetic[:users=...,items=...,...]``
LOGISTIC_PREFIX = "logistic-synthetic"
# users whose expected picks calibrate the offset c (all users below this many)
_CALIBRATION_USERS = 4000
_ALIASES = {"users": "n_users", "items": "n_items", "interactions": "n_interactions",
            "sigma": "user_activity_sigma"}
# logits per dense block (keeps temporaries ~ 32 MiB)
_BLOCK = 1 << 22


@dataclasses.dataclass(frozen=True)
class LogisticTruth:
    """The planted model: logits ``offset + user_offsets[j] + item_offsets[i] + signal ·
    user_factors[j] · item_factors[i]`` (float32 factors, (n, rank) and (m, rank))."""

    user_factors: np.ndarray
    item_factors: np.ndarray
    user_offsets: np.ndarray
    item_offsets: np.ndarray
    offset: float
    signal: float

    def logits(self, users: np.ndarray) -> np.ndarray:
        """(len(users), n_items) float32 logits of the given users."""
        x = self.user_factors[users]
        return (self.offset + self.user_offsets[users, None] + self.item_offsets[None, :]
                + self.signal * (x @ self.item_factors.T)).astype(np.float32)


def make_logistic_synthetic(n_users: int = 10_000, n_items: int = 2_000,
                            n_interactions: int = 500_000, rank: int = 16, alpha: float = 1.0,
                            user_activity_sigma: float = 1.0, signal: float = 2.0,
                            seed: int = 0, *, name: str = LOGISTIC_PREFIX,
                            return_truth: bool = False):
    """Implicit-feedback ratings (value 1.0) from the logistic model of the module docstring.

    Args:
      n_users, n_items: sizes (ids ``arange``, the item universe public: ``items_public``).
      n_interactions: the expected number of (user, item) picks; at most half the matrix.
      rank: r, the latent dimension of the preferences.
      alpha: α ≥ 0, the popularity exponent (0: no popularity).
      user_activity_sigma: σ ≥ 0 of the users' activity offsets.
      signal: s ≥ 0, the preference strength in logits.
      seed: everything is a deterministic function of the arguments.
      return_truth: also return the :class:`LogisticTruth`.

    Returns:
      :class:`~dpmt.data.Ratings` grouped by user (distinct pairs, every user ≥ 1 item), or
      ``(ratings, truth)``.
    """
    check_range("n_users", n_users, low=1, integer=True)
    check_range("n_items", n_items, low=1, integer=True)
    check_range("n_interactions", n_interactions, low=1, integer=True)
    check_range("rank", rank, low=1, high=4096, integer=True)
    check_range("alpha", alpha, low=0, high=10)
    check_range("user_activity_sigma", user_activity_sigma, low=0, high=10)
    check_range("signal", signal, low=0, high=100)
    n_users, n_items, n_interactions, rank = map(int, (n_users, n_items, n_interactions, rank))
    if n_interactions > n_users * n_items // 2:
        raise ConfigError(f"n_interactions ({n_interactions}) is more than half of n_users × "
                          f"n_items ({n_users} × {n_items}): a logistic model that dense is "
                          "no longer sparse feedback; lower it or add users/items")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x10615]))
    x = (rng.standard_normal((n_users, rank)) / np.sqrt(rank)).astype(np.float32)
    y = rng.standard_normal((n_items, rank)).astype(np.float32)
    pop_rank = rng.permutation(n_items)
    b = (-float(alpha) * np.log1p(pop_rank)).astype(np.float32)
    a = (float(user_activity_sigma) * rng.standard_normal(n_users)).astype(np.float32)
    truth = LogisticTruth(x, y, a, b, 0.0, float(signal))
    calib = np.sort(rng.choice(n_users, min(n_users, _CALIBRATION_USERS), replace=False))
    offset = _calibrate_offset(truth.logits(calib), n_interactions * len(calib) / n_users)
    truth = dataclasses.replace(truth, offset=offset)

    parts_u, parts_i = [], []
    step = max(1, _BLOCK // n_items)
    for lo in range(0, n_users, step):
        users = np.arange(lo, min(n_users, lo + step))
        logits = truth.logits(users)
        picked = rng.random(logits.shape, dtype=np.float32) < _sigmoid(logits)
        none = ~picked.any(axis=1)
        picked[np.flatnonzero(none), logits[none].argmax(axis=1)] = True
        u, i = np.nonzero(picked)                     # row-major: grouped by user
        parts_u.append(u + lo)
        parts_i.append(i)
    user = np.concatenate(parts_u).astype(np.int64)
    item = np.concatenate(parts_i).astype(np.int64)
    r = Ratings(user=user, item=item, value=np.ones(len(user), np.float32),
                user_ids=np.arange(n_users, dtype=np.int64),
                item_ids=np.arange(n_items, dtype=np.int64), name=name, items_public=True,
                implicit=True)
    return (r, truth) if return_truth else r


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return (0.5 * (1.0 + np.tanh(0.5 * z))).astype(np.float32)


def _calibrate_offset(logits: np.ndarray, target: float) -> float:
    """c with Σ σ(logits + c) = ``target`` (the sum is increasing in c: bisection)."""
    lo, hi = -60.0, 60.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if float(_sigmoid(logits + np.float32(mid)).sum(dtype=np.float64)) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def is_logistic_spec(spec: str) -> bool:
    """Whether ``spec`` names this generator (``logistic-synthetic`` or ``…:key=value,...``)."""
    s = str(spec).strip()
    return s == LOGISTIC_PREFIX or s.startswith(LOGISTIC_PREFIX + ":")


def parse_logistic_spec(spec: str) -> dict:
    """``"logistic-synthetic:users=500,items=100,signal=3"`` → keyword arguments of
    :func:`make_logistic_synthetic` (keys: users, items, interactions, sigma or the
    parameter names; unknown keys refused with the known list)."""
    if not is_logistic_spec(spec):
        raise ConfigError(f"not a {LOGISTIC_PREFIX} spec: {spec!r}")
    params = {k: p for k, p in inspect.signature(make_logistic_synthetic).parameters.items()
              if k not in ("return_truth", "name")}
    label = f"{LOGISTIC_PREFIX} spec {spec!r}"
    rest = str(spec).strip()[len(LOGISTIC_PREFIX) + 1:]
    return {key: spec_number(label, key, val, isinstance(params[key].default, int))
            for key, val in spec_pairs(rest, label, params, _ALIASES)}


def load_logistic_spec(spec: str, name: str | None = None, items=None,
                       columns=None) -> Ratings:
    """The Ratings of a ``logistic-synthetic[:...]`` spec (for :func:`dpmt.data.load`)."""
    refuse_file_options(spec, items, columns)
    return make_logistic_synthetic(**parse_logistic_spec(spec), name=name or str(spec).strip())
