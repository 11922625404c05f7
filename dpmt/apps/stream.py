"""``dpmt stream``: run an online predictor on a streamed ratings dataset.

The main ``dpmt`` command calls :func:`add_arguments` on its ``stream`` sub-parser and
:func:`run` with the parsed arguments. Example::

    dpmt stream --dataset ml-100k --predictor jdp --epsilon 1 --delta 1e-6 --buckets 32

prints the mistakes, the mistake rate, the best fixed hypothesis in hindsight and the
(ε, δ) the predictor satisfies (per rating; joint DP for predictors, DP of the released
hypotheses for learners), plus the user-level (ε, δ) of the private popularity histogram
that defines the buckets; ``--json PATH`` writes the same as JSON.

``--features model --model DIR`` replaces the popularity bucket by the bucket of the score
``⟨u_j, v_i⟩`` of a saved model (``dpmt train --out DIR``), with ``u_j`` folded in from user
j's earlier ratings only (:mod:`dpmt.online.ratings_stream`); the report then also states
the model's user-level (ε, δ). ``--compare --model DIR`` runs SOA, Name-and-Shame and the
JDP predictor on both feature kinds over the same ratings, next to the best fixed threshold
in hindsight (``--plot PATH``: cumulative mistakes over the stream).

Randomness: the private histogram's capping and noise, the bucket tie-breaks and every
predictor's coins come from OS entropy unless ``--seed N`` is given. A seeded run is
reproducible but NOT private against anyone who knows the seed: its printed output and its
JSON say so (``SEEDED_WARNING``), and only then does the JSON hold the seed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpmt._io import atomic_write_text, check_output_path
from dpmt.apps.plot_style import MAX_WIDTH_IN, legend_outside, line_style, save_png
from dpmt.errors import ConfigError, DpmtError, check_range

if TYPE_CHECKING:   # only for annotations: dpmt.online loads when a stream command runs
    from dpmt.online.protocols import StreamPredictor

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``dpmt stream`` options to ``parser`` (returns it)."""
    from dpmt.online.predictors import PREDICTORS

    parser.description = ("Replay a ratings dataset in timestamp order as an online task "
                          "(will the user like the item? x = popularity bucket) and run a "
                          "private online predictor on it.")
    parser.add_argument("--dataset", default=None,
                        help="dataset for dpmt.data.load: a name such as ml-100k or a path; "
                             "'synthetic-stream' is a small built-in stream with timestamps "
                             "that needs no download (default: the --model's dataset, else "
                             "ml-100k)")
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
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the histogram noise and the predictors' coins, >= 0, "
                             "for reproducible experiments ONLY: the results are then NOT "
                             "private against anyone who knows the seed (default: fresh "
                             "randomness from OS entropy, not recorded)")
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
    parser.add_argument("--features", default="popularity", choices=["popularity", "model"],
                        help="x = the item's popularity bucket (default), or the bucket of "
                             "the --model's score <u_j, v_i> with u_j folded in from the "
                             "user's earlier ratings")
    parser.add_argument("--model", default=None, metavar="DIR",
                        help="a saved model (dpmt train --out DIR) for --features model and "
                             "--compare; only ratings of its items are streamed")
    parser.add_argument("--score-edges", default="reference", choices=["reference", "range"],
                        help="fixed bucket edges of the model score, from the released V only: "
                             "quantiles over items for the reference user C·mean(V)/|mean(V)| "
                             "(default), or equal bins of [-C·max|v|, C·max|v|]")
    parser.add_argument("--min-coverage", type=float, default=0.5,
                        help="refuse a --model whose items cover less than this share of the "
                             "dataset's ratings, in [0, 1] (default 0.5)")
    parser.add_argument("--compare", action="store_true",
                        help="run soa, name-and-shame and jdp on both feature kinds (needs "
                             "--model) next to the best fixed threshold; --predictor is unused")
    parser.add_argument("--plot", default=None, metavar="PATH",
                        help="with --compare: save a plot of cumulative mistakes (PNG)")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write the results as JSON to PATH")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _check_args(args) -> None:
    # as train: above 100 a guarantee means nothing, and the predictors' exp(ε) overflows
    check_range("--epsilon", args.epsilon, low=0, high=100.0, low_open=True)
    check_range("--delta", args.delta, low=0, high=1, low_open=True, high_open=True)
    check_range("--buckets", args.buckets, low=2, high=4096, integer=True)
    if args.seed is not None:
        check_range("--seed", args.seed, low=0, high=2 ** 63 - 1, integer=True)
    if args.limit is not None:
        check_range("--limit", args.limit, low=1, integer=True)
    check_range("--hist-epsilon", args.hist_epsilon, low=0, high=100.0, low_open=True)
    check_range("--hist-delta", args.hist_delta, low=0, high=1, low_open=True, high_open=True)
    check_range("--cap-k", args.cap_k, low=1, integer=True)
    check_range("--like-threshold", args.like_threshold)
    if args.gamma is not None:
        check_range("--gamma", args.gamma, low=0, high=1, low_open=True)
    check_range("--min-coverage", args.min_coverage, low=0, high=1)
    if args.features == "model" and args.model is None:
        raise ConfigError("--features model needs --model DIR, a saved model (train one with "
                          "`dpmt train --dataset ml-100k --epsilon 5 --out DIR`)")
    if args.compare and args.model is None:
        raise ConfigError("--compare needs --model DIR (it compares popularity and model "
                          "features)")
    if args.model is not None and args.features != "model" and not args.compare:
        raise ConfigError("--model is used only with --features model or --compare")
    if args.plot is not None and not args.compare:
        raise ConfigError("--plot is made by --compare")


