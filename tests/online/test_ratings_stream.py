"""Streamed ratings: private histogram, buckets, stream order, best in hindsight."""

import numpy as np
import pytest

from dpmt.data import Ratings
from dpmt.errors import DpmtError
from dpmt.online import NameAndShame, SOA
from dpmt.online.hypotheses import HypothesisClass, thresholds
from dpmt.data.splits import cap_mask
from dpmt.data.stats import popularity_buckets
from dpmt.online.ratings_stream import (best_in_hindsight, histogram_epsilon,
                                        private_item_counts,
                                        ratings_stream, synthetic_ratings)


@pytest.fixture(scope="module")
def small():
    return synthetic_ratings(n_users=60, n_items=40, n_ratings=3000, seed=1)


def test_the_one_capping_keeps_at_most_k_per_user():
    rng = np.random.default_rng(0)
    user = rng.integers(0, 30, 2000)
    for k in (1, 3, 50, 10 ** 6):
        keep = cap_mask(user, k, np.random.default_rng(1))
        per = np.bincount(user[keep], minlength=30)
        assert np.all(per == np.minimum(np.bincount(user, minlength=30), k))
        assert keep.dtype == bool and keep.shape == user.shape


def test_private_histogram_accounting(small):
    """The stream's histogram is training's counts release: integers, discrete Gaussian,
    calibrated and accounted by dp_accounting's PLD, recorded in a ledger."""
    from dpmt.privacy.ledger import epsilon_of
    from dpmt.privacy.mechanisms import counts_release

    noisy, info = private_item_counts(small, cap_k=10, hist_epsilon=2.0, hist_delta=1e-5, seed=0)
    assert noisy.shape == (small.n_items,)
    assert np.array_equal(noisy, np.round(noisy))            # integers: no float structure
    assert info["mechanism"] == "discrete_gaussian"
    assert info["sigma"] == pytest.approx(info["noise_multiplier"] * np.sqrt(10))
    # calibrated: at most the target, within the calibration's tolerance of it
    assert 2.0 * (1 - 5e-3) <= info["epsilon"] <= 2.0 + 1e-9
    assert info["epsilon"] == pytest.approx(
        epsilon_of([counts_release(10, info["sigma"])], 1e-5), rel=1e-9)
    assert info["l2_sensitivity"] == pytest.approx(np.sqrt(10))
    assert [r["name"] for r in info["ledger"]["releases"]] == ["item_counts"]
    # more noise, smaller ε
    assert histogram_epsilon(info["noise_multiplier"] * 2, 1e-5, 10) < 2.0
    _, info2 = private_item_counts(small, cap_k=10, hist_epsilon=None, noise_multiplier=3.0,
                                   hist_delta=1e-5)
    assert info2["epsilon"] == pytest.approx(histogram_epsilon(3.0, 1e-5, 10))


def test_histogram_noise_scale(small):
    # With a cap no user reaches, the capped counts are the exact counts of distinct
    # (user, item) pairs, so the released counts minus those are the noise: N_Z(0, σ²) with
    # σ = z·√k (unclamped: a ranking reads them).
    k = 10 ** 4
    pairs = np.unique(np.asarray(small.user, np.int64) * small.n_items + small.item)
    exact = np.bincount(pairs % small.n_items, minlength=small.n_items)
    assert exact.sum() < small.nnz                       # the synthetic stream re-rates
    z = []
    for s in range(50):
        noisy, info = private_item_counts(small, cap_k=k, hist_epsilon=1.0, seed=s)
        z.append((noisy - exact) / info["sigma"])
    z = np.concatenate(z)
    assert abs(z.mean()) < 0.15 and 0.9 < z.std() < 1.1  # 2000 draws: > 6 standard errors


def test_private_histogram_defaults_to_fresh_randomness(small):
    a, _ = private_item_counts(small, cap_k=5, hist_epsilon=1.0)
    b, _ = private_item_counts(small, cap_k=5, hist_epsilon=1.0)
    assert not np.array_equal(a, b)
    c, _ = private_item_counts(small, cap_k=5, hist_epsilon=1.0, seed=3)
    d, _ = private_item_counts(small, cap_k=5, hist_epsilon=1.0, seed=3)
    np.testing.assert_array_equal(c, d)


