"""The fast path of noisy GD's embedding encoder: U's rows gathered once per item step,
per-call constants hoisted.

U is fixed through the steps of one :func:`dpmt.solvers.noisy_gd.noisy_gd` call, so
:func:`prepare_steps` gathers, once per call, the slots' weights and labels, ‖x_j‖², and the
users' rows x_j into every slot of the task layout (item-major, bucket by bucket, zero in
pad slots; within :data:`PREGATHER_BYTES`). Each step (:func:`fast_clipped_sum`) is then

* one batched mat-vec per contiguous block: the residuals r_ij = w_ij ℓ'(⟨x_j, v_i⟩, y_ij);
* the per-user gradient norms ‖g_j‖ = ‖x_j‖·(Σ_{i∈Ω^j} r_ij²)^½ by one scatter-add of the
  nnz scalars r_ij² into the n users, and the clip factors s_j = m_j min(1, G/‖g_j‖);
* one batched vec-mat per block: row i of the clipped sum Σ_j s_j r_ij x_j (long item rows
  as the sums of their segments).

Only scalars move between the item-major and user-major orders; no d-vector is gathered per
step (XLA:CPU gathers rows at ~25-30 ns each, and the parent kernel gathered v_i and u_j per
rating at every step). The same quantities as the reference kernels of
:mod:`dpmt.solvers.noisy_gd`, up to float32 summation order. Buckets over the budget keep
the blocked kernel (rows gathered per step in cache-sized blocks; with a budget of 0, the
parent's kernels: norms as row sums over the user layout, then the clipped rows).

On a mesh of devices (:func:`prepare_sharded_steps`, :func:`sharded_fast_clipped_sum`) each
device pre-gathers the slots of its own rows of every bucket (segments included: a long
item's segments land on several devices and their rows add up in the one all-reduce of the
clipped rows); the per-user squared norms are ``psum``-ed before the clip, so each user's
whole gradient is clipped. On the 2-core CPU as two host devices, one thread each (XLA:CPU
runs these batched products on one thread per device): 50k users × 5k items, 2.4M ratings,
d = 64, the step's clipped sum 84 → 60 ms, the item step of 10 steps 0.93 → 0.65 s.

Memory: 4·d bytes per padded slot of the task layout — 0.65 GiB at 2.4M ratings (padding
1.135), 5.7 GiB at the ML-20M-like 20M (1.11 with segments), d = 64 — held from one item
step to the next (:func:`keep_scratch`), because writing over mapped pages is ~3-4x faster
on CPU than faulting in a fresh block of that size.

Measured (``experiments/noisy_gd_profile.py``, ``experiments/gd_pregather_gpu.py``): the item
step of 10 steps at 2.4M ratings, d = 64, 3.35x faster on the 2 shared CPU cores (5.98 →
1.79 s at load 5-6), 4.5x on an H200 (78 → 17.5 ms); at the ML-20M-like 20M on the H200
5.7x (672 → 118 ms).
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from dpmt.errors import ConfigError
from dpmt.solvers import sharding
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
    slots of the task layout (and of the user layout, when given), ``‖x_j‖²``, and — U being
    fixed through the item step — the users' rows already gathered into the task layout's
    slots (:func:`pregathered_buckets`)."""

    items: SlotData
    users: SlotData | None
    x_sq: jax.Array
    #: per task-layout bucket (segments last): ``x_{cols}`` float32 ``(n_chunks, rows, L, d)``,
    #: zero in pad slots, or None for a bucket gathered at every step (over the budget)
    x_slots: tuple = ()


#: Budget of the users' rows pre-gathered into the task layout's slots once per item step
#: (:class:`StepData` ``x_slots``, 4·d bytes per padded slot): buckets, in layout order, while
#: their sum stays under it; the rest are gathered at every step as before. 2.4M ratings at
#: d = 64 take 0.69 GiB, the ML-20M-like 20M 5.7 GiB (padding 1.11 with segments).
PREGATHER_BYTES = 8 * 2**30


