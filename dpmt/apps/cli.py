"""The ``dpmt`` command line: a thin layer over the library.

Subcommands: ``fetch``, ``info``, ``train``, ``compare``, ``stream``, ``demo``. Every user
error (bad argument, malformed file, unmet budget, missing download) is printed as one clear
message and exits with status 2; no traceback from inside numpy or JAX.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from dpmt.errors import DpmtError

PRIVACY_UNIT_HELP = ("Privacy unit: one user (add/remove-one) — everything a user rated is "
                     "protected together.")


def _number(name, s, allowed=""):
    """Parse a finite float; messages say what was given and what is allowed."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{name} must be a number{' ' + allowed if allowed else ''} "
            f"(invalid float value: {s!r})") from None
    if math.isnan(v):
        raise argparse.ArgumentTypeError(
            f"{name} must be a number{' ' + allowed if allowed else ''}, not NaN (got {s})")
    if math.isinf(v):
        raise argparse.ArgumentTypeError(
            f"{name} must be a finite number{' ' + allowed if allowed else ''} (got {s})")
    return v


def _positive_float(name):
    def parse(s):
        v = _number(name, s, "> 0")
        if not v > 0:
            raise argparse.ArgumentTypeError(f"{name} must be > 0 (got {s})")
        return v
    return parse


def _nonneg_float(name):
    def parse(s):
        v = _number(name, s, ">= 0")
        if not v >= 0:
            raise argparse.ArgumentTypeError(f"{name} must be >= 0 (got {s})")
        return v
    return parse


def _finite_float(name):
    return lambda s: _number(name, s)


def _unit_interval(name):
    def parse(s):
        v = _number(name, s, "in (0, 1)")
        if not 0 < v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be in (0, 1) (got {s})")
        return v
    return parse