def test_popularity_buckets():
    scores = np.array([5.0, 1.0, 3.0, 3.0, 10.0, 0.0, 7.0, 2.0])
    b = popularity_buckets(scores, 4, ties=np.random.default_rng(0))
    assert b.min() == 0 and b.max() == 3
    assert np.all(np.bincount(b) == 2)  # rank quantiles: equal-size buckets
    assert b[4] == 3 and b[5] == 0     # most / least popular
    # monotone: a strictly more popular item never gets a lower bucket
    for i in range(len(scores)):
        for j in range(len(scores)):
            if scores[i] < scores[j]:
                assert b[i] <= b[j]
    with pytest.raises(DpmtError):
        popularity_buckets([np.nan, 1.0], 2)


@pytest.mark.parametrize("seed", range(10))
def test_best_in_hindsight_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    H = thresholds(12) if seed % 2 else HypothesisClass((rng.random((9, 12)) < .5).astype(int))
    xs, ys = rng.integers(0, 12, 500), rng.integers(0, 2, 500)
    best, h = best_in_hindsight(H, xs, ys)
    brute = [(int(np.sum(H.matrix[j, xs] != ys)), j) for j in range(H.n_hypotheses)]
    assert (best, h) == min(brute)


def test_ratings_stream_order_and_labels(small):
    rs = ratings_stream(small, buckets=8, seed=3)
    assert len(rs) == small.nnz
    assert np.all(np.diff(small.timestamp[rs.order]) >= 0)  # timestamp order
    assert np.array_equal(rs.ys, (small.value[rs.order] >= 4).astype(np.int8))
    assert np.array_equal(rs.xs, rs.bucket_of_item[small.item[rs.order]])
    assert rs.H.n_points == 8 and rs.H.n_hypotheses == 9
    assert rs.popularity == "private" and rs.hist_epsilon == pytest.approx(1.0, rel=5e-3)
    assert rs.features == "popularity" and rs.skipped == 0 and rs.scores is None
    lim = ratings_stream(small, buckets=8, seed=3, limit=100)
    assert len(lim) == 100 and np.array_equal(lim.xs, rs.xs[:100])
    ex = ratings_stream(small, buckets=8, popularity="exact")
    assert ex.hist_epsilon is None
    pub = ratings_stream(small, buckets=4, popularity=np.arange(small.n_items))
    assert pub.popularity == "public" and pub.bucket_of_item[-1] == 3


def test_predictors_run_on_non_realisable_ratings(small):
    rs = ratings_stream(small, buckets=16, seed=0)
    best, _ = best_in_hindsight(rs.H, rs.xs, rs.ys)
    assert 0 < best < len(rs)  # not realisable
    s = SOA(rs.H)
    m = s.run(rs.xs, rs.ys)
    assert m > 0 and s.restarts > 0 and s.rounds == len(rs)
    assert NameAndShame(rs.H, 0.05, seed=0).run(rs.xs, rs.ys) >= 0


def test_ratings_stream_errors(small):
    no_ts = Ratings(user=small.user, item=small.item, value=small.value,
                    user_ids=small.user_ids, item_ids=small.item_ids)
    with pytest.raises(DpmtError, match="timestamp"):
        ratings_stream(no_ts)
    with pytest.raises(DpmtError, match="popularity"):
        ratings_stream(small, popularity="magic")
    with pytest.raises(DpmtError, match="one value per item"):
        ratings_stream(small, popularity=np.ones(3))
    with pytest.raises(DpmtError, match="buckets"):
        ratings_stream(small, buckets=0)
    with pytest.raises(DpmtError, match="hist_delta"):
        ratings_stream(small, hist_delta=1.5)
    with pytest.raises(DpmtError, match="cap_k"):
        ratings_stream(small, cap_k=0)
    with pytest.raises(DpmtError, match="features must be"):
        ratings_stream(small, features="genre")
    with pytest.raises(DpmtError, match="min_coverage"):
        ratings_stream(small, min_coverage=1.5)
