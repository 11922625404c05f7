"""The per-rating losses of noisy gradient descent: ℓ(p, y) elementwise, jit-friendly."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

Loss = Callable[[jax.Array, jax.Array], jax.Array]


def squared_loss(pred: jax.Array, y: jax.Array) -> jax.Array:
    """``ℓ(p, y) = ½ (p − y)²`` elementwise."""
    return 0.5 * jnp.square(pred - y)


def logistic_loss(pred: jax.Array, y: jax.Array) -> jax.Array:
    """``ℓ(p, y) = log(1 + e^{−y p})`` elementwise, labels in {−1, +1}."""
    return jnp.logaddexp(0.0, -y * pred)