def _finite(v):
    return v if (v is None or math.isfinite(v)) else None


def _randomness(args) -> dict:
    """The JSON's ``randomness`` entry: the seed appears only when the user gave one."""
    if args.seed is None:
        return {"source": "fresh randomness from OS entropy (not recorded)"}
    from dpmt.privacy.randomness import SEEDED_WARNING

    return {"source": "user-given seed", "seed": args.seed, "warning": SEEDED_WARNING}


def _print_randomness(randomness: dict) -> None:
    if "seed" in randomness:
        print(f"WARNING:            --seed {randomness['seed']}: {randomness['warning']}")


def run(args) -> int:
    """Run ``dpmt stream`` with parsed ``args``; returns the exit status (2 on user error)."""
    try:
        return _run(args)
    except DpmtError as e:
        print(f"dpmt stream: error: {e}", file=sys.stderr)
        return 2


COMPARED = ("soa", "name-and-shame", "jdp")


def _fill_defaults(args) -> None:
    defaults = add_arguments(argparse.ArgumentParser()).parse_args([])
    for k, v in vars(defaults).items():  # a bare Namespace may omit options
        if not hasattr(args, k):
            setattr(args, k, v)


def _load_model(path):
    from dpmt.model import Model

    return Model.load(path)


def _same_dataset(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return Path(a).exists() and Path(b).exists() and Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _model_info(model, path) -> dict:
    cfg = model.config
    return {"path": str(path), "dataset": cfg.data.dataset, "n_items": model.n_items,
            "dim": model.dim, "fingerprint": model.fingerprint(), "reg": cfg.fold_in_ridge,
            "gravity": cfg.fold_in_alpha0, "user_clip": cfg.user_clip,
            "history": f"the user's earlier ratings > {cfg.data.positive_threshold:g} (label 1, "
                       "implicit feedback as in training), never released"}


def _model_privacy(model) -> dict:
    if not model.private:
        return {"epsilon": None, "delta": None, "private": False,
                "unit": "one user (add/remove)", "note": "non-private model (ε = ∞)"}
    return {"epsilon": float(model.epsilon), "delta": float(model.config.privacy.delta),
            "private": True, "unit": "one user (add/remove): all their ratings",
            "statement": "user-level DP of the released item embeddings V"}


def _histogram_privacy(rs) -> dict:
    if rs.features == "model":
        return {"note": "model features: no popularity histogram"}
    if rs.popularity == "private":
        return {"epsilon": rs.hist_epsilon, "delta": rs.hist_delta,
                "unit": "one user (add/remove)", "cap_k": rs.cap_k,
                "noise_sigma": rs.noise_sigma}
    return {"note": f"{rs.popularity} popularity: not private"}


def _warnings(rs, model) -> list[str]:
    if model is None:
        return []
    out = []
    if _same_dataset(rs.dataset, model.config.data.dataset):
        out.append(f"the streamed ratings ({rs.dataset}) are the model's training data: the "
                   "same users' data trained V and is streamed again. The user-level (ε, δ) "
                   "of V and the per-rating JDP (ε, δ) of the predictor are two separate "
                   "statements, not one composed guarantee")
    else:
        out.append(f"the model was trained on {model.config.data.dataset!r}, not on "
                   f"{rs.dataset!r}: items are matched by raw id")
    if not model.private:
        out.append("the model is not private (ε = ∞): V protects no one")
    if rs.features == "model":
        out.append("x_t is computed from the user's own earlier ratings: changing one rating "
                   "can change that user's later examples too (the per-rating statement is "
                   "about one example (x_t, y_t))")
    return out


def _stream(args, model, features):
    from dpmt.online.ratings_stream import ratings_stream

    return ratings_stream(dataset=args.dataset, buckets=args.buckets,
                          popularity=args.popularity, like_threshold=args.like_threshold,
                          cap_k=args.cap_k, hist_epsilon=args.hist_epsilon,
                          hist_delta=args.hist_delta, limit=args.limit, seed=args.seed,
                          data_dir=args.data_dir, features=features, model=model,
                          score_edges=args.score_edges, min_coverage=args.min_coverage)


def _privacy_line(pv: dict) -> str:
    return ("not private" if pv["epsilon"] is None else
            f"(ε, δ) = ({pv['epsilon']:.4g}, {pv['delta']:.3g}), {pv['guarantee']}")


def _model_line(mp: dict) -> str:
    if not mp["private"]:
        return "none (non-private model, ε = ∞)"
    return (f"(ε, δ) = ({mp['epsilon']:.4g}, {mp['delta']:.3g}) per user (add/remove one "
            "user), item embeddings V")


def _write_json(path, out) -> None:
    try:
        atomic_write_text(path, json.dumps(out, indent=2) + "\n")
    except OSError as e:
        raise DpmtError(f"cannot write --json {path}: {e.strerror}") from None
    print(f"wrote {path}")


def _run(args) -> int:
    _fill_defaults(args)
    _check_args(args)

    if args.json:
        check_output_path(args.json, "--json", folder=False)
    if args.plot:
        check_output_path(args.plot, "--plot", folder=False)
    model = None if args.model is None else _load_model(args.model)
    if args.dataset is None:
        args.dataset = model.config.data.dataset if model is not None else "ml-100k"
    if args.compare:
        return _compare(args, model)
    return _single(args, model)


def _single(args, model) -> int:
    from dpmt.online.predictors import make_predictor, privacy_of, run_predictor
    from dpmt.online.ratings_stream import best_in_hindsight

    t0 = time.time()
    rs = _stream(args, model, args.features)
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
        "dataset": rs.dataset, "task": rs.task, "features": rs.features,
        "predictor": args.predictor,
        "rounds": T, "skipped_ratings": rs.skipped, "mistakes": int(mistakes),
        "mistake_rate": mistakes / T if T else 0.0,
        "best_in_class_mistakes": best, "best_in_class_rate": best / T if T else 0.0,
        "best_hypothesis": rs.H.names[h],
        "positive_rate": float(rs.ys.mean()) if T else 0.0,
        "privacy": {"epsilon": _finite(pv["epsilon"]), "delta": pv["delta"],
                    "guarantee": pv["guarantee"], "unit": "one rating (example)"},
        "histogram_privacy": _histogram_privacy(rs),
        "buckets": rs.buckets, "randomness": _randomness(args),
        "epsilon_requested": args.epsilon,
        "delta_requested": args.delta, "rounds_per_second": T / secs if secs > 0 else None,
        "warnings": _warnings(rs, model),
    }
    if model is not None:
        out["model"] = _model_info(model, args.model)
        out["model_privacy"] = _model_privacy(model)
    if rs.features == "model":
        out["model"].update(score_edges=args.score_edges,
                            edges=[float(e) for e in rs.score_edges])
    out["seconds"] = round(time.time() - t0, 3)
    print(f"dataset:            {rs.dataset} ({T} ratings in timestamp order"
          + (f", {rs.skipped} skipped: item not in the model)" if model is not None else ")"))
    print(f"task:               {rs.task}")
    print(f"predictor:          {args.predictor}")
    print(f"mistakes:           {mistakes} / {T}  (rate {out['mistake_rate']:.4f})")
    print(f"best in class:      {best}  (rate {out['best_in_class_rate']:.4f}, "
          f"{out['best_hypothesis']}, in hindsight)")
    print(f"privacy:            {_privacy_line(out['privacy'])}")
    if rs.features == "popularity":
        if rs.popularity == "private":
            print(f"histogram privacy:  (ε, δ) = ({rs.hist_epsilon:.4g}, {rs.hist_delta:.3g}) "
                  f"per user, each user capped at {rs.cap_k} ratings, noise σ = "
                  f"{rs.noise_sigma:.3g}")
        else:
            print(f"histogram privacy:  none ({rs.popularity} popularity)")
    if model is not None:
        print(f"model privacy:      {_model_line(out['model_privacy'])}")
    for w in out["warnings"]:
        print(f"warning:            {w}")
    _print_randomness(out["randomness"])
    if args.json:
        _write_json(args.json, out)
    return 0


