"""Issue 25: the next round of hostile inputs. Each case is a reproducer that failed before
its fix (a raw traceback, a hang, lost or mixed results, a false statement)."""

import json
import os

import numpy as np
import pytest

import dpmt
from _cli import cli
from dpmt.config import ExecutionConfig, GDConfig, TrainConfig, route
from dpmt.errors import ConfigError, DataError

QUIET = ExecutionConfig(progress=False)


@pytest.fixture(scope="module")
def data():
    return dpmt.data.make_synthetic(n_users=200, n_items=40, n_interactions=3000, seed=1)


@pytest.fixture(scope="module")
def model(data):
    return dpmt.fit(data, TrainConfig(dim=3, iterations=1, data=dict(dataset="synthetic"),
                                      privacy=dict(epsilon=2.0, noise_seed=0)), execution=QUIET)


# -- A3: recommend_batch's batch size -----------------------------------------------------------
@pytest.mark.parametrize("bs", [-1, 0, 2.5, True])
def test_a3_a_bad_batch_size_is_refused_not_uninitialised_ids(model, bs):
    with pytest.raises(ConfigError, match="batch_size must be an integer >= 1"):
        model.recommend_batch([[5]], k=3, batch_size=bs)


# -- B7: fit's run_dir ------------------------------------------------------------------------
def test_b7_a_file_as_run_dir_is_refused_before_any_release(data, tmp_path, monkeypatch):
    import dpmt.train.training_run as tr

    monkeypatch.setattr(tr, "private_counts", lambda *a, **k: pytest.fail("released"))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="run_dir .* is a file"):
        dpmt.fit(data, TrainConfig(dim=3, iterations=1, data=dict(dataset="synthetic")),
                 execution=QUIET, run_dir=f)
    with pytest.raises(ConfigError, match="resume=True needs the run_dir"):
        dpmt.fit(data, TrainConfig(dim=3, iterations=1, data=dict(dataset="synthetic")),
                 execution=QUIET, resume=True)


# -- C8: item ids out of range, booleans ------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda m: m.recommend([10 ** 30]), lambda m: m.similar_items(10 ** 30),
    lambda m: m.score([1], items=[10 ** 30]), lambda m: m.recommend([2 ** 63]),
    lambda m: m.recommend([-(2 ** 63) - 1])])
def test_c8_huge_item_ids_are_named_not_overflowed(model, call):
    with pytest.raises(DataError, match="outside the 64-bit integer range") as e:
        call(model)
    assert "-9223372036854775808" not in str(e.value)            # no wrap-around


def test_c8_booleans_are_not_item_ids(model):
    for h in ([True], np.array([True, False])):
        with pytest.raises(DataError, match="not True/False"):
            model.recommend(h)


def test_c8_the_cli_names_a_huge_item_id(model, tmp_path, capsys):
    path = model.save(tmp_path / "m")
    assert cli(["recommend", "--model", path, "--items", "99999999999999999999999"]) == 2
    err = capsys.readouterr().err
    assert "outside the 64-bit integer range" in err and "Traceback" not in err


# -- C12: one type rule for every config field -------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    (dict(epsilon="5"), "epsilon must be a number"), (dict(budget="30"), "budget must be a number"),
    (dict(split_fractions="abc"), "split_fractions must be a sequence of numbers"),
    (dict(dim=8.0), "dim must be an integer"), (dict(dim=True), "dim must be an integer"),
    (dict(private="yes"), "private must be True or False"),
    (dict(dataset=5), "dataset must be a string")])
def test_c12_strings_and_booleans_are_not_numbers(kw, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**route(kw))


def test_c12_gd_config_and_numpy_scalars():
    with pytest.raises(ConfigError, match="gd.steps must be an integer"):
        GDConfig(steps="3")
    cfg = TrainConfig(dim=np.int64(8), budget=np.int32(30), privacy=dict(epsilon=np.float32(5)))
    assert type(cfg.dim) is int and type(cfg.privacy.epsilon) is float and type(cfg.budget) is float
    assert cfg == TrainConfig(dim=8, budget=30.0, privacy=dict(epsilon=5.0))
    assert cfg.fingerprint() == TrainConfig(dim=8, budget=30, privacy=dict(epsilon=5)).fingerprint()
    json.dumps(cfg.to_dict())                              # serialisable


# -- C13: values of the wrong shape -----------------------------------------------------------
def test_c13_values_that_are_not_one_per_item_are_named(model):
    with pytest.raises(DataError, match="one per item"):
        model.recommend([5], values=1)
    with pytest.raises(DataError, match="values must be a sequence"):
        model.recommend_batch([[5]], values=3)


