"""Noisy gradient descent with per-user clipping — Algorithm 2 of Krichene et al. 2023
("Multi-Task Differential Privacy Under Distribution Skew"), plus its Poisson-sampled DP-SGD
variant.

Objective (tasks = items, ``x_ij = u_j`` in alternating minimisation):

    L_w(θ) = Σ_{(i,j)∈Ω} w_ij ℓ(⟨v_i(θ), x_j⟩, y_ij) + (λ/2)‖θ‖²,
    ℓ(p, y) = ½ (p − y)²  (default; any elementwise differentiable loss can be passed).

The ½ makes the minimiser of ``L_w`` with an embedding table exactly the weighted ridge
solution ``(A_i + λI)⁻¹ b_i`` of SSP (:mod:`dpmt.solvers.ssp`) with the same ``λ``; it only
rescales the gradient (clipping bounds it anyway).

One step (Algorithm 2; with ``q < 1`` the DP-SGD variant):

    B      = all users (full batch), or a Poisson sample: each user independently w.p. q
    g_j    = ∇_θ Σ_{i∈Ω^j} w_ij ℓ(⟨v_i(θ), x_j⟩, y_ij)       (user j's *whole* gradient)
    ĝ      = (Σ_{j∈B} g_j · min(1, G/‖g_j‖) + N(0, σ² G² I)) / (q·n)  +  (λ/n) θ
    θ, s   = optimizer.update(ĝ, s, θ)                          (any optax transformation)

``n`` is the number of users (``num_users``; pass a public constant), ``q = 1`` for full batch.
The regulariser is data-independent and not clipped. ``ĝ`` is the gradient of
``(1/n)·L_w`` (unbiased when no clipping is active), so learning rates do not depend on the
data size. Privacy: the summed clipped gradient has L2 sensitivity ``G``
(:func:`noisy_gd_sensitivity`) under add/remove-one-user, noise multiplier ``σ``; ``T`` steps
are the dp_accounting event :func:`noisy_gd_dp_event`. Batches are Poisson samples (never
fixed-size shuffled batches, which the Poisson accounting would not cover).

Per-user clipping is vectorised, never a Python loop over users:

* :class:`~dpmt.solvers.encoders.EmbeddingEncoder` with a *task layout* (rows = items): user
  j's gradient has rows ``g_ij = w_ij ℓ'(⟨v_i, u_j⟩, y_ij) u_j`` for ``i ∈ Ω^j``, so
  ``‖g_j‖² = ‖u_j‖² Σ_i (w_ij ℓ'_ij)²`` — a segment sum over users of per-rating scalars — and
  the clipped sum's row ``i`` is ``Σ_j s_j w_ij ℓ'_ij u_j``, one batched product per bucket
  chunk. No per-user gradient tensors and no ``(nnz, d)`` array. :func:`noisy_gd` on one
  device runs it as :func:`fast_clipped_sum` (:mod:`dpmt.solvers.gd_blocks`): U is fixed
  through the item step, so its rows are gathered into the task layout's slots once per
  call and each step is two batched products over contiguous blocks, only scalars (norms,
  clip factors) moving between item and user order. The parent kernel gathered u_j and v_i
  per rating at every step (``experiments/noisy_gd_profile.py``).
* any encoder with a *user layout* (rows = users): per-user gradients by
  ``jax.vmap(jax.grad(user_loss))`` over micro-batches of padded user rows, clipped and
  summed inside a ``lax.scan`` (memory: micro-batch × parameter count).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from dpmt.errors import ConfigError, check_range
from dpmt.solvers import sharding
from dpmt.solvers.encoders import EmbeddingEncoder
from dpmt.solvers.gd_blocks import (_check_user_layout, fast_clipped_sum, keep_scratch,
                                    prepare_sharded_steps, prepare_steps)
from dpmt.solvers.gd_fast import (OptimizerSpec, fast_noisy_gradient, fast_steps,
                                  release, sharded_fast_noisy_gradient, step_keys)
from dpmt.solvers.gd_privacy import (gd_noise_draws, noisy_gd_dp_event,  # noqa: F401
                                     noisy_gd_sensitivity, poisson_sample)
from dpmt.solvers.layout import (DEFAULT_MAX_CHUNK_BYTES, Chunk, Layout, count_trace, gather_slots,
                                 require_unsegmented)
from dpmt.solvers.losses import Loss, squared_loss

_HI = jax.lax.Precision.HIGHEST


# -- clipped gradient sums ----------------------------------------------------------------------
def _tree_sq_norm_per_user(g) -> jax.Array:
    leaves = jax.tree_util.tree_leaves(g)
    return sum(jnp.sum(jnp.square(x).reshape(x.shape[0], -1), axis=1) for x in leaves)


def _base(layout):
    """The plain Layout of a layout or of a sharding.ShardedLayout."""
    return getattr(layout, "layout", layout)


def _n_users(layout: Layout) -> int:
    layout = _base(layout)
    return layout.n_cols if layout.kind == "items" else layout.n_rows


def _check_path(encoder, layout: Layout, mesh=None, segments_ok: bool = False) -> str:
    if (mesh is None) != (_base(layout) is layout):
        raise ConfigError("noisy GD: pass a sharded layout (dpmt.solvers.sharding.shard_layout)"
                          " together with its mesh (noisy_gd(..., mesh=mesh)), or neither")
    layout = _base(layout)
    if not isinstance(layout, Layout):
        raise ConfigError(f"noisy GD needs a dpmt.solvers.layout.Layout (got {type(layout)!r})")
    if not segments_ok:
        require_unsegmented(layout, "noisy GD")
    if layout.kind == "items":
        if not isinstance(encoder, EmbeddingEncoder):
            raise ConfigError("a task layout (rows = items) drives the fast embedding-table "
                              "path, which needs an EmbeddingEncoder; for other encoders pass a "
                              "user layout (dpmt.solvers.layout.user_layout)")
        return "embedding"
    if layout.kind == "users":
        return "generic"
    raise ConfigError("noisy GD needs a layout built by task_layout or user_layout")


def _embedding_clipped_sum(params, layout, X, weights, labels, clip_norm, user_mask, loss):
    """Fast path: EmbeddingEncoder + task layout (see module docstring)."""
    parts, norms = embedding_clipped_rows(params["params"]["embedding"], layout, X, weights,
                                          labels, clip_norm, user_mask, loss)
    return {"params": {"embedding": layout.assemble(parts)}}, norms


def embedding_clipped_rows(V, layout, X, weights, labels, clip_norm, user_mask, loss,
                           axis: str | None = None):
    """The fast path's clipped sum, per bucket (``layout.assemble`` gives the (m, d) sum).

    Inside ``shard_map`` over items (``axis`` the mesh axis), user j's items are spread over
    devices: the per-user squared norms ``Σ_i (w_ij ℓ'_ij)²`` are summed locally and then
    ``psum``-ed, so every device clips with user j's *whole* gradient norm.
    """
    grad_pred = jax.grad(lambda p, y: jnp.sum(loss(p, y)))     # elementwise ℓ'(p, y)

    def residuals(c: Chunk):
        w = gather_slots(weights, c)
        y = gather_slots(labels, c)
        pred = jnp.einsum("nld,nd->nl", X[c.cols], V[c.rows], precision=_HI)
        return jnp.where(c.valid, w * grad_pred(pred, y), 0.0)  # w_ij ℓ'_ij, 0 in pad slots

    r = layout.map_chunks(residuals)                             # [(n_chunks, n, L)]
    sq = layout.col_sum([x * x for x in r])
    if axis is not None:
        sq = jax.lax.psum(sq, axis)
    sq = sq * jnp.sum(X * X, axis=-1)
    norms = jnp.sqrt(sq)                                          # ‖g_j‖ (n_users,)
    scale = clip_norm / jnp.maximum(norms, clip_norm) * user_mask

    def rows(c: Chunk, r_c):
        coef = r_c * scale[c.cols]
        return jnp.einsum("nl,nld->nd", coef, X[c.cols], precision=_HI)

    return layout.map_chunks(rows, r), norms


def _generic_clipped_sum(encoder, params, layout, X, weights, labels, clip_norm, user_mask,
                         loss, microbatch_size, axis: str | None = None):
    """General path: per-user gradients by vmap(grad) over padded user rows (user layout).
    Inside ``shard_map`` over users (``axis``), each device sums its users and the partial
    sums (and the per-user norms, zero off each device's rows) are ``psum``-ed."""
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))

    def user_loss(p, items, w, y, u):
        v = encoder.apply(p, items)                               # (L, d)
        pred = jnp.matmul(v, u, precision=_HI)
        return jnp.sum(w * loss(pred, y))                         # w = 0 in pad slots

    per_user_grad = jax.vmap(jax.grad(user_loss), in_axes=(None, 0, 0, 0, 0))
    acc = jax.tree_util.tree_map(jnp.zeros_like, params)
    norms = jnp.zeros((layout.n_rows,), jnp.float32)
    d = X.shape[-1]
    for b in layout.buckets:
        R, L = b.n_chunks * b.chunk_rows, b.width
        rows = b.rows.reshape(R)
        c = Chunk(rows, b.cols.reshape(R, L), b.pos.reshape(R, L), b.valid.reshape(R, L))
        w = gather_slots(weights, c)
        y = gather_slots(labels, c)
        k = microbatch_size or int(DEFAULT_MAX_CHUNK_BYTES // (4 * (3 * n_params + 4 * L * d)))
        k = max(1, min(R, k))
        nb = -(-R // k)
        pad = nb * k - R
        padr = lambda a: jnp.concatenate([a, jnp.zeros((pad,) + a.shape[1:], a.dtype)])
        mb = (padr(rows).reshape(nb, k), padr(c.cols).reshape(nb, k, L),
              padr(w).reshape(nb, k, L), padr(y).reshape(nb, k, L))

        def body(carry, xs):
            acc, norms = carry
            r, it, w_, y_ = xs
            g = per_user_grad(params, it, w_, y_, X[r])           # leaves (k, ...)
            nrm = jnp.sqrt(_tree_sq_norm_per_user(g))
            s = clip_norm / jnp.maximum(nrm, clip_norm) * user_mask[r]
            acc = jax.tree_util.tree_map(
                lambda a, gl: a + jnp.tensordot(s, gl, axes=1, precision=_HI), acc, g)
            return (acc, norms.at[r].add(nrm)), None              # pad rows add 0 to row 0

        (acc, norms), _ = jax.lax.scan(body, (acc, norms), mb)
    if axis is not None:
        acc, norms = jax.lax.psum((acc, norms), axis)
    return acc, norms


def clipped_gradient_sum(encoder, params, layout: Layout, X: jax.Array,
                         weights: jax.Array | None, labels: jax.Array | None, clip_norm, *,
                         user_mask: jax.Array | None = None, loss: Loss = squared_loss,
                         microbatch_size: int | None = None) -> tuple[Any, jax.Array]:
    """``Σ_j m_j · g_j · min(1, G/‖g_j‖)`` and the per-user norms ``‖g_j‖``.

    Args:
      encoder, params: flax item encoder and its variables.
      layout: task layout (EmbeddingEncoder only, fast path) or user layout (any encoder).
      X: float (n_users, d) user features ``x_j`` (user embeddings).
      weights, labels: float (nnz,) per rating (parent order) or None (ones).
      clip_norm: ``G > 0``.
      user_mask: float (n_users,) ``m_j`` (Poisson sample indicator), default all ones.
      loss: elementwise ``ℓ(pred, y)``.
      microbatch_size: users per vmap(grad) micro-batch (generic path); default sized to
        ~256 MiB of per-user gradients.

    Returns:
      (gradient sum, a pytree like ``params``; float32 (n_users,) unclipped per-user gradient
      norms — computed from private data: diagnostics only, never release them).
    """
    path = _check_path(encoder, layout)
    return _clipped_gradient_sum(encoder, params, layout, jnp.asarray(X, jnp.float32), weights,
                                 labels, jnp.float32(clip_norm),
                                 None if user_mask is None else jnp.asarray(user_mask,
                                                                            jnp.float32),
                                 loss=loss, path=path, microbatch_size=microbatch_size)


@jax.jit(static_argnames=("encoder", "loss", "path", "microbatch_size"))
def _clipped_gradient_sum(encoder, params, layout, X, weights, labels, clip_norm, user_mask, *,
                          loss, path, microbatch_size):
    count_trace("clipped_gradient_sum")
    return _clipped_sum_impl(encoder, params, layout, X, weights, labels, clip_norm, user_mask,
                             loss, path, microbatch_size)


def _clipped_sum_impl(encoder, params, layout, X, weights, labels, clip_norm, user_mask, loss,
                      path, microbatch_size, mesh=None):
    if user_mask is None:
        user_mask = jnp.ones((_n_users(layout),), jnp.float32)
    if mesh is not None:   # rows of a ShardedLayout across the devices of ``mesh``
        return sharded_clipped_sum(mesh, encoder, params, layout, X, weights, labels,
                                   clip_norm, user_mask, loss, path, microbatch_size)
    if path == "embedding":
        return _embedding_clipped_sum(params, layout, X, weights, labels, clip_norm, user_mask,
                                      loss)
    return _generic_clipped_sum(encoder, params, layout, X, weights, labels, clip_norm,
                                user_mask, loss, microbatch_size)


# -- the fast path (dpmt.solvers.gd_blocks, dpmt.solvers.gd_fast) ----------------------------------
@jax.jit(static_argnames=("loss",))
def _fast_partial_rows(V, items, users, X, data, clip_norm, key, *, loss):
    """This process's clipped rows of a full-batch step (sharded data), before the sum over
    processes: the same sample (all ones) and clipped sum as :func:`~dpmt.solvers.gd_fast.fast_noisy_gradient`."""
    count_trace("fast_partial_rows")
    mask, _, _ = step_keys(key, items.n_cols, None, False)
    return fast_clipped_sum(V, items, users, X, data, clip_norm, mask, loss)[0]


@jax.jit(static_argnums=(0,))
def _release_summed(encoder, params, rows, key, clip_norm, noise_multiplier, reg, num_users,
                    extra_quadratic):
    """``ĝ`` from the processes' summed clipped rows: the noise of ``key``'s step (as
    :func:`~dpmt.solvers.gd_fast.fast_noisy_gradient` draws it), then the public terms."""
    _, q, k_noise = step_keys(key, 1, None, False)
    return release(encoder, params, {"params": {"embedding": rows}}, k_noise, clip_norm,
                    noise_multiplier, q, reg, num_users, extra_quadratic)


# -- the noisy gradient and the step ----------------------------------------------------------------
def _noisy_gradient_impl(encoder, params, layout, X, weights, labels, key, clip_norm,
                         noise_multiplier, sampling_rate, reg, num_users, extra_quadratic=None,
                         *, loss, path, poisson, microbatch_size, mesh=None):
    count_trace("noisy_gradient")
    mask, q, k_noise = step_keys(key, _n_users(layout), sampling_rate, poisson)
    # the sample mask and the noise are drawn on replicated arrays from the same key whether
    # or not the clipped sum is sharded: the same model on any number of devices
    gsum, _ = _clipped_sum_impl(encoder, params, layout, X, weights, labels, clip_norm, mask,
                                loss, path, microbatch_size, mesh)
    return release(encoder, params, gsum, k_noise, clip_norm, noise_multiplier, q, reg,
                    num_users, extra_quadratic)


def noisy_gradient(encoder, params, layout: Layout, X: jax.Array, weights: jax.Array | None,
                   labels: jax.Array | None, key: jax.Array, *, clip_norm, noise_multiplier,
                   sampling_rate: float | None = None, reg=0.0, num_users=None,
                   loss: Loss = squared_loss, microbatch_size: int | None = None,
                   extra_quadratic: jax.Array | None = None) -> Any:
    """One noisy gradient ``ĝ`` (see the module docstring), a pytree like ``params``.

    ``key`` drives the Poisson sample (if ``sampling_rate`` is set) and the noise.
    ``extra_quadratic`` (d, d), if given, adds the gradient of ``(1/n)·½ Σ_i v_iᵀ M v_i``
    (the gravity term α0·Ĝ_U of alternating minimisation; public, so not clipped).
    """
    path = _check_path(encoder, layout)
    _check_scalars(clip_norm, noise_multiplier, sampling_rate, reg)
    n = _n_users(layout) if num_users is None else num_users
    return _noisy_gradient(encoder, params, layout, jnp.asarray(X, jnp.float32), weights,
                           labels, key, jnp.float32(clip_norm), jnp.float32(noise_multiplier),
                           jnp.float32(1.0 if sampling_rate is None else sampling_rate),
                           jnp.float32(reg), jnp.float32(n),
                           None if extra_quadratic is None
                           else jnp.asarray(extra_quadratic, jnp.float32),
                           loss=loss, path=path,
                           poisson=sampling_rate is not None, microbatch_size=microbatch_size)


_noisy_gradient = jax.jit(_noisy_gradient_impl,
                          static_argnames=("loss", "path", "poisson", "microbatch_size",
                                           "mesh"),
                          static_argnums=(0,))


def _check_scalars(clip_norm, noise_multiplier, sampling_rate, reg):
    check_range("clip_norm", clip_norm, low=0, low_open=True)
    check_range("noise_multiplier", noise_multiplier, low=0)
    check_range("reg", reg, low=0)
    if sampling_rate is not None:
        check_range("sampling_rate", sampling_rate, low=0, low_open=True, high=1)


@jax.jit(static_argnums=(0,))
def _apply_optimizer(optimizer, grads, opt_state, params):
    count_trace("optimizer_update")
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def make_noisy_gd_step(encoder, optimizer: optax.GradientTransformation, *,
                       loss: Loss = squared_loss, path: str, poisson: bool,
                       microbatch_size: int | None = None, mesh=None) -> Callable:
    """One noisy-GD step ``(params, opt_state, layout, X, weights, labels, key, clip_norm,
    noise_multiplier, sampling_rate, reg, num_users) -> (params, opt_state)``.

    Two jitted kernels: the noisy gradient (compiled once per encoder / loss / layout shapes /
    full-batch-or-Poisson; every numeric argument — noise scale, clip, rate, λ, data values —
    is traced, so changing them never recompiles) and the optax update (compiled once per
    optimizer object; cheap). A fresh optimizer object (e.g. one per alternating-minimisation
    iteration) therefore only recompiles the small update kernel, never the gradient.
    """
    def step(params, opt_state, layout, X, weights, labels, key, clip_norm, noise_multiplier,
             sampling_rate, reg, num_users, extra_quadratic=None):
        if mesh is not None:
            rep = NamedSharding(mesh, P())
            (params, opt_state, X, weights, labels, key, extra_quadratic) = jax.device_put(
                (params, opt_state, X, weights, labels, key, extra_quadratic), rep)
        g = _noisy_gradient(encoder, params, layout, X, weights, labels, key, clip_norm,
                            noise_multiplier, sampling_rate, reg, num_users, extra_quadratic,
                            loss=loss,
                            path=path, poisson=poisson, microbatch_size=microbatch_size,
                            mesh=mesh)
        return _apply_optimizer(optimizer, g, opt_state, params)

    return step


DEFAULT_OPTIMIZER = optax.adam(1e-2)


def noisy_gd(encoder, params, layout: Layout, X: jax.Array, weights: jax.Array | None,
             labels: jax.Array | None, *, steps: int, clip_norm: float,
             noise_multiplier: float, key: jax.Array,
             optimizer: optax.GradientTransformation | OptimizerSpec | None = None,
             sampling_rate: float | None = None, reg: float = 0.0,
             num_users: float | None = None, loss: Loss = squared_loss,
             opt_state: Any = None, microbatch_size: int | None = None,
             return_state: bool = False, extra_quadratic: jax.Array | None = None,
             mesh=None, user_layout: Layout | None = None, aggregate=None):
    """Run ``steps`` steps of noisy (stochastic) gradient descent (Algorithm 2).

    Args:
      encoder: flax item encoder (:mod:`dpmt.solvers.encoders`).
      params: its variables (e.g. :func:`~dpmt.solvers.encoders.embedding_params` of the
        previous item embeddings, or :func:`~dpmt.solvers.encoders.init_encoder`).
      layout: task layout (EmbeddingEncoder, fast path) or user layout (any encoder).
      X: float (n_users, d) user features ``x_j`` (clipped user embeddings).
      weights: float (nnz,) ``w_ij`` (Σ_i w_ij² ≤ β is *not* needed for noisy GD's privacy —
        clipping bounds the sensitivity — but it is what makes the weights effective), or None.
      labels: float (nnz,) ``y_ij`` or None (ones).
      steps: ``T``.
      clip_norm: per-user gradient clip ``G``.
      noise_multiplier: ``σ`` (noise std on the summed gradient ``σ·G``); 0 = non-private.
      key: PRNG key; step ``t`` uses ``fold_in(key, t)``.
      optimizer: any optax transformation, or an :class:`OptimizerSpec` (an optax name and
        its learning rate): with a spec the fast path runs all ``steps`` in one compiled loop
        (:func:`~dpmt.solvers.gd_fast.fast_steps`; 6-10% faster on CPU), the other paths
        step by step with the same optimizer. Default ``optax.adam(1e-2)``.
      sampling_rate: None for full batch (Algorithm 2), else Poisson rate ``q`` (DP-SGD).
      reg: ``λ ≥ 0`` of ``(λ/2)‖θ‖²``.
      num_users: normaliser ``n`` (default: the layout's user count). Under add/remove DP pass
        a public constant.
      loss: elementwise ``ℓ(pred, y)``.
      opt_state: optimiser state to continue from (default: ``optimizer.init(params)``).
      return_state: also return the final optimiser state.
      extra_quadratic: optional public (d, d) matrix M adding ½ Σ_i v_iᵀ M v_i to the
        objective (α0·Ĝ_U in alternating minimisation, as SSP's ``extra``), so that with noise
        off and clipping inactive noisy GD converges to the same solution as SSP.
      mesh: a 1-D device mesh (:func:`dpmt.solvers.sharding.make_mesh`) to split the clipped
        gradient sum over, with ``layout`` from :func:`dpmt.solvers.sharding.shard_layout`
        (items for the fast path, users for the generic one). Sample mask, noise and update
        are computed replicated from the same key: the same result on any number of devices.
      user_layout: optional user layout (:func:`~dpmt.solvers.layout.user_layout`) of the same
        ratings as the task layout ``layout`` (embedding path, one device): without
        pre-gathered rows (``gd_blocks.PREGATHER_BYTES = 0``) the per-user norms are row sums
        over it. Changes nothing but the summation order.
      aggregate: sharded data (:mod:`dpmt.solvers.collectives`): a function summing an array
        over the processes, each of which holds only its own users' ratings; every step's
        clipped sum is ``aggregate``-d before the one noise draw (embedding path, full batch,
        one device per process). A user's gradient lives on one process, so the clip and the
        sensitivity G are those of one process holding everyone.

    On one device the embedding path runs :func:`fast_clipped_sum`: the slots' weights,
    labels, ``‖x_j‖²`` and rows ``x_j`` are gathered into the task layout's slots once per
    call (:func:`prepare_steps`, over the previous call's buffers), and each step is two
    batched products over those blocks. On a mesh the same (:func:`sharded_fast_clipped_sum`,
    :func:`prepare_sharded_steps`): each device pre-gathers its own items' slots (long items
    in segments), the per-user squared norms are summed over the devices before the clip,
    the clipped rows by one all-reduce. The clipped sum, the sample mask, the noise and the
    number of steps are those of :func:`clipped_gradient_sum` / :func:`noisy_gradient` (same
    key, same draws); only float32 summation order differs.

    Returns:
      params (and opt_state if ``return_state``). Privacy: :func:`noisy_gd_dp_event`
      ``(noise_multiplier, steps, sampling_rate)`` with sensitivity ``G``.
    """
    # the fast path (on one device or a mesh) sums a segmented task layout's long rows from
    # their segments
    path = _check_path(encoder, layout, mesh, segments_ok=True)
    _check_scalars(clip_norm, noise_multiplier, sampling_rate, reg)
    check_range("steps", steps, low=0, integer=True)
    optimizer = DEFAULT_OPTIMIZER if optimizer is None else optimizer
    spec = optimizer if isinstance(optimizer, OptimizerSpec) else None
    if spec is not None:
        optimizer = spec.transformation()
    if opt_state is None:
        opt_state = optimizer.init(params) if spec is None else spec.init(params)
    n = _n_users(layout) if num_users is None else num_users
    check_range("num_users", n, low=0, low_open=True)
    poisson = sampling_rate is not None
    # device arrays once, not a host-to-device copy per step
    X = jnp.asarray(X, jnp.float32)
    weights = None if weights is None else jnp.asarray(weights, jnp.float32)
    labels = None if labels is None else jnp.asarray(labels, jnp.float32)
    scalars = (jnp.float32(clip_norm), jnp.float32(noise_multiplier),
               jnp.float32(1.0 if sampling_rate is None else sampling_rate), jnp.float32(reg),
               jnp.float32(n))
    M = None if extra_quadratic is None else jnp.asarray(extra_quadratic, jnp.float32)
    if aggregate is not None and (path != "embedding" or mesh is not None or poisson):
        raise ConfigError("noisy GD on sharded data runs the embedding table, full batch, on "
                          "one device per process: drop encoder='mlp', sampling_rate and "
                          "devices > 1")
    if path == "embedding" and mesh is None and int(steps) > 0:
        if user_layout is not None:
            _check_user_layout(user_layout, layout)
        data = prepare_steps(layout, user_layout, X, weights, labels, reuse=True)
        if aggregate is not None:
            for t in range(int(steps)):
                k = jax.random.fold_in(key, t)
                rows = aggregate(_fast_partial_rows(params["params"]["embedding"], layout,
                                                    user_layout, X, data, scalars[0], k,
                                                    loss=loss))
                g = _release_summed(encoder, params, jnp.asarray(rows), k, scalars[0],
                                    scalars[1], scalars[3], scalars[4], M)
                params, opt_state = _apply_optimizer(optimizer, g, opt_state, params)
        elif spec is not None:
            params, opt_state = fast_steps(encoder, params, opt_state, layout, user_layout, X,
                                           data, key, jnp.int32(steps), scalars, M,
                                           name=spec.name, loss=loss, poisson=poisson, mesh=None)
        else:
            for t in range(int(steps)):
                g = fast_noisy_gradient(encoder, params, layout, user_layout, X, data,
                                         jax.random.fold_in(key, t), *scalars, M, loss=loss,
                                         poisson=poisson)
                params, opt_state = _apply_optimizer(optimizer, g, opt_state, params)
        keep_scratch(layout, data)         # the next call writes its rows over these buffers
        return (params, opt_state) if return_state else params
    if path == "embedding" and mesh is not None and int(steps) > 0:
        # the same on a mesh: each device pre-gathers its own items' slots once per call
        rep = NamedSharding(mesh, P())
        (X, weights, labels, M, scalars) = jax.device_put((X, weights, labels, M, scalars), rep)
        data = prepare_sharded_steps(mesh, layout, X, weights, labels, reuse=True)
        if spec is not None:
            params, opt_state, key = jax.device_put((params, opt_state, key), rep)
            params, opt_state = fast_steps(encoder, params, opt_state, layout, None, X, data,
                                           key, jnp.int32(steps), scalars, M, name=spec.name,
                                           loss=loss, poisson=poisson, mesh=mesh)
        else:
            for t in range(int(steps)):
                params, opt_state, k = jax.device_put((params, opt_state,
                                                       jax.random.fold_in(key, t)), rep)
                g = sharded_fast_noisy_gradient(encoder, params, layout, X, data, k, *scalars,
                                                 M, loss=loss, poisson=poisson, mesh=mesh)
                params, opt_state = _apply_optimizer(optimizer, g, opt_state, params)
        keep_scratch(layout.layout, data)
        return (params, opt_state) if return_state else params
    step = make_noisy_gd_step(encoder, optimizer, loss=loss, path=path, poisson=poisson,
                              microbatch_size=microbatch_size, mesh=mesh)
    for t in range(int(steps)):
        params, opt_state = step(params, opt_state, layout, X, weights, labels,
                                 jax.random.fold_in(key, t), *scalars, M)
    return (params, opt_state) if return_state else params


# -- the noisy-GD clipped gradient sum ---------------------------------------------------------
def sharded_clipped_sum(mesh, encoder, params, sl, X, weights, labels,
                        clip_norm, user_mask, loss, path: str, microbatch_size=None):
    """:func:`clipped_gradient_sum` with the layout's rows split across
    ``mesh`` (traced inside :func:`~dpmt.solvers.noisy_gd.noisy_gd`'s jitted step).

    * fast path (EmbeddingEncoder, task layout sharded by items): each device computes its
      items' residuals; the per-user squared norms are ``psum``-ed (n floats per device), so
      the clip uses each user's whole gradient; the clipped rows are all-gathered.
    * generic path (any encoder, user layout sharded by users): each device sums its users'
      clipped gradients; the partial sums are ``psum``-ed (one parameter-sized all-reduce).

    Returns (gradient sum like ``params``, per-user norms), replicated.
    """
    axis = sharding.axis_name(mesh)
    layout = sl.layout
    opt = {k: v for k, v in (("weights", weights), ("labels", labels)) if v is not None}
    specs_in = (list(sharding.bucket_specs(layout, axis)), P(), P(), P(), P(), {k: P() for k in opt})

    if path == "embedding":
        def local(buckets, params, X, clip_norm, user_mask, opt):
            lay = sharding.local_layout(buckets, layout)
            parts, norms = embedding_clipped_rows(
                params["params"]["embedding"], lay, X, opt.get("weights"), opt.get("labels"),
                clip_norm, user_mask, loss, axis=axis)
            return [jax.lax.all_gather(o, axis, axis=1, tiled=True) for o in parts], norms

        parts, norms = jax.shard_map(local, mesh=mesh, in_specs=specs_in, check_vma=False,
                                     out_specs=([P()] * len(layout.buckets), P()))(
            list(layout.buckets), params, X, clip_norm, user_mask, opt)
        return {"params": {"embedding": layout.assemble(parts)}}, norms

    def local(buckets, params, X, clip_norm, user_mask, opt):
        lay = sharding.local_layout(buckets, layout)
        return _generic_clipped_sum(encoder, params, lay, X, opt.get("weights"),
                                        opt.get("labels"), clip_norm, user_mask, loss,
                                        microbatch_size, axis=axis)

    return jax.shard_map(local, mesh=mesh, in_specs=specs_in, check_vma=False,
                         out_specs=(P(), P()))(list(layout.buckets), params, X, clip_norm,
                                               user_mask, opt)
