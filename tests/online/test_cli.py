"""`dpmt stream` (add_arguments / run) and the separation experiment driver."""

import argparse
import json
import math

import numpy as np
import pytest

from dpmt.apps import stream as cli
from dpmt.online.predictors import jdp_available
from experiments.online_separation import (main as sep_main, markdown_table,
                                           separation_experiment, summarise)


def parse(*argv):
    return cli.add_arguments(argparse.ArgumentParser()).parse_args(list(argv))


@pytest.mark.parametrize("predictor", ["soa", "name-and-shame", "ns-learner", "at-learner"])
def test_stream_runs_and_writes_json(predictor, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = cli.run(parse("--dataset", "synthetic-stream", "--predictor", predictor, "--delta", "1e-3",
                       "--buckets", "16", "--limit", "5000", "--json", str(out),
                       "--no-progress"))
    assert rc == 0
    text = capsys.readouterr().out
    for key in ("mistakes:", "best in class:", "privacy:", "histogram privacy:"):
        assert key in text
    res = json.loads(out.read_text())
    assert res["rounds"] == 5000 and 0 <= res["mistakes"] <= 5000
    assert res["mistake_rate"] == pytest.approx(res["mistakes"] / 5000)
    assert res["best_in_class_mistakes"] <= 5000 / 2 + 1  # a constant hypothesis is in class
    if predictor == "soa":
        assert res["privacy"]["epsilon"] is None
    elif predictor == "at-learner":
        assert res["privacy"]["delta"] == 0 and res["privacy"]["epsilon"] <= 1.0
    else:
        assert res["privacy"] == {**res["privacy"], "epsilon": 0.0, "delta": 1e-3}
    assert res["histogram_privacy"]["epsilon"] == pytest.approx(1.0)


def test_stream_bare_namespace(capsys):
    rc = cli.run(argparse.Namespace(dataset="synthetic-stream", predictor="soa", limit=1000,
                                    no_progress=True))
    assert rc == 0 and "mistakes:" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["--epsilon", "0"], "--epsilon must be > 0 (got 0.0)"),
    (["--epsilon", "-1"], "--epsilon must be > 0 (got -1.0)"),
    (["--epsilon", "inf"], "--epsilon must be finite"),
    (["--epsilon", "nan"], "--epsilon must be a number"),
    (["--delta", "1"], "--delta must be in (0, 1) (got 1.0)"),
    (["--delta", "0"], "--delta must be in (0, 1) (got 0.0)"),
    (["--buckets", "1"], "--buckets must be in [2, 4096] (got 1)"),
    (["--seed", "-3"], "--seed must be in [0, "),
    (["--limit", "0"], "--limit must be >= 1 (got 0)"),
    (["--hist-epsilon", "0"], "--hist-epsilon must be > 0"),
    (["--hist-delta", "2"], "--hist-delta must be in (0, 1)"),
    (["--cap-k", "0"], "--cap-k must be >= 1"),
    (["--gamma", "1.5"], "--gamma must be in (0, 1]"),
])
def test_stream_range_checks(argv, msg, capsys):
    rc = cli.run(parse("--dataset", "synthetic-stream", "--no-progress", *argv))
    assert rc == 2
    assert msg in capsys.readouterr().err


def test_stream_unwritable_json(capsys):
    rc = cli.run(parse("--dataset", "synthetic-stream", "--predictor", "soa", "--limit", "100",
                       "--no-progress", "--json", "/nonexistent-dir/x.json"))
    assert rc == 2 and "cannot write --json" in capsys.readouterr().err


@pytest.mark.skipif(not jdp_available(), reason="dpmt.online.jdp not available yet")
def test_stream_jdp(tmp_path, capsys):
    out = tmp_path / "j.json"
    rc = cli.run(parse("--dataset", "synthetic-stream", "--predictor", "jdp", "--limit", "3000",
                       "--json", str(out), "--no-progress"))
    assert rc == 0
    res = json.loads(out.read_text())
    eps, dl = res["privacy"]["epsilon"], res["privacy"]["delta"]
    assert 0 < eps <= 1.0 + 1e-9 and 0 < dl <= 1e-6 * (1 + 1e-9)


def test_separation_small(tmp_path, capsys):
    rows = separation_experiment([30, 300], reps=3, streams=("point3", "thresholds", "tree"),
                                 predictors=("soa", "name-and-shame", "at-learner"),
                                 delta=0.1, n_thresholds=15, progress=False)
    assert len(rows) == 2 * 3 * 3 * 3
    # SOA never exceeds the Littlestone dimension on these realisable streams
    for r in rows:
        if r["predictor"] == "soa":
            assert r["mistakes"] <= (1 if r["stream"] == "point3" else 4)
    # paired design: every predictor saw the same stream (same informative count)
    inf = {}
    for r in rows:
        if r["stream"] == "point3":
            inf.setdefault((r["T"], r["rep"]), set()).add(r["informative"])
    assert all(len(v) == 1 for v in inf.values())
    summ = summarise(rows)
    md = markdown_table(summ)
    assert "| soa |" in md and "T=30" in md
    s = [x for x in summ if x["predictor"] == "soa" and x["stream"] == "thresholds"][0]
    assert s["lo"] <= s["mean"] <= s["hi"]
    rc = sep_main(["--Ts", "50,100", "--reps", "2", "--predictors", "soa,name-and-shame",
                   "--out", str(tmp_path), "--workers", "1", "--no-progress",
                   "--n-thresholds", "7"])
    assert rc == 0
    for f in ("runs.csv", "summary.csv", "table.md", "mistakes_vs_T.png"):
        assert (tmp_path / f).stat().st_size > 0
    assert sep_main(["--delta", "2", "--out", str(tmp_path)]) == 2
    assert sep_main(["--predictors", "magic", "--out", str(tmp_path)]) == 2


def test_stream_from_a_ratings_file(tmp_path, capsys):
    # --dataset goes through dpmt.data.load: a path to a MovieLens-format file works too
    rng = np.random.default_rng(0)
    n = 400
    pairs = rng.choice(30 * 50, n, replace=False)  # distinct (user, item) pairs
    lines = [f"{p // 50 + 1}\t{p % 50 + 1}\t{r}\t{t}" for p, r, t in zip(
        pairs, rng.integers(1, 6, n), rng.integers(8 * 10 ** 8, 9 * 10 ** 8, n))]
    f = tmp_path / "u.data"
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.json"
    rc = cli.run(parse("--dataset", str(f), "--predictor", "soa", "--buckets", "4",
                       "--no-progress", "--json", str(out)))
    assert rc == 0, capsys.readouterr().err
    assert json.loads(out.read_text())["rounds"] == n
