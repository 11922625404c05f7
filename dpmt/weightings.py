"""The task-user weightings as registry entries (:data:`WEIGHTINGS`, ``TrainConfig.weights``).

A :class:`Weighting` turns each user's own ratings and the *released* noisy counts n̂
into per-rating weights w_ij with Σ_i w_ij² ≤ β for every user — the bound every item-step
sensitivity assumes (``dpmt.train.plan``). It says whether it reads the counts (then a
private run releases them) and whether β counts items (then β must be an integer). The
formulas are in :mod:`dpmt.weighting`:

* ``uniform``: k = β items sampled per user, weight 1 (the reference's sampling);
* ``tail``: the k least popular of the user's items by n̂, weight 1;
* ``adaptive``: ω_i ∝ n̂_i^(−μ) (eq. 11 of Krichene et al. 2023), each user scaled down to
  Σ_i w_ij² ≤ β;
* ``adaptive-normalized``: the same ω, each user scaled to exactly β;
* ``auto``: one of uniform / adaptive, chosen by ``dpmt.train.defaults.weights_for`` from
  the released n̂ and ε before the weights are computed.

Adding a weighting is one :class:`Weighting` (here or in user code) and
``dpmt.registry.WEIGHTINGS.register(...)``.
"""

from __future__ import annotations

import numpy as np

from dpmt import weighting
from dpmt.errors import ConfigError


class Weighting:
    """Base class of a weighting entry. ``weights`` returns float64 (nnz,) in the order
    of ``user``/``item``."""

    name: str = ""
    help: str = ""
    reads_counts: bool = True       # the weights read the released n̂_i
    integer_budget: bool = False    # β is a number of items per user
    by_rule: bool = False           # a placeholder resolved by dpmt.train.defaults
    uses_mu: bool = False           # reads TrainConfig.mu / gamma

    def check(self, cfg) -> None:
        if self.integer_budget and not float(cfg.budget).is_integer():
            raise ConfigError(f"weights={self.name!r} samples k = budget items per user, so "
                              f"budget must be an integer (got {cfg.budget})")

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed) -> np.ndarray:
        """(nnz,) w_ij. ``seed``: an int, or (sharded data) per-rating keys in [0, 1) that
        replace any random draw (:func:`dpmt.data.splits.keyed_uniforms`)."""
        raise NotImplementedError


class Uniform(Weighting):
    name = "uniform"
    help = "k = β random items per user, weight 1"
    reads_counts = False
    integer_budget = True

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed):
        return weighting.uniform_sample_weights(user, int(cfg.budget), seed=seed)


class Tail(Weighting):
    name = "tail"
    help = "the k = β least popular of a user's items by noisy count, weight 1"
    integer_budget = True

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed):
        return weighting.tail_weights(noisy_counts, user, item, int(cfg.budget), seed=seed)


class Adaptive(Weighting):
    name = "adaptive"
    help = "ω ∝ n̂^−μ (eq. 11), each user clipped to Σ w² ≤ β"
    uses_mu = True

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed):
        omega = weighting.task_weights(noisy_counts, mu=cfg.effective_mu, budget=cfg.budget,
                                       n_users=max(1, int(round(noisy_n_users))))
        return weighting.clip_to_budget(omega, user, item, cfg.budget)


class AdaptiveNormalized(Weighting):
    name = "adaptive-normalized"
    help = "ω ∝ n̂^−μ, every user scaled to Σ w² = β"
    uses_mu = True

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed):
        return weighting.normalized_user_weights(noisy_counts, user, item,
                                                 mu=cfg.effective_mu, budget=cfg.budget)


class Auto(Weighting):
    """Resolved to uniform or adaptive by rule before any weight is computed."""

    name = "auto"
    help = "uniform when n̂·ε < 10⁵, else adaptive (dpmt.train.defaults)"
    integer_budget = True           # it may resolve to uniform
    by_rule = True

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed):
        raise ConfigError("weights='auto' is resolved from the released n̂ first "
                          "(dpmt.train.defaults.resolve)")


UNIFORM, TAIL, ADAPTIVE = Uniform(), Tail(), Adaptive()
ADAPTIVE_NORMALIZED, AUTO = AdaptiveNormalized(), Auto()
