"""The privacy plan of a training run: every release, typed, calibrated once.

A run of private alternating minimisation releases, under add/remove of one user:

* for the rating task, the private global mean μ̂ (a sum and a count, each user capped at k
  ratings clipped to the rating range; the sum on a public lattice 2^(−b), so one user moves
  it by ≤ k·⌈r_max·2^b⌉ lattice units and the count by ≤ k: two discrete Gaussian releases,
  at :data:`MEAN_NOISE_RATIO` times the counts' noise multiplier: the users' own biases
  absorb its error);
* the private task sizes n̂_i and user count n̂ (when the weights or noisy GD need them, or
  when the items are selected privately): each user's items capped at k, k+1 coordinates
  moved by ≤ 1 each, discrete Gaussian (:func:`dpmt.privacy.private_counts`). With
  ``select_items`` (no public item catalogue) the items kept are those whose noisy count
  reaches ``plan.item_threshold`` (:func:`dpmt.privacy.partition_threshold`), and the counts
  release carries the extra δ_ps = :data:`PARTITION_DELTA_SHARE`·δ of that selection;
* for the rating task, private per-item sums of the centred labels clipped to ±c on a public
  lattice (each user capped at k items: k coordinates moved by ≤ ⌈c·2^b⌉ lattice units,
  discrete Gaussian), which with n̂_i give the item offsets b̂_i;
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
  Poisson-subsampled), Algorithm 2 — or any registered method's
  (:data:`dpmt.registry.SOLVERS`);
* with ``fold_in="private"``, after the last iteration, the fold-in choice: the K candidates'
  Recall@20 summed over the training users, L2 sensitivity √K
  (:mod:`dpmt.train.fold_in_choice`).

:func:`make_plan` lists them (:func:`planned_releases`), finds one noise scale for the target
(ε, δ) with ``dp_accounting`` (:func:`dpmt.privacy.calibrate`) and returns a
:class:`PrivacyPlan` whose fields are the concrete :class:`~dpmt.privacy.Release` objects:
each carries its sensitivity, its noise and its ``dp_event()``. The item step's releases are
its method's (:mod:`dpmt.train.methods`, ``plan.iterations[t].item``, in the method's
order); the training loop charges exactly those objects to the ledger and gives them back
to the method for its noise — never a release looked up by a name string. A budget that cannot be met is refused here, before any
data is read.

Discrete Gaussian releases (the directly published integer statistics: issue 24) carry the
discrete Gaussian's parameter σ as ``noise_std``, in the statistic's integer units, and are
calibrated with the others to one (ε, δ) (:func:`dpmt.privacy.calibrate`): the plan's ε is the
ledger's own ε of these releases, ≤ the target. **Sampler δ hook**: a continuous release that
draws N normals from the 64-bit sampler (:mod:`dpmt.solvers.noise`) carries ``draws = N`` and
the extra δ :func:`sampler_delta` (its unreachable tail mass, plus the edge term at the
release's noise multiplier); ``fit`` gives ``make_plan(cfg, draws=sampler_draws(cfg, n_items,
n_features))`` once the data's (public) shape is known, so that the ledger charges them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from dpmt.config import TrainConfig
from dpmt.privacy import Calibration, PlannedRelease, Release, calibrate, epsilon_of
from dpmt.privacy.mechanisms import (counts_release, item_offsets_release, mean_releases,
                                     partition_threshold)
from dpmt.registry import TASKS, WEIGHTINGS
from dpmt.solvers import noise
from dpmt.solvers.spectral_init import spectral_noise_draws, spectral_sensitivity
from dpmt.solvers.ssp import gramian_noise_draws, gramian_sensitivity
from dpmt.train import fold_in_choice
from dpmt.train.defaults import switchable, switched_config
from dpmt.train.methods import method_of

#: the rating task's private mean μ̂: its noise relative to the counts' (count_noise_ratio)
MEAN_NOISE_RATIO = 3.0
#: the share of δ given to private partition selection (no public item catalogue): the
#: probability δ_ps = PARTITION_DELTA_SHARE·δ that an item only the added user rated is kept
PARTITION_DELTA_SHARE = 0.1


@dataclasses.dataclass(frozen=True)
class IterationReleases:
    """The releases of one alternating-minimisation iteration: the noisy Gramian (None when
    α0 = 0) and the item step's, in the order of its method's
    :meth:`~dpmt.train.methods.ItemMethod.releases` (SSP: Â, b̂; noisy GD: the steps)."""

    gramian: Release | None = None
    item: tuple[Release, ...] = ()

    def all(self) -> tuple[Release, ...]:
        return ((self.gramian,) if self.gramian is not None else ()) + tuple(self.item)


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
    item_threshold: int | None = None    # select_items: keep items with noisy count ≥ this
    fold_in: Release | None = None       # fold_in="private": the candidates' summed recalls

    def head(self) -> tuple[Release, ...]:
        """The releases made once, before the first iteration, in the run's order."""
        return tuple(r for r in (self.mean_sum, self.mean_count, self.counts,
                                 self.item_offsets, self.spectral) if r is not None)

    def releases(self) -> tuple[Release, ...]:
        """All releases in the order the run makes them."""
        head = self.head()
        tail = (self.fold_in,) if self.fold_in is not None else ()
        return head + tuple(r for it in self.iterations for r in it.all()) + tail

    @property
    def epsilon(self) -> float:
        """ε of the whole plan at the calibration's δ (≤ the target)."""
        return self.calibration.epsilon


