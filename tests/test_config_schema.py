"""The stored config's schema (issue 27): every stored TrainConfig carries ``config_version``,
one reader (``TrainConfig.from_dict``) migrates older versions and refuses newer ones and
unknown keys, and the fingerprints that resume compares do not move."""

import json

import numpy as np
import pytest

from dpmt.config import ExecutionConfig, GDConfig, NonPrivate, TrainConfig
from dpmt.config_schema import CONFIG_VERSION
from dpmt.config_schema import migrate, stored_version
from dpmt.errors import ConfigError
from dpmt.model import Model
from dpmt.model_files import MODEL_FILE, files_fingerprint
from dpmt.train import run
from dpmt.train.rundir import read_config

QUIET = ExecutionConfig(progress=False)

#: a version-1 config as that dpmt's ``to_dict`` wrote it (flat noisy-GD settings, the
#: execution settings data_dir and devices inside)
V1 = {"dataset": "ml-100k", "data_dir": "data", "positive_threshold": 3.5,
      "split": "per-user", "split_fractions": [0.8, 0.1, 0.1], "heldout_users": 100,
      "dim": 8, "iterations": 2, "reg": 1.0, "gravity": 0.5, "user_clip": 0.1,
      "init_scale": 0.1, "weights": "adaptive", "mu": 0.25, "gamma": 1.0, "budget": 30.0,
      "count_cap": None, "solver": "gd", "gd_steps": 10, "gd_learning_rate": 100.0,
      "gd_clip": 0.2, "gd_sampling_rate": None, "gd_optimizer": "sgd",
      "encoder": "embedding", "mlp_hidden": 64, "private": True, "epsilon": 5.0,
      "delta": 1e-5, "accountant": "pld", "count_noise_multiplier": None,
      "count_noise_ratio": 1.0, "b_noise_ratio": 1.0, "gram_noise_ratio": 1.0,
      "devices": 1, "seed": 0}


def _cfg(**kw):
    return TrainConfig(dim=8, solver="ssp", gd=GDConfig(steps=5), **kw,
                       privacy=dict(epsilon=1.0, noise_seed=3))


def test_stored_form_round_trips_and_carries_the_version():
    cfg = _cfg()
    d = cfg.stored()
    assert d["config_version"] == CONFIG_VERSION
    assert TrainConfig.from_dict(d) == cfg
    assert TrainConfig.from_dict(json.loads(cfg.to_json())) == cfg
    assert json.loads(cfg.to_json())["config_version"] == CONFIG_VERSION
    assert "config_version" not in cfg.to_dict()           # the fields alone
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg     # unversioned: the current schema
    pub = cfg.stored(public=True)
    assert pub["config_version"] == CONFIG_VERSION and pub["privacy"]["noise_seed"] is None
    assert TrainConfig.from_dict(pub) == cfg.replace(privacy=dict(noise_seed=None))


def test_fingerprints_are_those_computed_before_the_version_was_stored():
    """Resume compares these (the checkpoint's config_fingerprint): pinned before
    ``config_version`` existed, so every existing checkpoint still resumes. A new
    TrainConfig field moves them, on purpose; so did version 3's default ``gd.steps=None``
    (the rule), while the version-2 default, 20 steps, kept its fingerprint. Version 4's
    rating setting ``user_offsets`` enters a rating config's fingerprint only (the rating
    model changed with it; an implicit model did not). Version 5's ``user_cg_steps``
    enters only where it differs from ``cg_steps`` (before, ``cg_steps`` set both). Version
    7's ``fold_in`` enters unless it is ``"training"``, what every older config migrates to
    (its new default ``"auto"`` chooses the fold-in privately at ε ≥ 3: another model)."""
    old = dict(user_cg_steps=8, fold_in="training")
    assert TrainConfig(**old).replace(gd=dict(steps=20)).fingerprint() == "36452aec0d2e6152"
    assert TrainConfig(**old).fingerprint() == "47693cace1e49e9e"
    assert _cfg(**old).fingerprint() == "d1a938ee0a9a0a9e"
    assert TrainConfig.from_dict(_cfg(**old).stored()).fingerprint() == "d1a938ee0a9a0a9e"
    v6 = {k: v for k, v in _cfg(**old).stored().items() if k != "fold_in"}
    assert TrainConfig.from_dict({**v6, "config_version": 6}).fingerprint() == \
        "d1a938ee0a9a0a9e"
    assert TrainConfig(user_cg_steps=8).fingerprint() != "47693cace1e49e9e"   # "auto"
    # version 5's user_cg_steps = 3 is a different model (fewer user CG steps)
    assert TrainConfig().fingerprint() not in ("47693cace1e49e9e", "36452aec0d2e6152")
    rating = TrainConfig(task="rating", data=dict(split="random"))
    assert rating.fingerprint() != rating.replace(user_offsets="mean").fingerprint()
    # version 6's cg_steps=None enters as the steps it runs: a non-private config of
    # version 5 (8 item steps) keeps its fingerprint; the new non-private default (3) moves
    old = TrainConfig(privacy=NonPrivate(), cg_steps=8, fold_in="training")
    assert old.fingerprint() == "f750a8457157dd89"
    assert old.replace(user_cg_steps=8).fingerprint() == "1c6aaef903c4b1bb"
    new = TrainConfig(privacy=NonPrivate(), fold_in="training")
    assert new.fingerprint() != "f750a8457157dd89"
    assert new.fingerprint() == new.replace(cg_steps=3).fingerprint()


