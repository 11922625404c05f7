"""Command-line arguments generated from the config dataclasses.

Each field of :class:`~dpmt.config.TrainConfig`, :class:`~dpmt.config.GDConfig` (as
``--gd-*``) and :class:`~dpmt.config.ExecutionConfig` becomes one option: its help, group,
choices and default come from the field, so the CLI and the library share one set of
defaults, and the range checks are the config's own (errors name the flag).
"""

from __future__ import annotations

import argparse
import dataclasses

from dpmt.config import (DataConfig, ExecutionConfig, GDConfig, PrivacyConfig, SSPConfig,
                         TrainConfig, route)
from dpmt.errors import ConfigError

PRIVACY_UNIT_HELP = ("Privacy unit: one user (add/remove-one) — everything a user rated is "
                     "protected together.")

GROUP_TITLES = {
    "data": "data",
    "model": "model (alternating minimisation)",
    "weights": "weights w_ij (Krichene et al. 2023)",
    "solver": "solver",
    "privacy": "privacy (" + PRIVACY_UNIT_HELP + ")",
    "execution": "execution (cannot change the model)",
}

# compare sweeps these itself (--weight-grid, --epsilons, --solvers; baselines are separate)
COMPARE_SWEPT = ("weights", "epsilon", "solver", "private")


# -- generated arguments ---------------------------------------------------------------------
def parse_number(flag: str, kind: str, nullable: bool = False):
    def parse(s: str):
        if nullable and s.strip().lower() in ("none", "auto"):
            return None
        try:
            return int(s) if kind == "int" else float(s)   # NaN/inf: the config refuses them
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be {'an integer' if kind == 'int' else 'a number'} "
                f"(invalid {'int' if kind == 'int' else 'float'} value: {s!r})") from None
    return parse


def _flag(f: dataclasses.Field, prefix: str) -> str:
    return f.metadata.get("flag") or "--" + (prefix + f.name).replace("_", "-")


def config_fields(cls, prefix: str = ""):
    """(field, flag, dest) of every CLI field of ``cls``: TrainConfig's own fields and those of
    its sub-configs (``data``, ``ssp``, ``privacy`` under their own names, ``gd`` as
    ``--gd-*``; :data:`dpmt.config.FIELD_GROUPS` says which holds which)."""

    subs = {"gd": (GDConfig, "gd_"), "data": (DataConfig, ""), "ssp": (SSPConfig, ""),
            "privacy": (PrivacyConfig, "")}
    out = []
    for f in dataclasses.fields(cls):
        if cls is TrainConfig and f.name in subs:
            sub, sub_prefix = subs[f.name]
            out += config_fields(sub, sub_prefix)
            if f.name == "privacy":     # --no-privacy: NonPrivate() in place of PrivacyConfig
                out.append((NO_PRIVACY, "--no-privacy", "private"))
            continue
        if not f.metadata.get("cli", True):
            continue
        out.append((f, _flag(f, prefix), prefix + f.name))
    return out


def _no_privacy_field() -> dataclasses.Field:
    @dataclasses.dataclass
    class _Flag:
        private: bool = dataclasses.field(default=True, metadata={
            "help": "train without noise (the non-private baseline: privacy=NonPrivate())",
            "group": "privacy", "flag": "--no-privacy"})
    return dataclasses.fields(_Flag)[0]


#: the ``--no-privacy`` flag: ``private`` False makes the config's privacy NonPrivate()
NO_PRIVACY = _no_privacy_field()


def _defaults() -> dict:
    """Every CLI dest's default (TrainConfig's, its sub-configs', ExecutionConfig's)."""

    def fields(cls, prefix=""):      # the fields' own defaults: None where a rule decides
        return {prefix + f.name: f.default for f in dataclasses.fields(cls)
                if f.default is not dataclasses.MISSING}

    return {**fields(TrainConfig), **fields(DataConfig), **fields(SSPConfig),
            **fields(PrivacyConfig), **fields(GDConfig, "gd_"), "private": True,
            **fields(ExecutionConfig)}


def add_config_arguments(p: argparse.ArgumentParser, *, skip=(), execution: bool = True
                         ) -> None:
    """One option per config field, in argument groups, help and default from the field."""

    defaults = _defaults()
    groups: dict[str, argparse._ArgumentGroup] = {}
    specs = config_fields(TrainConfig) + (config_fields(ExecutionConfig) if execution else [])
    for f, flag, dest in specs:
        if f.name in skip:
            continue
        md = f.metadata
        group = md.get("group", "model")
        if group not in groups:
            groups[group] = p.add_argument_group(GROUP_TITLES.get(group, group))
        g = groups[group]
        default = defaults[dest]
        nullable = str(f.type).endswith("| None")
        kind = str(f.type).replace(" | None", "")
        if kind == "bool":      # a flag that turns the default off (--no-privacy, --quiet)
            g.add_argument(flag, dest=dest, action="store_false" if default else "store_true",
                           default=default, help=md["help"])
            continue
        shown = md.get("none") if default is None else default
        help_text = f"{md['help']} (default: {shown}"
        help_text += (f"; none: {md['none']})" if nullable and default is not None
                      and md.get("none") else ")")
        kw = dict(dest=dest, default=default, help=help_text.replace("%", "%%"))
        if md.get("choices"):
            kw["choices"] = md["choices"]
        if md.get("metavar"):
            kw["metavar"] = md["metavar"]
        if kind in ("int", "float"):
            kw["type"] = parse_number(flag, kind, nullable)
            kw.setdefault("metavar", "N" if kind == "int" else "X")
        g.add_argument(flag, **kw)


def _config_error(e: ConfigError) -> ConfigError:
    """Name the CLI flag in a config error (``gd.steps must …`` → ``--gd-steps must …``)."""

    msg = str(e)
    for f, flag, dest in config_fields(TrainConfig) + config_fields(ExecutionConfig):
        for name in (dest.replace("gd_", "gd.", 1) if dest.startswith("gd_") else dest,):
            if msg.startswith(name + " "):
                return ConfigError(flag + msg[len(name):])
    return e


def config_from_args(args, **overrides):
    """(TrainConfig, ExecutionConfig) from parsed arguments (fields absent from ``args`` keep
    their defaults); ``overrides`` replace settings by their flat names (``epsilon=``,
    ``solver=``, ``private=False``: :func:`dpmt.config.route`)."""

    flat, ex = {}, {}
    for f, flag, dest in config_fields(TrainConfig):
        if hasattr(args, dest):
            flat[dest] = getattr(args, dest)
    for f, flag, dest in config_fields(ExecutionConfig):
        if hasattr(args, dest):
            ex[dest] = getattr(args, dest)
    flat.update(overrides)
    try:
        return TrainConfig(**route(flat)), ExecutionConfig(**ex)
    except ConfigError as e:
        raise _config_error(e) from None


def changed_flags(args) -> list[str]:
    """The model/privacy flags whose value differs from the default."""

    base = _defaults()
    return [flag for f, flag, dest in config_fields(TrainConfig)
            if hasattr(args, dest) and getattr(args, dest) != base.get(dest)
            and not (isinstance(base.get(dest), (tuple, list)))
            # None where the default is None: left to its rule (e.g. the task's settings)
            and not (getattr(args, dest) is None and f.default is None)]
