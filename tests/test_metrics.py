"""Ranking metrics and RMSE against brute-force Python implementations."""

import math

import numpy as np
import pytest

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError
from dpmt.data.stats import popularity_buckets
from dpmt.metrics import popularity_score_fn, popularity_scores, ranking_metrics, rmse

KS = (1, 3, 10)


def make_split(n=40, m=30, seed=0):
    rng = np.random.default_rng(seed)
    u, i, t = [], [], []
    for j in range(n):
        k = rng.integers(2, 15)
        items = rng.choice(m, size=k, replace=False, p=np.arange(1, m + 1)[::-1] / (m * (m + 1) / 2))
        cut = max(1, int(0.7 * k))
        u += [j] * k
        i += items.tolist()
        t += [0] * cut + [1] * (k - cut)
    u, i, t = map(np.array, (u, i, t))
    mk = lambda s: Ratings(u[s], i[s], np.ones(s.sum()), np.arange(n), np.arange(m))
    hist, tgt = mk(t == 0), mk(t == 1)
    # one target pair duplicated into the history: must be ignored as a target
    j0 = tgt.user[0]
    hist = Ratings(np.append(hist.user, j0), np.append(hist.item, tgt.item[0]),
                   np.ones(hist.nnz + 1), np.arange(n), np.arange(m))
    return hist, tgt


def brute_force(scores, hist, tgt, ks, buckets):
    n, m = scores.shape
    nb = 0 if buckets is None else buckets.max() + 1
    acc = {sl: {f"{x}@{k}": [] for k in ks for x in ("recall", "ndcg")} for sl in range(nb + 1)}
    for u in range(n):
        H = set(hist.item[hist.user == u].tolist())
        P = set(tgt.item[tgt.user == u].tolist()) - H
        for sl in range(nb + 1):
            items = range(m) if sl == 0 else [i for i in range(m) if buckets[i] == sl - 1]
            Ps = P & set(items)
            if not Ps:
                continue
            cand = [i for i in items if i not in H]
            ranked = sorted(cand, key=lambda i: (-scores[u, i], i))
            for k in ks:
                top = ranked[:k]
                hits = [1.0 if i in Ps else 0.0 for i in top]
                acc[sl][f"recall@{k}"].append(sum(hits) / min(k, len(Ps)))
                dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits))
                idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(Ps))))
                acc[sl][f"ndcg@{k}"].append(dcg / idcg)
    return {sl: {key: (np.mean(v) if v else np.nan) for key, v in d.items()}
            for sl, d in acc.items()}, {sl: len(d[f"recall@{ks[0]}"]) for sl, d in acc.items()}


def compare(res, ref, counts, nb):
    entries = [res["overall"]] + res["buckets"]
    assert len(entries) == nb + 1
    for sl, e in enumerate(entries):
        assert e["users"] == counts[sl]
        for key, v in ref[sl].items():
            if np.isnan(v):
                assert np.isnan(e[key])
            else:
                assert e[key] == pytest.approx(v, abs=1e-6), (sl, key)


def test_popularity_buckets_equal_size_least_popular_first():
    counts = np.array([5, 1, 9, 3, 3, 0, 7, 2, 8, 4, 6, 1, 10])
    b = popularity_buckets(counts, 5)
    sizes = np.bincount(b, minlength=5)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == len(counts)
    for k in range(4):                       # every item of bucket k is ≤ every item of k+1
        assert counts[b == k].max() <= counts[b == k + 1].min()
    assert b[5] == 0 and b[12] == 4
    with pytest.raises(ConfigError):
        popularity_buckets(counts, 0)


