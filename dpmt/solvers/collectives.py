"""Sums over the processes of a ``jax.distributed`` run whose processes hold different users.

With sharded data (``ExecutionConfig(sharded_data=True)``, :mod:`dpmt.data.shards`) each
process holds all the ratings of its own users and none of the others'. Every release of
alternating minimisation is a sum over users of a per-user bounded term (the capped counts,
the Gramian Σ_j u_j u_jᵀ, the SSP statistics Σ_j w_ij u_j u_jᵀ and Σ_j w_ij y_ij u_j, noisy
GD's clipped gradient sum), so it is the sum over processes of the processes' partial sums:

    S = Σ_p S_p,      S_p = Σ_{j ∈ users of p} s_j,

and the release is S + Z with one noise draw Z from the run's shared secret
(:func:`dpmt.privacy.randomness.shared_across_processes`), the same on every process. The
sensitivity is that of S whatever the split of users: a user lives in exactly one process,
so adding or removing them changes one S_p by s_j.

:func:`process_sum` all-gathers the P partial sums and adds them in process order on every
process, so every process computes bit-identical S (and then the same noise, the same V):
an all-reduce is not guaranteed to round identically on every rank. The exchange is among
the trainer's own processes: nothing leaves the trainer before the noise.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils

from dpmt.errors import DataError

_INT32_MAX = np.iinfo(np.int32).max


def process_count() -> int:
    """The number of processes of this run (1 without ``jax.distributed``)."""
    return jax.process_count()


def process_sum(x):
    """``Σ_p x_p`` over the processes, identical on every process (see the module).

    ``x``: a numpy or JAX array (float or integer) of the same shape and dtype on every
    process. Floats are summed in float32 (as the steps compute them), integers in int64
    (exchanged as int32: a partial count above 2³¹ − 1 is refused). Returns a numpy array of
    ``x``'s dtype (float32 for floats). One process: ``x`` itself, nothing communicated.
    """
    if process_count() == 1:
        return x
    a = np.asarray(x)
    if np.issubdtype(a.dtype, np.integer):
        if a.size and (int(a.max()) > _INT32_MAX or int(a.min()) < -_INT32_MAX):
            raise DataError("a per-process count exceeds 2**31 - 1: use more processes")
        parts = np.asarray(multihost_utils.process_allgather(a.astype(np.int32)), np.int64)
        return parts.sum(axis=0).astype(a.dtype)
    parts = np.asarray(multihost_utils.process_allgather(a.astype(np.float32)), np.float32)
    out = parts[0].copy()
    for p in parts[1:]:          # process order: the same float32 rounding on every process
        out += p
    return out
