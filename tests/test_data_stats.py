"""Stats against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import Ratings, format_summary, gini, summary
from dpmt.errors import DataError


def ratings_with_item_counts(counts, n_users=None):
    """Item i is rated by users 0..counts[i]-1; values cycle 1..5."""
    users = np.concatenate([np.arange(c) for c in counts])
    items = np.repeat(np.arange(len(counts)), counts)
    n_users = n_users or int(max(counts))
    values = (np.arange(len(users)) % 5) + 1.0
    return Ratings(user=users, item=items, value=values, user_ids=np.arange(n_users),
                   item_ids=np.arange(len(counts)), name="hand")


def test_gini_hand_values():
    assert gini([1, 1, 1, 1]) == 0.0
    assert gini([0, 0, 0, 4]) == pytest.approx(0.75)     # (2·4 − 4 − 1)·4 / (4·4)
    assert gini([1, 2, 3]) == pytest.approx(2 / 9)       # ((−2)·1 + 0·2 + 2·3) / (3·6)
    assert gini([]) == 0.0 and gini([0, 0]) == 0.0


# 10 items with counts 7,3,2,1,1,0,0,0,0,0: 14 interactions, 7 users
COUNTS = [7, 3, 2, 1, 1, 0, 0, 0, 0, 0]


def test_summary_hand_values():
    r = ratings_with_item_counts(COUNTS, n_users=8)       # user 7 has no ratings
    d = summary(r)
    assert (d["users"], d["items"], d["interactions"]) == (8, 10, 14)
    assert (d["active_users"], d["active_items"]) == (7, 5)
    assert d["density"] == pytest.approx(14 / 80)
    assert (d["rating_min"], d["rating_max"]) == (1.0, 5.0)
    assert d["rating_mean"] == pytest.approx(np.mean((np.arange(14) % 5) + 1))
    assert d["top10_item_share"] == pytest.approx(7 / 14)  # ceil(10% of 10) = 1 item
    x = np.sort(COUNTS)
    k = np.arange(1, 11)
    assert d["gini_items"] == pytest.approx(((2 * k - 11) * x).sum() / (10 * 14))
    q = d["item_count_quantiles"]
    assert list(q) == ["min", "p10", "p25", "p50", "p75", "p90", "p99", "max"]
    assert (q["min"], q["p50"], q["max"]) == (0.0, 0.5, 7.0)
    assert q["p90"] == pytest.approx(3 + 0.1 * 4)           # between 3 and 7 at position 8.1
    assert d["items_le_5"] == 9
    # per-user counts: user 0 rated 5 items, user 1 rated 3, user 2 rated 2, 3..6 one
    assert (d["user_count_min"], d["user_count_max"]) == (0, 5)
    assert d["user_count_median"] == 1.0
    # buckets of 2 items, tail first (as the evaluation): [0,0], [0,0], [0,1], [1,2], [3,7]
    assert [b["items"] for b in d["buckets"]] == [2] * 5
    assert [b["share"] for b in d["buckets"]] == pytest.approx([0, 0, 1 / 14, 3 / 14, 10 / 14])
    assert (d["buckets"][-1]["min_count"], d["buckets"][-1]["max_count"]) == (3, 7)


def test_buckets_uneven_sizes_sum_to_one():
    d = summary(ratings_with_item_counts([5, 4, 3, 3, 2, 2, 1]))
    assert [b["items"] for b in d["buckets"]] == [2, 2, 1, 1, 1]
    assert d["buckets"][0]["max_count"] <= d["buckets"][-1]["min_count"]   # tail first
    assert sum(b["share"] for b in d["buckets"]) == pytest.approx(1.0)


def test_format_summary_mentions_everything():
    text = format_summary(summary(ratings_with_item_counts(COUNTS, n_users=8)))
    assert text.startswith("Dataset: hand")
    for needle in ("users", "8  (7 with ratings)", "interactions", "14", "density",
                   "17.5000%", "top 10% items' share", "50.0%", "Gini of n_i",
                   "items with n_i <= 5", "9 (90.0% of items)", "p99", "bucket",
                   "71.4%"):
        assert needle in text, needle
    assert len(text.splitlines()) == 23


def test_summary_empty():
    r = Ratings(user=np.zeros(0), item=np.zeros(0), value=np.zeros(0),
                user_ids=np.arange(3), item_ids=np.arange(3), name="e")
    with pytest.raises(DataError, match="'e': it has no ratings"):
        summary(r)


def test_info_buckets_are_the_evaluation_buckets():
    """`dpmt info` and the reports number the same buckets the same way (B1 = tail)."""
    from dpmt.data.stats import popularity_buckets

    counts = [9, 0, 4, 4, 1, 7, 2, 2, 3, 5, 6, 1]
    r = ratings_with_item_counts(counts)
    d = summary(r)
    b = popularity_buckets(r.item_counts(), len(d["buckets"]))
    for k, bk in enumerate(d["buckets"]):
        c = r.item_counts()[b == k]
        assert (bk["items"], bk["min_count"], bk["max_count"]) == (len(c), c.min(), c.max())
