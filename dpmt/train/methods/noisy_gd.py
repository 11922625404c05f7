"""Noisy gradient descent with per-user clipping (Algorithm 2 of Krichene et al. 2023) as a
solver entry.

Per iteration ``gd.steps`` Gaussian releases of the clipped gradient sum (sensitivity G,
:func:`dpmt.solvers.noisy_gd.noisy_gd_sensitivity`; optionally Poisson-subsampled users at
rate q), one normal per parameter per step (:func:`~dpmt.solvers.noisy_gd.gd_noise_draws`),
normalised by the released n̂ (the true n is private under add/remove-one, so the counts
are always released). Rules (:mod:`dpmt.train.defaults`): λ = 10 below n̂·ε = 1200, 1 up to
3·10⁴, else 3;
η = ¼ (0 with uniform weights); ``gd.steps`` (left to the rule): 20, or 6 at 20/6 times the
learning rate where n̂·ε ≥ 10⁵.

**The steps rule keeps the planned privacy exactly.** The plan calibrates 20 steps of
noise multiplier z before n̂ is released; with K steps the run instead draws each step at
z' = z·√(K/20). A composition of K Gaussian releases of sensitivity G and noise z'G is
exactly the Gaussian mechanism of multiplier z'/√K = z/√20 (μ-GDP with μ = √K/z', Dong, Roth
& Su 2022, Corollary 3.3), so both choices are the same mechanism's privacy, and choosing
one from the released n̂ costs nothing more (their adaptive composition theorem, Theorem
3.2, needs only that every choice has that one trade-off function). The sampler's δ of 20
steps is charged (K steps draw fewer normals; checked by :func:`dpmt.train.plan.
resolved_plan`, which keeps 20 steps if a check fails). Measured (``experiments/
solver_rule.py``, validation Recall@20, 1 seed, 8 generators of two families): 10 steps at
lr 0.02 against 20 at 0.01 on the 10 cells with n̂·ε ≥ 10⁵ differ by −0.0022 to +0.0034,
mean −0.0001 (test +0.0006); on the 14 below by −0.0018 on average, and on ML-100K
held-out users at ε = 1 (n̂·ε ≈ 740) 10 steps lost 0.025 (``experiments/defaults_sweep.py
ml100k-steps``): the rule keeps 20 there. The item step's cost halves (it is noisy GD's
steps, :mod:`dpmt.solvers.gd_blocks`).

Since 2026-12-06 the rule takes 8 steps at lr 0.025 there (``experiments/solver_rule.py
--epsilons 20 --seeds 0 1 --candidates defaults gd-s8-lr025``, then ``--only E H --epsilons
5``; ``experiments/solver_rule_s8.json``): against 10 at 0.02 on those cells, 2 seeds (20
pairs), test Recall@20 +0.0007 (sd 0.0016; validation −0.0001), per popularity bucket
(tail first) +0.0075 ± 0.0029, +0.0041 ± 0.0024, +0.0039 ± 0.0017, −0.0041 ± 0.0019 and
+0.0009 ± 0.0005 (mean ± se): the three tail buckets gain, the fourth loses a little (15 of
20 pairs negative), and the item step costs 20% less. 5 steps at lr 0.04 lost the fourth
bucket −0.011 ± 0.002 and the third −0.0035 (``experiments/solver_rule_s5.json``).

Since 2026-12-07 it takes 6 steps at lr 0.2/6 (``--candidates defaults gd-s6-lr033``, the
same 20 pairs; ``experiments/solver_rule_s6.json``): against 8 at 0.025, test Recall@20
+0.0002 (sd 0.0016; validation −0.0000), per bucket +0.0035 ± 0.0027, +0.0068 ± 0.0024,
+0.0020 ± 0.0019, −0.0049 ± 0.0018 and +0.0000 ± 0.0005 — the same trade as 10 → 8 —, and
the default path's iteration 0.79 → 0.64 s at 50k users × 5k items, d = 64, both timed in
every round of one run (2.14x → 1.72x implicit's CG iteration), 7.00 → 5.81 s at ML-20M scale
(BENCHMARKS.md, "Six noisy-GD steps").
"""

from __future__ import annotations

import dataclasses
import math

from dpmt.config import BASE_REG, WEIGHTS_SCALE, TrainConfig
from dpmt.config_groups import PLANNED_GD_STEPS
from dpmt.errors import ConfigError
from dpmt.privacy import PlannedRelease, Release
from dpmt.registry import WEIGHTINGS
from dpmt.solvers.gd_privacy import gd_noise_draws, noisy_gd_sensitivity
from dpmt.solvers.steps import ItemNoise, ItemState, Steps, gd_initial_state, gd_item_step
from dpmt.train.methods import ItemMethod

