"""Everything a training run does before its first iteration, as one :class:`TrainingRun`.

:func:`setup` checks the inputs (:mod:`dpmt.train.checks`), plans and calibrates every
release (:func:`dpmt.train.plan.make_plan`), takes the noise source (a fresh OS-entropy
secret, a seed for reproducible experiments, or a checkpoint's), and makes the releases
that come once, in the plan's order:

1. for the rating task, the private global mean μ̂ that centres the labels;
2. the private task sizes n̂_i and user count n̂ (when the weights, the method, the prior,
   the offsets or the spectral start read them), and, without a public item catalogue, the
   private item selection those counts decide;
3. for the rating task, the private item offsets b̂_i;
4. with ``init="spectral"``, the noisy co-occurrence that starts V.

Then the settings left to a rule (:mod:`dpmt.train.defaults`), the weights w_ij with
Σ_i w_ij² ≤ β (checked), and the layouts and steps of the method
(:func:`dpmt.train.methods.make_steps`). :func:`dpmt.train.loop.iterate` runs one
iteration of the result; :func:`dpmt.train.loop.fit` is setup, iterations, model.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from dpmt._io import check_output_path
from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.data.adapters import as_ratings
from dpmt.data.ratings import Ratings
from dpmt.data.splits import EvalSet, keyed_cap_mask
from dpmt.errors import ConfigError, DataError
from dpmt.labels import bias_refit, item_statistics, rating_labels, user_step_labels
from dpmt.privacy import PrivacyLedger, private_counts, private_mean
from dpmt.privacy.mechanisms import private_item_offsets, select_items
from dpmt.privacy.randomness import NoiseSource, shared_across_processes
from dpmt.solvers.sharding import auto_devices
from dpmt.registry import TASKS
from dpmt.runtime import limit_lapack_threads
from dpmt.solvers import collectives
from dpmt.solvers import spectral_init as si
from dpmt.train.checkpoint import Checkpoint, LoopState, data_fingerprint
from dpmt.train.checks import (check_inputs, check_resumed_ledger, check_weight_budget,
                               warn_if_delta_protects_nobody)
from dpmt.train.defaults import explain, rating_factors, resolve
from dpmt.train.methods import ItemMethod, initial_item_state, make_steps, method_of
from dpmt.train.plan import PrivacyPlan, make_plan, releases_counts, resolved_plan, sampler_draws
from dpmt.train.weights import compute_weights

log = logging.getLogger("dpmt.train")


@dataclasses.dataclass
class TrainingRun:
    """One run between :func:`setup` and the model: what the iterations read and update.

    ``cfg`` is the config as given, ``model_cfg`` with its auto settings resolved (``why``:
    the reasons). ``plan``/``ledger`` are None for a non-private run. ``state`` is the loop
    state (V, the next iteration, the item step's state); ``U`` the last user step's output,
    never released (``user_solve="cg"`` warm-starts from it, and the trainer's checkpoint keeps
    it so that a resumed run is bit-identical).
    ``released_counts`` are the counts as released, before a private selection;
    ``noisy_counts`` those of the selected items.
    """

    cfg: TrainConfig
    model_cfg: TrainConfig
    why: list
    ex: ExecutionConfig
    plan: PrivacyPlan | None
    ledger: PrivacyLedger | None
    noise: NoiseSource
    train: Any
    eval_set: Any
    method: ItemMethod
    steps: Any
    state: LoopState
    k_iter: jax.Array
    n_norm: float
    history: list = dataclasses.field(default_factory=list)
    offset: float | None = None
    item_offsets: np.ndarray | None = None
    base_labels: np.ndarray | None = None   # rating, refitted offsets: r − μ̂ − b̂_i
    user_labels: Any = None                 # … and the user step's labels, y less the first b_j
    user_features: np.ndarray | None = None  # … the item statistics f_i of the user slopes
    released_counts: np.ndarray | None = None
    noisy_counts: np.ndarray | None = None
    noisy_n: float | None = None
    selected: np.ndarray | None = None
    checkpoint: Checkpoint | None = None
    fingerprints: dict = dataclasses.field(default_factory=dict)
    t_start: float = 0.0
    t_loop: float = 0.0
    U: Any = None
    factors: bool = True    # rating task: False = the bias model alone (dpmt.train.defaults)


def default_source(cfg: TrainConfig) -> NoiseSource:
    """The randomness of a run given none: a private run's from its noise seed, else from
    fresh OS entropy (the secret stays with the trainer); a non-private run's (nothing is
    noised: only the data-independent start and the random choices of the weights) from the
    data seed, so that a non-private model is reproducible from its config and data."""
    if cfg.private:
        return NoiseSource.create(cfg.privacy.noise_seed)
    return NoiseSource.from_seed(cfg.data.seed)


def setup(train, config: TrainConfig | None = None, *, validation=None, test=None,
          item_features: np.ndarray | None = None, execution: ExecutionConfig | None = None,
          run_dir: str | os.PathLike | None = None, resume: bool = False,
          noise: NoiseSource | None = None,
          charged_draws: Mapping[str, int] | None = None) -> TrainingRun:
    """The run of :func:`dpmt.train.loop.fit` up to its first iteration (its arguments are
    documented there). Everything that can fail on the data or the budget fails here, and
    the once-only releases are made and charged here."""

    train = as_ratings(train)           # a scipy.sparse matrix, a DataFrame, an Arrow Table
    cfg, ex, eval_set = check_inputs(train, config, execution, validation, test)
    if resume and run_dir is None:
        raise ConfigError("resume=True needs the run_dir whose checkpoint to continue")
    if run_dir is not None:
        check_output_path(run_dir, "run_dir", folder=True)   # before anything is released
    if noise is not None and not isinstance(noise, NoiseSource):
        raise ConfigError(f"noise must be a dpmt.privacy.randomness.NoiseSource (got "
                          f"{type(noise).__name__})")
    if ex.lapack_threads != 0:
        limit_lapack_threads(ex.lapack_threads)
    t_start = time.time()
    select = cfg.private and not getattr(train, "items_public", False)
    aggregate = _sum_over_processes(cfg, ex, train, run_dir)
    # refuses an unmeetable budget before data; the sampler's δ from the data's public shape
    plan = make_plan(cfg, select_items=select, draws=_draws(cfg, train, item_features,
                                                            charged_draws))
    # one secret for every process of a jax.distributed run (process 0's)
    src = shared_across_processes(noise if noise is not None else default_source(cfg))
    ledger = None if plan is None else PrivacyLedger(cfg.privacy.delta,
                                                     epsilon_budget=cfg.privacy.epsilon,
                                                     accountant=cfg.privacy.accountant)
    ckpt = Checkpoint(run_dir) if run_dir is not None else None
    fingerprints = dict(config_fingerprint=cfg.fingerprint(),
                        data_fingerprint=data_fingerprint(train))
    saved = None
    if ckpt is not None and resume:
        # the template fixes the item state's structure; the values come from the file
        template = initial_item_state(cfg, train.n_items, item_features, src.jax_key("init"))
        saved = ckpt.load(item_state_template=template, **fingerprints)
        if saved is not None:
            if noise is not None and saved["noise"] != noise:
                raise DataError(f"the checkpoint in {run_dir} was drawn from another noise "
                                "source than the one given: resume with the run's own")
            src, ledger = saved["noise"], saved["ledger"]
            check_resumed_ledger(saved, plan, cfg, head_only=True)   # in full below
    saved = saved or {}
    k_init = src.jax_key("init")
    once = _OnceReleases(cfg, plan, ledger, src, saved)

    # 1. rating task: the private global mean centres the labels; y = clip(r − μ̂, ±c)
    offset, labels = None, None
    if TASKS[cfg.task].labelled:
        offset = once.get("label_offset", lambda: release_mean(cfg, plan, ledger, train, src))
        labels = rating_labels(train.value, offset, cfg.label_clip)
    # 2. private counts (+ user count) and, without a catalogue, the items they select
    noisy_counts = noisy_n = selected = None
    if releases_counts(cfg) or select:
        noisy_counts, noisy_n, selected = once.counts(train, select, aggregate)
        warn_if_delta_protects_nobody(cfg, noisy_n)
    released_counts = noisy_counts          # as released: before any selection
    if selected is not None:
        # private partition selection: only the items whose released count passed the
        # threshold exist from here on; the others are dropped with their ratings
        train, eval_set, item_features, labels = restrict_items(
            train, eval_set, item_features, labels, selected)
        noisy_counts = np.asarray(noisy_counts)[selected]
    V0 = initial_items(k_init, train.n_items, cfg.dim, cfg.init_scale)
    if cfg.iterations == 0:              # the rating task's bias model alone: no factors
        V0 = jnp.zeros_like(V0)
    # 3. rating task: private item offsets b̂_i, then y = clip(r − μ̂ − b̂_i, ±c)
    item_offsets = None
    if cfg.rating_offsets:
        item_offsets = once.get("item_offsets", lambda: release_item_offsets(
            cfg, plan, ledger, train, labels, noisy_counts, src))
    # 3b. each user's own offsets out of the labels (never released: joint DP, like u_j);
    # refitted by the loop after each user step (user_offsets; dpmt.train.loop.iterate)
    base_labels = features = None
    if TASKS[cfg.task].labelled:
        features = item_statistics(item_offsets, train.item_counts() if plan is None
                                   else noisy_counts)
        off = offset + (0.0 if item_offsets is None else item_offsets[train.item])
        labels, _, base_labels = user_step_labels(train.value, off, train.user, train.item,
                                                  train.n_users, cfg, features)
    # 4. the private spectral start (issue 10), once; a resumed run restarts from its saved
    # V (the release is already in the checkpoint's ledger: check_resumed_ledger)
    if cfg.spectral_start and not saved:
        V0 = spectral_start(cfg, plan, ledger, train, noisy_counts, V0, src.jax_key("spectral"))

    model_cfg, why = resolve(cfg, noisy_n, noisy_counts)
    if plan is not None:
        # a rule that changed the item step's releases (noisy GD's steps, the solver rule)
        # gives releases of the plan's privacy; without such, the rules that keep the
        # planned method, and failing that the settings the plan was calibrated for
        nf = None if item_features is None else np.shape(item_features)[-1]
        resolved = resolved_plan(plan, cfg, model_cfg,
                                 sampler_draws(model_cfg, train.n_items, nf))
        if resolved is None and method_of(model_cfg) is not method_of(cfg):
            model_cfg, why = resolve(cfg, noisy_n)
            resolved = resolved_plan(plan, cfg, model_cfg)
        if resolved is None:
            model_cfg, why = resolve(method_of(cfg).planned_config(cfg), noisy_n)
        plan = resolved or plan
        if saved:           # the releases a resumed checkpoint made are this plan's
            check_resumed_ledger(saved, plan, model_cfg)
    # the rating task's factors: trained, or (small n̂·ε) the planned sweeps charged only
    factors = True
    if TASKS[cfg.task].labelled:
        factors, reason = rating_factors(model_cfg, noisy_n)
        why.append(("factors", "on" if factors else "off", reason))
        if not factors:
            V0 = jnp.zeros_like(V0)
    if why:
        log.info("auto settings: %s", explain(why))
    w = compute_weights(model_cfg, train, noisy_counts, noisy_n,
                        seed=int(src.numpy_rng("weights").integers(0, 2**31 - 1)),
                        keyed=aggregate is not None)
    check_weight_budget(model_cfg, train, w)
    steps = make_steps(model_cfg, train, w, labels=labels, item_features=item_features,
                       devices=run_devices(ex), aggregate=aggregate)
    state, history, U = LoopState(V0, 0, steps.item_step.init(k_init, V0)), [], None
    if saved:
        state = LoopState(jnp.asarray(saved["V"]), saved["iteration"], saved["item_state"])
        history = saved["history"]
        # the CG user step's warm start, so that the resumed run is bit-identical (on a
        # mesh too: the sharded user step returns U replicated and replicates its start)
        if "U" in saved:
            U = jnp.asarray(saved["U"])
    return TrainingRun(
        cfg=cfg, model_cfg=model_cfg, why=why, ex=ex, plan=plan, ledger=ledger, noise=src,
        train=train, eval_set=eval_set, method=method_of(model_cfg), steps=steps, state=state,
        k_iter=src.jax_key("iterations"),
        n_norm=float(noisy_n) if noisy_n is not None else _user_count(train, aggregate),
        history=history, U=U, offset=offset, item_offsets=item_offsets, factors=factors,
        base_labels=base_labels if bias_refit(cfg) else None, user_features=features,
        user_labels=steps.labels if bias_refit(cfg) else None,
        released_counts=released_counts, noisy_counts=noisy_counts, noisy_n=noisy_n,
        selected=selected, checkpoint=ckpt, fingerprints=fingerprints, t_start=t_start,
        t_loop=time.time())


def _draws(cfg, train, item_features, charged_draws) -> dict[str, int]:
    """The normals to charge per continuous release: the run's own (from the data's public
    shape), or ``charged_draws`` when it is at least that."""
    draws = sampler_draws(cfg, train.n_items,
                          None if item_features is None else np.shape(item_features)[-1])
    if charged_draws is None:
        return draws
    short = [name for name, n in draws.items() if int(charged_draws.get(name, 0)) < n]
    if short:
        raise ConfigError(f"charged_draws charges fewer normals than the run draws for "
                          f"{', '.join(short)}: give at least sampler_draws(config, ...)")
    return {name: int(charged_draws[name]) for name in draws}


class _OnceReleases:
    """The once-only releases: read back from a resumed checkpoint, else made (and charged)
    now."""

    def __init__(self, cfg, plan, ledger, src, saved: dict):
        self.cfg, self.plan, self.ledger, self.src, self.saved = cfg, plan, ledger, src, saved

    def get(self, name: str, release):
        return self.saved[name] if name in self.saved else release()

    def counts(self, train, select: bool, aggregate=None):
        if "noisy_counts" in self.saved:
            s = self.saved
            return s["noisy_counts"], s["noisy_n"], s.get("selected_items")
        rel, src = self.plan.counts, self.src
        keep = None
        if aggregate is not None:   # sharded data: the same cap on any split of the users
            seed = int(src.numpy_rng("counts/keyed-cap").integers(0, 2**62))
            keep = keyed_cap_mask(train, self.cfg.effective_count_cap, seed)
        noisy_counts, noisy_n, _ = private_counts(
            train.user, train.item, train.n_items, k=self.cfg.effective_count_cap,
            noise_std=rel.noise_std, cap_rng=src.numpy_rng("counts/cap"),
            noise_rng=src.random("counts/noise"), ledger=None, include_user_count=True,
            aggregate=aggregate, keep=keep)
        self.ledger.record(rel)
        selected = select_items(noisy_counts, self.plan.item_threshold) if select else None
        return noisy_counts, noisy_n, selected


def run_devices(ex: ExecutionConfig) -> int:
    """The devices a run shards over: ``ex.devices``, or for ``None`` (auto)
    :func:`dpmt.solvers.sharding.auto_devices` (1 with sharded data: one device per
    process)."""
    if ex.devices is not None:
        return ex.devices
    return 1 if ex.sharded_data else auto_devices()


def _sum_over_processes(cfg: TrainConfig, ex: ExecutionConfig, train, run_dir):
    """``process_sum`` for sharded data (:mod:`dpmt.solvers.collectives`), or None; refuses
    (ConfigError, before anything is released) what the summed path does not cover yet."""
    if not ex.sharded_data:
        return None

    method = method_of(cfg)
    missing = [why for bad, why in (
        (not method.sums_over_processes, f"solver {cfg.solver!r} does not sum its statistics "
                                         "over processes"),
        (TASKS[cfg.task].labelled, "the rating task's mean and item offsets"),
        (cfg.spectral_start, "init='spectral'"),
        (cfg.private and not getattr(train, "items_public", False),
         "a private item selection (every process must index the same public catalogue: "
         "read the shards with dpmt.data.shards.read_user_shard)"),
        (run_dir is not None, "checkpoints (each process would hold its own U)"),
        ((ex.devices or 1) > 1, "devices > 1 (one device per process)"),
        (cfg.gd.sampling_rate is not None, "Poisson sampling (sampling_rate)"),
        (cfg.gd.uses_mlp, "encoder='mlp'"),
    ) if bad]
    if missing:
        raise ConfigError("sharded_data=True does not support " + "; ".join(missing) +
                          ": drop them, or train on one process holding every user")
    return collectives.process_sum         # looked up at call time (tests stand in for it)


def _user_count(train, aggregate) -> float:
    """n, the number of users (of every process with sharded data): a non-private run's
    normaliser."""
    n = np.array([train.n_users], np.int64)
    return float((n if aggregate is None else aggregate(n))[0])


def charge(ledger: PrivacyLedger | None, release) -> float:
    """Charge ``release`` to the ledger and return its noise std (0 if non-private)."""
    if ledger is None or release is None:
        return 0.0
    ledger.record(release)
    return release.noise_std


def restrict_items(train, eval_set, item_features, labels, keep: np.ndarray):
    """``train`` (and the eval set, features, labels) on the items of ``keep`` only: the
    privately selected item space, re-indexed 0..m'-1 in the original order."""

    keep = np.asarray(keep, bool)
    if int(keep.sum()) < 2:
        raise DataError(f"private item selection kept {int(keep.sum())} of {keep.size} items "
                        "(each needs a released count above the threshold): the data is too "
                        "small for a private item list; give the public item catalogue "
                        "(--items FILE, or Ratings.from_raw(..., items=...))")
    new_index = np.cumsum(keep) - 1

    def restrict(r):
        rows = keep[r.item]
        # items_public: the selected list is a DP release (private partition selection)
        return Ratings(user=r.user[rows], item=new_index[r.item[rows]], value=r.value[rows],
                       user_ids=r.user_ids, item_ids=r.item_ids[keep],
                       timestamp=None if r.timestamp is None else r.timestamp[rows],
                       name=r.name, items_public=True), rows

    new_train, rows = restrict(train)
    if labels is not None:
        labels = np.asarray(labels)[rows]
    if eval_set is not None:
        eval_set = EvalSet(history=restrict(eval_set.history)[0],
                           targets=restrict(eval_set.targets)[0])
    if item_features is not None:
        item_features = np.asarray(item_features)[keep]
    return new_train, eval_set, item_features, labels


