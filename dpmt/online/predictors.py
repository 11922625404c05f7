"""Online predictors by name: factory, privacy statement and whole-stream runner.

:data:`PREDICTORS` names the predictors and learners of :mod:`dpmt.online` (SOA, the
Name-and-Shame predictor and learner, the AboveThreshold learner and Theorem C's
:class:`~dpmt.online.jdp.JDPPredictor`); :func:`make_predictor` builds one by name,
calibrated to ``(epsilon, delta)``; :func:`privacy_of` states the guarantee it satisfies;
:func:`run_predictor` feeds it a stream (fast whole-stream paths for this package's own
classes, verified equal to the per-round objects in the tests; round-by-round otherwise).

Used by ``dpmt stream`` (:mod:`dpmt.apps.stream`) and by the separation experiment
(``experiments/online_separation.py``, run by ``scripts/online_separation.py``).
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.errors import ConfigError, DpmtError
from dpmt.online.hypotheses import HypothesisClass
from dpmt.online.learners import AboveThresholdLearner, NameAndShameLearner
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.protocols import OnlineLearner, OnlinePredictor, PrivatePredictor
from dpmt.online.soa import SOA

__all__ = ["PREDICTORS", "make_predictor", "run_predictor", "privacy_of", "jdp_available"]

#: name -> (kind, description)
PREDICTORS = {
    "soa": ("non-private", "Standard Optimal Algorithm, not private"),
    "ns-learner": ("learner", "Name-and-Shame learner, (0, gamma)-DP released hypotheses"),
    "at-learner": ("learner", "AboveThreshold-switching learner, (epsilon, 0)-DP"),
    "name-and-shame": ("predictor", "Name-and-Shame SOA predictor (Fact 5), (0, gamma)-JDP"),
    "jdp": ("predictor", "Theorem C predictor (JDPPredictor), joint DP"),
}


def make_predictor(name: str, H: HypothesisClass, *, epsilon: float, delta: float,
                   seed: int | None = None, horizon: int | None = None, gamma: float | None = None,
                   preset: str = "practical", max_switches: int | None = None,
                   jdp_options: dict | None = None) -> OnlinePredictor:
    """A fresh predictor/learner by CLI name, calibrated to ``(epsilon, delta)``.

    ``name-and-shame``/``ns-learner`` use ``gamma = delta`` unless ``gamma`` is given
    (they are ``(0, gamma)``-private, hence ``(epsilon, delta)``-private when
    ``gamma <= delta``); ``at-learner`` spends ``epsilon`` and needs the ``horizon``;
    ``jdp_options`` are passed to :class:`~dpmt.online.jdp.JDPPredictor` (practical-preset
    overrides such as ``N``, ``split``, ``mirror_share``). ``seed``: None (default) draws
    the predictor's coins from OS entropy; an int makes them reproducible, and then the
    predictor is NOT private against anyone who knows the seed.
    """
    if name not in PREDICTORS:
        raise ConfigError(f"unknown predictor {name!r}; choose one of {sorted(PREDICTORS)}")
    if name == "soa":
        return SOA(H)
    if name in ("name-and-shame", "ns-learner"):
        g = delta if gamma is None else gamma
        cls = NameAndShame if name == "name-and-shame" else NameAndShameLearner
        return cls(H, g, seed=seed)
    if name == "at-learner":
        return AboveThresholdLearner(H, epsilon, horizon=max(1, int(horizon or 1)),
                                     max_switches=max_switches, seed=seed)
    try:
        from dpmt.online.jdp import JDPPredictor
    except ImportError as e:
        raise DpmtError(f"the 'jdp' predictor is not available in this installation ({e}); "
                        "choose another --predictor") from None
    return JDPPredictor(H, epsilon, delta, preset=preset, seed=seed, **(jdp_options or {}))


def privacy_of(p: OnlinePredictor) -> dict:
    """``{"epsilon", "delta", "guarantee"}`` of a predictor: ``inf`` for one without a
    ``privacy()`` (SOA), a learner's (:class:`~dpmt.online.protocols.OnlineLearner`) DP of
    its released hypotheses, else the joint DP of the predictions."""
    if isinstance(p, SOA) or not isinstance(p, PrivatePredictor):
        return {"epsilon": math.inf, "delta": 1.0, "guarantee": "none (not private)"}
    eps, dl = p.privacy()
    if isinstance(p, OnlineLearner):
        g = "DP of every released hypothesis (learner), per example"
    else:
        g = "joint DP of the released predictions, per example"
    return {"epsilon": float(eps), "delta": float(dl), "guarantee": g}


_FAST = (SOA, NameAndShame, AboveThresholdLearner)


def _fast_types() -> tuple:
    """Classes whose whole-stream ``run`` is used (JDPPredictor only when installed)."""
    try:
        from dpmt.online.jdp import JDPPredictor
    except ImportError:
        return _FAST
    return _FAST + (JDPPredictor,)


def run_predictor(p: OnlinePredictor, xs, ys, progress=None, chunk: int = 50_000) -> int:
    """Feed ``(xs, ys)`` to ``p``; return its mistakes on them.

    Uses the verified whole-stream ``run`` of the module's own classes (SOA, the
    Name-and-Shame predictor and learner, the AboveThreshold learner and
    :class:`~dpmt.online.jdp.JDPPredictor`; tests check each against its per-round loop),
    in chunks so that ``progress`` (a callable taking a number of rounds, e.g.
    ``tqdm.update``) can advance; any other :class:`~dpmt.online.protocols.OnlinePredictor`
    is driven round by round through ``predict``/``update``.
    """
    xs = np.asarray(xs)
    ys = np.asarray(ys)
    T = len(xs)
    if isinstance(p, _fast_types()):
        total = 0
        for a in range(0, T, chunk):
            total += p.run(xs[a:a + chunk], ys[a:a + chunk])
            if progress is not None:
                progress(min(chunk, T - a))
        return int(total)
    mistakes = 0
    predict, update = p.predict, p.update
    xl, yl = xs.tolist(), ys.tolist()
    step = 1000
    for a in range(0, T, step):
        for x, y in zip(xl[a:a + step], yl[a:a + step]):
            if predict(x) != y:
                mistakes += 1
            update(y)
        if progress is not None:
            progress(min(step, T - a))
    return mistakes


def jdp_available() -> bool:
    """Whether the JDP predictor (:mod:`dpmt.online.jdp`) can be imported."""
    try:
        from dpmt.online.jdp import JDPPredictor  # noqa: F401
    except ImportError:
        return False
    return True
