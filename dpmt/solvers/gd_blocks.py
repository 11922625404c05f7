"""The fast path of noisy GD's embedding encoder: blocked passes, per-call constants hoisted.

The slots' weights and labels and ‖x_j‖² are gathered once per :func:`dpmt.solvers.noisy_gd.
noisy_gd` call (:func:`prepare_steps`); each step then computes the per-user gradient norms
‖g_j‖ = ‖x_j‖·(Σ_{i∈Ω^j} (w_ij ℓ'_ij)²)^½ as row sums over the user layout (no scatter) and
the clipped rows Σ_j m_j g_j min(1, G/‖g_j‖) in cache-sized blocks
(:func:`fast_clipped_sum`): the same quantities as the reference kernels of
:mod:`dpmt.solvers.noisy_gd`, up to float32 summation order.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpmt.errors import ConfigError
from dpmt.solvers.layout import (Chunk, Layout, count_trace, gather_slots, map_row_blocks,
                                 require_unsegmented)
from dpmt.solvers.losses import Loss, squared_loss

_HI = jax.lax.Precision.HIGHEST

class SlotData(NamedTuple):
    """Per-slot weights and labels of a layout, gathered once per :func:`noisy_gd` call
    (they are the same at every step): per bucket, float32 ``(n_chunks, chunk_rows, L)``,
    zero in pad slots."""

    w: list
    y: list


def slot_data(layout: Layout, weights, labels) -> SlotData:
    """:class:`SlotData` of ``layout`` (usable inside jit); a segmented layout's segments
    bucket last."""
    buckets = layout.buckets + (() if layout.segments is None else (layout.segments.bucket,))
    return SlotData([gather_slots(weights, b.chunks()) for b in buckets],
                    [gather_slots(labels, b.chunks()) for b in buckets])


class StepData(NamedTuple):
    """What every step of :func:`noisy_gd`'s embedding path reads and no step changes: the
    slots of the task layout (and of the user layout, when given) and ``‖x_j‖²``."""

    items: SlotData
    users: SlotData | None
    x_sq: jax.Array


@jax.jit
def prepare_steps(items: Layout, users: Layout | None, X, weights, labels) -> StepData:
    """:class:`StepData` of one :func:`noisy_gd` call."""
    count_trace("noisy_gd_prepare")
    return StepData(slot_data(items, weights, labels),
                    None if users is None else slot_data(users, weights, labels),
                    jnp.sum(X * X, axis=-1))


def _residual_fn(loss: Loss):
    grad_pred = jax.grad(lambda p, y: jnp.sum(loss(p, y)))     # elementwise ℓ'(p, y)
    # w_ij ℓ'_ij, 0 in pad slots (where, not a product: pad slots may hold anything)
    return lambda valid, w, pred, y: jnp.where(valid, w * grad_pred(pred, y), 0.0)


def user_sq_sums(V, users: Layout, X, slots: SlotData, loss: Loss = squared_loss) -> jax.Array:
    """``Σ_{i∈Ω^j} (w_ij ℓ'(⟨v_i, x_j⟩, y_ij))²`` per user (n_users,), over the *user* layout:
    row sums (no scatter), the gathered rows are item rows ``v_i`` (a small table), in
    cache-sized blocks of rows."""
    resid = _residual_fn(loss)

    def chunk(c: Chunk, w, y):
        def block(sc: Chunk, w, y):
            pred = jnp.sum(V[sc.cols] * X[sc.rows][:, None, :], axis=-1)   # (k, L), one fusion
            r = resid(sc.valid, w, pred, y)
            return jnp.sum(r * r, axis=-1)
        return map_row_blocks(block, c, w, y, dim=V.shape[-1])

    return users.assemble(users.map_chunks(chunk, slots.w, slots.y))


def item_sq_sums(V, items: Layout, X, slots: SlotData, loss: Loss = squared_loss) -> jax.Array:
    """:func:`user_sq_sums` over the task layout (when no user layout is given): per-slot
    residuals in blocks, then a segment sum over users (a scatter)."""
    resid = _residual_fn(loss)

    def chunk(c: Chunk, w, y):
        def block(sc: Chunk, w, y):
            pred = jnp.einsum("nld,nd->nl", X[sc.cols], V[sc.rows], precision=_HI)
            r = resid(sc.valid, w, pred, y)
            return r * r
        return map_row_blocks(block, c, w, y, dim=V.shape[-1])

    nb = len(items.buckets)
    sq = items.col_sum(items.map_chunks(chunk, slots.w[:nb], slots.y[:nb]))
    if items.segments is not None:
        b = items.segments.bucket
        r2 = jax.lax.map(lambda a: chunk(*a), (b.chunks(), slots.w[nb], slots.y[nb]))
        sq = sq.at[b.cols.reshape(-1)].add(r2.reshape(-1))
    return sq


def clipped_item_rows(V, items: Layout, X, slots: SlotData, scale, loss: Loss = squared_loss
                      ) -> jax.Array:
    """Row ``i`` of the clipped sum, ``Σ_j scale_j w_ij ℓ'_ij x_j`` (m, d), over the task
    layout in cache-sized blocks: one gather of the users' rows per block, read twice (the
    residuals, then the weighted sum). A segmented layout's long rows are the sums of their
    segments' rows."""
    resid = _residual_fn(loss)

    def chunk(c: Chunk, w, y):
        def block(sc: Chunk, w, y):
            Xg = X[sc.cols]                                                # (k, L, d)
            pred = jnp.einsum("nld,nd->nl", Xg, V[sc.rows], precision=_HI)
            coef = resid(sc.valid, w, pred, y) * scale[sc.cols]
            return jnp.einsum("nl,nld->nd", coef, Xg, precision=_HI)
        return map_row_blocks(block, c, w, y, dim=V.shape[-1])

    nb = len(items.buckets)
    parts = items.map_chunks(chunk, slots.w[:nb], slots.y[:nb])
    long = None
    if items.segments is not None:
        seg = items.segments

        def add(acc, xs):
            c, local, w, y = xs
            return acc.at[local].add(chunk(c, w, y)), None      # pad segments: the dump row

        acc = jnp.zeros((seg.rows.shape[0] + 1, V.shape[-1]), jnp.float32)
        acc, _ = jax.lax.scan(add, acc, (seg.bucket.chunks(), seg.local, slots.w[nb],
                                         slots.y[nb]))
        long = acc[:-1]
    return items.assemble(parts, long)


