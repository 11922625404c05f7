"""CLI validation: every numeric argument of ``dpmt train`` / ``compare`` / ``stream`` is
range-checked before anything runs — exit status 2 and a message saying what was given and
what is allowed; unknown datasets list the known names; unmeetable budgets are refused.

No test here trains anything: a tripwire replaces the entry points of training, the grid,
the stream and the downloader, so a validation that happens too late fails the test
the stream and the downloader, so a validation that happens too late fails the test
("training started") instead of running for minutes.


"""

import importlib
import math

import numpy as np
import pytest

from _cli import cli
from dpmt.data.fetch import REGISTRY


class Tripwire(Exception):
    pass


def _trip(what):
    def f(*a, **k):
        raise Tripwire(f"{what} was reached: validation happened too late")
    return f


@pytest.fixture
def no_downloads(monkeypatch):
    # (dpmt.data re-exports a function named fetch: take the module by name)
    fetch_mod = importlib.import_module("dpmt.data.fetch")
    monkeypatch.setattr(fetch_mod, "fetch", _trip("a dataset download"))


@pytest.fixture
def tripwires(monkeypatch, no_downloads):
    """Nothing past argument validation may run."""
    rs = importlib.import_module("dpmt.online.ratings_stream")
    reports = importlib.import_module("dpmt.apps.compare")
    rundir = importlib.import_module("dpmt.train.rundir")
    monkeypatch.setattr(rundir, "run", _trip("dpmt.train.rundir.run"))
    monkeypatch.setattr(reports, "run_grid", _trip("dpmt.apps.compare.run_grid"))
    monkeypatch.setattr(rs, "ratings_stream", _trip("the stream"))


@pytest.fixture
def no_training(monkeypatch, no_downloads):
    """Data may be loaded, but nothing data-dependent after the privacy calibration."""
    setup = importlib.import_module("dpmt.train.training_run")
    evaluate = importlib.import_module("dpmt.train.evaluate")
    monkeypatch.setattr(setup, "private_counts", _trip("private_counts"))
    monkeypatch.setattr(setup, "compute_weights", _trip("compute_weights"))
    monkeypatch.setattr(evaluate, "popularity_metrics", _trip("the popularity baseline"))


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    rng = np.random.default_rng(0)
    pairs = sorted({(int(rng.integers(40)), int(rng.integers(25))) for _ in range(500)})
    p = tmp_path_factory.mktemp("cli") / "tiny.csv"
    p.write_text("userId,movieId,rating,timestamp\n"
                 + "".join(f"{u},{i},{4 + (u + i) % 2},{u * 100 + i}\n" for u, i in pairs))
    return p




def _check_message(err, flag, given, allowed):
    assert "Traceback" not in err
    name = flag.lstrip("-")
    assert name in err or name.replace("-", "_") in err, (flag, err)
    if given == "nan":                 # "must be a number, not NaN" / "(got nan)"
        assert "nan" in err.lower(), err
    else:
        shown = {given, repr(given)}
        try:
            shown.add(str(float(given)))
        except ValueError:
            pass
        assert any(f"got {s}" in err or f"value: {s}" in err for s in shown), (given, err)
    assert allowed in err, (allowed, err)


