"""Issue 24 (1): the online predictors and learners draw their coins from OS entropy unless
given a seed (a default seed would let anyone regenerate them); an explicit seed is still
reproducible."""

import numpy as np
import pytest

from dpmt.online import NameAndShame
from dpmt.online.hypotheses import thresholds
from dpmt.online.learners import AboveThresholdLearner, NameAndShameLearner
from dpmt.online.predictors import jdp_available, make_predictor
from dpmt.data.stats import popularity_buckets
from dpmt.online.ratings_stream import ratings_stream, synthetic_ratings
from dpmt.online.streams import threshold_stream

H = thresholds(16)


def _marks(p, xs, ys):
    return np.asarray(p.run(xs, ys, return_mistakes=True), np.uint8)


def _stream():
    st = threshold_stream(16, 4000, seed=1)
    ys = st.ys.copy()
    ys[::7] ^= 1                                           # label noise: many updates
    return st.xs, ys


NAMES = ["name-and-shame", "ns-learner", "at-learner"] + (["jdp"] if jdp_available() else [])


def _make(name, seed=None):
    kw = {} if seed is None else {"seed": seed}
    return make_predictor(name, H, epsilon=1.0, delta=0.3, gamma=0.3, horizon=4000, **kw)


@pytest.mark.parametrize("name", NAMES)
def test_default_coins_are_fresh_and_a_seed_reproduces(name):
    xs, ys = _stream()
    fresh = [_marks(_make(name), xs, ys) for _ in range(3)]
    assert any(not np.array_equal(fresh[0], f) for f in fresh[1:]), name
    a, b = _marks(_make(name, 7), xs, ys), _marks(_make(name, 7), xs, ys)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls", [NameAndShame, NameAndShameLearner])
def test_name_and_shame_default_is_not_a_fixed_seed(cls):
    draws = [cls(H, 0.5)._rng.random(8) for _ in range(2)]
    assert not np.array_equal(*draws)
    assert not np.array_equal(cls(H, 0.5)._rng.random(8), cls(H, 0.5, seed=0)._rng.random(8))


def test_above_threshold_default_is_not_a_fixed_seed():
    a = AboveThresholdLearner(H, 1.0, horizon=100)._rng_s.random(8)
    b = AboveThresholdLearner(H, 1.0, horizon=100)._rng_s.random(8)
    c = AboveThresholdLearner(H, 1.0, horizon=100, seed=0)._rng_s.random(8)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.skipif(not jdp_available(), reason="dpmt.online.jdp not available")
def test_jdp_default_is_not_seed_zero():
    from dpmt.online.jdp import JDPPredictor

    import inspect

    assert inspect.signature(JDPPredictor).parameters["seed"].default is None
    a = JDPPredictor(H, 1.0, 1e-6)
    b = JDPPredictor(H, 1.0, 1e-6)
    z = JDPPredictor(H, 1.0, 1e-6, seed=0)
    ca, cb, cz = (p.combiner._rng.random(4) for p in (a, b, z))
    assert not np.array_equal(ca, cb) and not np.array_equal(ca, cz)
    s1, s2 = JDPPredictor(H, 1.0, 1e-6, seed=3), JDPPredictor(H, 1.0, 1e-6, seed=3)
    np.testing.assert_array_equal(s1.combiner._rng.random(4), s2.combiner._rng.random(4))


def test_ratings_stream_histogram_is_fresh_by_default():
    r = synthetic_ratings(n_users=60, n_items=40, n_ratings=3000, seed=1)
    a = ratings_stream(r, buckets=8, noise_multiplier=5.0)
    b = ratings_stream(r, buckets=8, noise_multiplier=5.0)
    assert not np.array_equal(a.bucket_of_item, b.bucket_of_item)
    c = ratings_stream(r, buckets=8, noise_multiplier=5.0, seed=2)
    d = ratings_stream(r, buckets=8, noise_multiplier=5.0, seed=2)
    np.testing.assert_array_equal(c.bucket_of_item, d.bucket_of_item)
    ties = np.zeros(50)
    assert not np.array_equal(popularity_buckets(ties, 5, ties="random"),
                              popularity_buckets(ties, 5, ties="random")) or \
        not np.array_equal(popularity_buckets(ties, 5, ties="random"),
                           popularity_buckets(ties, 5, ties="random"))
    # the evaluation's rule: ties by item index, the same every time
    np.testing.assert_array_equal(popularity_buckets(ties, 5), np.repeat(np.arange(5), 10))
