"""The ``dpmt`` command line: argparse over the library, nothing else.

Subcommands: ``fetch``, ``info``, ``train``, ``recommend``, ``similar``, ``compare``, ``quality``,
``stream``, ``bench``, ``demo``. The training options are generated from the fields of
:class:`~dpmt.config.TrainConfig`, :class:`~dpmt.config.GDConfig` and
:class:`~dpmt.config.ExecutionConfig` (their help, group, choices and defaults), so the CLI
and the library have one set of defaults and one range check. Every user error is printed as
one clear message and exits with status 2; no traceback from inside numpy or JAX.
"""

from __future__ import annotations

import argparse
import errno
import importlib.metadata
import os
import sys
import time
from pathlib import Path

from dpmt._io import atomic_write_json, check_output_path, jsonable
from dpmt.apps import model_tools as mt
from dpmt.apps import stream
from dpmt.apps.args import (COMPARE_SWEPT, PRIVACY_UNIT_HELP, add_config_arguments, changed_flags,
                            config_from_args, parse_number)
from dpmt.config import TrainConfig
from dpmt.data import fetch, format_summary, load, summary
from dpmt.data.titles import item_titles_for
from dpmt.errors import ConfigError, DpmtError
from dpmt.registry import SOLVERS, WEIGHTINGS


# -- subcommands ------------------------------------------------------------------------------
def cmd_fetch(args) -> int:
    path = fetch(args.name, data_dir=args.data_dir, progress=not args.quiet)
    print(f"{args.name}: {path}")
    return 0


def cmd_info(args) -> int:
    r = load(args.dataset, data_dir=args.data_dir)
    print(format_summary(summary(r)))
    return 0


def cmd_train(args) -> int:
    from dpmt.train.rundir import read_config, run

    if args.resume:
        if args.out is not None:
            raise ConfigError("--resume RUN_DIR continues in RUN_DIR; drop --out")
        changed = changed_flags(args)
        if changed:
            raise ConfigError(f"--resume takes every model and privacy setting from "
                              f"{args.resume}/config.json; drop {', '.join(changed)} (only "
                              "execution options such as --devices may be given)")
        cfg = read_config(Path(args.resume))
        _, ex = config_from_args(args)
        finished = (Path(args.resume) / "model" / "model.json").exists()
        model = run(cfg, out_dir=args.resume, execution=ex, resume=True,
                    eval_set=args.eval_set)
        out = args.resume
        if finished:
            print(f"the run in {out} had finished: nothing was trained or charged again")
    else:
        cfg, ex = config_from_args(args)
        model = run(cfg, out_dir=args.out, execution=ex, overwrite=args.overwrite,
                    eval_set=args.eval_set)
        out = args.out
    print(model.report())
    print_baselines(model)
    if out is not None:
        use = (f"dpmt recommend --model {out} --items ID,ID,... --ratings R,R,..."
               if model.scorer.labelled else
               f"dpmt recommend --model {out} --items ID,ID,...")
        print(f"the model is in {out} ({use}; or dpmt.Model.load)")
    else:
        print("nothing was saved: pass --out DIR to keep the model")
    return 0


def print_baselines(model) -> None:
    """The baselines of the same evaluation next to the model's figure."""
    m = model.metrics or {}
    base = m.get("baselines") or {}
    if not m:
        return
    which = m.get("eval_set", "test")
    if "rmse" in m["overall"]:
        lines = [f"RMSE on the {which} ratings: model {m['overall']['rmse']:.4f}"]
        for name, bm in base.items():
            note = " (not private)" if name == "global mean" else \
                " (the run's released values: free)"
            lines.append(f"  {name}: {bm['overall']['rmse']:.4f}{note}")
        print("\n".join(lines))
        return
    lines = [f"Recall@20 on the {which} users: model {m['overall']['recall@20']:.4f}"]
    for name, bm in base.items():
        extra = "" if name != "private popularity" else " (the run's released counts: free)"
        if name == "popularity":
            extra = " (exact counts: not private)"
        lines.append(f"  {name}: {bm['overall']['recall@20']:.4f}{extra}")
    lines.append(f"  random: {m['overall'].get('random_recall@20', float('nan')):.4f}")
    if "private popularity" in base and \
            base["private popularity"]["overall"]["recall@20"] > m["overall"]["recall@20"]:
        lines.append("  note: private popularity beats this model; more ε, more data or "
                     "other settings are needed for it to pay off")
    print("\n".join(lines))


