"""Mistakes versus horizon: private learners grow, private predictors plateau (or not).

The experiment of the issue: on POINT3 adversarial streams (Algorithm 1 of Sanyal 2026) and
on threshold streams, run SOA (non-private), the private *learners* (Name-and-Shame
learner, AboveThreshold-switching learner) and the private *predictors* (Name-and-Shame
predictor, Theorem C's ``JDPPredictor`` with the practical preset) for horizons
``T ∈ {10², …, 10⁶}`` with ``reps`` independent repetitions (fresh stream and fresh
predictor coins each), and report mean mistakes with a 95% t-interval as a Markdown table, a
CSV and a PNG plot (log-x).

Every private method is calibrated to the same ``(epsilon, delta)``: the Name-and-Shame
methods use ``gamma = delta`` ((0, δ)-private), the AboveThreshold learner spends
``epsilon`` with δ = 0, the JDP predictor gets ``(epsilon, delta)``; the table reports the
``privacy()`` each one states. ``--epsilons 1,8`` runs the ε-dependent methods at each ε on
the same streams (SOA and the Name-and-Shame methods do not depend on ε and run once), with
one table per (stream, ε) and one plot per ε; ``--jdp-options`` passes practical-preset
overrides to the JDP predictor (e.g. the paper's shares, for ablations).

The predictors are built and run by :mod:`dpmt.online.predictors` (shared with
``dpmt stream``): :func:`~dpmt.online.predictors.make_predictor` (by name) and
:func:`~dpmt.online.predictors.run_predictor` (fast whole-stream paths, verified equal to
the per-round objects in the tests). This is an experiment, outside the ``dpmt`` package.

Run: ``python scripts/online_separation.py [--quick] [--out DIR]``; the run reported in
``docs/online.md``: ``--reps 20 --epsilons 1,8 --delta 1e-6 --workers 2``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import time

import numpy as np

from dpmt.errors import ConfigError, DpmtError, check_range
from dpmt.online.hypotheses import HypothesisClass, point_functions, thresholds
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.predictors import (PREDICTORS, jdp_available, make_predictor, privacy_of,
                                    run_predictor)
from dpmt.online.soa import SOA
from dpmt.online.streams import (littlestone_tree_adversary, point3_adversary, point3_p,
                                 threshold_stream)

__all__ = ["separation_experiment", "summarise", "markdown_table", "plot", "write_outputs",
           "benchmark_throughput", "main"]


def check_common(epsilon, delta, seed) -> None:
    check_range("epsilon", epsilon, low=0, low_open=True)
    if math.isinf(float(epsilon)):
        raise ConfigError("epsilon must be finite (got inf)")
    check_range("delta", delta, low=0, high=1, low_open=True, high_open=True)
    check_range("seed", seed, low=0, integer=True)


# -- the separation experiment ------------------------------------------------------------
STREAM_KINDS = ("point3", "thresholds", "tree")
DEFAULT_TS = (10 ** 2, 10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6)
QUICK_TS = (10 ** 2, 10 ** 3, 10 ** 4)
DEFAULT_PREDICTORS = ("soa", "ns-learner", "at-learner", "name-and-shame", "jdp")


def _class_for(kind: str, n_thresholds: int) -> HypothesisClass:
    return point_functions(3) if kind == "point3" else thresholds(n_thresholds)


def _make_stream(kind: str, T: int, seed: int, delta: float, n_thresholds: int, p3):
    if kind == "point3":
        p = point3_p(T, delta) if p3 is None else float(p3)
        return point3_adversary(T, p, seed=seed)
    if kind == "thresholds":
        return threshold_stream(n_thresholds, T, seed=seed)
    if kind == "tree":
        H = thresholds(n_thresholds)
        p = point3_p(max(1, T // max(1, H.littlestone_dimension() - 1)), delta) \
            if p3 is None else float(p3)
        return littlestone_tree_adversary(H, T, p, seed=seed)
    raise ConfigError(f"unknown stream kind {kind!r}; choose from {STREAM_KINDS}")


_CLASS_CACHE: dict = {}

#: predictors whose mistakes and privacy do not depend on ε (Name-and-Shame uses γ = δ):
#: run once per stream and reported under every requested ε
EPS_FREE = frozenset({"soa", "ns-learner", "name-and-shame"})


def _task(args) -> list[dict]:
    """All predictors on one (stream kind, T, repetition) stream, for every requested ε;
    module-level for multiprocessing. Returns one row per (predictor, ε)."""
    kind, T, rep, names, eps_list, cfg = args
    key = (kind, cfg["n_thresholds"])
    H = _CLASS_CACHE.get(key)
    if H is None:  # one class object per process: the Ldim memo is shared across runs
        H = _CLASS_CACHE[key] = _class_for(kind, cfg["n_thresholds"])
    ss = np.random.SeedSequence([cfg["seed"], STREAM_KINDS.index(kind), T, rep])
    s_stream, s_pred = (int(s.generate_state(1)[0]) for s in ss.spawn(2))
    st = _make_stream(kind, T, s_stream, cfg["delta"], cfg["n_thresholds"], cfg["point3_p"])
    informative = len(st.info.get("informative", [])) if kind == "point3" else None
    rows = []
    for name in names:
        for eps in (eps_list[:1] if name in EPS_FREE else eps_list):
            p = make_predictor(name, H, epsilon=eps, delta=cfg["delta"], seed=s_pred,
                               horizon=T, preset=cfg["preset"],
                               jdp_options=cfg.get("jdp_options"))
            t0 = time.perf_counter()
            m = run_predictor(p, st.xs, st.ys)
            dt = time.perf_counter() - t0
            pv = privacy_of(p)
            for e in (eps_list if name in EPS_FREE else (eps,)):
                rows.append({"stream": kind, "eps_req": e, "delta_req": cfg["delta"],
                             "predictor": name, "T": T,
                             "rep": rep, "mistakes": m, "seconds": dt,
                             "epsilon": pv["epsilon"], "delta": pv["delta"],
                             "informative": informative})
    return rows


def separation_experiment(Ts=DEFAULT_TS, reps: int = 20, streams=("point3", "thresholds"),
                          predictors=DEFAULT_PREDICTORS, epsilon: float = 1.0,
                          delta: float = 1e-3, n_thresholds: int = 255, point3_p=None,
                          preset: str = "practical", seed: int = 0, workers: int = 1,
                          progress: bool = True, epsilons=None,
                          jdp_options: dict | None = None) -> list[dict]:
    """Run every (stream, T, repetition, predictor, ε); one row per run.

    The same stream (seeded by ``seed``, kind, T, repetition) is given to every predictor
    and every ε, so comparisons are paired. ``point3_p`` is the insertion probability of
    Algorithm 1 (default: the paper's ``min(L^{-1/3}, 1/(δL))``). ``epsilons`` (a list)
    runs the ε-dependent predictors once per value (default: ``[epsilon]``); the predictors
    in :data:`EPS_FREE` run once and are reported under each (row key ``eps_req``).
    """
    eps_list = [float(e) for e in (epsilons if epsilons is not None else [epsilon])]
    if not eps_list:
        raise ConfigError("epsilons must hold at least one value")
    for e in eps_list:
        check_common(e, delta, seed)
    check_range("reps", reps, low=1, integer=True)
    check_range("workers", workers, low=1, integer=True)
    check_range("n_thresholds", n_thresholds, low=1, integer=True)
    Ts = [int(T) for T in Ts]
    for T in Ts:
        check_range("T", T, low=1, integer=True)
    for k in streams:
        if k not in STREAM_KINDS:
            raise ConfigError(f"unknown stream kind {k!r}; choose from {STREAM_KINDS}")
    predictors = list(predictors)
    for name in predictors:
        if name not in PREDICTORS:
            raise ConfigError(f"unknown predictor {name!r}; choose from {sorted(PREDICTORS)}")
    if "jdp" in predictors and not jdp_available():
        raise DpmtError("the JDP predictor (dpmt.online.jdp) is not available; drop 'jdp' "
                        "from the predictors")
    if point3_p is not None:
        check_range("point3_p", point3_p, low=0, high=1, low_open=True)
    cfg = {"delta": float(delta), "n_thresholds": int(n_thresholds),
           "point3_p": point3_p, "preset": preset, "seed": int(seed),
           "jdp_options": dict(jdp_options or {})}
    tasks = [(k, T, r, tuple(predictors), tuple(eps_list), cfg)
             for T in sorted(Ts, reverse=True) for k in streams for r in range(int(reps))]
    runs_per_task = sum(1 if n in EPS_FREE else len(eps_list) for n in predictors)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=sum(t[1] for t in tasks) * runs_per_task, unit="round",
                   unit_scale=True, desc="separation", leave=False)
    rows = []
    if workers == 1:
        for t in tasks:
            rows.extend(_task(t))
            if bar is not None:
                bar.update(t[1] * runs_per_task)
    else:
        import multiprocessing as mp
        ctx = mp.get_context("fork") if hasattr(os, "fork") else mp.get_context()
        with ctx.Pool(int(workers)) as pool:
            for rs in pool.imap_unordered(_task, tasks):
                rows.extend(rs)
                if bar is not None:
                    bar.update(rs[0]["T"] * runs_per_task)
    if bar is not None:
        bar.close()
    rows.sort(key=lambda r: (r["stream"], r["eps_req"], r["predictor"], r["T"], r["rep"]))
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    """Mean mistakes and 95% t-interval per (stream, predictor, T)."""
    from scipy import stats

    groups: dict = {}
    for r in rows:
        groups.setdefault((r["stream"], r.get("eps_req"), r["predictor"], r["T"]),
                          []).append(r)
    out = []
    for (k, e_req, name, T), rs in sorted(groups.items(), key=lambda kv: (
            kv[0][0], -1.0 if kv[0][1] is None else kv[0][1], kv[0][2], kv[0][3])):
        m = np.array([r["mistakes"] for r in rs], float)
        n = len(m)
        mean = float(m.mean())
        half = float(stats.t.ppf(0.975, n - 1) * m.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        secs = sum(r["seconds"] for r in rs)
        out.append({"stream": k, "eps_req": e_req, "delta_req": rs[0].get("delta_req"),
                    "predictor": name, "T": T, "reps": n,
                    "mean": mean,
                    "lo": mean - half, "hi": mean + half, "median": float(np.median(m)),
                    "max": float(m.max()), "epsilon": rs[0]["epsilon"],
                    "delta": rs[0]["delta"],
                    "rounds_per_second": (T * n / secs) if secs > 0 else math.inf})
    return out


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _panels(summary: list[dict]) -> list[tuple]:
    """(stream kind, requested ε) pairs present in a summary, in display order."""
    return sorted({(s["stream"], s.get("eps_req")) for s in summary},
                  key=lambda p: (p[0], -1.0 if p[1] is None else p[1]))


def markdown_table(summary: list[dict]) -> str:
    """One table per (stream kind, requested ε): rows = predictors, columns = T, cells =
    mean [95% CI]."""
    lines = []
    order = {n: i for i, n in enumerate(PREDICTORS)}
    for k, e_req in _panels(summary):
        ss = [s for s in summary if s["stream"] == k and s.get("eps_req") == e_req]
        Ts = sorted({s["T"] for s in ss})
        names = sorted({s["predictor"] for s in ss}, key=lambda n: order.get(n, 99))
        at = "" if e_req is None else f", requested ε = {e_req:g}"
        if ss[0].get("delta_req") is not None:
            at += f", δ = {ss[0]['delta_req']:g}"
        lines.append(f"**{k}**{at} (mean mistakes [95% interval], {ss[0]['reps']} "
                     "repetitions)\n")
        lines.append("| predictor | kind | (ε, δ) | " + " | ".join(f"T=10^{int(round(math.log10(T)))}"
                                                        if T > 0 and math.log10(T).is_integer()
                                                        else f"T={T}" for T in Ts) + " |")
        lines.append("|---|---|---|" + "---|" * len(Ts))
        for name in names:
            cells = []
            priv = ""
            for T in Ts:
                c = [s for s in ss if s["predictor"] == name and s["T"] == T]
                if not c:
                    cells.append("–")
                    continue
                c = c[0]
                cells.append(f"{_fmt(c['mean'])} [{_fmt(max(0.0, c['lo']))}, {_fmt(c['hi'])}]")
                if math.isinf(c["epsilon"]):
                    priv = "not private"
                else:
                    priv = f"({c['epsilon']:.3g}, {c['delta']:.3g})"
            lines.append(f"| {name} | {PREDICTORS[name][0]} | {priv} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(summary: list[dict], path: str, title: str | None = None) -> None:
    """Mistakes vs T (log-x, symlog-y), one panel per stream kind (per requested ε too when
    the summary holds several)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(summary)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    styles = {"predictor": "-", "learner": "--", "non-private": ":"}
    for ax, (k, e_req) in zip(axes[0], panels):
        ss = [s for s in summary if s["stream"] == k and s.get("eps_req") == e_req]
        for name in [n for n in PREDICTORS if any(s["predictor"] == n for s in ss)]:
            c = sorted((s for s in ss if s["predictor"] == name), key=lambda s: s["T"])
            T = [s["T"] for s in c]
            mean = np.array([s["mean"] for s in c])
            lo = np.maximum(0, [s["lo"] for s in c])
            hi = np.array([s["hi"] for s in c])
            kind = PREDICTORS[name][0]
            label = f"{name} ({kind})"
            if name == "ns-learner":
                label += " = name-and-shame's mistakes"
            ax.plot(T, mean, styles[kind], marker={"learner": "s", "predictor": "o"}.get(kind, "^"),
                    markersize=7 if name == "ns-learner" else 5, label=label)
            ax.fill_between(T, lo, hi, alpha=0.2)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("horizon T")
        ax.set_ylabel("mistakes (mean, 95% interval)")
        dl = ss[0].get("delta_req")
        ax.set_title(f"{k} stream" + ("" if e_req is None else f", ε = {e_req:g}")
                     + ("" if dl is None else f", δ = {dl:.3g}"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(rows: list[dict], summary: list[dict], out_dir: str,
                  meta: dict | None = None) -> dict:
    """Write runs.csv, summary.csv, table.md, mistakes_vs_T.png (+ meta.json) to out_dir;
    with several requested ε, one plot per ε, ``mistakes_vs_T_eps<ε>.png``."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, v) for k, v in
             {"runs": "runs.csv", "summary": "summary.csv", "table": "table.md",
              "plot": "mistakes_vs_T.png", "meta": "meta.json"}.items()}
    for key, data in (("runs", rows), ("summary", summary)):
        with open(paths[key], "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0].keys()))
            w.writeheader()
            w.writerows(data)
    table = markdown_table(summary)
    with open(paths["table"], "w") as f:
        if meta:
            f.write(f"Separation experiment: {json.dumps(meta)}\n\n")
        f.write(table + "\n")
    eps_req = sorted({s.get("eps_req") for s in summary if s.get("eps_req") is not None})
    if len(eps_req) > 1:
        del paths["plot"]
        for e in eps_req:
            key = f"plot_eps{e:g}"
            paths[key] = os.path.join(out_dir, f"mistakes_vs_T_eps{e:g}.png")
            plot([x for x in summary if x.get("eps_req") == e], paths[key])
    else:
        plot(summary, paths["plot"])
    with open(paths["meta"], "w") as f:
        json.dump(meta or {}, f, indent=2, default=str)
    return paths


def benchmark_throughput(n: int = 1023, T: int = 10 ** 6, gammas=(0.01,), seed: int = 0,
                         per_round: bool = True, jdp=((1.0, 1e-6),)) -> list[dict]:
    """Rounds per second of SOA, the Name-and-Shame predictor and the JDP predictor
    (practical preset, each ``(ε, δ)`` in ``jdp``) on ``thresholds(n)`` (``n + 1``
    hypotheses) over a ``T``-round realisable uniform threshold stream; each measurement
    starts from a fresh class (cold Ldim memo; building the predictor is not timed).
    Per-round = the ``predict``/``update`` objects; ``run`` = the verified whole-stream
    path. Wall-clock time: on a shared machine the numbers move with the load."""
    st = threshold_stream(n, T, seed=seed)
    xl, yl = st.xs.tolist(), st.ys.tolist()
    out = []

    def timed(make, mode):
        p = make()
        t0 = time.perf_counter()
        c0 = time.process_time()
        if mode == "per-round":
            pr, up = p.predict, p.update
            for x, y in zip(xl, yl):
                pr(x)
                up(y)
        else:
            p.run(st.xs, st.ys)
        dt = time.perf_counter() - t0
        dc = time.process_time() - c0
        return {"rounds_per_second": T / dt, "seconds": dt,
                "cpu_rounds_per_second": T / dc if dc > 0 else math.inf,
                "mistakes": p.mistakes}

    makers = [("soa", lambda: SOA(thresholds(n)))]
    makers += [(f"name-and-shame(gamma={g})", lambda g=g: NameAndShame(thresholds(n), g, seed=seed))
               for g in gammas]
    if jdp and jdp_available():
        from dpmt.online.jdp import JDPPredictor
        makers += [(f"jdp(eps={e:g},delta={d:g})",
                    lambda e=e, d=d: JDPPredictor(thresholds(n), e, d, seed=seed))
                   for e, d in jdp]
    for name, make in makers:
        for mode in (("per-round", "run") if per_round else ("run",)):
            out.append({"predictor": name, "mode": mode, "n_hypotheses": n + 1, "T": T,
                        **timed(make, mode)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="online_separation",
        description="Mistakes vs horizon for private online learners and predictors.")
    ap.add_argument("--quick", action="store_true",
                    help=f"small version: T in {QUICK_TS}, thresholds on 63 points")
    ap.add_argument("--Ts", type=str, default=None,
                    help="comma-separated horizons (default 1e2,1e3,1e4,1e5,1e6)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--streams", type=str, default="point3,thresholds")
    ap.add_argument("--predictors", type=str, default=None,
                    help=f"comma-separated, from {sorted(PREDICTORS)} (default: all available)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--epsilons", type=str, default=None,
                    help="comma-separated ε values (overrides --epsilon); ε-free predictors "
                         "(soa, name-and-shame, ns-learner) run once and are reported "
                         "under each")
    ap.add_argument("--delta", type=float, default=1e-3)
    ap.add_argument("--n-thresholds", type=int, default=None,
                    help="domain size of the threshold class (default 255; quick: 63)")
    ap.add_argument("--point3-p", type=float, default=None,
                    help="Algorithm 1 insertion probability (default: the paper's "
                         "min(L^-1/3, 1/(delta L)))")
    ap.add_argument("--preset", type=str, default="practical")
    ap.add_argument("--jdp-options", type=str, default=None, metavar="JSON",
                    help='JDPPredictor practical-preset overrides as JSON, e.g. '
                         '\'{"split": [0.25, 0.25, 0.5], "mirror_share": 0.5}\'')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--out", type=str, default="runs/online_separation")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--bench", action="store_true",
                    help="only measure SOA / Name-and-Shame / JDP (ε=1, δ=1e-6) throughput "
                         "on 1,024 thresholds over 10^6 rounds")
    args = ap.parse_args(argv)
    if args.bench:
        for r in benchmark_throughput():
            print(f"{r['predictor']:28s} {r['mode']:9s} |H|={r['n_hypotheses']} T={r['T']}: "
                  f"{r['rounds_per_second']:,.0f} rounds/s wall, "
                  f"{r['cpu_rounds_per_second']:,.0f} rounds/s CPU ({r['mistakes']} mistakes)")
        return 0
    try:
        if args.Ts:
            try:
                Ts = [int(float(v)) for v in args.Ts.split(",") if v.strip()]
            except ValueError:
                raise ConfigError(f"--Ts must be comma-separated numbers (got {args.Ts!r})")
        else:
            Ts = list(QUICK_TS if args.quick else DEFAULT_TS)
        n_thr = args.n_thresholds or (63 if args.quick else 255)
        if args.predictors:
            preds = [p.strip() for p in args.predictors.split(",") if p.strip()]
        else:
            preds = [p for p in DEFAULT_PREDICTORS if p != "jdp" or jdp_available()]
        streams = [s.strip() for s in args.streams.split(",") if s.strip()]
        eps_list = [args.epsilon]
        if args.epsilons:
            try:
                eps_list = [float(v) for v in args.epsilons.split(",") if v.strip()]
            except ValueError:
                raise ConfigError(f"--epsilons must be comma-separated numbers "
                                  f"(got {args.epsilons!r})") from None
        jdp_options = None
        if args.jdp_options:
            try:
                jdp_options = json.loads(args.jdp_options)
            except ValueError as e:
                raise ConfigError(f"--jdp-options must be a JSON object ({e})") from None
            if not isinstance(jdp_options, dict):
                raise ConfigError("--jdp-options must be a JSON object")
        t0 = time.time()
        rows = separation_experiment(Ts, reps=args.reps, streams=streams, predictors=preds,
                                     epsilon=args.epsilon, delta=args.delta,
                                     n_thresholds=n_thr, point3_p=args.point3_p,
                                     preset=args.preset, seed=args.seed,
                                     workers=args.workers, progress=not args.no_progress,
                                     epsilons=eps_list, jdp_options=jdp_options)
        summary = summarise(rows)
        meta = {"Ts": Ts, "reps": args.reps, "streams": streams, "predictors": preds,
                "epsilons": eps_list, "delta": args.delta, "n_thresholds": n_thr,
                "point3_p": args.point3_p if args.point3_p is not None else "paper",
                "preset": args.preset, "jdp_options": jdp_options, "seed": args.seed,
                "wall_seconds": round(time.time() - t0, 1)}
        paths = write_outputs(rows, summary, args.out, meta)
    except DpmtError as e:
        print(f"online_separation: error: {e}", flush=True)
        return 2
    print(markdown_table(summary))
    print(f"wrote {', '.join(paths.values())}")
    return 0
