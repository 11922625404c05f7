"""Private alternating minimisation for matrix factorisation as multi-task learning.

Items are tasks with parameters v_i; user embeddings u_j are the features. One run (Chien et
al. 2021, Algorithm 1; Krichene et al. 2023, Algorithms 1 and 2):

0. **Plan and calibrate** the whole run once (:func:`dpmt.train.plan.make_plan`): the private
   counts (when the weights need them) and every iteration's releases, one noise scale for
   the target (ε, δ) by ``dp_accounting``. A budget that cannot be met is refused before any
   data is touched.
1. **Private task sizes** n̂_i and the user count n̂ in one release: each user capped at k
   items, Gaussian noise (:func:`dpmt.privacy.private_counts`). Every weight scheme reads
   this one release. With ``init="spectral"``, V0 is then the top eigenvectors of a noisy
   co-occurrence of the most popular items by n̂ (:mod:`dpmt.solvers.spectral_init`).
2. **Weights** w_ij from n̂ (:mod:`dpmt.train.weights`), Σ_i w_ij² ≤ β for every user
   (checked before the first item step).
3. For t = 1..T:
   a. user solve, never released (joint DP): u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV +
      λI)⁻¹ Σ_i y_ij v_i, clipped to ‖u_j‖ ≤ C; exact, or (``user_solve="cg"``) a few
      conjugate-gradient steps from the previous iteration's u_j;
   b. noisy Gramian Ĝ_U = Σ_j u_j u_jᵀ + E (sensitivity C²) when α0 > 0;
   c. private item step on the weighted per-item objective: SSP or noisy GD, plus the
      gravity term α0 Ĝ_U (:mod:`dpmt.solvers.steps`).
4. Return a :class:`~dpmt.model.Model`; evaluate it if evaluation users are given.

Privacy unit: one user (add/remove-one). Released: n̂ (counts), with ``init="spectral"``
the noisy co-occurrence Ĉ once, Ĝ_U and V at every iteration.
User embeddings are never released. The exact training counts are read only by the
evaluation (to define the popularity buckets of the report), never by training.

The invariants the sensitivities assume are enforced here, at the one entry point every
path goes through (the CLI, :func:`dpmt.train.rundir.run`, the benchmark, user code): one
rating per (user, item) pair, finite values, per-user weight budgets.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.privacy import PrivacyLedger, private_counts
from dpmt.privacy.mechanisms import select_items
from dpmt.privacy.randomness import NoiseSource
from dpmt.registry import TASKS
from dpmt.train.checkpoint import Checkpoint, LoopState, data_fingerprint
from dpmt.train.labels import rating_labels
from dpmt.train.methods import initial_item_state, make_steps, method_of
from dpmt.train.plan import (PrivacyPlan, beta_of, make_plan, releases_counts,
                             sampler_draws)
from dpmt.train.weights import compute_weights

log = logging.getLogger("dpmt.train")


def fit(train, config: TrainConfig | None = None, *, validation=None, test=None,
        item_features: np.ndarray | None = None, execution: ExecutionConfig | None = None,
        run_dir: str | os.PathLike | None = None, resume: bool = False,
        noise: NoiseSource | None = None,
        charged_draws: Mapping[str, int] | None = None) -> Model:
    """Train item embeddings on ``train`` under user-level DP; evaluate if eval sets are given.

    Args:
      train: training :class:`~dpmt.data.Ratings` (implicit feedback: values are ignored,
        every entry is a positive with label 1). One entry per (user, item) pair. When its
        item space is not public (``train.items_public`` False: ids read from the ratings
        themselves), a private run first selects the items it releases by private partition
        selection (noisy thresholded counts), so no item appears because one user rated it.
      config: a :class:`~dpmt.config.TrainConfig` (default settings if None).
      validation, test: optional :class:`~dpmt.data.splits.EvalSet` (history + targets in the
        same index space as ``train``); metrics are computed on ``test`` if given, else on
        ``validation``.
      item_features: (m, f) public item features for ``gd.encoder='mlp'``.
      execution: an :class:`~dpmt.config.ExecutionConfig` (devices, progress); cannot change
        the model.
      run_dir: if given, the trainer's private state goes there after every iteration (the
        checkpoint, with the noise secret: for ``resume``; never to be shared).
      resume: continue from ``run_dir``'s checkpoint (same noise, nothing charged twice; the
        checkpoint must belong to this config and this data).
      noise: the run's :class:`~dpmt.privacy.randomness.NoiseSource`. Default: a fresh secret
        from OS entropy, or, when ``config.noise_seed`` is set, one derived from it (then the
        model is NOT private against whoever knows the seed, and says so); on resume, the
        checkpoint's.
      charged_draws: normals to charge per continuous release for the sampler's δ
        (:func:`~dpmt.train.plan.sampler_draws`). Default: this run's own, from the data's
        public shape. A caller that repeats one mechanism over several configs (a private
        tuning) passes the largest over them, so that every repetition has the same DP
        event; fewer than the run draws is refused.

    Returns:
      a :class:`~dpmt.model.Model` (released V, item ids, ledger, metrics).
    """
    cfg, ex, eval_set = _check_inputs(train, config, execution, validation, test)
    if resume and run_dir is None:
        raise ConfigError("resume=True needs the run_dir whose checkpoint to continue")
    if noise is not None and not isinstance(noise, NoiseSource):
        raise ConfigError(f"noise must be a dpmt.privacy.randomness.NoiseSource (got "
                          f"{type(noise).__name__})")
    if ex.lapack_threads != 0:
        from dpmt.runtime import limit_lapack_threads

        limit_lapack_threads(ex.lapack_threads)
    t_start = time.time()
    select = cfg.private and not getattr(train, "items_public", False)
    # refuses an unmeetable budget before data; the sampler's δ from the data's public shape
    draws = sampler_draws(cfg, train.n_items,
                          None if item_features is None else np.shape(item_features)[-1])
    if charged_draws is not None:
        short = [name for name, n in draws.items() if int(charged_draws.get(name, 0)) < n]
        if short:
            raise ConfigError(f"charged_draws charges fewer normals than the run draws for "
                              f"{', '.join(short)}: give at least sampler_draws(config, ...)")
        draws = {name: int(charged_draws[name]) for name in draws}
    plan = make_plan(cfg, select_items=select, draws=draws)
    src = noise if noise is not None else NoiseSource.create(cfg.noise_seed)
    ledger = None if plan is None else PrivacyLedger(cfg.delta, epsilon_budget=cfg.epsilon,
                                                     accountant=cfg.accountant)
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
            src = saved["noise"]
            ledger = saved["ledger"]
            _check_resumed_ledger(saved, plan, cfg)
    k_init, k_iter = src.jax_key("init"), src.jax_key("iterations")

    # 0b. rating task: the private global mean centres the labels; y = clip(r − μ̂, ±c)
    offset, labels = None, None
    task = TASKS[cfg.task]
    if task.labelled:
        if saved is not None and "label_offset" in saved:
            offset = saved["label_offset"]
        else:
            offset = _release_mean(cfg, plan, ledger, train, src)
        labels = rating_labels(train.value, offset, cfg.label_clip)

    # 1. private counts (+ user count), 2. weights
    noisy_counts = noisy_n = selected = None
    if releases_counts(cfg) or select:
        if saved is not None and "noisy_counts" in saved:
            noisy_counts, noisy_n = saved["noisy_counts"], saved["noisy_n"]
            selected = saved.get("selected_items")
        else:
            rel = plan.counts
            noisy_counts, noisy_n, _ = private_counts(
                train.user, train.item, train.n_items, k=cfg.effective_count_cap,
                noise_std=rel.noise_std, cap_rng=src.numpy_rng("counts/cap"),
                noise_rng=src.random("counts/noise"), ledger=None, include_user_count=True)
            ledger.record(rel)
            if select:
                selected = select_items(noisy_counts, plan.item_threshold)
        _warn_if_delta_protects_nobody(cfg, noisy_n)
    released_counts = noisy_counts          # as released: before any selection
    if selected is not None:
        # private partition selection: only the items whose released count passed the
        # threshold exist from here on; the others are dropped with their ratings
        train, eval_set, item_features, labels = _restrict_items(
            train, eval_set, item_features, labels, selected)
        noisy_counts = np.asarray(noisy_counts)[selected]
    V0 = initial_items(k_init, train.n_items, cfg.dim, cfg.init_scale)
    item_offsets = None
    if cfg.rating_offsets:
        if saved is not None and "item_offsets" in saved:
            item_offsets = saved["item_offsets"]
        else:
            item_offsets = _release_item_offsets(cfg, plan, ledger, train, labels, noisy_counts,
                                                 src)
        labels = rating_labels(train.value, offset + item_offsets[train.item], cfg.label_clip)
    # 1b. the private spectral start (issue 10), once; a resumed run restarts from its saved
    # V (the release is already in the checkpoint's ledger: _check_resumed_ledger)
    if cfg.spectral_start and saved is None:
        V0 = _spectral_start(cfg, plan, ledger, train, noisy_counts, V0,
                             src.jax_key("spectral"))
    # 2. auto settings from released statistics only (n̂, ε): dpmt.train.defaults
    from dpmt.train.defaults import explain, resolve

    model_cfg, why = resolve(cfg, noisy_n)
    if why:
        log.info("auto settings: %s", explain(why))
    w = compute_weights(model_cfg, train, noisy_counts, noisy_n,
                        seed=int(src.numpy_rng("weights").integers(0, 2**31 - 1)))
    _check_weight_budget(model_cfg, train, w)

    method = method_of(model_cfg)
    steps = make_steps(model_cfg, train, w, labels=labels, item_features=item_features,
                       devices=ex.devices)
    item = steps.item_step
    state = LoopState(V0, 0, item.init(k_init, V0))
    history: list[dict] = []
    if saved is not None:
        state = LoopState(jnp.asarray(saved["V"]), saved["iteration"], saved["item_state"])
        history = saved["history"]
    n_norm = float(noisy_n) if noisy_n is not None else float(train.n_users)

    bar = _Progress(ex.progress, start=state.iteration, total=cfg.iterations)
    t_loop = time.time()
    # user_solve="cg" warm-starts from the last U: users' private state, kept in memory for
    # the next iteration and never checkpointed (a resumed run's first user step is exact)
    U = None
    for t in range(state.iteration, cfg.iterations):
        kt = jax.random.fold_in(k_iter, t)
        k_gram, k_item = jax.random.split(kt)
        rel = None if plan is None else plan.iterations[t]
        V = state.V
        # a. user solve (never released)
        U = steps.solve_users(V, U)
        # b. noisy Gramian for the gravity term
        extra = None
        if cfg.gravity > 0:
            from dpmt.solvers.ssp import noisy_gramian

            sigma_g = _charge(ledger, rel.gramian if rel else None)
            extra = cfg.gravity * noisy_gramian(U, k_gram, sigma_g)
        # c. private item step: its method's releases, charged, give the step its noise
        if rel is not None:
            for r in rel.item:
                ledger.record(r)
        noise_t = method.noise(None if rel is None else rel.item)
        V, item_state = item.update(state.item_state, V, U, k_item, noise_t, extra, n_norm)
        V = jnp.asarray(V, jnp.float32)
        if not bool(jnp.all(jnp.isfinite(V))):
            raise ConfigError(_divergence_message(model_cfg, t))
        state = LoopState(V, t + 1, item_state)
        eps = math.inf if ledger is None else ledger.epsilon()
        history.append({"iteration": t, "epsilon": eps, "seconds": time.time() - t_start})
        bar.update(eps)
        if ckpt is not None:
            ckpt.save(state, ledger, released_counts, noisy_n, history, noise=src,
                      label_offset=offset, item_offsets=item_offsets, selected_items=selected,
                      **fingerprints)
    bar.close()

    if noisy_counts is None and not cfg.private and model_cfg.uses_popularity_prior:
        noisy_counts = train.item_counts()      # non-private (ε = ∞): the exact counts
    model = Model(item_embeddings=np.asarray(state.V), item_ids=train.item_ids, config=model_cfg,
                  ledger=ledger, item_counts=None if noisy_counts is None else
                  np.asarray(noisy_counts), history=history, label_offset=offset,
                  item_offsets=item_offsets, auto_settings=explain(why),
                  noise_reproducible=cfg.private and src.reproducible)
    model.compile_seconds = _compile_seconds(history, t_loop - t_start)
    if eval_set is not None:
        from dpmt.train.evaluate import evaluate, evaluate_ratings

        model.metrics = (evaluate_ratings(model, train, eval_set) if task.labelled
                         else evaluate(model, train, eval_set))
    model.seconds = time.time() - t_start
    return model


def _restrict_items(train, eval_set, item_features, labels, keep: np.ndarray):
    """``train`` (and the eval set, features, labels) on the items of ``keep`` only: the
    privately selected item space, re-indexed 0..m'-1 in the original order."""
    from dpmt.data.ratings import Ratings
    from dpmt.data.splits import EvalSet

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


