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
4. With ``fold_in="private"``, choose the fold-in's (λ, α0) by one more release, the
   candidates' Recall@20 summed over the training users (:mod:`dpmt.train.fold_in_choice`).
5. Return a :class:`~dpmt.model.Model`; evaluate it if evaluation users are given.

Privacy unit: one user (add/remove-one). Released: n̂ (counts), with ``init="spectral"``
the noisy co-occurrence Ĉ once, Ĝ_U and V at every iteration.
User embeddings are never released. The exact training counts are read only by the
evaluation (to define the popularity buckets of the report), never by training.

The code: :func:`dpmt.train.training_run.setup` does 0–2 (and checks, at the one entry
point every path goes through, the invariants the sensitivities assume: one rating per (user,
item) pair, finite values, per-user weight budgets; :mod:`dpmt.train.checks`);
:func:`iterate` is one pass of 3 — what ``fit``, the benchmark and the experiments run;
:func:`finish` is 4–5. ``fit`` strings them together with callbacks for progress and
checkpoints.
"""

from __future__ import annotations

import math
import os
import time
from typing import Mapping, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.errors import ConfigError
from dpmt.labels import refit_user_offsets, slopes
from dpmt.model import Model
from dpmt.privacy.randomness import NoiseSource
from dpmt.registry import TASKS
from dpmt.scoring import make_scorer
from dpmt.solvers import noise as normal_sampler
from dpmt.train import fold_in_choice
from dpmt.train.checkpoint import LoopState
from dpmt.train.defaults import explain
from dpmt.train.evaluate import combine_over_processes, evaluate, evaluate_ratings
from dpmt.train.methods import method_of
from dpmt.train.training_run import TrainingRun, _user_count, charge, setup


def fit(train, config: TrainConfig | None = None, *, validation=None, test=None,
        item_features: np.ndarray | None = None, execution: ExecutionConfig | None = None,
        run_dir: str | os.PathLike | None = None, resume: bool = False,
        noise: NoiseSource | None = None, charged_draws: Mapping[str, int] | None = None,
        callbacks: tuple = ()) -> Model:
    """Train item embeddings on ``train`` under user-level DP; evaluate if eval sets are given.

    Args:
      train: training :class:`~dpmt.data.Ratings`, one entry per (user, item) pair. Without a
        public item space (``train.items_public`` False) a private run first selects its
        items by private partition selection, so no item appears because one user rated it.
      config: a :class:`~dpmt.config.TrainConfig` (default settings if None).
      validation, test: optional :class:`~dpmt.data.splits.EvalSet` in ``train``'s index
        space; metrics on ``test`` if given, else on ``validation``.
      item_features: (m, f) public item features for ``gd.encoder='mlp'``.
      execution: an :class:`~dpmt.config.ExecutionConfig` (devices, progress): cannot change
        the model.
      run_dir, resume: the trainer's private state (checkpoint with the noise secret, never
        to be shared) goes to ``run_dir`` after every iteration; ``resume`` continues it (same
        noise, nothing charged twice, same config and data).
      noise: the run's :class:`~dpmt.privacy.randomness.NoiseSource`. Default: a fresh OS-
        entropy secret, or one from ``config.noise_seed`` (then NOT private against whoever
        knows the seed, and the model says so); on resume, the checkpoint's.
      charged_draws: normals charged per continuous release for the sampler's δ (default: the
        run's own, :func:`~dpmt.train.plan.sampler_draws`); a private tuning passes the
        largest over its candidates. Fewer than the run draws is refused.
      callbacks: objects with ``on_iteration(run)`` (and optionally ``close()``), called after
        every iteration with the :class:`~dpmt.train.training_run.TrainingRun`.

    Returns:
      a :class:`~dpmt.model.Model` (released V, item ids, ledger, metrics).
    """
    run = setup(train, config, validation=validation, test=test, item_features=item_features,
                execution=execution, run_dir=run_dir, resume=resume, noise=noise,
                charged_draws=charged_draws)
    hooks = [Progress(run), *([Checkpointing()] if run.checkpoint else []), *callbacks]
    try:
        for t in range(run.state.iteration, run.model_cfg.iterations):
            iterate(run, t)
            for h in hooks:
                h.on_iteration(run)
    finally:
        for h in hooks:
            getattr(h, "close", lambda: None)()
    return finish(run)


def iterate(run: TrainingRun, t: int) -> LoopState:
    """Iteration ``t`` of alternating minimisation on ``run`` (updates ``run.state``,
    ``run.U``, ``run.history``; charges the iteration's releases to ``run.ledger``):

    a. the user step (never released); b. the noisy Gramian α0·Ĝ_U when α0 > 0; c. the
    method's private item step with the noise of its calibrated releases. Raises
    ConfigError (nothing saved) if V becomes non-finite."""
    cfg, ledger = run.cfg, run.ledger
    k_gram, k_item = jax.random.split(jax.random.fold_in(run.k_iter, t))
    rel = None if run.plan is None else run.plan.iterations[t]
    if not run.factors:
        # a rating run without factors (dpmt.train.defaults.rating_factors): the sweep's
        # planned releases are charged, not made; V stays 0 and the model is its biases
        for r in () if rel is None else rel.all():
            ledger.record(r)
        run.state = LoopState(run.state.V, t + 1, run.state.item_state)
        run.history.append({"iteration": t, "epsilon": run_epsilon(run),
                            "seconds": time.time() - run.t_start})
        return run.state
    V = run.state.V
    if run.base_labels is not None:            # the user step reads y less the first b_j
        run.steps.labels = run.user_labels
    run.U = U = run.steps.solve_users(V, run.U)
    if run.base_labels is not None:            # … the item step y less the refitted b_j
        run.steps.labels = refitted_labels(run, U, V)
    extra = None
    if cfg.gravity > 0:
        sigma_g = charge(ledger, None if rel is None else rel.gramian)
        extra = cfg.gravity * run.steps.released_gramian(U, k_gram, sigma_g)
    if rel is not None:
        for r in rel.item:
            ledger.record(r)
    noise_t = run.method.noise(None if rel is None else rel.item)
    V, item_state = run.steps.item_step.update(run.state.item_state, V, U, k_item, noise_t,
                                               extra, run.n_norm)
    V = jnp.asarray(V, jnp.float32)
    if not bool(jnp.all(jnp.isfinite(V))):
        raise ConfigError(_divergence_message(run.model_cfg, t))
    run.state = LoopState(V, t + 1, item_state)
    run.history.append({"iteration": t, "epsilon": run_epsilon(run),
                        "seconds": time.time() - run.t_start})
    return run.state


def refitted_labels(run: TrainingRun, U, V):
    """The item step's labels of a rating run whose ``user_offsets`` refit: clip(r − μ̂ − b̂_i −
    b_j − ⟨w_j, f_i⟩, ±c), the user's offsets refitted to the residual of the user step's
    u_j (:func:`dpmt.labels.refit_user_offsets`; user j's own ratings and released values
    only). The clip keeps |y| ≤ c, the bound of the item step's sensitivity, whatever the
    user's offsets are."""

    cfg, train = run.cfg, run.train
    off = refit_user_offsets(run.base_labels, train.user, train.item, train.n_users, U, V, cfg,
                             run.user_features)
    y = np.clip(run.base_labels - off.per_rating(train.user, train.item),
                -cfg.label_clip, cfg.label_clip).astype(np.float32)
    return run.steps.replicated(y)