def release_item_offsets(cfg: TrainConfig, plan, ledger, train, labels, noisy_counts,
                          src: NoiseSource) -> np.ndarray:
    """b̂_i from private per-item sums of the centred labels (:func:`dpmt.privacy.mechanisms.
    private_item_offsets`); non-private, the exact damped item biases fitted jointly with the
    user biases (:func:`exact_item_offsets`)."""

    if plan is None:
        return exact_item_offsets(labels, train, cfg.label_clip,
                                  cfg.user_bias_reg if cfg.rating_user_bias else None)
    b = private_item_offsets(labels, train.user, train.item, train.n_items, noisy_counts,
                             k=cfg.effective_count_cap, clip=cfg.label_clip,
                             noise_std=plan.item_offsets.noise_std,
                             cap_rng=src.numpy_rng("offsets/cap"),
                             noise_rng=src.random("offsets/noise"))
    ledger.record(plan.item_offsets)
    return b


#: the damping of the non-private item biases b_i = Σ_j (y_ij − b_j) / (n_i + λ_i)
ITEM_BIAS_REG = 5.0
#: alternations of the non-private item and user biases
BIAS_ROUNDS = 10


def exact_item_offsets(labels, train, clip: float, user_reg: float | None) -> np.ndarray:
    """Non-private item biases (standard damped baseline estimates): b_i = Σ_j (y_ij − b_j) /
    (n_i + λ_i) alternated :data:`BIAS_ROUNDS` times with the user biases b_j = Σ_i (y_ij −
    b_i) / (n_j + ``user_reg``) (no user bias: ``user_reg`` None), λ_i = :data:`ITEM_BIAS_REG`;
    clipped to ±c. Reads exact data: only for a run without privacy."""
    y = np.asarray(labels, np.float64)
    item, user = np.asarray(train.item), np.asarray(train.user)
    n_i = np.bincount(item, minlength=train.n_items)
    n_u = np.bincount(user, minlength=train.n_users)
    b_u = np.zeros(train.n_users)
    for _ in range(BIAS_ROUNDS if user_reg is not None else 1):
        b_i = np.bincount(item, y - b_u[user], train.n_items) / (n_i + ITEM_BIAS_REG)
        if user_reg is not None:
            b_u = np.bincount(user, y - b_i[item], train.n_users) / (n_u + user_reg)
    return np.clip(b_i, -clip, clip)