def _release_item_offsets(cfg: TrainConfig, plan, ledger, train, labels, noisy_counts,
                          src: NoiseSource) -> np.ndarray:
    """b̂_i from private per-item sums of the centred labels (exact means if non-private)."""
    from dpmt.privacy.mechanisms import private_item_offsets

    if plan is None:
        sums = np.bincount(train.item, weights=np.asarray(labels, np.float64),
                           minlength=train.n_items)
        n = np.bincount(train.item, minlength=train.n_items)
        return np.clip(sums / (n + 5.0), -cfg.label_clip, cfg.label_clip)
    b = private_item_offsets(labels, train.user, train.item, train.n_items, noisy_counts,
                             k=cfg.effective_count_cap, clip=cfg.label_clip,
                             noise_std=plan.item_offsets.noise_std,
                             cap_rng=src.numpy_rng("offsets/cap"),
                             noise_rng=src.random("offsets/noise"))
    ledger.record(plan.item_offsets)
    return b


def _spectral_start(cfg: TrainConfig, plan, ledger, train, noisy_counts, V_random, key
                    ) -> jax.Array:
    """V0 from the top eigenvectors of the noisy top-K co-occurrence
    (:mod:`dpmt.solvers.spectral_init`): K items by the released counts, the release
    charged here; a non-private run uses the exact counts and the exact co-occurrence."""
    from dpmt.solvers import spectral_init as si

    counts = train.item_counts() if plan is None else noisy_counts
    top = si.top_items(counts, cfg.spectral_items)
    C = si.cooccurrence(train.user, train.item, train.n_users, top)
    sigma = _charge(ledger, None if plan is None else plan.spectral)
    return si.spectral_start(V_random, top, si.release(C, key, sigma), cfg.init_scale)


