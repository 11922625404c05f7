"""The exact user step of alternating minimisation (never released: joint DP).

For each user ``j`` with items ``I_j`` (Chien et al. 2021, "Private Alternating Least
Squares", Algorithm 1, user update):

    u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV + λ I)⁻¹ Σ_{i∈I_j} y_ij v_i,
    u_j ← u_j · min(1, C / ‖u_j‖)

``V`` (the released item embeddings) is public, so the "gravity" term ``α0 VᵀV`` costs no
privacy. With implicit feedback ``y_ij = 1``. The clip to ``C`` bounds each user's contribution
to the next private item step (:func:`dpmt.solvers.ssp.ssp_sensitivities`).

Computed per bucket chunk of a user layout (rows = users), in cache-sized blocks of rows:
gather ``V[items]`` into a ``(n, L, d)`` block, one batched Gram product, batched Cholesky
factor/solve. Users without
ratings get ``u_j = 0``. The same function folds in evaluation users from their history.

With a starting point ``U0`` (the previous iteration's U, ``user_solve="cg"``) the systems are
solved instead by a few warm-started conjugate-gradient steps, matrix-free: each step applies
``Σ c v vᵀ`` as ``Xᵀ(c ⊙ X p)`` on the gathered block (:func:`~dpmt.solvers.cg.gram_matvec`,
as the ``implicit`` library's ``use_cg`` does), so neither the Gram matrices nor a ``d³``
factorisation are computed (the users whose CG fails are then solved exactly). The
user step is never released and the clip after it bounds the item step's sensitivity either
way, so this changes the model, not the privacy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

from dpmt.errors import ConfigError, check_range
from dpmt.solvers.cg import (DEFAULT_CG_STEPS, cg_solve, check_cg_steps, check_start,
                             gram_matvec, shared_preconditioner)
from dpmt.solvers.layout import (CG_BLOCK_BYTES, GEMM_BLOCK_BYTES, Chunk, Layout, count_trace,
                                 gather_slots, map_row_blocks, require_kind)
from dpmt.solvers.row_products import weighted_gram, weighted_rows

_HI = jax.lax.Precision.HIGHEST


def clip_rows(U: jax.Array, clip_norm) -> jax.Array:
    """``u ← u · min(1, C/‖u‖)`` row-wise; (n, d) → (n, d)."""
    norm = jnp.linalg.norm(U, axis=-1, keepdims=True)
    return U * (clip_norm / jnp.maximum(norm, clip_norm))


def solve_users(layout_by_user: Layout, V: jax.Array, labels: jax.Array | None = None,
                reg: float = 1.0, alpha0: float = 0.0, clip_norm: float | None = None,
                weights: jax.Array | None = None, U0: jax.Array | None = None,
                cg_steps: int = DEFAULT_CG_STEPS) -> jax.Array:
    """Exact (regularised, optionally clipped) least-squares user embeddings.

    ``u_j = (Σ_{i∈I_j} c_ij v_i v_iᵀ + α0 VᵀV + λ I)⁻¹ Σ_{i∈I_j} c_ij y_ij v_i`` then
    ``u_j ← u_j · min(1, C/‖u_j‖)`` (``c_ij = 1`` unless ``weights`` is given).

    Args:
      layout_by_user: user layout (rows = users, cols = items), from
        :func:`~dpmt.solvers.layout.user_layout` on the training ratings (or an evaluation
        user's history for fold-in).
      V: float (n_items, d) item embeddings (public / released).
      labels: float (nnz,) ``y_ij`` per rating (parent order), or None for ``y = 1``.
      reg: ``λ``; ``λ > 0`` or ``α0 > 0`` is required.
      alpha0: weight ``α0 ≥ 0`` of the gravity term ``VᵀV``.
      clip_norm: ``C``; None for no clipping.
      weights: optional per-rating confidence ``c_ij`` (nnz,); default all ones. (The user
        step is not released, so these need not satisfy the privacy weight constraint.)
      U0: optional float (n_rows, d) starting points: solve by ``cg_steps`` conjugate-gradient
        steps from them (:func:`solve_block`) instead of Cholesky. None: exact.

    Returns:
      U float32 (n_rows, d); zero rows for users without ratings.
    """
    require_kind(layout_by_user, "users", "solve_users")
    for name, val in (("reg", reg), ("alpha0", alpha0)):
        if isinstance(val, (int, float)):
            check_range(name, val, low=0)
    if isinstance(reg, (int, float)) and isinstance(alpha0, (int, float)) and reg <= 0 \
            and alpha0 <= 0:
        raise ConfigError("solve_users needs reg > 0 or alpha0 > 0 (the system is singular "
                          "for users with fewer than d ratings)")
    if clip_norm is not None:
        check_range("clip_norm", clip_norm, low=0, low_open=True)
    V = jnp.asarray(V, jnp.float32)
    U0 = check_start(U0, (layout_by_user.n_rows, V.shape[-1]), "U0", "user")
    args = (layout_by_user, V, labels, weights, jnp.float32(reg), jnp.float32(alpha0),
            None if clip_norm is None else jnp.float32(clip_norm))
    if U0 is None:
        return _solve_users(*args)
    U, failed = _solve_users_cg(*args, U0, cg_steps=check_cg_steps(cg_steps))
    # a start that is not finite, or a system CG cannot handle: those users solved exactly.
    # Outside the CG kernel (one host check), so that kernel does not carry a Cholesky
    # solve per bucket it almost never runs: it compiled 1.7x slower with it inside
    if bool(jnp.any(failed)):
        U = jnp.where(failed[:, None], _solve_users(*args), U)
    return U


def system_base(V: jax.Array, reg, alpha0) -> jax.Array:
    """The shared part of every user system, α0 VᵀV + λI (d, d); V is public."""
    d = V.shape[-1]
    return alpha0 * jnp.matmul(V.T, V, precision=_HI) + reg * jnp.eye(d, dtype=jnp.float32)


def solve_block(V: jax.Array, c: Chunk, labels, weights, base: jax.Array, U0=None,
                cg_steps: int = DEFAULT_CG_STEPS, precond=None) -> jax.Array:
    """The user solve of one block of user rows: (rows, d).

    u_j = (Σ_{i∈I_j} c_ij v_i v_iᵀ + base)⁻¹ Σ_{i∈I_j} c_ij y_ij v_i by one batched Gram
    product and a batched Cholesky factor/solve. The one kernel behind training, evaluation,
    fold-in and the sharded step (:mod:`dpmt.solvers.sharding`). With ``U0`` (the
    (n_users, d) table of starting points) the same systems get ``cg_steps`` CG steps from
    ``U0[rows]`` instead (:func:`cg_block`); a user whose CG fails (a non-finite start or
    result) gets the Cholesky solve (only blocks with such a user compute it).
    """
    if U0 is None:
        return _exact_block(V, c, labels, weights, base)
    x, failed = cg_block(V, c, labels, weights, base, U0, cg_steps, precond)
    return jax.lax.cond(jnp.any(failed),
                        lambda: jnp.where(failed[..., None],
                                          _exact_block(V, c, labels, weights, base), x),
                        lambda: x)


def _exact_block(V, c: Chunk, labels, weights, base):
    G, rhs = weighted_gram(V, c, gather_slots(weights, c), gather_slots(labels, c))
    return cho_solve(cho_factor(G + base, lower=True), rhs[..., None])[..., 0]


def cg_block(V: jax.Array, c: Chunk, labels, weights, base: jax.Array, U0: jax.Array,
             cg_steps: int = DEFAULT_CG_STEPS, precond=None) -> tuple[jax.Array, jax.Array]:
    """``cg_steps`` warm-started CG steps on one block's user systems, matrix-free: each
    step applies ``Σ c v vᵀ`` as ``Xᵀ(c ⊙ X p)`` on the gathered rows
    (:func:`~dpmt.solvers.cg.gram_matvec`; the Gram matrices are not formed), preconditioned
    by ``precond`` = ``base⁻¹`` (:func:`~dpmt.solvers.cg.shared_preconditioner`; computed
    here if None). Returns ``(x (rows, d), failed (rows,))``: ``failed`` marks the systems
    whose CG saw non-positive curvature or a non-finite value (the caller solves those
    exactly)."""
    if precond is None:
        precond = shared_preconditioner(base)
    y = gather_slots(labels, c)                            # (n, L)
    w = gather_slots(weights, c)
    # matrix-free: the block's gathered rows stay in cache through every step
    X, rhs = weighted_rows(V, c, w, y)                     # (n, L, d), Σ c y v
    res = cg_solve(gram_matvec(X, w, shared=base), rhs, U0[c.rows], cg_steps, precond)
    return res.x, ~res.positive


def user_block_bytes(cg: bool) -> int:
    """Bytes of one gathered block of the user step: the Gram path's, or the CG path's."""
    return CG_BLOCK_BYTES if cg else GEMM_BLOCK_BYTES


@jax.jit
def _solve_users(layout, V, labels, weights, reg, alpha0, clip_norm):
    """The exact user step (Cholesky per user), optionally clipped: (n_rows, d)."""
    count_trace("solve_users")
    d = V.shape[-1]
    base = system_base(V, reg, alpha0)
    U = layout.assemble(layout.map_chunks(
        lambda c: map_row_blocks(lambda b: _exact_block(V, b, labels, weights, base), c,
                                 dim=d, block_bytes=user_block_bytes(False))))
    return U if clip_norm is None else clip_rows(U, clip_norm)


@jax.jit(static_argnames=("cg_steps",))
def _solve_users_cg(layout, V, labels, weights, reg, alpha0, clip_norm, U0, *, cg_steps):
    """The CG user step from ``U0``: ``(U (n_rows, d) clipped, failed (n_rows,) bool)``;
    ``failed`` rows are to be solved exactly (empty rows: ``False``, ``u = 0``)."""
    count_trace("solve_users_cg")
    d = V.shape[-1]
    base = system_base(V, reg, alpha0)
    precond = shared_preconditioner(base)
    # blocks of rows inside each chunk: the gathered (rows, L, d) block stays in cache
    U, failed = layout.assemble(layout.map_chunks(
        lambda c: map_row_blocks(lambda b: cg_block(V, b, labels, weights, base, U0,
                                                    cg_steps, precond), c, dim=d,
                                 block_bytes=user_block_bytes(True))))
    return (U if clip_norm is None else clip_rows(U, clip_norm)), failed
