#!/usr/bin/env python
"""One short GPU benchmark (issue 29's GPU row): the default private path and SSP at ML-20M scale.

On the ML-20M-like synthetic of the benchmark (:func:`benchmarks.bench.make_dataset`:
20,000,263 interactions, 138,493 users, 26,744 items), d = 64, ε = 5, each row a run made by
fit's own :func:`dpmt.train.training_run.setup` and timed by fit's own iteration,
:func:`dpmt.train.loop.iterate` (blocked with ``jax.block_until_ready``):

* ``dpmt_private_default``: the default path, ``dpmt train --dim 64 --epsilon 5``
  (:func:`benchmarks.bench_implicit.default_config`);
* ``dpmt_private_cg``: the benchmark's SSP config (``bench_once``'s: solver ssp, adaptive
  weights, λ = 1, TrainConfig's item and user solves), as
  :func:`benchmarks.bench_implicit.private_runs` makes it;
* ``dpmt_nonprivate_cg``: the non-private ALS iteration of ``dpmt bench --against implicit``
  (user step, exact Gramian, item step without noise, on the SSP run's steps; CG item and user
  solves warm-started from an exact U), no setup of its own.

Each row: :data:`~benchmarks.bench_implicit.PRIVATE_WARMUP` untimed iterations (the first
compiles and runs an exact user step, the second compiles the CG one), then ``--timed``
timed ones (best and all reported). Also measured in the same process, as the "peak" the rows
can be reported against: a dense ``n × n @ n × n`` matmul (bf16, float32 at JAX's default
precision — which XLA may run as TF32 on NVIDIA GPUs, as it may dpmt's own float32 products —
and float32 at HIGHEST), best and mean of ``--matmul-reps`` after warm-up.

The JSON (``<out>/gpu_default_path.json``) is rewritten after every phase, so a run cut short
still returns its rows: ``--budget-s``: no row or timed iteration starts past it (a row that
starts times at least one iteration), nor a row whose estimated cost (the last row's) would
end past ``--hard-s``; ``--hard-s``: a watchdog writes what was done and exits 3. A benchmark:
the noise is reproducible (NoiseSource.from_seed), nothing is published.

    # locally, small (CPU):
    JAX_PLATFORMS=cpu PYTHONPATH=. .venv/bin/python experiments/gpu_default_path.py \\
        --interactions 200000 --out /tmp/gpu_bench
    # on the GPU machine (full size, the default), dp-accounting and dm-tree carried as wheels
    # (their pins, e.g. attrs<24, would make pip reach for a registry: install --no-deps):
    python3 -m pip install -q --no-index --no-deps --target /tmp/site WHEELS/*.whl
    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false \
        python3 experiments/gpu_default_path.py --out $OUT --budget-s 270 --hard-s 360
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import statistics
import sys
import threading
import time

T0 = time.perf_counter()
RESULT_NAME = "gpu_default_path.json"
ROWS = ("default", "ssp", "nonprivate")


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", flush=True)


class Recorder:
    """The result dict, written (atomically) to ``<out>/gpu_default_path.json`` on every
    :meth:`save`; the watchdog saves it too."""

    def __init__(self, out_dir: str):
        os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, RESULT_NAME)
        self.data: dict = {"schema": 1, "complete": False, "skipped": [], "errors": {}}
        self._lock = threading.Lock()

    def save(self, **extra) -> None:
        with self._lock:
            self.data.update(extra)
            self.data["elapsed_seconds"] = time.perf_counter() - T0
            try:
                text = json.dumps(self.data, indent=1, default=str)
            except (TypeError, ValueError, RuntimeError) as e:   # mutated while dumping
                text = json.dumps({"error": f"could not serialise: {e}"})
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, self.path)


def _stats(seconds: list[float]) -> dict:
    return {"best": min(seconds), "median": statistics.median(seconds), "all": seconds}


def environment() -> dict:
    import jax
    import jaxlib
    import numpy as np

    out = {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", "?"),
           "numpy": np.__version__, "python": platform.python_version(),
           "platform": platform.platform(), "cores": os.cpu_count(),
           "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
           "device_kind": [getattr(d, "device_kind", "?") for d in jax.devices()],
           "default_matmul_precision": str(jax.config.jax_default_matmul_precision),
           "env": {k: os.environ.get(k) for k in ("XLA_PYTHON_CLIENT_PREALLOCATE",
                                                  "XLA_PYTHON_CLIENT_MEM_FRACTION",
                                                  "XLA_FLAGS", "JAX_PLATFORMS",
                                                  "DPMT_LAPACK_THREADS")}}
    try:
        import dp_accounting

        out["dp_accounting"] = getattr(dp_accounting, "__version__", "?")
    except Exception as e:  # noqa: BLE001 - recorded; setup will fail loudly
        out["dp_accounting"] = f"import failed: {e!r}"
    try:
        out["memory_stats"] = {k: v for k, v in (jax.devices()[0].memory_stats() or {}).items()
                               if k in ("bytes_limit", "bytes_in_use", "peak_bytes_in_use")}
    except Exception:  # noqa: BLE001 - CPU devices have none
        pass
    return out


def matmul_peak(n: int, reps: int) -> dict:
    """Dense ``n × n @ n × n`` throughput in FLOP/s: bf16, float32 (default precision: XLA
    may use TF32 on NVIDIA GPUs), float32 at HIGHEST; each 2 warm-up products, then ``reps``
    products timed one by one (``best``) and ``reps`` back to back (``mean``)."""
    import jax
    import jax.numpy as jnp

    out = {"n": n, "reps": reps}
    key = jax.random.key(0)
    for name, dtype, prec in (("bf16", jnp.bfloat16, None), ("f32_default", jnp.float32, None),
                              ("f32_highest", jnp.float32, jax.lax.Precision.HIGHEST)):
        a = jax.random.normal(key, (n, n), jnp.float32).astype(dtype)
        b = jax.random.normal(jax.random.fold_in(key, 1), (n, n), jnp.float32).astype(dtype)
        f = jax.jit(lambda x, y, prec=prec: jnp.matmul(x, y, precision=prec))
        for _ in range(2):
            jax.block_until_ready(f(a, b))
        one = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready(f(a, b))
            one.append(time.perf_counter() - t)
        t = time.perf_counter()
        outs = [f(a, b) for _ in range(reps)]
        jax.block_until_ready(outs)
        mean = (time.perf_counter() - t) / reps
        del outs, a, b
        flop = 2.0 * n ** 3
        out[name] = {"best_flops": flop / min(one), "mean_flops": flop / mean,
                     "best_seconds": min(one), "mean_seconds": mean}
        log(f"matmul {name} {n}^3: best {flop / min(one) / 1e12:.1f} TFLOP/s, "
            f"back-to-back mean {flop / mean / 1e12:.1f} TFLOP/s")
    return out


def _config_dict(cfg) -> dict:
    """The config's settings by their flat names (for the JSON)."""
    return cfg.flat_dict()