def beta_of(cfg: TrainConfig) -> float:
    """The per-user budget β on Σ_i w_ij² that the sensitivities assume."""
    return float(cfg.budget)


def _planned(rel: Release, **kw) -> PlannedRelease:
    """A discrete Gaussian release's shape (from :mod:`dpmt.privacy.mechanisms`, the code
    that enforces it) as a :class:`PlannedRelease`."""
    return PlannedRelease(rel.name, rel.sensitivity, mechanism=rel.mechanism,
                          coordinates=rel.coordinates, step=rel.step, delta=rel.delta, **kw)


def releases_counts(cfg: TrainConfig) -> bool:
    """Whether a run releases private task sizes and the user count n̂: the non-uniform
    weights read them, a method may (noisy GD normalises its gradient by n̂: the true n is
    private under add/remove-one), the popularity prior ranks by them, the rating task's
    item offsets divide by them, and the spectral start picks its K items by them."""
    return cfg.private and (WEIGHTINGS[cfg.weights].reads_counts
                            or method_of(cfg).needs_counts(cfg)
                            or cfg.rating_offsets or cfg.uses_popularity_prior
                            or cfg.spectral_start)


def partition_delta(cfg: TrainConfig) -> float:
    """δ_ps of private partition selection: :data:`PARTITION_DELTA_SHARE`·δ."""
    return PARTITION_DELTA_SHARE * float(cfg.privacy.delta)


