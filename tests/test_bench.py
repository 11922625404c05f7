"""`dpmt bench`: JSON schema, FLOP formulas and the report on a tiny size (no timing asserts)."""

import argparse
import json

import numpy as np
import pytest

from dpmt.apps import bench
from dpmt.data import make_synthetic
from dpmt.solvers.layout import task_layout, user_layout


def test_flop_formulas_count_padded_slots_and_items():
    r = make_synthetic(n_users=80, n_items=30, n_interactions=900, seed=0)
    d = 8
    T, U = task_layout(r, dim=d), user_layout(r, dim=d)
    f = bench.item_step_flops(T, d)
    assert f["statistics"] == (2 * d * d + 2 * d) * T.padded_slots
    assert f["statistics_real"] == (2 * d * d + 2 * d) * r.nnz
    per_item = 9 * d ** 3 + 2 * d ** 3 + (d ** 3 / 3 + 2 * d * d) + 3 * d * d
    assert f["per_item_solve"] == pytest.approx(per_item)
    assert f["total"] == pytest.approx(f["statistics"] + r.n_items * per_item)
    assert bench.item_step_flops(T, d, extra=False)["per_item_solve"] == 9 * d ** 3 + 6 * d * d
    g = bench.user_step_flops(U, r.n_items, d)
    assert g["total"] == pytest.approx((2 * d * d + 2 * d) * U.padded_slots
                                       + r.n_users * (d ** 3 / 3 + 4 * d * d)
                                       + 2 * r.n_items * d * d)
    assert g["real"] < g["total"]
    assert bench.gd_step_flops(T, r.n_users, d)["total"] == 4 * d * T.padded_slots \
        + 2 * d * r.n_users
    assert bench.fit_exponent([1e6, 4e6], [2.0, 8.0]) == pytest.approx(1.0)
    assert bench.fit_exponent([1e6], [2.0]) is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "r.json"
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--interactions", "20000", "--dim", "4", "--json", str(path),
                         "--iterations", "1", "--quiet", "--matmul-size", "512"])
    assert bench.run(args) == 0
    return json.loads(path.read_text())


def test_json_schema(tiny):
    r = tiny
    assert r["interactions"] == 20000 and r["dim"] == 4 and r["n_items"] == 26744
    assert r["n_users"] == round(138493 * 20000 / bench.ML20M_INTERACTIONS)
    for step in ("item_step", "user_step", "gd_step"):
        s = r[step]
        for k in ("seconds", "flops", "fraction_of_peak", "compile_seconds", "flops_real"):
            assert isinstance(s[k], float) and np.isfinite(s[k]), (step, k)
        assert s["seconds"] > 0 and s["flops"] > 0 and s["fraction_of_peak"] > 0
        assert s["fraction_of_peak"] == pytest.approx(
            s["flops"] / s["seconds"] / r["matmul_peak_flops"])
    assert r["matmul_peak_flops"] == max(r["matmul_peak_samples"]) > 0
    assert isinstance(r["peak_rss_bytes"], int) and r["peak_rss_bytes"] > 2**20
    assert r["recompilations_after_first_iteration"] == 0
    assert len(r["compilations_per_iteration"]) == 2 and r["compilations_per_iteration"][1] == {}
    assert r["compilations_per_iteration"][0].get("ssp_item_step") == 1
    assert set(r["item_step_breakdown"]) >= {"statistics", "noise", "eigh", "cholesky_solve"}
    assert r["machine"]["cores"] >= 1
    # the scaling model's device terms account for the live arrays (U, V, V_new, layouts,
    # weights; GD's parameters and gradient are the rest)
    from dpmt.apps import scaling

    pad = 0.5 * (r["padding"]["items"] + r["padding"]["users"])
    model = scaling.device_bytes(scaling.Problem(r["n_users"], r["n_items"], r["interactions"],
                                                 r["dim"], padding=pad), 0.0)["total"]
    assert 0.8 * model <= r["live_device_bytes"] <= 1.5 * model, (model, r["live_device_bytes"])
    assert r["host_ratings_bytes"] == 12 * r["interactions"]
    # (ru_maxrss and VmHWM are read a moment apart: 1% slack)
    assert r["steady_peak_rss_bytes"] <= r["iterations_peak_rss_bytes"] \
        <= 1.01 * r["peak_rss_bytes"]


def test_markdown_report_and_plot(tiny, tmp_path):
    big = dict(tiny, interactions=80000, dataset=tiny["dataset"])
    big["item_step"] = dict(tiny["item_step"], seconds=tiny["item_step"]["seconds"] * 4)
    exps = bench.scaling_exponents([tiny, big])
    assert exps[4]["item_step"] == pytest.approx(1.0)
    md = tmp_path / "B.md"
    md.write_text("# header kept\n\n" + bench.MARKER + "\nold table\n")
    bench.write_benchmarks_md([tiny, big], md)
    text = md.read_text()
    assert text.startswith("# header kept") and "old table" not in text
    assert text.count(bench.MARKER) == 1 and "| 20,000 |" in text
    # headlines are computed from an ML-20M-sized result, never typed in
    full = dict(tiny, interactions=bench.ML20M_INTERACTIONS, peak_rss_bytes=5 * 2**30,
                iteration_seconds=10.0)
    two = dict(full, devices=2, iteration_seconds=4.0,
               item_step=dict(full["item_step"], seconds=full["item_step"]["seconds"] / 2),
               user_step=dict(full["user_step"], seconds=full["user_step"]["seconds"] / 3))
    head = "\n".join(bench.headline_lines([full, two]))
    assert "2 devices vs 1: iteration 2.50x faster (item step 2.00x, user step 3.00x)" in head
    assert "peak RSS 5.00 GiB" in head
    full128 = dict(full, dim=128)
    assert "within the 8 GiB target" in "\n".join(bench.headline_lines([full128]))
    assert "OVER the 4 GiB target" in "\n".join(bench.headline_lines([dict(full, dim=64)]))
    bench.plot_scaling([tiny, big], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000
