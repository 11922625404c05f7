"""Noisy GD's fast path (an embedding table over a task layout) as jitted kernels: one noisy
gradient, and a whole item step's ``T`` steps in one ``lax.fori_loop``.

The release of one step (Algorithm 2 of Krichene et al. 2023; :mod:`dpmt.solvers.noisy_gd`):

    ĝ = (Σ_{j∈B} g_j min(1, G/‖g_j‖) + N(0, σ²G² I)) / (q n) + (λ/n) θ + (1/n) M θ,

the clipped sum from :mod:`dpmt.solvers.gd_blocks` (pre-gathered rows), the noise from the
step key ``fold_in(key, t)`` split into a sample key and a noise key (:func:`step_keys`).

:class:`OptimizerSpec` names an optax optimizer and its learning rate; the loop builds it
inside ``jit`` through ``optax.inject_hyperparams`` so that the learning rate is state, not
a constant: one compilation per (optimizer name, layout shapes), whatever the rate or the
number of steps. The loop runs the same steps as one dispatch per step (the same key per
step, the same draws); only float32 summation order may differ (XLA fuses differently).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpmt.errors import ConfigError
from dpmt.solvers import noise
from dpmt.solvers.gd_blocks import fast_clipped_sum, sharded_fast_clipped_sum
from dpmt.solvers.gd_privacy import poisson_sample
from dpmt.solvers.layout import count_trace

_HI = jax.lax.Precision.HIGHEST


class OptimizerSpec(NamedTuple):
    """An optax optimizer by name (``optax.<name>(learning_rate)``, e.g. ``"adam"``, ``"sgd"``)
    and its learning rate: what :func:`~dpmt.solvers.noisy_gd.noisy_gd` needs to run a whole
    item step in one compiled loop. The rate is traced (optimizer state), never a constant."""

    name: str
    learning_rate: float

    def init(self, params):
        """The optimizer's state for ``params``, the learning rate inside it."""
        return optax.inject_hyperparams(_factory(self.name))(
            learning_rate=self.learning_rate).init(params)

    def transformation(self) -> optax.GradientTransformation:
        """The optax transformation whose update reads the rate from the state of
        :meth:`init` (one object per name, so a jitted update compiles once per name)."""
        return _injected(self.name)


def _factory(name: str):
    f = getattr(optax, name, None)
    if not callable(f):
        raise ConfigError(f"unknown optax optimizer {name!r}: name one of optax's optimizers "
                          "taking a learning rate, e.g. 'adam' or 'sgd'")
    return f


@functools.lru_cache(maxsize=None)
def _injected(name: str) -> optax.GradientTransformation:
    # the rate given here only fills a state built by this object's init, which is never
    # used: OptimizerSpec.init builds the state with the real rate
    return optax.inject_hyperparams(_factory(name))(learning_rate=0.0)


def step_keys(key, n, sampling_rate, poisson):
    """The step's user mask (n,), its rate q and the noise key, from the step's key."""
    k_sample, k_noise = jax.random.split(key)
    if poisson:
        return poisson_sample(k_sample, n, sampling_rate), sampling_rate, k_noise
    return jnp.ones((n,), jnp.float32), jnp.float32(1.0), k_noise


def release(encoder, params, gsum, k_noise, clip_norm, noise_multiplier, q, reg, num_users,
            extra_quadratic):
    """``ĝ`` from the clipped sum: the Gaussian noise (the release), then public terms."""
    leaves, treedef = jax.tree_util.tree_flatten(gsum)
    keys = jax.random.split(k_noise, len(leaves))
    std = noise_multiplier * clip_norm
    # 64-bit normals (dpmt.solvers.noise): gd_noise_draws counts them for the sampler's δ
    noisy = [g + std * noise.normal(k, g.shape, g.dtype) for g, k in zip(leaves, keys)]
    noisy = jax.tree_util.tree_unflatten(treedef, noisy)
    denom = q * num_users
    out = jax.tree_util.tree_map(lambda g, p: g / denom + (reg / num_users) * p, noisy, params)
    if extra_quadratic is not None:
        # ½ Σ_i v_iᵀ M v_i with M public (e.g. α0·Ĝ_U, already released): data-independent
        # given M, so it is added after the noise and never clipped.
        def penalty(p):
            V = encoder.apply(p)
            return 0.5 * jnp.sum(jnp.matmul(V, extra_quadratic, precision=_HI) * V)

        pg = jax.grad(penalty)(params)
        out = jax.tree_util.tree_map(lambda o, e: o + e / num_users, out, pg)
    return out


