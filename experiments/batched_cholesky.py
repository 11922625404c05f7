"""A batched Cholesky solve vectorised across the batch: faster than LAPACK alone, slower
inside the steps, so dpmt keeps LAPACK (issue 11; tried and dropped, BENCHMARKS.md).

For each system ``M θ = r`` (``M`` d × d SPD): the Cholesky factor ``M = L Lᵀ`` (Golub & Van
Loan, "Matrix Computations", 4th ed., Algorithm 4.2.2, right-looking, in blocks of ``k``
columns), the forward solve ``L z = r`` alongside, then the back solve ``Lᵀ θ = z``:

    for each block of columns J = [j0, j0 + k):
        for j ∈ J:   L_jj = √T_jj,   L_ij = T_ij / L_jj (i > j),   z_j = r_j / L_jj,
                     r_i −= L_ij z_j,  T_iJ −= L_ij L_Jj   (only the block's own columns)
        T_II −= Σ_{j∈J} L_Ij L_Ijᵀ   (I = rows after the block: one fused rank-k update)
    θ_j = (z_j − Σ_{i>j} L_ij θ_i) / L_jj,   j = d−1, …, 0

The batch is the *minor* axis (a ``(d, d, lanes)`` array), so each scalar step is one
SIMD-wide fused XLA loop over the lanes; ``lax.map`` runs cache-sized groups of lanes.

Why it was tried: jaxlib's CPU ``cholesky`` / ``triangular_solve`` call LAPACK once per
matrix, on one thread, at 3–7 GFLOP/s for d = 64–128 here; at 2M interactions, d = 64, the
per-item and per-user Cholesky solves are most of dpmt's non-private iteration (26,744 item
systems 0.7–0.9 s, 13,849 user systems 0.4–0.5 s, timed alone).

Measured on 2026-12-01 (2 cores, a noisy VM; ``python experiments/batched_cholesky.py d``,
26,624 random SPD systems, best of 3 interleaved rounds, LAPACK ``cho_factor`` + ``cho_solve``
→ this): d = 16 0.059 → 0.021 s, d = 32 0.164 → 0.103 s, d = 64 0.71–0.86 → 0.40–0.66 s,
d = 128 2.8–4.3 → 2.5–2.9 s. Unblocked variants were slower (fully unrolled: 16 s compile at
d = 64, 78 s at d = 128; one masked column per step: 0.47 s at d = 64).

In the steps it lost. Wired into the user step and the shift item solve (a temporary switch,
one process per variant, alternating; 2M interactions, d = 64, non-private, best of 4):
user step 0.54–0.63 s (LAPACK) → 0.87–1.04 s, item step 0.93–1.00 → 1.13–1.46 s. The steps
solve per cache-sized block of rows (often 16–64 systems: too few lanes, and the ~2d loop
iterations' fixed cost per call). Solving groups of 128–2,048 users at once, statistics
first: user step 0.48–0.62 → 0.63–0.73 s, still slower. In ``dpmt bench --against implicit``
the non-private iteration went from 1.58 to 1.97 s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

#: Columns per block of the factorisation: one fused rank-``k`` trailing update per block.
#: 16 was faster than 8 (d = 64: 0.40 vs 0.49 s) with shorter compiles.
BLOCK_COLUMNS = 16
#: Bytes of one ``(d, d, lanes)`` float32 group: about the L2 cache of one core (2 MiB here).
GROUP_BYTES = 2 * 2**20
#: SIMD width in float32 lanes (AVX-512); groups are a multiple of it.
LANE_MULTIPLE = 16
#: The most lanes per group (d ≤ 32 would otherwise get thousands; 256 measured best at d=32).
MAX_LANES = 256


def group_lanes(d: int) -> int:
    """Systems per ``lax.map`` group: ``GROUP_BYTES / (4 d²)``, a multiple of
    :data:`LANE_MULTIPLE`, in ``[LANE_MULTIPLE, MAX_LANES]``."""
    k = GROUP_BYTES // (4 * d * d)
    k = (k // LANE_MULTIPLE) * LANE_MULTIPLE
    return int(min(MAX_LANES, max(LANE_MULTIPLE, k)))


def _factor_solve_lanes(T: jax.Array, r: jax.Array) -> tuple[jax.Array, jax.Array]:
    """θ ``(d, n)`` and pivots ``L_jj`` ``(d, n)`` for ``T (d, d, n)`` (SPD per lane; only its
    lower triangle is read) and ``r (d, n)``: the algorithm of the module docstring."""
    d, _, n = T.shape
    dtype = T.dtype
    L_blocks, z_blocks = [], []
    for j0 in range(0, d, BLOCK_COLUMNS):
        D = d - j0                         # rows of the trailing matrix T (D, D, n)
        k = min(BLOCK_COLUMNS, D)
        rows = jax.lax.broadcasted_iota(jnp.int32, (D, 1), 0)

        def column(j, carry, rows=rows, k=k):
            P, rr, Lb, zb = carry          # P: the block's columns of T (D, k, n)
            col = jax.lax.dynamic_index_in_dim(P, j, axis=1, keepdims=False)       # (D, n)
            piv = jnp.sqrt(jax.lax.dynamic_index_in_dim(col, j, 0, keepdims=False))
            lcol = jnp.where(rows >= j, col / piv, 0.0)       # L[:, j]; its row j is L_jj
            below = jnp.where(rows > j, lcol, 0.0)
            zj = jax.lax.dynamic_index_in_dim(rr, j, 0, keepdims=False) / piv
            rr = rr - below * zj
            P = P - below[:, None, :] * below[None, :k, :]
            Lb = jax.lax.dynamic_update_index_in_dim(Lb, lcol, j, axis=1)
            zb = jax.lax.dynamic_update_index_in_dim(zb, zj, j, axis=0)
            return P, rr, Lb, zb

        init = (T[:, :k], r, jnp.zeros((D, k, n), dtype), jnp.zeros((k, n), dtype))
        _, r, Lb, zb = jax.lax.fori_loop(0, k, column, init)
        L_blocks.append(Lb)
        z_blocks.append(zb)
        if k < D:
            R = Lb[k:]                     # (D − k, k, n)
            T = T[k:, k:] - jnp.sum(R[:, None] * R[None, :], axis=2)
        r = r[k:]
    # L (d, d, n) from its column blocks (each padded above its diagonal block)
    L = jnp.concatenate([jnp.pad(Lb, ((d - Lb.shape[0], 0), (0, 0), (0, 0)))
                         for Lb in L_blocks], axis=1)
    z = jnp.concatenate(z_blocks, axis=0)
    pivots = jnp.diagonal(L, axis1=0, axis2=1).T                                  # (d, n)
    idx = jax.lax.broadcasted_iota(jnp.int32, (d, 1), 0)

    def back(t, x):
        j = d - 1 - t
        lc = jax.lax.dynamic_index_in_dim(L, j, axis=1, keepdims=False)            # L[:, j]
        s = jnp.sum(jnp.where(idx > j, lc, 0.0) * x, axis=0)
        xj = (jax.lax.dynamic_index_in_dim(z, j, 0, keepdims=False) - s) \
            / jax.lax.dynamic_index_in_dim(pivots, j, 0, keepdims=False)
        return jax.lax.dynamic_update_index_in_dim(x, xj, j, axis=0)

    theta = jax.lax.fori_loop(0, d, back, jnp.zeros_like(z))
    return theta, pivots


def cholesky_solve(M: jax.Array, rhs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Solve ``M θ = rhs`` for a batch of SPD systems by Cholesky: ``(θ, pivots)``.

    Args:
      M: float32 ``(n, d, d)`` symmetric positive definite matrices (only the lower triangle
        is read).
      rhs: float32 ``(n, d)``.

    Returns:
      θ float32 ``(n, d)`` and the Cholesky pivots ``L_jj`` float32 ``(n, d)``
      (``M = L Lᵀ``). A matrix that is not positive definite gives NaN (or inf) in its θ and
      pivots. Pure, jit- and vmap-friendly; ``n`` may be 0.
    """
    n, d = rhs.shape
    if n == 0:
        return jnp.zeros((0, d), rhs.dtype), jnp.zeros((0, d), rhs.dtype)
    lanes = group_lanes(d)
    if n < lanes:                           # one group, rounded up to the SIMD width
        lanes = -(-n // LANE_MULTIPLE) * LANE_MULTIPLE
    groups = -(-n // lanes)
    pad = groups * lanes - n
    if pad:                                 # identity systems in the pad lanes: finite, unused
        eye = jnp.broadcast_to(jnp.eye(d, dtype=M.dtype), (pad, d, d))
        M = jnp.concatenate([M, eye])
        rhs = jnp.concatenate([rhs, jnp.zeros((pad, d), rhs.dtype)])

    def group(args):
        m, r = args                        # (lanes, d, d), (lanes, d) → batch-minor
        th, piv = _factor_solve_lanes(jnp.transpose(m, (1, 2, 0)), r.T)
        return th.T, piv.T

    if groups == 1:
        th, piv = group((M, rhs))
    else:
        th, piv = jax.lax.map(group, (M.reshape(groups, lanes, d, d),
                                      rhs.reshape(groups, lanes, d)))
        th, piv = th.reshape(-1, d), piv.reshape(-1, d)
    return th[:n], piv[:n]


def main(d: int = 64, n: int = 26_624, rounds: int = 3) -> None:
    """LAPACK ``cho_factor`` + ``cho_solve`` against :func:`cholesky_solve` on ``n`` random SPD
    systems of size ``d``, interleaved, best of ``rounds``; and their agreement."""
    import time

    import numpy as np
    from jax.scipy.linalg import cho_factor, cho_solve

    import dpmt.solvers.layout  # noqa: F401 - one OpenBLAS thread for LAPACK, as in dpmt

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d, d + 8)).astype(np.float32)
    A = jnp.asarray(np.einsum("bij,bkj->bik", X, X) / d + np.eye(d, dtype=np.float32))
    b = jnp.asarray(rng.standard_normal((n, d)).astype(np.float32))
    fns = {"lapack": jax.jit(lambda A, b: cho_solve(cho_factor(A, lower=True),
                                                    b[..., None])[..., 0]),
           "batched": jax.jit(lambda A, b: cholesky_solve(A, b)[0])}
    out = {k: f(A, b).block_until_ready() for k, f in fns.items()}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            f(A, b).block_until_ready()
            best[k] = min(best[k], time.perf_counter() - t)
    rel = jnp.linalg.norm(out["batched"] - out["lapack"], axis=1) / jnp.linalg.norm(
        out["lapack"], axis=1)
    print(f"d = {d}, {n} systems: LAPACK {best['lapack']:.3f} s, batched "
          f"{best['batched']:.3f} s, max relative difference {float(rel.max()):.1e}")


if __name__ == "__main__":
    import sys

    main(*(int(a) for a in sys.argv[1:]))
