"""Noisy GD's steps of one item step in one jitted ``lax.fori_loop`` (``noisy_gd(...,
optimizer=OptimizerSpec(name, lr))``: :func:`dpmt.solvers.gd_fast.fast_steps`, the optimizer
built from its name inside ``jit``, the learning rate optimizer state through
``optax.inject_hyperparams``) against one dispatch per step (``noisy_gd(..., optimizer=
optax.adam(lr))``: one jitted noisy gradient and one jitted optax update per step).

The default path at ε = 5 on the 50k-user × 5k-item synthetic (2.4M ratings), d = 64, the same
U, V, key and noise multiplier; best of 5 rounds, interleaved.

    python experiments/gd_step_loop.py [--devices 2]

Measured on the 2-core Intel Xeon, 2 host devices, 10 steps: 0.711 → 0.667 s (6%) with other
jobs running and 0.641 → 0.576 s (10%) in a quieter rerun (2026-12-06, the loop written in
this script); 0.735 → 0.688 s (6%) through the library once it landed (the same day); the
two V within 8e-6 relative (float32 summation order). Landed: the item step passes a spec.
"""

from __future__ import annotations

import argparse
import os
import time


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args(argv)
    os.environ.setdefault("XLA_FLAGS",
                          f"--xla_force_host_platform_device_count={a.devices}")

    import jax
    import numpy as np
    import optax

    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.data.synthetic import make_synthetic
    from dpmt.solvers import noisy_gd as ng
    from dpmt.solvers.encoders import EmbeddingEncoder, embedding_params
    from dpmt.solvers.gd_fast import OptimizerSpec
    from dpmt.solvers.ssp import noisy_gramian
    from dpmt.train.loop import iterate
    from dpmt.train.training_run import setup

    train = make_synthetic(n_users=50000, n_items=5000, n_interactions=2400000, seed=0)
    cfg = TrainConfig(dim=64, iterations=8, privacy=dict(epsilon=5.0, noise_seed=0))
    run = setup(train, cfg, execution=ExecutionConfig(progress=False, devices=a.devices))
    for t in range(2):                   # compile; the CG user step's warm start
        jax.block_until_ready(iterate(run, t).V)
    st, g = run.steps, run.model_cfg.gd
    U, V = run.U, run.state.V
    extra = run.cfg.gravity * noisy_gramian(U, jax.random.key(7), 1.0)
    z = run.method.noise(run.plan.iterations[0].item).gd_multiplier
    enc = EmbeddingEncoder(n_items=train.n_items, dim=64)
    params0 = embedding_params(V)
    key = jax.random.key(1)
    opt = getattr(optax, g.optimizer)(g.learning_rate)
    steps = g.planned_steps
    mesh = st.mesh

    def per_step():
        return ng.noisy_gd(enc, params0, st.items, U, st.weights, st.labels, steps=steps,
                           clip_norm=g.clip, noise_multiplier=z, key=key, optimizer=opt,
                           reg=st.cfg.reg, num_users=run.n_norm, extra_quadratic=extra,
                           mesh=mesh, user_layout=None if mesh is not None else st.users
                           )["params"]["embedding"]

    def one_loop():
        return ng.noisy_gd(enc, params0, st.items, U, st.weights, st.labels, steps=steps,
                           clip_norm=g.clip, noise_multiplier=z, key=key,
                           optimizer=OptimizerSpec(g.optimizer, g.learning_rate),
                           reg=st.cfg.reg, num_users=run.n_norm, extra_quadratic=extra,
                           mesh=mesh, user_layout=None if mesh is not None else st.users
                           )["params"]["embedding"]

    ref, got = np.asarray(per_step()), np.asarray(one_loop())
    rel = float(np.abs(ref - got).max() / np.abs(ref).max())
    best = {"per-step dispatch": float("inf"), "one fori_loop": float("inf")}
    for _ in range(a.rounds):
        for name, f in (("per-step dispatch", per_step), ("one fori_loop", one_loop)):
            t = time.perf_counter()
            jax.block_until_ready(f())
            best[name] = min(best[name], time.perf_counter() - t)
    out = {"devices": a.devices, "steps": steps, "best_seconds": best, "max_rel_diff": rel,
           "load": os.getloadavg()}
    print(out)
    return out


if __name__ == "__main__":
    main()