#: λ of noisy GD below :data:`REG_SCALE`
NOISY_REG = 10.0
#: n̂·ε below which noisy GD gets :data:`NOISY_REG`
REG_SCALE = 1200.0
#: λ of noisy GD from :data:`REG_SCALE` up to :data:`LIGHT_REG_SCALE`
LIGHT_REG = 1.0
#: n̂·ε from which noisy GD gets BASE_REG (λ = 3) again
LIGHT_REG_SCALE = 30_000.0
#: η of noisy GD (its models beat private popularity on their own)
GD_PRIOR = 0.25
#: n̂·ε from which ``gd.steps=None`` takes :data:`FAST_STEPS` steps (the weights rule's scale)
FAST_SCALE = WEIGHTS_SCALE
#: steps per sweep there, at PLANNED_GD_STEPS / FAST_STEPS times the learning rate
FAST_STEPS = 6


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
        return [PlannedRelease("gd", noisy_gd_sensitivity(cfg.gd.clip),
                               count=cfg.gd.planned_steps, sampling_rate=cfg.gd.sampling_rate)]

    def draws(self, cfg: TrainConfig, n_items: int, n_features) -> list[int]:
        return [gd_noise_draws(n_params(cfg, n_items, n_features), cfg.gd.planned_steps)]

    def noise(self, releases: tuple[Release, ...] | None) -> ItemNoise:
        return ItemNoise(gd_multiplier=0.0 if releases is None else
                         releases[0].noise_multiplier)

    def item_step(self, steps: Steps, train, item_features):
        return gd_item_step(steps, train.n_items, item_features)

    def initial_state(self, cfg, n_items, item_features, key) -> ItemState:
        return gd_initial_state(cfg, n_items, item_features, key)

    def layout(self, cfg: TrainConfig, devices: int) -> tuple[bool, bool]:
        # the embedding table's clipped rows are additive per item: long item rows in segments
        # on one device or a mesh (less padding; dpmt.solvers.gd_blocks.
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
        n_eps = max(float(noisy_users), 1.0) * epsilon
        at = f"noisy GD, n̂·ε = {float(noisy_users):.0f}·{epsilon:g}"
        if n_eps < REG_SCALE:
            return NOISY_REG, f"{at} < {REG_SCALE:g}"
        if n_eps < LIGHT_REG_SCALE:
            return LIGHT_REG, f"{at} in [{REG_SCALE:g}, {LIGHT_REG_SCALE:g})"
        return BASE_REG, f"{at} ≥ {LIGHT_REG_SCALE:g}"

    def default_prior(self, noisy_users, epsilon, weights) -> tuple[float, str]:
        if not WEIGHTINGS[weights].reads_counts:
            return 0.0, f"noisy GD with {weights} weights: η = 0"
        return GD_PRIOR, f"noisy GD: η = {GD_PRIOR:g}"

    def default_settings(self, cfg: TrainConfig, noisy_users):
        g = cfg.gd
        if g.steps is not None:
            return cfg, []
        n_eps = None if noisy_users is None else max(float(noisy_users), 1.0) * cfg.privacy.epsilon
        if not cfg.private or n_eps is None or g.sampling_rate is not None \
                or n_eps < FAST_SCALE:
            why = ("no released n̂" if n_eps is None or not cfg.private else
                   "Poisson sampling: the planned steps" if g.sampling_rate is not None else
                   f"n̂·ε = {n_eps:.0f} < {FAST_SCALE:g}")
            return cfg.replace(gd=dict(steps=PLANNED_GD_STEPS)), [
                ("gd.steps", PLANNED_GD_STEPS, why)]
        lr = g.learning_rate * PLANNED_GD_STEPS / FAST_STEPS
        return cfg.replace(gd=dict(steps=FAST_STEPS, learning_rate=lr)), [
            ("gd.steps", FAST_STEPS, f"n̂·ε = {n_eps:.0f} ≥ {FAST_SCALE:g}: each step's noise "
             f"×√({FAST_STEPS}/{PLANNED_GD_STEPS}), the same privacy as {PLANNED_GD_STEPS}"),
            ("gd.learning_rate", lr, f"× {PLANNED_GD_STEPS / FAST_STEPS:g} with "
             f"{FAST_STEPS} steps")]

    def equivalent_releases(self, planned, cfg: TrainConfig):
        (r,) = planned
        k = cfg.gd.planned_steps
        if k == r.count:
            return planned
        if r.sampling_rate is not None:         # subsampled Gaussians compose otherwise
            return None
        # √count / z fixed: k Gaussian steps at z·√(k/count) are one Gaussian of z/√count
        return (dataclasses.replace(r, count=k, noise_std=r.noise_std * math.sqrt(k / r.count),
                                    draws=r.draws * k // r.count),)

    def planned_config(self, cfg: TrainConfig) -> TrainConfig:
        return cfg.replace(gd=dict(steps=cfg.gd.planned_steps))

    def divergence_hint(self, cfg: TrainConfig) -> str:
        return f"noisy GD diverged: lower --gd-learning-rate (now {cfg.gd.learning_rate:g})"


NOISY_GD = NoisyGDMethod()