def pregathered_buckets(items: Layout, dim: int, budget: int | None = None) -> tuple:
    """Which of the task layout's buckets (segments last) :func:`prepare_steps` pre-gathers:
    a tuple of bools, buckets in layout order while their ``(n_chunks, rows, L, d)`` float32
    blocks fit ``budget`` (default :data:`PREGATHER_BYTES`)."""
    budget = PREGATHER_BYTES if budget is None else int(budget)
    out, used = [], 0
    for b in items.buckets + (() if items.segments is None else (items.segments.bucket,)):
        size = 4 * int(b.cols.size) * int(dim)
        out.append(used + size <= budget)
        used += size if out[-1] else 0
    return tuple(out)


def _prepare_steps(items: Layout, users: Layout | None, X, weights, labels, scratch,
                   pregather: tuple) -> StepData:
    count_trace("noisy_gd_prepare")
    buckets = items.buckets + (() if items.segments is None else (items.segments.bucket,))
    # the blocks of the previous call (donated, kept as a parameter although unread:
    # keep_unused) take the outputs, so their pages are mapped already — a fresh block of
    # this size costs page faults, on the 2-core VM more than the gather itself
    del scratch
    x_slots = tuple(X[b.cols] * b.valid[..., None].astype(X.dtype) if pre else None
                    for b, pre in zip(buckets, pregather))          # zero in pad slots
    # the user layout's slots are read only by the norms pass of a step without
    # pre-gathered rows (user_sq_sums)
    return StepData(slot_data(items, weights, labels),
                    None if users is None or any(pregather) else slot_data(users, weights,
                                                                           labels),
                    jnp.sum(X * X, axis=-1), x_slots)


_prepare_jit = jax.jit(_prepare_steps, static_argnames=("pregather",),
                       donate_argnames=("scratch",), keep_unused=True)

#: per task layout (weakly: dropped with it), the pre-gathered blocks of its last
#: :func:`noisy_gd` call, donated to the next one (:func:`keep_scratch`)
_SCRATCH: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def prepare_steps(items: Layout, users: Layout | None, X, weights, labels, *,
                  pregather_bytes: int | None = None, reuse: bool = False) -> StepData:
    """:class:`StepData` of one :func:`noisy_gd` call.

    ``pregather_bytes``: the budget of :func:`pregathered_buckets` (0: none; every step
    gathers its rows, as before). ``reuse``: write the blocks over the buffers that
    :func:`keep_scratch` kept for ``items`` from an earlier call, if their shapes and devices
    match (they are donated: the earlier StepData must no longer be read).
    """
    pre = pregathered_buckets(items, X.shape[-1], pregather_bytes)
    scratch = _SCRATCH.pop(items, None) if reuse and any(pre) else None
    want = [b.cols.shape + (X.shape[-1],) for b, p in zip(_buckets(items), pre) if p]
    if scratch is not None and ([tuple(x.shape) for x in scratch] != [tuple(w) for w in want]
                                or any(x.dtype != X.dtype or x.devices() != X.devices()
                                       for x in scratch)):
        scratch = None
    if scratch is None and reuse and want and len(X.devices()) == 1:
        # the first call of a run donates blocks of the same shapes as the later ones, so
        # that the step compiles once, not again at the second call (one device: the
        # blocks' placement is X's; on a mesh it is the compiler's, and that call retraces).
        # Committed only where X is: a committed block would commit the step's outputs (V,
        # then U), and the CG user step would see an uncommitted start U0 once and a
        # committed one after it, compiling again (XLA caches by placement too)
        dev = next(iter(X.devices()))
        scratch = tuple(jax.device_put(jnp.zeros(w, X.dtype), dev) if X.committed
                        else jnp.zeros(w, X.dtype) for w in want)
    return _prepare_jit(items, users, X, weights, labels, scratch, pregather=pre)


