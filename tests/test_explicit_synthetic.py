"""The ML-10M-like explicit synthetic (dpmt.data.synthetic_ratings) and the rating section of
``dpmt quality`` (benchmarks.quality.run_ratings, issue 28)."""

import math

import numpy as np
import pytest

from benchmarks import quality as q
from benchmarks import quality_report as qr
from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.data import load, make_explicit_synthetic
from dpmt.data.synthetic_ratings import explicit_synthetic_truth, parse_explicit_spec
from dpmt.errors import ConfigError

SMALL = dict(n_users=2000, n_items=300, n_ratings=60_000, seed=3)


@pytest.fixture(scope="module")
def small():
    return make_explicit_synthetic(**SMALL, return_truth=True)


def test_shape_and_the_public_item_universe(small):
    r, truth = small
    assert (r.nnz, r.n_users, r.n_items) == (60_000, 2000, 300)
    assert r.items_public and not r.implicit and r.name == "explicit-synthetic"
    assert np.array_equal(r.item_ids, np.arange(300)) and np.array_equal(r.user_ids,
                                                                         np.arange(2000))
    counts = np.bincount(r.user, minlength=r.n_users)
    assert np.array_equal(counts, truth.user_activity)
    assert counts.min() >= 20                   # min(20, 60000 // 2000 = 30)
    assert np.all(np.diff(r.user) >= 0)         # rows grouped by user


def test_half_stars_from_half_to_five(small):
    v = small[0].value
    assert v.dtype == np.float32 and v.min() >= 0.5 and v.max() <= 5.0
    assert np.array_equal(2 * v, np.round(2 * v))
    assert len(np.unique(v)) == 10              # every half star occurs


def test_each_pair_at_most_once(small):
    r = small[0]
    key = r.user.astype(np.int64) * r.n_items + r.item
    assert len(np.unique(key)) == r.nnz


def test_deterministic_in_the_seed(small):
    r = small[0]
    again = make_explicit_synthetic(**SMALL)
    for a in ("user", "item", "value"):
        assert np.array_equal(getattr(r, a), getattr(again, a))
    other = make_explicit_synthetic(**{**SMALL, "seed": 4})
    assert not np.array_equal(r.value[:1000], other.value[:1000])
    # the planted model alone, without drawing a rating, is the same
    t = explicit_synthetic_truth(**SMALL)
    for a in ("user_bias", "item_bias", "user_factors", "item_factors", "user_activity"):
        assert np.array_equal(getattr(t, a), getattr(small[1], a))


def test_planted_biases_are_recoverable(small):
    r, truth = small
    v = r.value.astype(np.float64)
    n_i = np.bincount(r.item, minlength=r.n_items)
    item_mean = np.bincount(r.item, v, minlength=r.n_items) / np.maximum(n_i, 1)
    seen = n_i >= 20
    assert seen.sum() > 100
    assert np.corrcoef(item_mean[seen], truth.item_bias[seen])[0, 1] > 0.8
    n_u = np.bincount(r.user, minlength=r.n_users)
    user_mean = np.bincount(r.user, v, minlength=r.n_users) / n_u
    assert np.corrcoef(user_mean, truth.user_bias)[0, 1] > 0.8
    # the planted model explains the ratings up to its noise (and half-star rounding)
    err = truth.predict(r.user, r.item) - v
    assert np.sqrt(np.mean(err ** 2)) < 0.85 < v.std()


