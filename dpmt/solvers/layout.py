"""Bucketed, padded, chunked layout of a sparse matrix by rows.

Every solver in :mod:`dpmt.solvers` computes per-row statistics of a sparse matrix — per item
(task) the weighted Gram matrix ``A_i = Σ_j w_ij u_j u_jᵀ`` of its users, per user the Gram
matrix of its items — without ever materialising per-rating outer products or a ``(nnz, d)``
array at scale. Instead the rows are grouped by length into *buckets*; each bucket is a dense
padded block ``cols (n_b, L_b)`` so that a statistic is one batched matrix product per block,
e.g. ``A = einsum('nld,nle->nde', w[..., None] * X[cols], X[cols])``.

Layout (built once in numpy, outside ``jit``):

* Rows with ``n`` entries go to the bucket of the smallest boundary ``B_k ≥ n``. The number
  of buckets K is the number the grid ``1, ⌈g⌉, ⌈g²⌉, …`` (``g = growth``, default 2: powers
  of two) fills; the K boundaries are the ones that minimise the padded slots
  (:func:`optimal_boundaries`, a dynamic programme over the row lengths that occur), so there
  are no more kernel instances to compile than with the grid and never more padding
  (``boundaries="geometric"`` keeps the grid itself). A bucket's width ``L_b`` is the
  *largest row length actually in it* (≤ ``B_k``).
* Fewer buckets where the data are small: every bucket is one more compiled instance of
  every kernel that reads the layout, while a padded slot's work grows as d². So the
  boundaries minimise *padded slots + K · c* with ``c = BUCKET_COST_D2 / max(d, 16)²``
  slots per bucket (2²⁷/d²: 512k at d ≤ 16, 131k at d = 32, 32k at d = 64, 8k at d = 128;
  below d = 16 a slot costs its gather, not d²); ``bucket_cost=0`` keeps the grid's count.
  On ML-100K at d = 32 the item and user layouts fall from 11 and 6 buckets to 2 and 2; on
  2.4M ratings (50k × 5k) at d = 64 and on the ML-20M-like data at d = 64 they are the
  grid's. (2²⁸ merged 2 of the 2.4M data's 13 user buckets, and its default private
  iteration ran 15-25% slower, in two runs of both orders; its short-row buckets also split
  into 2 chunks each, the likely cause, not isolated.) Measured
  (``experiments/bucket_cost.py``, one default private fit with its compilation, one
  process): ``experiments/bucket_cost.json``, BENCHMARKS.md.
* Each bucket is split into ``n_chunks`` equal chunks of ``chunk_rows`` rows, such that a
  chunk's working set — the gathered ``(chunk_rows, L_b, dim)`` block (twice: the block and
  its weighted copy) plus a ``(chunk_rows, dim, dim)`` output — stays under
  ``max_chunk_bytes`` (float32). The last chunk is padded with empty rows (all slots invalid,
  ``rows = 0``). Kernels run ``jax.lax.map`` over the chunks of a bucket, so only one chunk's
  block is live at a time. (A single row longer than the bound still forms a one-row chunk;
  for real data — ML-20M's most popular item has ~67k ratings, 17 MiB at d = 64 — this does
  not arise.)
* Arrays per bucket: ``rows (n_chunks, chunk_rows) int32`` (row index), ``cols (n_chunks,
  chunk_rows, L) int32`` (column index: the user for a task layout, the item for a user
  layout), ``pos (n_chunks, chunk_rows, L) int32`` (position of the rating in the parent
  per-rating arrays, so per-rating weights/labels are gathered as ``arr[pos]``), ``valid``
  (same shape, bool). Pad slots have ``cols = pos = 0`` and ``valid = False``; every kernel
  masks them with ``jnp.where(valid, …, 0)``, so the pad values are never used.
* ``inverse (n_rows,) int32``: position of each row in the concatenation of all buckets'
  flattened chunk rows, or the index of an appended zero row for empty rows. Per-row outputs
  are assembled with one gather (:meth:`Layout.assemble`).
* Segments (``segment_width=W``, the SSP item layout: :data:`SEGMENT_WIDTH`): rows longer
  than ``W`` are cut into segments of ``W`` consecutive entries, all in one more bucket of
  width ``W`` (:class:`Segments`), and the other rows get one bucket fewer than the grid fills;
  the layout keeps the segments only if they save :data:`SEGMENT_MIN_SAVING` of the slots.
  A long row then pads less than ``W`` slots, where one wide bucket pads every row up to its
  longest (the head items of a Zipf-like popularity spread over widths 10⁴–10⁵). A long row's
  statistics are the sum of its segments' (:meth:`Layout.segment_sums`), so only kernels of
  additive row statistics read them; the others refuse a segmented layout.

Shapes are fixed by the data, so each jitted kernel taking a layout compiles once per layout
and is reused across iterations. :func:`trace_count` counts traces of the kernels in this
package (a Python side effect inside the traced functions) so tests can check that a second
iteration does not recompile.

Padding overhead (padded slots / nnz, chunk padding included), measured on ML-100K-like
synthetic data (943 users, 1682 items, 99.7k ratings; item popularity Zipf with exponent 1,
user activity log-normal; ``tests/test_layout.py::zipf_ratings``), and on the ML-20M-like
synthetic (138,493 users, 26,744 items, 20M ratings):

    growth  boundaries   ML-100K-like items / users    ML-20M-like items / users
    2.0     geometric    1.41 (8) / 1.40 (9)            1.45 (11) / 1.44 (14)
    2.0     optimal      1.28 (8) / 1.22 (9)            1.40 (11) / 1.21 (14)    <- c = 0
    2.0     optimal + segments of 512: 1.28 (8: segments would pad more) / –
                                                        1.11 (10 + 1) / –        <- SSP items
    1.5     geometric    1.21 (14) / 1.22 (16)          1.24 (19) / 1.23 (23)
    1.5     optimal      1.14 (14) / 1.11 (16)          1.22 (19) / 1.11 (23)

(buckets in brackets; ``bucket_cost=0``). Padding costs FLOPs in the batched products only;
every bucket is one more kernel instance to compile (≈ 0.1 s for the statistics, ≈ 1 s for the
user step's batched Cholesky solves on CPU), which is why the default keeps at most the
power-of-two grid's bucket count, and fewer where a bucket saves less than it costs.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.errors import ConfigError, DataError, check_range
from dpmt.solvers.boundaries import (BUCKET_COST_D2, BUCKET_COST_MIN_DIM,  # noqa: F401
                                     _boundaries, _grid_or_optimal, _slots, default_bucket_cost,
                                     optimal_boundaries)

DEFAULT_MAX_CHUNK_BYTES = 256 * 2**20
#: Segment width of the SSP item layout (``build_layout(segment_width=...)``): rows with more
#: entries are cut into segments of this many slots. At the ML-20M-like scale the padding
#: falls from 1.40 to about 1.1 with as many kernel instances (BENCHMARKS.md).
SEGMENT_WIDTH = 512
#: Segments are kept only if they save at least this fraction of the plain layout's slots:
#: the segment sums and the scatter of the long rows cost time the saved slots must pay for.
#: Measured (``experiments/segments_bench.py``, private item step, one quiet process): at
#: 1M interactions segments save 5.6% of the slots and ran 0.96x (d = 64) / 1.06x (d = 128)
#: as fast as plain buckets, a wash; at 20M they save 20% and ran 1.21x as fast (d = 64).
SEGMENT_MIN_SAVING = 0.10


# -- trace counting (compile-once checks) ------------------------------------------------------
_TRACES: collections.Counter = collections.Counter()


def count_trace(name: str) -> None:
    """Record one trace of kernel ``name``; call it inside a jitted function body.

    Runs only while JAX traces the function (a Python side effect), so the count is the
    number of compilations of that kernel (one per distinct input shape/static signature).
    """
    _TRACES[name] += 1


def trace_count(name: str | None = None) -> int | dict[str, int]:
    """Number of traces of kernel ``name`` so far (or a dict of all counts)."""
    if name is None:
        return dict(_TRACES)
    return _TRACES[name]


# -- row blocks inside a chunk --------------------------------------------------------------------
#: Target size of one gathered ``(rows, L, d)`` float32 block in the kernels' inner loop: small
#: enough to stay in L2/L3 between the gather and the batched product that reads it (a whole
#: 256 MiB chunk goes to DRAM and back; measured 2-4x slower at d = 64, BENCHMARKS.md).
GEMM_BLOCK_BYTES = 2 * 2**20

#: The same for the matrix-free conjugate-gradient solves (user step, noiseless item step),
#: which read their gathered block twice per CG step: smaller than the Gram path's (measured
#: on a standalone user block without the gravity term: 1 MiB ran 8 steps at 2M interactions,
#: d = 64, in 0.23 s, 2 MiB in 0.33 s and 4 MiB in 0.45 s).
CG_BLOCK_BYTES = 1 * 2**20


def block_rows(width: int, dim: int, block_bytes: int = GEMM_BLOCK_BYTES,
               max_rows: int | None = None) -> int:
    """Rows per inner block so that a gathered ``(rows, width, dim)`` float32 block is about
    ``block_bytes`` (at least 1, at most ``max_rows``)."""
    k = max(1, int(block_bytes) // max(1, 4 * int(width) * int(dim)))
    return k if max_rows is None else max(1, min(k, int(max_rows)))


def map_batches(fn: Callable[..., Any], xs: tuple, batch_size: int) -> Any:
    """``fn(*xs)`` computed over leading-axis batches of ``batch_size`` rows, sequentially
    (``lax.map``), ``fn`` seeing an explicit batch axis — so a ``lax.cond`` inside decides per
    batch and runs only the branch taken. ``xs``: arrays with equal leading size ``n``; the last
    batch is zero-padded (a zero row is a pad row of a :class:`Chunk`: ``valid = False``) and
    outputs (pytrees with leading axis = rows) are cut back to ``n`` rows."""
    n = xs[0].shape[0]
    if n <= batch_size:
        return fn(*xs)
    nb = -(-n // batch_size)
    pad = nb * batch_size - n

    def split(x):
        x = jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x
        return x.reshape((nb, batch_size) + x.shape[1:])

    out = jax.lax.map(lambda a: fn(*a), tuple(split(x) for x in xs))
    return jax.tree_util.tree_map(lambda y: y.reshape((nb * batch_size,) + y.shape[2:])[:n],
                                  out)


def map_row_blocks(fn: Callable[..., Any], chunk: "Chunk", *extras, dim: int,
                   block_bytes: int = GEMM_BLOCK_BYTES, max_rows: int | None = None) -> Any:
    """``fn(sub_chunk, *sub_extras)`` over blocks of :func:`block_rows` rows of one chunk (see
    :func:`map_batches`); ``extras`` are arrays with the chunk's leading row axis."""
    k = block_rows(chunk.cols.shape[-1], dim, block_bytes, max_rows)
    m = len(chunk)
    return map_batches(lambda *a: fn(Chunk(*a[:m]), *a[m:]), tuple(chunk) + tuple(extras), k)