def keep_scratch(items: Layout, data: StepData) -> None:
    """Keep ``data``'s pre-gathered blocks for the next ``prepare_steps(items, ...,
    reuse=True)``: held while ``items`` lives (or until :func:`release_scratch`), so an
    item step of the next iteration writes over mapped pages instead of faulting in fresh
    ones. ``data`` must not be read after that call."""
    kept = tuple(x for x in data.x_slots if x is not None)
    if kept:
        _SCRATCH[items] = kept


def release_scratch() -> None:
    """Drop the pre-gathered blocks held between item steps (their memory is freed)."""
    _SCRATCH.clear()


def _buckets(items: Layout) -> tuple:
    return items.buckets + (() if items.segments is None else (items.segments.bucket,))


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
    quantities as :func:`embedding_clipped_rows` (up to float32 summation order).

    With pre-gathered user rows (``data.x_slots``, :func:`prepare_steps`): the residuals
    ``w_ij ℓ'_ij`` of every slot in item-major order (a batched mat-vec over each contiguous
    block), the per-user norms from their squares (one scatter-add of nnz scalars into the
    users; the user layout is not read), then the clipped rows as a second batched product
    over the same blocks with the per-slot coefficients ``scale_j w_ij ℓ'_ij``. Buckets over
    the budget gather their rows in cache-sized blocks in both passes. Without pre-gathered
    rows: two blocked passes — the per-user norms (over the user layout when given), then
    the clipped rows — reading the slots' weights and labels from ``data``."""
    if not any(x is not None for x in data.x_slots):
        if users is not None:
            sq = user_sq_sums(V, users, X, data.users, loss)
        else:
            sq = item_sq_sums(V, items, X, data.items, loss)
        norms = jnp.sqrt(sq * data.x_sq)                                   # ‖g_j‖
        scale = clip_norm / jnp.maximum(norms, clip_norm) * user_mask
        return clipped_item_rows(V, items, X, data.items, scale, loss), norms
    return _pregathered_clipped_sum(V, items, users, X, data, clip_norm, user_mask, loss)


def _pregathered_clipped_sum(V, items: Layout, users, X, data: StepData, clip_norm, user_mask,
                             loss):
    parts, norms = _pregathered_parts(V, items, X, data, clip_norm, user_mask, loss)
    nb = len(items.buckets)
    long = None
    if items.segments is not None:
        seg = items.segments
        acc = jnp.zeros((seg.rows.shape[0] + 1, V.shape[-1]), jnp.float32)  # pad segments: dump row
        long = acc.at[seg.local.reshape(-1)].add(parts[nb].reshape(-1, V.shape[-1]))[:-1]
    return items.assemble(parts[:nb], long), norms