# (flag, bad value, the allowed-range wording that must appear)
TRAIN_ARGS = [
    ("--epsilon", "0", "in [0.01, 100]"), ("--epsilon", "-1", "in [0.01, 100]"),
    ("--epsilon", "nan", "in [0.01, 100]"), ("--epsilon", "1e9", "in [0.01, 100]"),
    ("--epsilon", "abc", "a number"),
    ("--delta", "0", "in [1e-12, 0.1]"), ("--delta", "1", "in [1e-12, 0.1]"),
    ("--delta", "1.5", "in [1e-12, 0.1]"), ("--delta", "-1e-5", "in [1e-12, 0.1]"),
    ("--delta", "nan", "in [1e-12, 0.1]"), ("--delta", "1e-300", "in [1e-12, 0.1]"),
    ("--user-clip", "1e300", "in (0, 1000000]"), ("--budget", "1e300", "in (0, 1000000]"),
    ("--dim", "100000", "in [1, 4096]"),
    ("--dim", "0", "in [1, 4096]"), ("--dim", "-3", "in [1, 4096]"), ("--dim", "1.5", "integer"),
    ("--iterations", "0", "in [1, 10000]"), ("--heldout-users", "0", "in [1, 100000000]"),
    ("--reg", "0", "in (0, 1000000]"), ("--reg", "-1", "in (0, 1000000]"),
    ("--gravity", "-0.1", "in [0, 1000000]"), ("--gravity", "x", "a number"),
    ("--user-clip", "0", "in (0, 1000000]"),
    ("--mu", "-0.5", "in [0, 1000000]"), ("--mu", "nan", "in [0, 1000000]"),
    ("--gamma", "-1", "in [0, 1000000]"),
    ("--budget", "0", "in (0, 1000000]"), ("--budget", "-5", "in (0, 1000000]"),
    ("--gd-steps", "0", "in [1, 100000]"), ("--gd-learning-rate", "0", "in (0, 1000000]"),
    ("--gd-clip", "0", "in (0, 1000000]"), ("--gd-clip", "-2", "in (0, 1000000]"),
    ("--gd-sampling-rate", "0", "in (0, 1)"), ("--gd-sampling-rate", "1.5", "in (0, 1)"),
    ("--count-noise", "0", "in (0, 1000000]"), ("--count-noise", "-1", "in (0, 1000000]"),
    ("--seed", "-1", "in [0, 2147483647]"), ("--seed", "1.5", "int"),
    ("--positive-threshold", "nan", "not NaN"), ("--positive-threshold", "x", "float"),
]


# compare sweeps ε with --epsilons (tested below): it has no --epsilon
@pytest.mark.parametrize("cmd,flag,bad,allowed",
                         [(c, *a) for c in ("train", "compare") for a in TRAIN_ARGS
                          if not (c == "compare" and a[0] == "--epsilon")])