# -- the layout ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Bucket:
    """One bucket of rows of (nearly) equal length, split into equal chunks.

    Attributes (jax arrays):
      rows:  int32 (n_chunks, chunk_rows) row index (0 in pad rows).
      cols:  int32 (n_chunks, chunk_rows, L) column index of each slot (0 in pad slots).
      pos:   int32 (n_chunks, chunk_rows, L) position of the rating in the parent per-rating
             arrays (0 in pad slots).
      valid: bool  (n_chunks, chunk_rows, L) True for real ratings.
    """

    rows: Any
    cols: Any
    pos: Any
    valid: Any

    @property
    def n_chunks(self) -> int:
        return self.cols.shape[0]

    @property
    def chunk_rows(self) -> int:
        return self.cols.shape[1]

    @property
    def width(self) -> int:
        return self.cols.shape[2]

    def chunks(self):
        """The bucket's arrays as one pytree, leading axis = chunk (for ``lax.map``)."""
        return Chunk(self.rows, self.cols, self.pos, self.valid)


class Chunk(NamedTuple):
    """``rows (n,)``, ``cols (n, L)``, ``pos (n, L)``, ``valid (n, L)`` of one chunk (or a stack
    of chunks with a leading chunk axis)."""

    rows: Any
    cols: Any
    pos: Any
    valid: Any


