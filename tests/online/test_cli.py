"""`dpmt stream` (add_arguments / run) and the separation experiment driver."""

import argparse
import json

import numpy as np
import pytest

from dpmt.apps import stream as cli
from dpmt.online.predictors import jdp_available
from dpmt.config import NonPrivate
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
    assert res["histogram_privacy"]["epsilon"] == pytest.approx(1.0, rel=5e-3)


def test_stream_json_has_no_seed_unless_given_and_then_warns(tmp_path, capsys):
    """Issue 24 (1): without --seed the randomness is fresh and nothing lets it be
    regenerated; with --seed the JSON and the printed output say the run is not private
    against whoever knows the seed."""
    from dpmt.privacy.randomness import SEEDED_WARNING

    base = ("--dataset", "synthetic-stream", "--predictor", "name-and-shame", "--delta", "1e-3",
            "--buckets", "8", "--limit", "2000", "--no-progress")
    fresh = []
    for k in range(2):
        out = tmp_path / f"fresh{k}.json"
        assert cli.run(parse(*base, "--json", str(out))) == 0
        text = capsys.readouterr().out
        assert "seed" not in out.read_text() and SEEDED_WARNING not in text
        assert "seed" not in json.dumps(json.loads(out.read_text())).lower()
        fresh.append(json.loads(out.read_text()))
    assert fresh[0]["randomness"]["source"].startswith("fresh randomness")
    seeded = []
    for k in range(2):
        out = tmp_path / f"seeded{k}.json"
        assert cli.run(parse(*base, "--seed", "5", "--json", str(out))) == 0
        text = capsys.readouterr().out
        res = json.loads(out.read_text())
        assert res["randomness"] == {"source": "user-given seed", "seed": 5,
                                     "warning": SEEDED_WARNING}
        assert SEEDED_WARNING in text
        seeded.append(res)
    assert seeded[0]["mistakes"] == seeded[1]["mistakes"]      # reproducible


def test_stream_bare_namespace(capsys):
    rc = cli.run(argparse.Namespace(dataset="synthetic-stream", predictor="soa", limit=1000,
                                    no_progress=True))
    assert rc == 0 and "mistakes:" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["--epsilon", "0"], "--epsilon must be in (0, 100] (got 0.0)"),
    (["--epsilon", "-1"], "--epsilon must be in (0, 100] (got -1.0)"),
    (["--epsilon", "inf"], "--epsilon must be in (0, 100] (got inf)"),
    (["--epsilon", "nan"], "--epsilon must be a number"),
    (["--delta", "1"], "--delta must be in (0, 1) (got 1.0)"),
    (["--delta", "0"], "--delta must be in (0, 1) (got 0.0)"),
    (["--buckets", "1"], "--buckets must be in [2, 4096] (got 1)"),
    (["--seed", "-3"], "--seed must be in [0, "),
    (["--limit", "0"], "--limit must be >= 1 (got 0)"),
    (["--hist-epsilon", "0"], "--hist-epsilon must be in (0, 100]"),
    (["--hist-delta", "2"], "--hist-delta must be in (0, 1)"),
    (["--cap-k", "0"], "--cap-k must be >= 1"),
    (["--min-coverage", "-0.1"], "--min-coverage must be in [0, 1]"),
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


# -- --features model / --compare ------------------------------------------------------------

