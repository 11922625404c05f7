"""The item and user steps on several devices (and several hosts) with ``jax.sharding``.

Both steps are independent per row of their layout — per item (statistics, noise, solve)
and per user (Gram, Cholesky solve) — so rows are split across the devices of a 1-D
:class:`~jax.sharding.Mesh` and nothing but the results is communicated:

* :func:`shard_layout` pads every bucket's chunks to a multiple of the device count (pad rows:
  ``valid = False``, the same pad rows the single-device layout already has) and places the
  bucket arrays with ``NamedSharding(mesh, P(None, axis, None))``: device ``k`` holds the
  ``k``-th contiguous block of rows of *every* bucket, so each device gets a slice of every
  row length (balanced work, no per-device recompilation: one program for all devices).
* :func:`sharded_ssp_item_step` / :func:`sharded_solve_users` run the single-device per-chunk
  kernels (:func:`dpmt.solvers.ssp.private_item_solve_chunk`, the user step's block solve)
  under :func:`jax.shard_map` on the local rows, then ``all_gather`` the ``(rows, d)`` results,
  so the returned ``V`` / ``U`` are replicated on every device (ready for the next step and
  for the noisy Gramian, which every device then computes identically).
* The noise of item ``i`` is drawn from ``fold_in(key, i)`` (:func:`dpmt.solvers.ssp._item_noise`)
  wherever item ``i`` lands, so the released model does not depend on the number of devices
  (up to float32 round-off: per-device blocks have different sizes, which can change the
  summation order inside XLA's batched products and which blocks take the Cholesky fast path).

Communication per iteration (per device, received): ``(D−1)/D · 4·d·(m' + n')`` bytes for the
two all-gathers (``m'``, ``n'``: item and user rows after padding) — see docs/scaling.md. The
inputs that every device reads in full are replicated: ``U`` (n·d), ``V`` (m·d), the per-rating
weights (nnz) and the layouts' ``inverse`` index.

Multi-host: the same functions run under :func:`jax.distributed.initialize` with a mesh over
all processes' devices (``make_mesh()`` after initialising); arrays are built with
:func:`jax.make_array_from_callback`, so each process only materialises its own devices'
shards. See ``scripts/multihost.py`` and docs/scaling.md.

:func:`dpmt.train.methods.make_steps` picks these for ``ExecutionConfig(devices=N)`` (noisy
GD's embedding table through :func:`dpmt.solvers.gd_blocks.sharded_fast_clipped_sum` — each
device pre-gathers its own items' slots, long items in segments — its MLP encoder through
:func:`dpmt.solvers.noisy_gd.sharded_clipped_sum`); the memory and
communication model of these steps is :mod:`dpmt.apps.scaling`.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from dpmt.errors import ConfigError, check_range
from dpmt.solvers import ssp
from dpmt.solvers.cg import check_cg_steps, check_start, shared_preconditioner
from dpmt.solvers.layout import (Bucket, Layout, Segments, count_trace, map_row_blocks,
                                 require_kind)
from dpmt.solvers.user_step import clip_rows, solve_block, system_base, user_block_bytes

AXIS = "rows"


# -- mesh and placement ----------------------------------------------------------------------
def make_mesh(n_devices: int | None = None, axis: str = AXIS) -> Mesh:
    """A 1-D mesh over the first ``n_devices`` devices (all of them — of every process, under
    ``jax.distributed`` — by default). On CPU, several devices in one process come from
    ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (set before JAX starts)."""
    devices = jax.devices()
    if n_devices is None:
        n_devices = len(devices)
    check_range("n_devices", n_devices, low=1, integer=True)
    if n_devices > len(devices):
        raise ConfigError(
            f"asked for {n_devices} devices but JAX sees {len(devices)} "
            f"({devices[0].platform}); on CPU start Python with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n_devices}")
    return Mesh(np.asarray(devices[:n_devices]), (axis,))


MAX_CPU_DEVICES = 64


def request_devices(n_devices: int) -> None:
    """Make ``n_devices`` devices visible to this process where that is still possible.

    On CPU, JAX creates its host devices when its backend starts; before that,
    ``jax_num_cpu_devices`` sets how many (one thread each: how the single-threaded LAPACK
    kernels of the batched solves use several cores). After the backend has started, or on
    an accelerator, this does nothing and :func:`make_mesh` reports a shortfall with what to do.
    """
    check_range("n_devices", n_devices, low=1, integer=True)
    if n_devices == 1:
        return
    try:
        from jax._src import xla_bridge

        started = xla_bridge.backends_are_initialized()
    except Exception:  # noqa: BLE001 - private API moved: assume started (no harm: a no-op)
        started = True
    # only affects the CPU platform (accelerators bring their own devices); a silly count is
    # left to make_mesh's error rather than creating thousands of host devices
    if not started and n_devices <= MAX_CPU_DEVICES:
        try:
            jax.config.update("jax_num_cpu_devices", int(n_devices))
        except Exception:  # noqa: BLE001 - older JAX: XLA_FLAGS is the only way
            pass


#: the most CPU host devices :func:`auto_devices` makes (the sharded steps are tested on 1, 2
#: and 4; more pads every bucket to a larger multiple for little more bandwidth)
MAX_AUTO_DEVICES = 4


def cpu_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def request_auto_devices() -> None:
    """Before JAX's backend starts: ask for :func:`auto_devices`' CPU host devices (the CLI
    calls it first, so that every run of the command sees them)."""
    request_devices(min(cpu_cores(), MAX_AUTO_DEVICES))


def auto_devices() -> int:
    """``devices=None`` (auto): on CPU, the host devices JAX has, at most one per core and
    :data:`MAX_AUTO_DEVICES` — XLA:CPU runs the user and item steps' batched products and
    LAPACK calls on one thread per device, so devices are how they use several cores. JAX
    makes one CPU device unless asked before it starts: the CLI asks
    (:func:`request_auto_devices`), a library call does not change JAX's configuration
    (call :func:`request_auto_devices` or :func:`request_devices` first, before any JAX
    work). 1 on an accelerator (one chip; ask for more with ``devices=N``) and in a
    multi-process run (its mesh is the caller's choice)."""
    devices = jax.devices()
    if devices[0].platform != "cpu" or jax.process_count() > 1:
        return 1
    return max(1, min(cpu_cores(), MAX_AUTO_DEVICES, len(devices)))


def axis_name(mesh: Mesh) -> str:
    if len(mesh.axis_names) != 1:
        raise ConfigError(f"dpmt's sharded steps need a 1-D mesh (got axes {mesh.axis_names})")
    return mesh.axis_names[0]


def _put(x, mesh: Mesh, spec: P) -> jax.Array:
    """A global array with ``NamedSharding(mesh, spec)`` from a host value that every process
    holds in full (each process materialises only its addressable shards)."""
    if isinstance(x, jax.Array) and isinstance(x.sharding, NamedSharding) \
            and x.sharding.mesh == mesh and x.sharding.spec == spec:
        return x
    a = np.asarray(x)
    return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec), lambda idx: a[idx])


