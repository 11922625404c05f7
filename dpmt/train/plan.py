"""The privacy plan of a training run: every release, typed, calibrated once.

A run of private alternating minimisation releases, under add/remove of one user:

* for the rating task, the private global mean μ̂ (a sum and a count, each user capped at k
  ratings clipped to the rating range: sensitivities k·r_max and k);
* the private task sizes n̂_i and user count n̂ (when the weights or noisy GD need them):
  each user's items capped at k, L2 sensitivity √(k+1) (:func:`dpmt.privacy.private_counts`);
* for the rating task, private per-item sums of the centred labels clipped to ±c (each user
  capped at k items: sensitivity √k·c), which with n̂_i give the item offsets b̂_i;
* with ``init="spectral"``, the private spectral start (issue 10): the noisy co-occurrence
  Σ_j x_j x_jᵀ + E of the K most popular items by the released n̂_i, x_j the user's
  indicator over them divided by √|S_j| (Frobenius sensitivity 1,
  :mod:`dpmt.solvers.spectral_init`);
* per iteration t, the noisy Gramian Ĝ_U = Σ_j u_j u_jᵀ + E when α0 > 0 (Frobenius
  sensitivity C², since ‖u_j‖ ≤ C);
* per iteration t, the item step: SSP's {Â_i} (Frobenius sensitivity √β C²) and {b̂_i}
  (L2 sensitivity √β C y_max, y_max = 1 for implicit feedback, the label clip for ratings),
  Algorithm 1 of Krichene et al. 2023; or noisy GD's
  ``steps`` Gaussian steps on the clipped gradient sum (sensitivity G, optionally
  Poisson-subsampled), Algorithm 2.

:func:`make_plan` lists them (:func:`planned_releases`), finds one noise scale for the target
(ε, δ) with ``dp_accounting`` (:func:`dpmt.privacy.calibrate`) and returns a
:class:`PrivacyPlan` whose fields are the concrete :class:`~dpmt.privacy.Release` objects:
each carries its sensitivity, its noise and its ``dp_event()``. The training loop reads
``plan.iterations[t].ssp_A`` — never a release looked up by a name string — and charges
exactly those objects to the ledger. A budget that cannot be met is refused here, before any
data is read.
"""

from __future__ import annotations

import dataclasses

from dpmt.config import TrainConfig
from dpmt.privacy import Calibration, PlannedRelease, Release, calibrate
from dpmt.privacy.mechanisms import count_sensitivity, item_sum_sensitivity
from dpmt.solvers.noisy_gd import noisy_gd_sensitivity
from dpmt.solvers.spectral_init import spectral_sensitivity
from dpmt.solvers.ssp import gramian_sensitivity, ssp_sensitivities



@dataclasses.dataclass(frozen=True)
class IterationReleases:
    """The releases of one alternating-minimisation iteration (None: not released)."""

    gramian: Release | None = None
    ssp_A: Release | None = None
    ssp_b: Release | None = None
    gd: Release | None = None

    def all(self) -> tuple[Release, ...]:
        return tuple(r for r in (self.gramian, self.ssp_A, self.ssp_b, self.gd)
                     if r is not None)


@dataclasses.dataclass(frozen=True)
class PrivacyPlan:
    """Every release of a run, calibrated to one (ε, δ). ``counts`` is None when the run
    does not release task sizes; ``iterations[t]`` holds iteration t's releases."""

    counts: Release | None
    iterations: tuple[IterationReleases, ...]
    calibration: Calibration
    mean_sum: Release | None = None      # rating task: the private global mean's sum
    mean_count: Release | None = None    # … and its count
    item_offsets: Release | None = None  # rating task: the per-item label sums
    spectral: Release | None = None      # init="spectral": the noisy top-K co-occurrence

    def head(self) -> tuple[Release, ...]:
        """The releases made once, before the first iteration, in the run's order."""
        return tuple(r for r in (self.mean_sum, self.mean_count, self.counts,
                                 self.item_offsets, self.spectral) if r is not None)

    def releases(self) -> tuple[Release, ...]:
        """All releases in the order the run makes them."""
        head = self.head()
        return head + tuple(r for it in self.iterations for r in it.all())

    @property
    def epsilon(self) -> float:
        """ε of the whole plan at the calibration's δ (≤ the target)."""
        return self.calibration.epsilon