def layout_sizes(steps) -> dict:
    out = {}
    for name in ("items", "users"):
        lay = getattr(getattr(steps, name), "layout", getattr(steps, name))
        try:
            out[name] = {"padded_slots": int(lay.padded_slots), "nnz": int(lay.nnz),
                         "buckets": len(lay.buckets)}
        except Exception:  # noqa: BLE001 - informative only
            pass
    return out


def time_private(run, timed: int, warmup: int, deadline: float, key: str, rec: Recorder):
    """``warmup`` + ``timed`` iterations of ``run`` by :func:`dpmt.train.loop.iterate`, each
    blocked; stops timing once ``deadline`` (perf_counter) has passed."""
    import jax

    from dpmt.train.loop import iterate

    row = rec.data["rows"][key]
    row.update(warmup_seconds=[], seconds=[])
    for t in range(warmup + timed):
        if t >= warmup and row["seconds"] and time.perf_counter() > deadline:
            rec.data["skipped"].append(f"{key}: iterations after {t} (budget)")
            log(f"{key}: budget reached, stopping after {t} iterations")
            break
        t0 = time.perf_counter()
        jax.block_until_ready(iterate(run, t).V)
        sec = time.perf_counter() - t0
        (row["warmup_seconds"] if t < warmup else row["seconds"]).append(sec)
        log(f"{key}: iteration {t} {'(warm-up) ' if t < warmup else ''}{sec:.3f} s")
        if row["seconds"]:
            row.update(_stats(row["seconds"]))
        rec.save()
    from dpmt.train.loop import run_epsilon

    t0 = time.perf_counter()
    row["epsilon_spent"] = float(run_epsilon(run))
    row["accounting_seconds"] = time.perf_counter() - t0   # inside each iteration's time too


