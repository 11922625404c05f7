"""Item (task) encoders for noisy gradient descent: flax modules mapping item ids to
embeddings ``v_i = f_θ(i) ∈ R^d``.

* :class:`EmbeddingEncoder` — one free vector per item (θ_i = v_i, the multi-task setting of
  Krichene et al. 2023 with one task per item). Noisy GD uses the fast per-user clipping path
  for it (gradient rows computed through the task layout, no per-user gradient tensors).
* :class:`MLPEncoder` — the papers' "general encoder": an MLP over fixed item features
  (e.g. MovieLens-100K's 19 genre flags), optionally plus a per-item table. Parameters are
  shared across items, so a user's gradient touches all of them; noisy GD computes per-user
  gradients with ``jax.vmap(jax.grad(...))`` over padded user batches.

Interface used by the solvers: ``encoder.apply(params, item_ids)`` → float32 (len, d), and
``encoder.apply(params)`` → the whole table (n_items, d).
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class EmbeddingEncoder(nn.Module):
    """``v_i = θ[i]``: an (n_items, dim) table, parameter ``params/embedding``."""

    n_items: int
    dim: int
    init_scale: float = 0.1

    @nn.compact
    def __call__(self, item_ids: jax.Array | None = None) -> jax.Array:
        table = self.param("embedding", nn.initializers.normal(self.init_scale),
                           (self.n_items, self.dim), jnp.float32)
        return table if item_ids is None else table[item_ids]


class MLPEncoder(nn.Module):
    """``v_i = MLP(features_i) [+ θ_table[i]]``.

    Attributes:
      features: float (n_items, f) fixed public item features (e.g. genre flags).
      hidden: widths of the hidden ReLU layers.
      dim: output dimension ``d``.
      with_table: add a free per-item table (initialised at 0) to the MLP output.
    """

    features: Any
    hidden: Sequence[int] = (64,)
    dim: int = 32
    with_table: bool = False

    @property
    def n_items(self) -> int:
        return int(self.features.shape[0])

    @nn.compact
    def __call__(self, item_ids: jax.Array | None = None) -> jax.Array:
        f = jnp.asarray(self.features, jnp.float32)
        if item_ids is not None:
            f = f[item_ids]
        h = f
        for width in self.hidden:
            h = nn.relu(nn.Dense(width)(h))
        out = nn.Dense(self.dim)(h)
        if self.with_table:
            table = self.param("embedding", nn.initializers.zeros,
                               (self.n_items, self.dim), jnp.float32)
            out = out + (table if item_ids is None else table[item_ids])
        return out

    # linen modules are dataclasses; an array attribute makes the generated __eq__/__hash__
    # unusable, so compare and hash by identity.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other


def init_encoder(encoder: nn.Module, key: jax.Array) -> Any:
    """Initial parameters of ``encoder`` (a flax variables dict); jitted, because eager flax
    initialisation dispatches (and compiles) every random op separately."""
    return jax.jit(encoder.init)(key, jnp.zeros((1,), jnp.int32))


def embedding_params(V: jax.Array) -> dict:
    """Variables of an :class:`EmbeddingEncoder` whose table is ``V`` (n_items, d) — e.g. to
    start noisy GD from the previous iteration's items."""
    return {"params": {"embedding": jnp.asarray(V, jnp.float32)}}


def item_embeddings(encoder: nn.Module, params: Any) -> jax.Array:
    """All item embeddings ``V = f_θ(all items)``, float32 (n_items, d)."""
    return encoder.apply(params)
