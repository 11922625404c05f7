"""What the online predictors and learners of :mod:`dpmt.online` have in common.

Every one plays the same protocol each round: ``predict(x)`` with the round's point, then
``update(y)`` with its true label. The private ones also state the ``(epsilon, delta)``
they satisfy (joint DP of the predictions for a predictor, DP of the released hypotheses
for a learner); learners release a hypothesis (a label per point) for the next round; this
package's own classes feed a whole stream at once with ``run``. The consumers
(:func:`dpmt.online.predictors.run_predictor`, :func:`~dpmt.online.predictors.privacy_of`,
``dpmt stream``) take these protocols, not the concrete classes, so any object with the
methods plugs in (``tests/online/test_protocols.py`` runs one).

``runtime_checkable``: ``isinstance`` checks that the methods exist, not their signatures.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["OnlinePredictor", "PrivatePredictor", "OnlineLearner", "StreamPredictor"]


@runtime_checkable
class OnlinePredictor(Protocol):
    """One round: ``predict(x)`` (a label 0/1 for point index ``x``), then ``update(y)``
    with the true label of that ``x``. :class:`~dpmt.online.soa.SOA` is one (not private)."""

    def predict(self, x: int) -> int: ...

    def update(self, y: int) -> None: ...


@runtime_checkable
class PrivatePredictor(OnlinePredictor, Protocol):
    """An online predictor with a guarantee: ``privacy()`` is the ``(epsilon, delta)`` it
    satisfies per example (Name-and-Shame, Theorem C's JDPPredictor, the learners)."""

    def privacy(self) -> tuple[float, float]: ...


@runtime_checkable
class OnlineLearner(PrivatePredictor, Protocol):
    """A private learner: ``hypothesis()`` is the hypothesis released for the next round
    (SOA's label at every point), and ``privacy()`` covers every released hypothesis."""

    def hypothesis(self) -> np.ndarray: ...


@runtime_checkable
class StreamPredictor(OnlinePredictor, Protocol):
    """A predictor with a whole-stream path: ``run(xs, ys)`` feeds the stream with the same
    result and final state as the predict/update loop, and returns its mistakes (or, with
    ``return_mistakes=True``, a uint8 array of per-round mistake marks)."""

    def run(self, xs, ys, return_mistakes: bool = False) -> int | np.ndarray: ...
