"""Per-row products of a layout chunk's gathered rows ``x_l = X[cols_l]`` with weights ``w_l``
and labels ``y_l``: the weighted Gram matrices ``A = Σ_l w_l x_l x_lᵀ`` of the exact solves and
the SSP statistics (:func:`weighted_gram`), or the gathered rows themselves for matrix-free
conjugate-gradient products (:func:`weighted_rows`). Chunks come from
:mod:`dpmt.solvers.layout`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpmt.solvers.layout import Chunk


def weighted_rows(X: jax.Array, chunk: Chunk, w: jax.Array, y: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
    """The matrix-free counterpart of :func:`weighted_gram`: the gathered rows
    ``X_g = X[cols]`` (n, L, d) and ``b = Σ_l w_l y_l x_l`` (n, d), for CG products
    ``X_gᵀ(w ⊙ X_g p)`` (:func:`~dpmt.solvers.cg.gram_matvec`) instead of ``A``."""
    X_g = X[chunk.cols]
    return X_g, jnp.einsum("nl,nld->nd", w * y, X_g, precision=jax.lax.Precision.HIGHEST)


def weighted_gram(X: jax.Array, chunk: Chunk, w: jax.Array, y: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
    """Per row of a chunk: ``A = Σ_l w_l x_l x_lᵀ`` (exactly symmetric) and
    ``b = Σ_l w_l y_l x_l`` with ``x_l = X[cols_l]``; ``w``, ``y`` ``(n, L)`` are zero in pad slots.

    With all ``w ≥ 0`` in the block (always, for the solvers' weights) it gathers
    ``Y = √w ⊙ X[cols]`` in one pass and forms ``A = YᵀY`` — one batched product of a
    materialised operand with itself, which XLA:CPU runs 1.5-2x faster than ``(w ⊙ X_g)ᵀ X_g``
    (there the scaling is fused into the product's operand; measured in BENCHMARKS.md).
    Otherwise (a negative weight somewhere in the block) the general form; ``lax.cond`` runs
    only one of them. 2·L·d² FLOPs (+ 2·L·d) per row either way.
    """
    hi = jax.lax.Precision.HIGHEST

    def nonneg(X, cols, w, y):
        s = jnp.sqrt(w)
        Y = X[cols] * s[..., None]
        return (jnp.einsum("nld,nle->nde", Y, Y, precision=hi),
                jnp.einsum("nl,nld->nd", s * y, Y, precision=hi))

    def general(X, cols, w, y):
        Xg = X[cols]
        return (jnp.einsum("nld,nle->nde", Xg * w[..., None], Xg, precision=hi),
                jnp.einsum("nl,nld->nd", w * y, Xg, precision=hi))

    A, b = jax.lax.cond(jnp.all(w >= 0), nonneg, general, X, chunk.cols, w, y)
    return 0.5 * (A + jnp.swapaxes(A, -1, -2)), b
