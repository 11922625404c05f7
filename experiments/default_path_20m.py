#!/usr/bin/env python
"""The default private path's iteration at ML-20M scale (issue 29's "≤ 10 s at d = 64").

``dpmt train``'s config (TrainConfig defaults, auto settings resolved by fit's own
:func:`dpmt.train.training_run.setup`) at d = 64, ε = 5, on the ML-20M-like synthetic of the
benchmark (:func:`benchmarks.bench.make_dataset`: 20,000,263 interactions, 26,744 items);
each iteration timed whole with :func:`dpmt.train.loop.iterate` (the first two also compile:
the first user step is exact, the second compiles the CG one). A benchmark: the noise is
reproducible, nothing is published.

    .venv/bin/python experiments/default_path_20m.py --json experiments/default_path_20m.json
        [--compare-blocked] [--devices auto|N]

Measured 2026-12-04 with U's rows pre-gathered (``experiments/default_path_20m.json``, load
3-5 on the 2 shared cores): steady iteration 23.9 s (17.3 s in an earlier run), peak RSS
8.3 GB; item step 8.6 s pre-gathered against 33.9 s blocked (the parent kernel), user step
3.8 s. Before (20 steps, load ~2): 46.6 s.

2026-12-05, AMD EPYC 2 cores, quiet, noisy GD pre-gathered on a mesh: ``--devices auto`` (2)
steady 7.58 s (``experiments/default_path_20m_auto.json``), ``--devices 1`` 10.58 s
(``experiments/default_path_20m_1dev.json``); peak RSS 8.6 / 8.2 GB.

2026-12-06 00:00, Intel Xeon 2 cores, ``--devices auto``, back to back: ``--user-cg-steps 8``
(the old default) steady 10.54 s (``experiments/default_path_20m_auto_usercg8.json``), the
default 3 steps 9.25 s (``experiments/default_path_20m_auto_usercg3.json``; 8.81 s in a run
just before); peak RSS 8.6 GB.

2026-12-06 05:30, the same machine type, ``--devices auto``, back to back: the parent commit
e20ecd4 (10 steps, one dispatch per step) steady 7.26 s (``experiments/default_path_20m_auto_
parent_e20ecd4.json``), this tree (8 steps in one compiled loop) 5.74 s (``..._auto_s8_run2.
json``; 5.52 s a few minutes before, ``..._auto_s8.json``); peak RSS 8.5 GB.

2026-12-07 01:40, the same machine type, ``--devices auto``, back to back: 6 steps (the rule
since that day) steady 5.81 s (``experiments/default_path_20m_auto_s6.json``), then 8 steps
(``FAST_STEPS`` patched to 8 in the same command, ``python -c``) 7.00 s
(``..._auto_s8_20261207.json``); peak RSS 8.7 GB.

2026-12-07 13:15, AMD EPYC 2 cores, ``--devices auto``, 6 steps: steady 6.20 s
(``experiments/default_path_20m_auto_s6_epyc.json``), peak RSS 8.7 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interactions", type=int, default=20_000_263)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--epsilon", type=float, default=5.0)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--json", default=None)
    ap.add_argument("--compare-blocked", action="store_true",
                    help="then time the user step, and the item step on the last U with "
                         "U's rows pre-gathered (the default) and without "
                         "(gd_blocks.PREGATHER_BYTES = 0: the parent kernel), interleaved, "
                         "best of 2")
    ap.add_argument("--devices", default="auto",
                    help="devices to shard over: auto (as `dpmt train`: one CPU host device "
                         "per core, at most 4) or a number")
    ap.add_argument("--user-cg-steps", type=int, default=None,
                    help="the CG user step's steps (default TrainConfig's)")
    args = ap.parse_args(argv)
    from dpmt.solvers.sharding import auto_devices, request_auto_devices, request_devices

    if args.devices == "auto":
        request_auto_devices()           # before JAX starts, as the CLI does
    else:
        request_devices(int(args.devices))
    import jax

    from benchmarks.bench import make_dataset
    from benchmarks.bench_implicit import default_config
    from dpmt.config import ExecutionConfig
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.train.loop import iterate
    from dpmt.train.training_run import setup

    t0 = time.perf_counter()
    train = make_dataset(args.interactions)
    t_data = time.perf_counter() - t0
    cfg = default_config(args.dim, args.epsilon, repeats=args.iterations - 2,
                         user_cg_steps=args.user_cg_steps)
    t0 = time.perf_counter()
    devices = auto_devices() if args.devices == "auto" else int(args.devices)
    run = setup(train, cfg, execution=ExecutionConfig(progress=False, devices=devices),
                noise=NoiseSource.from_seed(0))
    t_setup = time.perf_counter() - t0
    secs = []
    for t in range(run.model_cfg.iterations):
        t0 = time.perf_counter()
        iterate(run, t)
        jax.block_until_ready(run.state.V)
        secs.append(time.perf_counter() - t0)
        print(f"iteration {t}: {secs[-1]:.2f} s", flush=True)
    import resource

    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # the iterations'
    parts = {}
    if args.compare_blocked:
        from dpmt.solvers import gd_blocks as gb

        U, V = run.U, run.state.V
        noise_t = run.method.noise(run.plan.iterations[0].item)
        extra = run.cfg.gravity * run.steps.released_gramian(U, jax.random.key(7), 1.0)
        budgets = {"pre-gathered": gb.PREGATHER_BYTES, "blocked": 0}
        parts = {k: float("inf") for k in budgets}
        parts["user step (cg)"] = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            jax.block_until_ready(run.steps.solve_users(V, U))
            parts["user step (cg)"] = min(parts["user step (cg)"], time.perf_counter() - t0)
            for k, b in budgets.items():
                old, gb.PREGATHER_BYTES = gb.PREGATHER_BYTES, b
                t0 = time.perf_counter()
                jax.block_until_ready(run.steps.item_step.update(
                    run.state.item_state, V, U, jax.random.key(1), noise_t, extra,
                    run.n_norm)[0])
                parts[k] = min(parts[k], time.perf_counter() - t0)
                gb.PREGATHER_BYTES = old
                print(f"item step {k}: {parts[k]:.2f} s", flush=True)
        print(f"user step (cg): {parts['user step (cg)']:.2f} s", flush=True)
    m = run.model_cfg
    res = {"interactions": int(train.nnz), "users": int(train.n_users),
           "items": int(train.n_items), "dim": args.dim, "epsilon": args.epsilon,
           "solver": m.solver, "user_solve": m.user_solve, "weights": m.weights,
           "gd_steps": m.gd.steps, "user_cg_steps": m.user_cg_steps, "devices": devices,
           "data_seconds": t_data, "setup_seconds": t_setup,
           "iteration_seconds": secs, "steady_iteration_seconds": min(secs[2:] or secs),
           "peak_rss_bytes": peak_rss, "parts_seconds": parts,
           "load_average": os.getloadavg()}
    print(json.dumps(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