def beta_of(cfg: TrainConfig) -> float:
    """The per-user budget β on Σ_i w_ij² that the sensitivities assume."""
    return float(cfg.budget)


def planned_releases(cfg: TrainConfig) -> list[PlannedRelease]:
    """The run's releases before calibration, in order (see the module docstring). Their
    names are labels for people (ledger tables); the code addresses releases by position."""
    plan: list[PlannedRelease] = []
    if cfg.task == "rating":
        # the private global mean: each user capped at k ratings clipped to [low, high], so
        # the sum moves by ≤ k·max(|low|, |high|) and the count by ≤ k
        k = cfg.effective_count_cap
        lo, hi = cfg.rating_bounds
        plan.append(PlannedRelease("rating_mean/sum", k * max(abs(lo), abs(hi)),
                                   noise_ratio=cfg.count_noise_ratio))
        plan.append(PlannedRelease("rating_mean/count", float(k),
                                   noise_ratio=cfg.count_noise_ratio))
    if cfg.needs_counts:
        plan.append(PlannedRelease(
            "item_counts", count_sensitivity(cfg.effective_count_cap, include_user_count=True),
            noise_ratio=cfg.count_noise_ratio, noise_multiplier=cfg.count_noise_multiplier))
    if cfg.private and cfg.rating_offsets:
        plan.append(PlannedRelease(
            "item_offsets", item_sum_sensitivity(cfg.effective_count_cap, cfg.label_clip),
            noise_ratio=cfg.count_noise_ratio))
    if cfg.private and cfg.init == "spectral":
        # after the counts (it ranks items by them), before the iterations; σ on the upper
        # triangle as for the noisy Gramian
        plan.append(PlannedRelease("spectral_init", spectral_sensitivity(),
                                   noise_ratio=cfg.spectral_noise_ratio))
    beta = beta_of(cfg)
    for t in range(cfg.iterations):
        if cfg.gravity > 0:
            plan.append(PlannedRelease(f"iter{t}/gramian", gramian_sensitivity(cfg.user_clip),
                                       noise_ratio=cfg.gram_noise_ratio))
        if cfg.solver == "ssp":
            s_a, s_b = ssp_sensitivities(beta, cfg.user_clip, cfg.y_max)
            plan.append(PlannedRelease(f"iter{t}/ssp_A", s_a))
            plan.append(PlannedRelease(f"iter{t}/ssp_b", s_b, noise_ratio=cfg.b_noise_ratio))
        else:
            plan.append(PlannedRelease(f"iter{t}/gd", noisy_gd_sensitivity(cfg.gd.clip),
                                       count=cfg.gd.steps, sampling_rate=cfg.gd.sampling_rate))
    return plan


def make_plan(cfg: TrainConfig) -> PrivacyPlan | None:
    """The calibrated plan of ``cfg`` (None for a non-private run).

    Raises :class:`~dpmt.errors.PrivacyBudgetError` if (ε, δ) cannot be met.
    """
    if not cfg.private:
        return None
    cal = calibrate(planned_releases(cfg), cfg.epsilon, cfg.delta, cfg.accountant)
    rel = list(cal.releases)
    mean_sum = rel.pop(0) if cfg.task == "rating" else None
    mean_count = rel.pop(0) if cfg.task == "rating" else None
    counts = rel.pop(0) if cfg.needs_counts else None
    offsets = rel.pop(0) if cfg.rating_offsets else None
    spectral = rel.pop(0) if cfg.init == "spectral" else None
    iterations = []
    for _ in range(cfg.iterations):
        gram = rel.pop(0) if cfg.gravity > 0 else None
        if cfg.solver == "ssp":
            a, b = rel.pop(0), rel.pop(0)
            iterations.append(IterationReleases(gramian=gram, ssp_A=a, ssp_b=b))
        else:
            iterations.append(IterationReleases(gramian=gram, gd=rel.pop(0)))
    assert not rel, "every calibrated release belongs to one step"
    return PrivacyPlan(counts, tuple(iterations), cal, mean_sum, mean_count, offsets,
                       spectral)