def run_epsilon(run: TrainingRun) -> float:
    """ε spent so far (∞ for a non-private run)."""
    return math.inf if run.ledger is None else run.ledger.epsilon()


def finish(run: TrainingRun) -> Model:
    """The :class:`~dpmt.model.Model` of a run after its iterations, evaluated on its eval
    set when it has one."""

    cfg, model_cfg, counts = run.cfg, run.model_cfg, run.noisy_counts
    if cfg.data.dataset == DEFAULT_DATASET and not str(run.train.name).startswith(cfg.data.dataset):
        # trained from Python on other data, the config's dataset left at its default
        model_cfg = model_cfg.replace(data=dict(dataset=data_label(run.train.name)))
    if counts is None and not cfg.private and (model_cfg.uses_popularity_prior
                                               or slopes(model_cfg)):
        counts = run.train.item_counts()        # non-private (ε = ∞): the exact counts
        if run.steps.aggregate is not None:
            counts = run.steps.aggregate(counts)
    if cfg.chooses_fold_in:
        model_cfg = choose_fold_in(run, model_cfg, counts)
    model = Model(item_embeddings=np.asarray(run.state.V), item_ids=run.train.item_ids,
                  config=model_cfg, ledger=run.ledger,
                  item_counts=None if counts is None else np.asarray(counts),
                  history=run.history, label_offset=run.offset, item_offsets=run.item_offsets,
                  auto_settings=explain(run.why),
                  noise_reproducible=cfg.private and run.noise.reproducible)
    model.compile_seconds = _compile_seconds(run.history, run.t_loop - run.t_start)
    if run.eval_set is not None:
        agg = run.steps.aggregate
        if agg is None:
            score = evaluate_ratings if TASKS[cfg.task].labelled else evaluate
            model.metrics = score(model, run.train, run.eval_set)
        else:   # sharded data: global buckets, every process's evaluation users together
            local = evaluate(model, run.train, run.eval_set,
                             item_counts=agg(run.train.item_counts()))
            model.metrics = combine_over_processes(local, agg)
    model.seconds = time.time() - run.t_start
    return model