def _titles(model, data_dir: str) -> dict:
    try:
        return item_titles_for(model.config.data.dataset, model.item_ids, data_dir=data_dir) or {}
    except (DpmtError, OSError):
        return {}


def _parse_ids(s: str, model) -> list:
    parts = [p.strip() for p in s.split(",") if p.strip()]
    if not parts:
        raise ConfigError("--items needs at least one item id, e.g. --items 50,172,133")
    if model.item_ids.dtype.kind in "iu":
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise ConfigError(f"item ids of this model are integers (got {s!r})") from None
    return parts


def _print_items(ids, scores, titles, header: str, label: str) -> None:
    print(header)
    for rank, (i, sc) in enumerate(zip(ids.tolist(), scores.tolist()), 1):
        t = titles.get(i)
        print(f"{rank:3d}. {i!s:>8}  {label} {sc:+.4f}" + (f"  {t}" if t else ""))


def cmd_recommend(args) -> int:
    from dpmt.model import Model

    model = Model.load(args.model)
    if args.histories is not None:
        return _recommend_many(model, args)
    if args.items is None:
        raise ConfigError("give --items ID,ID,... (one user), or --histories FILE --out FILE "
                          "(every user of a ratings file)")
    items = _parse_ids(args.items, model)
    values = None
    if args.ratings is not None:
        try:
            values = [float(p) for p in args.ratings.split(",") if p.strip()]
        except ValueError:
            raise ConfigError(f"--ratings takes numbers, one per --items (got "
                              f"{args.ratings!r})") from None
        if len(values) != len(items):
            raise ConfigError(f"--ratings gives {len(values)} ratings for {len(items)} "
                              "--items: give one rating per item")
    elif model.scorer.labelled:
        raise ConfigError("this is a rating model: it folds a user in from their ratings; "
                          "pass --ratings R,R,... with one rating per --items")
    ids, scores = model.recommend(items, k=args.k, values=values)
    titles = _titles(model, args.data_dir)
    liked = ", ".join(f"{titles.get(i) or i}" for i in items)
    _print_items(ids, scores, titles, f"top {len(ids)} for a user who liked: {liked}",
                 "score")
    print(f"(folded in from this history against the released item embeddings: joint DP; "
          f"the model's ε = {model.epsilon:.3g})" if model.private else
          "(non-private model)")
    if model.private and model.noise_reproducible:
        from dpmt.privacy.randomness import SEEDED_WARNING

        print(f"WARNING: {SEEDED_WARNING}")
    return 0


def _recommend_many(model, args) -> int:
    if args.out is None:
        raise ConfigError("--histories needs --out FILE (.csv or .parquet) for the results")
    check_output_path(args.out, "--out", folder=False)
    t0 = time.perf_counter()
    histories, dropped = mt.read_histories(args.histories, model)
    table = mt.recommend_many(model, histories, args.k)
    mt.write_table(table, args.out)
    print(f"top {args.k} for {len(histories)} users of {args.histories} -> {args.out} "
          f"({len(table['user'])} rows, {time.perf_counter() - t0:.2f} s"
          + (f"; {dropped} ratings of items the model does not have were left out"
             if dropped else "") + ")")
    return 0


def cmd_evaluate(args) -> int:
    from dpmt.model import Model

    model = Model.load(args.model)
    m = mt.evaluate_saved(model, args.dataset, args.data_dir, args.eval_set)
    model.metrics = m
    lines = model.report().splitlines()
    print("\n".join(lines[1:]) if len(lines) > 1 else lines[0])
    if args.json:
        atomic_write_json(args.json, jsonable(m))
    return 0


def cmd_export(args) -> int:
    from dpmt.model import Model

    model = Model.load(args.model)
    n = mt.export(model, args.out)
    print(f"wrote {n} items × {model.dim} factors to {args.out}")
    return 0


def cmd_privacy(args) -> int:
    from dpmt.model import Model

    model = Model.load(args.model)
    print(mt.privacy_report(model))
    if args.plot:
        mt.plot_epsilon(model, args.plot)
        print(f"wrote {args.plot}")
    return 0


def cmd_similar(args) -> int:
    from dpmt.model import Model

    model = Model.load(args.model)
    item = _parse_ids(args.item, model)
    if len(item) != 1:
        raise ConfigError("--item takes one item id")
    ids, sims = model.similar_items(item[0], k=args.k)
    titles = _titles(model, args.data_dir)
    _print_items(ids, sims, titles, f"items most similar to {titles.get(item[0]) or item[0]} "
                 "(cosine of released embeddings)", "cos")
    return 0


