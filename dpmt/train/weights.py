"""The per-rating weights w_ij of a run, from its config and the released counts.

Reads only each user's own ratings and the *released* noisy counts n̂ (never exact
counts), and returns weights with Σ_i w_ij² ≤ β for every user — the bound every item-step
sensitivity assumes (:mod:`dpmt.train.plan`). The weighting is the registry entry of
``cfg.weights`` (:data:`dpmt.registry.WEIGHTINGS`, :mod:`dpmt.weightings`); its formulas are
in :mod:`dpmt.weighting`.
"""

from __future__ import annotations

import numpy as np

from dpmt.config import TrainConfig
from dpmt.data.splits import keyed_uniforms
from dpmt.registry import WEIGHTINGS
from dpmt.train.defaults import weights_for


def compute_weights(cfg: TrainConfig, train, noisy_counts: np.ndarray | None,
                    noisy_n_users: float | None, seed, keyed: bool = False) -> np.ndarray:
    """Per-rating weights w_ij (nnz,), float64, in ``train``'s order: those of
    ``cfg.weights``'s entry (``auto`` first resolved by
    :func:`dpmt.train.defaults.weights_for`). A non-private run uses all-ones weights.
    ``keyed`` (sharded data): a weighting's random choices read per-rating keys hashed from
    ``seed`` and the raw ids (:func:`dpmt.data.splits.keyed_uniforms`), the same on any
    split of the users over processes."""
    if not cfg.private:
        return np.ones(train.nnz)
    if WEIGHTINGS[cfg.weights].by_rule:
        cfg = cfg.replace(weights=weights_for(noisy_n_users, cfg.privacy.epsilon))
    scheme = WEIGHTINGS[cfg.weights]
    if scheme.reads_counts and noisy_counts is None:
        raise ValueError(f"weights={cfg.weights!r} read the released counts; none were given")
    if keyed:
        seed = keyed_uniforms(train, seed, "weights")
    return scheme.weights(cfg, train.user, train.item, noisy_counts, noisy_n_users, seed)