jax.tree_util.register_dataclass(Bucket, data_fields=["rows", "cols", "pos", "valid"],
                                 meta_fields=[])


@dataclasses.dataclass(frozen=True, eq=False)
class Segments:
    """The rows longer than a segment width ``W``, cut into segments of ``W`` slots.

    A long row's statistic is the sum of its segments' statistics, so its padding is less
    than ``W`` slots however long it is (one bucket of width ``L`` pads every row up to ``L``).
    Only additive per-row statistics can be computed this way; a kernel that does more per
    row (a solve) sums the segments first (:meth:`Layout.segment_sums`).

    Attributes (jax arrays):
      bucket: a :class:`Bucket` of width ``W`` whose chunk rows are segments; ``bucket.rows``
              is the segment's row (0 in pad rows, whose slots are all invalid).
      local:  int32 (n_chunks, chunk_rows) index of the segment's row in ``rows``
              (``len(rows)`` in pad rows: a dump slot that is dropped).
      rows:   int32 (n_long,) the long rows, ascending.
    """

    bucket: Any
    local: Any
    rows: Any

    @property
    def width(self) -> int:
        return self.bucket.width


jax.tree_util.register_dataclass(Segments, data_fields=["bucket", "local", "rows"],
                                 meta_fields=[])


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """A sparse ``n_rows × n_cols`` matrix as padded buckets of rows (a jax pytree).

    Build with :func:`task_layout` (rows = items, cols = users), :func:`user_layout`
    (rows = users, cols = items) or :func:`build_layout`. Pass it as an *argument* to jitted
    functions (its arrays are leaves; ``n_rows``, ``n_cols``, ``nnz``, ``kind`` are static).

    Attributes:
      buckets: tuple of :class:`Bucket`, increasing width.
      inverse: int32 (n_rows,) index of each row in the concatenated flattened chunk rows
               (``total_rows`` — an appended zero row — for rows without entries).
      n_rows, n_cols, nnz: sizes of the parent matrix.
      kind: "items" (task layout), "users" (user layout) or "" (generic).
      dim: the feature dimension the chunks were sized for.
      segments: :class:`Segments` of the rows longer than ``segment_width`` (their
               ``inverse`` is the zero row, like an empty row's), or None. Only kernels of
               additive per-row statistics read them (the SSP item step); the others refuse
               a segmented layout (:func:`require_kind`).
    """

    buckets: tuple
    inverse: Any
    n_rows: int
    n_cols: int
    nnz: int
    kind: str = ""
    dim: int = 0
    segments: Any = None

    # -- sizes and reports -----------------------------------------------------------------------
    @property
    def padded_slots(self) -> int:
        """Number of slots in all chunks (real ratings + padding), segments included."""
        return int(sum(b.n_chunks * b.chunk_rows * b.width for b in self._all_buckets()))

    def _all_buckets(self) -> tuple:
        return self.buckets + (() if self.segments is None else (self.segments.bucket,))

    @property
    def long_rows(self) -> np.ndarray:
        """int32 indices of the segmented rows (empty without segments)."""
        if self.segments is None:
            return np.zeros(0, np.int32)
        return np.asarray(self.segments.rows, np.int32)

    @property
    def padding_overhead(self) -> float:
        """``padded_slots / nnz`` (1.0 = no padding)."""
        return self.padded_slots / max(self.nnz, 1)

    @property
    def total_rows(self) -> int:
        return int(sum(b.n_chunks * b.chunk_rows for b in self.buckets))

    def summary(self) -> list[dict]:
        """Per bucket: width, rows, chunks, chunk rows, slots (for reports); the segments'
        bucket last (``segments=True``, its ``rows`` counts segments)."""
        out = []
        for k, b in enumerate(self._all_buckets()):
            v = np.asarray(b.valid)
            out.append(dict(width=b.width, rows=int(v.any(-1).sum()), chunks=b.n_chunks,
                            chunk_rows=b.chunk_rows, slots=int(v.size), filled=int(v.sum()),
                            segments=k == len(self.buckets)))
        return out

    # -- kernels' helpers (usable inside jit) ---------------------------------------------------
    def map_chunks(self, fn: Callable[..., Any], *extras: list) -> list:
        """``[lax.map(fn, bucket chunks) for bucket]``: one output pytree per bucket.

        ``fn(chunk, *extra)`` takes a :class:`Chunk` of one chunk (``rows (n,)``,
        ``cols (n, L)``, …) plus the matching slices of ``extras`` (each a list with one
        pytree per bucket, leading axis = chunk, e.g. an earlier ``map_chunks`` result) and
        returns a pytree of arrays with leading axis ``n``; the result for a bucket has leading
        axes ``(n_chunks, n)``. Chunks run sequentially so only one chunk block is live.
        """
        outs = []
        for k, b in enumerate(self.buckets):
            xs = (b.chunks(),) + tuple(e[k] for e in extras)
            if b.n_chunks == 1:  # skip the scan machinery for the common case
                o = fn(*jax.tree_util.tree_map(lambda x: x[0], xs))
                outs.append(jax.tree_util.tree_map(lambda x: x[None], o))
            else:
                outs.append(jax.lax.map(lambda a: fn(*a), xs))
        return outs

    def assemble(self, per_bucket: list, long: Any = None) -> Any:
        """Per-row outputs ``(n_rows, ...)`` from :meth:`map_chunks` results (zeros for empty
        rows). Works on pytrees; pad rows are dropped. A segmented layout's long rows take
        ``long`` (leading axis = ``segments.rows``, e.g. :meth:`segment_sums`); without it
        they are zero."""
        def one(*leaves):
            flat = [x.reshape((-1,) + x.shape[2:]) for x in leaves]
            zero = jnp.zeros((1,) + flat[0].shape[1:], flat[0].dtype)
            return jnp.concatenate(flat + [zero], axis=0)[self.inverse]
        out = jax.tree_util.tree_map(one, *per_bucket)
        if long is not None and self.segments is not None:
            out = jax.tree_util.tree_map(lambda o, v: o.at[self.segments.rows].set(v), out, long)
        return out

    def segment_sums(self, fn: Callable[[Chunk], Any]) -> Any:
        """Per long row, the sum over its segments of ``fn(chunk)`` (a pytree of arrays with
        leading axis = the chunk's rows, zero for pad rows): leading axis ``len(segments.rows)``.
        Chunks run sequentially (``lax.scan``) into one accumulator, so only one chunk's
        block and the ``(n_long, ...)`` sums are live."""
        seg = self.segments
        n_long = seg.rows.shape[0]
        chunks = seg.bucket.chunks()
        first = jax.tree_util.tree_map(lambda x: x[0], chunks)
        shapes = jax.eval_shape(fn, first)
        acc0 = jax.tree_util.tree_map(
            lambda t: jnp.zeros((n_long + 1,) + t.shape[1:], t.dtype), shapes)

        def body(acc, xs):
            chunk, local = xs
            out = fn(chunk)
            return jax.tree_util.tree_map(lambda a, o: a.at[local].add(o), acc, out), None

        acc, _ = jax.lax.scan(body, acc0, (chunks, seg.local))
        return jax.tree_util.tree_map(lambda a: a[:n_long], acc)

    def col_sum(self, per_bucket: list) -> jax.Array:
        """Segment sum over columns: ``out[c] = Σ_slots with col c value`` from per-slot values
        ``(n_chunks, n, L)`` per bucket (pad slots must already be zero). Returns (n_cols,)."""
        out = jnp.zeros((self.n_cols,), per_bucket[0].dtype if per_bucket else jnp.float32)
        for b, v in zip(self.buckets, per_bucket):
            out = out.at[b.cols.reshape(-1)].add(v.reshape(-1))
        return out

    # -- checks ----------------------------------------------------------------------------------
    def triplets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, col, pos) numpy arrays of all valid slots (for tests and debugging)."""
        rs, cs, ps = [], [], []
        for b in self._all_buckets():
            v = np.asarray(b.valid)
            rows = np.broadcast_to(np.asarray(b.rows)[..., None], v.shape)
            rs.append(rows[v]); cs.append(np.asarray(b.cols)[v]); ps.append(np.asarray(b.pos)[v])
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int32)
        return cat(rs), cat(cs), cat(ps)


jax.tree_util.register_dataclass(Layout, data_fields=["buckets", "inverse", "segments"],
                                 meta_fields=["n_rows", "n_cols", "nnz", "kind", "dim"])


def build_layout(row: np.ndarray, col: np.ndarray, n_rows: int, n_cols: int, *,
                 dim: int = 64, max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
                 growth: float = 2.0, boundaries: str = "optimal",
                 kind: str = "", segment_width: int | None = None,
                 segment_min_saving: float | None = None,
                 bucket_cost: float | None = None) -> Layout:
    """Build the bucketed layout of the sparse matrix with entries ``(row[k], col[k])``.

    Args:
      row, col: int (nnz,) row and column index of each entry; ``pos`` in the layout refers to
        ``k``, the position in these arrays.
      n_rows, n_cols: matrix size.
      dim: feature dimension ``d`` the kernels will gather (sizes the chunks).
      max_chunk_bytes: bound on a chunk's working set (float32): ``4·(2·n·L·d + n·d²)``.
      growth: ratio between successive bucket boundaries (> 1; 2 = powers of two). Smaller
        means less padding but more buckets (one compiled kernel instance per bucket).
      boundaries: ``"optimal"`` (default): as many buckets as the ``growth`` grid fills, with
        boundaries that minimise the padded slots (:func:`optimal_boundaries`); never more
        padding than the grid. ``"geometric"``: the grid itself.
      kind: "items", "users" or "" (recorded for validation by the solvers).
      segment_width: rows with more entries than this become :class:`Segments` of this many
        slots (their padding: under one segment per row), and the other rows get one bucket
        fewer than the grid fills, so the kernel instances do not grow; kept only if they save
        :data:`SEGMENT_MIN_SAVING` of the plain layout's slots. None: no segments.
      segment_min_saving: that fraction, in [0, 1) (None: :data:`SEGMENT_MIN_SAVING`).
      bucket_cost: padded slots one more bucket must save (``"optimal"`` only): fewer
        buckets than the grid fills where the data are small. None:
        :func:`~dpmt.solvers.boundaries.default_bucket_cost`; 0: as many as the grid fills.
    """
    check_range("growth", growth, low=1.0, low_open=True)
    if segment_width is not None:
        check_range("segment_width", segment_width, low=1, integer=True)
    if segment_min_saving is None:
        segment_min_saving = SEGMENT_MIN_SAVING
    check_range("segment_min_saving", segment_min_saving, low=0.0, high=1.0, high_open=True)
    if boundaries not in ("optimal", "geometric"):
        raise ConfigError(f"boundaries must be 'optimal' or 'geometric', got {boundaries!r}")
    check_range("dim", dim, low=1, integer=True)
    check_range("max_chunk_bytes", max_chunk_bytes, low=1)
    if bucket_cost is None:
        bucket_cost = default_bucket_cost(dim)
    check_range("bucket_cost", bucket_cost, low=0.0)
    row = np.asarray(row, np.int64)
    col = np.asarray(col, np.int64)
    nnz = len(row)
    if len(col) != nnz:
        raise DataError("row and col must have the same length")
    if nnz and (row.min() < 0 or row.max() >= n_rows or col.min() < 0 or col.max() >= n_cols):
        raise DataError("row/col index out of range")
    if max(nnz, n_rows, n_cols) >= 2**31:
        raise DataError("layout indices must fit in int32")
    order = np.argsort(row, kind="stable")          # entries grouped by row, original order
    counts = np.bincount(row, minlength=n_rows)
    indptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    nonempty = np.flatnonzero(counts)
    lens = counts[nonempty]
    buckets: list[Bucket] = []
    inverse = np.empty(n_rows, np.int64)
    inverse.fill(-1)
    offset = 0
    segments = None
    if nnz:
        bounds = _grid_or_optimal(lens, growth, boundaries, bucket_cost)
        short = nonempty
        is_long = (lens > segment_width if segment_width is not None
                   else np.zeros(len(lens), bool))
        if is_long.any():
            # one kernel instance goes to the segments, the short rows get the rest; kept only
            # if they save SEGMENT_MIN_SAVING of the slots (a row just over W pads more as two
            # segments than in a bucket, and the segment sums cost time of their own)
            n_inst = len(bounds)
            s_lens = lens[~is_long]
            s_bounds = (np.zeros(0, np.int64) if not len(s_lens) else
                        optimal_boundaries(s_lens, max(1, n_inst - 1),
                                           bucket_cost=bucket_cost)
                        if boundaries == "optimal" else _boundaries(int(s_lens.max()), growth))
            W = int(segment_width)
            seg_slots = int(np.sum(-(-lens[is_long] // W))) * W
            plain = _slots(lens, bounds)
            new = _slots(s_lens, s_bounds) + seg_slots
            if new < plain and new <= (1.0 - segment_min_saving) * plain:
                segments = _make_segments(nonempty[is_long], indptr, counts, order, col, dim,
                                          max_chunk_bytes, W)
                short, bounds = nonempty[~is_long], s_bounds
        lens = counts[short]
        bid = np.searchsorted(bounds, lens, side="left")
        for k in np.unique(bid):
            r = short[bid == k]                      # ascending row ids
            bucket, total = _make_bucket(r, indptr[r], counts[r], order, col, dim,
                                         max_chunk_bytes)
            inverse[r] = offset + np.arange(len(r))
            offset += total
            buckets.append(bucket)
    if not buckets:
        # no entries: one empty chunk keeps every kernel's code path (and output shapes) valid
        z = jnp.zeros((1, 1, 1), jnp.int32)
        buckets.append(Bucket(rows=jnp.zeros((1, 1), jnp.int32), cols=z, pos=z,
                              valid=jnp.zeros((1, 1, 1), jnp.bool_)))
        offset = 1
    inverse[inverse < 0] = offset                     # empty rows -> appended zero row
    return Layout(buckets=tuple(buckets), inverse=jnp.asarray(inverse, jnp.int32),
                  n_rows=int(n_rows), n_cols=int(n_cols), nnz=int(nnz), kind=kind, dim=int(dim),
                  segments=segments)


def _make_bucket(row_ids, starts, lens, order, col, dim: int, max_chunk_bytes: int
                 ) -> tuple[Bucket, int]:
    """One bucket of the rows (or segments) ``row_ids`` whose entries are
    ``order[starts[k] : starts[k] + lens[k]]``, width ``max(lens)``, in balanced chunks under
    ``max_chunk_bytes``. Returns the bucket and its number of chunk rows (pad rows included)."""
    width = int(lens.max())
    per_row = 4 * (2 * width * dim + dim * dim + 3 * width)
    cap = max(1, int(max_chunk_bytes // per_row))
    n_b = len(row_ids)
    n_chunks = -(-n_b // cap)
    chunk_rows = -(-n_b // n_chunks)          # balanced chunks
    total = n_chunks * chunk_rows
    slot = np.arange(width)[None, :]
    valid = slot < lens[:, None]
    src = np.where(valid, starts[:, None] + slot, 0)
    pos = np.where(valid, order[src], 0)
    cols = np.where(valid, col[pos], 0)
    pad = total - n_b
    rows_p = np.concatenate([row_ids, np.zeros(pad, np.int64)])
    pad2 = lambda a: np.concatenate([a, np.zeros((pad, width), a.dtype)])
    shp = (n_chunks, chunk_rows, width)
    return Bucket(rows=jnp.asarray(rows_p.reshape(n_chunks, chunk_rows), jnp.int32),
                  cols=jnp.asarray(pad2(cols).reshape(shp), jnp.int32),
                  pos=jnp.asarray(pad2(pos).reshape(shp), jnp.int32),
                  valid=jnp.asarray(pad2(valid).reshape(shp), jnp.bool_)), total


def _make_segments(long_rows, indptr, counts, order, col, dim: int, max_chunk_bytes: int,
                   width: int) -> Segments:
    """:class:`Segments` of ``long_rows``: row ``i`` becomes ``⌈n_i / width⌉`` segments of
    ``width`` consecutive entries (the last one shorter)."""
    n_seg = -(-counts[long_rows] // width)
    seg_local = np.repeat(np.arange(len(long_rows)), n_seg)
    first = np.repeat(np.cumsum(n_seg) - n_seg, n_seg)
    k = np.arange(len(seg_local)) - first                    # segment number within its row
    seg_row = long_rows[seg_local]
    starts = indptr[seg_row] + k * width
    lens = np.minimum(width, indptr[seg_row + 1] - starts)
    bucket, total = _make_bucket(seg_row, starts, lens, order, col, dim, max_chunk_bytes)
    local = np.concatenate([seg_local, np.full(total - len(seg_local), len(long_rows))])
    return Segments(bucket=bucket,
                    local=jnp.asarray(local.reshape(bucket.rows.shape), jnp.int32),
                    rows=jnp.asarray(long_rows, jnp.int32))


def task_layout(ratings, **kwargs) -> Layout:
    """Layout with one row per item (task); columns are users. ``pos`` indexes ``ratings``'
    per-rating arrays. ``kwargs`` go to :func:`build_layout`."""
    return build_layout(ratings.item, ratings.user, ratings.n_items, ratings.n_users,
                        kind="items", **kwargs)


def user_layout(ratings, **kwargs) -> Layout:
    """Layout with one row per user; columns are items. ``pos`` indexes ``ratings``'
    per-rating arrays. ``kwargs`` go to :func:`build_layout`."""
    return build_layout(ratings.user, ratings.item, ratings.n_users, ratings.n_items,
                        kind="users", **kwargs)


def require_kind(layout: Layout, kind: str, what: str, segments_ok: bool = False) -> None:
    """Refuse a layout of the wrong kind, or a segmented one where the kernel would miss its
    long rows (only kernels of additive row statistics pass ``segments_ok``)."""
    if not isinstance(layout, Layout):
        raise ConfigError(f"{what} needs a dpmt.solvers.layout.Layout (got {type(layout)!r})")
    if not segments_ok:
        require_unsegmented(layout, what)
    if layout.kind and layout.kind != kind:
        builder = "task_layout" if kind == "items" else "user_layout"
        raise ConfigError(f"{what} needs a layout with one row per {kind[:-1]} "
                          f"(build it with {builder}); got a '{layout.kind}' layout")


def require_unsegmented(layout: Layout, what: str) -> None:
    """Refuse a segmented layout (:class:`Segments`) where ``what`` does not read segments."""
    if getattr(layout, "segments", None) is not None:
        raise ConfigError(f"{what} does not read segmented rows: build the layout without "
                          "segment_width")


def gather_slots(arr: jax.Array | None, chunk: Chunk, default: float = 1.0) -> jax.Array:
    """Per-rating array ``arr (nnz,)`` gathered into a chunk's slots ``(n, L)``, zero in pad
    slots; ``None`` means the constant ``default`` (e.g. unit weights, implicit labels)."""
    if arr is None:
        return jnp.where(chunk.valid, jnp.asarray(default, jnp.float32), 0.0)
    arr = jnp.asarray(arr)
    if arr.shape[0] == 0:  # no ratings at all: every slot is a pad slot
        return jnp.zeros(chunk.valid.shape, jnp.float32)
    return jnp.where(chunk.valid, arr[chunk.pos], 0).astype(jnp.float32)