@pytest.mark.parametrize("versioned", [False, True])
def test_a_version_1_config_is_migrated(versioned):
    d = {**V1, "config_version": 1} if versioned else dict(V1)
    assert stored_version(d) == 1
    cfg = TrainConfig.from_dict(d)
    assert cfg.gd == GDConfig(steps=10, learning_rate=100.0, clip=0.2, sampling_rate=None,
                              optimizer="sgd", encoder="embedding", mlp_hidden=64)
    assert (cfg.solver, cfg.dim, cfg.iterations, cfg.reg, cfg.weights) == \
        ("gd", 8, 2, 1.0, "adaptive")
    assert cfg.data.split_fractions == (0.8, 0.1, 0.1)
    # the execution settings left the config; fields added since take their defaults
    m = migrate(d)
    assert not {"data_dir", "devices", "gd_steps", "encoder", "config_version"} & set(m)
    assert cfg.task == TrainConfig().task and cfg.init == TrainConfig().init
    assert d == ({**V1, "config_version": 1} if versioned else V1)   # the input untouched


@pytest.mark.parametrize("cg_steps", [None, 5])
def test_a_version_4_config_keeps_its_user_cg_steps(cg_steps):
    """Up to version 4 ``cg_steps`` set the CG user step's steps too (8 by default): the
    migrated config trains that model and keeps its fingerprint."""
    d = TrainConfig().stored()
    del d["user_cg_steps"], d["fold_in"]          # neither existed in version 4
    if cg_steps is None:
        del d["cg_steps"]
    else:
        d["cg_steps"] = cg_steps
    cfg = TrainConfig.from_dict({**d, "config_version": 4})
    want = 8 if cg_steps is None else cg_steps
    assert (cfg.cg_steps, cfg.user_cg_steps) == (want, want)
    assert cfg.fingerprint() == TrainConfig(cg_steps=want, user_cg_steps=want,
                                            fold_in="training").fingerprint()
    if cg_steps is None:
        assert cfg.fingerprint() == "47693cace1e49e9e"
    with pytest.raises(ConfigError, match="version-4 config has no user_cg_steps"):
        TrainConfig.from_dict({**d, "user_cg_steps": 3, "config_version": 4})


@pytest.mark.parametrize("private", [True, False])
def test_a_version_5_config_keeps_its_8_item_cg_steps(private):
    """In version 5 a missing ``cg_steps`` meant 8 item CG steps; since version 6 it means
    the rule (8 with noise, 3 without). A migrated version-5 config trains what it did."""
    d = TrainConfig(privacy=dict(epsilon=2.0) if private else NonPrivate()).stored()
    del d["cg_steps"]
    cfg = TrainConfig.from_dict({**d, "config_version": 5})
    assert (cfg.cg_steps, cfg.item_cg_steps) == (8, 8)
    # the current version leaves it to the rule
    assert TrainConfig.from_dict(d).item_cg_steps == (8 if private else 3)
    assert TrainConfig.from_dict({**d, "cg_steps": 4, "config_version": 5}).cg_steps == 4


def test_a_version_1_config_with_a_gd_object_is_refused():
    with pytest.raises(ConfigError, match="version-1 config has no 'gd'"):
        TrainConfig.from_dict({**V1, "config_version": 1, "gd": {}})


def test_a_newer_version_is_refused_with_upgrade_advice():
    d = {**_cfg().stored(), "config_version": CONFIG_VERSION + 1}
    with pytest.raises(ConfigError, match=f"config_version {CONFIG_VERSION + 1}, newer .* "
                                          "upgrade dpmt"):
        TrainConfig.from_dict(d)


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True])
def test_an_invalid_version_is_refused(bad):
    with pytest.raises(ConfigError, match="config_version must be an integer"):
        TrainConfig.from_dict({**_cfg().stored(), "config_version": bad})


