"""The online predictors' protocols (dpmt.online.protocols): every class of the package
satisfies the one it claims, and a predictor defined here, in no registry, plugs into the
consumers (run_predictor, privacy_of) and runs."""

import math

import numpy as np
import pytest

from dpmt.online import (AboveThresholdLearner, JDPPredictor, NameAndShame,
                         NameAndShameLearner, SOA, thresholds)
from dpmt.online.candidates import CandidatePredictor
from dpmt.online.predictors import PREDICTORS, make_predictor, privacy_of, run_predictor
from dpmt.online.protocols import (OnlineLearner, OnlinePredictor, PrivatePredictor,
                                   StreamPredictor)
from dpmt.online.streams import threshold_stream

H = thresholds(15)
KW = dict(epsilon=16.0, delta=0.01, seed=7, horizon=500, gamma=0.05)

#: name → (class, the protocols it satisfies)
EXPECTED = {
    "soa": (SOA, {OnlinePredictor, StreamPredictor}),
    "name-and-shame": (NameAndShame, {OnlinePredictor, PrivatePredictor, StreamPredictor}),
    "jdp": (JDPPredictor, {OnlinePredictor, PrivatePredictor, StreamPredictor}),
    "ns-learner": (NameAndShameLearner, {OnlinePredictor, PrivatePredictor, OnlineLearner,
                                         StreamPredictor}),
    "at-learner": (AboveThresholdLearner, {OnlinePredictor, PrivatePredictor, OnlineLearner,
                                           StreamPredictor}),
}
ALL = (OnlinePredictor, PrivatePredictor, OnlineLearner, StreamPredictor)


def test_every_named_predictor_is_listed():
    assert set(EXPECTED) == set(PREDICTORS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_predictor_class_satisfies_its_protocols(name):
    cls, protocols = EXPECTED[name]
    p = make_predictor(name, H, **KW)
    assert type(p) is cls
    assert {P for P in ALL if isinstance(p, P)} == protocols


def test_jdp_component_a_is_a_private_predictor():
    A = JDPPredictor(H, 16.0, 0.01, seed=1).A
    assert isinstance(A, CandidatePredictor) and isinstance(A, PrivatePredictor)


def test_privacy_of_reads_the_protocols_as_it_read_the_classes():
    """privacy_of now dispatches on the protocols: the same answer for every class."""
    for name in EXPECTED:
        p = make_predictor(name, H, **KW)
        pv = privacy_of(p)
        if name == "soa":
            assert pv == {"epsilon": math.inf, "delta": 1.0, "guarantee": "none (not private)"}
            continue
        assert (pv["epsilon"], pv["delta"]) == tuple(map(float, p.privacy()))
        learner = name in ("ns-learner", "at-learner")
        assert pv["guarantee"].startswith("DP of every released hypothesis" if learner
                                          else "joint DP of the released predictions")


class ConstantPredictor:
    """Predicts ``label`` whatever it has seen: it ignores the data, so it is (0, 0)-JDP."""

    def __init__(self, label: int = 0):
        self.label, self.rounds = label, 0

    def predict(self, x: int) -> int:
        return self.label

    def update(self, y: int) -> None:
        self.rounds += 1

    def privacy(self) -> tuple[float, float]:
        return 0.0, 0.0


class FollowTheLast:
    """Predicts the last label seen (not private: it has no ``privacy()``)."""

    def __init__(self):
        self.last = 0

    def predict(self, x: int) -> int:
        return self.last

    def update(self, y: int) -> None:
        self.last = int(y)


def test_a_toy_predictor_plugs_into_the_consumers():
    xs, ys = threshold_stream(15, 3000, seed=4, dist="boundary").arrays()
    toy = ConstantPredictor(0)
    assert isinstance(toy, PrivatePredictor) and not isinstance(toy, StreamPredictor)
    seen = []
    assert run_predictor(toy, xs, ys, progress=seen.append) == int(np.sum(ys != 0))
    assert toy.rounds == len(xs) and sum(seen) == len(xs)
    assert privacy_of(toy) == {"epsilon": 0.0, "delta": 0.0,
                               "guarantee": "joint DP of the released predictions, per "
                                            "example"}

    follow = FollowTheLast()
    assert isinstance(follow, OnlinePredictor) and not isinstance(follow, PrivatePredictor)
    expected = int(ys[0] != 0) + int(np.sum(ys[1:] != ys[:-1]))
    assert run_predictor(follow, xs, ys) == expected
    assert privacy_of(follow)["guarantee"] == "none (not private)"


def test_an_object_without_the_methods_is_no_predictor():
    assert not isinstance(object(), OnlinePredictor)
    assert not isinstance(ConstantPredictor(), OnlineLearner)
