"""Solving the released SSP item systems: keeping them well-posed (post-processing).

Every function here takes *released* statistics ``Â_i = A_i + E_i``, ``b̂_i = b_i + e_i``
(:mod:`dpmt.solvers.ssp`, Krichene et al. 2023, Algorithm 1) and public terms, so nothing
here costs privacy. The modes of ``psd=`` are the :class:`ItemSolve` entries of
:data:`dpmt.registry.ITEM_SOLVES`:

* "project" — ``(Π(Â_i) + extra + λI)⁻¹ b̂_i`` with Π the PSD projection (one ``eigh``), the
  reference protocol; "floor" — eigenvalues of ``Â_i + extra + λI`` floored at λ;
* "shift" — ``(Â_i + sI + extra + λI)⁻¹ b̂_i``, ``s`` = :func:`spectral_shift` from the known
  noise scale, by one checked Cholesky per item (:func:`shift_solve`);
* "cg" — the "shift" system by a few warm-started conjugate-gradient steps
  (:func:`cg_shift_solve`, :mod:`dpmt.solvers.cg`), checked, with "shift" as the fallback;
  without noise (non-private ALS) matrix-free, from the gathered rows
  (:func:`cg_shift_solve_rows`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp

from dpmt.errors import ConfigError, check_range
from dpmt.registry import ITEM_SOLVES
from dpmt.solvers.cg import DEFAULT_CG_STEPS, cg_solve, gram_matvec, shared_preconditioner

_HI = jax.lax.Precision.HIGHEST


@jax.jit
def project_psd(M: jax.Array) -> jax.Array:
    """Projection onto the PSD cone (Frobenius): eigendecomposition, negative eigenvalues set
    to 0. Works on (..., d, d); symmetrises its input and its output."""
    M = 0.5 * (M + jnp.swapaxes(M, -1, -2))
    lam, Q = jnp.linalg.eigh(M)
    P = jnp.matmul(Q * jnp.maximum(lam, 0.0)[..., None, :], jnp.swapaxes(Q, -1, -2),
                   precision=_HI)
    return 0.5 * (P + jnp.swapaxes(P, -1, -2))


def eig_solve(M, rhs, floor):
    """``Q diag(1/max(μ, floor)) Qᵀ rhs`` with ``M = Q diag(μ) Qᵀ`` — a solve that is finite for
    any symmetric M (floor > 0)."""
    mu, Q = jnp.linalg.eigh(M)
    z = jnp.einsum("...ji,...j->...i", Q, rhs, precision=_HI) / jnp.maximum(mu, floor)
    return jnp.einsum("...ij,...j->...i", Q, z, precision=_HI)


def cholesky_solve_flags(M, rhs, reg):
    """Batched Cholesky solve of ``M θ = rhs`` (M (n, d, d), rhs (n, d)) for systems expected
    to satisfy ``M ⪰ reg·I``, plus a bool (n,) flag per system: did it pass the checks?

    The checks use that lower bound: in exact arithmetic every pivot ``L_kk² ≥ λ_min(M) ≥ reg``
    and ``‖θ‖ ≤ ‖rhs‖ / reg``. A system passes only if its solution is finite, all its pivots
    are ``≥ reg/2`` and ``‖θ‖ ≤ (1 + 10⁻³)·‖rhs‖/reg``. A matrix that is not positive definite
    makes LAPACK's factorisation fail, which jax reports as NaN: the system fails the check.
    """
    Lf = jnp.linalg.cholesky(M)
    z = jax.lax.linalg.triangular_solve(Lf, rhs[..., None], left_side=True, lower=True)
    th = jax.lax.linalg.triangular_solve(Lf, z, left_side=True, lower=True,
                                         transpose_a=True)[..., 0]
    piv = jnp.diagonal(Lf, axis1=-2, axis2=-1)
    bound = jnp.linalg.norm(rhs, axis=-1) / reg * (1 + 1e-3) + 1e-30
    ok = (jnp.all(jnp.isfinite(th), axis=-1) & jnp.all(piv * piv >= 0.5 * reg, axis=-1)
          & (jnp.linalg.norm(th, axis=-1) <= bound))
    return th, ok


def cholesky_solve_checked(M, rhs, reg):
    """:func:`cholesky_solve_flags` with one flag for the whole batch: accepted only if every
    system passed; otherwise (float32 round-off has eaten the margin, e.g. huge noise with a
    tiny ridge) the caller falls back to the eigenvalue solve."""
    th, ok = cholesky_solve_flags(M, rhs, reg)
    return th, jnp.all(ok)


#: Probability budget of the spectral shift (``psd="shift"``): the tail ``t`` is chosen so
#: that, by a union bound over the ``m`` items of one step, the probability that the shift is
#: too small for any item is at most this (such an item takes the checked fallback anyway).
SHIFT_FAILURE_PROB = 0.01


def shift_tail(n_items: int, p_fail: float = SHIFT_FAILURE_PROB) -> float:
    """``t = 2·√(ln(m / p_fail))``: ``m·exp(−t²/4) = p_fail`` (see :func:`spectral_shift`)."""
    check_range("p_fail", p_fail, low=0, high=1, low_open=True, high_open=True)
    return 2.0 * math.sqrt(math.log(max(int(n_items), 1) / p_fail))


def spectral_shift(sigma_A, d: int, n_items: int, p_fail: float = SHIFT_FAILURE_PROB):
    """The shift ``s = σ_A·(2√d + t)`` of ``psd="shift"``, ``t =`` :func:`shift_tail`.

    Bound: ``E`` = :func:`symmetric_noise` (upper triangle i.i.d. ``N(0, σ²)``, diagonal
    included). For unit ``v``, ``vᵀEv`` is Gaussian with variance
    ``σ²(2 − Σ_k v_k⁴) ≤ 2σ²``, and ``Var(vᵀEv − wᵀEw) ≤ 4σ²‖v − w‖²``, so by
    Sudakov–Fernique (comparison with ``2σ⟨g, v⟩``) ``E λ_max(E) ≤ 2σ√d``; and ``λ_max`` is a
    ``√2σ``-Lipschitz function of the standard normal entries, so by Gaussian concentration
    ``P(λ_max(E) ≥ σ(2√d + t)) ≤ exp(−t²/4)`` — likewise ``P(λ_min(E) ≤ −σ(2√d + t))``
    (each off-diagonal entry enters ``vᵀEv`` twice, hence ``t²/4`` rather than the ``t²/2``
    of a rectangular matrix with i.i.d. Gaussian entries). Since the exact ``A_i`` is
    PSD, ``λ_min(Â_i + sI) ≥ λ_min(E_i) + s ≥ 0`` for all ``m`` items with probability
    ``≥ 1 − m·exp(−t²/4) = 1 − p_fail``. Measured (numpy, 4,000 draws): ``−λ_min(E)/σ`` has
    mean 15.2 and maximum 17.7 at d = 64 (2√d = 16), mean 21.9 and maximum 24.2 at d = 128
    (2√d = 22.6, 1,000 draws); the default ``t`` (7.7 for m = 26,744) is conservative.

    ``sigma_A`` may be a traced scalar; ``d``, ``n_items`` are static. ``n_items`` must be the
    total number of items (not a block's or a device's), so the shift — and the model — does
    not depend on the batching or the number of devices.
    """
    return sigma_A * (2.0 * math.sqrt(d) + shift_tail(n_items, p_fail))


def shifted_system(A_hat, extra_p, reg, shift):
    """``M = Â + (s + λ)I [+ extra]`` (n, d, d): the system of ``psd="shift"`` and "cg"."""
    M = A_hat + (shift + reg) * jnp.eye(A_hat.shape[-1], dtype=jnp.float32)
    return M if extra_p is None else M + extra_p


def shift_solve(A_hat, b_hat, extra_p, reg, shift):
    """``psd="shift"``: θ and a bool (n,) flag per item (True: Cholesky accepted, False: the
    item was re-solved by the fallback) for released ``Â (n, d, d)``, ``b̂ (n, d)``.

    ``M = Â + (s + λ)·I [+ extra]``, ``s`` = :func:`spectral_shift`. ``M ⪰ λI`` whenever
    ``Â + sI ⪰ 0`` (w.h.p.): one Cholesky solve, checked per item by
    :func:`cholesky_solve_flags`. An item that fails (its ``Â + sI`` is not PSD, so the
    factorisation gives NaN, or round-off broke the ``M ⪰ λI`` bounds) gets the eigenvalue
    solve of the same ``M`` with eigenvalues floored at λ, ``Q diag(1/max(μ, λ)) Qᵀ b̂``, which
    is finite for any symmetric M (and equal to the Cholesky solution when ``M ⪰ λI``). The
    fallback runs under ``lax.cond`` once per batch, only if some item of the batch failed,
    and is selected per item with ``jnp.where``: batches where all items pass never
    compute an ``eigh``.
    """
    M = shifted_system(A_hat, extra_p, reg, shift)
    th, ok = cholesky_solve_flags(M, b_hat, reg)
    th = jax.lax.cond(jnp.all(ok), lambda: th,
                      lambda: jnp.where(ok[..., None], th, eig_solve(M, b_hat, reg)))
    return th, ok


def shared_shift(extra_p, reg, shift, d: int) -> jax.Array:
    """``S = (s + λ)I [+ extra]`` (d, d): the part every item system of ``psd="cg"`` shares."""
    S = (shift + reg) * jnp.eye(d, dtype=jnp.float32)
    return S if extra_p is None else S + extra_p


def cg_preconditioner(extra_p, reg, shift, d: int):
    """``P⁻¹`` of the shared part ``P = (s + λ)I [+ extra]`` of the item systems of
    ``psd="cg"`` (:func:`shared_shift`, :func:`~dpmt.solvers.cg.shared_preconditioner`),
    computed once per step."""
    return shared_preconditioner(shared_shift(extra_p, reg, shift, d))


def checked_cg(M, b_hat, reg, x0, cg_steps, precond, fallback):
    """``cg_steps`` CG steps on ``M θ = b̂`` from ``x0`` (``M`` formed, or its operator),
    checked per item: every step saw positive curvature, θ is finite and
    ``‖θ‖ ≤ (‖b̂‖ + ‖b̂ − Mθ‖)/λ`` (true for any θ when ``M ⪰ λI``, as
    ``‖θ − M⁻¹b̂‖ ≤ ‖b̂ − Mθ‖/λ``). If an item of the batch fails, the batch's failing items
    take ``fallback()`` (computed under ``lax.cond``, only then)."""
    res = cg_solve(M, b_hat, x0, cg_steps, precond)
    bound = (jnp.linalg.norm(b_hat, axis=-1) + res.residual) / reg * (1 + 1e-3) + 1e-30
    ok = res.positive & (jnp.linalg.norm(res.x, axis=-1) <= bound)
    return jax.lax.cond(jnp.all(ok), lambda: res.x,
                        lambda: jnp.where(ok[..., None], res.x, fallback()))


def cg_shift_solve(A_hat, b_hat, extra_p, reg, shift, x0, cg_steps, precond=None):
    """``psd="cg"``: the system of ``psd="shift"``, ``M = Â + (s + λ)I [+ extra]``, solved by
    ``cg_steps`` CG steps from ``x0`` (:func:`~dpmt.solvers.cg.cg_solve`; the previous,
    released θ: post-processing), preconditioned by the shared part ``(s + λ)I + extra``
    (``precond`` = :func:`cg_preconditioner`, computed here if None), and checked by
    :func:`checked_cg` with :func:`shift_solve` (checked Cholesky, eigenvalue fallback) as
    the fallback. The item step's buckets run the same solve matrix-free
    (:func:`cg_shift_solve_rows`)."""
    d = A_hat.shape[-1]
    if precond is None:
        precond = cg_preconditioner(extra_p, reg, shift, d)
    return checked_cg(shifted_system(A_hat, extra_p, reg, shift), b_hat, reg, x0, cg_steps,
                      precond, lambda: shift_solve(A_hat, b_hat, extra_p, reg, shift)[0])


def cg_shift_solve_rows(X_g, w, b, extra_p, reg, shift, x0, cg_steps, precond, statistics):
    """:func:`cg_shift_solve` of *noiseless* systems (non-private ALS) without forming the Gram
    matrices ``A = Σ_l w_l x_l x_lᵀ``: ``Mp = X_gᵀ(w ⊙ X_g p) + ((s + λ)I + extra) p`` from the
    gathered rows ``X_g`` (n, L, d) and weights ``w`` (n, L)
    (:func:`~dpmt.solvers.cg.gram_matvec`) — the same ``M`` in exact arithmetic, ``4·L·d``
    FLOPs per item and step instead of ``2·L·d²`` once. ``statistics()`` forms ``A``
    (n, d, d) for the fallback of a failing batch only."""
    op = gram_matvec(X_g, w, shared=shared_shift(extra_p, reg, shift, b.shape[-1]))
    return checked_cg(op, b, reg, x0, cg_steps, precond,
                      lambda: shift_solve(statistics(), b, extra_p, reg, shift)[0])


def solve_systems(A_hat, b_hat, extra_p, reg, psd, shift=None, x0=None,
                   cg_steps=DEFAULT_CG_STEPS, precond=None):
    """θ for a batch of released statistics ``Â (n, d, d)``, ``b̂ (n, d)``; ``extra_p`` is the
    already projected (d, d) extra term or None. See :func:`ssp_solve` for the semantics.

    * "cg": :func:`cg_shift_solve` from ``x0`` (n, d) (zeros if None), preconditioned by
      ``precond`` (:func:`cg_preconditioner`; computed per call if None).

    * "shift": :func:`shift_solve` with the given ``shift`` (with or without extra): one
      Cholesky per item, no ``eigh`` unless an item of the batch fails its checks.

    * no extra: ``(Π(Â) + λI)⁻¹ b̂`` = eigenvalue solve of ``Â + λI`` floored at λ (one ``eigh``).
    * "floor": eigenvalue solve of ``Â + extra + λI`` floored at λ (one ``eigh``).
    * "project" with extra: ``Π(Â)`` by one ``eigh``; ``M = Π(Â) + extra + λI ⪰ λI`` is then
      solved by Cholesky (d³/3 + 2d² FLOPs instead of a second ``eigh``, ~9d³), checked by
      :func:`cholesky_solve_checked`; a batch failing the check is re-solved by the eigenvalue
      solve (floored at λ), which is what this path always did before — so results agree with
      it to float32 round-off of the final solve.
    """
    return check_psd(psd).solve(A_hat, b_hat, extra_p, reg, shift, x0, cg_steps, precond)


def _eye(A_hat):
    return jnp.eye(A_hat.shape[-1], dtype=jnp.float32)


def _project(A_hat, b_hat, extra_p, reg, shift, x0, cg_steps, precond):
    if extra_p is None:
        return eig_solve(A_hat + reg * _eye(A_hat), b_hat, reg)
    M = project_psd(A_hat) + extra_p + reg * _eye(A_hat)
    th, ok = cholesky_solve_checked(M, b_hat, reg)
    return jax.lax.cond(ok, lambda: th, lambda: eig_solve(M, b_hat, reg))


def _floor(A_hat, b_hat, extra_p, reg, shift, x0, cg_steps, precond):
    extra = 0.0 if extra_p is None else extra_p
    return eig_solve(A_hat + extra + reg * _eye(A_hat), b_hat, reg)


def _shift(A_hat, b_hat, extra_p, reg, shift, x0, cg_steps, precond):
    return shift_solve(A_hat, b_hat, extra_p, reg, shift)[0]


def _cg(A_hat, b_hat, extra_p, reg, shift, x0, cg_steps, precond):
    return cg_shift_solve(A_hat, b_hat, extra_p, reg, shift,
                          jnp.zeros_like(b_hat) if x0 is None else x0, cg_steps, precond)


@dataclasses.dataclass(frozen=True)
class ItemSolve:
    """How the released item systems are made well-posed and solved (post-processing): an
    entry of :data:`dpmt.registry.ITEM_SOLVES` (``psd=``, ``TrainConfig.item_solve``).

    Attributes:
      name, help: the mode and what it does.
      solve: ``(Â, b̂, extra_p, λ, s, x0, cg_steps, precond) -> θ`` on a batch (n, d, d),
        (n, d); ``extra_p`` the projected extra term or None.
      shifted: adds the spectral shift ``s·I`` (:func:`spectral_shift`; callers pass it).
      warm_start: iterates from ``x0``, the previous released V (a CG solve: it takes the
        shared preconditioner, and without noise it runs matrix-free).
      without_extra: the mode it equals when there is no extra term (so that both share one
        compiled kernel).
    """

    name: str
    help: str
    solve: Callable
    shifted: bool = False
    warm_start: bool = False
    without_extra: str | None = None


PROJECT = ItemSolve("project", "(Π(Â) + extra + λI)⁻¹ b̂, Π the PSD projection (one eigh)",
                    _project)
FLOOR = ItemSolve("floor", "eigenvalues of Â + extra + λI floored at λ (one eigh)", _floor,
                  without_extra="project")
SHIFT = ItemSolve("shift", "(Â + sI + extra + λI)⁻¹ b̂ by one checked Cholesky per item",
                  _shift, shifted=True)
CG = ItemSolve("cg", "the shift system by warm-started conjugate gradients, checked, with "
               "shift as the fallback", _cg, shifted=True, warm_start=True)


def check_psd(psd) -> ItemSolve:
    """The :class:`ItemSolve` of mode ``psd`` (a ConfigError naming the modes otherwise)."""
    if psd not in ITEM_SOLVES:
        raise ConfigError(f"psd (item_solve) must be one of {', '.join(ITEM_SOLVES)} "
                          f"(got {psd!r})")
    return ITEM_SOLVES[psd]


def kernel_mode(psd: str, extra) -> str:
    """The mode whose compiled kernel serves ``psd`` with this ``extra`` term (``floor``
    without extra is ``project``)."""
    entry = check_psd(psd)
    return entry.without_extra if extra is None and entry.without_extra else psd
