"""The logistic-link generator (dpmt.data.synthetic_logistic): the law it states, its spec."""

import numpy as np
import pytest

from dpmt.data import load
from dpmt.data.synthetic_logistic import (make_logistic_synthetic, parse_logistic_spec,
                                          _sigmoid)
from dpmt.errors import ConfigError, DataError


def test_shape_distinct_pairs_every_user_and_deterministic():
    r = make_logistic_synthetic(400, 150, 6000, rank=4, seed=3)
    again = make_logistic_synthetic(400, 150, 6000, rank=4, seed=3)
    other = make_logistic_synthetic(400, 150, 6000, rank=4, seed=4)
    assert np.array_equal(r.user, again.user) and np.array_equal(r.item, again.item)
    assert not (len(other.user) == len(r.user) and np.array_equal(other.item, r.item))
    pairs = r.user * r.n_items + r.item
    assert len(np.unique(pairs)) == len(pairs)                      # no pair twice
    assert np.all(np.diff(r.user) >= 0)                             # grouped by user
    assert np.bincount(r.user, minlength=r.n_users).min() >= 1      # every user has one
    assert r.items_public and r.implicit and np.all(r.value == 1.0)
    # the expected count is calibrated on all 400 users: binomial spread plus the ≤ 400
    # users given their most likely item
    assert abs(len(r.user) - 6000) < 5 * np.sqrt(6000) + 400


def test_picks_follow_the_planted_probabilities():
    """Each pair is an independent coin of probability σ(logit): the observed rate in bins of
    predicted probability matches the prediction (a wrong link, sign or offset fails)."""
    r, truth = make_logistic_synthetic(3000, 200, 60_000, rank=8, alpha=1.0, signal=3.0,
                                       user_activity_sigma=0.5, seed=5, return_truth=True)
    p = _sigmoid(truth.logits(np.arange(r.n_users))).ravel().astype(np.float64)
    hit = np.zeros(r.n_users * r.n_items, bool)
    hit[r.user * r.n_items + r.item] = True
    order = np.argsort(p)
    for chunk in np.array_split(order, 10):
        expect, seen = p[chunk].mean(), hit[chunk].mean()
        assert abs(seen - expect) < 4 * np.sqrt(expect * (1 - expect) / len(chunk)) + 2e-3, \
            (expect, seen)
    assert abs(hit.sum() - p.sum()) < 5 * np.sqrt(p.sum()) + 20


def test_popularity_and_signal_do_what_they_say():
    flat = make_logistic_synthetic(2000, 300, 30_000, alpha=0.0, signal=0.0, seed=1,
                                   user_activity_sigma=0.0, return_truth=True)[0]
    steep = make_logistic_synthetic(2000, 300, 30_000, alpha=1.5, signal=0.0, seed=1,
                                    user_activity_sigma=0.0)
    share = [np.sort(np.bincount(x.item, minlength=300))[-30:].sum() / len(x.item)
             for x in (flat, steep)]
    assert share[0] < 0.15 < 0.5 < share[1]          # top 10% of items: ~10% vs most picks
    # with signal, a user's picks score higher under the planted preferences than others
    r, truth = make_logistic_synthetic(1000, 300, 20_000, alpha=0.5, signal=4.0, seed=2,
                                       return_truth=True)
    pref = truth.user_factors[r.user] @ truth.item_factors.T        # (nnz, items)
    mine = pref[np.arange(len(r.user)), r.item]
    assert mine.mean() > pref.mean() + 0.5


def test_spec_and_load():
    kw = parse_logistic_spec("logistic-synthetic:users=50,items=20,interactions=100,"
                             "rank=3,signal=1.5,sigma=0.2,seed=7")
    assert kw == dict(n_users=50, n_items=20, n_interactions=100, rank=3, signal=1.5,
                      user_activity_sigma=0.2, seed=7)
    r = load("logistic-synthetic:users=50,items=20,interactions=100,seed=7")
    assert r.n_users == 50 and r.n_items == 20 and r.implicit
    with pytest.raises(ConfigError, match="unknown key 'concentration'.*known keys"):
        parse_logistic_spec("logistic-synthetic:concentration=0.1")
    with pytest.raises(ConfigError, match="rank must be an integer"):
        parse_logistic_spec("logistic-synthetic:rank=2.5")
    with pytest.raises(ConfigError, match="more than half"):
        make_logistic_synthetic(10, 10, 60)
    with pytest.raises(ConfigError, match="leave them out"):
        load("logistic-synthetic:users=50,items=20,interactions=100", columns={"user": "u"})


def test_rating_task_refuses_implicit_data_by_source_not_name(tmp_path):
    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.train.rundir import prepare_data

    cfg = TrainConfig(task="rating",
                      data=dict(dataset="logistic-synthetic:users=60,items=30,interactions=300",
                                split="random"))
    with pytest.raises(DataError, match="implicit feedback.*rating task needs ratings"):
        prepare_data(cfg, ExecutionConfig(progress=False, data_dir=str(tmp_path)))