def _marks(p: StreamPredictor, xs, ys, bar=None, chunk: int = 50_000):
    """(per-round mistake marks, mistakes) of ``p`` on the stream: its whole-stream ``run``
    (verified against the per-round loop in the tests), chunked as ``run_predictor`` does."""

    parts = []
    for a in range(0, len(xs), chunk):
        parts.append(np.asarray(p.run(xs[a:a + chunk], ys[a:a + chunk],
                                      return_mistakes=True), np.uint8))
        if bar is not None:
            bar.update(len(parts[-1]))
    m = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return m, int(m.sum())


def _compare(args, model) -> int:
    from dpmt.online.predictors import jdp_available, make_predictor, privacy_of
    from dpmt.online.ratings_stream import best_in_hindsight

    t0 = time.time()
    names = [n for n in COMPARED if n != "jdp" or jdp_available()]
    streams = {f: _stream(args, model, f) for f in ("popularity", "model")}
    rp, rm = streams["popularity"], streams["model"]
    assert np.array_equal(rp.order, rm.order) and np.array_equal(rp.ys, rm.ys)
    T = len(rm)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=T * len(names) * 2, unit="round", unit_scale=True,
                   desc="stream --compare", file=sys.stderr, leave=False)
    feats, curves, privacy = {}, {}, {}
    for f, rs in streams.items():
        best, h = best_in_hindsight(rs.H, rs.xs, rs.ys)
        row = {"task": rs.task, "best_in_class_mistakes": best,
               "best_in_class_rate": best / T if T else 0.0,
               "best_hypothesis": rs.H.names[h], "predictors": {}}
        curves[(f, "best fixed threshold")] = np.cumsum(rs.H.matrix[h][rs.xs] != rs.ys)
        for n in names:
            p = make_predictor(n, rs.H, epsilon=args.epsilon, delta=args.delta,
                               seed=args.seed, horizon=T, gamma=args.gamma,
                               preset=args.preset)
            marks, m = _marks(p, rs.xs, rs.ys, bar)
            pv = privacy_of(p)
            privacy[n] = {"epsilon": _finite(pv["epsilon"]), "delta": pv["delta"],
                          "guarantee": pv["guarantee"], "unit": "one rating (example)"}
            row["predictors"][n] = {"mistakes": m, "mistake_rate": m / T if T else 0.0}
            curves[(f, n)] = np.cumsum(marks)
        feats[f] = row
    if bar is not None:
        bar.close()
    out = {
        "dataset": rm.dataset, "rounds": T, "skipped_ratings": rm.skipped,
        "like_threshold": rm.like_threshold,
        "positive_rate": float(rm.ys.mean()) if T else 0.0, "buckets": rm.buckets,
        "randomness": _randomness(args), "features": feats,
        "privacy": {"predictors": privacy, "model": _model_privacy(model),
                    "histogram": _histogram_privacy(rp)},
        "model": {**_model_info(model, args.model), "score_edges": args.score_edges,
                  "edges": [float(e) for e in rm.score_edges]},
        "warnings": list(dict.fromkeys(_warnings(rp, model) + _warnings(rm, model))),
    }
    out["seconds"] = round(time.time() - t0, 3)
    _print_compare(out, names)
    if args.plot:
        plot_cumulative(curves, args.plot, f"{rm.dataset}: {T} ratings in time order, "
                        f"{rm.buckets} buckets; (ε, δ) per rating: "
                        + privacy_caption(privacy, names))
        print(f"wrote {args.plot}")
    if args.json:
        _write_json(args.json, out)
    return 0