def cmd_compare(args) -> int:
    from dpmt.apps.compare import compare_main

    return compare_main(args)


def cmd_demo(args) -> int:
    from dpmt.apps.compare import demo_main

    return demo_main(args)


# -- the parser -------------------------------------------------------------------------------
class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dpmt", allow_abbrev=False,
        description="Differentially private multi-task recommender training (user-level DP, "
                    "adaptive task weights; Krichene et al. 2023). " + PRIVACY_UNIT_HELP,
        formatter_class=_Formatter,
        epilog="examples:\n"
               "  dpmt fetch ml-100k\n"
               "  dpmt info ml-100k\n"
               "  dpmt train --dataset ml-100k --epsilon 5 --out runs/ml100k\n"
               "  dpmt recommend --model runs/ml100k --items 50,172,133 -k 10\n"
               "  dpmt similar --model runs/ml100k --item 50\n"
               "  dpmt compare --epsilons 1 5 20 --seeds 0 1 2 --out runs/compare\n"
               "  dpmt stream --dataset ml-100k --predictor jdp --epsilon 1 --delta 1e-6\n")
    from dpmt import __version__

    p.add_argument("--version", action="version", version=f"dpmt {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    # no abbreviations: `compare --epsilon 1` must not silently mean `--epsilons 1`
    _add = sub.add_parser
    sub.add_parser = lambda *a, **k: _add(*a, allow_abbrev=False, **k)

    f = sub.add_parser("fetch", help="download a MovieLens dataset into data/ (offline fallback "
                                     "for ml-100k)")
    f.add_argument("name", help="ml-100k, ml-1m, ml-10m, ml-20m, ml-25m or ml-latest-small")
    f.add_argument("--data-dir", default="data", help="where to put it (default: data)")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(func=cmd_fetch)

    i = sub.add_parser("info", help="dataset summary and task-size skew")
    i.add_argument("dataset", nargs="?", default="ml-100k",
                   help="dataset name or ratings file (default: ml-100k)")
    i.add_argument("--data-dir", default="data", help="where datasets live (default: data)")
    i.set_defaults(func=cmd_info)

    t = sub.add_parser("train", formatter_class=_Formatter,
                       help="train a (private) recommender; --out DIR saves it as a model",
                       description="Train item embeddings under user-level DP, evaluate them "
                                   "against popularity (exact and private) and save the model. "
                                   + PRIVACY_UNIT_HELP)
    add_config_arguments(t)
    t.add_argument("--out", default=None, metavar="DIR",
                   help="run directory: DIR/model/ is the model, safe to share (model.json, "
                        "item_embeddings.npz, ledger.json); DIR/trainer/ is the trainer's "
                        "private state, never to share (checkpoint with the noise secret, "
                        "config.json, exact metrics.json, train.log); default: not saved")
    t.add_argument("--overwrite", action="store_true",
                   help="replace a finished model or an unfinished run in --out")
    t.add_argument("--resume", metavar="RUN_DIR", default=None,
                   help="continue an interrupted run from its last completed iteration (its "
                        "saved settings and its secret noise key, kept in DIR/trainer/; "
                        "nothing is charged twice)")
    t.add_argument("--eval-set", choices=["validation", "test"], default="test",
                   help="which held-out split to report (default: test; tune on validation)")
    t.set_defaults(func=cmd_train)

    r = sub.add_parser("recommend", help="top-k items for a user's history, from a saved model")
    r.add_argument("--model", required=True, metavar="DIR", help="a saved model / run directory")
    r.add_argument("--items", default=None, metavar="ID,ID,...",
                   help="raw ids of the items the user liked (e.g. 50,172,133)")
    r.add_argument("--histories", default=None, metavar="FILE",
                   help="instead of --items: every user of this ratings file (CSV/TSV/.inter "
                        "or Parquet; user, item[, rating] columns), results to --out")
    r.add_argument("--out", default=None, metavar="FILE",
                   help="with --histories: user,rank,item,score rows (.csv or .parquet)")
    r.add_argument("--ratings", default=None, metavar="R,R,...",
                   help="the user's ratings of --items, one per item (a rating model "
                        "folds a user in from them; an implicit model takes none)")
    r.add_argument("-k", type=parse_number("-k", "int"), default=10,
                   help="how many (default: 10)")
    r.add_argument("--data-dir", default="data", help="where to find item titles (default: data)")
    r.set_defaults(func=cmd_recommend)

    e = sub.add_parser("evaluate", help="Recall/NDCG (or RMSE) of a saved model on the "
                                        "held-out users of a dataset, per popularity bucket")
    e.add_argument("--model", required=True, metavar="DIR", help="a saved model / run directory")
    e.add_argument("--dataset", required=True, help="the data the model was trained on (its "
                   "split, by the model's config, gives the held-out users)")
    e.add_argument("--data-dir", default="data")
    e.add_argument("--eval-set", choices=("test", "validation"), default="test")
    e.add_argument("--json", default=None, metavar="FILE", help="also write the metrics here")
    e.set_defaults(func=cmd_evaluate)

    x = sub.add_parser("export", help="item ids and factors of a saved model (.csv, .parquet "
                                      "or .npz)")
    x.add_argument("--model", required=True, metavar="DIR", help="a saved model / run directory")
    x.add_argument("--out", required=True, metavar="FILE", help="FILE.csv, .parquet or .npz")
    x.set_defaults(func=cmd_export)

    v = sub.add_parser("privacy", help="what a saved model's ε covers and what each release "
                                       "cost")
    v.add_argument("--model", required=True, metavar="DIR", help="a saved model / run directory")
    v.add_argument("--plot", default=None, metavar="PNG", help="ε over the run's iterations")
    v.set_defaults(func=cmd_privacy)

    s = sub.add_parser("similar", help="items most similar to one item, from a saved model")
    s.add_argument("--model", required=True, metavar="DIR", help="a saved model / run directory")
    s.add_argument("--item", required=True, metavar="ID", help="raw item id")
    s.add_argument("-k", type=parse_number("-k", "int"), default=10,
                   help="how many, the item itself first (default: 10)")
    s.add_argument("--data-dir", default="data", help="where to find item titles (default: data)")
    s.set_defaults(func=cmd_similar)

    c = sub.add_parser("compare", formatter_class=_Formatter,
                       help="grid over weights × ε × solver × seeds: head/tail table, CSV and "
                            "bar chart")
    add_config_arguments(c, skip=COMPARE_SWEPT)
    c.add_argument("--weight-grid", nargs="+", default=["uniform", "tail", "adaptive"],
                   metavar="W", help="weights to compare: " + ", ".join(WEIGHTINGS)
                   + "; adaptive:MU sets μ (default: uniform tail adaptive)")
    c.add_argument("--epsilons", nargs="+", type=parse_number("--epsilons", "float"),
                   default=[5.0], metavar="EPS", help="target ε of each private run (default: 5)")
    c.add_argument("--solvers", nargs="+", choices=SOLVERS, default=[TrainConfig().solver],
                   help=f"private item steps to compare (default: {TrainConfig().solver}, "
                        "as dpmt train)")
    c.add_argument("--seeds", nargs="+", type=parse_number("--seeds", "int"), default=[0],
                   metavar="SEED", help="seeds; each gives its own split (default: 0)")
    c.add_argument("--baselines", action=argparse.BooleanOptionalAction, default=True,
                   help="also run popularity (exact and private) and non-private ALS")
    c.add_argument("--eval-set", choices=["validation", "test"], default="test",
                   help="which held-out split to report (default: test)")
    c.add_argument("--out", default="runs/compare", metavar="DIR",
                   help="output folder for table/CSV/PNG; every finished cell is kept in "
                        "DIR/cells.json (default: runs/compare)")
    c.add_argument("--resume", action="store_true",
                   help="continue an interrupted grid in --out (same arguments): finished "
                        "cells are not run again")
    c.add_argument("--overwrite", action="store_true",
                   help="start the grid again in an --out that holds an earlier one")
    c.set_defaults(func=cmd_compare)

    from dpmt.apps import tune

    tu = sub.add_parser("tune", formatter_class=_Formatter,
                        help="grid of candidates, the best on validation saved as a model: "
                             "private selection (ε covers the choice) or the literature's "
                             "(not charged)",
                        description=tune.DESCRIPTION + " " + PRIVACY_UNIT_HELP)
    tune.add_arguments(tu)
    tu.set_defaults(func=tune.main)

    st = sub.add_parser("stream", help="JDP online prediction over a ratings stream")

    stream.add_arguments(st)
    st.set_defaults(func=stream.run)

    _add_plugin_commands(sub)

    d = sub.add_parser("demo", help="the README's first command: fetch ML-100K, train the "
                                    "baselines and DP models, print the head/tail table and "
                                    "three recommendations from the saved model")
    d.add_argument("--out", default="runs/demo", metavar="DIR",
                   help="output folder (default: runs/demo)")
    d.add_argument("--quiet", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_demo)
    return p


#: entry-point group of the commands other distributions add to ``dpmt``
COMMANDS_GROUP = "dpmt.commands"


def _add_plugin_commands(sub) -> None:
    """Subcommands registered under the entry-point group ``dpmt.commands``.

    The measurement harness (``benchmarks/``: ``bench``, ``quality``) lives outside the
    library and adds its commands this way, so ``dpmt`` never imports it. An entry point
    names an object with ``HELP`` (one line), ``add_arguments(parser)`` and
    ``run(args) -> int``. One that fails to load still appears, and says why when run.
    """

    for ep in sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP),
                     key=lambda e: e.name):
        if ep.name in sub.choices:
            continue
        try:
            command = ep.load()
            parser = sub.add_parser(ep.name, help=command.HELP,
                                    description=getattr(command, "DESCRIPTION", None))
            command.add_arguments(parser)
            parser.set_defaults(func=command.run)
        except Exception as e:   # noqa: BLE001 — a broken plugin must not break `dpmt`
            reason = f"{type(e).__name__}: {e}"
            parser = sub.add_parser(ep.name, help=f"(unavailable: {reason})")
            parser.set_defaults(func=_unavailable(ep, reason))