# -- C10: stream ε ----------------------------------------------------------------------------
@pytest.mark.parametrize("eps", ["5000", "1e4", "1e308"])
def test_c10_stream_caps_epsilon_as_train_does(eps, capsys):
    assert cli(["stream", "--epsilon", eps]) == 2
    err = capsys.readouterr().err
    assert "--epsilon must be in (0, 100]" in err and "Traceback" not in err


# -- C11 / D17: model files, their types and their version, said plainly ------------------------
def _edit(path, **changes):
    meta = json.loads((path / "model.json").read_text())
    meta.update(changes)
    (path / "model.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("changes, said", [
    (dict(history=5), "'history' must be a list (got 5)"),
    (dict(seconds="x"), "'seconds' must be a number (got 'x')"),
    (dict(label_offset="x"), "'label_offset' must be a number or null (got 'x')"),
    (dict(version=0), "version 0, which no dpmt ever wrote"),
    (dict(version=99), "version 99; this dpmt reads version 2: upgrade dpmt")])
def test_c11_model_json_fields_are_checked_in_words(model, tmp_path, changes, said):
    path = model.save(tmp_path / "m")
    _edit(path, **changes)
    with pytest.raises(DataError, match=said.replace("(", r"\(").replace(")", r"\)")):
        dpmt.Model.load(path)


def test_d17_a_folder_of_run_directories_names_them(model, tmp_path, capsys):
    model.save(tmp_path / "runs" / "defaults" / "model")
    assert cli(["recommend", "--model", tmp_path / "runs", "--items", "3"]) == 2
    err = capsys.readouterr().err
    assert "defaults/model" in err and "give one of them" in err


def test_d17_a_rating_model_takes_ratings_from_the_cli(tmp_path, capsys):
    f = tmp_path / "r.csv"
    rng = np.random.default_rng(0)
    f.write_text("userId,movieId,rating,timestamp\n" + "".join(
        f"{u},{i},{1 + int(rng.integers(5))},{u * 100 + i}\n"
        for u in range(120) for i in range(20) if (u + i) % 3))
    items = tmp_path / "items.txt"
    items.write_text("".join(f"{i}\n" for i in range(20)))
    out = tmp_path / "R"
    assert cli(["train", "--dataset", f, "--items", items, "--task", "rating", "--split",
                "random", "--dim", "2", "--iterations", "1", "--solver", "ssp", "--quiet",
                "--out", out]) == 0
    said = capsys.readouterr().out
    assert "--ratings R,R,..." in said                     # the command train suggests works
    assert cli(["recommend", "--model", out, "--items", "3,4"]) == 2
    assert "pass --ratings" in capsys.readouterr().err
    assert cli(["recommend", "--model", out, "--items", "3,4", "--ratings", "5,1"]) == 0
    assert cli(["recommend", "--model", out, "--items", "3,4", "--ratings", "5"]) == 2
    assert "one rating per item" in capsys.readouterr().err


