"""The per-rating weights w_ij of a run, from its config and the released counts.

Reads only each user's own ratings and the *released* noisy counts n̂ (never exact
counts), and returns weights with Σ_i w_ij² ≤ β for every user — the bound every item-step
sensitivity assumes (:mod:`dpmt.train.plan`). The formulas are in :mod:`dpmt.weighting`.
"""

from __future__ import annotations

import numpy as np

from dpmt import weighting
from dpmt.config import TrainConfig
from dpmt.train.plan import beta_of


def compute_weights(cfg: TrainConfig, train, noisy_counts: np.ndarray | None,
                    noisy_n_users: float | None, seed: int) -> np.ndarray:
    """Per-rating weights w_ij (nnz,), float64, in ``train``'s order.

    * ``uniform``: k = β items sampled per user, weight 1 (the reference's sampling);
    * ``tail``: the k least popular of the user's items by n̂, weight 1;
    * ``adaptive``: ω_i ∝ n̂_i^(−μ) (eq. 11), each user scaled down to Σ_i w_ij² ≤ β;
    * ``adaptive-normalized``: the same ω, each user scaled to exactly β;
    * ``auto``: one of uniform / adaptive by :func:`dpmt.train.defaults.weights_for`.

    A non-private run uses all-ones weights.
    """
    if not cfg.private:
        return np.ones(train.nnz)
    if cfg.weights == "auto":
        from dpmt.train.defaults import weights_for

        cfg = cfg.replace(weights=weights_for(noisy_n_users, cfg.epsilon))
    beta = beta_of(cfg)
    if cfg.weights == "uniform":
        return weighting.uniform_sample_weights(train.user, int(beta), seed=seed)
    if noisy_counts is None:
        raise ValueError(f"weights={cfg.weights!r} read the released counts; none were given")
    if cfg.weights == "tail":
        return weighting.tail_weights(noisy_counts, train.user, train.item, int(beta), seed=seed)
    if cfg.weights == "adaptive":
        omega = weighting.task_weights(noisy_counts, mu=cfg.effective_mu, budget=beta,
                                       n_users=max(1, int(round(noisy_n_users))))
        return weighting.clip_to_budget(omega, train.user, train.item, beta)
    return weighting.normalized_user_weights(noisy_counts, train.user, train.item,
                                             mu=cfg.effective_mu, budget=beta)