def _positive_int(name):
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer (got {s!r})") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1 (got {s})")
        return v
    return parse


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments shared by ``train`` and ``compare`` (one per TrainConfig field)."""
    from dpmt.config import TrainConfig

    d = TrainConfig()
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default=d.dataset,
                   help="dataset name (ml-100k, ml-1m, ml-10m, ml-20m, ml-25m, ml-latest-small), "
                        "a ratings file, or synthetic[:users=..,items=..,interactions=..,alpha=..] "
                        "(default: %(default)s)")
    g.add_argument("--data-dir", default=d.data_dir, help="where datasets live (default: data)")
    g.add_argument("--split", choices=["per-user", "heldout-users"], default=d.split,
                   help="per-user: each user's positives split 80/10/10; heldout-users: "
                        "Liang et al. 2018 (default: %(default)s)")
    g.add_argument("--heldout-users", type=_positive_int("--heldout-users"),
                   default=d.heldout_users, help="validation and test users for heldout-users")
    g.add_argument("--positive-threshold", type=_finite_float("--positive-threshold"),
                   default=d.positive_threshold,
                   help="ratings above this are positives (default: %(default)s, i.e. >= 4)")
    g = p.add_argument_group("model")
    g.add_argument("--dim", type=_positive_int("--dim"), default=d.dim, help="embedding dim d")
    g.add_argument("--iterations", type=_positive_int("--iterations"), default=d.iterations,
                   help="alternating-minimisation sweeps (default: %(default)s)")
    g.add_argument("--reg", type=_positive_float("--reg"), default=d.reg, help="ridge λ")
    g.add_argument("--gravity", type=_nonneg_float("--gravity"), default=d.gravity,
                   help="α0, weight of unobserved pairs (default: %(default)s)")
    g.add_argument("--user-clip", type=_positive_float("--user-clip"), default=d.user_clip,
                   help="C, clip norm of user embeddings (bounds sensitivity)")
    g = p.add_argument_group("weights (Krichene et al. 2023)")
    g.add_argument("--weights", choices=["uniform", "tail", "adaptive", "adaptive-normalized"],
                   default=d.weights, help="task-user weights (default: %(default)s)")
    g.add_argument("--mu", type=_nonneg_float("--mu"), default=None,
                   help="exponent μ of ω ∝ n^-μ (default: (1+γ)/4)")
    g.add_argument("--gamma", type=_nonneg_float("--gamma"), default=d.gamma,
                   help="γ: 0 Lipschitz, 1 strongly convex (default: %(default)s)")
    g.add_argument("--budget", type=_positive_float("--budget"), default=d.budget,
                   help="β: per-user bound on Σ_i w_ij² (= k items for uniform/tail)")
    g = p.add_argument_group("solver")
    g.add_argument("--solver", choices=["ssp", "gd"], default=d.solver,
                   help="ssp: sufficient-statistics perturbation; gd: noisy gradient descent")
    g.add_argument("--gd-steps", type=_positive_int("--gd-steps"), default=d.gd_steps)
    g.add_argument("--gd-learning-rate", type=_positive_float("--gd-learning-rate"),
                   default=d.gd_learning_rate)
    g.add_argument("--gd-clip", type=_positive_float("--gd-clip"), default=d.gd_clip,
                   help="G, per-user gradient clip norm")
    g.add_argument("--gd-sampling-rate", type=_unit_interval("--gd-sampling-rate"),
                   default=None, help="Poisson sampling rate q of users (default: full batch)")
    g.add_argument("--encoder", choices=["embedding", "mlp"], default=d.encoder,
                   help="item encoder for gd (mlp: over ML-100K genres)")
    g = p.add_argument_group("privacy (" + PRIVACY_UNIT_HELP + ")")
    g.add_argument("--epsilon", type=_positive_float("--epsilon"), default=d.epsilon,
                   help="target ε for the whole run (default: %(default)s)")
    g.add_argument("--delta", type=_unit_interval("--delta"), default=d.delta,
                   help="target δ (default: %(default)s)")
    g.add_argument("--accountant", choices=["pld", "rdp"], default=d.accountant)
    g.add_argument("--count-noise", type=_positive_float("--count-noise"), default=None,
                   dest="count_noise_multiplier",
                   help="fixed noise multiplier for the private item counts "
                        "(default: calibrated with the rest)")
    g.add_argument("--no-privacy", action="store_true",
                   help="train without noise (the non-private baseline)")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed (default: 0)")
    p.add_argument("--devices", type=_positive_int("--devices"), default=d.devices,
                   help="shard the user step (users) and the item step (items) over this "
                        "many devices; the same seed gives the same model on any number (on "
                        "CPU: that many host devices, one core each)")


def config_from_args(args) -> "TrainConfig":
    from dpmt.config import TrainConfig

    return TrainConfig(
        dataset=args.dataset, data_dir=args.data_dir, split=args.split,
        heldout_users=args.heldout_users, positive_threshold=args.positive_threshold,
        dim=args.dim, iterations=args.iterations, reg=args.reg, gravity=args.gravity,
        user_clip=args.user_clip, weights=args.weights, mu=args.mu, gamma=args.gamma,
        budget=args.budget, solver=args.solver, gd_steps=args.gd_steps,
        gd_learning_rate=args.gd_learning_rate, gd_clip=args.gd_clip,
        gd_sampling_rate=args.gd_sampling_rate, encoder=args.encoder,
        epsilon=args.epsilon, delta=args.delta, accountant=args.accountant,
        count_noise_multiplier=args.count_noise_multiplier, private=not args.no_privacy,
        seed=args.seed, devices=args.devices)


def cmd_fetch(args) -> int:
    from dpmt.data import fetch

    path = fetch(args.name, data_dir=args.data_dir, progress=not args.quiet)
    print(f"{args.name}: {path}")
    return 0


def cmd_info(args) -> int:
    from dpmt.data import format_summary, load, summary

    r = load(args.dataset, data_dir=args.data_dir)
    print(format_summary(summary(r)))
    return 0


def cmd_train(args) -> int:
    import json
    from pathlib import Path

    from dpmt.config import TrainConfig
    from dpmt.errors import ConfigError
    from dpmt.training import run

    if args.resume:
        saved = Path(args.resume) / "config.json"
        if not saved.exists():
            raise ConfigError(f"cannot resume {args.resume}: no config.json there (was it "
                              "started with `dpmt train --out` ?)")
        cfg = TrainConfig.from_dict(json.loads(saved.read_text()))
        if args.devices != 1:   # execution only: the model does not depend on it
            cfg = cfg.replace(devices=args.devices)
        result = run(cfg, out_dir=args.resume, progress=not args.quiet, resume=True)
        print(result.report())
        return 0
    cfg = config_from_args(args)
    result = run(cfg, out_dir=args.out, progress=not args.quiet)
    print(result.report())
    return 0


def cmd_compare(args) -> int:
    from dpmt.apps.compare import compare_main

    return compare_main(args)


def cmd_demo(args) -> int:
    from dpmt.apps.compare import demo_main

    return demo_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dpmt",
        description="Differentially private multi-task recommender training (user-level DP, "
                    "adaptive task weights; Krichene et al. 2023). " + PRIVACY_UNIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  dpmt fetch ml-100k\n"
               "  dpmt info ml-100k\n"
               "  dpmt train --dataset ml-100k --solver ssp --weights adaptive --epsilon 5 "
               "--out runs/adaptive\n"
               "  dpmt compare --epsilons 1 5 20 --seeds 0 1 2 --out runs/compare\n"
               "  dpmt stream --dataset ml-100k --predictor jdp --epsilon 1 --delta 1e-6\n")
    from dpmt import __version__

    p.add_argument("--version", action="version", version=f"dpmt {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    f = sub.add_parser("fetch", help="download a MovieLens dataset into data/ (offline fallback "
                                     "for ml-100k)")
    f.add_argument("name", help="ml-100k, ml-1m, ml-10m, ml-20m, ml-25m or ml-latest-small")
    f.add_argument("--data-dir", default="data")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(func=cmd_fetch)

    i = sub.add_parser("info", help="dataset summary and task-size skew")
    i.add_argument("dataset", nargs="?", default="ml-100k")
    i.add_argument("--data-dir", default="data")
    i.set_defaults(func=cmd_info)

    t = sub.add_parser("train", help="train a (private) recommender; writes a run directory",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_train_arguments(t)
    t.add_argument("--out", default=None, help="run directory (config.json, ledger.json, "
                                               "metrics.json, item_embeddings.npz, train.log)")
    t.add_argument("--resume", metavar="RUN_DIR", default=None,
                   help="continue an interrupted run from its last completed iteration (same "
                        "configuration and random streams; nothing is charged twice)")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    t.set_defaults(func=cmd_train)

    c = sub.add_parser("compare", help="grid over weights × ε × solver × seeds: head/tail table, "
                                       "CSV and bar chart")
    add_train_arguments(c)
    c.add_argument("--weight-grid", nargs="+", default=["uniform", "tail", "adaptive"],
                   help="weights to compare (adaptive:MU sets μ, e.g. adaptive:0.5)")
    c.add_argument("--epsilons", nargs="+", type=_positive_float("--epsilons"), default=[5.0])
    c.add_argument("--solvers", nargs="+", choices=["ssp", "gd"], default=["ssp"])
    c.add_argument("--seeds", nargs="+", type=int, default=[0])
    c.add_argument("--baselines", action=argparse.BooleanOptionalAction, default=True,
                   help="also run popularity and non-private ALS")
    c.add_argument("--eval-set", choices=["validation", "test"], default="test")
    c.add_argument("--out", default="runs/compare", help="output folder for table/CSV/PNG")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_compare)

    s = sub.add_parser("stream", help="JDP online prediction over a ratings stream")
    try:
        from dpmt.apps import stream as online_cli

        online_cli.add_arguments(s)
        s.set_defaults(func=online_cli.run)
    except ImportError as e:  # pragma: no cover - only while the online module is missing
        s.set_defaults(func=lambda a: (print(f"dpmt stream unavailable: {e}", file=sys.stderr), 2)[1])

    try:
        from dpmt.apps import bench as bench_mod
    except ImportError:  # pragma: no cover
        bench_mod = None
    if bench_mod is not None:
        b = sub.add_parser("bench", help="benchmarks: item/user/GD steps, FLOP/s against the "
                                         "measured matmul peak, peak memory")
        bench_mod.add_arguments(b)
        b.set_defaults(func=bench_mod.run)

    d = sub.add_parser("demo", help="the README's first command: fetch ML-100K, train the "
                                    "baselines and DP uniform/adaptive, print the head/tail table")
    d.add_argument("--out", default="runs/demo")
    d.add_argument("--quiet", action="store_true")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "devices", 1) > 1:   # before anything starts JAX's backend
            from dpmt.solvers.sharding import request_devices

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
