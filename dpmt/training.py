"""Private alternating minimisation for matrix factorisation as multi-task learning.

Items are tasks with parameters v_i; user embeddings u_j are the features. One run
(Chien et al. 2021; Krichene et al. 2023; protocol in ``shared/reference/dpam_protocol.md``):

0. **Plan and calibrate** the whole run once: the private counts (when the weights need them)
   and every iteration's releases, one noise scale for the target (ε, δ) by ``dp_accounting``
   (:func:`plan_releases`). A budget that cannot be met is refused before data is touched.
1. **Private task sizes** n̂_i (and n̂, the user count, in the same release): each user capped
   at k items, Gaussian noise (:func:`dpmt.privacy.private_counts`). Released once; every
   weight scheme reads this one release.
2. **Weights** w_ij from n̂ (:mod:`dpmt.weighting`), Σ_i w_ij² ≤ β for every user.
3. For t = 1..T:
   a. user solve, exact, never released (joint DP): u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV +
      λI)⁻¹ Σ_i y_ij v_i, clipped to ‖u_j‖ ≤ C;
   b. noisy Gramian Ĝ_U = Σ_j u_j u_jᵀ + E (sensitivity C²) when α0 > 0;
   c. private item step on the weighted per-item objective: SSP (Algorithm 1) or noisy GD
      with per-user clipping (Algorithm 2), plus the gravity term α0 Ĝ_U.
4. Evaluate: fold in evaluation users from their history (exact user solve against the
   released V), rank all items, Recall/NDCG overall and per popularity bucket.

Privacy unit: one user (add/remove-one). Released: n̂ (counts), Ĝ_U and V at every iteration.
User embeddings are never released. The exact training counts are read only by the
evaluation (to define the popularity buckets of the report), never by training.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpmt import weighting
from dpmt.config import TrainConfig
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError
from dpmt.privacy import (PlannedRelease, PrivacyLedger, Release, atomic_write_text, calibrate,
                          private_counts)
from dpmt.privacy.ledger import PRIVACY_UNIT

log = logging.getLogger("dpmt.training")

# Implicit feedback: positives have label 1; |y| ≤ Y_MAX is what the b-sensitivity assumes.
Y_MAX = 1.0


# ---------------------------------------------------------------------------------------
# Privacy plan
# ---------------------------------------------------------------------------------------
def plan_releases(cfg: TrainConfig) -> list[PlannedRelease]:
    """Every release of the run, in order, with its sensitivity (add/remove one user).

    * ``item_counts``: capped histogram + user count, sensitivity √(k+1).
    * ``iter{t}/gramian``: Σ_j u_j u_jᵀ, Frobenius sensitivity C² (only if α0 > 0).
    * SSP: ``iter{t}/ssp_A`` (√β C²) and ``iter{t}/ssp_b`` (√β C y_max).
    * GD: ``iter{t}/gd``, ``gd_steps`` Gaussian steps on the clipped gradient sum
      (sensitivity G), Poisson-subsampled at rate q if ``gd_sampling_rate`` is set.
    """
    from dpmt.privacy.mechanisms import count_sensitivity
    from dpmt.solvers.noisy_gd import noisy_gd_sensitivity
    from dpmt.solvers.ssp import gramian_sensitivity, ssp_sensitivities

    plan: list[PlannedRelease] = []
    if cfg.needs_counts:
        plan.append(PlannedRelease(
            "item_counts", count_sensitivity(cfg.effective_count_cap, include_user_count=True),
            noise_ratio=cfg.count_noise_ratio, noise_multiplier=cfg.count_noise_multiplier))
    beta = beta_of(cfg)
    for t in range(cfg.iterations):
        if cfg.gravity > 0:
            plan.append(PlannedRelease(f"iter{t}/gramian", gramian_sensitivity(cfg.user_clip),
                                       noise_ratio=cfg.gram_noise_ratio))
        if cfg.solver == "ssp":
            s_a, s_b = ssp_sensitivities(beta, cfg.user_clip, Y_MAX)
            plan.append(PlannedRelease(f"iter{t}/ssp_A", s_a))
            plan.append(PlannedRelease(f"iter{t}/ssp_b", s_b, noise_ratio=cfg.b_noise_ratio))
        else:
            plan.append(PlannedRelease(f"iter{t}/gd", noisy_gd_sensitivity(cfg.gd_clip),
                                       count=cfg.gd_steps, sampling_rate=cfg.gd_sampling_rate))
    return plan


def beta_of(cfg: TrainConfig) -> float:
    """The per-user budget β on Σ_i w_ij² that the sensitivities assume."""
    return float(cfg.budget)


# ---------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------
def compute_weights(cfg: TrainConfig, train: Ratings, noisy_counts: np.ndarray | None,
                    noisy_n_users: float | None, seed: int) -> np.ndarray:
    """Per-rating weights w_ij (nnz,), float64, Σ_i w_ij² ≤ β for every user.

    Reads only the user's own ratings and the *released* counts (never exact counts).
    """
    if not cfg.private:
        return np.ones(train.nnz)
    beta = beta_of(cfg)
    if cfg.weights == "uniform":
        return weighting.uniform_sample_weights(train.user, int(beta), seed=seed)
    assert noisy_counts is not None
    if cfg.weights == "tail":
        return weighting.tail_weights(noisy_counts, train.user, train.item, int(beta), seed=seed)
    if cfg.weights == "adaptive":
        omega = weighting.task_weights(noisy_counts, mu=cfg.effective_mu, budget=beta,
                                       n_users=max(1, int(round(noisy_n_users))))
        return weighting.clip_to_budget(omega, train.user, train.item, beta)
    return weighting.normalized_user_weights(noisy_counts, train.user, train.item,
                                             mu=cfg.effective_mu, budget=beta)


# ---------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class FitResult:
    """A trained model: item embeddings V (released), the ledger, metrics, and fold-in.

    User embeddings are not part of the result: under joint DP they are never released.
    """

    config: TrainConfig
    item_embeddings: np.ndarray          # float32 (m, d)
    item_ids: np.ndarray                 # raw item id per row
    ledger: PrivacyLedger | None
    metrics: dict | None = None
    history: list[dict] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def epsilon(self) -> float:
        return 0.0 if self.ledger is None else self.ledger.epsilon()

    def fold_in(self, history_items, history_values=None) -> np.ndarray:
        """Exact user embedding of a new user from their history (dense item indices)."""
        V = np.asarray(self.item_embeddings, np.float64)
        items = np.asarray(history_items, dtype=np.int64)
        if items.ndim != 1 or (items.size and (items.min() < 0 or items.max() >= len(V))):
            raise DataError(f"history must be dense item indices in [0, {len(V)})")
        y = np.ones(len(items)) if history_values is None else np.asarray(history_values, float)
        cfg = self.config
        Vh = V[items]
        M = Vh.T @ Vh + cfg.gravity * (V.T @ V) + cfg.reg * np.eye(V.shape[1])
        u = np.linalg.solve(M, Vh.T @ y)
        n = np.linalg.norm(u)
        return u * min(1.0, cfg.user_clip / n) if n > 0 else u

    def recommend(self, history, k: int = 10, exclude_history: bool = True) -> np.ndarray:
        """Top-k dense item indices for a new user with ``history`` (dense item indices)."""
        if k < 1:
            raise ConfigError(f"k must be >= 1 (got {k})")
        history = np.asarray(history, dtype=np.int64)
        scores = np.asarray(self.item_embeddings, np.float64) @ self.fold_in(history)
        if exclude_history and history.size:
            scores[history] = -np.inf
        k = min(k, int(np.isfinite(scores).sum()))
        top = np.argpartition(-scores, k - 1)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    def report(self) -> str:
        cfg = self.config
        name = ("non-private" if not cfg.private else
                f"DP ε={self.epsilon:.3g} (target {cfg.epsilon:g}), δ={cfg.delta:g}")
        lines = [f"{cfg.dataset}: {cfg.solver} / {cfg.weights if cfg.private else 'all-ones'} "
                 f"weights, d={cfg.dim}, {cfg.iterations} iterations, {name}",
                 f"privacy unit: {PRIVACY_UNIT}"]
        if self.metrics:
            o = self.metrics["overall"]
            lines.append("overall: " + ", ".join(f"{k}={v:.4f}" for k, v in o.items()
                                                 if k.startswith(("recall", "ndcg"))))
            lines.append("Recall@20 by popularity bucket (least popular first): " + ", ".join(
                f"{b['recall@20']:.4f}" for b in self.metrics["buckets"]))
        lines.append(f"time: {self.seconds:.1f}s")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------
def _progress(iterable, enabled: bool, **kw):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, **kw)


def fit(train: Ratings, config: TrainConfig | None = None, *, validation=None, test=None,
        item_features: np.ndarray | None = None, progress: bool = False,
        run_dir: str | os.PathLike | None = None, resume: bool = False) -> FitResult:
    """Train item embeddings on ``train`` under user-level DP; evaluate if eval sets are given.

    Args:
      train: training ratings (implicit feedback: values are ignored, every entry is a
        positive with label 1).
      config: a :class:`~dpmt.config.TrainConfig` (default settings if None).
      validation, test: optional :class:`~dpmt.data.splits.EvalSet` (history + targets in the
        same index space as ``train``); metrics are computed on ``test`` if given, else on
        ``validation``.
      item_features: (m, f) public item features for ``encoder='mlp'``.
      progress: show a progress bar with the privacy spent so far.
      run_dir: if given, checkpoints after every iteration go there (for ``resume``).
      resume: continue from ``run_dir``'s checkpoint (same random streams, nothing charged
        twice).

    Returns:
      a :class:`FitResult`.
    """
    from dpmt.solvers import layout as layout_mod
    from dpmt.solvers.ssp import noisy_gramian

    cfg = config or TrainConfig()
    if train.nnz == 0:
        raise DataError("the training set is empty: nothing to train on")
    t_start = time.time()
    root = jax.random.PRNGKey(cfg.seed)
    k_counts, k_weights, k_init, k_iter = jax.random.split(root, 4)

    # 0. plan + calibrate before touching data (refuses unmeetable budgets)
    ledger, cal = None, None
    if cfg.private:
        cal = calibrate(plan_releases(cfg), cfg.epsilon, cfg.delta, cfg.accountant)
        ledger = PrivacyLedger(cfg.delta, epsilon_budget=cfg.epsilon, accountant=cfg.accountant)

    ckpt = _Checkpoint(run_dir) if run_dir is not None else None
    state = ckpt.load() if (ckpt is not None and resume) else None
    if state is not None:
        ledger = state["ledger"]

    # 1. private counts (+ user count), 2. weights
    noisy_counts = noisy_n = None
    if cfg.needs_counts:
        if state is not None and "item_counts" in ledger:
            noisy_counts, noisy_n = state["noisy_counts"], state["noisy_n"]
        else:
            rel = cal.by_name("item_counts")
            noisy_counts, noisy_n, _ = private_counts(
                train.user, train.item, train.n_items, k=cfg.effective_count_cap,
                noise_std=rel.noise_std, key=k_counts, ledger=ledger, include_user_count=True)
    w = compute_weights(cfg, train, noisy_counts, noisy_n,
                        seed=int(jax.random.randint(k_weights, (), 0, 2**31 - 1)))
    w_j = jnp.asarray(w, jnp.float32)

    items = layout_mod.task_layout(train, dim=cfg.dim)
    users = layout_mod.user_layout(train, dim=cfg.dim)
    steps = _Steps(cfg, items, users)
    del items, users   # with devices > 1, only the sharded copies (held by steps) stay alive
    w_j = steps.replicated(w_j)
    V = initial_items(k_init, train.n_items, cfg.dim, cfg.init_scale)
    start = 0
    history: list[dict] = []
    gd = _GDState(cfg, item_features, train, steps.mesh,
                  task_layout=steps.items, user_layout=steps.users) \
        if cfg.solver == "gd" else None
    if state is not None:
        V, start, history = jnp.asarray(state["V"]), state["iteration"], state["history"]
        if gd is not None and state.get("gd_params") is not None:
            gd.restore(state["gd_params"])
    bar = _progress(range(start, cfg.iterations), progress, desc="train", unit="it",
                    initial=start, total=cfg.iterations)
    for t in bar:
        kt = jax.random.fold_in(k_iter, t)
        k_gram, k_item = jax.random.split(kt)
        # a. exact user solve (never released)
        U = steps.solve_users(V)
        # b. noisy Gramian for the gravity term
        extra = None
        if cfg.gravity > 0:
            sigma_g = _record(ledger, cal, f"iter{t}/gramian")
            G = noisy_gramian(U, k_gram, sigma_g)
            extra = cfg.gravity * G
        # c. private item step
        if cfg.solver == "ssp":
            s_a = _record(ledger, cal, f"iter{t}/ssp_A")
            s_b = _record(ledger, cal, f"iter{t}/ssp_b")
            V = steps.ssp_item_step(U, w_j, k_item, s_a, s_b, extra)
        else:
            rel_name = f"iter{t}/gd"
            z = 0.0
            if cal is not None:
                z = cal.by_name(rel_name).noise_multiplier
                ledger.record(cal.by_name(rel_name))
            n_norm = float(noisy_n) if noisy_n is not None else float(train.n_users)
            V = gd.step(V, U, extra, w_j, k_item, z, n_norm)
        V = jnp.asarray(V, jnp.float32)
        if not bool(jnp.all(jnp.isfinite(V))):
            raise ConfigError(
                f"the item embeddings became non-finite at iteration {t} ("
                + ("noisy GD diverged: lower --gd-learning-rate or raise --reg"
                   if cfg.solver == "gd" else "raise --reg") + "); nothing was saved")
        eps = 0.0 if ledger is None else ledger.epsilon()
        history.append({"iteration": t, "epsilon": eps, "seconds": time.time() - t_start})
        if progress and hasattr(bar, "set_postfix"):
            bar.set_postfix(eps=f"{eps:.3g}")
        if ckpt is not None:
            ckpt.save(np.asarray(V), t + 1, ledger, noisy_counts, noisy_n, history,
                      gd_params=None if gd is None else gd.state_bytes())

    result = FitResult(config=cfg, item_embeddings=np.asarray(V), item_ids=train.item_ids,
                       ledger=ledger, history=history)
    eval_set = test if test is not None else validation
    if eval_set is not None:
        result.metrics = evaluate(result, train, eval_set)
    result.seconds = time.time() - t_start
    return result


def initial_items(key: jax.Array, n_items: int, dim: int, scale: float) -> jax.Array:
    """Data-independent initial V: a shared direction plus Gaussian jitter.

    v_i = scale · (1/√d + 0.5·N(0, I_d)). With every positive labelled 1, the shared
    direction makes the first user solve put every user on the same side of it, so the first
    private item step already learns a popularity-like component (b_i ∝ Σ_j w_ij u_j adds
    up coherently) instead of averaging random directions to noise.
    """
    common = jnp.full((n_items, dim), 1.0 / math.sqrt(dim), jnp.float32)
    return scale * (common + 0.5 * jax.random.normal(key, (n_items, dim), jnp.float32))


class _Steps:
    """The user step and the SSP item step on one device, or row-sharded over a mesh of
    ``cfg.devices`` devices (:mod:`dpmt.solvers.sharding`; same model either way). Noisy GD
    (:class:`_GDState`) runs on the same sharded layouts and ``mesh``."""

    def __init__(self, cfg: TrainConfig, items, users):
        self.cfg, self.items, self.users, self.mesh = cfg, items, users, None
        if cfg.devices > 1:
            from dpmt.solvers import sharding

            sharding.request_devices(cfg.devices)
            self.mesh = sharding.make_mesh(cfg.devices)
            self.users = sharding.shard_layout(users, self.mesh)
            if cfg.encoder != "mlp":   # SSP and noisy GD's embedding path split items
                self.items = sharding.shard_layout(items, self.mesh)
            log.info("sharding the user and item steps over %d %s devices", cfg.devices,
                     jax.devices()[0].platform)

    def replicated(self, x):
        """``x`` replicated on the mesh (once, not a host round trip per step); as is on one
        device."""
        if self.mesh is None or x is None:
            return x
        from dpmt.solvers import sharding

        return sharding.replicate(np.asarray(x), self.mesh)

    def solve_users(self, V) -> jax.Array:
        """a. u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_i y_ij v_i, clipped to C."""
        cfg = self.cfg
        kw = dict(reg=cfg.reg, alpha0=cfg.gravity, clip_norm=cfg.user_clip)
        if self.mesh is None:
            from dpmt.solvers.user_step import solve_users

            return solve_users(self.users, V, **kw)
        from dpmt.solvers import sharding

        return sharding.sharded_solve_users(self.mesh, self.users, V, **kw)

    def ssp_item_step(self, U, w, key, sigma_A, sigma_b, extra) -> jax.Array:
        """c. (SSP, Algorithm 1) θ_i = (Π(Â_i) + extra + λI)⁻¹ b̂_i for every item."""
        if self.mesh is None:
            from dpmt.solvers.ssp import ssp_item_step

            return ssp_item_step(self.items, U, w, None, key, sigma_A, sigma_b, self.cfg.reg,
                                 extra=extra)
        from dpmt.solvers import sharding

        return sharding.sharded_ssp_item_step(self.mesh, self.items, U, w, None, key, sigma_A,
                                              sigma_b, self.cfg.reg, extra=extra)


def _record(ledger: PrivacyLedger | None, cal, name: str) -> float:
    """Charge the calibrated release ``name`` and return its noise std (0 if non-private)."""
    if ledger is None:
        return 0.0
    rel: Release = cal.by_name(name)
    ledger.record(rel)
    return rel.noise_std


class _GDState:
    """Noisy-GD item step: a flax encoder whose parameters persist across iterations."""

    def __init__(self, cfg: TrainConfig, item_features, train: Ratings, mesh=None,
                 task_layout=None, user_layout=None):
        import optax

        from dpmt.solvers import encoders
        from dpmt.solvers import layout as layout_mod

        self.cfg = cfg
        self.train = train
        opt = (optax.sgd(cfg.gd_learning_rate) if cfg.gd_optimizer == "sgd"
               else optax.adam(cfg.gd_learning_rate))
        self.optimizer = opt
        if cfg.encoder == "mlp":
            if item_features is None:
                raise ConfigError("encoder='mlp' needs item features (ML-100K genres)")
            self.encoder = encoders.MLPEncoder(features=jnp.asarray(item_features, jnp.float32),
                                               hidden=(cfg.mlp_hidden,), dim=cfg.dim)
            self.params = None
            # the loop's layouts are passed in: no second copy of the run's largest arrays
            self.layout = (user_layout if user_layout is not None
                           else layout_mod.user_layout(train, dim=cfg.dim))
        else:
            self.encoder = encoders.EmbeddingEncoder(n_items=train.n_items, dim=cfg.dim)
            self.params = None
            self.layout = (task_layout if task_layout is not None
                           else layout_mod.task_layout(train, dim=cfg.dim))
        self.mesh = mesh   # with a mesh, the layouts passed in are sharded (_Steps)

    def state_bytes(self) -> bytes | None:
        """Serialised encoder parameters that persist across iterations (MLP only)."""
        from flax import serialization

        if self.cfg.encoder != "mlp" or self.params is None:
            return None
        return serialization.to_bytes(self.params)

    def restore(self, data: bytes) -> None:
        from flax import serialization

        from dpmt.solvers import encoders

        # the template only fixes the structure; the values come from ``data``
        template = encoders.init_encoder(self.encoder, jax.random.PRNGKey(0))
        self.params = serialization.from_bytes(template, data)

    def step(self, V, U, extra, w, key, noise_multiplier, num_users):
        from dpmt.solvers import encoders
        from dpmt.solvers.noisy_gd import noisy_gd

        cfg = self.cfg
        if self.params is None:
            if cfg.encoder == "mlp":
                self.params = encoders.init_encoder(self.encoder, jax.random.fold_in(key, 99))
            else:
                self.params = encoders.embedding_params(V)
        elif cfg.encoder != "mlp":
            self.params = encoders.embedding_params(V)
        self.params = noisy_gd(
            self.encoder, self.params, self.layout, U, w, None, steps=cfg.gd_steps,
            clip_norm=cfg.gd_clip, noise_multiplier=noise_multiplier, key=key,
            optimizer=self.optimizer, sampling_rate=cfg.gd_sampling_rate, reg=cfg.reg,
            num_users=num_users, extra_quadratic=extra, mesh=self.mesh)
        return encoders.item_embeddings(self.encoder, self.params)


# ---------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------
def evaluate(result: FitResult, train: Ratings, eval_set, ks=(10, 20, 50)) -> dict:
    """Fold in the evaluation users from their history, rank items, Recall/NDCG@k overall
    and per popularity bucket (5 buckets by exact *training* counts — read here for the
    report only, never by training)."""
    from dpmt.metrics import popularity_buckets, ranking_metrics
    from dpmt.solvers import layout as layout_mod
    from dpmt.solvers.user_step import solve_users

    cfg = result.config
    V = jnp.asarray(result.item_embeddings)
    hist_layout = layout_mod.user_layout(eval_set.history, dim=cfg.dim)
    U = solve_users(hist_layout, V, reg=cfg.reg, alpha0=cfg.gravity, clip_norm=cfg.user_clip)
    buckets = popularity_buckets(train.item_counts(), 5)
    m = ranking_metrics(U, V, eval_set.history, eval_set.targets, ks=ks, item_buckets=buckets)
    m["privacy"] = privacy_summary(result)
    return m


def popularity_metrics(train: Ratings, eval_set, ks=(10, 20, 50)) -> dict:
    """The popularity baseline (score = exact training count; a non-private baseline)."""
    from dpmt.metrics import popularity_buckets, popularity_score_fn, ranking_metrics

    buckets = popularity_buckets(train.item_counts(), 5)
    m = ranking_metrics(None, None, eval_set.history, eval_set.targets, ks=ks,
                        item_buckets=buckets, score_fn=popularity_score_fn(train))
    m["privacy"] = {"epsilon": math.inf, "delta": 0.0, "private": False,
                    "privacy_unit": PRIVACY_UNIT}
    return m


def privacy_summary(result: FitResult) -> dict:
    cfg = result.config
    if result.ledger is None:
        return {"epsilon": math.inf, "delta": 0.0, "private": False, "privacy_unit": PRIVACY_UNIT}
    return {"epsilon": result.ledger.epsilon(), "delta": cfg.delta,
            "target_epsilon": cfg.epsilon, "private": True, "privacy_unit": PRIVACY_UNIT,
            "accountant": cfg.accountant, "releases": len(result.ledger)}


# ---------------------------------------------------------------------------------------
# Checkpoints and run directories
# ---------------------------------------------------------------------------------------
def atomic_save_npz(path: str | os.PathLike, **arrays) -> None:
    """``np.savez`` through a temp file + rename (never a partial file under the name)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp.npz", dir=path.parent)
    os.close(fd)
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _Checkpoint:
    """State after each completed iteration: V, the iteration, the ledger, the counts.

    Written atomically (ledger first is unsafe: a crash between the two would charge a release
    whose output is lost, harmless for privacy but wasteful; we write one npz holding both).
    """

    def __init__(self, run_dir):
        self.path = Path(run_dir) / "checkpoint.npz"

    def save(self, V, iteration, ledger, noisy_counts, noisy_n, history, gd_params=None):
        arrays = {"V": V, "iteration": np.array(iteration),
                  "ledger": np.array("" if ledger is None else ledger.to_json()),
                  "history": np.array(json.dumps(history))}
        if gd_params is not None:
            arrays["gd_params"] = np.frombuffer(gd_params, dtype=np.uint8)
        if noisy_counts is not None:
            arrays["noisy_counts"] = noisy_counts
            arrays["noisy_n"] = np.array(noisy_n)
        atomic_save_npz(self.path, **arrays)

    def load(self) -> dict | None:
        if not self.path.exists():
            return None
        z = np.load(self.path)
        led = str(z["ledger"])
        state = {"V": z["V"], "iteration": int(z["iteration"]),
                 "ledger": PrivacyLedger.from_dict(json.loads(led)) if led else None,
                 "history": json.loads(str(z["history"]))}
        state["gd_params"] = z["gd_params"].tobytes() if "gd_params" in z else None
        if "noisy_counts" in z:
            state["noisy_counts"] = z["noisy_counts"]
            state["noisy_n"] = float(z["noisy_n"])
        return state


