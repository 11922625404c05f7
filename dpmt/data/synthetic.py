"""Synthetic implicit-feedback data with Zipf item popularity and a planted low-rank model.

Generative model (``make_synthetic``), with C = ``rank`` latent topics:

* Item popularity: the item of popularity rank r (0-based) has weight p ∝ (r+1)^(-alpha);
  ranks are assigned to item ids by a random permutation, so id order means nothing.
* User activity: user j gets n_j ≈ n_interactions · a_j / Σa items, a_j ~ LogNormal(0, σ),
  with min_per_user (default 1) <= n_j <= max_per_user and Σ n_j = n_interactions exactly
  (water-filling).
* Preferences (a nonnegative rank-C factorisation, as in LDA / Poisson factorisation):
  user topic weights θ_j ~ Dirichlet(concentration · 1_C), item topic weights
  φ_i ~ Dirichlet(concentration · 1_C). User j picks items from

      q_j(i) = p_i · g_j(i),   g_j(i) = (1 - noise) · Σ_c θ_jc φ_ic / Z_c + noise,

  Z_c = Σ_i p_i φ_ic, which sums to 1 over items: with probability ``noise`` a pick
  follows popularity alone, otherwise a topic c ~ θ_j is chosen and then an item
  ∝ p_i φ_ic. ``g`` is the planted preference multiplier; ``Θ Φ̃ᵀ`` (Φ̃ = φ/Z) has rank C.
* Each user's n_j distinct items are a draw *without replacement* from q_j by successive
  sampling: an i.i.d. sequence from q_j, repeats skipped, first n_j distinct items kept
  (the same law as Gumbel-top-k on log q_j).

Vectorised implementation: per chunk of users, per-topic draw counts come from one
``rng.multinomial`` call, items from per-topic inverse-CDF guide tables (one batch per topic,
C iterations), each draw gets a uniform "time"; one int64 sort per chunk keeps each
(user, item)'s first time, a second orders each user's distinct items by time. Users whose
≈ 2·n_j draws hold fewer than n_j distinct items (heavy users, concentrated tastes) keep
them all and continue their sequence with 4x, then 16x more draws; the few still short
finish exactly by Gumbel-top-k on log q_j over the items not yet taken (the continuation
of a successive sample is a successive sample of the rest). So the sampling is exact,
with no Python loop over users or items.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from dpmt.data.ratings import Ratings, stable_argsort_int
from dpmt.errors import ConfigError, DataError, check_range

__all__ = ["SyntheticTruth", "make_synthetic", "make_synthetic_like", "synthetic_item_topics",
           "DATASET_SIZES", "parse_synthetic_spec"]

#: (users, items, interactions) of the MovieLens releases, as shipped by GroupLens.
DATASET_SIZES = {
    "ml-100k": (943, 1682, 100_000),
    "ml-1m": (6040, 3706, 1_000_209),
    "ml-10m": (69_878, 10_677, 10_000_054),
    "ml-20m": (138_493, 26_744, 20_000_263),
    "ml-25m": (162_541, 59_047, 25_000_095),
    "ml-latest-small": (610, 9724, 100_836),
}

# Draws handled per chunk: keeps temporaries in cache (fresh pages are expensive).
_CHUNK_DRAWS = 1 << 18
# Dense exact sampler: user rows × items scored per block.
_DENSE_BLOCK = 1 << 21
# Bits of the uniform "time" of a draw (ties, ~m²/2^21 per user, are broken by item id).
_TIME_BITS = 20
_MAX_ITEM_BITS = 63 - _TIME_BITS - 18


@dataclasses.dataclass(frozen=True)
class SyntheticTruth:
    """The planted model behind a synthetic dataset.

    Attributes
    ----------
    user_factors : float32 (n_users, rank)
        θ_j, topic weights of each user (rows sum to 1).
    item_factors : float32 (n_items, rank)
        φ_ic / Z_c, so that ``affinity = user_factors @ item_factors.T`` (rank ``rank``).
    item_popularity : float64 (n_items,)
        p_i, sums to 1.
    user_activity : int64 (n_users,)
        Number of items of each user.
    noise : float
        Share of popularity-only picks.
    """

    user_factors: np.ndarray
    item_factors: np.ndarray
    item_popularity: np.ndarray
    user_activity: np.ndarray
    noise: float

    def affinity(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """<θ_j, φ̃_i> for paired index arrays, float32 (n,). Mean 1 under p."""
        return np.einsum("ij,ij->i", self.user_factors[users], self.item_factors[items])

    def preference(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """g_j(i) = q_j(i) / p_i, the planted multiplier of popularity, float32 (n,)."""
        return (1 - self.noise) * self.affinity(users, items) + self.noise


def _allocate(total: int, weights: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Integers lo <= k_j <= hi with Σk = total, k_j ≈ min(hi, lo + λ·w_j) (water-filling).

    λ by bisection on the monotone Σ min(hi, lo + λw); the integer remainder goes to the
    users with the largest fractional parts (ties: lower index).
    """
    n = len(weights)
    lam_lo, lam_hi = 0.0, 1.0
    while np.minimum(hi, lo + lam_hi * weights).sum() < total:
        lam_hi *= 2.0
    for _ in range(100):
        lam = 0.5 * (lam_lo + lam_hi)
        if np.minimum(hi, lo + lam * weights).sum() < total:
            lam_lo = lam
        else:
            lam_hi = lam
    x = np.minimum(hi, lo + lam_hi * weights)
    k = np.floor(x).astype(np.int64)
    short = total - int(k.sum())
    if short > 0:
        frac = np.where(k < hi, x - k, -1.0)
        k[np.argsort(-frac, kind="stable")[:short]] += 1
    elif short < 0:                                  # float round-off: take back
        frac = np.where(k > lo, x - k, 2.0)
        k[np.argsort(frac, kind="stable")[:-short]] -= 1
    assert k.sum() == total and k.min() >= lo and k.max() <= hi and len(k) == n
    return k