def _print_compare(out: dict, names) -> None:
    T = out["rounds"]
    pr = out["privacy"]
    print(f"dataset:   {out['dataset']} ({T} ratings in timestamp order, "
          f"{out['skipped_ratings']} skipped: item not in the model; positive rate "
          f"{out['positive_rate']:.4f})")
    for f in ("popularity", "model"):
        print(f"{f + ':':<11} {out['features'][f]['task']}")
    w = max(len(n) for n in list(names) + ["best fixed threshold"]) + 2
    print(f"\n{'mistakes':<{w}}{'(ε, δ) per rating':>24}{'popularity':>14}{'model':>14}")
    for n in names:
        priv = _pair(pr["predictors"][n])
        cells = "".join(f"{out['features'][f]['predictors'][n]['mistakes']:>14,}"
                        for f in ("popularity", "model"))
        print(f"{n:<{w}}{priv:>24}{cells}")
    cells = "".join(f"{out['features'][f]['best_in_class_mistakes']:>14,}"
                    for f in ("popularity", "model"))
    print(f"{'best fixed threshold':<{w}}{'(in hindsight)':>24}{cells}")
    hp = pr["histogram"]
    print(f"\nmodel privacy:      {_model_line(pr['model'])}")
    if "epsilon" in hp:
        print(f"histogram privacy:  (ε, δ) = ({hp['epsilon']:.4g}, {hp['delta']:.3g}) per "
              f"user (popularity features only), each user capped at {hp['cap_k']} ratings")
    else:
        print(f"histogram privacy:  {hp['note']}")
    print("predictor privacy:  per rating (one example), "
          + "; ".join(f"{n}: {_privacy_line(pr['predictors'][n])}" for n in names))
    for wn in out["warnings"]:
        print(f"warning:            {wn}")
    _print_randomness(out["randomness"])


