"""Benchmarks of the private alternating-minimisation iteration (``dpmt bench``).

One measurement (:func:`bench_once`) builds a dataset (ML-20M-like synthetic data with
``--interactions`` ratings, or a real MovieLens file), then, as :func:`dpmt.train.loop.fit`
does, the calibrated privacy plan (:func:`dpmt.train.plan.make_plan`), the private counts,
the weights and the steps (:func:`dpmt.train.methods.make_steps`: one device or sharded,
chosen there), all by :func:`dpmt.train.training_run.setup`. It times each iteration end to
end as ``fit`` runs it, :func:`dpmt.train.loop.iterate` (``iteration``; the first, a warm-up,
compiles every kernel), and then, as a **breakdown of that same measurement**, each part of
the iteration again on that iteration's own inputs (same V, U, keys and noise; the parts'
V is checked against ``iterate``'s):

* the **user step** (``steps.solve_users``: batched Gram products and Cholesky solves, exact
  and unreleased),
* the noisy **Gramian** Ĝ_U,
* the **private item step** (SSP, Algorithm 1: weighted statistics, per-item noise, then
  the item solve dpmt uses by default, ``psd="cg"``: ``Â + sI`` by warm-started conjugate
  gradients), and the same step with another solve (``item_step_compare``: ``psd="shift"``,
  one checked Cholesky per item, or ``psd="project"``, Π(Â) by an eigendecomposition as in
  the reference, when timing shift; same inputs, timed right after it, with the relative
  difference of the two V's),
* one **noisy-GD step** (Algorithm 2, embedding encoder, per-user clipping) on the same
  layouts and weights,

each with the noise its release has in the plan. It counts the FLOPs each does from the
layout (formulas in :func:`item_step_flops`, :func:`user_step_flops`, :func:`gd_step_flops`;
also in BENCHMARKS.md) and divides the achieved FLOP/s by the dense float32 matmul throughput
measured in the same process (a jitted 4096² matmul, best of several, re-measured between
phases: the reference is the best of all samples, so the fractions are conservative on a
machine shared with other jobs). It also reports the compilations per iteration
(:func:`dpmt.solvers.layout.trace_count`: must be 0 after the first), a breakdown of the item
step on one device (statistics / noise / eigh / Cholesky, each timed alone on the same data),
the live device arrays and the process's peak resident memory (``ru_maxrss``; the suite runs
every size in its own subprocess, so each peak is that size's).

``dpmt bench --suite`` runs ML-100K and ML-20M-like subsets (1M, 5M, 20M interactions) at
d = 64 and 128 and writes one JSON per run, the tables in BENCHMARKS.md (below its
hand-written header) and a log-log plot of time against interactions with the fitted
exponents: :mod:`benchmarks.bench_report`.

``--against implicit`` (optional, only if the ``implicit`` package is installed) also times
one iteration of implicit's ALS (conjugate gradient and exact Cholesky solves) on the same
user × item CSR matrix, interleaved with dpmt's *non-private* iteration in the same process
(:func:`against_implicit`), and dpmt's *private* iterations — the SSP config above and the
**default path**, the config ``dpmt train`` runs at the same ε and d — each a run of fit's
own ``setup`` timed by ``iterate``, with every row's ratio to implicit's CG and exact
iterations.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_flops import (cholesky_flops, eigh_flops, gd_step_flops, item_step_flops,
                                   user_step_flops)
from benchmarks.bench_implicit import against_implicit, implicit_available, private_runs
from benchmarks.bench_report import (ML20M_INTERACTIONS, SCHEMA_VERSION, MatmulPeak,
                                     _status_bytes, live_device_bytes, load_results,
                                     machine_info, peak_rss_bytes, plot_scaling, reset_peak_rss,
                                     run_suite, summary_line, window_peak_rss_bytes,
                                     write_benchmarks_md)

#: ``dpmt bench`` (an entry point of the ``dpmt.commands`` group, see pyproject.toml)
HELP = "benchmarks: item/user/GD steps, FLOP/s against the measured matmul peak, peak memory"


def _devices_arg(s: str):
    """``--devices``: a count, or ``auto``."""
    if s.strip().lower() == "auto":
        return None
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--devices must be an integer or auto (got {s!r})"
                                         ) from None


def make_dataset(interactions: int | None, dataset: str = "synthetic-ml-20m",
                 data_dir: str = "data", seed: int = 0):
    """The benchmark's ratings: ``dataset`` is ``synthetic-ml-20m`` (make_synthetic_like
    ML-20M scaled to ``interactions``: users scale with it, items stay 26,744, Zipf item
    popularity and log-normal user activity like ML-20M) or a MovieLens name / ratings file
    (every rating is an interaction)."""
    from dpmt.data import load, make_synthetic_like

    if dataset == "synthetic" or dataset.startswith("synthetic:"):
        # a dpmt.data synthetic spec (synthetic:users=50000,items=5000,interactions=...):
        # the spec says its size; --interactions, if given, replaces its interactions
        spec = dataset
        if interactions:
            parts = [p for p in spec.partition(":")[2].split(",")
                     if p and not p.startswith("interactions=")]
            spec = "synthetic:" + ",".join(parts + [f"interactions={interactions}"])
        return load(spec, data_dir=data_dir, progress=False)
    if dataset.startswith("synthetic"):
        base = dataset.split("-", 1)[1] if "-" in dataset else "ml-20m"
        from dpmt.data.synthetic import DATASET_SIZES

        n = interactions or DATASET_SIZES[base][2]
        return make_synthetic_like(base, scale=n / DATASET_SIZES[base][2], seed=seed)
    return load(dataset, data_dir=data_dir, progress=False)


# ---------------------------------------------------------------------------------------
# One measurement
# ---------------------------------------------------------------------------------------
def _timed(fn):
    import jax

    t = time.perf_counter()
    out = fn()
    jax.block_until_ready(out)
    return out, time.perf_counter() - t


def _trace_diff(before: dict, after: dict) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0)}


def _base_layout(layout):
    """The :class:`~dpmt.solvers.layout.Layout` of a layout or of a ShardedLayout."""
    return getattr(layout, "layout", layout)


def _seconds_entry(seconds: list[float]) -> dict:
    """Timings of per-iteration ``seconds``: the first compiles; best and median of the rest."""
    import numpy as np

    rest = seconds[1:] or seconds[:1]
    best = float(min(rest))
    return {"seconds": best, "seconds_median": float(np.median(rest)),
            "compile_seconds": max(0.0, seconds[0] - best),
            "first_iteration_seconds": seconds[0]}


def _step_entry(seconds: list[float], fl: dict, peak: float) -> dict:
    """One step's JSON entry from its per-iteration ``seconds`` (:func:`_seconds_entry`) and
    its FLOP counts ``fl``, against the matmul ``peak``."""
    entry = _seconds_entry(seconds)
    best = entry["seconds"]
    return {**entry, "flops": fl["total"], "flops_real": fl["real"],
            "flops_detail": {k: v for k, v in fl.items() if k not in ("total", "real")},
            "achieved_flops": fl["total"] / best,
            "fraction_of_peak": fl["total"] / best / peak,
            "fraction_of_peak_real": fl["real"] / best / peak}


def _relative_difference(A, B) -> float:
    """‖A − B‖_F / ‖B‖_F (on the device)."""
    import jax.numpy as jnp

    return float(jnp.linalg.norm(A - B) / jnp.maximum(jnp.linalg.norm(B), 1e-30))


def _std(release) -> float:
    return 0.0 if release is None else float(release.noise_std)


def recompilations(traces: list[dict]) -> int:
    """Compilations after the first iteration of kernels compiled before (or twice): a
    kernel first used later — user_solve="cg"'s, from the second iteration, whose first user
    step is exact — compiles once there, and that is not a recompilation."""
    seen: set = set()
    n = 0
    for i, tr in enumerate(traces):
        for k, v in tr.items():
            if i:
                n += v if k in seen else v - 1
            seen.add(k)
    return int(n)


def bench_once(interactions: int | None = None, dim: int = 64, *,
               dataset: str = "synthetic-ml-20m", data_dir: str = "data", iterations: int = 2,
               gd: bool = True, breakdown: bool = True, seed: int = 0,
               epsilon: float = 5.0, devices: int = 1, matmul_size: int = 4096,
               item_solve: str | None = None, user_solve: str | None = None,
               user_cg_steps: int | None = None, compare: bool = True,
               against: str | None = None, against_repeats: int = 3,
               log=print) -> dict:
    """Measure one (dataset, d): see the module docstring. Returns the JSON-able result.

    ``item_solve``: the SSP item solve the iteration is timed with (default: TrainConfig's,
    ``"shift"``); ``compare``: also time the other one (``"project"``, the reference's
    Algorithm 1, when timing "shift"; ``"shift"`` otherwise) on the same inputs right after
    it (``item_step_compare``). ``user_solve``: the user step's solve (default TrainConfig's,
    exact; "cg" warm-starts from the previous iteration's U, as ``fit`` does);
    ``user_cg_steps``: its CG steps in every timed run (default TrainConfig's).
    ``against="implicit"``: also run :func:`against_implicit` (``against_repeats`` rounds)
    with the private runs of :func:`~benchmarks.bench_implicit.private_runs` (this SSP
    config and the default path, each set up afresh).

    The counts, weights, layouts and steps are :func:`dpmt.train.training_run.setup`'s, as
    in :func:`dpmt.train.loop.fit` (``devices > 1``: the user, item and noisy-GD steps
    row-sharded over that many devices; on CPU the devices must exist already, see
    :func:`run`). Each iteration is the library's :func:`dpmt.train.loop.iterate`, timed
    whole (``iteration``, ``iteration_seconds``); ``user_step``, ``gramian_seconds``,
    ``item_step`` and ``item_step_compare`` break that measurement down, each part re-run
    on the iteration's inputs right after it (``breakdown_seconds``: their sum;
    ``breakdown_relative_difference``: the parts' V against ``iterate``'s). The
    item-step breakdown (statistics / noise / solves) is a one-device measurement."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.solvers import layout as layout_mod
    from dpmt.solvers.ssp import noisy_gramian, spectral_shift
    from dpmt.solvers.steps import gd_item_step, ssp_item_step
    from dpmt.train.methods.noisy_gd import NOISY_GD
    from dpmt.train.loop import iterate
    from dpmt.train.methods.ssp import SSP
    from dpmt.train.plan import make_plan
    from dpmt.train.training_run import setup

    peak = MatmulPeak(matmul_size)
    peak.sample()
    t0 = time.perf_counter()
    train = make_dataset(interactions, dataset, data_dir, seed)
    t_data = time.perf_counter() - t0
    log(f"data: {train.n_users} users, {train.n_items} items, {train.nnz} interactions "
        f"({t_data:.1f}s)")
    # one warm-up iteration (compiles every kernel) + the timed ones, all planned and charged
    # the SSP item step (Algorithm 1) with adaptive weights is what the tables time, with the
    # default item solve unless told otherwise
    item_solve = item_solve or TrainConfig().ssp.item_solve
    user_solve = user_solve or TrainConfig().user_solve
    if user_cg_steps is None:
        user_cg_steps = TrainConfig().user_cg_steps
    other_solve = "project" if item_solve == "shift" else "shift"
    cfg = TrainConfig(dim=dim, iterations=iterations + 1, solver="ssp", weights="adaptive", reg=1.0,
                      user_solve=user_solve, user_cg_steps=user_cg_steps, data=dict(seed=seed),
                      ssp=dict(item_solve=item_solve),
                      privacy=dict(epsilon=epsilon))
    t0 = time.perf_counter()
    # counts, weights, layouts and steps: fit's own setup (a benchmark: reproducible noise on
    # purpose, its model is never published)
    run_ = setup(train, cfg, execution=ExecutionConfig(devices=devices, progress=False,
                                                        lapack_threads=0),
                 noise=NoiseSource.from_seed(seed))
    plan, steps, noisy_n, k_iter = run_.plan, run_.steps, run_.n_norm, run_.k_iter
    w = np.asarray(steps.weights)
    jax.block_until_ready((steps.items, steps.users, steps.weights))
    t_setup = time.perf_counter() - t0
    # counted on the layouts the steps run on (sharded: with their few pad rows)
    items, users = _base_layout(steps.items), _base_layout(steps.users)
    log(f"counts + weights + layouts: {t_setup:.1f}s; padding {items.padding_overhead:.3f} "
        f"(items), {users.padding_overhead:.3f} (users)")
    padding = {"items": items.padding_overhead, "users": users.padding_overhead,
               "item_buckets": len(items.buckets), "user_buckets": len(users.buckets),
               # long item rows cut into segments (one more kernel instance), or None
               "item_segment_width": None if items.segments is None else items.segments.width,
               "item_long_rows": int(len(items.long_rows))}
    fl_item = item_step_flops(items, dim, extra=cfg.gravity > 0, psd=item_solve)
    fl_other = item_step_flops(items, dim, extra=cfg.gravity > 0, psd=other_solve)
    # the same steps with the other item solve (same layouts, weights and inputs)
    other_steps = None
    if compare:
        other_steps = dataclasses.replace(steps, cfg=cfg.replace(ssp=dict(item_solve=other_solve)))
        other_steps.item_step = ssp_item_step(other_steps)
    other_diffs: list[float] = []
    fl_user = user_step_flops(users, train.n_items, dim)
    rows: list[dict] = []
    traces: list[dict] = []
    breakdown_diffs: list[float] = []
    rss_before = _status_bytes("VmRSS")
    window = reset_peak_rss()
    iterations_peak, steady_from, live = None, None, 0
    extra = None
    for t in range(iterations + 1):
        peak.sample()
        before = layout_mod.trace_count()
        # the measurement: iteration t as fit runs it (user step, noisy Gramian, item step,
        # the ledger's charge), on the inputs kept here for the breakdown
        V_in, U_in, state_in = run_.state.V, run_.U, run_.state.item_state
        V, t_iter = _timed(lambda: iterate(run_, t).V)
        U = run_.U
        # V_in, U_in, U and V alive: the live arrays of an iteration
        live = max(live, live_device_bytes({(peak.n, peak.n)}))
        # its breakdown: each part again on iteration t's inputs, keys and noise (the parts
        # after the user step read iterate's U, so they redo exactly iterate's work)
        rel = plan.iterations[t]
        k_gram, k_item = jax.random.split(jax.random.fold_in(k_iter, t))
        _, t_user = _timed(lambda: steps.solve_users(V_in, U_in))
        extra, t_gram = None, 0.0
        if rel.gramian is not None:
            G, t_gram = _timed(lambda: noisy_gramian(U, k_gram, rel.gramian.noise_std))
            extra = cfg.gravity * G
        noise = SSP.noise(rel.item)             # (Â, b̂)'s noise std
        (V_part, _), t_item = _timed(
            lambda: steps.item_step.update(state_in, V_in, U, k_item, noise, extra, noisy_n))
        breakdown_diffs.append(_relative_difference(V_part, V))
        del V_part
        row = {"iteration": t_iter, "user_step": t_user, "gramian": t_gram, "item_step": t_item}
        if other_steps is not None:
            (V_other, _), row["item_step_compare"] = _timed(
                lambda: other_steps.item_step.update(state_in, V_in, U, k_item, noise, extra,
                                                     noisy_n))
            if not bool(jnp.all(jnp.isfinite(V_other))):
                raise FloatingPointError(f"non-finite item embeddings (psd={other_solve!r})")
            other_diffs.append(_relative_difference(V_other, V))
            del V_other   # not part of the live arrays the memory model accounts for
        del V_in, U_in, state_in
        traces.append(_trace_diff(before, layout_mod.trace_count()))
        rows.append(row)
        if t == 0 and window:   # what the iterations hold once compiled (model check)
            iterations_peak = window_peak_rss_bytes()
            window = reset_peak_rss()
            steady_from = _status_bytes("VmRSS")
        log(f"iteration {t}: {t_iter:.2f}s (dpmt.train.loop.iterate); its breakdown: "
            + ", ".join(f"{k} {v:.2f}s" for k, v in row.items() if k != "iteration")
            + f"; compilations {traces[-1]}")
    peak.sample()

    def steady(name):
        xs = [r[name] for r in rows[1:]] or [rows[0][name]]
        return float(min(xs)), float(np.median(xs))

    P = peak.flops
    it0 = plan.iterations[0]
    out: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "dataset": dataset if not dataset.startswith("synthetic") else
        f"{train.name} (dpmt.data.load)" if dataset.startswith("synthetic:") else
        f"{dataset} (make_synthetic_like, seed {seed})",
        "n_users": int(train.n_users), "n_items": int(train.n_items),
        "interactions": int(train.nnz), "dim": int(dim), "devices": int(devices),
        "item_solve": item_solve, "user_solve": user_solve, "cg_steps": cfg.item_cg_steps,
        "user_cg_steps": cfg.user_cg_steps,
        "iterations_timed": int(iterations),
        "matmul_peak_flops": P, "matmul_peak_samples": peak.samples,
        "setup_seconds": {"data": t_data, "layouts_and_weights": t_setup},
        "padding": padding,
        "epsilon": plan.epsilon,
        "noise_std": {"ssp_A": _std(it0.item[0]), "ssp_b": _std(it0.item[1]),
                      "gramian": _std(it0.gramian), "counts": _std(plan.counts)},
    }
    for name, fl in (("item_step", fl_item), ("user_step", fl_user)) + \
            ((("item_step_compare", fl_other),) if other_steps is not None else ()):
        out[name] = _step_entry([r[name] for r in rows], fl, P)
    out["shift"] = float(spectral_shift(it0.item[0].noise_std, dim, train.n_items)) \
        if it0.item else 0.0
    if other_steps is not None:
        cmp_ = out["item_step_compare"]
        cmp_["item_solve"] = other_solve
        # seconds of the projected solve / seconds of the shifted one, on the same inputs
        # seconds of the other solve / seconds of the timed one (was "shift_speedup":
        # project / shift, when shift was the only timed default)
        cmp_["speedup"] = cmp_["seconds"] / out["item_step"]["seconds"]
        if {item_solve, other_solve} == {"shift", "project"}:
            cmp_["shift_speedup"] = cmp_["speedup"] if item_solve == "shift" else \
                1.0 / cmp_["speedup"]
        # ‖V_other − V‖_F / ‖V‖_F per iteration (same inputs): how far the two estimators are
        # apart at this noise level (not a quality measure; QUALITY.md measures that)
        cmp_["relative_difference"] = other_diffs
    # the measurement: fit's iteration, whole (best of the timed iterations, as every entry)
    out["iteration"] = _seconds_entry([r["iteration"] for r in rows])
    out["iteration_seconds"] = out["iteration"]["seconds"]
    # its breakdown: the parts above, re-run on each iteration's inputs
    out["gramian_seconds"] = steady("gramian")[0]
    out["breakdown_seconds"] = out["item_step"]["seconds"] + out["user_step"]["seconds"] + \
        out["gramian_seconds"]
    out["breakdown_relative_difference"] = breakdown_diffs
    out["compilations_per_iteration"] = traces
    out["recompilations_after_first_iteration"] = recompilations(traces)
    # peak memory of the training iterations (before the breakdown, which materialises the
    # (m, d, d) statistics to time their parts separately)
    out["peak_rss_bytes"] = peak_rss_bytes()
    # the iterations alone: resident data + layouts + the steps' working sets
    out["rss_before_iterations_bytes"] = rss_before
    steady_rss = window_peak_rss_bytes() if window else None
    out["iterations_peak_rss_bytes"] = (max(iterations_peak or 0, steady_rss) if steady_rss
                                        else iterations_peak)
    # after the first (compiling) iteration
    out["steady_peak_rss_bytes"] = steady_rss
    out["rss_after_first_iteration_bytes"] = steady_from
    # the device-resident arrays at their largest (U, V, V_new alive): the model's data terms
    out["live_device_bytes"] = live
    out["host_ratings_bytes"] = int(train.user.nbytes + train.item.nbytes + train.value.nbytes)
    gd_plan = None
    if gd:
        # noisy GD (Algorithm 2, embedding encoder, one step per call) on the same user
        # layout and weights: the item step fit(solver="gd") would run, timed after the SSP
        # iterations and their memory readings. It reads plain buckets, so where SSP's item
        # layout is segmented it gets the plain task layout that fit builds for it.
        gd_cfg = cfg.replace(solver="gd", gd=dict(steps=1, optimizer="sgd",
                                                  encoder="embedding"))
        gd_plan = make_plan(gd_cfg)
        gd_steps = dataclasses.replace(steps, cfg=gd_cfg)
        if items.segments is not None:
            gd_steps.items = layout_mod.task_layout(train, dim=dim)
        gd_steps.item_step = gd_item_step(gd_steps, train.n_items)
        fl_gd = gd_step_flops(_base_layout(gd_steps.items), train.n_users, dim)
        gd_state = gd_steps.item_step.init(run_.noise.jax_key("init"), V)
        gd_rows, gd_traces = [], []
        for t in range(iterations + 1):
            before = layout_mod.trace_count()
            gd_noise = NOISY_GD.noise(gd_plan.iterations[t].item)
            _, sec = _timed(lambda: gd_steps.item_step.update(
                gd_state, V, U, jax.random.fold_in(k_iter, 1000 + t), gd_noise, extra,
                noisy_n))
            gd_rows.append(sec)
            gd_traces.append(_trace_diff(before, layout_mod.trace_count()))
        out["gd_step"] = _step_entry(gd_rows, fl_gd, P)
        out["gd_noise_multiplier"] = gd_plan.iterations[0].item[0].noise_multiplier
        out["recompilations_after_first_iteration"] += recompilations(gd_traces)
        log("noisy GD step: " + ", ".join(f"{x:.2f}s" for x in gd_rows))
    if breakdown and steps.mesh is None:
        out["item_step_breakdown"] = item_step_breakdown(steps.items, U, steps.weights, dim,
                                                         cfg, it0.item[0].noise_std, P)
    if against == "implicit":
        # the private rows are runs of their own, made by fit's setup and timed by iterate:
        # the benchmark's SSP config, and the default path (what `dpmt train` runs at this
        # ε and d), each with enough iterations for its warm-up and the rounds
        private = private_runs(train, cfg, repeats=against_repeats, noise_seed=seed,
                               execution=ExecutionConfig(devices=devices, progress=False,
                                                         lapack_threads=0))
        out["against_implicit"] = against_implicit(train, w, steps, V, repeats=against_repeats,
                                                   private_runs=private, log=log)
        del private
    out["machine"] = machine_info()
    return out


