"""Training: the privacy plan, the private alternating-minimisation loop, checkpoints,
evaluation and run directories.

* :mod:`~dpmt.train.plan` — typed, calibrated releases (:class:`PrivacyPlan`).
* :mod:`~dpmt.train.weights` — the per-rating weights of a config.
* :mod:`~dpmt.train.training_run` — :func:`setup`: checks, plan, once-only releases,
  weights, steps (a :class:`TrainingRun`).
* :mod:`~dpmt.train.loop` — :func:`iterate` (one iteration), :func:`fit` (returns a
  :class:`~dpmt.model.Model`).
* :mod:`~dpmt.train.methods` — the private item steps (registry entries).
* :mod:`~dpmt.train.fold_in_choice` — the private choice of the fold-in (``fold_in="private"``).
* :mod:`~dpmt.train.checkpoint` — the loop state after each iteration, for resume.
* :mod:`~dpmt.train.evaluate` — metrics of a model and of the popularity baselines.
* :mod:`~dpmt.train.rundir` — :func:`run`: data → fit → evaluate → run directory.
"""

from dpmt.train.evaluate import (evaluate, popularity_metrics,
                                 private_popularity_metrics)
from dpmt.train.loop import fit, finish, iterate
from dpmt.train.plan import (IterationReleases, PrivacyPlan, beta_of, make_plan,
                             planned_releases)
from dpmt.train.rundir import prepare_data, run
from dpmt.train.training_run import TrainingRun, initial_items, setup
from dpmt.train.weights import compute_weights

__all__ = ["IterationReleases", "PrivacyPlan", "TrainingRun", "beta_of", "compute_weights",
           "evaluate", "finish", "fit", "initial_items", "iterate", "make_plan",
           "planned_releases", "popularity_metrics", "prepare_data",
           "private_popularity_metrics", "run", "setup"]