def test_train_and_compare_reject_out_of_range(cmd, flag, bad, allowed, tripwires, capsys,
                                               tmp_path):
    rc = cli([cmd, f"{flag}={bad}", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    _check_message(err, flag, bad, allowed)
    assert not (tmp_path / "run").exists()


COMPARE_ARGS = [
    ("--epsilons", "0", "in [0.01, 100]"), ("--epsilons", "-3", "in [0.01, 100]"),
    ("--epsilons", "nan", "in [0.01, 100]"),
    ("--seeds", "x", "int"),
]


@pytest.mark.parametrize("flag,bad,allowed", COMPARE_ARGS)
def test_compare_grid_arguments(flag, bad, allowed, tripwires, capsys, tmp_path):
    rc = cli(["compare", f"{flag}={bad}", "--out", str(tmp_path / "cmp"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    _check_message(err, flag.rstrip("s"), bad, allowed)
    assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("spec,fragment", [
    ("adaptive:-1", "mu must be in [0, 1000000]"), ("adaptive:nan", "mu"), ("bogus", "unknown weights"),
    ("adaptive:x", "bad μ"),
])
def test_compare_weight_grid(spec, fragment, tripwires, capsys, tmp_path):
    rc = cli(["compare", "--weight-grid", spec, "--out", str(tmp_path / "c"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and fragment in err, err


STREAM_ARGS = [
    ("--epsilon", "0", "in (0, 100]"), ("--epsilon", "-1", "in (0, 100]"),
    ("--epsilon", "nan", "NaN"),
    # issue 25, C10: above 100 refused like train's (5000 overflowed math.exp before)
    ("--epsilon", "inf", "in (0, 100]"), ("--epsilon", "5000", "in (0, 100]"),
    ("--epsilon", "1e308", "in (0, 100]"),
    ("--delta", "0", "in (0, 1)"), ("--delta", "1", "in (0, 1)"), ("--delta", "2", "in (0, 1)"),
    ("--buckets", "1", "in [2, 4096]"), ("--buckets", "4097", "in [2, 4096]"),
    ("--buckets", "2.5", "int"),
    ("--seed", "-1", "in [0, "),
    ("--limit", "0", ">= 1"),
    ("--hist-epsilon", "0", "in (0, 100]"), ("--hist-epsilon", "inf", "in (0, 100]"),
    ("--hist-epsilon", "1e308", "in (0, 100]"),
    ("--hist-delta", "0", "in (0, 1)"), ("--hist-delta", "1", "in (0, 1)"),
    ("--cap-k", "0", ">= 1"),
    ("--gamma", "0", "in (0, 1]"), ("--gamma", "1.5", "in (0, 1]"),
    ("--like-threshold", "nan", "NaN"),
]


@pytest.mark.parametrize("flag,bad,allowed", STREAM_ARGS)
def test_stream_rejects_out_of_range(flag, bad, allowed, tripwires, capsys):
    rc = cli(["stream", f"{flag}={bad}", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    if allowed in ("finite", "NaN"):        # these messages do not repeat the value
        assert flag in err and allowed in err, err
    else:
        _check_message(err, flag, bad, allowed)


# -- non-finite values are refused before anything runs ----------------------------------------



@pytest.mark.parametrize("flag", [
    f for f in ["--epsilon", "--reg", "--user-clip", "--budget", "--gd-clip",
              "--gd-learning-rate", "--count-noise", "--mu", "--gamma", "--gravity",
              "--positive-threshold"]])
def test_train_rejects_infinity(flag, tripwires, capsys):
    rc = cli(["train", f"{flag}=inf", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "inf" in err and "finite" in err, err


def test_compare_rejects_infinite_epsilon(tripwires, capsys):
    rc = cli(["compare", "--epsilons", "inf", "--quiet"])
    assert rc == 2 and "finite" in capsys.readouterr().err


def test_calibrate_rejects_infinite_epsilon():
    from dpmt.errors import DpmtError
    from dpmt.privacy import PlannedRelease, calibrate
    with pytest.raises(DpmtError, match="finite"):
        calibrate([PlannedRelease("x", 1.0)], math.inf, 1e-5)


# -- unknown dataset names ------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["train", "--dataset", "ml-100kk", "--quiet"],
    ["compare", "--dataset", "no-such-set", "--quiet", "--no-baselines"],
    ["compare", "--dataset", "no-such-set", "--quiet"],
    ["stream", "--dataset", "movielens", "--no-progress"],
])
def test_unknown_dataset_lists_known_names(argv, no_training, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                  # no ./data, and no stray run folder
    rc = cli(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    name = argv[argv.index("--dataset") + 1]
    assert f"unknown dataset {name!r}" in err
    for known in REGISTRY:
        assert known in err
    assert "synthetic" in err
    assert list(tmp_path.iterdir()) == []


# -- budgets that cannot be met -------------------------------------------------------------
def test_train_refuses_unmeetable_budget(tiny_csv, no_training, capsys, tmp_path):
    rc = cli(["train", "--dataset", str(tiny_csv), "--count-noise", "0.3", "--epsilon", "0.5",
              "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert "item_counts" in err and "exceeds the target ε = 0.5" in err and \
        "--count-noise" in err


def test_compare_refuses_unmeetable_budget(tiny_csv, no_training, capsys, tmp_path):
    rc = cli(["compare", "--dataset", str(tiny_csv), "--count-noise", "0.3", "--epsilons",
              "0.5", "--weight-grid", "adaptive", "--no-baselines",
              "--out", str(tmp_path / "cmp"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "exceeds the target ε = 0.5" in err, err
    assert not (tmp_path / "cmp").exists()


def test_unmeetable_budget_creates_no_run_directory(tiny_csv, no_training, capsys, tmp_path):
    out = tmp_path / "run"
    rc = cli(["train", "--dataset", str(tiny_csv), "--count-noise", "0.3", "--epsilon", "0.5",
              "--out", str(out), "--quiet"])
    assert rc == 2
    assert not out.exists() or list(out.iterdir()) == [], sorted(p.name for p in out.iterdir())


def test_unmeetable_budget_fails_before_loading_data(monkeypatch, tiny_csv, capsys, tmp_path):
    rundir = importlib.import_module("dpmt.train.rundir")
    monkeypatch.setattr(rundir, "prepare_data", _trip("prepare_data"))
    rc = cli(["train", "--dataset", str(tiny_csv), "--count-noise", "0.3", "--epsilon", "0.5",
              "--quiet"])
    assert rc == 2


def test_compare_refuses_unmeetable_budget_before_training(tiny_csv, no_training, capsys,
                                                           tmp_path):
    rc = cli(["compare", "--dataset", str(tiny_csv), "--count-noise", "0.3", "--epsilons",
              "0.5", "--out", str(tmp_path / "cmp"), "--quiet"])
    assert rc == 2


def test_compare_validates_every_seed_before_training(tiny_csv, no_training, capsys,
                                                      tmp_path):
    rc = cli(["compare", "--dataset", str(tiny_csv), "--seeds", "0", "-1",
              "--out", str(tmp_path / "cmp"), "--quiet"])
    assert rc == 2 and "seed must be in [0, 2147483647] (got -1)" in capsys.readouterr().err