def _unavailable(ep, reason: str):
    def run(args):
        raise ConfigError(f"the command {ep.name!r} ({ep.value}) could not be loaded: "
                          f"{reason}; reinstall dpmt from its checkout "
                          "(pip install -e '.[bench]') to get the benchmark commands")
    return run


def main(argv=None) -> int:
    try:                               # Ctrl-C while the parser and its defaults load
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("dpmt: interrupted", file=sys.stderr)
        return 130
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return _dispatch(args)


def script_main(command: str, prog: str, argv=None) -> int:
    """One subcommand as a stand-alone script (``scripts/train_movielens.py``): its own
    usage line and ``--help`` under the script's name."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sp = sub.choices[command]
    sp.prog = prog
    args = sp.parse_args(argv)
    args.command = command
    return _dispatch(args)


def _check_platform() -> None:
    """``JAX_PLATFORMS`` naming a backend this machine lacks (cuda without a GPU, a typo)
    fails inside JAX with a bare AssertionError or RuntimeError: say which, and how to run
    on the CPU, before any work."""
    wanted = os.environ.get("JAX_PLATFORMS", "")
    if wanted in ("", "cpu"):
        return
    try:
        import jax

        jax.devices()
    except Exception as e:          # noqa: BLE001 — whatever JAX raises for a missing backend
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"JAX_PLATFORMS={wanted}: that platform is not available on this "
                          f"machine ({detail}); run on the CPU with JAX_PLATFORMS=cpu, or "
                          "unset it to let JAX choose") from None


def _disk_message(e: OSError, args) -> str:
    where = f" ({e.filename})" if e.filename else ""
    if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        out = getattr(args, "out", None) or getattr(args, "resume", None)
        again = (f"; free some space, then continue with `dpmt train --resume {out}`"
                 if args.command == "train" and out else "; free some space and run it again")
        return (f"no space left on the device{where}: every file dpmt writes is written "
                f"whole or not at all, so what was saved before is intact{again}")
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"cannot write{where}: {e.strerror}; give a folder you can write "
                "(--out, --data-dir)")
    return ""


def _dispatch(args) -> int:
    try:
        _check_platform()
        if hasattr(args, "devices"):          # before anything starts JAX's backend
            from dpmt.solvers.sharding import request_auto_devices, request_devices

            if args.devices is None:          # auto: one CPU host device per core (≤ 4)
                request_auto_devices()
            elif isinstance(args.devices, int) and args.devices > 1:
                request_devices(args.devices)
        return int(args.func(args) or 0)
    except DpmtError as e:
        print(f"dpmt {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `dpmt info | head`: the reader left; not an error
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        print(f"dpmt {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        said = _disk_message(e, args)
        if not said:
            raise
        print(f"dpmt {args.command}: error: {said}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
