"""dpmt: differentially private multi-task recommender training on JAX.

Privacy unit: one user (add/remove-one). Everything a user contributed — which items they
rated and how — is protected together. See README.md.

Imports are lazy so that ``import dpmt`` (and the CLI's ``--help``) stays fast.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "fit": ("dpmt.training", "fit"),
    "TrainConfig": ("dpmt.config", "TrainConfig"),
    "FitResult": ("dpmt.training", "FitResult"),
    "Ratings": ("dpmt.data.ratings", "Ratings"),
    "DpmtError": ("dpmt.errors", "DpmtError"),
    "PrivacyLedger": ("dpmt.privacy.ledger", "PrivacyLedger"),
}
_SUBMODULES = {"data", "weighting", "privacy", "solvers", "training", "metrics", "online",
               "config", "errors", "reports"}


def __getattr__(name):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in _SUBMODULES:
        return importlib.import_module(f"dpmt.{name}")
    raise AttributeError(f"module 'dpmt' has no attribute {name!r}")


__all__ = sorted(list(_LAZY) + list(_SUBMODULES))