def _release_mean(cfg: TrainConfig, plan, ledger, train, src: NoiseSource) -> float:
    """μ̂: the private global mean (each user capped at k ratings clipped to the rating
    range), or the exact mean for a non-private run."""
    from dpmt.privacy import private_mean

    lo, hi = cfg.rating_bounds
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


# -- the entry point's checks -------------------------------------------------------------
def _check_inputs(train, config, execution, validation, test):
    from dpmt.data.ratings import Ratings
    from dpmt.data.splits import EvalSet

    if not isinstance(train, Ratings):
        raise DataError(f"fit() trains on a dpmt.data.Ratings (got {type(train).__name__}); "
                        "build one with dpmt.data.load(...) or Ratings.from_raw(...)")
    cfg = TrainConfig() if config is None else config
    if not isinstance(cfg, TrainConfig):
        raise ConfigError(f"config must be a dpmt.TrainConfig (got {type(cfg).__name__}); "
                          "for a dict use TrainConfig.from_dict(d)")
    ex = ExecutionConfig() if execution is None else execution
    if not isinstance(ex, ExecutionConfig):
        raise ConfigError(f"execution must be a dpmt.ExecutionConfig (got "
                          f"{type(ex).__name__})")
    for name, es in (("validation", validation), ("test", test)):
        if es is not None and not isinstance(es, EvalSet):
            raise DataError(f"{name} must be a dpmt.data.EvalSet (history + targets; got "
                            f"{type(es).__name__}), e.g. split.test of per_user_split(...)")
        if es is not None and (es.history.n_items != train.n_items
                               or es.targets.n_items != train.n_items):
            raise DataError(f"{name} indexes {es.history.n_items} items but the training set "
                            f"has {train.n_items}: build both from one split")
    if train.nnz == 0:
        raise DataError("the training set is empty: nothing to train on")
    if train.n_users < 2 or train.n_items < 2:
        raise DataError(f"{train.n_users} user(s) × {train.n_items} item(s) is too small to "
                        "train a model or to protect anyone in it")
    _check_memory(cfg, train)
    _check_one_rating_per_pair(train)
    if not np.all(np.isfinite(np.asarray(train.value, np.float64))):
        raise DataError("the training ratings contain NaN or infinite values")
    if TASKS[cfg.task].labelled:
        lo, hi = cfg.rating_bounds
        v = np.asarray(train.value, np.float64)
        if v.min() < lo or v.max() > hi:
            raise DataError(f"ratings must lie in the rating range [{lo:g}, {hi:g}] that the "
                            f"private mean's sensitivity assumes (got {v.min():g}..{v.max():g}); "
                            "set --rating-range LOW,HIGH")
    return cfg, ex, (test if test is not None else validation)


