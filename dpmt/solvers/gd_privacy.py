"""Noisy gradient descent's privacy (Algorithm 2 of Krichene et al. 2023): the sensitivity
of the summed clipped per-user gradient, its ``dp_accounting`` event, the normals a run
draws (for the sampler's δ) and the Poisson sample of the DP-SGD variant. The steps
themselves are :mod:`dpmt.solvers.noisy_gd` (which re-exports these names).

Privacy unit: one user (add/remove-one), all of whose ratings form one clipped gradient.
"""

from __future__ import annotations

import dp_accounting
import jax
import jax.numpy as jnp

from dpmt.errors import ConfigError, check_range


def noisy_gd_sensitivity(clip_norm: float) -> float:
    """L2 sensitivity ``G`` of the summed clipped per-user gradient (add/remove one user: the
    sum changes by one clipped gradient, of norm ≤ G)."""
    check_range("clip_norm", clip_norm, low=0, low_open=True)
    return float(clip_norm)


def gd_noise_draws(n_params: int, steps: int) -> int:
    """Normals released by :func:`noisy_gd` over ``steps`` steps, for the sampler's δ
    (:func:`~dpmt.solvers.noise.tail_delta`, :func:`~dpmt.solvers.noise.edge_delta` with
    ``n_params`` coordinates per step): ``n_params·steps``.

    Each step adds one 64-bit normal (:func:`dpmt.solvers.noise.normal`) to every entry of the
    clipped gradient sum, a pytree like ``params``. ``n_params`` is the total size of its
    leaves, e.g. ``n_items·d`` for an :class:`~dpmt.solvers.encoders.EmbeddingEncoder`
    (``sum(x.size for x in jax.tree_util.tree_leaves(params))``). The Poisson sample adds no
    normal.
    """
    n_params, steps = int(n_params), int(steps)
    if n_params < 0 or steps < 0:
        raise ConfigError(f"gd_noise_draws needs n_params, steps ≥ 0; got {n_params}, {steps}")
    return n_params * steps


def noisy_gd_dp_event(noise_multiplier: float, steps: int,
                      sampling_rate: float | None = None) -> dp_accounting.DpEvent:
    """The dp_accounting event of ``steps`` noisy-GD steps with noise std ``σ·G``.

    Full batch: ``SelfComposedDpEvent(GaussianDpEvent(σ), T)``; Poisson-sampled users with
    rate ``q``: ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), T)``.
    """
    check_range("noise_multiplier", noise_multiplier, low=0)
    check_range("steps", steps, low=0, integer=True)
    event: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(float(noise_multiplier))
    if sampling_rate is not None:
        check_range("sampling_rate", sampling_rate, low=0, low_open=True, high=1)
        event = dp_accounting.PoissonSampledDpEvent(float(sampling_rate), event)
    return dp_accounting.SelfComposedDpEvent(event, int(steps))


def poisson_sample(key: jax.Array, n: int, rate) -> jax.Array:
    """Poisson sampling: each of ``n`` users included independently with probability
    ``rate``. Returns float32 (n,) in {0, 1}."""
    return jax.random.bernoulli(key, rate, (n,)).astype(jnp.float32)
