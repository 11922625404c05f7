"""``dpmt stream``: run an online predictor on a streamed ratings dataset.

The main ``dpmt`` command calls :func:`add_arguments` on its ``stream`` sub-parser and
:func:`run` with the parsed arguments. Example::

    dpmt stream --dataset ml-100k --predictor jdp --epsilon 1 --delta 1e-6 --buckets 32

prints the mistakes, the mistake rate, the best fixed hypothesis in hindsight and the
(ε, δ) the predictor satisfies (per rating; joint DP for predictors, DP of the released
hypotheses for learners), plus the user-level (ε, δ) of the private popularity histogram
that defines the buckets; ``--json PATH`` writes the same as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from dpmt.errors import ConfigError, DpmtError, check_range

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``dpmt stream`` options to ``parser`` (returns it)."""
    from dpmt.online.predictors import PREDICTORS

    parser.description = ("Replay a ratings dataset in timestamp order as an online task "
                          "(will the user like the item? x = popularity bucket) and run a "
                          "private online predictor on it.")
    parser.add_argument("--dataset", default="ml-100k",
                        help="dataset for dpmt.data.load: a name such as ml-100k (default) "
                             "or a path; 'synthetic-stream' is a small built-in stream with "
                             "timestamps that needs no download")
    parser.add_argument("--data-dir", default=None,
                        help="folder of downloaded datasets (default: dpmt.data's, ./data)")
    parser.add_argument("--predictor", default="jdp", choices=sorted(PREDICTORS),
                        help="jdp (Theorem C), name-and-shame (Fact 5), soa (not private), "
                             "ns-learner, at-learner (default jdp)")
    parser.add_argument("--epsilon", type=float, default=1.0,
                        help="privacy ε of the predictor, > 0 (default 1)")
    parser.add_argument("--delta", type=float, default=1e-6,
                        help="privacy δ of the predictor, in (0, 1) (default 1e-6)")
    parser.add_argument("--buckets", type=int, default=32,
                        help="number of item-popularity buckets, 2..4096 (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="random seed, >= 0 (default 0)")
    parser.add_argument("--limit", type=int, default=None,
                        help="use only the first N ratings of the stream (default: all)")
    parser.add_argument("--popularity", default="private", choices=["private", "exact"],
                        help="bucket items by a private (default) or exact (not private) "
                             "histogram of rating counts")
    parser.add_argument("--hist-epsilon", type=float, default=1.0,
                        help="user-level ε of the private histogram, > 0 (default 1)")
    parser.add_argument("--hist-delta", type=float, default=1e-6,
                        help="user-level δ of the private histogram, in (0, 1) (default 1e-6)")
    parser.add_argument("--cap-k", type=int, default=50,
                        help="ratings per user counted in the histogram, >= 1 (default 50)")
    parser.add_argument("--like-threshold", type=float, default=4.0,
                        help="a rating >= this counts as 'liked' (default 4)")
    parser.add_argument("--gamma", type=float, default=None,
                        help="retention probability of name-and-shame/ns-learner, in (0, 1] "
                             "(default: delta)")
    parser.add_argument("--preset", default="practical", choices=["practical", "theory"],
                        help="JDPPredictor preset (default practical)")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write the results as JSON to PATH")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _check_args(args) -> None:
    check_range("--epsilon", args.epsilon, low=0, low_open=True)
    if math.isinf(args.epsilon):
        raise ConfigError("--epsilon must be finite (got inf)")
    check_range("--delta", args.delta, low=0, high=1, low_open=True, high_open=True)
    check_range("--buckets", args.buckets, low=2, high=4096, integer=True)
    check_range("--seed", args.seed, low=0, high=2 ** 63 - 1, integer=True)
    if args.limit is not None:
        check_range("--limit", args.limit, low=1, integer=True)
    check_range("--hist-epsilon", args.hist_epsilon, low=0, low_open=True)
    if math.isinf(args.hist_epsilon):
        raise ConfigError("--hist-epsilon must be finite (got inf)")
    check_range("--hist-delta", args.hist_delta, low=0, high=1, low_open=True, high_open=True)
    check_range("--cap-k", args.cap_k, low=1, integer=True)
    check_range("--like-threshold", args.like_threshold)
    if args.gamma is not None:
        check_range("--gamma", args.gamma, low=0, high=1, low_open=True)


def _finite(v):
    return v if (v is None or math.isfinite(v)) else None


def run(args) -> int:
    """Run ``dpmt stream`` with parsed ``args``; returns the exit status (2 on user error)."""
    try:
        return _run(args)
    except DpmtError as e:
        print(f"dpmt stream: error: {e}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from dpmt.online.predictors import make_predictor, privacy_of, run_predictor
    from dpmt.online.ratings_stream import best_in_hindsight, ratings_stream

    defaults = add_arguments(argparse.ArgumentParser()).parse_args([])
    for k, v in vars(defaults).items():  # a bare Namespace may omit options
        if not hasattr(args, k):
            setattr(args, k, v)
    _check_args(args)
    if args.json:
        from dpmt._io import check_output_path

        check_output_path(args.json, "--json", folder=False)
    t0 = time.time()
    rs = ratings_stream(dataset=args.dataset, buckets=args.buckets, popularity=args.popularity,
                        like_threshold=args.like_threshold, cap_k=args.cap_k,
                        hist_epsilon=args.hist_epsilon, hist_delta=args.hist_delta,
                        limit=args.limit, seed=args.seed, data_dir=args.data_dir)
    T = len(rs)
    p = make_predictor(args.predictor, rs.H, epsilon=args.epsilon, delta=args.delta,
                       seed=args.seed, horizon=T, gamma=args.gamma, preset=args.preset)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=T, unit="round", unit_scale=True, desc=f"stream {args.predictor}",
                   file=sys.stderr, leave=False)
    t1 = time.time()
    mistakes = run_predictor(p, rs.xs, rs.ys, progress=None if bar is None else bar.update)
    secs = time.time() - t1
    if bar is not None:
        bar.close()
    best, h = best_in_hindsight(rs.H, rs.xs, rs.ys)
    pv = privacy_of(p)
    out = {
        "dataset": rs.dataset, "task": rs.task, "predictor": args.predictor,
        "rounds": T, "mistakes": int(mistakes),
        "mistake_rate": mistakes / T if T else 0.0,
        "best_in_class_mistakes": best, "best_in_class_rate": best / T if T else 0.0,
        "best_hypothesis": rs.H.names[h],
        "positive_rate": float(rs.ys.mean()) if T else 0.0,
        "privacy": {"epsilon": _finite(pv["epsilon"]), "delta": pv["delta"],
                    "guarantee": pv["guarantee"], "unit": "one rating (example)"},
        "histogram_privacy": ({"epsilon": rs.hist_epsilon, "delta": rs.hist_delta,
                               "unit": "one user (add/remove)", "cap_k": rs.cap_k,
                               "noise_sigma": rs.noise_sigma}
                              if rs.popularity == "private" else
                              {"note": f"{rs.popularity} popularity: not private"}),
        "buckets": rs.buckets, "seed": args.seed, "epsilon_requested": args.epsilon,
        "delta_requested": args.delta, "rounds_per_second": T / secs if secs > 0 else None,
        "seconds": round(time.time() - t0, 3),
    }
    pr = out["privacy"]
    priv = ("not private" if pr["epsilon"] is None else
            f"(ε, δ) = ({pr['epsilon']:.4g}, {pr['delta']:.3g}), {pr['guarantee']}")
    print(f"dataset:            {rs.dataset} ({T} ratings in timestamp order)")
    print(f"task:               {rs.task}")
    print(f"predictor:          {args.predictor}")
    print(f"mistakes:           {mistakes} / {T}  (rate {out['mistake_rate']:.4f})")
    print(f"best in class:      {best}  (rate {out['best_in_class_rate']:.4f}, "
          f"{out['best_hypothesis']}, in hindsight)")
    print(f"privacy:            {priv}")
    if rs.popularity == "private":
        print(f"histogram privacy:  (ε, δ) = ({rs.hist_epsilon:.4g}, {rs.hist_delta:.3g}) per "
              f"user, each user capped at {rs.cap_k} ratings, noise σ = {rs.noise_sigma:.3g}")
    else:
        print(f"histogram privacy:  none ({rs.popularity} popularity)")
    if args.json:
        from dpmt._io import atomic_write_text

        try:
            atomic_write_text(args.json, json.dumps(out, indent=2) + "\n")
        except OSError as e:
            raise DpmtError(f"cannot write --json {args.json}: {e.strerror}") from None
        print(f"wrote {args.json}")
    return 0
