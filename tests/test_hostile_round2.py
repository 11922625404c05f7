"""Issue 25: the next round of hostile inputs. Each case is a reproducer that failed before
its fix (a raw traceback, a hang, lost or mixed results, a false statement)."""

import json
import os

import numpy as np
import pytest

import dpmt
from _cli import cli
from dpmt.config import ExecutionConfig, GDConfig, TrainConfig
from dpmt.errors import ConfigError, DataError

QUIET = ExecutionConfig(progress=False)


@pytest.fixture(scope="module")
def data():
    return dpmt.data.make_synthetic(n_users=200, n_items=40, n_interactions=3000, seed=1)


@pytest.fixture(scope="module")
def model(data):
    return dpmt.fit(data, TrainConfig(dataset="synthetic", dim=3, iterations=1, epsilon=2.0,
                                      noise_seed=0), execution=QUIET)


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
        dpmt.fit(data, TrainConfig(dataset="synthetic", dim=3, iterations=1),
                 execution=QUIET, run_dir=f)
    with pytest.raises(ConfigError, match="resume=True needs the run_dir"):
        dpmt.fit(data, TrainConfig(dataset="synthetic", dim=3, iterations=1),
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
        TrainConfig(**kw)


def test_c12_gd_config_and_numpy_scalars():
    with pytest.raises(ConfigError, match="gd.steps must be an integer"):
        GDConfig(steps="3")
    cfg = TrainConfig(dim=np.int64(8), epsilon=np.float32(5), budget=np.int32(30))
    assert type(cfg.dim) is int and type(cfg.epsilon) is float and type(cfg.budget) is float
    assert cfg == TrainConfig(dim=8, epsilon=5.0, budget=30.0)
    assert cfg.fingerprint() == TrainConfig(dim=8, epsilon=5, budget=30).fingerprint()
    json.dumps(cfg.to_dict())                              # serialisable


# -- C13: values of the wrong shape -----------------------------------------------------------
def test_c13_values_that_are_not_one_per_item_are_named(model):
    with pytest.raises(DataError, match="one per item"):
        model.recommend([5], values=1)
    with pytest.raises(DataError, match="values must be a sequence"):
        model.recommend_batch([[5]], values=3)