class _Categorical:
    """Inverse-CDF sampler with a guide table: draw u starts at guide[floor(u·K)] and walks
    a step or two (~8x faster than searchsorted over 10^4+ outcomes, which misses cache)."""

    def __init__(self, probs: np.ndarray):
        self.order = np.argsort(-probs, kind="stable")   # big first: short walks
        cdf = np.cumsum(probs[self.order])
        self.cdf = cdf / cdf[-1]
        self.K = 4 * len(probs)
        self.guide = np.searchsorted(self.cdf, np.arange(self.K) / self.K, side="right")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        u = rng.random(n)
        r = self.guide[(u * self.K).astype(np.int64)]
        for _ in range(4):                               # a few vectorised steps...
            adv = self.cdf[r] <= u
            if not adv.any():
                break
            r += adv
        else:                                            # ...then binary search the rest
            rest = np.flatnonzero(self.cdf[r] <= u)      # (buckets of many tiny outcomes)
            r[rest] = np.searchsorted(self.cdf, u[rest], side="right")
        return self.order[np.minimum(r, len(self.order) - 1)]


def _member(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(x, sorted_set)`` by binary search (np.isin hashes: several times slower)."""
    if not len(sorted_set):
        return np.zeros(len(x), bool)
    pos = np.minimum(np.searchsorted(sorted_set, x), len(sorted_set) - 1)
    return sorted_set[pos] == x


def _cat(parts: list, dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


class _Sampler:
    def __init__(self, theta, phi_tilde, p, k, noise, rng):
        self.theta, self.phi, self.p, self.k = theta, phi_tilde, p, k
        self.noise, self.rng = noise, rng
        self.n_items = len(p)
        self.pop = _Categorical(p)
        self.topics = [_Categorical(p * phi_tilde[:, c]) for c in range(theta.shape[1])]

    def pool(self, users: np.ndarray, need: np.ndarray, factor: float,
             taken: np.ndarray | None = None):
        """Continue each user's successive sampling with ≈ factor·need i.i.d. draws.

        Parameters: ``users`` sorted, ``need`` (same length) items still to pick, ``taken``
        sorted int64 keys ``user·n_items + item`` already picked (skipped as repeats).

        Returns (user, item, short_users, short_need): the picks in order, and the users
        whose draws held fewer new distinct items than needed; *all* their new distinct
        items are among the picks (they are the next ones of the same sequence), so the
        next round continues where this one stopped. No Python loop over users.
        """
        rng, n_items, C = self.rng, self.n_items, self.theta.shape[1]
        bi = max(1, int(n_items - 1).bit_length())
        out_u, out_i, short_u, short_n = [], [], [], []
        m_all = np.ceil(factor * need).astype(np.int64) + 10
        ends = np.cumsum(m_all)
        a = 0
        while a < len(users):
            # users [a, b) with about _CHUNK_DRAWS draws in total
            b = int(np.searchsorted(ends, (ends[a - 1] if a else 0) + _CHUNK_DRAWS,
                                    side="right"))
            b = max(b, a + 1)
            us, m, nd = users[a:b], m_all[a:b], need[a:b]
            n_noise = rng.binomial(m, self.noise) if self.noise > 0 else np.zeros_like(m)
            per_topic = rng.multinomial(m - n_noise, self.theta[us])       # (b, C)
            local = np.arange(len(us), dtype=np.int64)
            lu = [np.repeat(local, n_noise)]
            it = [self.pop.draw(rng, int(n_noise.sum()))]
            for c in range(C):                                # C batches, not per user
                lu.append(np.repeat(local, per_topic[:, c]))
                it.append(self.topics[c].draw(rng, int(per_topic[:, c].sum())))
            lu = np.concatenate(lu)
            it = np.concatenate(it)
            t = rng.integers(0, 1 << _TIME_BITS, len(lu), dtype=np.int64)
            # 1) by (user, item, time): the first entry of each pair has its first time
            key = ((lu << bi | it) << _TIME_BITS) | t
            key.sort()
            pair = key >> _TIME_BITS
            first = np.r_[True, pair[1:] != pair[:-1]]
            key = key[first]
            lu, it, t = key >> (_TIME_BITS + bi), (key >> _TIME_BITS) & ((1 << bi) - 1), \
                key & ((1 << _TIME_BITS) - 1)
            if taken is not None and len(taken):              # repeats of earlier rounds
                new = ~_member(us[lu] * n_items + it, taken)
                lu, it, t = lu[new], it[new], t[new]
            # 2) by (user, time): each user's new distinct items in the order they came
            key = ((lu << _TIME_BITS | t) << bi) | it
            key.sort()
            lu = key >> (_TIME_BITS + bi)
            it = key & ((1 << bi) - 1)
            distinct = np.bincount(lu, minlength=len(us))
            start = np.cumsum(distinct) - distinct
            rank = np.arange(len(lu)) - start[lu]
            keep = rank < nd[lu]
            out_u.append(us[lu[keep]])
            out_i.append(it[keep])
            short = distinct < nd
            short_u.append(us[short])
            short_n.append((nd - distinct)[short])
            a = b
        return (_cat(out_u, np.int32), _cat(out_i, np.int32), _cat(short_u, np.int64),
                _cat(short_n, np.int64))

    def dense(self, users: np.ndarray, need: np.ndarray, taken_u: np.ndarray,
              taken_i: np.ndarray):
        """Exact continuation by Gumbel-top-k on log q_j over the items not yet taken.

        Given its first picks, the rest of a successive sample is again successive
        sampling over the remaining items, i.e. Gumbel-top-(need) on log q_j with taken
        items excluded. ``users`` sorted; ``taken_u``/``taken_i`` the picks so far.
        """
        out_u, out_i = [], []
        rows = max(1, _DENSE_BLOCK // self.n_items)
        log_p = np.log(self.p)
        for a in range(0, len(users), rows):
            us, nd = users[a:a + rows], need[a:a + rows]
            g = (1 - self.noise) * (self.theta[us] @ self.phi.T) + self.noise  # (b, items)
            score = np.log(np.maximum(g, 1e-30)) + log_p
            score -= np.log(-np.log(self.rng.random(score.shape)))          # + Gumbel
            mine = _member(taken_u, us)
            score[np.searchsorted(us, taken_u[mine]), taken_i[mine]] = -np.inf
            kmax = int(nd.max())
            if kmax < self.n_items:
                top = np.argpartition(-score, kmax - 1, axis=1)[:, :kmax]
            else:
                top = np.broadcast_to(np.arange(self.n_items), score.shape)
            order = np.argsort(-np.take_along_axis(score, top, axis=1), axis=1, kind="stable")
            top = np.take_along_axis(top, order, axis=1)
            keep = np.arange(top.shape[1]) < nd[:, None]
            out_u.append(np.broadcast_to(us[:, None], top.shape)[keep])
            out_i.append(top[keep])
        return _cat(out_u, np.int32), _cat(out_i, np.int32)


def _planted_model(n_users, n_items, n_interactions, alpha, rank, user_activity_sigma,
                   concentration, seed, cap, lo=1):
    """The model parameters, drawn first from ``default_rng(seed)`` in a fixed order.

    Returns (rng, p (n_items,), k (n_users,), θ (n_users, rank), φ (n_items, rank)); the
    rng continues into the sampling.
    """
    rng = np.random.default_rng(seed)
    p_rank = np.power(np.arange(1, n_items + 1, dtype=np.float64), -float(alpha))
    p = np.empty(n_items)
    p[rng.permutation(n_items)] = p_rank / p_rank.sum()
    activity = rng.lognormal(0.0, float(user_activity_sigma), n_users)
    k = _allocate(n_interactions, activity, lo, cap)
    conc = np.full(rank, float(concentration))
    theta = rng.dirichlet(conc, n_users)
    phi = rng.dirichlet(conc, n_items)
    return rng, p, k, theta, phi


def synthetic_item_topics(n_users: int = 10_000, n_items: int = 2_000,
                          n_interactions: int = 500_000, alpha: float = 1.0, rank: int = 16,
                          user_activity_sigma: float = 1.0, noise: float = 0.1,
                          concentration: float = 0.1, seed: int = 0, *,
                          max_per_user: int | None = None, min_per_user: int = 1,
                          **_ignored) -> np.ndarray:
    """The planted item topic weights φ of ``make_synthetic(same arguments)``, without
    sampling any interactions: float32 (n_items, rank), rows sum to 1. The synthetic
    analogue of public item metadata such as genres (see ``dpmt.data.item_features_for``).
    """
    cap = n_items if max_per_user is None else int(max_per_user)
    _, _, _, _, phi = _planted_model(int(n_users), int(n_items), int(n_interactions), alpha,
                                     int(rank), user_activity_sigma, concentration, seed, cap,
                                     int(min_per_user))
    return phi.astype(np.float32)


def make_synthetic(n_users: int = 10_000, n_items: int = 2_000, n_interactions: int = 500_000,
                   alpha: float = 1.0, rank: int = 16, user_activity_sigma: float = 1.0,
                   noise: float = 0.1, concentration: float = 0.1, seed: int = 0,
                   return_truth: bool = False, *, max_per_user: int | None = None,
                   min_per_user: int = 1, pool_factor: float = 2.0, name: str = "synthetic"):
    """Implicit-feedback ratings (value 1.0) with Zipf popularity and low-rank preferences.

    Parameters
    ----------
    n_users, n_items, n_interactions : int
        Sizes; every user gets at least one item, no (user, item) pair repeats.
    alpha : float
        Zipf exponent of item popularity, p ∝ (rank+1)^(-alpha); 0 is uniform.
    rank : int
        Number of latent topics C (rank of the planted preference matrix).
    user_activity_sigma : float
        σ of the lognormal per-user activity; 0 gives (almost) equal activity.
    noise : float in [0, 1]
        Share of picks that follow popularity alone (1: no preference signal at all).
    concentration : float
        Dirichlet parameter of user and item topic weights; small values (< 1) give users
        and items few topics each, i.e. a strong preference signal.
    seed : int
        Everything is a deterministic function of the arguments.
    return_truth : bool
        Also return the :class:`SyntheticTruth`.
    max_per_user : int, optional
        Cap on items per user (default n_items).
    min_per_user : int
        Floor on items per user (ML-10M / ML-20M: every user rated at least 20).
    pool_factor : float
        Draws per user, in multiples of its item count, before the exact fallback.

    Returns
    -------
    Ratings, or (Ratings, SyntheticTruth) with ``return_truth``
        ``user_ids = arange(n_users)``, ``item_ids = arange(n_items)`` (int64), rows grouped
        by user, value 1.0, no timestamps. ``items_public=True``: the item universe is
        ``range(n_items)``, fixed by the arguments, items no one picked included.
    """
    check_range("n_users", n_users, low=1, integer=True)
    check_range("n_items", n_items, low=1, high=2 ** _MAX_ITEM_BITS, integer=True)
    check_range("n_interactions", n_interactions, low=1, integer=True)
    check_range("alpha", alpha, low=0)
    check_range("rank", rank, low=1, integer=True)
    check_range("user_activity_sigma", user_activity_sigma, low=0)
    check_range("noise", noise, low=0, high=1)
    check_range("concentration", concentration, low=0, low_open=True)
    check_range("pool_factor", pool_factor, low=1)
    n_users, n_items, n_interactions, rank = map(int, (n_users, n_items, n_interactions, rank))
    cap = n_items if max_per_user is None else max_per_user
    check_range("max_per_user", cap, low=1, high=n_items, integer=True)
    cap = int(cap)
    check_range("min_per_user", min_per_user, low=1, high=cap, integer=True)
    lo = int(min_per_user)
    if n_interactions < n_users * lo:
        raise ConfigError(f"n_interactions ({n_interactions}) must be >= n_users × "
                          f"min_per_user ({n_users} × {lo}): every user gets at least "
                          f"{lo} item{'s' * (lo > 1)}; lower min_per_user or add interactions")
    if n_interactions > n_users * cap:
        raise ConfigError(f"n_interactions ({n_interactions}) exceeds n_users × max items per "
                          f"user ({n_users} × {cap}); lower it or add users/items")
    rng, p, k, theta, phi = _planted_model(n_users, n_items, n_interactions, alpha, rank,
                                           user_activity_sigma, concentration, seed, cap, lo)
    phi_tilde = phi / (p @ phi)                          # φ_ic / Z_c
    s = _Sampler(theta, phi_tilde, p, k, float(noise), rng)

    # Successive sampling in rounds: each round continues the sequences of the users
    # still short, with 4x more draws; the last few users finish exactly (dense).
    users, need = np.arange(n_users, dtype=np.int64), k
    parts_u, parts_i = [], []
    factor = float(pool_factor)
    for _ in range(3):
        taken = None
        if parts_u:
            tu = np.concatenate(parts_u)
            mine = _member(tu, users)
            taken = np.sort(tu[mine].astype(np.int64) * n_items + np.concatenate(parts_i)[mine])
        us, it, users, need = s.pool(users, need, factor, taken)
        parts_u.append(us)
        parts_i.append(it)
        if not len(users):
            break
        factor *= 4
    if len(users):
        tu, ti = np.concatenate(parts_u), np.concatenate(parts_i)
        mine = _member(tu, users)
        us, it = s.dense(users, need, tu[mine], ti[mine])
        parts_u.append(us)
        parts_i.append(it)
    user = np.concatenate(parts_u)
    item = np.concatenate(parts_i)
    if len(parts_u) > 1:                                 # keep rows grouped by user
        o = stable_argsort_int(user)
        user, item = user[o], item[o]
    r = Ratings(user=user, item=item, value=np.ones(len(user), np.float32),
                user_ids=np.arange(n_users, dtype=np.int64),
                item_ids=np.arange(n_items, dtype=np.int64), name=name,
                items_public=True,              # the universe 0..n_items-1, rated or not
                implicit=True)
    if return_truth:
        return r, SyntheticTruth(theta.astype(np.float32), phi_tilde.astype(np.float32), p, k,
                                 float(noise))
    return r


def make_synthetic_like(dataset: str = "ml-20m", scale: float = 1.0, **kwargs):
    """``make_synthetic`` with the sizes of a MovieLens release.

    ``scale`` multiplies the numbers of users and interactions (items unchanged), e.g.
    ``make_synthetic_like("ml-20m", scale=0.1)`` for a tenth of ML-20M. Other keyword
    arguments go to :func:`make_synthetic`.
    """
    kwargs.setdefault("name", f"synthetic-{dataset}" + ("" if scale == 1 else f"x{scale:g}"))
    return make_synthetic(**like_sizes(dataset, scale), **kwargs)


def like_sizes(dataset: str, scale: float = 1.0) -> dict:
    """``n_users``, ``n_items``, ``n_interactions`` of :func:`make_synthetic_like`."""
    if dataset not in DATASET_SIZES:
        raise ConfigError(f"unknown dataset {dataset!r} for make_synthetic_like; known: "
                          f"{', '.join(DATASET_SIZES)}")
    check_range("scale", scale, low=0, low_open=True)
    u, i, n = DATASET_SIZES[dataset]
    n_users = max(1, round(u * scale))
    n_inter = min(max(n_users, round(n * scale)), n_users * i)
    return {"n_users": n_users, "n_items": i, "n_interactions": n_inter}


# ----------------------------------------------------------------------------------------
# "synthetic:key=value,..." dataset specs
# ----------------------------------------------------------------------------------------
def _synthetic_params() -> dict[str, inspect.Parameter]:
    return {k: p for k, p in inspect.signature(make_synthetic).parameters.items()
            if k not in ("return_truth", "name")}


_SYN_ALIASES = {"users": "n_users", "items": "n_items", "interactions": "n_interactions",
                "sigma": "user_activity_sigma"}


def spec_pairs(rest: str, label: str, params, aliases: dict, extra=()):
    """``(key, text value)`` of each ``key=value`` of a generator spec's ``rest`` (after the
    ``name:``), aliases resolved; refuses a malformed part and a key that is neither a
    parameter of ``params`` nor in ``extra`` (the message lists the known keys). ``label``
    starts every message (e.g. ``"synthetic spec 'synthetic:...'"``)."""
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, val = (x.strip() for x in part.partition("="))
        key = aliases.get(key, key)
        if not eq or not val:
            raise ConfigError(f"{label}: expected key=value, got {part!r}")
        if key not in extra and key not in params:
            known = [*aliases, *extra] + [k for k in params if k not in aliases.values()]
            raise ConfigError(f"{label}: unknown key {key!r}; known keys: {', '.join(known)}")
        yield key, val


def refuse_file_options(spec: str, items=None, columns=None) -> None:
    """A generator spec has its own items 0..n_items-1 and a fixed layout: ``items=`` and
    ``columns=`` (which describe a ratings file) are refused with what to do."""
    if items is not None or columns:
        raise ConfigError(f"items= / columns= (CLI: --items, --columns) describe a ratings "
                          f"file; {spec!r} is synthetic, with its own items 0..n_items-1 and "
                          f"a fixed layout: leave them out")


def spec_number(label: str, key: str, val: str, integer: bool):
    """The number a spec's ``key=val`` gives (an int if ``integer``), or a ConfigError."""
    try:
        num = float(val)
    except ValueError:
        raise ConfigError(f"{label}: {key}={val!r} is not a number") from None
    if integer:
        if not num.is_integer():
            raise ConfigError(f"{label}: {key} must be an integer (got {val})")
        return int(num)
    return num


def parse_synthetic_spec(spec: str) -> dict:
    """``"synthetic:users=500,items=100,alpha=1.2"`` -> keyword arguments of make_synthetic.

    Keys: users, items, interactions (or n_users, ...), sigma (user_activity_sigma), any
    other :func:`make_synthetic` parameter, and ``like=<dataset>`` / ``scale=<float>`` for
    :func:`make_synthetic_like`. (Used by :func:`dpmt.data.load` for ``synthetic:...``.)
    """
    head, _, rest = spec.partition(":")
    if head.strip() != "synthetic":
        raise DataError(f"not a synthetic spec: {spec!r}")
    params = _synthetic_params()
    label = f"synthetic spec {spec!r}"
    kwargs: dict = {}
    for key, val in spec_pairs(rest, label, params, _SYN_ALIASES, extra=("like", "scale")):
        if key == "like":
            kwargs[key] = val
            continue
        default = 1.0 if key == "scale" else params[key].default
        kwargs[key] = spec_number(label, key, val, isinstance(default, int)
                                  and not isinstance(default, bool))
    return kwargs