def item_step_breakdown(items, U, w_j, dim: int, cfg, sigma_A: float, peak: float,
                        sample: int = 2048) -> dict:
    """Each part of the item step timed alone on the same data (seconds for all items):
    the statistics over the whole layout (reduced, never materialised), the per-item noise,
    and ``eigh`` / PSD projection / Cholesky on a sample of ``sample`` real ``Â + extra + λI``
    systems, scaled to all items; and ``psd="shift"``'s whole solve (``Â + sI``, checked
    Cholesky, fallback) on the same sample, with the number of its items that fell back. ``items``: a one-device task layout; ``sigma_A``: the noise
    std of Â (the plan's ``iterations[0].item[0]``, SSP's first release)."""
    import jax
    import jax.numpy as jnp

    from dpmt.solvers import layout as layout_mod
    from dpmt.solvers import ssp, systems

    d = dim
    m = items.n_rows
    X = jnp.asarray(U, jnp.float32)

    @jax.jit
    def stats_only(layout, X, w):
        def blk(c):
            A, b = ssp._chunk_statistics(c, X, w, None)
            return jnp.trace(A, axis1=-2, axis2=-1) + b.sum(-1)
        parts = layout.map_chunks(lambda c: layout_mod.map_row_blocks(blk, c, dim=d))
        total = sum(p.sum() for p in parts)
        if layout.segments is not None:     # the long rows' segments, summed per row
            total = total + layout.segment_sums(
                lambda c: layout_mod.map_row_blocks(blk, c, dim=d)).sum()
        return total

    key = jax.random.PRNGKey(1)
    s_a = sigma_A
    k = min(sample, m)
    idx = jnp.arange(k, dtype=jnp.uint32)
    noise = jax.jit(lambda key: ssp._batch_noise(key, idx, d, s_a, s_a))
    A, b = ssp.weighted_statistics(items, X, w_j, None)
    A, b = A[:k], b[:k]
    E, e = noise(key)
    A_hat = A + E
    G = ssp.gramian(X)
    extra_p = ssp.project_psd(cfg.gravity * G)
    eye = jnp.eye(d, dtype=jnp.float32)
    eigh = jax.jit(lambda A: jnp.linalg.eigh(A))
    proj = jax.jit(lambda A: ssp.project_psd(A))
    M = proj(A_hat) + extra_p + cfg.reg * eye
    chol = jax.jit(lambda M, b: systems.cholesky_solve_checked(M, b, cfg.reg))
    s = ssp.spectral_shift(s_a, d, m)
    shift = jax.jit(lambda A, b: systems.shift_solve(A, b, extra_p, cfg.reg, s))
    res = {}
    for name, fn, scale, flops in (
            ("statistics", lambda: stats_only(items, X, w_j), 1.0,
             item_step_flops(items, d)["statistics"]),
            ("noise", lambda: noise(key), m / k, 0.0),
            ("eigh", lambda: eigh(A_hat), m / k, eigh_flops(d) * m),
            ("psd_projection", lambda: proj(A_hat), m / k, (eigh_flops(d) + 2 * d ** 3) * m),
            ("cholesky_solve", lambda: chol(M, b), m / k, cholesky_flops(d) * m),
            ("shift_solve", lambda: shift(A_hat, b), m / k,
             (cholesky_flops(d) + 3.0 * d * d) * m)):
        jax.block_until_ready(fn())
        best = min(_timed(fn)[1] for _ in range(2)) * scale
        res[name] = {"seconds": best, "flops": flops,
                     "fraction_of_peak": flops / best / peak if flops else None}
    _, ok = chol(M, b)
    res["cholesky_accepted_on_sample"] = bool(ok)
    # psd="shift" on the same sample: items that took the checked eigenvalue fallback
    _, ok_items = shift(A_hat, b)
    res["shift_fallback_items_on_sample"] = int(k - int(jnp.sum(ok_items)))
    res["shift_sample_items"] = int(k)
    return res



# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``dpmt bench`` (and ``python -m benchmarks.bench`` / ``scripts/bench.py``)."""
    p.add_argument("--interactions", type=int, default=None,
                   help="size of the synthetic ML-20M-like dataset (default: full ML-20M, "
                        f"{ML20M_INTERACTIONS:,})")
    p.add_argument("--dim", type=int, default=64, help="embedding dimension d (default 64)")
    p.add_argument("--dataset", default="synthetic-ml-20m",
                   help="synthetic-ml-20m (default), a dpmt.data synthetic spec (e.g. "
                        "synthetic:users=50000,items=5000,interactions=2400000; "
                        "--interactions replaces its interactions), or a MovieLens "
                        "name/file, e.g. ml-100k")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--iterations", type=int, default=2,
                   help="timed iterations after the warm-up one (default 2)")
    p.add_argument("--no-gd", action="store_true", help="skip the noisy-GD step")
    p.add_argument("--no-breakdown", action="store_true",
                   help="skip the part-by-part timing of the item step")
    from dpmt.config import TrainConfig

    defaults = TrainConfig()
    p.add_argument("--item-solve", choices=("shift", "project", "cg"), default=None,
                   help="the SSP item solve of the timed iteration (default: dpmt's default, "
                        f"{defaults.ssp.item_solve}; cg: warm-started conjugate gradients from "
                        "the previous V)")
    p.add_argument("--user-solve", choices=("exact", "cg"), default=None,
                   help=f"the user step's solve (default {defaults.user_solve}; cg: "
                        "warm-started conjugate gradients from the previous U)")
    p.add_argument("--user-cg-steps", type=int, default=None, metavar="N",
                   help=f"the CG user step's steps in every timed run, the default path's "
                        f"included (default {defaults.user_cg_steps})")
    p.add_argument("--no-compare", action="store_true",
                   help="skip the timing of the other item solve on the same inputs "
                        "(project when timing shift, shift otherwise)")
    p.add_argument("--against", choices=("implicit",), default=None,
                   help="also time one ALS iteration of the optional `implicit` package (CG "
                        "and exact) interleaved with dpmt's non-private iteration, its "
                        "private SSP iteration and its default private path (what `dpmt "
                        "train` runs at this ε and d), with the ratios to implicit's")
    p.add_argument("--against-repeats", type=int, default=3,
                   help="rounds of the --against comparison (best reported; default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--devices", type=_devices_arg, default=None, metavar="N",
                   help="shard the user and item steps over this many devices (on CPU: "
                        "that many host devices are created, one thread each — how the "
                        "single-threaded kernels use several cores; default: auto, as "
                        "`dpmt train`: one per core, at most 4)")
    p.add_argument("--matmul-size", type=int, default=4096,
                   help="n of the n×n float32 matmul that measures the peak (default 4096)")
    p.add_argument("--json", default=None, help="write the result here")
    p.add_argument("--suite", action="store_true",
                   help="run ML-100K and 1M/5M/20M-interaction subsets at d=64 and 128 (one "
                        "subprocess each) and regenerate BENCHMARKS.md and the plot")
    p.add_argument("--out-dir", default="benchmarks", help="suite: folder of the JSON files")
    p.add_argument("--markdown", default="BENCHMARKS.md", help="suite: the Markdown report")
    p.add_argument("--plot", default="docs/img/bench_scaling.png", help="suite: the plot")
    p.add_argument("--no-resume", action="store_true",
                   help="suite: rerun sizes whose JSON already exists")
    p.add_argument("--report-only", action="store_true",
                   help="suite: only regenerate BENCHMARKS.md and the plot from the JSON files")
    p.add_argument("--quiet", action="store_true",
                   help="no progress lines (the result is still printed)")


