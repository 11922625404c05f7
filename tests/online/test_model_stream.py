"""Model features for the ratings stream: incremental fold-in, earlier ratings only, fixed
score edges, item matching."""

import numpy as np
import pytest

from dpmt.config import TrainConfig, route
from dpmt.data import Ratings
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.online.ratings_stream import (IncrementalFoldIn, best_in_hindsight,
                                        model_rows, model_score_edges, ratings_stream)


def _model(m=30, d=4, seed=0, item_ids=None, **cfg):
    rng = np.random.default_rng(seed)
    V = rng.normal(0.3, 1.0, (m, d)).astype(np.float32)
    ids = np.arange(100, 100 + m) if item_ids is None else np.asarray(item_ids)
    return Model(item_embeddings=V, item_ids=ids, config=TrainConfig(**route(cfg)))


def _fold(model, n_users):
    c = model.config
    return IncrementalFoldIn(model.item_embeddings, n_users, reg=c.reg, gravity=c.gravity,
                             user_clip=c.user_clip)


def _ratings(model, n_users=20, n=400, seed=1, repeats=False):
    """Explicit 1–5 ratings of the model's items (raw ids = the model's), with timestamps
    (ties included), in shuffled file order."""
    rng = np.random.default_rng(seed)
    m = model.n_items
    if repeats:
        user, item = rng.integers(0, n_users, n), rng.integers(0, m, n)
    else:
        pairs = rng.choice(n_users * m, n, replace=False)
        user, item = pairs // m, pairs % m
    return Ratings(user=user, item=item, value=rng.integers(1, 6, n).astype(np.float32),
                   user_ids=np.arange(n_users), item_ids=np.asarray(model.item_ids),
                   timestamp=rng.integers(0, n // 3, n), name="t")


@pytest.mark.parametrize("cfg", [dict(), dict(reg=0.3, gravity=0.0, user_clip=50.0),
                                 dict(reg=2.0, gravity=1.5, user_clip=0.05)])
def test_incremental_fold_in_equals_model_fold_in(cfg):
    model = _model(seed=3, **cfg)
    rng = np.random.default_rng(0)
    histories = [rng.choice(model.n_items, k, replace=False) for k in (0, 1, 2, 5, 17, 30)]
    f = _fold(model, len(histories))
    for j, h in enumerate(histories):
        for r in h:
            f.add(j, r)
    want = model.fold_in_batch([model.item_ids[h] for h in histories])
    for j, h in enumerate(histories):
        got = f.embedding(j)
        assert np.allclose(got, want[j], rtol=1e-4, atol=1e-6), (j, got, want[j])
        assert np.allclose(got, model.fold_in(model.item_ids[h]), rtol=1e-4, atol=1e-6)
    if cfg.get("user_clip", 0.1) < 1:   # the clip is active on long histories
        assert np.linalg.norm(f.embedding(len(histories) - 1)) == \
            pytest.approx(model.config.user_clip, rel=1e-9)


def test_step_sees_only_earlier_additions_within_and_across_batches():
    model = _model(seed=5)
    rng = np.random.default_rng(2)
    T, n_users = 300, 7
    users, rows = rng.integers(0, n_users, T), rng.integers(0, model.n_items, T)
    add = rng.random(T) < 0.6
    # each user adds an item once (histories are sets)
    seen, keep = set(), np.zeros(T, bool)
    for t in range(T):
        if add[t] and (users[t], rows[t]) not in seen:
            seen.add((users[t], rows[t]))
            keep[t] = True
    f = _fold(model, n_users)
    U = np.concatenate([f.step(users[a:a + 37], rows[a:a + 37], keep[a:a + 37])
                        for a in range(0, T, 37)])
    ref = _fold(model, n_users)
    for t in range(T):   # the one-at-a-time definition
        assert np.array_equal(U[t], ref.embedding(users[t]))   # the same sums, in order
        if keep[t]:
            ref.add(users[t], rows[t])
    assert np.array_equal(f.gram, ref.gram) and np.array_equal(f.rhs, ref.rhs)


def test_model_stream_scores_are_model_fold_in_of_earlier_liked_ratings():
    model = _model(seed=7)
    r = _ratings(model, repeats=True)
    rs = ratings_stream(r, features="model", model=model, buckets=8)
    assert rs.features == "model" and len(rs) == len(r) and rs.skipped == 0
    assert np.all(np.diff(r.timestamp[rs.order]) >= 0)
    histories = []
    for t, k in enumerate(rs.order):
        before = rs.order[:t][r.user[rs.order[:t]] == r.user[k]]
        liked = before[r.value[before] > model.config.data.positive_threshold]
        histories.append(np.unique(r.item_ids[r.item[liked]]))   # a re-rating counts once
    U = model.fold_in_batch(histories)
    V = model.item_embeddings[model.item_index(r.item_ids[r.item[rs.order]])]
    want = np.einsum("nd,nd->n", U, V)
    assert np.allclose(rs.scores, want, rtol=1e-4, atol=1e-7)
    assert np.array_equal(rs.xs, np.searchsorted(rs.score_edges, rs.scores, side="right"))
    assert np.array_equal(rs.ys, (r.value[rs.order] >= 4).astype(np.int8))
    assert rs.xs.min() >= 0 and rs.xs.max() < 8 and rs.H.n_points == 8


def test_a_ratings_own_label_never_reaches_its_features():
    model = _model(seed=9)
    r = _ratings(model, n=300)
    base = ratings_stream(r, features="model", model=model, buckets=16)
    changed_later = 0
    for t in (0, 5, 50, 150, 299):
        k = base.order[t]
        v = r.value.copy()
        v[k] = 6.0 - v[k] if v[k] != 3 else 5.0          # flips liked <-> not liked
        assert (v[k] > 3.5) != (r.value[k] > 3.5)
        rs = ratings_stream(r.with_values(v), features="model", model=model, buckets=16)
        assert np.array_equal(rs.order, base.order)
        # its own x (and every earlier x) is unchanged; its label changed
        assert np.array_equal(rs.scores[:t + 1], base.scores[:t + 1])
        assert np.array_equal(rs.xs[:t + 1], base.xs[:t + 1])
        assert rs.ys[t] != base.ys[t]
        # only the same user's later ratings may move
        other = r.user[base.order] != r.user[k]
        assert np.array_equal(rs.scores[other], base.scores[other])
        changed_later += int(np.any(rs.scores[t + 1:] != base.scores[t + 1:]))
    assert changed_later >= 1   # the label does feed the user's later features
    # the future never matters: everything after t replaced by noise leaves xs[:t+1]
    t = 120
    v = r.value.copy()
    v[base.order[t:]] = np.random.default_rng(0).integers(1, 6, len(r) - t)
    rs = ratings_stream(r.with_values(v), features="model", model=model, buckets=16)
    assert np.array_equal(rs.xs[:t + 1], base.xs[:t + 1])


def test_score_edges_come_from_the_released_V_only():
    model = _model(seed=11)
    V, C = model.item_embeddings, model.config.user_clip
    for method in ("reference", "range"):
        e = model_score_edges(V, C, 10, method)
        assert e.shape == (9,) and np.all(np.diff(e) >= 0)
    e = model_score_edges(V, C, 10, "range")
    R = C * np.linalg.norm(V, axis=1).max()
    assert e[0] > -R and e[-1] < R and np.allclose(np.diff(e), 2 * R / 10)
    # reference: equal-count buckets for the reference user C·v̄/‖v̄‖
    vbar = V.astype(float).mean(0)
    ref = V @ (C * vbar / np.linalg.norm(vbar))
    counts = np.bincount(np.searchsorted(model_score_edges(V, C, 5), ref, side="right"),
                         minlength=5)
    assert counts.tolist() == [6] * 5
    # the same edges whatever ratings are streamed
    a = ratings_stream(_ratings(model, seed=1), features="model", model=model, buckets=6)
    b = ratings_stream(_ratings(model, seed=2), features="model", model=model, buckets=6)
    assert np.array_equal(a.score_edges, b.score_edges)
    assert np.array_equal(a.score_edges, model_score_edges(V, C, 6))
    with pytest.raises(ConfigError, match="score edges"):
        model_score_edges(V, C, 6, "quantiles-of-the-stream")


def test_items_outside_the_model_are_skipped_and_counted():
    model = _model(m=30)
    r = _ratings(model, n=300)
    # the dataset has 10 more items than the model; rate them too
    rng = np.random.default_rng(4)
    extra = 40
    r2 = Ratings(user=np.r_[r.user, rng.integers(0, r.n_users, extra)],
                 item=np.r_[r.item, rng.integers(30, 40, extra)],
                 value=np.r_[r.value, np.full(extra, 5.0, np.float32)],
                 user_ids=r.user_ids, item_ids=np.arange(100, 140),
                 timestamp=np.r_[r.timestamp, rng.integers(0, 100, extra)], name="t2")
    rs = ratings_stream(r2, features="model", model=model, buckets=4)
    rp = ratings_stream(r2, features="popularity", model=model, buckets=4)
    assert rs.skipped == rp.skipped == extra and len(rs) == len(rp) == len(r)
    assert np.array_equal(rs.order, rp.order) and np.all(r2.item[rs.order] < 30)


def test_model_rows_matches_raw_ids_of_either_kind():
    assert model_rows([5, 3, 9], [3, 4, 9, 5]).tolist() == [1, -1, 2, 0]
    assert model_rows(np.array(["a", "b"]), np.array(["b", "c"])).tolist() == [1, -1]
    assert model_rows(np.array([1, 2]), np.array(["2", "x"])).tolist() == [1, -1]


def test_model_feature_errors():
    model = _model()
    r = _ratings(model)
    with pytest.raises(ConfigError, match="need a trained model"):
        ratings_stream(r, features="model")
    with pytest.raises(ConfigError, match="features must be"):
        ratings_stream(r, features="embeddings", model=model)
    other = _model(item_ids=np.arange(5000, 5030))
    with pytest.raises(DataError, match="item ids do not match.*none of its 30 items"):
        ratings_stream(r, features="model", model=other)
    half = _model(item_ids=np.r_[np.arange(100, 108), np.arange(5000, 5022)])
    with pytest.raises(DataError, match="minimum coverage"):
        ratings_stream(r, features="model", model=half)
    assert len(ratings_stream(r, features="model", model=half, min_coverage=0.0)) > 0
    rating = _model()
    object.__setattr__(rating, "config", _Cfg(rating.config))
    with pytest.raises(ConfigError, match="implicit-feedback model"):
        ratings_stream(r, features="model", model=rating)
    with pytest.raises(DataError, match="timestamps"):
        ratings_stream(Ratings(user=r.user, item=r.item, value=r.value, user_ids=r.user_ids,
                               item_ids=r.item_ids), features="model", model=model)


class _Cfg:
    """A config of a rating-task model (whatever else the real config holds)."""

    def __init__(self, cfg):
        self._cfg, self.task = cfg, "rating"

    def __getattr__(self, k):
        return getattr(self._cfg, k)


def test_model_features_beat_popularity_on_planted_preferences():
    """Likes follow a planted low-rank preference and no popularity: with the planted item
    factors as V, the folded-in score separates likes far better than popularity buckets."""
    rng = np.random.default_rng(0)
    n_users, m, d, per = 150, 60, 3, 40
    A, B = rng.normal(size=(n_users, d)), rng.normal(size=(m, d))
    user = np.repeat(np.arange(n_users), per)
    item = np.concatenate([rng.choice(m, per, replace=False) for _ in range(n_users)])
    liked = np.einsum("nd,nd->n", A[user], B[item]) + 0.3 * rng.normal(size=user.size) > 0
    r = Ratings(user=user, item=item, value=np.where(liked, 5.0, 2.0).astype(np.float32),
                user_ids=np.arange(n_users), item_ids=np.arange(m),
                timestamp=rng.permutation(user.size), name="planted")
    model = Model(item_embeddings=B.astype(np.float32), item_ids=np.arange(m),
                  config=TrainConfig())
    rm = ratings_stream(r, features="model", model=model, buckets=16)
    rp = ratings_stream(r, features="popularity", popularity="exact", model=model, buckets=16)
    bm, _ = best_in_hindsight(rm.H, rm.xs, rm.ys)
    bp, _ = best_in_hindsight(rp.H, rp.xs, rp.ys)
    assert bm < 0.3 * len(rm) < 0.4 * len(rp) < bp