def _planted_file(path, seed=0, n_users=120, n_items=40, per=30):
    """A MovieLens-format ratings file (user, item, rating, timestamp) whose likes follow a
    planted low-rank preference, and not popularity."""
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(n_users, 3)), rng.normal(size=(n_items, 3))
    lines, t = [], rng.permutation(n_users * per) + 8 * 10 ** 8
    for u in range(n_users):
        for k, i in enumerate(rng.choice(n_items, per, replace=False)):
            like = A[u] @ B[i] + 0.3 * rng.normal() > 0
            r = rng.integers(4, 6) if like else rng.integers(1, 4)
            lines.append(f"{u + 1}\t{i + 1}\t{r}\t{t[u * per + k]}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def planted_model(tmp_path_factory):
    """A tiny private model trained with dpmt.fit on the planted file's positives; its item
    space is the public catalogue 1..40 (without one, fit would select items privately and
    this tiny file would keep few of them)."""
    import dpmt
    from dpmt.data import binarize, load

    root = tmp_path_factory.mktemp("planted")
    f = _planted_file(root / "u.data")
    # noise_seed: the assertions below read this one model's quality (a fresh secret would
    # make them flaky)
    # fold_in="training": the stream folds users in with the model's (λ, α0); a choice
    # made on this file's 120 users would be mostly noise
    cfg = dpmt.TrainConfig(dim=3, iterations=2, solver="ssp", weights="adaptive",
                           fold_in="training",
                           data=dict(dataset=str(f), seed=0), privacy=dict(epsilon=8.0,
                                                                           noise_seed=0))
    pos = binarize(load(str(f), progress=False, items=np.arange(1, 41)),
                   cfg.data.positive_threshold)
    model = dpmt.fit(pos, cfg, execution=dpmt.ExecutionConfig(progress=False))
    out = model.save(root / "model")
    return {"file": f, "model": out, "epsilon": model.epsilon, "delta": cfg.privacy.delta,
            "n": 120 * 30}


def test_stream_model_features_end_to_end(planted_model, tmp_path, capsys):
    out = tmp_path / "m.json"
    rc = cli.run(parse("--features", "model", "--model", str(planted_model["model"]),
                       "--predictor", "soa", "--buckets", "8", "--json", str(out),
                       "--no-progress"))
    assert rc == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    for key in ("mistakes:", "best in class:", "privacy:", "model privacy:", "warning:"):
        assert key in text
    res = json.loads(out.read_text())
    for key in ("dataset", "task", "features", "predictor", "rounds", "skipped_ratings",
                "mistakes", "mistake_rate", "best_in_class_mistakes", "best_hypothesis",
                "privacy", "model", "model_privacy", "histogram_privacy", "warnings"):
        assert key in res, key
    # the dataset defaults to the model's own, which the report warns about
    assert res["dataset"] == str(planted_model["file"]) and res["features"] == "model"
    assert res["rounds"] == planted_model["n"] and res["skipped_ratings"] == 0
    assert any("training data" in w and "two separate statements" in w
               for w in res["warnings"])
    mp = res["model_privacy"]
    assert mp["private"] and mp["epsilon"] == pytest.approx(planted_model["epsilon"])
    assert mp["delta"] == planted_model["delta"] and "user" in mp["unit"]
    assert res["privacy"]["unit"] == "one rating (example)"
    assert len(res["model"]["edges"]) == 7 and res["model"]["score_edges"] == "reference"
    assert "earlier ratings > 3.5" in res["model"]["history"]


def test_stream_compare_reports_both_features_and_plots(planted_model, tmp_path, capsys,
                                                        monkeypatch):
    out, png = tmp_path / "c.json", tmp_path / "c.png"
    titles = []
    real_plot = cli.plot_cumulative
    monkeypatch.setattr(cli, "plot_cumulative",
                        lambda curves, path, title: (titles.append(title),
                                                     real_plot(curves, path, title)))
    rc = cli.run(parse("--compare", "--model", str(planted_model["model"]), "--buckets", "8",
                       "--epsilon", "2", "--delta", "1e-4", "--json", str(out),
                       "--plot", str(png), "--no-progress"))
    assert rc == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "best fixed threshold" in text and "model privacy:" in text
    res = json.loads(out.read_text())
    names = ["soa", "name-and-shame"] + (["jdp"] if jdp_available() else [])
    T = planted_model["n"]
    assert res["rounds"] == T
    for f in ("popularity", "model"):
        row = res["features"][f]
        assert sorted(row["predictors"]) == sorted(names)
        assert 0 < row["best_in_class_mistakes"] <= T / 2 + 1
        for n in names:
            assert 0 <= row["predictors"][n]["mistakes"] <= T
    # planted preferences: the model's score separates likes better than popularity (a
    # user-level DP model of 120 users is noisy: 0.90 here, 0.56 without privacy)
    assert res["features"]["model"]["best_in_class_mistakes"] < \
        0.95 * res["features"]["popularity"]["best_in_class_mistakes"]
    pr = res["privacy"]
    assert pr["model"]["epsilon"] == pytest.approx(planted_model["epsilon"])
    assert pr["histogram"]["epsilon"] == pytest.approx(1.0, rel=5e-3)
    assert pr["predictors"]["soa"]["epsilon"] is None
    assert pr["predictors"]["name-and-shame"]["delta"] == pytest.approx(1e-4)
    if jdp_available():
        assert 0 < pr["predictors"]["jdp"]["epsilon"] <= 2 + 1e-9
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the plot's title gives each private predictor's (ε, δ) as the table does
    for n in names:
        pv = pr["predictors"][n]
        if pv["epsilon"] is not None:
            cell = f"({pv['epsilon']:.3g}, {pv['delta']:.3g})"
            assert cell in titles[0] and cell in text, (cell, titles[0])


def test_stream_model_errors(planted_model, tmp_path, capsys):
    from dpmt.config import TrainConfig
    from dpmt.model import Model

    f, mdir = str(planted_model["file"]), str(planted_model["model"])
    cases = [
        (["--features", "model"], "--features model needs --model DIR"),
        (["--compare"], "--compare needs --model DIR"),
        (["--model", mdir], "--model is used only with --features model or --compare"),
        (["--plot", str(tmp_path / "p.png")], "--plot is made by --compare"),
        (["--features", "model", "--model", str(tmp_path / "nowhere")], "is not a dpmt model"),
        (["--min-coverage", "2"], "--min-coverage must be in [0, 1]"),
    ]
    other = Model(item_embeddings=np.ones((5, 3), np.float32),
                  item_ids=np.arange(9000, 9005), config=TrainConfig(privacy=NonPrivate()))
    other.save(tmp_path / "other")
    cases.append((["--features", "model", "--model", str(tmp_path / "other")],
                  "the model's item ids do not match"))
    for argv, msg in cases:
        rc = cli.run(parse("--dataset", f, "--no-progress", *argv))
        assert rc == 2, argv
        assert msg in capsys.readouterr().err, (argv, msg)
