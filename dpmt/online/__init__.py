"""Private online prediction and learning on finite hypothesis classes (Sanyal 2026).

Protocol shared by every predictor and learner here: ``predict(x) -> int``, then
``update(y)`` with the true label of that ``x``; private ones also have ``privacy()``
returning the ``(epsilon, delta)`` they satisfy (as ``typing.Protocol`` classes in
:mod:`dpmt.online.protocols`: :class:`OnlinePredictor`, :class:`PrivatePredictor`,
:class:`OnlineLearner`, :class:`StreamPredictor`).

* Classes: :class:`HypothesisClass` (exact Littlestone dimension on bitset version
  spaces), :func:`point_functions` (POINT3 is ``point_functions(3)``), :func:`thresholds`,
  :func:`from_table`.
* Non-private: :class:`SOA`.
* Private predictors (joint DP): :class:`NameAndShame` (Fact 5, (0, γ)),
  :class:`JDPPredictor` (Theorem C).
* Private learners (DP of the released hypotheses): :class:`NameAndShameLearner`,
  :class:`AboveThresholdLearner`.
* Streams: :func:`point3_adversary` (Algorithm 1), :func:`littlestone_tree_adversary`
  (Theorem 2), :func:`threshold_stream`, :func:`realisable_stream`; streamed ratings in
  :mod:`dpmt.online.ratings_stream`; predictors by name (factory and whole-stream runner)
  in :mod:`dpmt.online.predictors`. The separation experiment is outside the package
  (``experiments/online_separation.py``).
"""

from dpmt.online.hypotheses import HypothesisClass, from_table, point_functions, thresholds
from dpmt.online.jdp import JDPPredictor
from dpmt.online.learners import AboveThresholdLearner, NameAndShameLearner
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.protocols import (OnlineLearner, OnlinePredictor, PrivatePredictor,
                                   StreamPredictor)
from dpmt.online.soa import SOA
from dpmt.online.streams import (Stream, littlestone_tree_adversary, point3_adversary,
                                 point3_p, realisable_stream, threshold_stream)

__all__ = ["HypothesisClass", "from_table", "point_functions", "thresholds", "SOA",
           "NameAndShame", "NameAndShameLearner", "AboveThresholdLearner", "JDPPredictor",
           "Stream", "point3_adversary", "point3_p", "littlestone_tree_adversary",
           "threshold_stream", "realisable_stream", "OnlinePredictor", "PrivatePredictor",
           "OnlineLearner", "StreamPredictor"]