def fast_clipped_sum(V, items: Layout, users: Layout | None, X, data: StepData, clip_norm,
                     user_mask, loss: Loss = squared_loss):
    """The embedding path's ``Σ_j m_j g_j min(1, G/‖g_j‖)`` (m, d) and ``‖g_j‖`` (n,): the same
    quantities as :func:`embedding_clipped_rows` (up to float32 summation order), in two
    blocked passes — the per-user norms (over the user layout when given), then the clipped
    rows — reading the slots' weights and labels from ``data`` (:func:`prepare_steps`)."""
    if users is not None:
        sq = user_sq_sums(V, users, X, data.users, loss)
    else:
        sq = item_sq_sums(V, items, X, data.items, loss)
    norms = jnp.sqrt(sq * data.x_sq)                                       # ‖g_j‖
    scale = clip_norm / jnp.maximum(norms, clip_norm) * user_mask
    return clipped_item_rows(V, items, X, data.items, scale, loss), norms


def _check_user_layout(users, items: Layout) -> None:
    if not isinstance(users, Layout) or users.kind != "users":
        raise ConfigError("noisy GD: user_layout must be a user layout "
                          "(dpmt.solvers.layout.user_layout) of the same ratings")
    require_unsegmented(users, "noisy GD")
    if (users.n_rows, users.n_cols, users.nnz) != (items.n_cols, items.n_rows, items.nnz):
        raise ConfigError(f"noisy GD: the user layout ({users.n_rows} users × {users.n_cols} "
                          f"items, {users.nnz} ratings) is not the task layout's transpose "
                          f"({items.n_cols} × {items.n_rows}, {items.nnz})")