def _pair(pv: dict) -> str:
    """A predictor's (ε, δ) as the comparison table prints it."""
    return "not private" if pv["epsilon"] is None else \
        f"({pv['epsilon']:.3g}, {pv['delta']:.3g})"


def privacy_caption(privacy: dict, names) -> str:
    """The predictors' (ε, δ) as the table gives them: once when the private ones share
    it, else one per predictor."""
    private = [n for n in names if privacy[n]["epsilon"] is not None]
    pairs = {_pair(privacy[n]) for n in private}
    public = [n for n in names if n not in private]
    tail = f"; {', '.join(public)} not private" if public else ""
    if len(pairs) == 1:
        return f"{', '.join(private)} at {pairs.pop()}{tail}"
    return ", ".join(f"{n} {_pair(privacy[n])}" for n in private) + tail


def plot_cumulative(curves: dict, path, title: str) -> None:
    """The PNG of :func:`cumulative_figure`."""

    save_png(cumulative_figure(curves, title), path)


def cumulative_figure(curves: dict, title: str):
    """Cumulative mistakes over the stream, one line per (features, method): one colour and
    marker per method, solid for model features, dashed for popularity features; right
    panel: the same minus the best fixed popularity threshold's, so that the differences
    are visible. Lines that coincide stay visible: each method's markers sit at its own
    offsets and later (thinner) lines are drawn over earlier (wider) ones. One legend
    outside both panels; at most 1,920 px wide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = curves.get(("popularity", "best fixed threshold"))
    legend_in = 3.2
    fig, axes = plt.subplots(1, 2, figsize=(min(MAX_WIDTH_IN, legend_in + 10.5), 4.6))
    names = list(dict.fromkeys(n for _f, n in curves))
    handles, labels = [], []
    for z, ((f, n), c) in enumerate(curves.items()):
        T = len(c)
        idx = np.unique(np.linspace(0, T - 1, min(T, 2000)).astype(np.int64)) if T else \
            np.zeros(0, np.int64)
        k = names.index(n)
        st = line_style(k)
        n_marks = 8
        style = dict(color=st["color"], marker=st["marker"], markersize=5,
                     linestyle="-" if f == "model" else "--",
                     # earlier lines wider: a line drawn over one it equals leaves its edges
                     linewidth=1.0 + 1.6 * (len(names) - 1 - k) / max(1, len(names) - 1),
                     # each method's markers at its own offsets along the stream
                     markevery=[int(len(idx) * (j + (k + 0.5) / (len(names) + 1)) / n_marks)
                                for j in range(n_marks)] if len(idx) >= n_marks else None,
                     markerfacecolor="white" if f == "popularity" else st["color"],
                     zorder=2 + z)
        (h,) = axes[0].plot(idx + 1, c[idx], **style)
        if ref is not None:
            axes[1].plot(idx + 1, c[idx].astype(np.int64) - ref[idx], **style)
        handles.append(h)
        labels.append(f"{n}, {f} features")
    axes[0].set_ylabel("cumulative mistakes")
    axes[1].set_ylabel("cumulative mistakes − best fixed\npopularity threshold's")
    for ax in axes:
        ax.set_xlabel("rating (stream order)")
        ax.grid(alpha=0.3)
    axes[1].axhline(0, color="k", linewidth=0.8)
    fig.suptitle(title, fontsize=9)
    legend_outside(fig, handles, labels, legend_in)
    return fig