def _check_memory(cfg: TrainConfig, train) -> None:
    """Refuse, before any release, a run that cannot fit in this machine's memory."""
    from dpmt.solvers.steps import estimate_bytes

    need = estimate_bytes(train.n_users, train.n_items, train.nnz, cfg.dim)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > 0.9 * have:
        raise ConfigError(f"this run needs about {need / 2**30:.1f} GiB ({train.n_users} users, "
                          f"{train.n_items} items, d = {cfg.dim}) and the machine has "
                          f"{have / 2**30:.1f} GiB: lower --dim, or shard it over hosts")


def _warn_if_delta_protects_nobody(cfg: TrainConfig, noisy_n: float | None) -> None:
    """δ ≥ 1/n allows a mechanism that publishes one user's data outright: warn (n is the
    released noisy user count; nothing exact is read)."""
    import warnings

    if noisy_n is not None and noisy_n > 0 and cfg.delta >= 1.0 / noisy_n:
        warnings.warn(f"δ = {cfg.delta:g} is at least 1/n̂ (n̂ ≈ {noisy_n:.0f} users): an "
                      "(ε, δ) guarantee with δ ≥ 1/n allows publishing some user's data "
                      "outright; use δ well below 1/n (e.g. 1e-5 or less)", stacklevel=3)


