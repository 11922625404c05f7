"""Nothing a user does can misstate ε, corrupt a run or lose results.

One test (or a parametrised group) per numbered case of the hostile-input review: A the
privacy claim itself, B run directories and resume, C spend nothing and write nothing until
the run can finish, D the CLI says what it does. Each reproduces the hostile action and
asserts the new behaviour: a clear error (exit status 2, no traceback) that loses nothing, or
a correct result.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dpmt
from _cli import cli
from dpmt.config import ExecutionConfig, GDConfig, TrainConfig, route
from dpmt.data import make_synthetic, per_user_split
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError, DpmtError
from dpmt.model import Model

QUIET = ExecutionConfig(progress=False)
#: uniform popularity and activity (alpha = 0, sigma = 0): few buckets per layout, so each
#: fit compiles 2-3x faster; nothing here depends on the spread of row lengths
DATASET = "synthetic:users=150,items=50,interactions=2500,seed=4,alpha=0,sigma=0"
SMALL = ["--dim", "2", "--budget", "5", "--solver", "ssp", "--quiet"]




@pytest.fixture(scope="module")
def split():
    return per_user_split(make_synthetic(n_users=150, n_items=50, n_interactions=2500, seed=4,
                                         alpha=0.0, user_activity_sigma=0.0), seed=0)


def _cfg(**kw):
    base = dict(dataset=DATASET, dim=2, budget=5.0, iterations=3, epsilon=1.0, solver="ssp")
    base.update(kw)
    return TrainConfig(**route(base))


class Interrupt(Exception):
    pass


def _interrupt_after(monkeypatch, n_saves):
    """Make the run die after its ``n_saves``-th checkpoint (as kill -9 would)."""
    from dpmt.train import checkpoint as ck

    real = ck.Checkpoint.save
    calls = []

    def save(self, *a, **k):
        real(self, *a, **k)
        calls.append(1)
        if len(calls) >= n_saves:
            raise Interrupt()

    monkeypatch.setattr(ck.Checkpoint, "save", save)


# -- A. the privacy claim ----------------------------------------------------------------------
def test_a1_duplicate_pairs_are_refused_on_every_path_into_fit(split):
    tr = split.train
    dup = Ratings(user=np.concatenate([tr.user, np.repeat(tr.user[:1], 30)]),
                  item=np.concatenate([tr.item, np.repeat(tr.item[:1], 30)]),
                  value=np.ones(tr.nnz + 30, np.float32), user_ids=tr.user_ids,
                  item_ids=tr.item_ids)
    with pytest.raises(DataError, match="duplicate .user, item. pair"):
        dpmt.fit(dup, _cfg(), execution=QUIET)
    with pytest.raises(DataError, match="appears 31 times|duplicate"):
        Ratings.from_raw(np.r_[[7] * 31, 8], np.r_[[1] * 31, 2], np.ones(32))


@pytest.mark.parametrize("kw", [dict(user=[2**32]), dict(user=[0.7]),
                                dict(user=[[0, 0]], item=[[0, 0]], value=[[1.0, 1.0]])])
def test_a2_ratings_validate_dtype_range_and_shape(kw):
    args = dict(user=[0], item=[0], value=[1.0], user_ids=np.arange(3), item_ids=np.arange(3))
    args.update(kw)
    with pytest.raises(DataError):
        Ratings(**args)


def test_a3_one_star_ratings_are_not_taken_for_implicit_feedback(tmp_path):
    f = tmp_path / "ones.csv"
    f.write_text("userId,movieId,rating,timestamp\n"
                 + "".join(f"{u},{i},1,{u * 10 + i}\n" for u in range(30) for i in range(8)))
    from dpmt.train.rundir import prepare_data

    with pytest.raises(DataError, match="kept no ratings"):
        prepare_data(TrainConfig(data=dict(dataset=str(f))), QUIET)


# -- B. run directories and resume ---------------------------------------------------------------
def test_b4_a_half_rewritten_directory_is_never_continued_under_another_config(
        tmp_path, monkeypatch):
    out = tmp_path / "R"
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(Interrupt):
        dpmt.run(_cfg(epsilon=1.0), out, execution=QUIET)
    monkeypatch.undo()
    # a second start with another ε is refused: the directory holds an unfinished run (ε = 2,
    # not 20: each start calibrates its plan first, and ε = 20's takes ~6x as long)
    assert cli(["train", "--dataset", DATASET, "--iterations", 3, "--epsilon", 2,
                "--out", out, *SMALL]) == 2
    # the attack: config.json rewritten to ε = 2 while the checkpoint is ε = 1's
    (out / "trainer" / "config.json").write_text(_cfg(epsilon=2.0).to_json())
    with pytest.raises(DataError, match="another configuration"):
        dpmt.run(_cfg(epsilon=2.0), out, execution=QUIET, resume=True)
    # with the right config back, the ε = 1 run resumes and spends exactly ε = 1
    (out / "trainer" / "config.json").write_text(_cfg(epsilon=1.0).to_json())
    m = dpmt.run(_cfg(epsilon=1.0), out, execution=QUIET, resume=True)
    assert m.epsilon == pytest.approx(1.0, rel=1e-3)
    assert len(m.ledger) == 1 + 3 * 3          # counts + (Gramian, Â, b̂) × 3, none twice


def test_b5_one_process_per_run_directory_and_finished_runs_are_kept(tmp_path):
    out = tmp_path / "R"
    out.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ".lock").write_text(str(sleeper.pid))
        with pytest.raises(ConfigError, match=f"in use by another dpmt process .pid {sleeper.pid}"):
            dpmt.run(_cfg(iterations=1), out, execution=QUIET)
    finally:
        sleeper.kill()
        sleeper.wait()
    # a stale lock (its process is gone) is taken over
    m = dpmt.run(_cfg(iterations=1), out, execution=QUIET)
    assert not (out / ".lock").exists()
    before = (out / "model" / "item_embeddings.npz").read_bytes()
    assert cli(["train", "--dataset", DATASET, "--iterations", 1, "--out", out, *SMALL]) == 2
    assert (out / "model" / "item_embeddings.npz").read_bytes() == before
    assert cli(["train", "--dataset", DATASET, "--iterations", 1, "--epsilon", 2,
                "--out", out, "--overwrite", *SMALL]) == 0
    assert Model.load(out).epsilon == pytest.approx(2.0, rel=1e-3) != m.epsilon


def test_b6_a_checkpoint_of_another_run_is_refused(tmp_path, monkeypatch):
    long, short = tmp_path / "long", tmp_path / "short"
    _interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupt):
        dpmt.run(_cfg(iterations=5), long, execution=QUIET)
    with pytest.raises(Interrupt):
        dpmt.run(_cfg(iterations=3), short, execution=QUIET)
    monkeypatch.undo()
    (short / "trainer" / "checkpoint.npz").write_bytes((long / "trainer" / "checkpoint.npz").read_bytes())
    with pytest.raises(DataError, match="another configuration"):
        dpmt.run(_cfg(iterations=3), short, execution=QUIET, resume=True)


def test_b7_resume_refuses_new_model_flags_and_another_out(tmp_path, monkeypatch, capsys):
    out = tmp_path / "R"
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(Interrupt):
        dpmt.run(_cfg(), out, execution=QUIET)
    monkeypatch.undo()
    assert cli(["train", "--resume", out, "--epsilon", 50, "--dim", 12, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--epsilon" in err and "--dim" in err and "drop" in err
    assert cli(["train", "--resume", out, "--out", tmp_path / "other", "--quiet"]) == 2
    assert cli(["train", "--resume", out, "--quiet"]) == 0     # execution flags only: fine
    assert Model.load(out).epsilon == pytest.approx(1.0, rel=1e-3)


@pytest.mark.parametrize("damage", ["truncate", "random", "directory"])
def test_b8_a_damaged_checkpoint_is_refused_clearly(tmp_path, monkeypatch, damage):
    out = tmp_path / "R"
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(Interrupt):
        dpmt.run(_cfg(), out, execution=QUIET)
    monkeypatch.undo()
    ck = out / "trainer" / "checkpoint.npz"
    if damage == "truncate":
        ck.write_bytes(ck.read_bytes()[:100])
    elif damage == "random":
        ck.write_bytes(os.urandom(5000))
    else:
        ck.unlink()
        ck.mkdir()
    with pytest.raises(DataError, match="checkpoint"):
        dpmt.run(_cfg(), out, execution=QUIET, resume=True)


@pytest.mark.parametrize("text, fragment", [
    ('{"dataset": "ml-100k"', "not valid JSON"), ("null", "must be a JSON object"),
    ('{"dim": "eight"}', "dim must be an integer"), ('{"no_such_key": 1}', "unknown config"),
])
def test_b8_a_damaged_config_is_refused_clearly(tmp_path, capsys, text, fragment):
    out = tmp_path / "R"
    (out / "trainer").mkdir(parents=True)
    (out / "trainer" / "config.json").write_text(text)
    assert cli(["train", "--resume", out, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


# -- C. spend nothing, write nothing, until the run can finish ------------------------------------
def test_c9_a_tiny_dataset_trains_to_the_end_and_is_saved(tmp_path):
    f = tmp_path / "tiny.csv"
    rng = np.random.default_rng(0)
    f.write_text("userId,movieId,rating,timestamp\n" + "".join(
        f"{u},{i},{4 + int(rng.integers(2))},{u * 10 + i}\n" for u in range(40) for i in range(4)))
    items = tmp_path / "items.txt"          # the public catalogue: no private selection
    items.write_text("0\n1\n2\n3\n")
    assert cli(["train", "--dataset", f, "--items", items, "--out", tmp_path / "R",
                *SMALL]) == 0
    assert Model.load(tmp_path / "R").n_items == 4


@pytest.mark.parametrize("make_out", [
    lambda t: (t / "file").write_text("x") and t / "file",
    lambda t: (t / "file").write_text("x") and t / "file" / "run",
])
def test_c10_bad_train_outputs_are_refused_first(tmp_path, monkeypatch, capsys, make_out):
    from dpmt.train import rundir

    out = make_out(tmp_path)
    monkeypatch.setattr(rundir, "prepare_data", lambda *a, **k: pytest.fail("data was read"))
    assert cli(["train", "--dataset", DATASET, "--out", out, *SMALL]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_c10_compare_and_stream_check_their_outputs_before_running(tmp_path, monkeypatch,
                                                                   capsys):
    from dpmt.apps import compare
    from dpmt.online import ratings_stream

    existing = tmp_path / "existing"
    existing.write_text("keep me")
    monkeypatch.setattr(compare, "run_grid", lambda *a, **k: pytest.fail("trained"))
    assert cli(["compare", "--dataset", DATASET, "--out", existing, "--quiet"]) == 2
    assert existing.read_text() == "keep me"
    monkeypatch.setattr(ratings_stream, "ratings_stream", lambda *a, **k: pytest.fail("ran"))
    assert cli(["stream", "--dataset", "synthetic-stream", "--json", existing / "x.json",
                "--no-progress"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_c11_a_run_too_big_for_memory_is_refused_before_any_release(split, monkeypatch):
    import dpmt.train.checks as checks
    import dpmt.train.training_run as setup

    monkeypatch.setattr(setup, "private_counts", lambda *a, **k: pytest.fail("released"))
    monkeypatch.setattr(checks.os, "sysconf", lambda name: 1024 if name == "SC_PAGE_SIZE" else
                        2**18)                                   # a 256 MiB machine
    with pytest.raises(ConfigError, match="needs about .* GiB"):
        dpmt.fit(split.train, _cfg(dim=4096), execution=QUIET)


@pytest.mark.parametrize("argv, fragment", [
    (["--seed", "99999999999999999999999"], "--seed must be in [0, 2147483647]"),
    (["--epsilon", "1e9"], "--epsilon must be in [0.01, 100]"),
    (["--epsilon", "1e-9"], "--epsilon must be in [0.01, 100]"),
    (["--delta", "1e-300"], "--delta must be in [1e-12, 0.1]"),
    (["--user-clip", "1e300"], "--user-clip must be in (0, 1000000]"),
    (["--dim", "100000"], "--dim must be in [1, 4096]"),
])
def test_c12_extreme_numbers_get_the_valid_range(argv, fragment, capsys):
    assert cli(["train", "--dataset", DATASET, *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
    with pytest.raises(ConfigError):
        TrainConfig(data=dict(seed=2**64))


def test_c12_an_unreachable_budget_says_so(capsys, monkeypatch):
    """When dp_accounting finds no noise level (its bracketing fails), the user is told what
    to change — not dp_accounting's NoBracketIntervalFoundError."""
    import dp_accounting

    def no_bracket(*a, **k):
        raise dp_accounting.mechanism_calibration.NoBracketIntervalFoundError("no bracket")

    monkeypatch.setattr(dp_accounting, "calibrate_dp_mechanism", no_bracket)
    from dpmt.privacy import calibration

    calibration._calibrate_cached.cache_clear()
    assert cli(["train", "--dataset", DATASET, "--epsilon", "0.02", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no noise level reaches ε = 0.02" in err and "raise ε" in err
    assert "Traceback" not in err and "NoBracket" in err


def test_c13_an_interrupted_grid_keeps_its_cells_and_resumes(tmp_path, monkeypatch):
    from dpmt.train import loop

    out = tmp_path / "cmp"
    argv = ["compare", "--dataset", DATASET, "--weight-grid", "uniform", "adaptive",
            "--solvers", "ssp",
            "--seeds", 0, 1, "--no-baselines", "--out", out, "--dim", 2, "--budget", 5,
            "--iterations", 1, "--quiet"]
    real, calls = loop.fit, []

    def dying_fit(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(loop, "fit", dying_fit)
    assert cli(argv) == 130
    cells = json.loads((out / "cells.json").read_text())["rows"]
    assert {(r["method"], r["seed"]) for r in cells if not r["method"].startswith("private")} \
        == {("DP uniform ssp ε=5", 0), ("DP adaptive μ=0.25 ssp ε=5", 0)}
    calls.clear()
    assert cli(argv) == 2                                   # not silently overwritten
    assert cli([*argv, "--resume"]) == 0
    assert len(calls) == 2                                  # only seed 1's two cells ran
    summary = (out / "summary.md").read_text()
    assert "DP uniform" in summary and "2 seeds" not in summary


# -- D. the CLI says what it does -----------------------------------------------------------------
def test_d14_the_cli_and_the_library_have_the_same_defaults():
    from dpmt.apps.args import config_from_args
    from dpmt.apps.cli import build_parser

    cfg, ex = config_from_args(build_parser().parse_args(["train"]))
    assert cfg == TrainConfig() and ex == ExecutionConfig()
    assert cfg.mu == TrainConfig().mu == 0.25


@pytest.mark.parametrize("flag", [["--epsilon", "1"], ["--weights", "tail"], ["--solver", "gd"],
                                  ["--no-privacy"]])
def test_d15_compare_refuses_flags_it_would_ignore(flag, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli(["compare", *flag, "--quiet"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--epsilons", "5", "5.0"], ["--seeds", "0", "0"]])
def test_d16_repeated_grid_values_are_refused(argv, monkeypatch, capsys, tmp_path):
    from dpmt.apps import compare

    monkeypatch.setattr(compare, "run_grid", lambda *a, **k: pytest.fail("trained"))
    assert cli(["compare", "--dataset", DATASET, *argv, "--out", tmp_path / "c",
                "--quiet"]) == 2
    assert "twice" in capsys.readouterr().err


def test_d17_bad_mlp_features_are_named_as_such(split):
    bad = np.full((split.train.n_items, 3), np.nan)
    with pytest.raises(ConfigError, match="item_features must be a finite"):
        dpmt.fit(split.train, _cfg(solver="gd", gd=GDConfig(encoder="mlp", steps=1)),
                 item_features=bad, execution=QUIET)


def test_d17_data_changed_under_a_run_is_named_as_such(tmp_path, monkeypatch):
    f = tmp_path / "r.csv"
    rows = [(u, i) for u in range(60) for i in range(12) if (u * 7 + i) % 3]
    f.write_text("userId,movieId,rating,timestamp\n"
                 + "".join(f"{u},{i},5,{u * 100 + i}\n" for u, i in rows))
    out = tmp_path / "R"
    items = tmp_path / "items.txt"          # the public catalogue, ids 0..11 and 999's
    items.write_text("".join(f"{i}\n" for i in range(12)))
    cfg = TrainConfig(dim=2, budget=5.0, iterations=3, data=dict(dataset=str(f), items=str(items)))
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(Interrupt):
        dpmt.run(cfg, out, execution=QUIET)
    monkeypatch.undo()
    f.write_text(f.read_text() + "999,3,5,1\n999,4,5,2\n999,5,5,3\n999,6,5,4\n999,7,5,5\n")
    with pytest.raises(DataError, match="other training data"):
        dpmt.run(cfg, out, execution=QUIET, resume=True)


@pytest.mark.parametrize("n", [943, 138_514, 10**8])
def test_the_delta_warning_suggests_a_delta_well_below_one_over_n(n):
    """The suggested δ must itself protect: ≤ 1/(10 n̂) (a fixed "1e-5" is ≥ 1/n from 10⁵
    users on, ML-20M's 138k among them)."""
    import re

    from dpmt.train.checks import warn_if_delta_protects_nobody

    with pytest.warns(UserWarning, match="1/n̂") as rec:
        warn_if_delta_protects_nobody(TrainConfig(privacy=dict(delta=1e-5 if n > 10**5 else 1e-2)),
                                      float(n))
    suggested = float(re.search(r"--delta ([0-9.e+-]+)", str(rec[0].message)).group(1))
    assert suggested <= 1.0 / (10 * n) and suggested > 1.0 / (1000 * n)


def test_d18_delta_above_one_over_n_warns_and_one_user_is_refused(split):
    with pytest.warns(UserWarning, match="1/n̂"):
        dpmt.fit(split.train, _cfg(delta=0.1, iterations=1), execution=QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dpmt.fit(split.train, _cfg(delta=1e-6, iterations=1), execution=QUIET)
    one = Ratings(user=np.zeros(5, np.int32), item=np.arange(5, dtype=np.int32),
                  value=np.ones(5, np.float32), user_ids=np.arange(1), item_ids=np.arange(5))
    with pytest.raises(DataError, match="too small"):
        dpmt.fit(one, _cfg(), execution=QUIET)


def test_d19_the_public_boundary_validates_its_arguments(split):
    model = dpmt.fit(split.train, _cfg(iterations=1), execution=QUIET)
    ids, _ = model.recommend([], k=3)                # ranks by the released counts
    assert len(ids) == 3
    with pytest.raises(DataError, match="integers"):
        model.recommend([0.5, 1.7])
    with pytest.raises(DataError, match="finite"):
        model.fold_in(model.item_ids[:2], values=[np.nan, 1.0])
    with pytest.raises(DataError, match="EvalSet"):
        dpmt.fit(split.train, _cfg(), test=split.train, execution=QUIET)
    with pytest.raises(ConfigError, match="TrainConfig.from_dict"):
        dpmt.fit(split.train, {"epsilon": 1.0}, execution=QUIET)
    with pytest.raises(DataError, match="dpmt.data.Ratings"):
        dpmt.fit(np.zeros((3, 3)), _cfg(), execution=QUIET)
    with pytest.raises(DpmtError):
        dpmt.fit(split.train, _cfg(), execution={"devices": 2})
