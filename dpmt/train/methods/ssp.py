"""Sufficient-statistics perturbation (Algorithm 1 of Krichene et al. 2023) as a solver entry.

Per iteration two Gaussian releases of every item's statistics,

    Â_i = Σ_j w_ij u_j u_jᵀ + E_i     Frobenius sensitivity √β·C²
    b̂_i = Σ_j w_ij y_ij u_j + e_i     L2 sensitivity √β·C·y_max

(:func:`dpmt.solvers.ssp.ssp_sensitivities`; ``d(d+1)/2`` and ``d`` normals per item,
:func:`~dpmt.solvers.ssp.ssp_noise_draws`), then θ_i = (Π(Â_i) + α0 Ĝ_U + λI)⁻¹ b̂_i by the
item solve of ``cfg.item_solve`` (post-processing). Rule for the auto prior:
η = min(η_max, r²), r = N₀ / (n̂·ε) (:mod:`dpmt.train.defaults`).
"""

from __future__ import annotations

from dpmt.config import TrainConfig
from dpmt.privacy import PlannedRelease, Release
from dpmt.solvers.ssp import ssp_noise_draws, ssp_sensitivities
from dpmt.solvers.steps import ItemNoise, Steps, ssp_item_step
from dpmt.train.methods import ItemMethod

#: N₀ of the SSP prior rule (r = N₀ / (n̂ ε))
PRIOR_SCALE = 3500.0
#: η_max: beyond it the ranking is private popularity in all but ties
PRIOR_MAX = 100.0


class SSPMethod(ItemMethod):
    name = "ssp"
    sums_over_processes = True
    help = "sufficient-statistics perturbation (Algorithm 1)"

    def releases(self, cfg: TrainConfig) -> list[PlannedRelease]:
        s_a, s_b = ssp_sensitivities(float(cfg.budget), cfg.user_clip, cfg.y_max)
        return [PlannedRelease("ssp_A", s_a),
                PlannedRelease("ssp_b", s_b, noise_ratio=cfg.ssp.b_noise_ratio)]

    def draws(self, cfg: TrainConfig, n_items: int, n_features) -> list[int]:
        return list(ssp_noise_draws(n_items, cfg.dim))

    def noise(self, releases: tuple[Release, ...] | None) -> ItemNoise:
        if releases is None:
            return ItemNoise()
        a, b = releases
        return ItemNoise(sigma_A=a.noise_std, sigma_b=b.noise_std)

    def item_step(self, steps: Steps, train, item_features):
        return ssp_item_step(steps)

    def layout(self, cfg: TrainConfig, devices: int) -> tuple[bool, bool]:
        return devices == 1, True    # segmented item rows on one device (the sharded
        # SSP step reads plain buckets)

    def default_prior(self, noisy_users, epsilon, weights) -> tuple[float, str]:
        r = PRIOR_SCALE / (max(float(noisy_users or 0.0), 1.0) * float(epsilon))
        return (float(min(PRIOR_MAX, r * r)),
                f"SSP: min({PRIOR_MAX:g}, r²), r = {PRIOR_SCALE:g} / (n̂ ε), n̂ = "
                f"{float(noisy_users or 0.0):.0f}, ε = {epsilon:g}")

    def divergence_hint(self, cfg: TrainConfig) -> str:
        return f"the item systems became singular: raise --reg (now {cfg.reg:g})"


SSP = SSPMethod()
