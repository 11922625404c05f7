"""Configs by consumer (issue 27): TrainConfig's data, ssp and privacy sub-configs, the
non-private config object, the flat-name routing the CLI and the grids use, and the version-3
→ 4 migration of stored configs."""

import dataclasses
import hashlib
import json
import math

import numpy as np
import pytest

import dpmt
from dpmt.config import (FIELD_GROUPS, DataConfig, ExecutionConfig, GDConfig, NonPrivate,
                         PrivacyConfig, SSPConfig, TrainConfig, route)
from dpmt.config_schema import CONFIG_VERSION, migrate
from dpmt.errors import ConfigError

QUIET = ExecutionConfig(progress=False)

#: a stored version-3 config (flat, ``private`` a bool) with non-default values in every group
V3 = {"config_version": 3, "task": "implicit", "dataset": "synthetic", "columns": None,
      "rating_range": "auto", "items": None, "on_duplicate": "error", "label_clip": 2.0,
      "item_offsets": True, "user_bias": True, "user_bias_reg": 2.0,
      "positive_threshold": 3.0, "split": "heldout-users", "split_fractions": [0.8, 0.1, 0.1],
      "heldout_users": 50, "heldout_fraction": None, "dim": 8, "iterations": 2, "reg": None,
      "gravity": 0.5, "user_clip": 0.1, "init_scale": 0.1, "init": "random",
      "spectral_items": 2048, "popularity_prior": None, "weights": "adaptive", "mu": 0.25,
      "gamma": 1.0, "budget": 30.0, "count_cap": None, "solver": "ssp",
      "gd": {"steps": 5, "learning_rate": 0.01, "clip": 0.2, "sampling_rate": None,
             "optimizer": "adam", "encoder": "embedding", "mlp_hidden": 64},
      "item_solve": "shift", "user_solve": "cg", "cg_steps": 8, "private": True,
      "epsilon": 2.0, "delta": 1e-6, "accountant": "rdp", "count_noise_multiplier": None,
      "count_noise_ratio": 2.0, "b_noise_ratio": 1.5, "gram_noise_ratio": 1.0,
      "spectral_noise_ratio": 1.0, "seed": 7, "noise_seed": 3}


