"""Warm-started conjugate gradients on batches of small symmetric positive-definite systems.

For every system ``k`` of a batch, ``M_k θ_k = r_k`` with ``M_k`` (d, d) formed explicitly
(the weighted Gram matrix a step has already built) or applied matrix-free from the gathered
rows (:func:`gram_matvec`), ``steps`` iterations of preconditioned
conjugate gradients (Hestenes & Stiefel 1952; the preconditioned form of Golub & Van Loan,
"Matrix Computations", Algorithm 11.5.1) from a starting point ``x0``:

    r = b − M x0,  z = P⁻¹ r,  p = z,        P = the part shared by all systems, or diag(M)
    repeat: α = rᵀz / pᵀMp,  x += α p,  r −= α M p,  z' = P⁻¹ r,  p = z' + (r'ᵀz' / rᵀz) p

Each step is one batched matrix-vector product, ``2d²`` FLOPs per system, against
``d³/3 + 2d²`` for a Cholesky factorisation and its two triangular solves. Why it exists: on
CPU, jaxlib factorises a batch one matrix at a time (LAPACK ``potrf`` on one thread), which
at d = 64-128 runs at 3-7 GFLOP/s, while the batched product streams every matrix of a
cache-sized block once per step (``experiments/cg_solve.py`` measures both). A warm start
from the previous alternating-minimisation iterate (as the ``implicit`` library's
``use_cg`` solver does, with 3 steps) leaves little to correct, so a few steps suffice.

Exactness: CG is exact after ``d`` steps in exact arithmetic; after ``k`` steps the error in
the ``M``-norm has shrunk by at least ``2((√κ − 1)/(√κ + 1))^k`` (κ the condition number of
``P^{-1/2} M P^{-1/2}``). Callers that need a bound check it: :func:`cg_solve` returns the
final residual ``‖b − Mθ‖`` (recomputed, not the recurrence's) and whether every step saw
positive curvature ``pᵀMp > 0`` — a system that is not positive definite along the Krylov
directions fails that flag.

Used by the SSP item step (``item_solve="cg"``, post-processing of the released statistics:
no privacy cost; matrix-free when there is no noise, the non-private ALS) and the user step
(``user_solve="cg"``, matrix-free; never released).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.errors import ConfigError

_HI = jax.lax.Precision.HIGHEST

#: CG steps per solve by default. implicit's ``use_cg`` takes 3 from a warm start. Measured by
#: ``experiments/cg_solve.py`` on the ML-20M-like data (ε = 5 plan, third iteration, shared
#: preconditioner): 4 steps leave a relative difference to the Cholesky solve of 1.4% in the
#: item step (20M, d = 128), 8 steps 1.3e-4 and 16 steps 1.7e-6; the user step is at 2e-7
#: (float32) from 8. 8 costs 3% more item-step time than 4 there.
DEFAULT_CG_STEPS = 8


class CGResult(NamedTuple):
    """The output of :func:`cg_solve` for a batch of ``n`` systems."""

    x: jax.Array          # float32 (n, d): the approximate solutions
    residual: jax.Array   # float32 (n,): ‖b − M x‖, recomputed from x
    positive: jax.Array   # bool (n,): every step had pᵀMp > 0 (and all values finite)


def _matvec(M, p):
    return jnp.einsum("nde,ne->nd", M, p, precision=_HI)


def gram_matvec(X: jax.Array, w: jax.Array, shared: jax.Array | None = None):
    """The operator ``p ↦ M p`` of ``M_k = Σ_l w_kl x_kl x_klᵀ + S`` without forming the
    Gram part: ``Xᵀ(w ⊙ (X p))``, two batched matrix-vector products over the ``L``
    gathered rows, ``4·L·d`` FLOPs per system and step against ``2·L·d²`` to form
    ``Σ w x xᵀ`` once (the matrix-free products of the ``implicit`` library's CG solver).

    Args:
      X: float32 (n, L, d) the gathered rows ``x_kl`` (anything in pad slots).
      w: float32 (n, L) their weights, zero in pad slots (any sign).
      shared: optional float32 (d, d) symmetric part ``S`` every system shares (ridge,
        gravity, shift), applied as one GEMM ``p S`` over the batch.

    Returns a function ``(n, d) → (n, d)`` for :func:`cg_solve`.
    """
    def matvec(p):
        out = jnp.einsum("nld,nl->nd", X, w * jnp.einsum("nld,nd->nl", X, p, precision=_HI),
                         precision=_HI)
        return out if shared is None else out + jnp.matmul(p, shared, precision=_HI)

    return matvec


def _dot(a, b):
    return jnp.sum(a * b, axis=-1, keepdims=True)


def shared_preconditioner(P: jax.Array) -> jax.Array:
    """``P⁻¹`` (d, d) of a symmetric positive-definite part ``P`` shared by every system of a
    step (``α0Ĝ + (s + λ)I`` for the items, ``α0VᵀV + λI`` for the users), by one Cholesky
    factorisation: the preconditioner of :func:`cg_solve`."""
    d = P.shape[-1]
    fac = jax.scipy.linalg.cho_factor(0.5 * (P + P.T), lower=True)
    Pinv = jax.scipy.linalg.cho_solve(fac, jnp.eye(d, dtype=P.dtype))
    return 0.5 * (Pinv + Pinv.T)


def cg_solve(M: jax.Array, b: jax.Array, x0: jax.Array, steps: int,
             precond: jax.Array | None = None) -> CGResult:
    """``steps`` preconditioned CG iterations for ``M θ = b`` from ``θ = x0``.

    Args:
      M: float32 (n, d, d) symmetric matrices, expected positive definite; or the operator
        ``p ↦ M p`` on (n, d) (e.g. :func:`gram_matvec`), which needs ``precond``.
      b: float32 (n, d) right-hand sides.
      x0: float32 (n, d) starting points (e.g. the previous iterate; zeros for a cold start).
      steps: number of iterations (static, ≥ 1).
      precond: optional (d, d) ``P⁻¹`` applied to every system's residual (one batched
        product ``R P⁻¹`` per step, a GEMM), from :func:`shared_preconditioner` of the part
        ``P`` all systems share; None: Jacobi, ``P = diag(M_k)``. Where the shared part
        dominates (items with few ratings, whose Gram matrix is small next to the gravity
        term and the shift), ``P⁻¹M_k ≈ I`` and a few steps are nearly exact.

    Returns:
      :class:`CGResult`. A system whose ``pᵀMp`` is ≤ 0 or non-finite at some step stops
      moving there (α = 0 from then on) and reports ``positive = False``; a system whose
      residual is already 0 (e.g. an exact warm start) stays put.
    """
    if int(steps) < 1:
        raise ValueError(f"cg_solve needs steps >= 1 (got {steps})")
    if callable(M):
        if precond is None:
            raise ValueError("cg_solve with a matrix-free operator needs precond "
                             "(Jacobi reads the diagonal of a formed M)")
        matvec = M
    else:
        def matvec(p):
            return _matvec(M, p)
    if precond is None:
        diag = jnp.diagonal(M, axis1=-2, axis2=-1)
        inv_diag = jnp.where(diag > 0, 1.0 / jnp.where(diag > 0, diag, 1.0), 1.0)

        def apply(r):
            return inv_diag * r
    else:
        def apply(r):
            return jnp.matmul(r, precond, precision=_HI)
    r = b - matvec(x0)
    z = apply(r)
    rz = _dot(r, z)
    ok = jnp.ones(rz.shape, bool)

    def body(_, carry):
        x, r, p, rz, ok = carry
        Mp = matvec(p)
        pMp = _dot(p, Mp)
        good = jnp.isfinite(pMp) & (pMp > 0)
        # a zero direction (converged system) is neither a failure nor a move
        still = rz > 0
        ok = ok & (good | ~still)
        alpha = jnp.where(good & still & ok, rz / jnp.where(good, pMp, 1.0), 0.0)
        x = x + alpha * p
        r = r - alpha * Mp
        z = apply(r)
        rz_new = _dot(r, z)
        beta = jnp.where(rz > 0, rz_new / jnp.where(rz > 0, rz, 1.0), 0.0)
        return x, r, z + beta * p, rz_new, ok

    x, _, _, _, ok = jax.lax.fori_loop(0, int(steps), body, (x0, r, z, rz, ok))
    res = jnp.linalg.norm(b - matvec(x), axis=-1)
    positive = ok[..., 0] & jnp.all(jnp.isfinite(x), axis=-1) & jnp.isfinite(res)
    return CGResult(x, res, positive)


def check_cg_steps(cg_steps) -> int:
    """``cg_steps`` as an int ≥ 1, or a ConfigError that says so."""
    if not isinstance(cg_steps, (int, np.integer)) or isinstance(cg_steps, bool) \
            or cg_steps < 1:
        raise ConfigError(f"cg_steps must be an integer >= 1 (got {cg_steps!r})")
    return int(cg_steps)


def check_start(x0, shape, what: str = "x0", rows: str = "item",
                zeros: bool = False) -> jax.Array | None:
    """CG starting points ``x0`` as float32 of ``shape`` (one row per ``rows``); None stays
    None, or becomes zeros (a cold start) with ``zeros=True``. A ConfigError naming ``what``
    if the shape is wrong."""
    if x0 is None:
        return jnp.zeros(shape, jnp.float32) if zeros else None
    x0 = jnp.asarray(x0, jnp.float32)
    if x0.shape != tuple(shape):
        raise ConfigError(f"{what} must have shape {tuple(shape)} (one row per {rows}); "
                          f"got {x0.shape}")
    return x0
