"""Where noisy GD's item step — and the default path's whole iteration — spends its time
(issue 29, "the default path at implicit's speed").

Builds the synthetic data (``make_synthetic``; default 50k users × 5k items, 2.4M
positives), runs fit's own setup (:func:`dpmt.train.training_run.setup`) for the default
solver (noisy GD with the steps rule's count, Adam, G = 0.2, per-user clipping, user_solve
cg) and for SSP at the same ε, d and weights, runs two iterations (compilation, and the CG
user step's warm start), and then times on the same U, in one process, interleaved, best of
``rounds``:

* ``gd blocked``: the item step with ``gd_blocks.PREGATHER_BYTES = 0`` — the parent
  commit's kernel (:func:`dpmt.solvers.gd_blocks.fast_clipped_sum` without pre-gathered rows:
  per step the norms pass gathers v_i per rating over the user layout, the rows pass u_j per
  rating over the task layout, in cache-sized blocks);
* ``gd pre-gathered``: the item step as ``fit`` runs it now (U's rows gathered into the task
  layout's slots once per item step, each step two batched products over contiguous blocks);
* ``ssp``: SSP's item step (statistics, noise, solves);

the parts of one pre-gathered step (the gather once per item step — into fresh memory and
over the kept buffers —, the residual pass, the scatter of the per-user norms, the rows pass,
the whole noisy gradient, the noise draw, Adam), and the parts of the default path's whole
iteration (user step, Ĝ_U, item step) against whole ``iterate`` calls. It checks that the
blocked and pre-gathered item steps give the same V from the same key (float32 summation
order only).

    python experiments/noisy_gd_profile.py [--users 50000] [--items 5000]
        [--interactions 2400000] [--dim 64] [--epsilon 5] [--rounds 3]

Measured 2026-12-04 on the 2 cores shared with other engineers' jobs (load 2.8 at the start,
5.6 at the end: absolute seconds wander ~1.5x between the sections; the ratios are within
one section), defaults (10 steps at lr 0.02: n̂·ε ≥ 1e5), best of 3:

    parts of one pre-gathered noisy-GD step
      gather U's rows once per item step, into fresh memory        312.1 ms
      the same over the kept buffers (as noisy_gd does)            100.4 ms
      per step: residual pass (batched mat-vec)                     46.4 ms
      per step: per-user norms (scatter of nnz r²) and clip          5.1 ms
      per step: clipped rows pass (batched vec-mat)                 40.7 ms
      per step: whole noisy gradient (both passes, noise, λ, α0)    98.3 ms
      per step: noise draw (m × d 64-bit normals)                    1.7 ms
      per step: adam update                                          0.7 ms
    item step per iteration (same U, one process)
      gd blocked          6.51 s    5.26× SSP
      gd pre-gathered     1.82 s    1.47× SSP      speed-up 3.58×
      ssp                 1.24 s
    the default path's iteration, part by part
      user step (cg, warm)        0.54 s  (29.7%)
      noisy Gramian               0.01 s  ( 0.6%)
      item step (noisy GD)        1.26 s  (69.7%)
    whole iterations as fit runs them: gd 1.84 s = 1.29× SSP's 1.42 s
    max |V_pre − V_blocked| / max |V_blocked| = 5.0e-06 (float32 summation order)

Where the time goes now: the item step is ~0.1 s of gather plus, per step, two streaming
passes over the 0.65 GiB of gathered rows (~45 ms each, ~15 GB/s) and ~10 ms of scalars,
noise and Adam; the user step (8 warm CG steps on cache-sized blocks) is the other 30%.
Tried and dropped: fusing each step's rows pass with the next step's residual pass (one
read of the block per step, the optimizer applied per row block inside the pass) ran the
two products in 70 ms against 78 ms unfused (4 MiB blocks; 1 MiB: 91 ms) — not worth an
optimizer that must be row-separable; all steps in one jitted ``fori_loop`` (one dispatch,
the temporaries' pages mapped once) ran the 10 steps 10-20% faster (1.95 → 1.58 / 1.75 s)
but compiles the loop per optimizer object, which the gradient kernel must not (a fresh
optimizer never recompiles it: tests/test_noisy_gd.py); the per-user norms by a gather into
the user layout's order (deterministic on a GPU, where the scatter-add is atomic) took
24 ms a step against the scatter's 7 ms; a materialised gather of the rows into fresh memory
costs 5-10x the fused one on this VM (page faults), hence the kept buffers.

The parent commit's profile (2026-12-03, 20 steps): the time was in the two gathers of a
d-vector per rating and step — XLA:CPU gathers rows at ~25-30 ns each however small the
table, and a *materialised* gather into fresh memory costs 5-10x that on this VM (page
faults) —; U is fixed through the item step, so the rows are now gathered once per item
step and every step streams them.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np


def best_of(fns: dict, rounds: int) -> dict:
    """Best wall time of each callable (results blocked on), interleaved over ``rounds``,
    after one untimed call each (compilation)."""
    for f in fns.values():
        jax.block_until_ready(f())
    best = {k: np.inf for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(f())
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=50_000)
    p.add_argument("--items", type=int, default=5_000)
    p.add_argument("--interactions", type=int, default=2_400_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--epsilon", type=float, default=5.0)
    p.add_argument("--weights", default="adaptive")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)

    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.data.synthetic import make_synthetic
    from dpmt.solvers import gd_blocks as gb
    from dpmt.solvers import noisy_gd as ng
    from dpmt.solvers.encoders import EmbeddingEncoder, embedding_params
    from dpmt.solvers.ssp import noisy_gramian
    from dpmt.train.loop import iterate
    from dpmt.train.training_run import setup

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    train = make_synthetic(n_users=a.users, n_items=a.items, n_interactions=a.interactions,
                           seed=0)
    print(f"data: {train.n_users} users, {train.n_items} items, {train.nnz} ratings "
          f"({time.perf_counter() - t0:.1f}s); load {load0}", flush=True)
    ex = ExecutionConfig(progress=False)
    runs = {}
    for solver in ("gd", "ssp"):
        cfg = TrainConfig(dim=a.dim, solver=solver, weights=a.weights, iterations=8,
                          privacy=dict(epsilon=a.epsilon, noise_seed=0))
        runs[solver] = setup(train, cfg, execution=ex)
    gd, ssp = runs["gd"], runs["ssp"]
    st, g = gd.steps, gd.model_cfg.gd
    pre = gb.pregathered_buckets(st.items, a.dim)
    print(f"noisy GD: {g.steps} steps, {g.optimizer} lr {g.learning_rate}, G = {g.clip}, "
          f"λ = {st.cfg.reg}, α0 = {gd.cfg.gravity}, user_solve {st.cfg.user_solve} "
          f"({st.cfg.item_cg_steps} steps); task layout padding {st.items.padding_overhead:.3f} "
          f"({len(st.items.buckets)} buckets"
          + ("" if st.items.segments is None else
             f" + segments of {st.items.segments.width}") + f"), pre-gathered "
          f"{sum(pre)}/{len(pre)} buckets, "
          f"{4 * a.dim * st.items.padded_slots / 2**30:.2f} GiB", flush=True)
    its = {k: [] for k in runs}
    for t in range(2):                               # compile; the CG user step's warm start
        for k, run in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(iterate(run, t).V)
            its[k].append(time.perf_counter() - t0)
    U, V = gd.U, gd.state.V
    extra = gd.cfg.gravity * noisy_gramian(U, jax.random.key(7), 1.0)
    key = jax.random.key(1)

    def item_step(run, budget=None):
        noise_t = run.method.noise(run.plan.iterations[0].item)

        def f():
            old = gb.PREGATHER_BYTES
            gb.PREGATHER_BYTES = old if budget is None else budget
            try:
                return run.steps.item_step.update(run.state.item_state, V, U, key, noise_t,
                                                  extra, run.n_norm)[0]
            finally:
                gb.PREGATHER_BYTES = old
        return f

    fns = {"gd blocked": item_step(gd, 0), "gd pre-gathered": item_step(gd),
           "ssp": item_step(ssp)}
    first = {}
    outs = {}
    for k, f in fns.items():
        t = time.perf_counter()
        outs[k] = np.asarray(f())
        first[k] = time.perf_counter() - t
    rel = float(np.abs(outs["gd blocked"] - outs["gd pre-gathered"]).max()
                / np.abs(outs["gd blocked"]).max())
    print(f"max |V_pre − V_blocked| / max |V_blocked| = {rel:.1e}", flush=True)
    best = best_of(fns, a.rounds)

    # the parts of one pre-gathered step, on the V the item step starts from
    enc = EmbeddingEncoder(n_items=train.n_items, dim=a.dim)
    import optax

    optimizer = getattr(optax, g.optimizer)(g.learning_rate)
    params = embedding_params(V)
    Vp = params["params"]["embedding"]
    z = gd.method.noise(gd.plan.iterations[0].item).gd_multiplier
    scalars = (jnp.float32(g.clip), jnp.float32(z), jnp.float32(1.0), jnp.float32(st.cfg.reg),
               jnp.float32(gd.n_norm))
    data = gb.prepare_steps(st.items, st.users, U, st.weights, st.labels)
    buckets = gb._buckets(st.items)
    resid = gb._residual_fn(ng.squared_loss)
    hi = jax.lax.Precision.HIGHEST

    @jax.jit
    def residual_pass(V, data):
        return [resid(b.valid, w, jnp.einsum("cnld,cnd->cnl", xs, V[b.rows], precision=hi), y)
                for b, xs, w, y in zip(buckets, data.x_slots, data.items.w, data.items.y)]

    r = residual_pass(Vp, data)

    @jax.jit
    def norms_scatter(r):
        sq = jnp.zeros((st.items.n_cols,), jnp.float32)
        for b, x in zip(buckets, r):
            sq = sq.at[b.cols.reshape(-1)].add((x * x).reshape(-1))
        return g.clip / jnp.maximum(jnp.sqrt(sq * data.x_sq), g.clip)

    scale = norms_scatter(r)

    @jax.jit
    def rows_pass(r, scale, data):
        return [jnp.einsum("cnl,cnld->cnd", x * scale[b.cols], xs, precision=hi)
                for b, xs, x in zip(buckets, data.x_slots, r)]

    def prepare_reused():
        nonlocal data
        d = gb.prepare_steps(st.items, None, U, st.weights, st.labels, reuse=True)
        gb.keep_scratch(st.items, d)
        data = d
        return d

    def fast_gradient():
        return ng.fast_noisy_gradient(enc, params, st.items, st.users, U, data, key, *scalars,
                                       extra, loss=ng.squared_loss, poisson=False)

    grad = fast_gradient()
    opt_state = optimizer.init(params)
    draw = jax.jit(lambda k: ng.noise.normal(k, Vp.shape, jnp.float32))
    parts = {
        "gather U's rows once per item step, into fresh memory": lambda: gb.prepare_steps(
            st.items, None, U, st.weights, st.labels),
        "the same over the kept buffers (as noisy_gd does)": prepare_reused,
        "per step: residual pass (batched mat-vec)": lambda: residual_pass(Vp, data),
        "per step: per-user norms (scatter of nnz r²) and clip": lambda: norms_scatter(r),
        "per step: clipped rows pass (batched vec-mat)": lambda: rows_pass(r, scale, data),
        "per step: whole noisy gradient (both passes, noise, λ, α0)": fast_gradient,
        "per step: noise draw (m × d 64-bit normals)": lambda: draw(key),
        "per step: adam update": lambda: ng._apply_optimizer(optimizer, grad, opt_state,
                                                              params),
    }
    part = best_of(parts, a.rounds)

    # the default path's iteration, part by part on the same inputs, and whole
    noise_t = gd.method.noise(gd.plan.iterations[0].item)
    whole = {
        "user step (cg, warm)": lambda: gd.steps.solve_users(V, U),
        "noisy Gramian": lambda: gd.steps.released_gramian(U, jax.random.key(3), 1.0),
        "item step (noisy GD)": lambda: gd.steps.item_step.update(
            gd.state.item_state, V, U, key, noise_t, extra, gd.n_norm)[0],
    }
    iteration_parts = best_of(whole, a.rounds)
    for t in range(2, gd.cfg.iterations):
        for k, run in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(iterate(run, t).V)
            its[k].append(time.perf_counter() - t0)
    iteration = {k: min(v[2:]) for k, v in its.items()}
    load1 = os.getloadavg()

    print(f"\nparts of one pre-gathered noisy-GD step (best of {a.rounds}):")
    for k, v in part.items():
        print(f"  {k:<58} {v * 1e3:8.1f} ms")
    print(f"\nitem step per iteration (best of {a.rounds}, same U, one process):")
    for k, v in best.items():
        print(f"  {k:<16} {v:7.2f} s   {v / best['ssp']:5.2f}× SSP   (first call: "
              f"{first[k]:.1f} s)")
    print(f"  speed-up of the noisy-GD item step: "
          f"{best['gd blocked'] / best['gd pre-gathered']:.2f}×")
    print(f"\nthe default path's iteration, part by part (best of {a.rounds}):")
    tot = sum(iteration_parts.values())
    for k, v in iteration_parts.items():
        print(f"  {k:<24} {v:7.2f} s  ({100 * v / tot:4.1f}%)")
    print("whole iterations as fit runs them (best of iterations 3..; the first two compile):")
    for k, v in iteration.items():
        print(f"  {k:<8} {v:7.2f} s   {v / iteration['ssp']:5.2f}× SSP   (all: "
              + ", ".join(f"{x:.2f}" for x in its[k]) + ")")
    print(f"load average: {load0} at the start, {load1} at the end")
    return {"item_step": best, "parts": part, "iteration_parts": iteration_parts,
            "iteration": iteration, "relative_difference": rel, "load": [load0, load1]}


if __name__ == "__main__":
    main()
