"""The memory/communication model (benchmarks.scaling) against the arrays the code really builds."""

import numpy as np
import pytest

from benchmarks import scaling
from dpmt.data import make_synthetic_like
from dpmt.solvers import layout as L
from dpmt.solvers import sharding


def _slot_bytes(lay):
    return sum(np.asarray(b.cols).nbytes + np.asarray(b.pos).nbytes + np.asarray(b.valid).nbytes
               for b in lay.buckets)


@pytest.mark.parametrize("devices", [1, 4])
def test_layout_term_matches_the_arrays_built(devices):
    r = make_synthetic_like("ml-100k", scale=0.5, seed=1)
    d = 32
    # the grid's buckets (bucket_cost=0): what data at scale get, where each bucket saves far
    # more slots than its cost (BUCKET_COST_D2 / d²); π describes those, not the few buckets
    # of a small data set
    task, user = L.task_layout(r, dim=d, bucket_cost=0), L.user_layout(r, dim=d, bucket_cost=0)
    if devices > 1:   # the sharded layouts are padded to a multiple of the device count
        task, user = sharding.pad_layout(task, devices), sharding.pad_layout(user, devices)
    pad = (task.padded_slots + user.padded_slots) / (2 * r.nnz)
    p = scaling.Problem(r.n_users, r.n_items, r.nnz, d, devices=devices, padding=pad)
    real = (_slot_bytes(task) + _slot_bytes(user)) / devices
    assert scaling.device_bytes(p)["layouts"] == pytest.approx(real, rel=1e-9)
    # the default π (1.27) is what the layouts give on Zipf-like data (± 5%)
    assert abs(pad / scaling.Problem(1, 1, 1, 1).padding - 1) < 0.05 * (1 if devices == 1 else 2)
    # the other per-device terms are exactly the replicated float32/int32 arrays
    dv = scaling.device_bytes(p)
    assert dv["weights"] == 4 * r.nnz
    assert dv["index"] == np.asarray(task.inverse).nbytes + np.asarray(user.inverse).nbytes


def test_model_scales_as_stated():
    base = scaling.Problem(1000, 100, 10_000, 16, devices=1)
    more = scaling.Problem(1000, 100, 20_000, 16, devices=1)
    dv0, dv1 = scaling.device_bytes(base), scaling.device_bytes(more)
    assert dv1["layouts"] == 2 * dv0["layouts"] and dv1["weights"] == 2 * dv0["weights"]
    assert dv1["factors"] == dv0["factors"]
    four = scaling.Problem(1000, 100, 10_000, 16, devices=4, processes=2, gd_steps=3)
    assert scaling.device_bytes(four)["layouts"] == dv0["layouts"] / 4
    c = scaling.communication_bytes(four)
    assert c["user_step_all_gather_U"] == 4 * 16 * 1000 * 3 / 4
    assert c["noisy_gd"] == 3 * (4 * 16 * 100 * 0.75 + 8 * 1000 * 0.75)
    assert scaling.communication_bytes(base)["total"] == 0   # one device: nothing to send
    pr = scaling.process_bytes(four)
    assert pr["host_ratings"] == 12 * 10_000 / 2


def test_cli_table_and_errors(capsys):
    assert scaling.main(["--users", "1e6", "--items", "1e5", "--interactions", "1e9",
                         "--dims", "128", "--devices", "1", "8"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 4 and "1,000,000,000" in out
    assert scaling.main(["--users", "0", "--items", "1", "--interactions", "1"]) == 2
    assert "n_users must be >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="multiple of processes"):
        scaling.Problem(10, 10, 10, 2, devices=3, processes=2)


def test_check_against_benchmarks_predicts_from_the_smallest_run():
    def res(nnz, peak, live=None, devices=1):
        return {"dataset": "synthetic-ml-20m", "n_users": nnz // 150, "n_items": 26_744,
                "interactions": nnz, "dim": 64, "devices": devices,
                "padding": {"items": 1.4, "users": 1.44},
                "iterations_peak_rss_bytes": peak, "live_device_bytes": live}
    small = res(1_000_000, 1.5 * scaling.GIB)
    p = scaling.Problem(20_000_000 // 150, 26_744, 20_000_000, 64, padding=1.42)
    F = 1.5 * scaling.GIB - scaling.process_bytes(
        scaling.Problem(1_000_000 // 150, 26_744, 1_000_000, 64, padding=1.42), 0)["total"]
    exact = scaling.process_bytes(p, 0)["total"] + F
    dev = scaling.process_bytes(p, 0)["devices"]
    table = scaling.check_against_benchmarks([res(20_000_000, exact / 2, live=dev / 2), small])
    rows = table.splitlines()[2:]
    assert "(fit here)" in rows[0] and rows[0].endswith("| – |")
    # the big run measured at half the prediction: both ratios read 2.00
    assert rows[1].count("| 2.00 |") == 2, rows[1]


def test_sharded_data_model_divides_the_per_user_terms_by_p_and_reads_the_runs():
    """With sharded data every per-interaction and per-user term falls as 1/P, V and the
    exchanged partial sums do not; --check-sharded compares exactly that with a run's JSON."""
    one, four = (scaling.Problem(100_000, 2_000, 2_000_000, 32, P, P) for P in (1, 4))
    a, b = scaling.sharded_process_bytes(one), scaling.sharded_process_bytes(four)
    for term in ("ratings_weights", "layouts", "users", "gd_slots"):
        assert b[term] == pytest.approx(a[term] / 4)
    assert b["items"] == a["items"] and b["exchange"] == 4 * a["exchange"]
    worker = {"process": 0, "users_held": 25_000, "users_fraction": 0.25,
              "ratings_read": 500_000, "ratings_fraction": 0.25, "peak_rss_mib": 900.0,
              "rss_above_start_mib": 100.0, "seconds": [2.0, 1.5]}
    table = scaling.check_sharded_runs([{"num_processes": 4, "items": 2_000, "dim": 32,
                                         "workers": [worker]}])
    row = table.splitlines()[-1].split("|")
    data = (b["total"] - b["fixed"]) / 2**20
    assert float(row[7]) == pytest.approx(data, abs=0.5)
    assert float(row[8]) == pytest.approx(data / 100.0, abs=0.01)
    assert float(row[9]) == 1.5