def test_unknown_keys_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"unknown config keys: colour, size \(a misspelt "
                                          "name, or a config of a newer dpmt: upgrade it"):
        TrainConfig.from_dict({**_cfg().stored(), "colour": 1, "size": 2})
    with pytest.raises(ConfigError, match="unknown config keys: gd.wobble"):
        TrainConfig.from_dict({**_cfg().stored(), "gd": {**_cfg().gd.__dict__, "wobble": 2}})
    # a version-1 key in a version-2 config is not silently migrated
    with pytest.raises(ConfigError, match="unknown config keys: gd_steps"):
        TrainConfig.from_dict({**_cfg().stored(), "gd_steps": 3})


def _model(cfg):
    rng = np.random.default_rng(0)
    return Model(item_embeddings=rng.normal(size=(12, 4)).astype(np.float32),
                 item_ids=np.arange(100, 112), config=cfg)


def test_a_saved_model_records_the_version_and_loads(tmp_path):
    model = _model(TrainConfig(dim=4, privacy=NonPrivate()))
    model.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / MODEL_FILE).read_text())
    assert meta["config"]["config_version"] == CONFIG_VERSION
    back = Model.load(tmp_path / "m")
    assert back.config == model.config
    np.testing.assert_array_equal(back.item_embeddings, model.item_embeddings)


def test_a_model_saved_before_the_version_was_stored_still_loads(tmp_path):
    """model.json as the dpmt before this change wrote it: no config_version in its config,
    its fingerprint over that model.json."""
    model = _model(TrainConfig(dim=4, privacy=NonPrivate()))
    model.save(tmp_path / "m")
    path = tmp_path / "m" / MODEL_FILE
    meta = json.loads(path.read_text())
    del meta["config"]["config_version"], meta["fingerprint"]
    meta["fingerprint"] = files_fingerprint(model.fingerprint(), None, meta)
    path.write_text(json.dumps(meta))
    assert Model.load(tmp_path / "m").config == model.config


def test_a_run_directory_resumes_from_an_unversioned_config(tmp_path):
    """A run started before config_version was stored (its trainer/config.json without it)
    resumes: the config reads back equal and the checkpoint's fingerprint matches."""
    cfg = TrainConfig(dim=4, iterations=1, budget=10.0, reg=1.0, gravity=0.1,
                      solver="ssp",
                      # uniform popularity and activity: few buckets, a faster compile
                      data=dict(dataset="synthetic:users=120,items=40,interactions=1500,seed=2,"
                                        "alpha=0,sigma=0"),
                      privacy=dict(epsilon=3.0, noise_seed=1))
    out = tmp_path / "r"
    first = run(cfg, out_dir=out, execution=QUIET, baselines=False)
    path = out / "trainer" / "config.json"
    assert json.loads(path.read_text())["config_version"] == CONFIG_VERSION
    path.write_text(json.dumps(cfg.to_dict(), indent=2))       # the old, unversioned file
    assert read_config(out) == cfg
    again = run(cfg, out_dir=out, execution=QUIET, resume=True, baselines=False)
    np.testing.assert_array_equal(again.item_embeddings, first.item_embeddings)


def test_a_version_3_rating_config_keeps_its_user_bias():
    """Version 3's rating model took b_j from the clipped labels, never refitted, and had no
    slopes: migrated, it says so (and folds users in as it was trained); an implicit config
    is unchanged, and a version-4 rating config keeps what it states."""
    v3 = {**TrainConfig(task="rating", data=dict(split="random"),
                        user_cg_steps=8).flat_dict(),
          "config_version": 3}                   # flat_dict: version 3's form
    del v3["user_offsets"]
    cfg = TrainConfig.from_dict(v3)
    assert cfg.user_offsets == "mean"
    from dpmt.labels import bias_refit, slopes

    assert not bias_refit(cfg) and not slopes(cfg)
    assert TrainConfig.from_dict(TrainConfig(task="rating", data=dict(split="random")).stored()
                                 ).user_offsets == "slopes"
    imp = {**TrainConfig(user_cg_steps=8).flat_dict(), "config_version": 3}
    assert "user_offsets" not in imp and "user_cg_steps" not in imp
    assert TrainConfig.from_dict(imp) == TrainConfig(cg_steps=8, user_cg_steps=8)
