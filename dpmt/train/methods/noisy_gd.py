"""Noisy gradient descent with per-user clipping (Algorithm 2 of Krichene et al. 2023) as a
solver entry.

Per iteration ``gd.steps`` Gaussian releases of the clipped gradient sum (sensitivity G,
:func:`dpmt.solvers.noisy_gd.noisy_gd_sensitivity`; optionally Poisson-subsampled users at
rate q), one normal per parameter per step (:func:`~dpmt.solvers.noisy_gd.gd_noise_draws`),
normalised by the released n̂ (the true n is private under add/remove-one, so the counts
are always released). Rules (:mod:`dpmt.train.defaults`): λ = 10 below n̂·ε = 1200, else 3;
η = ¼ (0 with uniform weights).
"""

from __future__ import annotations

from dpmt.config import BASE_REG, TrainConfig
from dpmt.errors import ConfigError
from dpmt.privacy import PlannedRelease, Release
from dpmt.registry import WEIGHTINGS
from dpmt.solvers.noisy_gd import gd_noise_draws, noisy_gd_sensitivity
from dpmt.solvers.steps import ItemNoise, ItemState, Steps, gd_initial_state, gd_item_step
from dpmt.train.methods import ItemMethod

#: λ of noisy GD below :data:`REG_SCALE`
NOISY_REG = 10.0
#: n̂·ε below which noisy GD gets :data:`NOISY_REG`
REG_SCALE = 1200.0
#: η of noisy GD (its models beat private popularity on their own)
GD_PRIOR = 0.25


def n_params(cfg: TrainConfig, n_items: int, n_features: int | None) -> int:
    """Parameters of the item encoder: ``n_items·d`` for the embedding table, the two
    Dense layers' ``f·h + h + h·d + d`` for the MLP over ``f`` public features."""
    d = int(cfg.dim)
    if not cfg.gd.uses_mlp:
        return int(n_items) * d
    if n_features is None:
        raise ConfigError("encoder='mlp' needs public item features (ML-100K genres): "
                          "pass item_features=")
    h = int(cfg.gd.mlp_hidden)
    return int(n_features) * h + h + h * d + d


class NoisyGDMethod(ItemMethod):
    name = "gd"
    sums_over_processes = True
    help = "noisy gradient descent with per-user clipping (Algorithm 2)"

    def releases(self, cfg: TrainConfig) -> list[PlannedRelease]:
        return [PlannedRelease("gd", noisy_gd_sensitivity(cfg.gd.clip), count=cfg.gd.steps,
                               sampling_rate=cfg.gd.sampling_rate)]

    def draws(self, cfg: TrainConfig, n_items: int, n_features) -> list[int]:
        return [gd_noise_draws(n_params(cfg, n_items, n_features), cfg.gd.steps)]

    def noise(self, releases: tuple[Release, ...] | None) -> ItemNoise:
        return ItemNoise(gd_multiplier=0.0 if releases is None else
                         releases[0].noise_multiplier)

    def item_step(self, steps: Steps, train, item_features):
        return gd_item_step(steps, train.n_items, item_features)

    def initial_state(self, cfg, n_items, item_features, key) -> ItemState:
        return gd_initial_state(cfg, n_items, item_features, key)

    def layout(self, cfg: TrainConfig, devices: int) -> tuple[bool, bool]:
        # the embedding table's clipped rows are additive per item: long item rows in segments
        # on one device (less padding, cache-sized rows; dpmt.solvers.gd_blocks.
        # clipped_item_rows). The MLP's per-user gradients run over user rows: its item
        # layout stays whole
        table = not cfg.gd.uses_mlp
        return table, table

    def needs_counts(self, cfg: TrainConfig) -> bool:
        return True                  # the gradient is normalised by the released n̂

    def needs_item_features(self, cfg: TrainConfig) -> bool:
        return cfg.gd.uses_mlp

    def default_reg(self, noisy_users, epsilon) -> tuple[float, str]:
        if noisy_users is None:
            return BASE_REG, "no released n̂"
        lam = NOISY_REG if max(float(noisy_users), 1.0) * epsilon < REG_SCALE else BASE_REG
        return lam, (f"noisy GD, n̂·ε = {float(noisy_users):.0f}·{epsilon:g} "
                     f"{'<' if lam == NOISY_REG else '≥'} {REG_SCALE:g}")

    def default_prior(self, noisy_users, epsilon, weights) -> tuple[float, str]:
        if not WEIGHTINGS[weights].reads_counts:
            return 0.0, f"noisy GD with {weights} weights: η = 0"
        return GD_PRIOR, f"noisy GD: η = {GD_PRIOR:g}"

    def divergence_hint(self, cfg: TrainConfig) -> str:
        return f"noisy GD diverged: lower --gd-learning-rate (now {cfg.gd.learning_rate:g})"


NOISY_GD = NoisyGDMethod()
