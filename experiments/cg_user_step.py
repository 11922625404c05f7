"""Is a conjugate-gradient user step faster than the exact one on this machine? (issue 11)

The user step is never released, so an iterative solver would be free to use. This script
builds the ML-20M-like synthetic data at ``N`` interactions, a ``V`` after two non-private ALS
sweeps, and compares :func:`dpmt.solvers.user_step.solve_users` (batched Gram + Cholesky) with
``k`` steps of Jacobi-preconditioned CG from ``u = 0`` (matrix-free, on the same cache-sized
row blocks), reporting time and the per-user relative error against the exact solve.

    python experiments/cg_user_step.py [N=2000000] [d=64]

Measured on 2026-12-01 (2 cores, quiet), N = 2M, d = 64, two runs: exact 0.46-0.47 s; CG 4
steps 0.40-0.51 s with a median relative error of 31%; CG 8 steps 0.46-0.56 s (10%); CG 16
steps 0.58-0.70 s (1%). The
matrix-vector products are memory-bound on CPU while the Gram product runs as a GEMM, so CG
needs more time than the exact solve before it is accurate, and dpmt keeps the exact one. (A
warm start from the previous iteration's U, as implicit does, would need U in the training
state and in the checkpoint, which must not hold the users' private embeddings.)
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.data import make_synthetic_like
from dpmt.solvers.layout import (Chunk, gather_slots, map_row_blocks, task_layout,
                                 user_layout)
from dpmt.solvers.ssp import weighted_statistics
from dpmt.solvers.user_step import solve_users, system_base

_HI = jax.lax.Precision.HIGHEST


def solve_block_cg(V: jax.Array, c: Chunk, labels, weights, base: jax.Array,
                   steps: int) -> jax.Array:
    """The user solve of one block of user rows by ``steps`` iterations of Jacobi-
    preconditioned conjugate gradients from ``u = 0``, matrix-free: (rows, d).

    Solves ``(YᵀY + base) u = Yᵀ(√c ⊙ y)`` with ``Y = √c ⊙ V[items]`` (L × d per user) without
    forming the d × d Gram matrix: each step costs ``4·L·d + 2·d²`` FLOPs per user (``Y p``,
    ``Yᵀ(Y p)``, ``base p``) against ``2·L·d² + d³/3`` for the exact solve
    (:func:`solve_block`), and the gathered block is read from cache. The preconditioner is
    ``diag(YᵀY + base) = Σ_l Y_l² + diag(base)``. The user step is never released, so the
    approximation changes the model (measured in QUALITY.md) but not the privacy: the clip
    ``‖u‖ ≤ C`` after it bounds the item step's sensitivity either way. In exact arithmetic
    CG is exact after ``d`` steps; a fixed step count keeps one compiled kernel (Hestenes &
    Stiefel 1952; implicit's ``use_cg`` solver does the same with 3 warm-started steps).
    Weights must be nonnegative (training weights always are).
    """
    hi = _HI
    y = gather_slots(labels, c)                            # (n, L)
    w = gather_slots(weights, c)
    s = jnp.sqrt(jnp.maximum(w, 0.0))
    Y = V[c.cols] * s[..., None]                           # (n, L, d), zero in pad slots
    rhs = jnp.einsum("nl,nld->nd", s * y, Y, precision=hi)
    inv_diag = 1.0 / (jnp.einsum("nld,nld->nd", Y, Y, precision=hi) + jnp.diagonal(base))

    def matvec(p):
        Yp = jnp.einsum("nld,nd->nl", Y, p, precision=hi)
        return jnp.einsum("nld,nl->nd", Y, Yp, precision=hi) + jnp.matmul(p, base,
                                                                            precision=hi)

    def dot(a, b):
        return jnp.sum(a * b, axis=-1, keepdims=True)

    def body(_, carry):
        x, r, z, p, rz = carry
        Ap = matvec(p)
        pAp = dot(p, Ap)
        alpha = jnp.where(pAp > 0, rz / jnp.where(pAp > 0, pAp, 1.0), 0.0)
        x = x + alpha * p
        r = r - alpha * Ap
        z = inv_diag * r
        rz_new = dot(r, z)
        beta = jnp.where(rz > 0, rz_new / jnp.where(rz > 0, rz, 1.0), 0.0)
        return x, r, z, z + beta * p, rz_new

    x0 = jnp.zeros_like(rhs)
    z0 = inv_diag * rhs
    x, *_ = jax.lax.fori_loop(0, steps, body, (x0, rhs, z0, z0, dot(rhs, z0)))
    return x


@jax.jit(static_argnames=("steps",))
def solve_users_cg(layout, V, weights, reg, alpha0, steps):
    base = system_base(V, reg, alpha0)
    d = V.shape[-1]
    return layout.assemble(layout.map_chunks(lambda c: map_row_blocks(
        lambda b: solve_block_cg(V, b, None, weights, base, steps), c, dim=d)))


def timed(f, reps=3):
    f().block_until_ready()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f().block_until_ready()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main(n=2_000_000, d=64):
    r = make_synthetic_like("ml-20m", scale=n / 20_000_263, seed=0)
    UL, TL = user_layout(r, dim=d), task_layout(r, dim=d)
    print(f"{r.n_users} users, {r.n_items} items, {r.nnz} ratings, d = {d}")
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.uniform(0.2, 1.0, r.nnz).astype(np.float32))
    V = jnp.asarray(rng.normal(size=(r.n_items, d)).astype(np.float32) * 0.1)
    for _ in range(2):                                     # a V that looks trained
        U = solve_users(UL, V, reg=3.0, alpha0=0.1, weights=w)
        A, b = weighted_statistics(TL, U, w, None)
        V = jnp.linalg.solve(A + 3.0 * jnp.eye(d) + 0.1 * (U.T @ U), b[..., None])[..., 0]
    exact = solve_users(UL, V, reg=3.0, alpha0=0.1, weights=w)
    t_ex = timed(lambda: solve_users(UL, V, reg=3.0, alpha0=0.1, weights=w))
    print(f"exact: {t_ex:.3f} s")
    norm = jnp.maximum(jnp.linalg.norm(exact, axis=1), 1e-12)
    for k in (2, 4, 8, 16):
        cg = solve_users_cg(UL, V, w, 3.0, 0.1, k)
        t = timed(lambda: solve_users_cg(UL, V, w, 3.0, 0.1, k))
        rel = jnp.linalg.norm(cg - exact, axis=1) / norm
        print(f"CG {k:2d} steps: {t:.3f} s ({t_ex / t:.2f}x the exact speed), relative error "
              f"median {float(jnp.median(rel)):.1e}, max {float(rel.max()):.1e}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