def spectral_start(cfg: TrainConfig, plan, ledger, train, noisy_counts, V_random, key
                    ) -> jax.Array:
    """V0 from the top eigenvectors of the noisy top-K co-occurrence
    (:mod:`dpmt.solvers.spectral_init`): K items by the released counts, the release
    charged here; a non-private run uses the exact counts and the exact co-occurrence."""

    counts = train.item_counts() if plan is None else noisy_counts
    top = si.top_items(counts, cfg.spectral_items)
    C = si.cooccurrence(train.user, train.item, train.n_users, top)
    sigma = charge(ledger, None if plan is None else plan.spectral)
    return si.spectral_start(V_random, top, si.release(C, key, sigma), cfg.init_scale)


def release_mean(cfg: TrainConfig, plan, ledger, train, src: NoiseSource) -> float:
    """μ̂: the private global mean (each user capped at k ratings clipped to the rating
    range), or the exact mean for a non-private run."""

    lo, hi = cfg.data.rating_bounds
    if plan is None:
        return float(np.clip(np.mean(np.asarray(train.value, np.float64)), lo, hi))
    mean, _ = private_mean(train.value, train.user, low=lo, high=hi,
                           k=cfg.effective_count_cap, sum_noise_std=plan.mean_sum.noise_std,
                           count_noise_std=plan.mean_count.noise_std,
                           cap_rng=src.numpy_rng("mean/cap"), noise_rng=src.random("mean/noise"))
    ledger.record(plan.mean_sum)
    ledger.record(plan.mean_count)
    return mean


def initial_items(key: jax.Array, n_items: int, dim: int, scale: float) -> jax.Array:
    """Data-independent initial V: a shared direction plus Gaussian jitter.

    v_i = scale · (1/√d + 0.5·N(0, I_d)). With every positive labelled 1, the shared
    direction makes the first user solve put every user on the same side of it, so the first
    private item step already learns a popularity-like component (b_i ∝ Σ_j w_ij u_j adds
    up coherently) instead of averaging random directions to noise.
    """
    common = jnp.full((n_items, dim), 1.0 / math.sqrt(dim), jnp.float32)
    return scale * (common + 0.5 * jax.random.normal(key, (n_items, dim), jnp.float32))