def run(args) -> int:
    """``dpmt bench``: one measurement (``--json``) or the whole suite (``--suite``)."""
    from dpmt._io import atomic_write_json
    from dpmt.errors import ConfigError
    from dpmt.runtime import limit_lapack_threads

    # one OpenBLAS thread per LAPACK call (dpmt.runtime): what fit does when a run starts,
    # and what every number of the benchmark is measured with
    lapack_threads = limit_lapack_threads()
    log = (lambda *a, **k: None) if args.quiet else \
        (lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.dim < 1:
        raise ConfigError(f"--dim must be >= 1 (got {args.dim})")
    if args.devices is not None and args.devices < 1:
        raise ConfigError(f"--devices must be >= 1 (got {args.devices})")
    if args.interactions is not None and args.interactions < 1:
        raise ConfigError(f"--interactions must be >= 1 (got {args.interactions})")
    if args.user_cg_steps is not None and args.user_cg_steps < 1:
        raise ConfigError(f"--user-cg-steps must be >= 1 (got {args.user_cg_steps})")
    if args.suite or args.report_only:
        out_dir = Path(args.out_dir)
        if args.report_only:
            results = load_results(out_dir)
        else:
            results = run_suite(out_dir, data_dir=args.data_dir, iterations=args.iterations,
                                resume=not args.no_resume, log=log)
        write_benchmarks_md(results, Path(args.markdown), raw_dir=str(out_dir))
        if results:
            plot_scaling(results, Path(args.plot))
        print(f"wrote {args.markdown} and {args.plot} from {len(results)} results")
        return 0
    if args.against == "implicit" and not implicit_available():
        raise ConfigError("--against implicit needs the optional `implicit` package "
                          "(pip install implicit)")
    if args.against_repeats < 1:
        raise ConfigError(f"--against-repeats must be >= 1 (got {args.against_repeats})")
    if args.devices is None:           # auto, as `dpmt train`
        from dpmt.solvers.sharding import auto_devices, request_auto_devices

        request_auto_devices()         # effective before JAX's backend starts (as here)
        args.devices = auto_devices()
    if args.devices > 1:
        import jax

        from dpmt.solvers.sharding import request_devices

        request_devices(args.devices)   # effective before JAX's backend starts (as here)
        if jax.default_backend() == "cpu" and len(jax.devices()) < args.devices:
            raise ConfigError(
                f"--devices {args.devices}: JAX already started with {len(jax.devices())} CPU "
                f"device(s); run with XLA_FLAGS=--xla_force_host_platform_device_count="
                f"{args.devices}")
    res = bench_once(args.interactions, args.dim, dataset=args.dataset,
                     devices=args.devices, matmul_size=args.matmul_size,
                     data_dir=args.data_dir, iterations=args.iterations, gd=not args.no_gd,
                     breakdown=not args.no_breakdown, seed=args.seed,
                     item_solve=args.item_solve, user_solve=args.user_solve,
                     user_cg_steps=args.user_cg_steps,
                     compare=not args.no_compare,
                     against=args.against,
                     against_repeats=args.against_repeats, log=log)
    res["machine"]["lapack_threads"] = lapack_threads
    if args.json:
        atomic_write_json(args.json, res)
    print(summary_line(res))                 # --quiet silences the progress, not the result
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="dpmt bench", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    from dpmt.errors import DpmtError

    try:
        return run(args)
    except DpmtError as e:
        print(f"dpmt bench: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
