"""The steps of alternating minimisation, on one device or sharded — chosen once, here.

:func:`build_steps` builds the layouts of a training set, places them on one device or
row-splits them over a mesh of ``devices`` devices (:mod:`dpmt.solvers.sharding`), and
returns a :class:`Steps` object whose methods are the same on either: the exact user step
and an item step in optax's ``(init, update)`` form with a NamedTuple state. No other module
dispatches between single-device and sharded kernels (training, the benchmark and the
multi-host script all come through here). Which item step runs is the method's choice
(:mod:`dpmt.train.methods`): this module only provides the steps.

Item steps (Krichene et al. 2023):

* SSP, Algorithm 1: θ_i = (Π(Â_i) + α0 Ĝ_U + λI)⁻¹ b̂_i with Â_i = Σ_j w_ij u_j u_jᵀ + E_i,
  b̂_i = Σ_j w_ij y_ij u_j + e_i. Stateless (``ItemState(params=None)``).
* noisy GD, Algorithm 2: ``steps`` noisy clipped gradient steps on the weighted objective
  from the previous V (embedding table) or the previous MLP parameters. The state carries the
  encoder's parameters (a pytree), so a checkpoint of the loop is a pytree too.

The noise of item i is keyed by i and the GD noise is replicated from one key, so the same
seed gives the same V on any number of devices.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.config import BASE_REG, TrainConfig
from dpmt.errors import ConfigError
from dpmt.solvers import encoders
from dpmt.solvers import layout as layout_mod
from dpmt.solvers import sharding, ssp
from dpmt.solvers.gd_fast import OptimizerSpec
from dpmt.solvers.noisy_gd import noisy_gd
from dpmt.solvers.ssp import SOLVE_BLOCK_BYTES
from dpmt.solvers.ssp import ssp_item_step as step
from dpmt.solvers.ssp import ssp_solve, weighted_statistics
from dpmt.solvers.user_step import solve_users

log = logging.getLogger("dpmt.solvers.steps")


class ItemState(NamedTuple):
    """State of the item step between iterations: the GD encoder's parameters (a pytree of
    arrays), or None for SSP and for GD before its first step."""

    params: Any = None


class ItemNoise(NamedTuple):
    """The noise of one item step: SSP's σ_A, σ_b (standard deviations) or GD's noise
    multiplier z (std z·G on the summed clipped gradient). Zeros: non-private."""

    sigma_A: float = 0.0
    sigma_b: float = 0.0
    gd_multiplier: float = 0.0


class ItemStep(NamedTuple):
    """An item step as an ``(init, update)`` pair (the shape of optax's transformations).

    ``init(key, V) -> ItemState``;
    ``update(state, V, U, key, noise, extra, num_users) -> (V_new, ItemState)`` with
    V (m, d) float32, U (n, d) float32, ``extra`` the public (d, d) term α0 Ĝ_U or None,
    ``num_users`` the public normaliser of noisy GD (n̂)."""

    init: Callable[..., ItemState]
    update: Callable[..., tuple[jax.Array, ItemState]]


@dataclasses.dataclass
class Steps:
    """The layouts of one training set (single-device or sharded) and the steps on them."""

    cfg: TrainConfig
    items: Any          # task layout (rows = items), or its ShardedLayout
    users: Any          # user layout (rows = users), or its ShardedLayout
    weights: Any        # w_ij float32 (nnz,), replicated on the mesh
    labels: Any         # y_ij float32 (nnz,) or None (implicit feedback: y = 1)
    mesh: Any = None
    item_step: ItemStep | None = None
    #: sharded data: sums an array over the processes before a release's noise
    #: (:func:`dpmt.solvers.collectives.process_sum`); None: this process holds every user
    aggregate: Callable | None = None

    def replicated(self, x):
        """``x`` replicated on the mesh (once, not a host round trip per step)."""
        if self.mesh is None or x is None:
            return None if x is None else jnp.asarray(x)

        return sharding.replicate(np.asarray(x), self.mesh)

    def released_gramian(self, U, key, sigma) -> jax.Array:
        """Ĝ_U = Π(Σ_j u_j u_jᵀ + E) (:func:`dpmt.solvers.ssp.noisy_gramian`), the sum over
        every process's users with sharded data."""

        if self.aggregate is None:
            return ssp.noisy_gramian(U, key, sigma)
        G = jnp.asarray(self.aggregate(ssp.gramian(U)))
        return ssp.project_psd(G + ssp.symmetric_noise(key, G.shape[-1], sigma))

    def solve_users(self, V, U_prev=None) -> jax.Array:
        """u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_i y_ij v_i, clipped to ‖u_j‖ ≤ C.

        With ``cfg.user_solve == "cg"`` and the previous iteration's ``U_prev``:
        ``cfg.user_cg_steps`` warm-started CG steps instead of Cholesky
        (:mod:`dpmt.solvers.cg`); else exact."""
        cfg = self.cfg
        kw = dict(reg=cfg.reg, alpha0=cfg.gravity, clip_norm=cfg.user_clip,
                  cg_steps=cfg.user_cg_steps,
                  U0=U_prev if cfg.warm_starts_users else None)
        if self.mesh is None:
            return solve_users(self.users, V, labels=self.labels, **kw)

        return sharding.sharded_solve_users(self.mesh, self.users, V, labels=self.labels, **kw)


def estimate_bytes(n_users: int, n_items: int, nnz: int, dim: int) -> int:
    """Rough peak host/device bytes of a training run (the dominant terms of
    :mod:`dpmt.apps.scaling`'s model, which the benchmark checks): the factors U, V and the
    item step's output (3 float32 (n+m, d) arrays, twice for the step's working copies),
    the d × d systems of one solve block (32 MiB) plus a few shared d × d matrices, and the
    two bucketed layouts with weights (~50 bytes per rating, padding included)."""

    d = int(dim)
    factors = 6 * 4 * d * (int(n_users) + int(n_items))
    systems = SOLVE_BLOCK_BYTES + 8 * 4 * d * d * max(1, min(int(n_items), 8))
    return int(factors + systems + 50 * int(nnz) + 256 * 2**20)


def build_steps(cfg: TrainConfig, train, weights, *, labels=None, devices: int = 1,
                segment_items: bool = False, shard_items: bool = True,
                aggregate: Callable | None = None) -> Steps:
    """Layouts of ``train`` (a :class:`~dpmt.data.Ratings`) and the user step of ``cfg``;
    the item step is the method's (``dpmt.train.methods.make_steps`` builds both).

    Args:
      weights: float (nnz,) w_ij in ``train``'s order.
      labels: float (nnz,) y_ij or None (implicit feedback, y = 1).
      devices: 1, or the size of the mesh to shard over (the devices must exist).
      segment_items: cut long item rows into fixed-width segments (less padding; the SSP
        item step on one device and noisy GD's embedding table on one device or a mesh
        read them; the method asks for them only where its step reads them).
      shard_items: split the item layout over the devices too (a step over item rows).
      aggregate: sharded data (this process holds only its own users): the sum over the
        processes that the item step applies to its statistics before the noise.
    """
    if cfg.reg is None:          # fit() resolves it by rule first; a direct caller gets λ = 3
        cfg = cfg.replace(reg=BASE_REG)
    segment = layout_mod.SEGMENT_WIDTH if segment_items else None
    items = layout_mod.task_layout(train, dim=cfg.dim, segment_width=segment)
    users = layout_mod.user_layout(train, dim=cfg.dim)
    mesh = None
    if devices > 1:
        sharding.request_devices(devices)
        mesh = sharding.make_mesh(devices)
        users = sharding.shard_layout(users, mesh)
        if shard_items:
            items = sharding.shard_layout(items, mesh)
        log.info("sharding the user and item steps over %d %s devices", devices,
                 jax.devices()[0].platform)
    steps = Steps(cfg, items, users, None, None, mesh, aggregate=aggregate)
    steps.weights = steps.replicated(jnp.asarray(weights, jnp.float32))
    steps.labels = None if labels is None else steps.replicated(jnp.asarray(labels,
                                                                            jnp.float32))
    return steps


def ssp_item_step(steps: Steps) -> ItemStep:
    """SSP (Algorithm 1) as an :class:`ItemStep`: stateless. ``cfg.item_solve`` picks how the
    noisy item systems are made well-posed (``psd=`` of :func:`dpmt.solvers.ssp.ssp_solve`:
    "project", "shift" or "cg"; "cg" starts from the previous, released V)."""
    reg = steps.cfg.reg
    psd = steps.cfg.ssp.item_solve
    cg_steps = steps.cfg.item_cg_steps

    def init(key, V) -> ItemState:
        return ItemState()

    def update(state, V, U, key, noise: ItemNoise, extra=None, num_users=None):
        if steps.aggregate is not None:
            A, b = weighted_statistics(steps.items, U, steps.weights, steps.labels)
            V_new = ssp_solve(jnp.asarray(steps.aggregate(A)), jnp.asarray(steps.aggregate(b)),
                              key, noise.sigma_A, noise.sigma_b, reg, extra=extra, psd=psd,
                              x0=V, cg_steps=cg_steps)
        elif steps.mesh is None:
            V_new = step(steps.items, U, steps.weights, steps.labels, key, noise.sigma_A,
                         noise.sigma_b, reg, extra=extra, psd=psd, x0=V,
                         cg_steps=cg_steps)
        else:
            V_new = sharding.sharded_ssp_item_step(
                steps.mesh, steps.items, U, steps.weights, steps.labels, key, noise.sigma_A,
                noise.sigma_b, reg, extra=extra, psd=psd, x0=V,
                cg_steps=cg_steps)
        return V_new, state

    return ItemStep(init, update)


def item_encoder(cfg: TrainConfig, n_items: int, item_features=None):
    """The flax item encoder of noisy GD: an embedding table, or an MLP over public item
    features (checked: a finite (n_items, f) array)."""

    if not cfg.gd.uses_mlp:
        return encoders.EmbeddingEncoder(n_items=n_items, dim=cfg.dim)
    if item_features is None:
        raise ConfigError("encoder='mlp' needs public item features (ML-100K genres): "
                          "pass item_features=")
    feats = np.asarray(item_features, np.float32)
    if feats.ndim != 2 or feats.shape[0] != n_items or not np.all(np.isfinite(feats)):
        raise ConfigError(f"item_features must be a finite (n_items={n_items}, f) array "
                          f"(got shape {feats.shape})")
    return encoders.MLPEncoder(features=jnp.asarray(feats), hidden=(cfg.gd.mlp_hidden,),
                               dim=cfg.dim)


def gd_initial_state(cfg: TrainConfig, n_items: int, item_features, key) -> ItemState:
    """Noisy GD's state before the first iteration: the MLP's initial parameters with
    ``encoder='mlp'``, else empty. Needs no layout (resume uses it as the pytree template of
    a checkpoint)."""
    if not cfg.gd.uses_mlp:
        return ItemState()

    enc = item_encoder(cfg, n_items, item_features)
    return ItemState(encoders.init_encoder(enc, jax.random.fold_in(key, 99)))


def gd_item_step(steps: Steps, n_items: int, item_features=None) -> ItemStep:
    """Noisy GD (Algorithm 2) as an :class:`ItemStep`; the state is the encoder's
    parameters (an embedding table is re-read from V at every iteration, an MLP persists)."""

    cfg, g = steps.cfg, steps.cfg.gd
    # OPTIMIZERS are optax names; a spec lets the fast path run the steps in one loop
    optimizer = OptimizerSpec(g.optimizer, g.learning_rate)
    mlp = g.uses_mlp
    encoder = item_encoder(cfg, n_items, item_features)
    # MLP: per-user gradients over user rows; embedding table: the fast path over item rows
    layout = steps.users if mlp else steps.items
    # the table's per-user norms as row sums over the user layout (one device)
    user_rows = steps.users if not mlp and steps.mesh is None else None

    def init(key, V) -> ItemState:
        return gd_initial_state(cfg, n_items, item_features, key)

    def update(state, V, U, key, noise: ItemNoise, extra=None, num_users=None):
        params = state.params if mlp else encoders.embedding_params(V)
        params = noisy_gd(encoder, params, layout, U, steps.weights, steps.labels,
                          steps=g.planned_steps, clip_norm=g.clip,
                          noise_multiplier=noise.gd_multiplier,
                          key=key, optimizer=optimizer, sampling_rate=g.sampling_rate,
                          reg=cfg.reg, num_users=num_users, extra_quadratic=extra,
                          mesh=steps.mesh, user_layout=user_rows, aggregate=steps.aggregate)
        return encoders.item_embeddings(encoder, params), ItemState(params if mlp else None)

    return ItemStep(init, update)
