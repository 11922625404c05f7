"""The stored config's schema: its version and the steps that migrate older ones.

A :class:`~dpmt.config.TrainConfig` is stored (a run directory's ``trainer/config.json``, the
``config`` of a saved model's ``model.json``) as its fields plus ``config_version``;
:meth:`~dpmt.config.TrainConfig.from_dict`, the one reader, passes every stored dict through
:func:`migrate` first. A change that makes a stored config mean something else bumps
:data:`CONFIG_VERSION` and adds one step to ``_MIGRATIONS`` saying what changed.
"""

from __future__ import annotations

from dpmt.errors import ConfigError

#: the schema of a stored config (``config_version``)
CONFIG_VERSION = 7

#: version 1's flat noisy-GD settings → their names in version 2's ``gd`` sub-config
_V1_GD = {"gd_steps": "steps", "gd_learning_rate": "learning_rate", "gd_clip": "clip",
          "gd_sampling_rate": "sampling_rate", "gd_optimizer": "optimizer",
          "encoder": "encoder", "mlp_hidden": "mlp_hidden"}
#: version 1's execution settings, in :class:`~dpmt.config.ExecutionConfig` since version 2
_V1_EXECUTION = ("data_dir", "devices")


def _v1_to_v2(d: dict) -> dict:
    """Version 1 (one flat TrainConfig) → 2 (TrainConfig with a GDConfig, ExecutionConfig
    apart): ``gd_steps``, ``gd_learning_rate``, ``gd_clip``, ``gd_sampling_rate``,
    ``gd_optimizer``, ``encoder`` and ``mlp_hidden`` move into ``gd`` without their prefix;
    ``data_dir`` and ``devices`` are dropped (they never changed the model, and a stored
    config holds only what does). Fields added since take their defaults, as they do in a
    version-2 config written before them."""
    if "gd" in d:
        raise ConfigError("a version-1 config has no 'gd' object (its noisy-GD settings are "
                          "gd_steps, gd_clip...): set config_version to 2, or drop 'gd'")
    gd = {new: d.pop(old) for old, new in _V1_GD.items() if old in d}
    return {**{k: v for k, v in d.items() if k not in _V1_EXECUTION}, "gd": gd}


#: noisy GD's steps per sweep when versions 1 and 2 were written (their default)
_V2_GD_STEPS = 20


def _v2_to_v3(d: dict) -> dict:
    """Version 2 → 3: ``gd.steps`` left out meant 20 (the default then); since version 3 it
    means the rule (:mod:`dpmt.train.defaults`), so a version-2 config without it gets 20
    written in and trains the model it did."""
    gd = dict(d.get("gd") or {})
    gd.setdefault("steps", _V2_GD_STEPS)
    return {**d, "gd": gd}


#: version 3's flat settings that version 4 holds in a sub-config (``data``, ``ssp``,
#: ``privacy``), by the sub-config that holds them
_V3_GROUPS = {
    "data": ("dataset", "columns", "rating_range", "items", "on_duplicate",
             "positive_threshold", "split", "split_fractions", "heldout_users",
             "heldout_fraction", "seed"),
    "ssp": ("item_solve", "b_noise_ratio"),
    "privacy": ("epsilon", "delta", "accountant", "count_noise_multiplier",
                "count_noise_ratio", "gram_noise_ratio", "spectral_noise_ratio",
                "noise_seed"),
}