def sampler_delta(draws: int, noise_multiplier: float | None = None, count: int = 1) -> float:
    """HOOK — the extra δ of a continuous release that draws ``draws`` normals in all from the
    64-bit sampler: ``dpmt.solvers.noise.tail_delta(draws)`` (``draws·TAIL_MASS_PER_DRAW``),
    plus, when its noise multiplier z is given, ``count·edge_delta(z, draws/count)`` (one edge
    term per application, of draws/count coordinates; see that module: a run whose ideal
    version is (ε, δ)-DP is (ε, δ + tail + Σ edge)-DP). Imported lazily; 0 when the sampler
    module does not provide them."""
    if not draws:
        return 0.0

    tail = getattr(noise, "tail_delta", None)
    total = (tail(int(draws)) if tail is not None
             else int(draws) * float(getattr(noise, "TAIL_MASS_PER_DRAW", 0.0)))
    edge = getattr(noise, "edge_delta", None)
    if noise_multiplier is not None and edge is not None:
        per = -(-int(draws) // int(count))
        total += int(count) * edge(float(noise_multiplier), per)
    return float(total)


def sampler_draws(cfg: TrainConfig, n_items: int, n_features: int | None = None
                  ) -> dict[str, int]:
    """Normals each continuous release of ``cfg`` draws from the 64-bit sampler, on data with
    ``n_items`` item rows (the public catalogue, or before a private selection: an upper
    bound) and ``n_features`` public features per item (an MLP encoder's input).

    Keyed by release name, for :func:`make_plan`'s ``draws``: the spectral start's
    ``K(K+1)/2`` (``K = min(n_items, spectral_items)``), per iteration the Gramian's
    ``d(d+1)/2`` and the item step's (its method's
    :meth:`~dpmt.train.methods.ItemMethod.draws`). For a config the solver rule may switch
    (:func:`dpmt.train.defaults.switchable`) the item releases are charged at least the
    switched phase's normals in all (SSP at d ≥ 38 draws more than noisy GD's 20 steps), so
    that the switched run's δ is within the plan's (:func:`equivalent_iterations`). Public: a
    function of the config and the data's shape only.
    """

    if not cfg.private:
        return {}
    out: dict[str, int] = {}
    if cfg.spectral_start:
        out["spectral_init"] = spectral_noise_draws(min(int(n_items), int(cfg.spectral_items)))
    gram, item = _iteration_draws(cfg, n_items, n_features)
    if switchable(cfg) and item:
        # the solver rule may replace the iterations by SSP's once n̂ is out
        # (dpmt.train.defaults.solver_switch): charge the larger of the two phases' normals,
        # the difference spread over the planned item releases
        extra = (sum(map(sum, (d.values() for d in _iteration_draws(
            switched_config(cfg), n_items, n_features)))) - sum(gram.values())
            - sum(item.values()))
        if extra > 0:
            share = -(-extra // len(item))
            item = {name: n + share for name, n in item.items()}
    out.update(gram)
    out.update(item)
    if cfg.chooses_fold_in:
        out["fold_in_choice"] = fold_in_choice.N_CANDIDATES
    return out


def _iteration_draws(cfg: TrainConfig, n_items: int, n_features: int | None
                     ) -> tuple[dict[str, int], dict[str, int]]:
    """The iterations' normals by release name: the Gramians', the item step's."""
    method = method_of(cfg)
    gram: dict[str, int] = {}
    item: dict[str, int] = {}
    names = [r.name for r in method.releases(cfg)]
    per = method.draws(cfg, int(n_items), n_features)
    for t in range(cfg.iterations):
        if cfg.gravity > 0:
            gram[f"iter{t}/gramian"] = gramian_noise_draws(int(cfg.dim))
        for name, n in zip(names, per):
            if n:
                item[f"iter{t}/{name}"] = int(n)
    return gram, item


def _continuous(name: str, sensitivity: float, draws: Mapping[str, int],
                edge: Mapping[str, float], **kw) -> PlannedRelease:
    n = int(draws.get(name, 0))
    return PlannedRelease(name, sensitivity, draws=n,
                          delta=sampler_delta(n) + float(edge.get(name, 0.0)), **kw)


def iteration_releases(cfg: TrainConfig, draws: Mapping[str, int] | None = None,
                       edge: Mapping[str, float] | None = None) -> list[PlannedRelease]:
    """The releases of ``cfg``'s iterations before calibration, in order: per iteration t
    the noisy Gramian (α0 > 0) and the item method's releases, named ``iter{t}/...``
    (``draws`` and ``edge`` as in :func:`planned_releases`)."""
    draws, edge = dict(draws or {}), dict(edge or {})
    out: list[PlannedRelease] = []
    item = method_of(cfg).releases(cfg)
    for t in range(cfg.iterations):
        if cfg.gravity > 0:
            out.append(_continuous(f"iter{t}/gramian", gramian_sensitivity(cfg.user_clip),
                                   draws, edge, noise_ratio=cfg.privacy.gram_noise_ratio))
        for r in item:                       # the method's releases, named for iteration t
            name = f"iter{t}/{r.name}"
            n = int(draws.get(name, 0))
            out.append(dataclasses.replace(
                r, name=name, draws=n,
                delta=r.delta + sampler_delta(n) + float(edge.get(name, 0.0))))
    return out


def planned_releases(cfg: TrainConfig, *, select_items: bool = False,
                     draws: Mapping[str, int] | None = None,
                     edge: Mapping[str, float] | None = None,
                     partition_delta_ps: float | None = None) -> list[PlannedRelease]:
    """The run's releases before calibration, in order (see the module docstring). Their
    names are labels for people (ledger tables); the code addresses releases by position.

    ``select_items``: the items are selected privately (no public catalogue): the counts are
    released (even if nothing else needs them) with the extra δ of the selection,
    ``partition_delta_ps`` (default :func:`partition_delta`).
    ``draws``: normals drawn per continuous release name (the sampler δ hook,
    :func:`sampler_delta`); ``edge``: an upper bound on each one's edge δ (:func:`make_plan`).
    """
    draws = dict(draws or {})
    edge = dict(edge or {})
    plan: list[PlannedRelease] = []
    k = cfg.effective_count_cap

    def continuous(name: str, sensitivity: float, **kw) -> PlannedRelease:
        return _continuous(name, sensitivity, draws, edge, **kw)

    labelled = TASKS[cfg.task].labelled
    if labelled:
        # the private global mean: each user capped at k ratings clipped to [low, high] on
        # the lattice, so the sum moves by ≤ k·L lattice units and the count by ≤ k
        lo, hi = cfg.data.rating_bounds
        rel_sum, rel_cnt = mean_releases(k, lo, hi, 1.0, 1.0)
        # μ̂ only centres the labels: the user biases and the offsets' prior absorb its error,
        # so it takes MEAN_NOISE_RATIO times the counts' noise (a small share of the budget)
        ratio = cfg.privacy.count_noise_ratio * MEAN_NOISE_RATIO
        plan.append(_planned(rel_sum, noise_ratio=ratio))
        plan.append(_planned(rel_cnt, noise_ratio=ratio))
    if releases_counts(cfg) or (cfg.private and select_items):
        delta_ps = 0.0
        if select_items:
            delta_ps = (partition_delta(cfg) if partition_delta_ps is None
                        else float(partition_delta_ps))
        plan.append(_planned(counts_release(k, 1.0, include_user_count=True, delta=delta_ps),
                             noise_ratio=cfg.privacy.count_noise_ratio,
                             noise_multiplier=cfg.privacy.count_noise_multiplier))
    if cfg.private and cfg.rating_offsets:
        plan.append(_planned(item_offsets_release(k, cfg.label_clip, 1.0),
                             noise_ratio=cfg.privacy.count_noise_ratio))
    if cfg.private and cfg.spectral_start:
        # after the counts (it ranks items by them), before the iterations; σ on the upper
        # triangle as for the noisy Gramian
        plan.append(continuous("spectral_init", spectral_sensitivity(),
                               noise_ratio=cfg.privacy.spectral_noise_ratio))
    plan += iteration_releases(cfg, draws, edge)
    if cfg.private and cfg.chooses_fold_in:
        # after the last iteration: one Gaussian release of K sums of per-user recalls
        plan.append(continuous("fold_in_choice", fold_in_choice.sensitivity(),
                               noise_ratio=cfg.privacy.fold_in_noise_ratio))
    return plan


def make_plan(cfg: TrainConfig, *, select_items: bool = False,
              draws: Mapping[str, int] | None = None,
              partition_delta_ps: float | None = None) -> PrivacyPlan | None:
    """The calibrated plan of ``cfg`` (None for a non-private run).

    ``select_items``: private partition selection of the items (no public catalogue): the
    plan then has the counts release with δ_ps = :func:`partition_delta` and
    ``item_threshold`` = :func:`~dpmt.privacy.partition_threshold` (k, the counts' σ, δ_ps);
    ``partition_delta_ps`` overrides δ_ps (a private selection pays (1 + e^ε)·E[K]·δ_ps,
    :func:`~dpmt.privacy.epsilon_of`, so it needs a smaller one).
    ``draws``: the sampler δ hook (:func:`planned_releases`). A release's edge δ depends on
    its calibrated multiplier, so it is charged at a bound checked after the calibration
    (recalibrated with the larger bound until it holds: more δ charged, more noise, a
    smaller edge term).

    Raises :class:`~dpmt.errors.PrivacyBudgetError` if (ε, δ) cannot be met.
    """
    if not cfg.private:
        return None
    method_of(cfg).check(cfg)
    edge: dict[str, float] = {}
    for _ in range(8):
        planned = planned_releases(cfg, select_items=select_items, draws=draws, edge=edge,
                                   partition_delta_ps=partition_delta_ps)
        cal = calibrate(planned, cfg.privacy.epsilon, cfg.privacy.delta, cfg.privacy.accountant)
        need = {r.name: sampler_delta(r.draws, r.noise_multiplier, r.count)
                - sampler_delta(r.draws) for r in cal.releases if r.draws}
        if all(v <= edge.get(name, 0.0) for name, v in need.items()):
            break
        edge = {name: max(v, edge.get(name, 0.0)) * 1.01 for name, v in need.items()}
    else:                                                       # pragma: no cover
        raise RuntimeError("the sampler's edge δ did not settle")
    rel = list(cal.releases)
    labelled = TASKS[cfg.task].labelled
    mean_sum = rel.pop(0) if labelled else None
    mean_count = rel.pop(0) if labelled else None
    counts = rel.pop(0) if (releases_counts(cfg) or select_items) else None
    offsets = rel.pop(0) if cfg.rating_offsets else None
    spectral = rel.pop(0) if cfg.spectral_start else None
    iterations = []
    n_item = len(method_of(cfg).releases(cfg))
    for _ in range(cfg.iterations):
        gram = rel.pop(0) if cfg.gravity > 0 else None
        item = tuple(rel.pop(0) for _ in range(n_item))
        iterations.append(IterationReleases(gramian=gram, item=item))
    fold_in = rel.pop(0) if cfg.chooses_fold_in else None
    assert not rel, "every calibrated release belongs to one step"
    threshold = None
    if select_items:
        threshold = partition_threshold(cfg.effective_count_cap, counts.noise_std,
                                        counts.delta)
    return PrivacyPlan(counts, tuple(iterations), cal, mean_sum, mean_count, offsets,
                       spectral, threshold, fold_in)


def equivalent_iterations(plan: PrivacyPlan, model_cfg: TrainConfig,
                          draws: Mapping[str, int] | None = None
                          ) -> tuple[IterationReleases, ...] | None:
    """``model_cfg``'s iterations (another item method, another number of sweeps) as releases
    of exactly the privacy of ``plan``'s: the planned iterations are Gaussian releases, whose
    composition is the Gaussian mechanism of μ² = Σ_k count_k·(Δ_k/σ_k)² (μ-GDP; Dong, Roth &
    Su 2022, Corollary 3.3), and ``model_cfg``'s releases, at its own noise ratios r_k, get
    σ_k = s·r_k·Δ_k with the one scale s that gives the same μ:

        s = √(Σ_k count_k / r_k²) / μ.

    ``draws``: ``model_cfg``'s normals per release name (:func:`sampler_draws`); each new
    release needs its sampler δ (tail + edge at its multiplier), and the new releases carry
    the δ the plan charged for its iterations, in proportion to their needs. None — keep the
    planned settings — when a planned or new release is not a plain Gaussian (Poisson
    sampling, a fixed multiplier), or when the new releases need more δ than the plan charged
    for its iterations (:func:`sampler_draws` charges a switchable config for both
    phases)."""
    old = [r for it in plan.iterations for r in it.all()]
    new_planned = iteration_releases(model_cfg, draws)
    if not old or not new_planned or any(
            r.mechanism != "gaussian" or r.sampling_rate is not None for r in old) or any(
            p.mechanism != "gaussian" or p.sampling_rate is not None
            or p.noise_multiplier is not None for p in new_planned):
        return None
    mu2 = sum(r.count * (r.sensitivity / r.noise_std) ** 2 for r in old)
    scale = math.sqrt(sum(p.count / p.noise_ratio ** 2 for p in new_planned) / mu2)
    new = []
    for p in new_planned:
        r = p.release(scale)
        # the edge term at the multiplier it now has (p.delta holds the tail term)
        new.append(dataclasses.replace(r, delta=r.delta + sampler_delta(
            r.draws, r.noise_multiplier, r.count) - sampler_delta(r.draws)))
    need, charged = sum(r.delta for r in new), sum(r.delta for r in old)
    if need > charged:
        return None
    # the plan's δ, charged as planned (whichever solver the rule picks, the run's δ is the
    # plan's): in proportion to each release's own need (equal shares if none needs any)
    share = ([r.delta / need for r in new] if need > 0 else [1.0 / len(new)] * len(new))
    new = [dataclasses.replace(r, delta=charged * w) for r, w in zip(new, share)]
    n_item = len(method_of(model_cfg).releases(model_cfg))
    iterations = []
    for _ in range(model_cfg.iterations):
        gram = new.pop(0) if model_cfg.gravity > 0 else None
        iterations.append(IterationReleases(gramian=gram,
                                            item=tuple(new.pop(0) for _ in range(n_item))))
    return tuple(iterations)


def resolved_plan(plan: PrivacyPlan, cfg: TrainConfig, model_cfg: TrainConfig,
                  draws: Mapping[str, int] | None = None) -> PrivacyPlan | None:
    """The plan of ``model_cfg`` (``cfg`` with its auto settings resolved from the released
    n̂, :func:`dpmt.train.defaults.resolve`): the same releases before the iterations and, per
    iteration, the item method's :meth:`~dpmt.train.methods.ItemMethod.equivalent_releases`,
    of exactly the privacy of the calibrated ones — so whichever the rule chose, the run's
    guarantee is the plan's (a choice from released values among mechanisms with one
    privacy profile is free: Dong, Roth & Su 2022, Theorem 3.2, adaptive composition), at
    the δ the plan charged. ``plan`` itself when nothing changed. None — keep the planned
    settings — when the method has no equivalent, when a replacement's own sampler δ would
    exceed the δ charged for it, or when the ledger (``dp_accounting``, whose numerical
    accountants only approximate the exact equality) would put its ε above the target.

    When the rule changed the item method or the number of sweeps (the solver rule,
    :func:`dpmt.train.defaults.solver_switch`), the whole iteration phase is replaced by
    :func:`equivalent_iterations` (``draws``: ``model_cfg``'s, :func:`sampler_draws`)."""
    if (method_of(model_cfg) is not method_of(cfg) or model_cfg.iterations != cfg.iterations
            or model_cfg.gravity != cfg.gravity):
        iters = equivalent_iterations(plan, model_cfg, draws)
        if iters is None:
            return None
        new = dataclasses.replace(plan, iterations=iters)
        return new if epsilon_of(new.releases(), cfg.privacy.delta,
                                 cfg.privacy.accountant) <= cfg.privacy.epsilon else None
    method = method_of(model_cfg)
    iterations, changed = [], False
    for it in plan.iterations:
        item = method.equivalent_releases(it.item, model_cfg)
        if item is None:
            return None
        item = tuple(item)
        if item != it.item:
            changed = True
            if any(r.draws and sampler_delta(r.draws, r.noise_multiplier, r.count) > r.delta
                   for r in item):
                return None
        iterations.append(dataclasses.replace(it, item=item))
    if not changed:
        return plan
    new = dataclasses.replace(plan, iterations=tuple(iterations))
    return new if epsilon_of(new.releases(), cfg.privacy.delta,
                             cfg.privacy.accountant) <= cfg.privacy.epsilon else None
