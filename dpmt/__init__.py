"""dpmt: differentially private multi-task recommender training on JAX.

Privacy unit: one user (add/remove-one). Everything a user contributed — which items they
rated and how — is protected together. See README.md.

The public API (imported lazily, so that ``import dpmt`` and the CLI's ``--help`` stay fast
and importing changes nothing in the process):

* :func:`fit` — train on a :class:`Ratings`; returns a :class:`Model`.
* :func:`run` — load a dataset, train, evaluate, write a run directory (= a saved model).
* :class:`Model` — ``recommend``, ``recommend_batch``, ``similar_items``, ``fold_in``,
  ``score``, ``save``/``load``.
* :class:`TrainConfig` (with its sub-configs :class:`DataConfig`, :class:`GDConfig`,
  :class:`SSPConfig`, :class:`PrivacyConfig` or :class:`NonPrivate`), :class:`ExecutionConfig`.
* :class:`Ratings`, :class:`PrivacyLedger`, the errors (:class:`DpmtError` and subclasses).
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

_LAZY = {
    "fit": ("dpmt.train.loop", "fit"),
    "run": ("dpmt.train.rundir", "run"),
    "Model": ("dpmt.model", "Model"),
    "TrainConfig": ("dpmt.config", "TrainConfig"),
    "GDConfig": ("dpmt.config", "GDConfig"),
    "SSPConfig": ("dpmt.config", "SSPConfig"),
    "DataConfig": ("dpmt.config", "DataConfig"),
    "PrivacyConfig": ("dpmt.config", "PrivacyConfig"),
    "NonPrivate": ("dpmt.config", "NonPrivate"),
    "ExecutionConfig": ("dpmt.config", "ExecutionConfig"),
    "Ratings": ("dpmt.data.ratings", "Ratings"),
    "PrivacyLedger": ("dpmt.privacy.ledger", "PrivacyLedger"),
    "DpmtError": ("dpmt.errors", "DpmtError"),
    "DataError": ("dpmt.errors", "DataError"),
    "ConfigError": ("dpmt.errors", "ConfigError"),
    "PrivacyBudgetError": ("dpmt.errors", "PrivacyBudgetError"),
}
_SUBMODULES = {"data", "weighting", "privacy", "solvers", "train", "metrics", "online",
               "config", "errors", "model", "audit", "apps", "runtime"}


def __getattr__(name):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in _SUBMODULES:
        return importlib.import_module(f"dpmt.{name}")
    raise AttributeError(f"module 'dpmt' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY) + list(_SUBMODULES))


__all__ = sorted(list(_LAZY) + list(_SUBMODULES))
