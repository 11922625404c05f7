"""The process's execution environment: thread counts of the native libraries, and the
memory mappings that compiled code holds.

Kept apart from the solvers so that importing dpmt changes nothing in the process; the
settings are applied by an explicit call (:func:`dpmt.train.fit` through
``ExecutionConfig.lapack_threads``, the benchmark application).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os

_APPLIED: dict = {}


def limit_lapack_threads(n: int | None = None) -> int | None:
    """Set the thread count of the OpenBLAS behind jaxlib's CPU LAPACK kernels; returns the
    count set (None if nothing was changed).

    jaxlib 0.9's CPU ``eigh``/``cholesky``/triangular-solve kernels call LAPACK through
    ``scipy.linalg.cython_lapack``, i.e. scipy's bundled OpenBLAS, which by default starts one
    thread per core for every call. The solvers call it on batches of small (d ≤ 256) matrices,
    one matrix at a time, from XLA's own worker threads: the OpenBLAS threads then only
    synchronise, and on a busy machine they spin against other processes. Measured on the
    2-core benchmark machine (BENCHMARKS.md): a batched float32 64×64 ``eigh`` takes 6.0 ms
    per matrix with the default and 0.5-1.0 ms with one thread; Cholesky 98 µs vs 28 µs.

    ``n`` defaults to ``$DPMT_LAPACK_THREADS`` or 1. Nothing is changed if
    ``OPENBLAS_NUM_THREADS`` is set (the user decided) or ``DPMT_LAPACK_THREADS=0``. Only
    scipy's OpenBLAS is touched (numpy's, used by ``np.matmul``, keeps its threads).
    Nothing calls it at import time: :func:`dpmt.train.fit` calls it when a run starts
    (``ExecutionConfig.lapack_threads``), and so do the applications (bench).
    """

    if n is None:
        if os.environ.get("OPENBLAS_NUM_THREADS"):
            return None
        n = int(os.environ.get("DPMT_LAPACK_THREADS", "1") or 1)
    if n <= 0:
        return None
    if n in _APPLIED:               # already set in this process (fit calls this every run)
        return _APPLIED[n]
    done = None
    for set_threads, _ in _scipy_openblas():
        set_threads(int(n))
        done = int(n)
    _APPLIED.clear()
    _APPLIED[n] = done
    return done


def _scipy_openblas() -> list[tuple]:
    """(set_num_threads, get_num_threads) of each scipy-bundled OpenBLAS loaded in this
    process (the 32-bit-integer ones that ``scipy.linalg.lapack`` calls); [] if none."""
    try:
        import scipy.linalg.cython_lapack  # noqa: F401  (loads scipy's OpenBLAS)
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "scipy_openblas" in line}
    except (ImportError, OSError):
        return []
    out = []
    for path in sorted(paths):
        if not path.endswith(".so") or "64_" in os.path.basename(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        set_fn = getattr(lib, "scipy_openblas_set_num_threads", None)
        get_fn = getattr(lib, "scipy_openblas_get_num_threads", None)
        if set_fn is not None and get_fn is not None:
            out.append((set_fn, get_fn))
    return out


@contextlib.contextmanager
def lapack_threads(n: int):
    """Within the block scipy's OpenBLAS runs ``n`` threads; the counts it had are restored
    on leaving (also on an exception).

    For one call whose thread count must not depend on what ran before in the process, e.g.
    the m × m Cholesky inverse of :func:`dpmt.baselines.ease_weights` (one thread: the
    bundled OpenBLAS's threaded ``spotrf`` segfaults at m = 26,744 on 2 cores).
    """
    n = int(n)
    libs = _scipy_openblas()
    before = [get() for _, get in libs]
    try:
        for set_threads, _ in libs:
            set_threads(n)
        yield n if libs else None
    finally:
        for (set_threads, _), k in zip(libs, before):
            set_threads(int(k))


#: share of ``vm.max_map_count`` at which :func:`release_compiled_code` clears JAX's caches
MAP_SHARE = 0.5


def memory_maps() -> tuple[int, int] | None:
    """(memory mappings of this process, the kernel's limit ``vm.max_map_count``), or None
    where ``/proc`` does not tell (not Linux)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            n = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            return n, int(f.read().strip())
    except (OSError, ValueError):
        return None


def release_compiled_code(share: float = MAP_SHARE) -> bool:
    """Clear JAX's compilation caches when this process holds more than ``share`` of the
    memory mappings the kernel allows; returns whether it did.

    Every XLA:CPU executable keeps its machine code in a few memory mappings of its own
    (about 3 each, measured: 300 small jitted functions took 426 → 1396 mappings, and
    ``jax.clear_caches()`` gave them back). A long process that compiles many shapes — the
    quality benchmark fits hundreds of models on four datasets — reaches
    ``vm.max_map_count`` (65,530 by default), and LLVM then fails with "Cannot allocate
    memory" although memory is free. Applications call this between independent runs; the
    next run compiles again what it needs.
    """
    m = memory_maps()
    if m is None or m[0] < share * m[1]:
        return False

    import jax

    jax.clear_caches()
    gc.collect()
    return True
