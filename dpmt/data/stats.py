"""Dataset statistics: sizes, rating scale, and how skewed the tasks (items) are.

These are exact, non-private statistics of the data: for describing datasets
(``dpmt info``), not for release alongside a private model.
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.data.ratings import Ratings
from dpmt.errors import DataError, check_range

__all__ = ["summary", "format_summary", "gini", "popularity_buckets", "QUANTILES", "N_BUCKETS"]

#: Quantiles of the per-item counts n_i reported by :func:`summary`.
QUANTILES = (0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0)
#: Number of equal-size popularity buckets (the head/tail view of the evaluation protocol).
N_BUCKETS = 5


def popularity_buckets(scores, n_buckets: int = N_BUCKETS, *, ties="index") -> np.ndarray:
    """Bucket id (0 = least popular) of every item: the items sorted by ``scores`` ascending
    and split into ``n_buckets`` groups of equal size (sizes differ by at most one, the
    larger first), i.e. rank quantiles.

    The one bucketing of dpmt: the evaluation's head/tail view (scores = training counts,
    ``ties="index"``: ties by item index, deterministic) and the online stream's features
    (scores = released counts; ``ties="random"`` breaks ties from OS entropy, or pass a
    ``np.random.Generator``). Returns int32 (m,).
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise DataError("popularity scores must be a non-empty 1-D array of finite numbers")
    check_range("n_buckets", n_buckets, low=1, high=scores.size, integer=True)
    if isinstance(ties, str) and ties == "index":
        order = np.argsort(scores, kind="stable")
    else:
        rng = np.random.default_rng() if isinstance(ties, str) and ties == "random" else ties
        if not isinstance(rng, np.random.Generator):
            raise DataError(f"ties must be 'index', 'random' or a numpy Generator (got {ties!r})")
        order = np.lexsort((rng.random(scores.size), scores))
    out = np.empty(scores.size, np.int32)
    for b, part in enumerate(np.array_split(order, int(n_buckets))):
        out[part] = b
    return out


def gini(x: np.ndarray) -> float:
    """Gini coefficient of non-negative values (0 = all equal, → 1 = one holds all).

    G = Σ_k (2k - n - 1) x_(k) / (n Σ x) with x sorted ascending, k = 1..n.
    """
    x = np.sort(np.asarray(x, np.float64))
    n = len(x)
    total = x.sum()
    if n == 0 or total == 0:
        return 0.0
    k = np.arange(1, n + 1)
    return float(np.sum((2 * k - n - 1) * x) / (n * total))


def _qname(q: float) -> str:
    return {0.0: "min", 1.0: "max"}.get(q, f"p{q * 100:g}")