def choose_fold_in(run: TrainingRun, model_cfg: TrainConfig, counts) -> TrainConfig:
    """``model_cfg`` with the fold-in chosen by :mod:`dpmt.train.fold_in_choice`: the K
    candidates' summed recalls on the training users (split, and above
    :data:`~dpmt.train.fold_in_choice.MAX_USERS` released users subsampled, by a key from the
    run's secret; with sharded data summed over the processes), plus the planned Gaussian
    noise (charged here; none for a non-private run), argmax. Only the choice leaves the
    trainer (the model's ``fold_in_reg`` / ``fold_in_gravity``)."""

    V = np.asarray(run.state.V)
    cands = fold_in_choice.candidates(model_cfg.reg, model_cfg.gravity)
    prior = make_scorer(V, model_cfg, counts).prior()
    n_users = (run.noisy_n if run.noisy_n is not None
               else _user_count(run.train, run.steps.aggregate))
    share = fold_in_choice.MAX_USERS / max(float(n_users), 1.0)
    key = int(run.noise.numpy_rng("fold_in_choice/split").integers(0, 2**63))
    sums = fold_in_choice.recall_sums(V, prior, model_cfg.user_clip, cands, run.train, key,
                                      share)
    if run.steps.aggregate is not None:      # sharded data: every process's users
        sums = np.asarray(run.steps.aggregate(sums), np.float64)
    release = None if run.plan is None else run.plan.fold_in
    sigma = charge(run.ledger, release)
    if sigma > 0:
        z = normal_sampler.normal(run.noise.jax_key("fold_in_choice/noise"), (len(sums),))
        sums = sums + sigma * np.asarray(z, np.float64)
    lam, a0 = cands[fold_in_choice.choose(sums)]
    run.why.append(("fold_in", f"λ = {lam:g}, α0 = {a0:g}",
                    f"chosen among {len(cands)} candidates by a private release of their "
                    "Recall@20 on the training users" if release is not None else
                    f"chosen among {len(cands)} candidates by their Recall@20 on the "
                    "training users (non-private)"))
    return model_cfg.replace(fold_in_reg=lam, fold_in_gravity=a0)


#: TrainConfig's default dataset: a config that names it may not have been trained on it
DEFAULT_DATASET = TrainConfig().data.dataset


def data_label(name: str) -> str:
    """The name a model trained from Python gives its data when the config's dataset was
    left at its default: the ratings' own name, without a split suffix (a model trained on
    synthetic data must not call itself ``ml-100k``, nor show ML-100K titles)."""
    name = str(name)
    for suffix in ("-train", "-validation", "-test"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "ratings"


class Callback(Protocol):
    """What ``fit(callbacks=...)`` calls after every iteration."""

    def on_iteration(self, run: TrainingRun) -> None: ...


class Checkpointing:
    """Writes the trainer's private state after every iteration (for ``resume``)."""

    def on_iteration(self, run: TrainingRun) -> None:
        run.checkpoint.save(run.state, run.ledger, run.released_counts, run.noisy_n,
                            run.history, noise=run.noise, label_offset=run.offset,
                            item_offsets=run.item_offsets, selected_items=run.selected,
                            users=run.U if run.model_cfg.warm_starts_users else None,
                            **run.fingerprints)


# -- helpers ---------------------------------------------------------------------------------
def _divergence_message(cfg: TrainConfig, t: int) -> str:
    hint = method_of(cfg).divergence_hint(cfg)
    return f"the item embeddings became non-finite at iteration {t} ({hint}); nothing was saved"


def _compile_seconds(history: list[dict], setup: float) -> float:
    """The first iteration's excess over the median of the later ones (≈ compilation)."""
    if len(history) < 2:
        return 0.0
    secs = np.diff([setup] + [h["seconds"] for h in history])
    return float(max(0.0, secs[0] - np.median(secs[1:])))


class Progress:
    """A tqdm bar that says "compiling" through the first iteration and then shows the rate,
    the estimate and the ε spent so far."""

    def __init__(self, run: TrainingRun):
        self.bar = None
        start, total = run.state.iteration, run.model_cfg.iterations
        if run.ex.progress and start < total:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=start, desc="train (compiling)", unit="it")

    def on_iteration(self, run: TrainingRun) -> None:
        self.update(run_epsilon(run))

    def update(self, eps: float) -> None:
        if self.bar is not None:
            self.bar.set_description("train")
            self.bar.set_postfix(eps=f"{eps:.3g}")
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