# -- D16: what the help and the messages say is what the code does -----------------------------
def test_d16_help_texts_come_from_the_code(capsys):
    from dpmt.config import WEIGHTS_SCALE
    from dpmt.train.defaults import weights_for

    assert weights_for(WEIGHTS_SCALE / 5.0 - 1, 5.0) == "uniform"
    assert weights_for(WEIGHTS_SCALE / 5.0 + 1, 5.0) == "adaptive"
    for argv, needle in ((["train", "--help"], f"n̂·ε < {WEIGHTS_SCALE:g}"),
                         (["bench", "--help"], f"dpmt's default, {TrainConfig().ssp.item_solve}"),
                         (["compare", "--help"], f"(default: {TrainConfig().solver}")):
        cli(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert needle in text, (argv, needle)


def test_d16_a_rating_model_states_no_popularity_prior_rule():
    from dpmt.train.defaults import resolve

    cfg, why = resolve(TrainConfig(task="rating", data=dict(split="random")), 900.0)
    assert cfg.popularity_prior == 0.0 and "popularity_prior" not in dict(
        (k, r) for k, _, r in why)


def test_d16_resuming_a_finished_run_says_nothing_was_trained(tmp_path, capsys):
    out = tmp_path / "R"
    # uniform popularity and activity (alpha = 0, sigma = 0): few buckets, a faster compile
    args = ["--dataset", "synthetic:users=150,items=50,interactions=2500,seed=4,alpha=0,sigma=0",
            "--dim", "2",
            "--iterations", "1", "--solver", "ssp", "--quiet"]
    assert cli(["train", *args, "--out", out]) == 0
    capsys.readouterr()
    assert cli(["train", "--resume", out, "--quiet"]) == 0
    assert "had finished: nothing was trained or charged again" in capsys.readouterr().out


# -- D18: bench --quiet still prints its result --------------------------------------------------
def test_d18_bench_quiet_prints_the_result(monkeypatch, capsys):
    from benchmarks import bench

    fake = {"interactions": 10, "dim": 2, "iteration_seconds": 1.0, "item_solve": "cg",
            "item_step": {"seconds": 0.5, "fraction_of_peak": 0.1},
            "user_step": {"seconds": 0.5, "fraction_of_peak": 0.1},
            "matmul_peak_flops": 1e9, "peak_rss_bytes": 2 ** 30,
            "recompilations_after_first_iteration": 0, "machine": {}}
    monkeypatch.setattr(bench, "bench_once", lambda *a, **k: dict(fake))
    assert cli(["bench", "--interactions", "1000", "--quiet"]) == 0
    assert "private iteration 1.00s" in capsys.readouterr().out


# -- A1/A2: compare resumes only on the same data, and owns its folder --------------------------
def _csv(path, users, seed):
    rng = np.random.default_rng(seed)
    path.write_text("userId,movieId,rating,timestamp\n" + "".join(
        f"{u},{i},{4 + int(rng.integers(2))},{u * 100 + i}\n"
        for u in range(users) for i in range(12) if rng.random() < 0.7))


def test_a1_compare_resume_refuses_cells_of_other_data(tmp_path, monkeypatch, capsys):
    from dpmt.train import loop

    f, items, out = tmp_path / "r.csv", tmp_path / "items.txt", tmp_path / "cmp"
    _csv(f, 60, 0)
    items.write_text("".join(f"{i}\n" for i in range(12)))
    argv = ["compare", "--dataset", f, "--items", items, "--weight-grid", "uniform",
            "adaptive", "--solvers", "ssp", "--no-baselines", "--dim", "2", "--budget", "5",
            "--iterations", "1", "--out", out, "--quiet"]
    real, calls = loop.fit, []

    def dying_fit(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(loop, "fit", dying_fit)
    assert cli(argv) == 130
    monkeypatch.undo()
    _csv(f, 30, 1)                                         # the file is replaced
    capsys.readouterr()
    assert cli([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "changed since the interrupted grid" in err and "Traceback" not in err


def test_a2_a_folder_in_use_by_a_compare_is_refused(tmp_path, capsys):
    out = tmp_path / "busy"
    out.mkdir()
    (out / ".lock").write_text(str(os.getppid()))        # a live process holds it
    for argv in (["compare", "--dataset", "synthetic:users=60,items=20,interactions=600",
                  "--no-baselines", "--out", out, "--quiet"],
                 ["train", "--dataset", "synthetic:users=60,items=20,interactions=600",
                  "--out", out, "--quiet"]):
        assert cli(argv) == 2
        assert "in use by another dpmt process" in capsys.readouterr().err


# -- B4: demo checks its output before any work ----------------------------------------------
def test_b4_demo_refuses_a_bad_out_before_fetching_or_training(tmp_path, monkeypatch, capsys):
    from dpmt.apps import compare

    monkeypatch.setattr(compare, "run_grid", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr("dpmt.data.fetch", lambda *a, **k: pytest.fail("fetched"))
    f = tmp_path / "file"
    f.write_text("x")
    assert cli(["demo", "--out", f, "--quiet"]) == 2
    assert "is a file" in capsys.readouterr().err
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        assert cli(["demo", "--out", ro / "demo", "--quiet"]) == 2
        assert "not writable" in capsys.readouterr().err
    finally:
        ro.chmod(0o755)


# -- B5/B6: a full disk, a read-only data folder ----------------------------------------------
def test_b5_a_full_disk_says_what_happened_and_how_to_resume(tmp_path, monkeypatch, capsys):
    import errno

    from dpmt.train import checkpoint

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path))

    monkeypatch.setattr(checkpoint.Checkpoint, "save", full)
    out = tmp_path / "R"
    rc = cli(["train", "--dataset", "synthetic:users=60,items=20,interactions=600", "--dim",
              "2", "--iterations", "1", "--solver", "ssp", "--out", out, "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "no space left on the device" in err and f"dpmt train --resume {out}" in err


def test_b6_a_read_only_data_folder_is_named(tmp_path, monkeypatch, capsys):
    import errno
    import importlib

    fetch_mod = importlib.import_module("dpmt.data.fetch")

    def read_only(info, zpath, *a, **k):   # mkstemp of the .part file, as on a read-only disk
        raise OSError(errno.EROFS, "Read-only file system", str(zpath) + ".part")

    monkeypatch.setattr(fetch_mod, "_download", read_only)
    rc = cli(["fetch", "ml-100k", "--data-dir", tmp_path / "empty", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "cannot write" in err and "Read-only file system" in err and "--data-dir" in err


# -- C9: a JAX platform this machine does not have --------------------------------------------
@pytest.mark.parametrize("platform", ["cuda", "bogus"])
def test_c9_a_missing_jax_platform_is_named_with_the_cpu_way_out(platform):
    import subprocess
    import sys

    env = dict(os.environ, JAX_PLATFORMS=platform)
    code = ("import sys; from dpmt.apps.cli import main; sys.exit(main(['train', '--dataset', "
            "'synthetic:users=60,items=20,interactions=600', '--quiet']))")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    if platform == "cuda" and p.returncode == 0:
        pytest.skip("this machine has a CUDA backend")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert f"JAX_PLATFORMS={platform}" in p.stderr and "JAX_PLATFORMS=cpu" in p.stderr


# -- C14: Ctrl-C while the command line loads --------------------------------------------------
def test_c14_ctrl_c_while_the_parser_loads_is_an_interruption(monkeypatch, capsys):
    from dpmt.apps import cli as cli_mod

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_mod, "build_parser", interrupted)
    assert cli_mod.main(["train", "--help"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err


# -- D15: a model says which data it was trained on ---------------------------------------------
def test_d15_a_model_trained_from_python_does_not_call_itself_ml_100k(data, tmp_path, capsys):
    m = dpmt.fit(data, TrainConfig(dim=3, iterations=1, solver="ssp"), execution=QUIET)
    assert m.config.data.dataset == data.name != "ml-100k"
    assert m.report().startswith(f"{data.name}:")
    path = m.save(tmp_path / "m")
    assert dpmt.Model.load(path).config.data.dataset == data.name
    assert cli(["recommend", "--model", path, "--items", "3,17"]) == 0
    out = capsys.readouterr().out
    assert "Toy Story" not in out and "(1995)" not in out          # no ML-100K titles


def test_d15_a_run_keeps_the_dataset_it_was_given(data):
    from dpmt.train.loop import data_label

    assert data_label("shifted-train") == "shifted" and data_label("x") == "x"
    named = dpmt.fit(data, TrainConfig(dim=3, iterations=1, solver="ssp",
                                       data=dict(dataset="my-data")),
                     execution=QUIET)
    assert named.config.data.dataset == "my-data"          # what the caller said is kept


# -- D20, D21: one-candidate tune, files without ratings, CR-only, several .inter -------------
def test_d20_a_one_candidate_tune_says_what_it_spent(tmp_path, capsys):
    # uniform popularity and activity (alpha = 0, sigma = 0): few buckets, a faster compile
    rc = cli(["tune", "--dataset", "synthetic:users=300,items=60,interactions=6000,alpha=0,sigma=0",
              "--dim",
              "4", "--iterations", "1", "--split", "heldout-users", "--heldout-users", "30",
              "--solver", "ssp", "--grid", "reg=3", "--quiet", "--out", tmp_path / "t"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "one candidate, so there was nothing to select" in out and "dpmt train" in out


def test_d21_a_file_without_ratings_is_implicit_feedback(tmp_path, capsys):
    f = tmp_path / "events.csv"
    rng = np.random.default_rng(0)
    f.write_text("userId,movieId\n" + "".join(
        f"{u},{i}\n" for u in range(60) for i in range(12) if rng.random() < 0.6))
    items = tmp_path / "items.txt"
    items.write_text("".join(f"{i}\n" for i in range(12)))
    from dpmt.data import load

    assert load(str(f), progress=False).implicit
    assert cli(["train", "--dataset", f, "--items", items, "--dim", "2", "--iterations", "1",
                "--solver", "ssp", "--quiet", "--out", tmp_path / "R"]) == 0


def test_d21_cr_only_line_endings_and_several_inter_files_are_named(tmp_path, capsys):
    from dpmt.data import load

    f = tmp_path / "cr.csv"
    f.write_bytes(b"userId,movieId,rating\r1,2,5\r1,3,4\r")
    with pytest.raises(DataError, match="lone carriage return"):
        load(str(f), progress=False)
    d = tmp_path / "inter"
    d.mkdir()
    for n in ("a", "b"):
        (d / f"{n}.inter").write_text("user_id:token\titem_id:token\n1\t2\n")
    assert cli(["info", d]) == 2
    assert "2 RecBole .inter files" in capsys.readouterr().err