def _v3_to_v4(d: dict) -> dict:
    """Version 3 (flat, with ``private: bool``) → 4 (configs by consumer): the data settings
    move into ``data``, SSP's into ``ssp``, the privacy target into ``privacy``; ``private:
    false`` becomes ``"privacy": null`` (:class:`~dpmt.config.NonPrivate`), whose privacy
    settings no longer apply and are dropped. A rating model of version 3 took its user bias
    b_j from the clipped labels and never refitted it, and had no user slopes; since version
    4 ``user_offsets`` (default "slopes") says which, so a version-3 rating config gets
    "mean" and folds users in as it was trained."""
    if any(isinstance(d.get(g), dict) for g in _V3_GROUPS):
        raise ConfigError("a version-3 config is flat (dataset, epsilon... at the top): set "
                          "config_version to 4 for one with data/ssp/privacy objects")
    d = dict(d)
    if d.get("task") == "rating":
        d.setdefault("user_offsets", "mean")
    out = {g: {k: d.pop(k) for k in keys if k in d} for g, keys in _V3_GROUPS.items()}
    private = d.pop("private", True)
    if private is False:
        out["privacy"] = None
    elif private is not True:
        raise ConfigError(f"private must be true or false (got {private!r})")
    return {**d, **out}


#: CG steps of every CG solve, the user step's included, when versions 1 to 4 were written
#: (and of the item systems in version 5)
_V4_CG_STEPS = 8


def _v4_to_v5(d: dict) -> dict:
    """Version 4 → 5: ``cg_steps`` set the steps of the CG user step too; since version 5
    ``user_cg_steps`` (default 3) does, so a version-4 config gets its ``cg_steps`` (8 when
    left out, the default then) written in as ``user_cg_steps`` and trains the model it
    did."""
    if "user_cg_steps" in d:
        raise ConfigError("a version-4 config has no user_cg_steps (its cg_steps set the user "
                          "step too): set config_version to 5, or drop user_cg_steps")
    return {**d, "user_cg_steps": d.get("cg_steps", _V4_CG_STEPS)}


def _v5_to_v6(d: dict) -> dict:
    """Version 5 → 6: ``cg_steps`` left out meant 8 item CG steps; since version 6 it means
    the rule of :attr:`~dpmt.config.TrainConfig.item_cg_steps` (8 with noise, 3 without),
    so a version-5 config without it gets the 8 it trained with written in."""
    return d if "cg_steps" in d else {**d, "cg_steps": _V4_CG_STEPS}


def _v6_to_v7(d: dict) -> dict:
    """Version 6 → 7: ``fold_in`` (users folded in with training's λ and α0, or with ones
    chosen privately after training) is new, and its default ``"auto"`` chooses at ε ≥ 3;
    a version-6 config was folded in with training's, so it gets ``"training"``."""
    return d if "fold_in" in d else {**d, "fold_in": "training"}


#: version v → the step that rewrites a stored config of version v into version v + 1
_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6,
               6: _v6_to_v7}


def stored_version(d: dict) -> int:
    """The version of stored config ``d``. One without ``config_version`` is the current
    form when nested by consumer (``data``/``privacy`` objects: :meth:`TrainConfig.to_dict`),
    else was written before dpmt recorded it: version 1 when it has version-1 keys and no
    ``gd`` object, else 2 (the only other version written before ``config_version`` was)."""
    v = d.get("config_version")
    if v is None:
        if isinstance(d.get("data"), dict) or "privacy" in d:
            return CONFIG_VERSION       # nested by consumer: the current form (to_dict)
        return 1 if "gd" not in d and set(d) & {*_V1_GD, *_V1_EXECUTION} else 2
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"config_version must be an integer from 1 to {CONFIG_VERSION} "
                          f"(got {v!r}): no dpmt wrote this config; it was edited or corrupted")
    if v > CONFIG_VERSION:
        raise ConfigError(f"the config has config_version {v}, newer than this dpmt's "
                          f"{CONFIG_VERSION}: upgrade dpmt to read it")
    return v


def migrate(d: dict) -> dict:
    """Stored config ``d`` rewritten step by step to :data:`CONFIG_VERSION`, without its
    ``config_version`` (a copy: ``d`` is left as it is). Refuses a newer or invalid version."""
    v = stored_version(d)
    d = {k: x for k, x in d.items() if k != "config_version"}
    for step in range(v, CONFIG_VERSION):
        d = _MIGRATIONS[step](d)
    return d