def summary(r: Ratings) -> dict:
    """Summary statistics of a ratings set.

    Returns
    -------
    dict with keys
        ``name``, ``users``, ``items`` (index-space sizes), ``active_users``,
        ``active_items`` (with >= 1 rating), ``interactions``, ``density``
        (interactions / (users·items)), ``rating_min``, ``rating_max``, ``rating_mean``,
        ``user_count_min`` / ``_median`` / ``_mean`` / ``_max`` (ratings per user),
        ``top10_item_share`` (share of interactions on the ceil(10%) most rated items),
        ``gini_items`` (Gini of n_i over all items), ``item_count_quantiles`` (dict
        min/p10/p25/p50/p75/p90/p99/max of n_i, linear interpolation), ``items_le_5``
        (items with n_i <= 5, zero included), and ``buckets``: a list of
        :data:`N_BUCKETS` dicts (``items``, ``min_count``, ``max_count``, ``share``) for
        items sorted by n_i ascending (ties by index) and cut into equal-size buckets,
        tail first — the buckets of the evaluation (:func:`dpmt.metrics.popularity_buckets`),
        numbered B1 (tail) … B5 (head) in every report.
    """
    if r.nnz == 0 or r.n_items == 0:
        raise DataError(f"cannot summarise {r.name!r}: it has no ratings")
    n_i = r.item_counts()
    n_u = r.user_counts()
    nnz = r.nnz
    by_pop = np.argsort(-n_i, kind="stable")
    sorted_counts = n_i[by_pop]
    top = max(1, math.ceil(0.1 * r.n_items))
    buckets = []
    for chunk in np.array_split(n_i[np.argsort(n_i, kind="stable")], N_BUCKETS):
        if len(chunk) == 0:
            continue
        buckets.append({"items": int(len(chunk)), "min_count": int(chunk.min()),
                        "max_count": int(chunk.max()), "share": float(chunk.sum() / nnz)})
    qs = np.quantile(n_i, QUANTILES)
    return {
        "name": r.name,
        "users": int(r.n_users),
        "items": int(r.n_items),
        "active_users": int(np.count_nonzero(n_u)),
        "active_items": int(np.count_nonzero(n_i)),
        "interactions": int(nnz),
        "density": float(nnz / (r.n_users * r.n_items)),
        "rating_min": float(r.value.min()),
        "rating_max": float(r.value.max()),
        "rating_mean": float(r.value.astype(np.float64).mean()),
        "user_count_min": int(n_u.min()),
        "user_count_median": float(np.median(n_u)),
        "user_count_mean": float(nnz / r.n_users),
        "user_count_max": int(n_u.max()),
        "top10_item_share": float(sorted_counts[:top].sum() / nnz),
        "gini_items": gini(n_i),
        "item_count_quantiles": {_qname(q): float(v) for q, v in zip(QUANTILES, qs)},
        "items_le_5": int(np.count_nonzero(n_i <= 5)),
        "buckets": buckets,
    }


def _num(x) -> str:
    if isinstance(x, (int, np.integer)):
        return f"{x:,}"
    x = float(x)
    return f"{x:,.0f}" if x.is_integer() and abs(x) < 1e15 else f"{x:.4g}"


def format_summary(d: dict) -> str:
    """A readable text table of :func:`summary`'s dict."""
    rows = [
        ("users", f"{_num(d['users'])}  ({_num(d['active_users'])} with ratings)"),
        ("items", f"{_num(d['items'])}  ({_num(d['active_items'])} with ratings)"),
        ("interactions", _num(d["interactions"])),
        ("density", f"{d['density']:.4%}"),
        ("ratings", f"{_num(d['rating_min'])} .. {_num(d['rating_max'])}, mean "
                    f"{d['rating_mean']:.3f}"),
        ("ratings per user", f"min {_num(d['user_count_min'])}, median "
                             f"{_num(d['user_count_median'])}, mean "
                             f"{d['user_count_mean']:.1f}, max {_num(d['user_count_max'])}"),
        ("top 10% items' share", f"{d['top10_item_share']:.1%} of interactions"),
        ("Gini of n_i", f"{d['gini_items']:.3f}"),
        ("items with n_i <= 5", f"{_num(d['items_le_5'])} "
                                f"({d['items_le_5'] / d['items']:.1%} of items)"),
    ]
    width = max(len(k) for k, _ in rows)
    out = [f"Dataset: {d['name']}", ""]
    out += [f"  {k:<{width}}  {v}" for k, v in rows]
    q = d["item_count_quantiles"]
    out += ["", "  Ratings per item (n_i) quantiles:",
            "    " + "  ".join(f"{k:>7}" for k in q),
            "    " + "  ".join(f"{_num(v):>7}" for v in q.values())]
    out += ["", "  Items by popularity, equal-size buckets (B1 = tail, as in the reports):",
            f"    {'bucket':<10}{'items':>9}{'n_i range':>20}{'share':>9}"]
    nb = len(d["buckets"])
    for b, bk in enumerate(d["buckets"], start=1):
        rng = f"{_num(bk['min_count'])} .. {_num(bk['max_count'])}"
        tag = " tail" if b == 1 else " head" if b == nb else ""
        out.append(f"    {'B' + str(b) + tag:<10}{_num(bk['items']):>9}{rng:>20}"
                   f"{bk['share']:>9.1%}")
    return "\n".join(out)