def fast_noisy_gradient_impl(encoder, params, items, users, X, data, key, clip_norm,
                             noise_multiplier, sampling_rate, reg, num_users,
                             extra_quadratic=None, *, loss, poisson):
    """The noisy gradient of the embedding path with :func:`fast_clipped_sum`: the same sample
    mask, clipped sum, noise draw and public terms from the same key as the reference path."""
    count_trace("fast_noisy_gradient")
    mask, q, k_noise = step_keys(key, items.n_cols, sampling_rate, poisson)
    rows, _ = fast_clipped_sum(params["params"]["embedding"], items, users, X, data, clip_norm,
                               mask, loss)
    return release(encoder, params, {"params": {"embedding": rows}}, k_noise, clip_norm,
                   noise_multiplier, q, reg, num_users, extra_quadratic)


fast_noisy_gradient = jax.jit(fast_noisy_gradient_impl, static_argnames=("loss", "poisson"),
                              static_argnums=(0,))


def sharded_fast_noisy_gradient_impl(encoder, params, sl, X, data, key, clip_norm,
                                     noise_multiplier, sampling_rate, reg, num_users,
                                     extra_quadratic=None, *, loss, poisson, mesh):
    """:func:`fast_noisy_gradient_impl` on a mesh (:func:`sharded_fast_clipped_sum`): the
    same sample mask, clipped sum, noise draw and public terms from the same key."""
    count_trace("sharded_fast_noisy_gradient")
    mask, q, k_noise = step_keys(key, sl.layout.n_cols, sampling_rate, poisson)
    rows, _ = sharded_fast_clipped_sum(mesh, sl, params["params"]["embedding"], X, data,
                                       clip_norm, mask, loss)
    return release(encoder, params, {"params": {"embedding": rows}}, k_noise, clip_norm,
                   noise_multiplier, q, reg, num_users, extra_quadratic)


sharded_fast_noisy_gradient = jax.jit(sharded_fast_noisy_gradient_impl,
                                      static_argnames=("loss", "poisson", "mesh"),
                                      static_argnums=(0,))


@jax.jit(static_argnames=("encoder", "name", "loss", "poisson", "mesh"))
def fast_steps(encoder, params, opt_state, layout, users, X, data, key, steps, scalars, M, *,
               name, loss, poisson, mesh):
    """``steps`` noisy-GD steps in one ``lax.fori_loop``: step ``t`` draws from
    ``fold_in(key, t)`` the noisy gradient of :func:`fast_noisy_gradient_impl` (or, with a
    ``mesh``, :func:`sharded_fast_noisy_gradient_impl` over the sharded layout ``layout``),
    then applies ``optax.<name>`` with the rate in ``opt_state`` (:class:`OptimizerSpec`).

    ``steps`` is traced (a while loop), so 10 or 20 steps share one compilation. Returns
    ``(params, opt_state)``."""
    count_trace("fast_steps")
    opt = _injected(name)

    def body(t, carry):
        p, s = carry
        k = jax.random.fold_in(key, t)
        if mesh is None:
            g = fast_noisy_gradient_impl(encoder, p, layout, users, X, data, k, *scalars, M,
                                         loss=loss, poisson=poisson)
        else:
            g = sharded_fast_noisy_gradient_impl(encoder, p, layout, X, data, k, *scalars, M,
                                                 loss=loss, poisson=poisson, mesh=mesh)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    return jax.lax.fori_loop(0, steps, body, (params, opt_state))