def _pregathered_parts(V, items: Layout, X, data: StepData, clip_norm, user_mask, loss,
                       axis: str | None = None):
    """The clipped rows per bucket (segments last, not yet summed into their rows) and the
    per-user norms. Inside ``shard_map`` over items (``axis``), ``items`` is the device's local
    layout and the per-user squared norms are ``psum``-ed over the devices before the clip,
    so every device clips with each user's whole gradient."""
    resid = _residual_fn(loss)
    buckets = items.buckets + (() if items.segments is None else (items.segments.bucket,))
    dim = V.shape[-1]

    def gathered(c: Chunk, w, y):                  # a bucket over the budget, in row blocks
        def block(sc: Chunk, w, y):
            pred = jnp.einsum("nld,nd->nl", X[sc.cols], V[sc.rows], precision=_HI)
            return resid(sc.valid, w, pred, y)
        return map_row_blocks(block, c, w, y, dim=dim)

    # pass 1: w_ij ℓ'_ij per slot, item-major (zero in pad slots)
    r = []
    for b, xs, w, y in zip(buckets, data.x_slots, data.items.w, data.items.y):
        if xs is not None:
            pred = jnp.einsum("cnld,cnd->cnl", xs, V[b.rows], precision=_HI)
            r.append(resid(b.valid, w, pred, y))
        else:
            r.append(jax.lax.map(lambda a: gathered(*a), (b.chunks(), w, y)))
    # the per-user norms: Σ_i (w_ij ℓ'_ij)² per user (a scatter of nnz scalars into the
    # n users: 3.5x faster on CPU than a gather into the user layout's order), × ‖x_j‖²
    sq = jnp.zeros((items.n_cols,), jnp.float32)
    for b, x in zip(buckets, r):
        sq = sq.at[b.cols.reshape(-1)].add((x * x).reshape(-1))
    if axis is not None:
        sq = jax.lax.psum(sq, axis)
    norms = jnp.sqrt(sq * data.x_sq)                                       # ‖g_j‖
    scale = clip_norm / jnp.maximum(norms, clip_norm) * user_mask

    # pass 2: row i = Σ_j scale_j w_ij ℓ'_ij x_j
    def rows_gathered(c: Chunk, coef):
        def block(sc: Chunk, coef):
            return jnp.einsum("nl,nld->nd", coef, X[sc.cols], precision=_HI)
        return map_row_blocks(block, c, coef, dim=dim)

    parts = []
    for b, xs, x in zip(buckets, data.x_slots, r):
        coef = x * scale[b.cols]
        if xs is not None:
            parts.append(jnp.einsum("cnl,cnld->cnd", coef, xs, precision=_HI))
        else:
            parts.append(jax.lax.map(lambda a: rows_gathered(*a), (b.chunks(), coef)))
    return parts, norms


def _check_user_layout(users, items: Layout) -> None:
    if not isinstance(users, Layout) or users.kind != "users":
        raise ConfigError("noisy GD: user_layout must be a user layout "
                          "(dpmt.solvers.layout.user_layout) of the same ratings")
    require_unsegmented(users, "noisy GD")
    if (users.n_rows, users.n_cols, users.nnz) != (items.n_cols, items.n_rows, items.nnz):
        raise ConfigError(f"noisy GD: the user layout ({users.n_rows} users × {users.n_cols} "
                          f"items, {users.nnz} ratings) is not the task layout's transpose "
                          f"({items.n_cols} × {items.n_rows}, {items.nnz})")


# -- on a mesh (dpmt.solvers.sharding): each device pre-gathers the rows of its own items ------
def _specs(axis: str):
    """(pre-gathered blocks, per-slot arrays) partition specs of a sharded task layout."""
    return P(None, axis, None, None), P(None, axis, None)


def _prepare_sharded(mesh, sl, X, weights, labels, scratch, pregather: tuple) -> StepData:
    count_trace("noisy_gd_prepare_sharded")
    del scratch                     # donated (see _prepare_steps): its pages take the outputs
    axis = sharding.axis_name(mesh)
    layout = sl.layout
    x_spec, slot_spec = _specs(axis)
    opt = {k: v for k, v in (("weights", weights), ("labels", labels)) if v is not None}
    buckets = _buckets(layout)                      # segments last, as a plain bucket
    nb = len(buckets)

    def local(buckets, X, opt):
        lay = sharding.local_layout(buckets, layout)
        xs = [X[b.cols] * b.valid[..., None].astype(X.dtype)
              for b, pre in zip(lay.buckets, pregather) if pre]
        return xs, slot_data(lay, opt.get("weights"), opt.get("labels"))

    xs, slots = jax.shard_map(
        local, mesh=mesh, check_vma=False,
        in_specs=(list(sharding.bucket_specs(layout, axis, segments=True)), P(),
                  {k: P() for k in opt}),
        out_specs=([x_spec] * sum(pregather), SlotData([slot_spec] * nb, [slot_spec] * nb)))(
        list(buckets), X, opt)
    it = iter(xs)
    return StepData(slots, None, jnp.sum(X * X, axis=-1),
                    tuple(next(it) if pre else None for pre in pregather))