def test_popularity_and_activity_are_skewed(small):
    r = small[0]
    n_i = np.sort(np.bincount(r.item, minlength=r.n_items))[::-1]
    assert n_i[: r.n_items // 10].sum() > 0.4 * r.nnz
    n_u = np.bincount(r.user, minlength=r.n_users)
    assert n_u.max() > 5 * np.median(n_u)


def test_spec_load_and_errors():
    r = load("explicit-synthetic:users=300,items=50,ratings=6000,seed=1")
    assert r.nnz == 6000 and r.n_items == 50 and not r.implicit
    assert parse_explicit_spec("explicit-synthetic:scale=0.01") == {"n_users": 700,
                                                                    "n_ratings": 100_000}
    with pytest.raises(ConfigError, match="unknown key 'bogus'.*known keys: users"):
        load("explicit-synthetic:bogus=1")
    with pytest.raises(ConfigError, match="users must be an integer"):
        parse_explicit_spec("explicit-synthetic:users=1.5")
    with pytest.raises(ConfigError, match="items= / columns="):
        load("explicit-synthetic:users=300,items=50,ratings=6000", items=[1, 2])
    with pytest.raises(ConfigError, match="n_ratings .* must lie between"):
        make_explicit_synthetic(n_users=100, n_items=10, n_ratings=50, min_per_user=2)
    with pytest.raises(ConfigError, match="noise_std"):
        make_explicit_synthetic(n_users=10, n_items=10, n_ratings=50, noise_std=-1)


def test_the_rating_task_takes_it():
    """Its name does not start with "synthetic" (those are implicit): --task rating splits it."""
    from dpmt.train.rundir import prepare_data

    cfg = TrainConfig(task="rating",
                      data=dict(dataset="explicit-synthetic:users=300,items=50,ratings=6000",
                                split="random"))
    split = prepare_data(cfg, ExecutionConfig(progress=False))
    assert split.train.nnz + split.validation.targets.nnz + split.test.targets.nnz == 6000


# -- the rating section of dpmt quality ------------------------------------------------------
def test_gap_ratio_is_the_reference_notebooks():
    # the reference ML-10M notebook: non-private WALS 0.777, DP-SGD ε = 1 0.899
    assert q.gap_ratio(0.899, 0.777, 1.06) == pytest.approx(0.122 / 0.283)
    assert q.gap_ratio(0.8, 0.8, 1.0) == 0.0 and q.gap_ratio(1.0, 0.8, 1.0) == 1.0
    assert math.isnan(q.gap_ratio(1.0, 1.1, 1.0))        # no scale: non-private ≥ the mean


RATING_SPEC = "explicit-synthetic:users=800,items=120,ratings=40000,seed=0"


@pytest.fixture(scope="module")
def rating_rows():
    rd = q.RatingDataset("tiny explicit", RATING_SPEC, epsilons=(5.0,))
    return q.run_ratings(rd, ExecutionConfig(progress=False))


def test_rating_section_ratio_from_its_own_figures(rating_rows):
    rows = {(r["method"], r["epsilon"]): r for r in rating_rows}
    assert len(rating_rows) == q.n_rating_cells(q.RatingDataset("x", "explicit-synthetic",
                                                                epsilons=(5.0,)))
    gm = rows[(q.GLOBAL_MEAN, math.inf)]["rmse"]
    nonpriv = rows[(q.NONPRIVATE, math.inf)]["rmse"]
    priv = rows[(q.PRIVATE, 5.0)]
    assert priv["ratio"] == pytest.approx((priv["rmse"] - nonpriv) / (gm - nonpriv), rel=1e-12)
    assert 0 < priv["epsilon_spent"] <= 5.0 * (1 + 1e-6)
    # on planted data: the planted model < non-private < the global mean
    assert rows[(q.ORACLE, math.inf)]["rmse"] < nonpriv < gm


def test_rating_section_global_mean_is_the_training_mean(rating_rows):
    """The global-mean row, recomputed here from the split itself."""
    from dpmt.train.rundir import prepare_data

    spec, rows = RATING_SPEC, rating_rows       # the section's rows of that spec (seed 0)
    split = prepare_data(TrainConfig(task="rating", data=dict(dataset=spec, split="random")),
                         ExecutionConfig(progress=False))
    mu = split.train.value.astype(np.float64).mean()
    want = np.sqrt(np.mean((split.test.targets.value - mu) ** 2))
    assert rows[0]["method"] == q.GLOBAL_MEAN and rows[0]["rmse"] == pytest.approx(want,
                                                                                 rel=1e-5)


def test_rating_section_in_the_report_and_the_json(rating_rows, tmp_path):
    import json

    text = qr.write_report([], [], tmp_path, "dpmt quality (test)", 1.0,
                           rating_rows=rating_rows)
    assert "## Ratings: test RMSE, random 80/10/10 split" in text
    priv = next(r for r in rating_rows if r["method"] == q.PRIVATE)
    assert f"| {priv['rmse']:.4f} | {priv['ratio']:.3f} |" in text
    back = qr.load_rating_rows(json.loads((tmp_path / "quality" / "quality.json")
                                          .read_text())["rating_rows"])
    assert [r["rmse"] for r in back] == pytest.approx([r["rmse"] for r in rating_rows])
    assert math.isinf(back[0]["epsilon"])


def test_ml100k_rating_targets_read_the_rows():
    rows = [{"dataset": "ML-100K", "spec": "ml-100k", "method": q.NONPRIVATE,
             "epsilon": math.inf, "rmse": 0.95},
            {"dataset": "ML-100K", "spec": "ml-100k", "method": q.PRIVATE, "epsilon": 1.0,
             "rmse": 1.03},
            {"dataset": "syn", "spec": "explicit-synthetic", "method": q.PRIVATE,
             "epsilon": 1.0, "rmse": 2.0}]
    got = qr.rating_targets(rows)
    assert [ok for _, ok, _ in got] == [False, True]
    assert "non-private RMSE ≤ 0.92" in got[0][0] and got[0][2] == "0.9500"
