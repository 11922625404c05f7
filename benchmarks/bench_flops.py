"""FLOP counts of the benchmarked steps, analytic, from the layouts (``dpmt bench``).

The formulas are in each function's docstring and in BENCHMARKS.md ("FLOP formulas"); the
benchmark divides them by the measured seconds and by the matmul peak measured in the same
process.
"""

from __future__ import annotations

from dpmt.registry import ITEM_SOLVES


def eigh_flops(d: int) -> float:
    """Nominal FLOPs of one symmetric eigendecomposition with eigenvectors: 9·d³
    (Golub & Van Loan, symmetric QR with accumulated Q; LAPACK ``syevd`` does about as much)."""
    return 9.0 * d ** 3


def cholesky_flops(d: int) -> float:
    """Cholesky factorisation d³/3 plus two triangular solves 2·d² (one right-hand side)."""
    return d ** 3 / 3.0 + 2.0 * d * d


def layout_slots(layout) -> tuple[int, int]:
    """(padded slots, real entries) of a layout."""
    return int(layout.padded_slots), int(layout.nnz)


def item_step_flops(task_layout, dim: int, extra: bool = True, psd: str = "project") -> dict:
    """FLOPs of one private SSP item step on ``task_layout`` (rows = items).

    * statistics: ``2·d²`` (the Gram product ``YᵀY``) + ``2·d`` (``b``) per *padded* slot
      (``real`` counts only rated slots);
    * per item (all ``m`` items, rated or not: every item is released): with ``extra``
      and ``psd="project"`` one ``eigh`` (9d³) for ``Π(Â)``, its reconstruction
      ``Q diag Qᵀ`` (2d³), one Cholesky solve (d³/3 + 2d²) and the ``Â + E`` / ``M`` updates
      (~3d², negligible); otherwise one ``eigh`` (9d³) and two matrix-vector products (4d²).
      The Cholesky path falls back to a second ``eigh`` for a block that fails its round-off
      checks (huge noise with a tiny ridge); that extra work is not counted (conservative).
    * ``psd="shift"`` (with or without ``extra``): one Cholesky solve (d³/3 + 2d²) and the
      ``Â + E + (s+λ)I + extra`` updates (~3d²); no ``eigh``. Its checked per-item fallback
      (an ``eigh`` for a batch where some item's ``Â + sI`` is not PSD) is not counted.
    * ``psd="cg"``: counted as "shift" — the FLOPs the maths of the solve needs (one Cholesky,
      issue 11's yardstick), not the ``(k + 2)·2d²`` its ``k`` CG steps actually do, so that
      its fraction of peak compares with shift's on the same work.
    """
    d = dim
    slots, nnz = layout_slots(task_layout)
    m = task_layout.n_rows
    if ITEM_SOLVES[psd].shifted:      # shift, cg: one Cholesky's worth per item
        per_item = cholesky_flops(d) + 3.0 * d * d
    elif extra and psd == "project":
        per_item = eigh_flops(d) + 2.0 * d ** 3 + cholesky_flops(d) + 3.0 * d * d
    else:
        per_item = eigh_flops(d) + 4.0 * d * d + 2.0 * d * d
    stats = (2.0 * d * d + 2.0 * d) * slots
    return {"statistics": stats, "statistics_real": (2.0 * d * d + 2.0 * d) * nnz,
            "solve": per_item * m, "per_item_solve": per_item,
            "total": stats + per_item * m,
            "real": (2.0 * d * d + 2.0 * d) * nnz + per_item * m}


def user_step_flops(user_layout, n_items: int, dim: int) -> dict:
    """FLOPs of one user step: ``2·d² + 2·d`` per padded slot (Gram + right-hand side), one
    Cholesky solve per user (d³/3 + 2·d² for the two triangular solves... counted as
    d³/3 + 4d²), and the shared ``α0 VᵀV`` (2·m·d²) once."""
    d = dim
    slots, nnz = layout_slots(user_layout)
    n = user_layout.n_rows
    per_user = d ** 3 / 3.0 + 4.0 * d * d
    stats = (2.0 * d * d + 2.0 * d) * slots
    return {"statistics": stats, "solve": per_user * n, "gramian": 2.0 * n_items * d * d,
            "total": stats + per_user * n + 2.0 * n_items * d * d,
            "real": (2.0 * d * d + 2.0 * d) * nnz + per_user * n + 2.0 * n_items * d * d}


def gd_step_flops(task_layout, n_users: int, dim: int) -> dict:
    """FLOPs of one noisy-GD step (embedding encoder, task layout): predictions ``⟨v_i, u_j⟩``
    (2d per slot), the clipped gradient rows ``Σ_j s_j r_ij u_j`` (2d per slot), per-user norms
    (2d per user) — a gather-bound, matrix-vector-like computation (arithmetic intensity ~½
    FLOP/byte), so its fraction of matmul peak is small by nature."""
    d = dim
    slots, nnz = layout_slots(task_layout)
    total = 4.0 * d * slots + 2.0 * d * n_users
    return {"total": total, "real": 4.0 * d * nnz + 2.0 * d * n_users}


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------