def _v3_fingerprint(d: dict) -> str:
    """How version 3 fingerprinted a config: SHA-256 of its fields' canonical JSON."""
    text = json.dumps({k: v for k, v in d.items() if k != "config_version"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_version_3_config_moves_into_its_consumers_and_keeps_its_fingerprint():
    cfg = TrainConfig.from_dict(V3)
    assert cfg.data == DataConfig(dataset="synthetic", positive_threshold=3.0,
                                  split="heldout-users", heldout_users=50, seed=7)
    assert cfg.ssp == SSPConfig(item_solve="shift", b_noise_ratio=1.5)
    assert cfg.privacy == PrivacyConfig(epsilon=2.0, delta=1e-6, accountant="rdp",
                                        count_noise_ratio=2.0, noise_seed=3)
    assert (cfg.dim, cfg.solver, cfg.gd.steps, cfg.weights) == (8, "ssp", 5, "adaptive")
    # resume compares fingerprints: the move must not change them
    assert cfg.fingerprint() == _v3_fingerprint(V3)
    # every field but version 4's rating setting (an implicit config does not need it) and
    # the fold-in's own λ and α0 (version 7; None, training's, keeps the meaning)
    assert set(migrate(V3)) == {f.name for f in dataclasses.fields(TrainConfig)} - {
        "user_offsets", "fold_in_reg", "fold_in_gravity"}


def test_private_false_becomes_the_non_private_object_stored_as_null():
    d = {**V3, "private": False}
    cfg = TrainConfig.from_dict(d)
    assert cfg.privacy == NonPrivate() and not cfg.private
    assert cfg.privacy.epsilon == math.inf and cfg.privacy.noise_seed is None
    stored = cfg.stored()
    assert stored["privacy"] is None and stored["config_version"] == CONFIG_VERSION
    assert TrainConfig.from_dict(stored) == cfg
    assert TrainConfig.from_dict(json.loads(json.dumps(stored))) == cfg
    # a v3 non-private config at the privacy defaults keeps its fingerprint too
    plain = {**V3, "private": False,
             **{k: v for k, v in dataclasses.asdict(PrivacyConfig(count_noise_ratio=1.0))
                .items() if k != "fold_in_noise_ratio"}}     # added in version 7
    assert TrainConfig.from_dict(plain).fingerprint() == _v3_fingerprint(plain)


def test_sub_configs_are_given_whole_or_as_dicts_and_replaced_by_field():
    a = TrainConfig(dim=16, privacy=dict(epsilon=1.0), data=dict(split="heldout-users"))
    b = TrainConfig(dim=16, privacy=PrivacyConfig(epsilon=1.0),
                    data=DataConfig(split="heldout-users"))
    assert a == b and a.fingerprint() == b.fingerprint()
    c = a.replace(privacy=dict(delta=1e-7), ssp=dict(item_solve="project"))
    assert (c.privacy.epsilon, c.privacy.delta, c.ssp.item_solve) == (1.0, 1e-7, "project")
    assert c.data == a.data and c.dim == 16
    # a dict turns a non-private config private again, with those settings
    d = a.replace(privacy=NonPrivate()).replace(privacy=dict(epsilon=3.0))
    assert d.private and d.privacy == TrainConfig(privacy=PrivacyConfig(epsilon=3.0)).privacy


@pytest.mark.parametrize("name,group", [("epsilon", "privacy"), ("dataset", "data"),
                                        ("item_solve", "ssp"), ("noise_seed", "privacy")])
def test_a_flat_name_in_replace_is_refused_naming_its_sub_config(name, group):
    value = TrainConfig().flat_dict()[name]
    where = f"{name} \\(in {group}: {group}=dict\\({name}=...\\)\\)"
    with pytest.raises(ConfigError, match=where):
        TrainConfig().replace(**{name: value})
    with pytest.raises(ConfigError, match=where + ".*route"):
        TrainConfig(dim=8, **{name: value})
    with pytest.raises(ConfigError, match=r"private \(privacy=NonPrivate\(\)"):
        TrainConfig(private=False)


def test_a_sub_config_of_the_wrong_type_is_refused_clearly():
    with pytest.raises(ConfigError, match="privacy must be a PrivacyConfig or NonPrivate"):
        TrainConfig(privacy=5.0)
    with pytest.raises(ConfigError, match="data must be a DataConfig"):
        TrainConfig(data="ml-100k")
    with pytest.raises(ConfigError, match="epsilon must be"):
        TrainConfig(privacy=dict(epsilon=-1.0))
    with pytest.raises(ConfigError, match="split must be one of"):
        TrainConfig(data=dict(split="sideways"))


def test_route_sends_every_flat_name_to_its_sub_config():
    flat = {"epsilon": 1.0, "delta": 1e-7, "dataset": "ml-1m", "seed": 3,
            "item_solve": "floor", "gd_steps": 7, "dim": 12, "weights": "uniform"}
    cfg = TrainConfig(**route(flat))
    assert (cfg.privacy.epsilon, cfg.privacy.delta) == (1.0, 1e-7)
    assert (cfg.data.dataset, cfg.data.seed) == ("ml-1m", 3)
    assert (cfg.ssp.item_solve, cfg.gd.steps, cfg.dim, cfg.weights) == ("floor", 7, 12,
                                                                          "uniform")
    # every setting of every sub-config has one flat name, and the names do not collide
    for sub, name, prefix in ((DataConfig, "data", ""), (SSPConfig, "ssp", ""),
                              (PrivacyConfig, "privacy", ""), (GDConfig, "gd", "gd_")):
        for f in dataclasses.fields(sub):
            assert FIELD_GROUPS[prefix + f.name] == name
    assert not set(FIELD_GROUPS) & {f.name for f in dataclasses.fields(TrainConfig)}
    # private=False: NonPrivate, whatever privacy settings came with it (the CLI sends them)
    off = TrainConfig(**route({**flat, "private": False}))
    assert off.privacy == NonPrivate() and off.data.dataset == "ml-1m"
    with pytest.raises(ConfigError, match="private must be True or False"):
        route({"private": "no"})


def test_the_data_config_does_not_change_what_fit_trains():
    """``fit`` takes prepared ratings: the data settings (the split's seed and kind, held-out
    counts, thresholds) are the data preparation's, and the same ratings, model settings and
    noise give the same V whatever they say."""
    # uniform popularity and activity: few buckets, so the three fits compile 2-3x faster
    r = dpmt.data.make_synthetic(n_users=200, n_items=50, n_interactions=3000, seed=4,
                                 alpha=0.0, user_activity_sigma=0.0)
    base = TrainConfig(dim=4, iterations=2, solver="ssp",
                       privacy=dict(epsilon=2.0, noise_seed=1), data=dict(dataset="synthetic"))
    other = base.replace(data=dict(split="heldout-users", seed=99, heldout_users=7,
                                   positive_threshold=4.5))
    a = dpmt.fit(r, base, execution=QUIET)
    b = dpmt.fit(r, other, execution=QUIET)
    np.testing.assert_array_equal(a.item_embeddings, b.item_embeddings)
    assert a.epsilon == b.epsilon
    # while a model setting does change it (the test would pass vacuously otherwise)
    c = dpmt.fit(r, base.replace(reg=30.0), execution=QUIET)
    assert not np.allclose(a.item_embeddings, c.item_embeddings)


def test_the_cli_builds_the_same_nested_config():
    import argparse

    from dpmt.apps.args import add_config_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_config_arguments(p)
    args = p.parse_args(["--epsilon", "2", "--dataset", "ml-1m", "--item-solve", "shift",
                         "--gd-steps", "3", "--dim", "16", "--seed", "4"])
    cfg, _ = config_from_args(args)
    assert cfg == TrainConfig(dim=16, gd=dict(steps=3), ssp=dict(item_solve="shift"),
                              data=dict(dataset="ml-1m", seed=4), privacy=dict(epsilon=2.0))
    cfg, _ = config_from_args(p.parse_args(["--no-privacy", "--epsilon", "2"]))
    assert cfg.privacy == NonPrivate()