def prepare_data(cfg: TrainConfig, progress: bool = False):
    """Load, binarise and split ``cfg.dataset`` (deterministic given ``cfg.seed``)."""
    from dpmt.data import binarize, heldout_users_split, load, per_user_split
    from dpmt.data.splits import filter_min_counts

    r = load(cfg.dataset, data_dir=cfg.data_dir, progress=progress)
    # explicit ratings are binarised; implicit data (every value 1, e.g. synthetic) is kept
    pos = r if bool(np.all(r.value == 1.0)) else binarize(r, cfg.positive_threshold)
    if cfg.split == "per-user":
        return per_user_split(pos, fractions=cfg.split_fractions, seed=cfg.seed)
    pos = filter_min_counts(pos, min_user=5)
    return heldout_users_split(pos, n_validation=cfg.heldout_users, n_test=cfg.heldout_users,
                               seed=98765 + cfg.seed)


def run(cfg: TrainConfig, out_dir: str | os.PathLike | None = None, progress: bool = True,
        resume: bool = False, eval_set: str = "test") -> FitResult:
    """Load data, train, evaluate, and write the run directory (all files atomically):
    ``config.json``, ``ledger.json``, ``metrics.json``, ``item_embeddings.npz``, ``train.log``.
    """
    if cfg.private:  # refuse an unmeetable budget before any data is read or written
        calibrate(plan_releases(cfg), cfg.epsilon, cfg.delta, cfg.accountant)
    split = prepare_data(cfg, progress=progress)
    features = None
    if cfg.encoder == "mlp":
        from dpmt.data import item_features_for

        features = item_features_for(cfg.dataset, split.train, data_dir=cfg.data_dir)
    es = split.test if eval_set == "test" else split.validation
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if resume:
            saved = out / "config.json"
            if saved.exists():
                prev = TrainConfig.from_dict(json.loads(saved.read_text()))
                if prev.replace(devices=cfg.devices) != cfg:   # devices: same model
                    raise ConfigError(f"{out} was started with a different configuration; "
                                      "resume with the same arguments or use a new --out")
        atomic_write_text(out / "config.json", cfg.to_json())
    result = fit(split.train, cfg, test=es, item_features=features, progress=progress,
                 run_dir=out, resume=resume)
    if out is not None:
        write_run(result, out)
    return result


def write_run(result: FitResult, out: Path) -> None:
    atomic_write_text(out / "config.json", result.config.to_json())
    if result.ledger is not None:
        result.ledger.save(out / "ledger.json")
    atomic_save_npz(out / "item_embeddings.npz", V=result.item_embeddings,
                    item_ids=result.item_ids)
    if result.metrics is not None:
        atomic_write_text(out / "metrics.json", json.dumps(_jsonable(result.metrics), indent=2))
    lines = [json.dumps(h) for h in result.history]
    lines.append(result.report())
    if result.ledger is not None:
        lines.append(result.ledger.summary())
    atomic_write_text(out / "train.log", "\n".join(lines) + "\n")


def _jsonable(x: Any):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return None if math.isnan(v) else ("inf" if math.isinf(v) else v)
    if isinstance(x, np.integer):
        return int(x)
    return x