def time_nonprivate(run, timed: int, deadline: float, key: str, rec: Recorder):
    """``dpmt bench --against implicit``'s ``dpmt_nonprivate_cg`` row on ``run``'s steps (the
    SSP run: same layouts and weights): user step from ``U_start`` (the exact U at V), the
    exact Gramian term, the item step without noise. One untimed warm-up (compiles)."""
    import jax

    from dpmt.solvers.ssp import gramian
    from dpmt.solvers.steps import ItemNoise, ssp_item_step

    steps = run.steps
    cfg = steps.cfg.replace(user_solve="cg", ssp=dict(item_solve="cg"))
    st = dataclasses.replace(steps, cfg=cfg)
    st.item_step = ssp_item_step(st)
    exact = dataclasses.replace(steps, cfg=cfg.replace(user_solve="exact"))
    V = run.state.V
    n_users = float(run.train.n_users)
    t0 = time.perf_counter()
    U_start = jax.block_until_ready(exact.solve_users(V))
    row = rec.data["rows"][key]
    row.update(solves={"item_solve": cfg.ssp.item_solve, "user_solve": cfg.user_solve,
                       "cg_steps": cfg.item_cg_steps, "reg": cfg.reg, "gravity": cfg.gravity},
               exact_user_step_seconds_with_compile=time.perf_counter() - t0,
               warmup_seconds=[], seconds=[])

    def one():
        U = st.solve_users(V, U_start)
        extra = cfg.gravity * gramian(U) if cfg.gravity > 0 else None
        V_new, _ = st.item_step.update(st.item_step.init(None, V), V, U, None, ItemNoise(),
                                       extra, n_users)
        return V_new

    for t in range(1 + timed):
        if t >= 1 and row["seconds"] and time.perf_counter() > deadline:
            rec.data["skipped"].append(f"{key}: iterations after {t} (budget)")
            break
        t0 = time.perf_counter()
        jax.block_until_ready(one())
        sec = time.perf_counter() - t0
        (row["warmup_seconds"] if t < 1 else row["seconds"]).append(sec)
        log(f"{key}: iteration {t} {'(warm-up) ' if t < 1 else ''}{sec:.3f} s")
        if row["seconds"]:
            row.update(_stats(row["seconds"]))
        rec.save()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".", help="directory of the JSON (the device's $OUT)")
    ap.add_argument("--interactions", type=int, default=20_000_263)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--epsilon", type=float, default=5.0)
    ap.add_argument("--timed", type=int, default=3, help="timed iterations per row")
    ap.add_argument("--rows", default=",".join(ROWS),
                    help=f"comma-separated subset of {','.join(ROWS)} (nonprivate needs ssp)")
    ap.add_argument("--matmul-n", type=int, default=None,
                    help="matmul size (default 8192 on GPU/TPU, 1024 on CPU; 0: skip)")
    ap.add_argument("--matmul-reps", type=int, default=10)
    ap.add_argument("--precision", default=None, choices=("default", "high", "highest"),
                    help="jax_default_matmul_precision for the whole run (default: JAX's own, "
                         "which on NVIDIA GPUs may run float32 products as TF32)")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="no phase or timed iteration starts after this many seconds")
    ap.add_argument("--hard-s", type=float, default=None,
                    help="watchdog: write the JSON and exit 3 after this many seconds "
                         "(default budget + 120)")
    args = ap.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    bad = set(rows) - set(ROWS)
    if bad or ("nonprivate" in rows and "ssp" not in rows):
        ap.error(f"--rows: {sorted(bad) or 'nonprivate needs ssp'}")
    deadline = T0 + args.budget_s
    rec = Recorder(args.out)
    rec.data.update(args=vars(args), interactions_requested=args.interactions)

    hard = args.hard_s if args.hard_s is not None else args.budget_s + 120

    def watchdog():
        log(f"watchdog: {hard:.0f} s passed; writing the JSON and exiting")
        rec.data["errors"]["watchdog"] = f"killed after {hard:.0f} s"
        rec.save()
        os._exit(3)

    dog = threading.Timer(max(1.0, hard - (time.perf_counter() - T0)), watchdog)
    dog.daemon = True
    dog.start()

    import jax

    if args.precision:
        jax.config.update("jax_default_matmul_precision", args.precision)
    rec.data["environment"] = environment()
    rec.data["import_seconds"] = time.perf_counter() - T0
    log(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.devices()}")
    rec.save()

    n_mm = args.matmul_n if args.matmul_n is not None else (
        1024 if jax.default_backend() == "cpu" else 8192)
    if n_mm > 0:
        t0 = time.perf_counter()
        try:
            rec.data["matmul_peak"] = matmul_peak(n_mm, args.matmul_reps)
        except Exception as e:  # noqa: BLE001 - the rows matter more
            rec.data["errors"]["matmul_peak"] = repr(e)
            log(f"matmul peak failed: {e!r}")
        rec.data["matmul_seconds"] = time.perf_counter() - t0
        rec.save()

    from benchmarks.bench import make_dataset
    from benchmarks.bench_implicit import (PRIVATE_WARMUP, default_config, run_description)
    from dpmt.config import ExecutionConfig
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.train.training_run import setup

    t0 = time.perf_counter()
    train = make_dataset(args.interactions)
    t_data = time.perf_counter() - t0
    rec.data["dataset"] = {"name": "synthetic-ml-20m (make_synthetic_like, seed 0)",
                           "interactions": int(train.nnz), "users": int(train.n_users),
                           "items": int(train.n_items), "generation_seconds": t_data}
    log(f"data: {train.n_users} users, {train.n_items} items, {train.nnz} interactions "
        f"({t_data:.1f} s)")
    rec.data["rows"] = {}
    rec.save()

    # the configs: the default path, and bench_once's SSP config as private_runs plans it
    # (TrainConfig's defaults at this d, ε and seed 0, solver ssp, adaptive weights, λ = 1,
    # TrainConfig's item and user solves), made from default_config so that it follows
    # TrainConfig's layout
    default_cfg = default_config(args.dim, args.epsilon, repeats=args.timed)
    ssp_cfg = default_cfg.replace(solver="ssp", weights="adaptive", reg=1.0,
                                  iterations=PRIVATE_WARMUP + args.timed)
    configs = {"default": ("dpmt_private_default", default_cfg),
               "ssp": (f"dpmt_private_{ssp_cfg.ssp.item_solve}", ssp_cfg)}
    ex = ExecutionConfig(progress=False, lapack_threads=0)
    ssp_run = None
    hard_deadline = T0 + hard

    def can_start(key: str, estimate: float) -> bool:
        """A row starts before the budget, and only if its estimated cost (the last private
        row's setup + warm-ups + one timed iteration) ends before the watchdog."""
        now = time.perf_counter()
        if now > deadline or now + estimate > hard_deadline - 10:
            why = "budget" if now > deadline else f"estimated {estimate:.0f} s would pass --hard-s"
            rec.data["skipped"].append(f"{key} ({why})")
            log(f"{key}: skipped ({why})")
            return False
        return True

    def row_cost(row: dict) -> float:
        return (row.get("setup_seconds", 0.0) + sum(row.get("warmup_seconds", ()))
                + (row.get("seconds") or [0.0])[0])

    estimate = 0.0
    for name in [r for r in rows if r in configs]:
        key, cfg = configs[name]
        if not can_start(key, estimate):
            continue
        rec.data["rows"][key] = row = {"config_given": _config_dict(cfg)}
        try:
            t0 = time.perf_counter()
            run = setup(train, cfg, execution=ex, noise=NoiseSource.from_seed(0))
            jax.block_until_ready((run.steps.weights, run.state.V))
            row["setup_seconds"] = time.perf_counter() - t0
            row["run"] = run_description(run)
            row["layouts"] = layout_sizes(run.steps)
            log(f"{key}: setup {row['setup_seconds']:.1f} s; {row['run']}")
            rec.save()
            time_private(run, args.timed, PRIVATE_WARMUP, deadline, key, rec)
            try:
                row["memory_stats_after"] = {
                    k: v for k, v in (jax.devices()[0].memory_stats() or {}).items()
                    if k in ("bytes_limit", "bytes_in_use", "peak_bytes_in_use")}
            except Exception:  # noqa: BLE001 - CPU devices have none
                pass
        except Exception as e:  # noqa: BLE001 - record it, go on with the next row
            import traceback

            rec.data["errors"][key] = traceback.format_exc()
            log(f"{key}: FAILED {e!r}")
            run = None
        rec.save()
        estimate = max(estimate, row_cost(row))
        if name == "ssp":
            ssp_run = run
        else:
            del run
        gc.collect()

    if "nonprivate" in rows:
        key = "dpmt_nonprivate_cg"   # as the bench names it (CG item and user solves)
        ssp_row = rec.data["rows"].get(configs["ssp"][0], {})
        if ssp_run is None:
            rec.data["skipped"].append(f"{key} (no SSP run)")
        elif can_start(key, ssp_row.get("warmup_seconds", [0.0])[0]
                       + 2 * ssp_row.get("best", 0.0)):
            rec.data["rows"][key] = {}
            try:
                time_nonprivate(ssp_run, args.timed, deadline, key, rec)
            except Exception as e:  # noqa: BLE001
                import traceback

                rec.data["errors"][key] = traceback.format_exc()
                log(f"{key}: FAILED {e!r}")
    del ssp_run
    gc.collect()

    best = {k: r["best"] for k, r in rec.data["rows"].items() if "best" in r}
    summary = {"best_iteration_seconds": best}
    default_key, ssp_key = configs["default"][0], configs["ssp"][0]
    if default_key in best and ssp_key in best:
        summary["ratio_default_over_ssp"] = best[default_key] / best[ssp_key]
    if ssp_key in best and "dpmt_nonprivate_cg" in best:
        summary["ratio_ssp_over_nonprivate"] = best[ssp_key] / best["dpmt_nonprivate_cg"]
    mm = rec.data.get("matmul_peak", {})
    for prec in ("bf16", "f32_default", "f32_highest"):
        if prec in mm:
            # an iteration's seconds in units of one n³ matmul at that precision
            summary[f"iteration_in_{prec}_matmuls"] = {
                k: v / mm[prec]["best_seconds"] for k, v in best.items()}
    rec.data["summary"] = summary
    dog.cancel()
    # complete: every row asked for ran all its iterations, without an error
    rec.save(complete=not rec.data["errors"] and not rec.data["skipped"])
    log("summary: " + json.dumps(summary))
    log(f"wrote {rec.path}")
    return 0 if not rec.data["errors"] else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
