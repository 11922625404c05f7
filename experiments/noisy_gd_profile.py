"""Where noisy GD's item step spends its time, and what it costs against SSP's (issue 29,
"the default path fast").

Builds the synthetic data (``make_synthetic``; default 50k users × 5k items, 2.4M
positives), runs fit's own setup (:func:`dpmt.train.training_run.setup`) for the default
solver (noisy GD: 20 steps, Adam, G = 0.2, per-user clipping) and for SSP at the same ε, d and
weights, solves the users once, and then times on the same U, in one process, interleaved,
best of ``rounds``:

* ``gd old``: the item step as the parent commit ran it — ``steps`` calls of
  :func:`dpmt.solvers.noisy_gd.make_noisy_gd_step` (whole chunks of user rows gathered twice per
  step, the per-user norms by a scatter over the task layout, weights and labels gathered at
  every step);
* ``gd new``: the method's item step as ``fit`` runs it now
  (:func:`dpmt.solvers.gd_blocks.fast_clipped_sum`: per-call slot data, norms as row sums over
  the user layout, clipped rows in cache-sized blocks);
* ``ssp``: SSP's item step (statistics, noise, solves);

and the parts of one step (the old clipped sum; the new norms pass, rows pass, noise and
release; Adam). It checks that the old and new item steps give the same V from the same key
(float32 summation order only).

    python experiments/noisy_gd_profile.py [--users 50000] [--items 5000]
        [--interactions 2400000] [--dim 64] [--epsilon 5] [--rounds 3]

Measured 2026-12-03 on the 2 shared cores (others' jobs running: load 2-7, so absolute
seconds vary ~1.5x between runs; the ratios are within one run), defaults, best of 3:

    item step        gd old           gd new          ssp      old/new
    run 1            20.94 s (23.1x)  7.98 s (8.8x)   0.91 s   2.63x
    run 2            15.61 s (17.7x)  7.85 s (8.9x)   0.88 s   1.99x
    run 3 (quiet)     8.27 s (17.4x)  4.22 s (8.9x)   0.48 s   1.96x
    whole iteration (user step + Ĝ_U + item step): gd 12.20 / 8.77 / 5.01 s, ssp 3.53 /
    1.56 / 0.94 s (run 3: 5.3x SSP; the parent's ≈ 5.01 − 4.22 + 8.27 = 9.1 s, 9.6x)
    parts of one step (run 3): old clipped sum 309 ms; new norms pass 84 ms, clipped rows
    143 ms, whole noisy gradient 212 ms; per-call slot data 14 ms.
    parts of one step (run 2): old clipped sum 888 ms; new norms pass 164 ms (over the task
    layout instead: 233 ms), clipped rows pass 262 ms, whole noisy gradient 395 ms; noise
    draw 2.3 ms; Adam 2.5 ms; per-call slot data 100 ms (once per item step).
    max |V_new − V_old| / max |V_old| = 1.2e-5 (float32 summation order).

The time is in the two gathers of a d-vector per rating and step (XLA:CPU gathers rows at
~25-30 ns each, however small the table): the 20 steps of one item step read every rating's
u_j and v_i 20 times each, where SSP's statistics read u_j once and spend the rest in a
batched product.
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--no-old", action="store_true", help="skip the parent commit's step")
    a = p.parse_args(argv)

    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.data.synthetic import make_synthetic
    from dpmt.solvers import encoders
    from dpmt.solvers import gd_blocks as gb
    from dpmt.solvers import noisy_gd as ng
    from dpmt.train.training_run import setup

    t0 = time.perf_counter()
    train = make_synthetic(n_users=a.users, n_items=a.items, n_interactions=a.interactions,
                           seed=0)
    print(f"data: {train.n_users} users, {train.n_items} items, {train.nnz} ratings "
          f"({time.perf_counter() - t0:.1f}s)", flush=True)
    ex = ExecutionConfig(progress=False)
    runs = {}
    for solver in ("gd", "ssp"):
        cfg = TrainConfig(dim=a.dim, solver=solver, weights=a.weights,
                          privacy=dict(epsilon=a.epsilon, noise_seed=0))
        runs[solver] = setup(train, cfg, execution=ex)
    gd, ssp = runs["gd"], runs["ssp"]
    g = gd.cfg.gd
    print(f"noisy GD: {g.steps} steps, {g.optimizer} lr {g.learning_rate}, G = {g.clip}, "
          f"λ = {gd.steps.cfg.reg}, α0 = {gd.cfg.gravity}; task layout padding "
          f"{gd.steps.items.padding_overhead:.3f}, user layout "
          f"{gd.steps.users.padding_overhead:.3f}", flush=True)
    U = jax.block_until_ready(gd.steps.solve_users(gd.state.V, None))
    from dpmt.solvers.ssp import noisy_gramian

    extra = gd.cfg.gravity * noisy_gramian(U, jax.random.key(7), 1.0)
    key = jax.random.key(1)

    def item_step(run):
        noise_t = run.method.noise(run.plan.iterations[0].item)

        def f():
            return run.steps.item_step.update(run.state.item_state, run.state.V, U, key,
                                              noise_t, extra, run.n_norm)[0]
        return f

    st = gd.steps
    from dpmt.solvers.layout import task_layout

    # the parent commit's fit built GD a plain task layout (no segments)
    plain = st.items if st.items.segments is None else task_layout(train, dim=a.dim)
    print(f"task layout: {len(st.items.buckets)} buckets"
          + ("" if st.items.segments is None else
             f" + segments of {st.items.segments.width} ({len(st.items.long_rows)} long rows)")
          + f"; the parent's plain layout: {len(plain.buckets)} buckets, padding "
          f"{plain.padding_overhead:.3f}", flush=True)
    z = gd.method.noise(gd.plan.iterations[0].item).gd_multiplier
    enc = encoders.EmbeddingEncoder(n_items=train.n_items, dim=a.dim)
    import optax

    optimizer = getattr(optax, g.optimizer)(g.learning_rate)
    scalars = (jnp.float32(g.clip), jnp.float32(z), jnp.float32(1.0), jnp.float32(st.cfg.reg),
               jnp.float32(gd.n_norm))

    def old_item_step():
        """The parent commit's noisy_gd loop on the embedding path."""
        params = encoders.embedding_params(gd.state.V)
        opt_state = optimizer.init(params)
        step = ng.make_noisy_gd_step(enc, optimizer, path="embedding", poisson=False)
        for t in range(g.steps):
            params, opt_state = step(params, opt_state, plain, U, st.weights, st.labels,
                                     jax.random.fold_in(key, t), *scalars, extra)
        return encoders.item_embeddings(enc, params)

    fns = {"gd new": item_step(gd), "ssp": item_step(ssp)}
    if not a.no_old:
        fns = {"gd old": old_item_step, **fns}
    first = {}
    for k, f in fns.items():
        t = time.perf_counter()
        out = np.asarray(f())
        first[k] = time.perf_counter() - t
        if k == "gd new":
            V_new = out
        if k == "gd old":
            V_old = out
    if not a.no_old:
        print(f"max |V_new − V_old| / max |V_old| = "
              f"{np.abs(V_new - V_old).max() / np.abs(V_old).max():.1e}", flush=True)
    best = best_of(fns, a.rounds)

    # the parts of one step, on the V the item step starts from
    params = encoders.embedding_params(gd.state.V)
    V = params["params"]["embedding"]
    data = gb.prepare_steps(st.items, st.users, U, st.weights, st.labels)
    sq = gb.user_sq_sums(V, st.users, U, data.users)
    scale = g.clip / jnp.maximum(jnp.sqrt(sq * data.x_sq), g.clip)
    opt_state = optimizer.init(params)
    norms_users = jax.jit(gb.user_sq_sums)
    norms_items = jax.jit(gb.item_sq_sums)
    rows = jax.jit(gb.clipped_item_rows)
    draw = jax.jit(lambda k: ng.noise.normal(k, V.shape, jnp.float32))

    def fast_gradient():
        return ng._fast_noisy_gradient(enc, params, st.items, st.users, U, data, key, *scalars,
                                       extra, loss=ng.squared_loss, poisson=False)

    grad = fast_gradient()
    parts = {
        "old: clipped sum (whole chunks, scatter)": lambda: ng.clipped_gradient_sum(
            enc, params, plain, U, st.weights, st.labels, g.clip),
        "new: per-call slot data (prepare_steps, once per call)": lambda: gb.prepare_steps(
            st.items, st.users, U, st.weights, st.labels),
        "new: norms pass (user layout)": lambda: norms_users(V, st.users, U, data.users),
        "new: norms pass over the task layout instead": lambda: norms_items(
            V, st.items, U, data.items),
        "new: clipped rows pass": lambda: rows(V, st.items, U, data.items, scale),
        "new: whole noisy gradient (both passes, noise, λ, α0)": fast_gradient,
        "noise draw (m × d 64-bit normals)": lambda: draw(key),
        "adam update": lambda: ng._apply_optimizer(optimizer, grad, opt_state, params),
    }
    part = best_of(parts, a.rounds)

    # whole iterations as fit runs them (user step, Ĝ_U, item step), interleaved; the first
    # compiles, the best of the others counts
    from dpmt.train.loop import iterate

    its = {k: [] for k in runs}
    for t in range(min(gd.cfg.iterations, ssp.cfg.iterations)):
        for k, run in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(iterate(run, t).V)
            its[k].append(time.perf_counter() - t0)
    iteration = {k: min(v[1:]) if len(v) > 1 else v[0] for k, v in its.items()}
    print(f"\nparts of one noisy-GD step (best of {a.rounds}):")
    for k, v in part.items():
        print(f"  {k:<56} {v * 1e3:8.1f} ms")
    print(f"\nitem step per iteration (best of {a.rounds}, same U, one process):")
    for k, v in best.items():
        print(f"  {k:<8} {v:7.2f} s   {v / best['ssp']:5.2f}× SSP   (first call, compiling: "
              f"{first[k]:.1f} s)")
    if "gd old" in best:
        print(f"  speed-up of the noisy-GD item step: {best['gd old'] / best['gd new']:.2f}×")
    print("whole iteration as fit runs it (user step + Ĝ_U + item step; best of iterations "
          "2.., the first compiles):")
    for k, v in iteration.items():
        print(f"  {k:<8} {v:7.2f} s   {v / iteration['ssp']:5.2f}× SSP   (all: "
              + ", ".join(f"{x:.2f}" for x in its[k]) + ")")
    return {"item_step": best, "parts": part, "iteration": iteration}


if __name__ == "__main__":
    main()