def replicate(x, mesh: Mesh) -> jax.Array | None:
    """``x`` replicated on every device of ``mesh`` (None stays None)."""
    return None if x is None else _put(x, mesh, P())


def _key_data(key) -> np.ndarray:
    if key is None:
        key = jax.random.key(0)
    if jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.asarray(key)


@dataclasses.dataclass(frozen=True)
class ShardedLayout:
    """A :class:`~dpmt.solvers.layout.Layout` whose chunks are padded to a multiple of the
    device count and placed row-sharded on ``mesh``, plus its unrated rows (padded with the
    out-of-range index ``n_rows``, dropped on assembly). Build with :func:`shard_layout`."""

    layout: Layout
    empty: jax.Array          # int32 (E',) sharded; E' a multiple of the device count
    n_devices: int

    @property
    def kind(self) -> str:
        return self.layout.kind


jax.tree_util.register_dataclass(ShardedLayout, data_fields=["layout", "empty"],
                                 meta_fields=["n_devices"])


def pad_layout(layout: Layout, multiple: int) -> Layout:
    """The same layout with every bucket's ``chunk_rows`` padded up to a multiple of
    ``multiple`` (pad rows: row 0, all slots invalid) and ``inverse`` updated (host numpy)."""
    inv = np.asarray(layout.inverse).astype(np.int64)
    new_inv = np.empty_like(inv)
    empty = inv == layout.total_rows
    buckets, off, new_off = [], 0, 0
    for b in layout.buckets:
        nc, r = b.n_chunks, b.chunk_rows
        r2 = -(-r // multiple) * multiple
        sel = (inv >= off) & (inv < off + nc * r)
        p = inv[sel] - off
        new_inv[sel] = new_off + (p // r) * r2 + p % r

        def pad(x, fill=0):
            x = np.asarray(x)
            extra = np.full((nc, r2 - r) + x.shape[2:], fill, x.dtype)
            return np.concatenate([x, extra], axis=1)
        buckets.append(Bucket(rows=pad(b.rows), cols=pad(b.cols), pos=pad(b.pos),
                              valid=pad(b.valid, False)))
        off += nc * r
        new_off += nc * r2
    new_inv[empty] = new_off
    segments = None
    if layout.segments is not None:     # long rows' segments: more pad segments, dump slot
        seg = layout.segments
        b, n_long = seg.bucket, int(seg.rows.shape[0])
        r, r2 = b.chunk_rows, -(-b.chunk_rows // multiple) * multiple

        def pad_seg(x, fill=0):
            x = np.asarray(x)
            return np.concatenate([x, np.full((b.n_chunks, r2 - r) + x.shape[2:], fill,
                                              x.dtype)], axis=1)
        segments = Segments(bucket=Bucket(rows=pad_seg(b.rows), cols=pad_seg(b.cols),
                                          pos=pad_seg(b.pos), valid=pad_seg(b.valid, False)),
                            local=pad_seg(seg.local, n_long), rows=np.asarray(seg.rows))
    return Layout(buckets=tuple(buckets), inverse=new_inv.astype(np.int32),
                  n_rows=layout.n_rows, n_cols=layout.n_cols, nnz=layout.nnz,
                  kind=layout.kind, dim=layout.dim, segments=segments)


def shard_layout(layout: Layout, mesh: Mesh) -> ShardedLayout:
    """Pad ``layout`` (:func:`pad_layout`) and place it row-sharded on ``mesh``: bucket arrays
    ``P(None, axis[, None])``, ``inverse`` replicated, unrated rows ``P(axis)``. A segmented
    layout's segments are sharded like a bucket (only noisy GD's kernel reads them on a mesh,
    :func:`dpmt.solvers.gd_blocks.sharded_fast_clipped_sum`; the other sharded steps refuse
    them)."""
    axis = axis_name(mesh)
    D = mesh.devices.size
    empty = ssp.empty_rows(layout).astype(np.int64)
    padded = pad_layout(layout, D)
    E2 = max(D, -(-len(empty) // D) * D)
    empty = np.concatenate([empty, np.full(E2 - len(empty), layout.n_rows)]).astype(np.int32)

    def put(b):
        return Bucket(rows=_put(b.rows, mesh, P(None, axis)),
                      cols=_put(b.cols, mesh, P(None, axis, None)),
                      pos=_put(b.pos, mesh, P(None, axis, None)),
                      valid=_put(b.valid, mesh, P(None, axis, None)))
    segments = None
    if padded.segments is not None:
        seg = padded.segments
        segments = Segments(bucket=put(seg.bucket), local=_put(seg.local, mesh, P(None, axis)),
                            rows=_put(seg.rows, mesh, P()))
    lay = Layout(buckets=tuple(put(b) for b in padded.buckets),
                 inverse=_put(padded.inverse, mesh, P()), n_rows=layout.n_rows,
                 n_cols=layout.n_cols, nnz=layout.nnz, kind=layout.kind, dim=layout.dim,
                 segments=segments)
    return ShardedLayout(layout=lay, empty=_put(empty, mesh, P(axis)), n_devices=D)


def bucket_specs(layout: Layout, axis: str, segments: bool = False):
    """Partition specs of ``layout``'s buckets (and of its segments' bucket, last, with
    ``segments``) for ``shard_map``."""
    n = len(layout.buckets) + (1 if segments and layout.segments is not None else 0)
    return tuple(Bucket(rows=P(None, axis), cols=P(None, axis, None), pos=P(None, axis, None),
                        valid=P(None, axis, None)) for _ in range(n))


def local_layout(buckets, layout: Layout) -> Layout:
    return Layout(buckets=tuple(buckets), inverse=None, n_rows=layout.n_rows,
                  n_cols=layout.n_cols, nnz=layout.nnz, kind=layout.kind, dim=layout.dim)


def _check(sl, mesh: Mesh, kind: str, what: str):
    if not isinstance(sl, ShardedLayout):
        raise ConfigError(f"{what} needs a ShardedLayout from dpmt.solvers.sharding."
                          f"shard_layout (got {type(sl).__name__})")
    require_kind(sl.layout, kind, what)
    if sl.n_devices != mesh.devices.size:
        raise ConfigError(f"the layout was sharded for {sl.n_devices} devices, the mesh has "
                          f"{mesh.devices.size}")


# -- the item step ---------------------------------------------------------------------------
def sharded_ssp_item_step(mesh: Mesh, layout: ShardedLayout, X, weights, labels, key,
                          sigma_A, sigma_b, reg, extra=None, psd: str = "project",
                          x0=None, cg_steps: int = ssp.DEFAULT_CG_STEPS) -> jax.Array:
    """:func:`dpmt.solvers.ssp.ssp_item_step` with items split across the devices of ``mesh``.

    Same arguments and semantics (``layout`` from :func:`shard_layout` of a task layout);
    returns θ float32 (n_items, d), replicated on every device of the mesh. ``psd="cg"``
    starts item ``i`` from ``x0[i]`` (replicated), as on one device.
    """
    _check(layout, mesh, "items", "sharded_ssp_item_step")
    ssp.check_psd(psd)
    ssp._check_reg(reg)
    noiseless = all(isinstance(s, (int, float)) and s == 0 for s in (sigma_A, sigma_b))
    if key is None and not noiseless:
        raise ConfigError("sharded_ssp_item_step needs a PRNG key when noise is on")
    psd = ssp.kernel_mode(psd, extra)
    X = replicate(_f32(X), mesh)
    d = X.shape[-1]
    start = replicate(check_start(x0, (layout.layout.n_rows, d), zeros=True), mesh) \
        if ssp.check_psd(psd).warm_start else None
    return _sharded_item(mesh, layout, X, replicate(_f32(weights), mesh),
                         replicate(_f32(labels), mesh), replicate(_key_data(key), mesh),
                         *(replicate(np.float32(v), mesh) for v in (sigma_A, sigma_b, reg)),
                         replicate(_f32(extra), mesh), start, psd=psd,
                         batch_size=ssp.solve_block_rows(d), noisy=not noiseless,
                         cg_steps=check_cg_steps(cg_steps))


def _f32(x):
    """float32, keeping a jax.Array on its devices (so an already replicated U / V is not
    copied through the host every step: :func:`_put` passes it through)."""
    if x is None:
        return None
    if isinstance(x, jax.Array):
        return x if x.dtype == jnp.float32 else x.astype(jnp.float32)
    return np.asarray(x, np.float32)


@jax.jit(static_argnames=("mesh", "psd", "batch_size", "noisy", "cg_steps"))
def _sharded_item(mesh, sl, X, weights, labels, key, sigma_A, sigma_b, reg, extra, start, *,
                  psd, batch_size, noisy, cg_steps):
    count_trace("sharded_ssp_item_step" if psd == "project" else
                f"sharded_ssp_item_step_{psd}")
    axis = axis_name(mesh)
    layout = sl.layout
    kw = dict(psd=psd, batch_size=batch_size, noisy=noisy, cg_steps=cg_steps)
    # optional inputs travel in a dict holding only the ones given (shard_map specs per leaf)
    opt = {k: v for k, v in (("weights", weights), ("labels", labels), ("extra", extra),
                             ("start", start)) if v is not None}

    def local(buckets, empty, X, key, sigma_A, sigma_b, reg, opt):
        d = X.shape[-1]
        extra_p = ssp.project_psd(opt["extra"]) if "extra" in opt else None
        # psd="shift"/"cg": the shift of the whole item set (layout.n_rows), as on one device
        mode = ssp.check_psd(psd)
        shift = ssp.spectral_shift(sigma_A, d, layout.n_rows) if mode.shifted else None
        lkw = dict(kw, shift=shift, start=opt.get("start"),
                   precond=ssp.cg_preconditioner(extra_p, reg, shift, d) if mode.warm_start
                   else None)
        lay = local_layout(buckets, layout)
        outs = lay.map_chunks(lambda c: ssp.private_item_solve_chunk(
            c, X, opt.get("weights"), opt.get("labels"), key, sigma_A, sigma_b, reg, extra_p,
            **lkw))
        k = empty.shape[0]
        th_e = ssp.private_rows_solve(jnp.zeros((k, d, d), jnp.float32),
                                      jnp.zeros((k, d), jnp.float32), empty.astype(jnp.uint32),
                                      key, sigma_A, sigma_b, reg, extra_p, **lkw)
        outs = [jax.lax.all_gather(o, axis, axis=1, tiled=True) for o in outs]
        return outs, jax.lax.all_gather(th_e, axis, tiled=True)

    specs_in = (list(bucket_specs(layout, axis)), P(axis), P(), P(), P(), P(), P(),
                {k: P() for k in opt})
    outs, th_e = jax.shard_map(local, mesh=mesh, in_specs=specs_in, check_vma=False,
                               out_specs=([P()] * len(layout.buckets), P()))(
        list(layout.buckets), sl.empty, X, key, sigma_A, sigma_b, reg, opt)
    theta = layout.assemble(outs)
    if noisy:  # unrated items: θ = (Π(E_i) + extra + λI)⁻¹ e_i; pad entries (= n_rows) dropped
        theta = theta.at[sl.empty].set(th_e, mode="drop")
    return theta


# -- the user step ---------------------------------------------------------------------------
def sharded_solve_users(mesh: Mesh, layout_by_user: ShardedLayout, V, labels=None,
                        reg: float = 1.0, alpha0: float = 0.0, clip_norm: float | None = None,
                        weights=None, U0=None, cg_steps: int = ssp.DEFAULT_CG_STEPS
                        ) -> jax.Array:
    """:func:`dpmt.solvers.user_step.solve_users` with users split across the devices of
    ``mesh``. Same arguments (``layout_by_user`` from :func:`shard_layout` of a user layout);
    returns U float32 (n_users, d), replicated on every device of the mesh."""
    _check(layout_by_user, mesh, "users", "sharded_solve_users")
    for name, val in (("reg", reg), ("alpha0", alpha0)):
        check_range(name, val, low=0)
    if reg <= 0 and alpha0 <= 0:
        raise ConfigError("sharded_solve_users needs reg > 0 or alpha0 > 0")
    if clip_norm is not None:
        check_range("clip_norm", clip_norm, low=0, low_open=True)
    V = replicate(_f32(V), mesh)
    U0 = check_start(U0, (layout_by_user.layout.n_rows, V.shape[-1]), "U0", "user")
    return _sharded_users(mesh, layout_by_user, V,
                          replicate(_f32(labels), mesh), replicate(_f32(weights), mesh),
                          replicate(np.float32(reg), mesh), replicate(np.float32(alpha0), mesh),
                          None if clip_norm is None else replicate(np.float32(clip_norm), mesh),
                          replicate(_f32(U0), mesh), cg_steps=check_cg_steps(cg_steps))


@jax.jit(static_argnames=("mesh", "cg_steps"))
def _sharded_users(mesh, sl, V, labels, weights, reg, alpha0, clip_norm, U0, *, cg_steps):
    count_trace("sharded_solve_users" if U0 is None else "sharded_solve_users_cg")
    axis = axis_name(mesh)
    layout = sl.layout
    d = V.shape[-1]

    opt = {k: v for k, v in (("labels", labels), ("weights", weights), ("U0", U0))
           if v is not None}

    def local(buckets, V, reg, alpha0, opt):
        base = system_base(V, reg, alpha0)
        precond = shared_preconditioner(base) if "U0" in opt else None

        def block_solve(c):
            return solve_block(V, c, opt.get("labels"), opt.get("weights"), base,
                               opt.get("U0"), cg_steps, precond)

        lay = local_layout(buckets, layout)
        outs = lay.map_chunks(lambda c: map_row_blocks(
            block_solve, c, dim=d, block_bytes=user_block_bytes("U0" in opt)))
        return [jax.lax.all_gather(o, axis, axis=1, tiled=True) for o in outs]

    specs_in = (list(bucket_specs(layout, axis)), P(), P(), P(), {k: P() for k in opt})
    outs = jax.shard_map(local, mesh=mesh, in_specs=specs_in, check_vma=False,
                         out_specs=[P()] * len(layout.buckets))(
        list(layout.buckets), V, reg, alpha0, opt)
    U = layout.assemble(outs)
    if clip_norm is not None:
        U = clip_rows(U, clip_norm)
    return U
