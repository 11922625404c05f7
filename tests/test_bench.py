"""`dpmt bench`: JSON schema, FLOP formulas and the report on a tiny size (no timing asserts)."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import bench, bench_flops, bench_report
from dpmt.data import make_synthetic
from dpmt.solvers.layout import task_layout, user_layout


def test_flop_formulas_count_padded_slots_and_items():
    r = make_synthetic(n_users=80, n_items=30, n_interactions=900, seed=0)
    d = 8
    T, U = task_layout(r, dim=d), user_layout(r, dim=d)
    f = bench_flops.item_step_flops(T, d)
    assert f["statistics"] == (2 * d * d + 2 * d) * T.padded_slots
    assert f["statistics_real"] == (2 * d * d + 2 * d) * r.nnz
    per_item = 9 * d ** 3 + 2 * d ** 3 + (d ** 3 / 3 + 2 * d * d) + 3 * d * d
    assert f["per_item_solve"] == pytest.approx(per_item)
    assert f["total"] == pytest.approx(f["statistics"] + r.n_items * per_item)
    assert bench_flops.item_step_flops(T, d, extra=False)["per_item_solve"] == 9 * d ** 3 + 6 * d * d
    # psd="shift": one Cholesky solve and the updates per item, no eigh (with or without extra)
    for extra in (True, False):
        fs = bench_flops.item_step_flops(T, d, extra=extra, psd="shift")
        assert fs["per_item_solve"] == pytest.approx(d ** 3 / 3 + 2 * d * d + 3 * d * d)
        assert fs["real"] == pytest.approx((2 * d * d + 2 * d) * r.nnz
                                           + r.n_items * fs["per_item_solve"])
    g = bench_flops.user_step_flops(U, r.n_items, d)
    assert g["total"] == pytest.approx((2 * d * d + 2 * d) * U.padded_slots
                                       + r.n_users * (d ** 3 / 3 + 4 * d * d)
                                       + 2 * r.n_items * d * d)
    assert g["real"] < g["total"]
    assert bench_flops.gd_step_flops(T, r.n_users, d)["total"] == 4 * d * T.padded_slots \
        + 2 * d * r.n_users


def test_fit_exponent_is_the_log_log_slope_of_at_least_two_points():
    assert bench_report.fit_exponent([1e6, 4e6], [2.0, 8.0]) == pytest.approx(1.0)
    assert bench_report.fit_exponent([1e6], [2.0]) is None


def test_recompilations_count_repeats_not_first_uses():
    """A kernel first used in the second iteration (user_solve="cg": the first user step is
    exact) compiles once there without being a recompilation; compiling one again is."""
    assert bench.recompilations([{"a": 1, "b": 1}, {}, {}]) == 0
    assert bench.recompilations([{"a": 1}, {"c": 1}, {}]) == 0
    assert bench.recompilations([{"a": 1}, {"a": 1}]) == 1
    assert bench.recompilations([{"a": 1}, {"c": 2}, {"c": 1}]) == 2


def test_cg_item_solve_is_counted_as_the_work_of_the_shift_solve():
    r = make_synthetic(n_users=80, n_items=30, n_interactions=900, seed=0)
    T = task_layout(r, dim=8)
    assert bench_flops.item_step_flops(T, 8, psd="cg") == bench_flops.item_step_flops(T, 8, psd="shift")
    # reports of JSON files from before "speedup" (shift timed against project) still read
    assert bench_report._speedup({"shift_speedup": 3.0}) == 3.0
    assert bench_report._speedup({"speedup": 1.5, "shift_speedup": 3.0}) == 1.5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "r.json"
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--interactions", "5000", "--dim", "4", "--json", str(path),
                         "--iterations", "1", "--quiet", "--matmul-size", "512"])
    # segments of 8 (not 512) so that this small run has segmented SSP item rows, as the
    # ML-20M-scale runs do, with noisy GD on the plain layout beside them
    from dpmt.solvers import layout
    from dpmt.train import loop

    calls = []

    def iterate(run, t):        # the library's iteration, counted
        calls.append(t)
        return real(run, t)

    real = loop.iterate
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(layout, "SEGMENT_WIDTH", 8)
        mp.setattr(layout, "SEGMENT_MIN_SAVING", 0.0)
        mp.setattr(loop, "iterate", iterate)
        assert bench.run(args) == 0
    return dict(json.loads(path.read_text()), iterate_calls=calls)


def test_tiny_run_writes_every_field_the_report_and_the_scaling_check_read(tiny):
    r = tiny
    assert r["schema"] == bench.SCHEMA_VERSION
    assert r["interactions"] == 5000 and r["dim"] == 4 and r["n_items"] == 26744
    assert r["n_users"] == round(138493 * 5000 / bench.ML20M_INTERACTIONS)
    for step in ("item_step", "user_step", "gd_step", "item_step_compare"):
        s = r[step]
        for k in ("seconds", "flops", "fraction_of_peak", "compile_seconds", "flops_real"):
            assert isinstance(s[k], float) and np.isfinite(s[k]), (step, k)
        assert s["seconds"] > 0 and s["flops"] > 0 and s["fraction_of_peak"] > 0
        assert s["fraction_of_peak"] == pytest.approx(
            s["flops"] / s["seconds"] / r["matmul_peak_flops"])
    assert r["matmul_peak_flops"] == max(r["matmul_peak_samples"]) > 0
    assert isinstance(r["peak_rss_bytes"], int) and r["peak_rss_bytes"] > 2**20
    assert r["recompilations_after_first_iteration"] == 0
    # the second iteration compiles only the CG user solve (the first one is exact)
    assert len(r["compilations_per_iteration"]) == 2 and \
        r["compilations_per_iteration"][1] == {"solve_users_cg": 1}
    # the default item solve (CG) is timed, and the Cholesky shift solve on the same inputs
    assert r["item_solve"] == "cg" and r["item_step_compare"]["item_solve"] == "shift"
    assert r["user_solve"] == "cg" and r["cg_steps"] >= 1       # the default user solve
    assert r["padding"]["item_segment_width"] == 8 and r["padding"]["item_long_rows"] > 0
    assert r["compilations_per_iteration"][0].get("ssp_item_step_cg") == 1
    assert r["compilations_per_iteration"][0].get("ssp_item_step_shift") == 1
    # the measurement is fit's own iteration, dpmt.train.loop.iterate, once per iteration
    # (the warm-up and the timed one); the steps are its breakdown, each part re-run on
    # that iteration's inputs, and they reproduce its V
    assert r["iterate_calls"] == [0, 1]
    assert r["iteration_seconds"] == r["iteration"]["seconds"] > 0
    assert r["iteration"]["first_iteration_seconds"] >= r["iteration"]["seconds"]
    assert r["breakdown_seconds"] == pytest.approx(
        r["item_step"]["seconds"] + r["user_step"]["seconds"] + r["gramian_seconds"])
    assert len(r["breakdown_relative_difference"]) == 2
    assert max(r["breakdown_relative_difference"]) < 1e-5
    assert set(r["item_step_breakdown"]) >= {"statistics", "noise", "eigh", "cholesky_solve",
                                             "shift_solve"}
    # the shift item step, timed on the same inputs as the (default) CG one; both counted as
    # one Cholesky per item (the work the maths needs)
    pr = r["item_step_compare"]
    assert pr["speedup"] == pytest.approx(pr["seconds"] / r["item_step"]["seconds"])
    assert "shift_speedup" not in pr
    assert r["item_step"]["flops_detail"]["per_item_solve"] == pytest.approx(
        4 ** 3 / 3 + 5 * 4 * 4) == pr["flops_detail"]["per_item_solve"]
    assert len(pr["relative_difference"]) == 2
    assert all(np.isfinite(x) and x > 0 for x in pr["relative_difference"])
    assert r["shift"] > 0
    assert 0 <= r["item_step_breakdown"]["shift_fallback_items_on_sample"] \
        <= r["item_step_breakdown"]["shift_sample_items"]
    assert r["machine"]["cores"] >= 1
    # the run starts by limiting scipy's OpenBLAS (dpmt.runtime), and records what it set
    assert "lapack_threads" in r["machine"]
    # the scaling model's device terms account for the live arrays (U, V, V_new, layouts,
    # weights; GD's parameters and gradient are the rest)
    from benchmarks import scaling

    pad = 0.5 * (r["padding"]["items"] + r["padding"]["users"])
    model = scaling.device_bytes(scaling.Problem(r["n_users"], r["n_items"], r["interactions"],
                                                 r["dim"], padding=pad), 0.0)["total"]
    assert 0.8 * model <= r["live_device_bytes"] <= 1.5 * model, (model, r["live_device_bytes"])
    assert r["host_ratings_bytes"] == 12 * r["interactions"]
    # (ru_maxrss and VmHWM are read a moment apart: 1% slack)
    assert r["steady_peak_rss_bytes"] <= r["iterations_peak_rss_bytes"] \
        <= 1.01 * r["peak_rss_bytes"]


def test_tiny_run_uses_the_noise_of_the_training_plan(tiny):
    """The benchmark's noise is that of fit's plan for the same run (a warm-up iteration plus
    the timed ones, at ε = 5, the sampler's draws charged): SSP's Â, b̂, the Gramian, the
    counts and noisy GD's z."""
    from dpmt.config import TrainConfig
    from dpmt.train.plan import make_plan, sampler_draws

    cfg = TrainConfig(dim=4, iterations=2, solver="ssp",
                      weights="adaptive", reg=1.0, data=dict(seed=0),
                      ssp=dict(item_solve="project"), privacy=dict(epsilon=5.0))
    plan = make_plan(cfg, draws=sampler_draws(cfg, tiny["n_items"]))
    it0 = plan.iterations[0]
    assert tiny["noise_std"] == pytest.approx({
        "ssp_A": it0.item[0].noise_std, "ssp_b": it0.item[1].noise_std,
        "gramian": it0.gramian.noise_std, "counts": plan.counts.noise_std})
    assert tiny["epsilon"] == pytest.approx(plan.epsilon) and tiny["epsilon"] <= 5.0 + 1e-6
    gd_plan = make_plan(cfg.replace(solver="gd", gd=dict(steps=1)))
    assert tiny["gd_noise_multiplier"] == pytest.approx(
        gd_plan.iterations[0].item[0].noise_multiplier)


@pytest.mark.slow   # ~20 s; the sharded steps are checked by tests/test_sharding.py by default
def test_sharded_run_goes_through_the_sharded_steps_without_recompiling(tmp_path):
    """`dpmt bench --devices 2` (CPU host devices created by the command itself): the user
    and item steps are the sharded kernels, nothing recompiles after the warm-up iteration,
    and the one-device breakdown is left out."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    path = tmp_path / "r2.json"
    p = subprocess.run([sys.executable, "-m", "dpmt", "bench", "--devices", "2",
                        "--interactions", "5000", "--dim", "4", "--iterations", "1",
                        "--matmul-size", "256", "--quiet", "--json", str(path)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(path.read_text())
    assert r["devices"] == 2 and r["interactions"] == 5000
    first = r["compilations_per_iteration"][0]
    assert first.get("sharded_ssp_item_step_cg") == 1 and first.get("sharded_solve_users") == 1
    assert "ssp_item_step" not in first and "solve_users" not in first
    assert r["recompilations_after_first_iteration"] == 0
    assert "item_step_breakdown" not in r
    for step in ("item_step", "user_step", "gd_step"):
        assert r[step]["seconds"] > 0 and r[step]["fraction_of_peak"] > 0
    assert r["machine"]["devices"] and len(r["machine"]["devices"]) >= 2


def test_report_keeps_the_header_and_computes_headlines_and_plot_from_results(tiny, tmp_path):
    big = dict(tiny, interactions=20000, dataset=tiny["dataset"])
    big["item_step"] = dict(tiny["item_step"], seconds=tiny["item_step"]["seconds"] * 4)
    exps = bench_report.scaling_exponents([tiny, big])
    assert exps[4]["item_step"] == pytest.approx(1.0)
    md = tmp_path / "B.md"
    md.write_text("# header kept\n\n" + bench_report.MARKER + "\nold table\n")
    bench_report.write_benchmarks_md([tiny, big], md)
    text = md.read_text()
    assert text.startswith("# header kept") and "old table" not in text
    assert text.count(bench_report.MARKER) == 1 and "| 5,000 |" in text
    # headlines are computed from an ML-20M-sized result, never typed in
    full = dict(tiny, interactions=bench_report.ML20M_INTERACTIONS, peak_rss_bytes=5 * 2**30,
                iteration_seconds=10.0)
    two = dict(full, devices=2, iteration_seconds=4.0,
               item_step=dict(full["item_step"], seconds=full["item_step"]["seconds"] / 2),
               user_step=dict(full["user_step"], seconds=full["user_step"]["seconds"] / 3))
    head = "\n".join(bench_report.headline_lines([full, two]))
    assert "2 devices vs 1: iteration 2.50x faster (item step 2.00x, user step 3.00x)" in head
    assert "peak RSS 5.00 GiB" in head
    pr = full["item_step_compare"]
    assert (f"item step {full['item_step']['seconds']:.2f} s (cg) vs {pr['seconds']:.2f} s "
            f"(shift): cg is {pr['speedup']:.2f}x faster") in head
    assert "private iteration 10.0 s with the cg item solve" in head   # d = 4: no target
    assert "private iteration 10.0 s (within the 10 s target) with the cg" in "\n".join(
        bench_report.headline_lines([dict(full, dim=64)]))
    assert "10.5 s (OVER the 30 s target)" not in "\n".join(
        bench_report.headline_lines([dict(full, dim=128, iteration_seconds=10.5)]))
    assert "10.5 s (OVER the 10 s target)" in "\n".join(
        bench_report.headline_lines([dict(full, dim=64, iteration_seconds=10.5)]))
    full128 = dict(full, dim=128)
    assert "within the 8 GiB target" in "\n".join(bench_report.headline_lines([full128]))
    assert "OVER the 4 GiB target" in "\n".join(
        bench_report.headline_lines([dict(full, dim=64)]))
    bench_report.plot_scaling([tiny, big], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_report_only_rebuilds_the_markdown_from_the_saved_json(tiny, tmp_path):
    """`dpmt bench --report-only` reads every bench_*.json of --out-dir (nothing is measured)
    and writes the Markdown below the marker and the plot."""
    out = tmp_path / "benchmarks"
    out.mkdir()
    (out / "bench_5000_d4.json").write_text(json.dumps(tiny))
    md, png = tmp_path / "B.md", tmp_path / "p.png"
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--report-only", "--out-dir", str(out), "--markdown", str(md),
                         "--plot", str(png), "--quiet"])
    assert bench.run(args) == 0
    assert bench_report.load_results(out) == [tiny]
    text = md.read_text()
    assert bench_report.MARKER in text and "| 5,000 |" in text
    assert png.stat().st_size > 1000


def test_against_implicit_needs_the_package(monkeypatch, tmp_path):
    from dpmt.errors import ConfigError

    monkeypatch.setattr(bench, "implicit_available", lambda: False)
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--interactions", "2000", "--against", "implicit", "--quiet"])
    with pytest.raises(ConfigError, match="implicit"):
        bench.run(args)