_prepare_sharded_jit = jax.jit(_prepare_sharded, static_argnames=("mesh", "pregather"),
                               donate_argnames=("scratch",), keep_unused=True)


def prepare_sharded_steps(mesh, sl, X, weights, labels, *, pregather_bytes: int | None = None,
                          reuse: bool = False) -> StepData:
    """:func:`prepare_steps` on a mesh: ``sl`` a task layout sharded by items
    (:func:`dpmt.solvers.sharding.shard_layout`), ``X``, ``weights``, ``labels`` replicated.
    Each device gathers the users' rows into its own rows' slots (the blocks are sharded like
    the layout, the budget counts all devices' blocks); ``reuse`` as in
    :func:`prepare_steps` (the kept blocks are keyed by ``sl.layout``)."""
    layout = sl.layout
    pre = pregathered_buckets(layout, X.shape[-1], pregather_bytes)
    want = [b.cols.shape + (X.shape[-1],) for b, p in zip(_buckets(layout), pre) if p]
    x_sharding = NamedSharding(mesh, _specs(sharding.axis_name(mesh))[0])
    scratch = _SCRATCH.pop(layout, None) if reuse and any(pre) else None
    if scratch is not None and ([tuple(x.shape) for x in scratch] != [tuple(w) for w in want]
                                or any(x.dtype != X.dtype
                                       or not x.sharding.is_equivalent_to(x_sharding, x.ndim)
                                       for x in scratch)):
        scratch = None
    if scratch is None and reuse and want:
        # as prepare_steps: the first call donates blocks of the later calls' shapes and
        # placement, so that the preparation compiles once
        scratch = tuple(jnp.zeros(w, X.dtype, device=x_sharding) for w in want)
    return _prepare_sharded_jit(mesh, sl, X, weights, labels, scratch, pregather=pre)


def sharded_fast_clipped_sum(mesh, sl, V, X, data: StepData, clip_norm, user_mask,
                             loss: Loss = squared_loss):
    """:func:`fast_clipped_sum` on a mesh, from :func:`prepare_sharded_steps`'s blocks (inside
    jit): each device computes its items' residuals from its own blocks, the per-user squared
    norms are ``psum``-ed (n floats per device, so every device clips with each user's whole
    gradient norm), then its items' clipped rows, all-gathered. Returns ``(rows (m, d),
    norms (n,))``, replicated."""
    axis = sharding.axis_name(mesh)
    layout = sl.layout
    x_spec, slot_spec = _specs(axis)
    buckets = _buckets(layout)
    nb = len(buckets)
    pre = tuple(x is not None for x in data.x_slots)

    def local(buckets, V, X, x_sq, xs, w, y, clip_norm, user_mask):
        lay = sharding.local_layout(buckets, layout)
        it = iter(xs)
        d = StepData(SlotData(w, y), None, x_sq, tuple(next(it) if p else None for p in pre))
        parts, norms = _pregathered_parts(V, lay, X, d, clip_norm, user_mask, loss, axis=axis)
        # one all-reduce of the (m, d) rows, each device's rows scattered into zeros (pad rows
        # are zero rows; a long row's segments add up): an all-gather per bucket cost ~1.3 ms
        # each on CPU host devices
        rows = jnp.zeros((layout.n_rows, V.shape[-1]), jnp.float32)
        for b, o in zip(lay.buckets, parts):
            rows = rows.at[b.rows.reshape(-1)].add(o.reshape(-1, V.shape[-1]))
        return jax.lax.psum(rows, axis), norms

    return jax.shard_map(
        local, mesh=mesh, check_vma=False,
        in_specs=(list(sharding.bucket_specs(layout, axis, segments=True)), P(), P(), P(),
                  [x_spec] * sum(pre), [slot_spec] * nb, [slot_spec] * nb, P(), P()),
        out_specs=(P(), P()))(
        list(buckets), V, X, data.x_sq, [x for x in data.x_slots if x is not None],
        list(data.items.w), list(data.items.y), clip_norm, user_mask)