def test_ranking_metrics_match_brute_force_with_embeddings():
    hist, tgt = make_split()
    rng = np.random.default_rng(1)
    # small integer embeddings: exact float32 scores with many ties (tie-break = lower index)
    U = rng.integers(-2, 3, (hist.n_users, 3)).astype(np.float32)
    V = rng.integers(-2, 3, (hist.n_items, 3)).astype(np.float32)
    buckets = popularity_buckets(hist.item_counts())
    res = ranking_metrics(U, V, hist, tgt, ks=KS, item_buckets=buckets, batch_size=16)
    ref, counts = brute_force(U @ V.T, hist, tgt, KS, buckets)
    compare(res, ref, counts, 5)
    assert res["overall"]["users"] > 20
    # a subset of users, U_eval indexed by position
    users = np.array([3, 7, 11, 20, 31])
    sub = ranking_metrics(U[users], V, hist, tgt, ks=KS, eval_users=users, batch_size=2)
    mask = np.isin(np.arange(hist.n_users), users)
    ref, counts = brute_force(np.where(mask[:, None], U @ V.T, 0), hist.select(np.isin(
        hist.user, users)), tgt.select(np.isin(tgt.user, users)), KS, None)
    compare(sub, ref, counts, 0)


def test_popularity_baseline_through_same_code():
    hist, tgt = make_split()                   # same shapes as above: shared compilation
    pop = popularity_scores(hist)
    np.testing.assert_array_equal(pop, hist.item_counts())
    buckets = popularity_buckets(hist.item_counts())
    res = ranking_metrics(None, None, hist, tgt, ks=KS, item_buckets=buckets,
                          score_fn=popularity_score_fn(hist), batch_size=16)
    ref, counts = brute_force(np.broadcast_to(pop, (hist.n_users, hist.n_items)), hist, tgt, KS,
                              buckets)
    compare(res, ref, counts, 5)
    with pytest.raises(ConfigError):
        ranking_metrics(None, None, hist, tgt)


def test_rmse_overall_and_buckets():
    rng = np.random.default_rng(3)
    n, m, nnz = 30, 20, 150
    r = Ratings(rng.integers(0, n, nnz), rng.integers(0, m, nnz), rng.uniform(1, 5, nnz),
                np.arange(n), np.arange(m))
    U = rng.normal(size=(n, 4)).astype(np.float32)
    V = rng.normal(size=(m, 4)).astype(np.float32)
    buckets = popularity_buckets(r.item_counts())
    res = rmse(U, V, r, offset=3.5, item_buckets=buckets, chunk=64)
    pred = np.sum(U[r.user] * V[r.item], axis=1) + 3.5
    err = (pred - r.value) ** 2
    assert res["overall"]["rmse"] == pytest.approx(np.sqrt(err.mean()), rel=1e-5)
    for b in range(5):
        sel = buckets[r.item] == b
        assert res["buckets"][b]["count"] == sel.sum()
        assert res["buckets"][b]["rmse"] == pytest.approx(np.sqrt(err[sel].mean()), rel=1e-5)
    clipped = rmse(U, V, r, offset=3.5, clip=(1.0, 5.0))
    err_c = (np.clip(pred, 1, 5) - r.value) ** 2
    assert clipped["overall"]["rmse"] == pytest.approx(np.sqrt(err_c.mean()), rel=1e-5)


def test_item_lists_are_built_per_batch(monkeypatch):
    """Padded history/target lists are built batch by batch at one width (one compiled
    shape): for all users at once they took O(users × longest list) memory (20 GB at ML-20M
    scale, where a few users have thousands of ratings)."""
    import dpmt.metrics as M

    shapes = []
    real = M._user_lists

    def spy(*a, **k):
        out = real(*a, **k)
        shapes.append(out.shape)
        return out
    monkeypatch.setattr(M, "_user_lists", spy)
    hist, tgt = make_split(n=40)
    U = np.ones((hist.n_users, 2), np.float32)
    V = np.arange(2 * hist.n_items, dtype=np.float32).reshape(-1, 2)
    res = ranking_metrics(U, V, hist, tgt, ks=(3,), batch_size=8)
    assert res["overall"]["users"] > 20
    assert shapes and all(s[0] == 8 for s in shapes)
    assert len({s for s in shapes[::2]}) == 1 and len({s for s in shapes[1::2]}) == 1
