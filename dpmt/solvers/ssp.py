"""Sufficient-statistics perturbation (SSP) for weighted least squares — Algorithm 1 of
Krichene et al. 2023 ("Multi-Task Differential Privacy Under Distribution Skew").

For every task (item) ``i`` with parameters ``θ_i ∈ R^d``:

    Â_i = Σ_{j∈Ω_i} w_ij x_ij x_ijᵀ + E_i          E_i symmetric, upper triangle ~ N(0, σ_A²)
    b̂_i = Σ_{j∈Ω_i} w_ij y_ij x_ij  + e_i          e_i ~ N(0, σ_b² I_d)
    θ_i = (Π(Â_i) + extra + λ I)⁻¹ b̂_i              Π = projection onto the PSD cone

which is the private version of the weighted ridge solution
``argmin_θ Σ_j w_ij (⟨θ_i, x_ij⟩ − y_ij)² + λ‖θ_i‖²`` (squared loss; the minimiser of
``Σ w ½(⟨θ,x⟩−y)² + (λ/2)‖θ‖²``, the noisy-GD objective, is the same). In alternating
minimisation ``x_ij = u_j`` (clipped user embeddings, ``‖u_j‖ ≤ C``), and ``extra`` is the
shared "gravity" term ``α0·Ĝ_U`` computed from a separately released noisy Gramian.

Privacy (add/remove one user ``j``; the caller guarantees ``Σ_i w_ij² ≤ β``, ``‖x_ij‖ ≤ C``,
``|y_ij| ≤ y_max``): the stacked ``{A_i}`` change by ``Σ_i w_ij² ‖x_ij‖⁴ ≤ β C⁴`` in squared
Frobenius norm and the stacked ``{b_i}`` by ``Σ_i w_ij² y_ij² ‖x_ij‖² ≤ β C² y_max²`` in squared
L2 norm: :func:`ssp_sensitivities`. Each of the two releases is a Gaussian mechanism with
noise multiplier ``σ/sensitivity``; the caller's ledger records them.

Keeping the noisy systems well-posed (``psd=``, all post-processing of the released
statistics, so free of privacy cost): "project" (``Π(Â_i)`` by one ``eigh`` per item, the
reference protocol), "floor" (eigenvalues of ``Â_i + extra + λI`` floored at λ) or "shift"
(``Â_i + s·I`` with ``s = σ_A(2√d + t)`` from the known noise scale, then one Cholesky per
item with a checked per-item eigenvalue fallback; no eigendecomposition in the common case:
:func:`spectral_shift`).

Everything is computed from a :class:`~dpmt.solvers.layout.Layout` with rows = items (tasks):
batched ``X_gᵀ diag(w) X_g`` products per bucket chunk, never per-rating outer products.
Noise is drawn per item from ``fold_in(key, i)``, so it does not depend on the layout or
the batching.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from dpmt.errors import ConfigError, check_range
from dpmt.solvers.layout import (DEFAULT_MAX_CHUNK_BYTES, Chunk, Layout, count_trace,
                                 gather_slots, map_batches, map_row_blocks, require_kind,
                                 weighted_gram)
from dpmt.solvers.noise import (fold_in_words, key_words, normal_words, symmetric_from_words,
                                symmetric_words)

_HI = jax.lax.Precision.HIGHEST  # no TF32/bf16 passes on accelerators: statistics are summed


# -- sensitivities -------------------------------------------------------------------------------
def ssp_sensitivities(beta: float, clip_norm: float, y_max: float) -> tuple[float, float]:
    """L2 sensitivities of the stacked statistics to adding/removing one user.

    ``sens_A = √β·C²`` (Frobenius norm of the stacked ``{A_i}``) and
    ``sens_b = √β·C·y_max`` (L2 norm of the stacked ``{b_i}``), for weights with
    ``Σ_i w_ij² ≤ β`` per user, features ``‖x_ij‖ ≤ C`` and labels ``|y_ij| ≤ y_max``:
    removing user ``j`` changes ``A_i`` by ``w_ij x_ij x_ijᵀ`` (Frobenius norm
    ``w_ij ‖x_ij‖²``) for each of its tasks, so ``‖ΔA‖_F² = Σ_i w_ij² ‖x_ij‖⁴ ≤ β C⁴``;
    likewise ``‖Δb‖² = Σ_i w_ij² y_ij² ‖x_ij‖² ≤ β C² y_max²``.

    Noise on ``A`` is drawn on the upper triangle (diagonal included) and mirrored (see
    :func:`symmetric_noise`). That is the Gaussian mechanism applied to the vector
    ``T(A) = (A_kl)_{k≤l}``, whose change satisfies
    ``‖T(ΔA)‖² = Σ_k ΔA_kk² + Σ_{k<l} ΔA_kl² ≤ ‖ΔA‖_F²`` (ΔA is symmetric, so the Frobenius
    norm counts each off-diagonal entry twice). Hence ``sens_A`` also bounds the sensitivity of
    ``T``, and ``std = multiplier · sens_A`` on the upper triangle gives the privacy of a
    Gaussian mechanism with that noise multiplier; mirroring is post-processing.
    """
    check_range("beta", beta, low=0, low_open=True)
    check_range("clip_norm", clip_norm, low=0, low_open=True)
    check_range("y_max", y_max, low=0)
    return math.sqrt(beta) * clip_norm ** 2, math.sqrt(beta) * clip_norm * y_max


def gramian_sensitivity(clip_norm: float) -> float:
    """Frobenius sensitivity ``C²`` of ``G_U = Σ_j u_j u_jᵀ`` to adding/removing a user with
    ``‖u_j‖ ≤ C`` (the gravity term's Gramian, released with :func:`noisy_gramian`)."""
    check_range("clip_norm", clip_norm, low=0, low_open=True)
    return clip_norm ** 2


# -- statistics ----------------------------------------------------------------------------------
@jax.jit
def weighted_statistics(layout: Layout, X: jax.Array, weights: jax.Array | None = None,
                        labels: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Exact weighted sufficient statistics per task (Algorithm 1, before noise).

    ``A_i = Σ_{j∈Ω_i} w_ij x_j x_jᵀ`` and ``b_i = Σ_{j∈Ω_i} w_ij y_ij x_j``.

    Args:
      layout: task layout (rows = items, cols index the rows of ``X``), from
        :func:`~dpmt.solvers.layout.task_layout`.
      X: float (n_cols, d) features per column (user embeddings ``U`` in ALS, clipped).
      weights: float (nnz,) ``w_ij`` per rating (parent order), or None for all ones.
      labels: float (nnz,) ``y_ij`` per rating (clipped by the caller), or None for all ones
        (implicit feedback).

    Returns:
      ``A`` float32 (n_rows, d, d) symmetric PSD, ``b`` float32 (n_rows, d); zero for tasks
      without ratings.
    """
    count_trace("weighted_statistics")
    require_kind(layout, "items", "weighted_statistics", segments_ok=True)
    X = jnp.asarray(X, jnp.float32)
    stats = _chunk_statistics_fn(X, weights, labels)
    long = None if layout.segments is None else layout.segment_sums(stats)
    return layout.assemble(layout.map_chunks(stats), long)


def _chunk_statistics_fn(X, weights, labels):
    """``chunk -> (A, b)`` of :func:`_chunk_statistics` over cache-sized row blocks."""
    return lambda c: map_row_blocks(lambda sc: _chunk_statistics(sc, X, weights, labels), c,
                                    dim=X.shape[-1])


def _chunk_statistics(c: Chunk, X, weights, labels):
    """``A (n, d, d)`` (exactly symmetric) and ``b (n, d)`` of one (block of a) chunk's rows:
    one batched Gram product (2·L·d² FLOPs per row, :func:`~dpmt.solvers.layout.weighted_gram`)
    and one batched matrix-vector product. Pad slots have w = 0: pad rows get A = 0, b = 0."""
    w = gather_slots(weights, c)                           # (n, L), 0 in pad slots
    y = gather_slots(labels, c)
    return weighted_gram(X, c, w, y)


@jax.jit
def gramian(U: jax.Array) -> jax.Array:
    """``G_U = Uᵀ U = Σ_j u_j u_jᵀ``, float32 (d, d)."""
    U = jnp.asarray(U, jnp.float32)
    return jnp.matmul(U.T, U, precision=_HI)


# -- noise ---------------------------------------------------------------------------------------
# Threefry normals (:mod:`dpmt.solvers.noise`): the values of ``jax.random.normal`` with
# non-partitionable threefry counters, computed faster on XLA:CPU; a symmetric E_i from d(d+1)/2.
def noise_words(d: int) -> int:
    """Standard normals drawn per item: ``d(d+1)/2`` for ``E_i`` and ``d`` for ``e_i``."""
    return symmetric_words(d) + d


@jax.jit(static_argnums=(1,))
def symmetric_noise(key: jax.Array, d: int, sigma) -> jax.Array:
    """One symmetric ``(d, d)`` noise matrix: entries ``k ≤ l`` i.i.d. ``N(0, σ²)``, mirrored.

    The diagonal has variance ``σ²`` too (not ``2σ²`` as ``(Z + Zᵀ)/√2``-style symmetrisation
    would give); see :func:`ssp_sensitivities` for why this calibration is valid. float32.
    Drawn like one item's ``E_i`` (:func:`_batch_noise`) from ``key`` itself, without the
    ``fold_in``: :func:`~dpmt.solvers.noise.symmetric_from_words` of
    ``jax.random.normal(key, (symmetric_words(d),))`` (non-partitionable threefry,
    :func:`~dpmt.solvers.noise.normal_words`).
    """
    z = normal_words(key_words(key), symmetric_words(d))
    return symmetric_from_words(z, d) * sigma


@jax.jit
def noisy_gramian(U: jax.Array, key: jax.Array, sigma) -> jax.Array:
    """Released Gramian ``Ĝ_U = Σ_j u_j u_jᵀ + E`` (E symmetric, std ``sigma`` on the upper
    triangle), projected onto the PSD cone (post-processing). Sensitivity:
    :func:`gramian_sensitivity`. float32 (d, d)."""
    G = gramian(U)
    return project_psd(G + symmetric_noise(key, G.shape[-1], sigma))


def _batch_noise(key, idx, d, sigma_A, sigma_b):
    """Noise ``E (n, d, d)``, ``e (n, d)`` float32 of items ``idx (n,)`` (int, any order).

    Item ``i``: ``z = jax.random.normal(fold_in(key, i), (noise_words(d),))`` with threefry's
    non-partitionable counters (:func:`~dpmt.solvers.noise.normal_words`: the same values,
    computed 3-5x faster on CPU), then ``E_i = σ_A · symmetric_from_words(z, d)`` (the upper
    triangle, diagonal included, is ``z[:d(d+1)/2]`` row by row, mirrored) and
    ``e_i = σ_b · z[d(d+1)/2:]``. That is ``d(d+1)/2 + d`` normals per item, not ``d² + d``.
    A function of (key, i) only, computed elementwise over ``idx``, so it is the same for any
    layout, bucketing, batching or device placement of the items. ``key``: a typed key or raw
    key data (the sharded steps).
    """
    z = normal_words(fold_in_words(key_words(key), idx), noise_words(d))   # (n, K)
    return symmetric_from_words(z, d) * sigma_A, z[:, symmetric_words(d):] * sigma_b


def _item_noise(key, i, d, sigma_A, sigma_b):
    """Noise ``(E_i (d, d), e_i (d,))`` of one item ``i``: :func:`_batch_noise` of ``[i]``."""
    E, e = _batch_noise(key, jnp.reshape(i, (1,)), d, sigma_A, sigma_b)
    return E[0], e[0]


@jax.jit
def privatize_statistics(A: jax.Array, b: jax.Array, key: jax.Array, sigma_A, sigma_b
                         ) -> tuple[jax.Array, jax.Array]:
    """The released statistics ``Â = A + E``, ``b̂ = b + e`` (Algorithm 1, noise step).

    ``E_i`` symmetric with upper-triangle entries (diagonal included) ~ ``N(0, sigma_A²)``,
    ``e_i ~ N(0, sigma_b² I)``, all independent; item ``i``'s noise is a function of
    ``(key, i)`` only (:func:`_batch_noise`: the same noise :func:`ssp_solve` adds with the
    same key). A (m, d, d), b (m, d) → same shapes, float32. Noise is added to *every* item,
    including items without ratings (which items are rated is private).
    """
    A = jnp.asarray(A, jnp.float32)
    b = jnp.asarray(b, jnp.float32)
    m, d = b.shape
    E, e = _batch_noise(key, jnp.arange(m, dtype=jnp.uint32), d, sigma_A, sigma_b)
    return A + E, b + e


# -- solve ---------------------------------------------------------------------------------------
@jax.jit
def project_psd(M: jax.Array) -> jax.Array:
    """Projection onto the PSD cone (Frobenius): eigendecomposition, negative eigenvalues set
    to 0. Works on (..., d, d); symmetrises its input and its output."""
    M = 0.5 * (M + jnp.swapaxes(M, -1, -2))
    lam, Q = jnp.linalg.eigh(M)
    P = jnp.matmul(Q * jnp.maximum(lam, 0.0)[..., None, :], jnp.swapaxes(Q, -1, -2),
                   precision=_HI)
    return 0.5 * (P + jnp.swapaxes(P, -1, -2))


def _eig_solve(M, rhs, floor):
    """``Q diag(1/max(μ, floor)) Qᵀ rhs`` with ``M = Q diag(μ) Qᵀ`` — a solve that is finite for
    any symmetric M (floor > 0)."""
    mu, Q = jnp.linalg.eigh(M)
    z = jnp.einsum("...ji,...j->...i", Q, rhs, precision=_HI) / jnp.maximum(mu, floor)
    return jnp.einsum("...ij,...j->...i", Q, z, precision=_HI)


def _cholesky_solve_flags(M, rhs, reg):
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


def _cholesky_solve_checked(M, rhs, reg):
    """:func:`_cholesky_solve_flags` with one flag for the whole batch: accepted only if every
    system passed; otherwise (float32 round-off has eaten the margin, e.g. huge noise with a
    tiny ridge) the caller falls back to the eigenvalue solve."""
    th, ok = _cholesky_solve_flags(M, rhs, reg)
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


def _shift_solve(A_hat, b_hat, extra_p, reg, shift):
    """``psd="shift"``: θ and a bool (n,) flag per item (True: Cholesky accepted, False: the
    item was re-solved by the fallback) for released ``Â (n, d, d)``, ``b̂ (n, d)``.

    ``M = Â + (s + λ)·I [+ extra]``, ``s`` = :func:`spectral_shift`. ``M ⪰ λI`` whenever
    ``Â + sI ⪰ 0`` (w.h.p.): one Cholesky solve, checked per item by
    :func:`_cholesky_solve_flags`. An item that fails (its ``Â + sI`` is not PSD, so the
    factorisation gives NaN, or round-off broke the ``M ⪰ λI`` bounds) gets the eigenvalue
    solve of the same ``M`` with eigenvalues floored at λ, ``Q diag(1/max(μ, λ)) Qᵀ b̂``, which
    is finite for any symmetric M (and equal to the Cholesky solution when ``M ⪰ λI``). The
    fallback runs under ``lax.cond`` once per batch, only if some item of the batch failed,
    and is selected per item with ``jnp.where``: batches where all items pass never
    compute an ``eigh``.
    """
    d = A_hat.shape[-1]
    M = A_hat + (shift + reg) * jnp.eye(d, dtype=jnp.float32)
    if extra_p is not None:
        M = M + extra_p
    th, ok = _cholesky_solve_flags(M, b_hat, reg)
    th = jax.lax.cond(jnp.all(ok), lambda: th,
                      lambda: jnp.where(ok[..., None], th, _eig_solve(M, b_hat, reg)))
    return th, ok


def _solve_systems(A_hat, b_hat, extra_p, reg, psd, shift=None):
    """θ for a batch of released statistics ``Â (n, d, d)``, ``b̂ (n, d)``; ``extra_p`` is the
    already projected (d, d) extra term or None. See :func:`ssp_solve` for the semantics.

    * "shift": :func:`_shift_solve` with the given ``shift`` (with or without extra): one
      Cholesky per item, no ``eigh`` unless an item of the batch fails its checks.

    * no extra: ``(Π(Â) + λI)⁻¹ b̂`` = eigenvalue solve of ``Â + λI`` floored at λ (one ``eigh``).
    * "floor": eigenvalue solve of ``Â + extra + λI`` floored at λ (one ``eigh``).
    * "project" with extra: ``Π(Â)`` by one ``eigh``; ``M = Π(Â) + extra + λI ⪰ λI`` is then
      solved by Cholesky (d³/3 + 2d² FLOPs instead of a second ``eigh``, ~9d³), checked by
      :func:`_cholesky_solve_checked`; a batch failing the check is re-solved by the eigenvalue
      solve (floored at λ), which is what this path always did before — so results agree with
      it to float32 round-off of the final solve.
    """
    if psd == "shift":
        return _shift_solve(A_hat, b_hat, extra_p, reg, shift)[0]
    d = A_hat.shape[-1]
    eye = jnp.eye(d, dtype=jnp.float32)
    if extra_p is None:
        return _eig_solve(A_hat + reg * eye, b_hat, reg)
    if psd == "floor":
        return _eig_solve(A_hat + extra_p + reg * eye, b_hat, reg)
    M = project_psd(A_hat) + extra_p + reg * eye
    th, ok = _cholesky_solve_checked(M, b_hat, reg)
    return jax.lax.cond(ok, lambda: th, lambda: _eig_solve(M, b_hat, reg))


def _default_batch(m: int, d: int) -> int:
    # eigh workspace + noise + projections: a few (d, d) float32 arrays per item
    return int(max(1, min(m, DEFAULT_MAX_CHUNK_BYTES // (4 * 8 * d * d))))


def _check_reg(reg):
    if isinstance(reg, (int, float)):
        check_range("reg", reg, low=0, low_open=True)


#: the values of ``psd=`` (``TrainConfig.item_solve`` offers "project" and "shift")
PSD_MODES = ("project", "floor", "shift")


def _check_psd(psd):
    if psd not in PSD_MODES:
        raise ConfigError(f"psd must be one of {', '.join(map(repr, PSD_MODES))} (got {psd!r})")


def ssp_solve(A: jax.Array, b: jax.Array, key: jax.Array | None, sigma_A, sigma_b, reg,
              extra: jax.Array | None = None, psd: str = "project",
              batch_size: int | None = None) -> jax.Array:
    """Private task parameters from the exact statistics (Algorithm 1: noise, then solve).

    ``θ_i = (Π(A_i + E_i) + extra + λ I)⁻¹ (b_i + e_i)``.

    Args:
      A: float (m, d, d) exact ``Σ_j w_ij x_j x_jᵀ`` (from :func:`weighted_statistics`).
      b: float (m, d) exact ``Σ_j w_ij y_ij x_j``.
      key: PRNG key for the noise (None only if both sigmas are 0).
      sigma_A, sigma_b: noise standard deviations (= noise multiplier × sensitivity from
        :func:`ssp_sensitivities`). 0 gives the exact weighted ridge solution.
      reg: ridge ``λ > 0``.
      extra: optional public or separately released (d, d) matrix added to every system
        (e.g. ``α0·Ĝ_U``). It is symmetrised and projected onto the PSD cone first.
      psd: how the noisy ``Â_i`` is kept well-posed (both are post-processing of the
        released statistics, so they cost no privacy):
        * "project" (default, the reference protocol): ``Π(Â_i)``, the PSD projection of
          ``Â_i`` alone (eigendecomposition, negative eigenvalues set to 0), before ``extra``
          and ``λI`` are added. Noise on a tail item's ``Â_i`` is of the same size as its
          signal; projecting removes the negative directions that would otherwise make the
          system indefinite and blow up ``θ_i``. Two eigendecompositions per item when
          ``extra`` is given, one otherwise.
        * "floor": ``Π(Â_i + extra) + λI`` — eigenvalues of ``Â_i + extra + λI`` floored at
          ``λ``; one eigendecomposition per item. Equal to "project" when ``extra`` is None.
        * "shift": ``(Â_i + s·I + extra + λI)⁻¹ b̂_i`` with ``s = σ_A(2√d + t)``
          (:func:`spectral_shift`: ``Â_i + sI ⪰ 0`` for all items with probability
          ≥ 99%), by one Cholesky per item and no eigendecomposition. An item whose Cholesky
          fails or breaks the ``M ⪰ λI`` checks (non-PSD ``Â_i + sI``, round-off) is re-solved
          by the eigenvalue solve of the same system floored at λ (:func:`_shift_solve`).
          It biases every item by ``s`` more ridge than "project" — a different estimator,
          not an approximation of it; same privacy.
        For "project"/"floor" the final solve is ``Q diag(1/max(μ, λ)) Qᵀ b̂`` (μ the
        eigenvalues of the system matrix, which is ≥ λ I in exact arithmetic) or a Cholesky
        solve checked against that bound with the eigenvalue solve as fallback, so it is
        finite for any noise level in float32; so is "shift" (same fallback).
      batch_size: items per batch of the (sequential) batched eigendecompositions; default
        keeps the working set near 256 MiB.

    Returns:
      θ float32 (m, d).
    """
    _check_psd(psd)
    _check_reg(reg)
    A = jnp.asarray(A, jnp.float32)
    b = jnp.asarray(b, jnp.float32)
    if A.ndim != 3 or b.ndim != 2 or A.shape[:2] != b.shape or A.shape[1] != A.shape[2]:
        raise ConfigError(f"A must be (m, d, d) and b (m, d); got {A.shape} and {b.shape}")
    # concrete zero noise (the non-private baseline) skips the noise draw altogether
    noiseless = all(isinstance(s, (int, float)) and s == 0 for s in (sigma_A, sigma_b))
    if key is None:
        if not noiseless:
            raise ConfigError("ssp_solve needs a PRNG key when noise is on")
        key = jax.random.key(0)
    m, d = b.shape
    if batch_size is None:
        batch_size = _default_batch(m, d)
    if extra is None and psd == "floor":
        psd = "project"   # identical to "floor" without extra: share one compiled kernel
    return _ssp_solve(A, b, key, jnp.float32(sigma_A), jnp.float32(sigma_b), jnp.float32(reg),
                      None if extra is None else jnp.asarray(extra, jnp.float32),
                      psd=psd, batch_size=int(batch_size), noisy=not noiseless)


@jax.jit(static_argnames=("psd", "batch_size", "noisy"))
def _ssp_solve(A, b, key, sigma_A, sigma_b, reg, extra, *, psd, batch_size, noisy):
    count_trace("ssp_solve")
    m, d = b.shape
    extra_p = None if extra is None else project_psd(extra)
    shift = spectral_shift(sigma_A, d, m) if psd == "shift" else None

    def solve(A_b, b_b, idx):
        if noisy:
            E, e = _batch_noise(key, idx, d, sigma_A, sigma_b)
            A_b, b_b = A_b + E, b_b + e
        return _solve_systems(A_b, b_b, extra_p, reg, psd, shift)

    return map_batches(solve, (A, b, jnp.arange(m, dtype=jnp.uint32)), batch_size)


def ssp_item_step(layout: Layout, X: jax.Array, weights: jax.Array | None,
                  labels: jax.Array | None, key: jax.Array | None, sigma_A, sigma_b, reg,
                  extra: jax.Array | None = None, psd: str = "project") -> jax.Array:
    """One private SSP task step: :func:`weighted_statistics` then :func:`ssp_solve`.

    Returns θ float32 (layout.n_rows, d). The two releases ({Â_i} with Frobenius sensitivity
    ``√β C²``, {b̂_i} with L2 sensitivity ``√β C y_max``) are the caller's to record.

    Computed fused, chunk by chunk of the layout: each chunk's statistics are perturbed
    (item ``i``'s noise from ``fold_in(key, i)``, exactly as :func:`ssp_solve` draws it) and
    solved right away, so the ``(n_items, d, d)`` statistics are never materialised (1.75 GB
    at ML-20M scale and d = 128). Items without ratings get the solve of their noise alone.
    Same result as ``ssp_solve(*weighted_statistics(...), ...)`` up to float32 round-off.
    ``psd``: as in :func:`ssp_solve` ("shift": the shift uses ``m = layout.n_rows``).
    """
    require_kind(layout, "items", "ssp_item_step", segments_ok=True)
    _check_psd(psd)
    _check_reg(reg)
    noiseless = all(isinstance(s, (int, float)) and s == 0 for s in (sigma_A, sigma_b))
    if key is None:
        if not noiseless:
            raise ConfigError("ssp_item_step needs a PRNG key when noise is on")
        key = jax.random.key(0)
    try:
        empty = empty_rows(layout) if not noiseless else np.zeros(0, np.int32)
    except jax.errors.TracerArrayConversionError:     # called under the caller's jit
        A, b = weighted_statistics(layout, X, weights, labels)
        return ssp_solve(A, b, key, sigma_A, sigma_b, reg, extra=extra, psd=psd)
    X = jnp.asarray(X, jnp.float32)
    d = X.shape[-1]
    if extra is None and psd == "floor":
        psd = "project"
    return _private_item_step(layout, X, weights, labels, key, jnp.float32(sigma_A),
                              jnp.float32(sigma_b), jnp.float32(reg),
                              None if extra is None else jnp.asarray(extra, jnp.float32),
                              jnp.asarray(empty, jnp.uint32), psd=psd,
                              batch_size=solve_block_rows(d), noisy=not noiseless)


#: Working set of one block of the fused item step's solves (noise, Π(Â), M, eigh/Cholesky
#: workspace: ~8 (d, d) float32 arrays per item).
SOLVE_BLOCK_BYTES = 32 * 2**20


def solve_block_rows(d: int) -> int:
    """Items per block of the fused item step's noise + solve."""
    return int(max(1, SOLVE_BLOCK_BYTES // (4 * 8 * d * d)))


def empty_rows(layout: Layout) -> np.ndarray:
    """int32 indices of the layout's rows without entries (items nobody rated); a segmented
    layout's long rows also map to the zero row, and are not empty."""
    empty = np.asarray(layout.inverse) == layout.total_rows
    empty[layout.long_rows] = False
    return np.flatnonzero(empty).astype(np.int32)


def private_item_solve_chunk(c: Chunk, X, weights, labels, key, sigma_A, sigma_b, reg, extra_p,
                             *, psd: str, batch_size: int, noisy: bool, shift=None):
    """θ ``(n, d)`` of one chunk's rows: statistics, noise of item ``rows[k]``, solve (the
    body of :func:`ssp_item_step`, also used per device by :mod:`dpmt.solvers.sharding`).
    ``shift``: :func:`spectral_shift` of the whole item set, needed by ``psd="shift"``."""
    d = X.shape[-1]

    def block(sc: Chunk):
        A, b = _chunk_statistics(sc, X, weights, labels)
        return private_rows_solve(A, b, sc.rows.astype(jnp.uint32), key, sigma_A, sigma_b, reg,
                                  extra_p, psd=psd, batch_size=batch_size, noisy=noisy,
                                  shift=shift)

    # blocks of rows: the gathered block stays in cache, the solve workspace stays small
    return map_row_blocks(block, c, dim=d, max_rows=batch_size)


def private_rows_solve(A, b, idx, key, sigma_A, sigma_b, reg, extra_p, *, psd: str,
                       batch_size: int, noisy: bool, shift=None):
    """Noise of items ``idx`` added to ``A (n, d, d)``, ``b (n, d)``, then solved in batches.
    ``psd="shift"`` needs ``shift`` (:func:`spectral_shift` with the *total* item count, so
    that it does not depend on how the items are split)."""
    d = b.shape[-1]
    if psd == "shift" and shift is None:
        raise ConfigError("psd='shift' needs shift= (spectral_shift(sigma_A, d, n_items))")

    def solve(A_b, b_b, i_b):
        if noisy:
            E, e = _batch_noise(key, i_b, d, sigma_A, sigma_b)
            A_b, b_b = A_b + E, b_b + e
        return _solve_systems(A_b, b_b, extra_p, reg, psd, shift)

    return map_batches(solve, (A, b, idx), batch_size)


@jax.jit(static_argnames=("psd", "batch_size", "noisy"))
def _private_item_step(layout, X, weights, labels, key, sigma_A, sigma_b, reg, extra, empty,
                       *, psd, batch_size, noisy):
    count_trace("ssp_item_step_shift" if psd == "shift" else "ssp_item_step")
    d = X.shape[-1]
    extra_p = None if extra is None else project_psd(extra)
    shift = spectral_shift(sigma_A, d, layout.n_rows) if psd == "shift" else None
    kw = dict(psd=psd, batch_size=batch_size, noisy=noisy, shift=shift)
    long = None
    if layout.segments is not None:
        # long rows: their segments' statistics summed, then noise and solve per row (the
        # same noise, keyed by the row, as a row of a bucket would get)
        A, b = layout.segment_sums(_chunk_statistics_fn(X, weights, labels))
        long = private_rows_solve(A, b, layout.segments.rows.astype(jnp.uint32), key, sigma_A,
                                  sigma_b, reg, extra_p, **kw)
    theta = layout.assemble(layout.map_chunks(
        lambda c: private_item_solve_chunk(c, X, weights, labels, key, sigma_A, sigma_b, reg,
                                           extra_p, **kw)), long)
    if empty.shape[0]:   # unrated items: θ = (Π(E_i) + extra + λI)⁻¹ e_i (or E_i + sI)
        k = empty.shape[0]
        th = private_rows_solve(jnp.zeros((k, d, d), jnp.float32), jnp.zeros((k, d), jnp.float32),
                                empty, key, sigma_A, sigma_b, reg, extra_p, **kw)
        theta = theta.at[empty].set(th)
    return theta