def _check_one_rating_per_pair(train) -> None:
    """Every sensitivity assumes a user contributes at most once per item (the count of item
    i moves by ≤ 1, Σ_i w_ij² counts each item once). Duplicates would break them silently."""
    key = train.user.astype(np.int64) * np.int64(train.n_items) + train.item.astype(np.int64)
    key = np.sort(key)
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.size:
        k = int(key[dup[0]])
        u, i = divmod(k, int(train.n_items))
        raise DataError(
            f"the training set has {dup.size} duplicate (user, item) pair(s), e.g. user "
            f"{train.user_ids[u]!r} × item {train.item_ids[i]!r}; user-level privacy assumes one "
            "rating per pair: load with on_duplicate='keep-last' (CLI: --on-duplicate "
            "keep-last) or deduplicate the data")


def _check_weight_budget(cfg: TrainConfig, train, w: np.ndarray) -> None:
    """Σ_i w_ij² ≤ β for every user: what every item-step sensitivity assumes."""
    if not cfg.private:
        return
    w = np.asarray(w, np.float64)
    if w.shape != (train.nnz,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RuntimeError("internal error: the weights are not finite, non-negative, one "
                           "per rating")
    spent = np.bincount(train.user, weights=w * w, minlength=train.n_users)
    beta = beta_of(cfg)
    if spent.max(initial=0.0) > beta * (1 + 1e-6):
        raise RuntimeError(f"internal error: a user's Σ w² = {spent.max():.6g} exceeds β = "
                           f"{beta:g}; refusing to release anything")


def _check_resumed_ledger(saved: dict, plan: PrivacyPlan | None, cfg: TrainConfig) -> None:
    ledger = saved["ledger"]
    if (plan is None) != (ledger is None):
        raise DataError("the checkpoint's privacy setting differs from this run's")
    if ledger is None:
        return
    done = saved["iteration"]
    expected = (len(plan.head())
                + sum(len(it.all()) for it in plan.iterations[:done]))
    if len(ledger) != expected or done > cfg.iterations:
        raise DataError(f"the checkpoint records {len(ledger)} releases after {done} "
                        f"iterations; this run's plan has {expected}: it belongs to another "
                        "run")


# -- helpers ---------------------------------------------------------------------------------
def _charge(ledger: PrivacyLedger | None, release) -> float:
    """Charge ``release`` to the ledger and return its noise std (0 if non-private)."""
    if ledger is None or release is None:
        return 0.0
    ledger.record(release)
    return release.noise_std


def _divergence_message(cfg: TrainConfig, t: int) -> str:
    hint = method_of(cfg).divergence_hint(cfg)
    return f"the item embeddings became non-finite at iteration {t} ({hint}); nothing was saved"


def _compile_seconds(history: list[dict], setup: float) -> float:
    """The first iteration's excess over the median of the later ones (≈ compilation)."""
    if len(history) < 2:
        return 0.0
    secs = np.diff([setup] + [h["seconds"] for h in history])
    return float(max(0.0, secs[0] - np.median(secs[1:])))


class _Progress:
    """A tqdm bar that says "compiling" through the first iteration and then shows the rate,
    the estimate and the ε spent so far."""

    def __init__(self, enabled: bool, start: int, total: int):
        self.bar = None
        if enabled and start < total:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=start, desc="train (compiling)", unit="it")

    def update(self, eps: float) -> None:
        if self.bar is not None:
            self.bar.set_description("train")
            self.bar.set_postfix(eps=f"{eps:.3g}")
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
