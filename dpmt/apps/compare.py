"""Head/tail comparison grids, tables, CSV and charts (``dpmt compare``, ``dpmt demo``).

A grid runs, for every seed, the popularity baseline, non-private ALS, and every
(weights × ε × solver) private configuration on the same split, then reports mean ± std over
seeds of overall and per-bucket Recall@20 (buckets: 5 equal-size item groups by training
popularity, least popular first). Outputs: ``results.csv`` (one row per run),
``summary.csv`` and ``summary.md`` (aggregated), ``head_tail.png`` (per-bucket bars).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import time
from pathlib import Path

import numpy as np

from dpmt._io import (atomic_write_bytes, atomic_write_json, atomic_write_text, check_output_path,
                      jsonable)
from dpmt.apps.args import config_from_args
from dpmt.apps.plot_style import HATCHES, MAX_WIDTH_IN, PALETTE, PLOT_DPI, bar_style  # noqa: F401
from dpmt.config import ExecutionConfig, NonPrivate, TrainConfig
from dpmt.data import fetch
from dpmt.data.titles import item_titles_for
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.privacy.ledger import ML100K_TUNING_NOTE, PRIVACY_UNIT
from dpmt.registry import TASKS, WEIGHTINGS
from dpmt.runtime import release_compiled_code

METRIC = "recall@20"


def metric_of(cfg: TrainConfig) -> str:
    """The headline metric of a task: Recall@20 (implicit) or RMSE (rating)."""
    return TASKS[cfg.task].metric

# The non-private ALS baseline is tuned separately (no noise: larger d and more sweeps pay).
NONPRIVATE_ALS = dict(dim=16, reg=5.0, gravity=0.5, iterations=6)
# … and for rating prediction (no gravity: unobserved pairs are not zeros)
NONPRIVATE_ALS_RATING = dict(dim=8, reg=10.0, gravity=0.0, iterations=6)


@dataclasses.dataclass(frozen=True)
class GridPoint:
    label: str            # e.g. "DP adaptive μ=0.5"
    config: TrainConfig | None   # None = popularity baseline


def parse_weight_spec(spec: str) -> tuple[str, float | None]:
    """``adaptive`` or ``adaptive:0.25`` → (weights, μ)."""
    name, _, mu = spec.partition(":")
    if name not in WEIGHTINGS:
        raise ConfigError(f"unknown weights {name!r} in {spec!r}; use one of "
                          f"{', '.join(WEIGHTINGS)}, optionally with :MU (e.g. "
                          "adaptive:0.5)")
    if mu:
        try:
            return name, float(mu)
        except ValueError:
            raise ConfigError(f"bad μ in {spec!r}: expected a number after ':'") from None
    return name, None


def build_grid(base: TrainConfig, weight_specs, epsilons, solvers, baselines=True) -> list[GridPoint]:
    points: list[GridPoint] = []
    if baselines:
        rating = TASKS[base.task].labelled
        points.append(GridPoint("global mean (exact)" if rating else "popularity", None))
        points.append(GridPoint("ALS (non-private)", base.replace(
            solver="ssp", **(NONPRIVATE_ALS_RATING if rating else NONPRIVATE_ALS),
                                                                  privacy=NonPrivate())))
    for solver in solvers:
        for eps in epsilons:
            for spec in weight_specs:
                w, mu = parse_weight_spec(spec)
                cfg = base.replace(solver=solver, weights=w,
                                   mu=mu if mu is not None else base.mu,
                                   privacy=dict(epsilon=float(eps)))
                mu_s = f" μ={cfg.effective_mu:g}" if WEIGHTINGS[w].uses_mu else ""
                points.append(GridPoint(f"DP {w}{mu_s} {solver} ε={eps:g}", cfg))
    return points


def validate_grid(points: list[GridPoint], seeds, epsilons=()) -> None:
    """Check every seed and every private point's budget before anything trains; refuse
    repeated seeds or ε (they would be averaged as if they were independent runs)."""
    from dpmt.train.plan import make_plan

    for name, vals in (("--seeds", [int(s) for s in seeds]),
                       ("--epsilons", [float(e) for e in epsilons])):
        if len(set(vals)) != len(vals):
            raise ConfigError(f"{name} lists a value twice ({' '.join(map(str, vals))}); "
                              "repeats are the same run, not more evidence")
    for seed in seeds:
        TrainConfig(data=dict(seed=int(seed)))  # range-checks the seed
    for p in points:
        if p.config is not None:
            make_plan(p.config)


def run_grid(base: TrainConfig, points: list[GridPoint], seeds, eval_set: str = "test",
             progress: bool = True, execution=None, *, done: list[dict] | None = None,
             on_cell=None) -> list[dict]:
    """Run every grid point for every seed; one result row per (point, seed), plus one
    private-popularity row per (ε, seed) from the first private run's released counts.

    ``done``: rows of an earlier, interrupted run of the same grid — their cells are not run
    again. ``on_cell(rows)`` is called with all rows so far after every finished cell (the
    CLI saves them, so Ctrl-C or a crash loses at most the cell in progress)."""
    from dpmt.train.evaluate import mean_rating_metrics, popularity_metrics, released_baselines
    from dpmt.train.loop import fit
    from dpmt.train.rundir import prepare_data

    ex = execution or ExecutionConfig(progress=progress)
    quiet = dataclasses.replace(ex, progress=False)

    rows = list(done or [])
    finished = {(r["method"], int(r["seed"])) for r in rows}
    total = len(points) * len(seeds)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="grid", unit="run",
                   initial=sum((p.label, int(s)) in finished for p in points for s in seeds))
    for seed in seeds:
        todo = [p for p in points if (p.label, int(seed)) not in finished]
        if not todo:
            continue
        split = prepare_data(base.replace(data=dict(seed=int(seed))), quiet)
        data = split_data_fingerprint(split)
        changed = {r.get("data") for r in rows} - {data, None}
        if changed:
            raise DataError(f"the data of {base.data.dataset} changed since the interrupted grid "
                            "was run (its saved cells were computed on other ratings): start "
                            "again with --overwrite, or use another --out")
        es = split.test if eval_set == "test" else split.validation
        private_pop_done = {float(r["epsilon"]) for r in rows if int(r["seed"]) == int(seed)
                            and r["method"].startswith(("private popularity",
                                                        "private global mean"))}
        for p in todo:
            t0 = time.time()
            if p.config is None and TASKS[base.task].labelled:
                exact = float(np.mean(np.asarray(split.train.value, np.float64)))
                m = mean_rating_metrics(exact, split.train, es, {"epsilon": math.inf})
                eps, compile_s = math.inf, 0.0
            elif p.config is None:
                m = popularity_metrics(split.train, es)
                eps, compile_s = math.inf, 0.0
            else:
                release_compiled_code()  # many fits in one process (dpmt.runtime)
                cfg = p.config.replace(data=dict(seed=int(seed)))
                if cfg.private:
                    # a benchmark: reproducible noise on purpose (its models are never
                    # published; a published model's noise comes from OS entropy). Only a
                    # private config: privacy=dict(...) on NonPrivate() makes it private
                    cfg = cfg.replace(privacy=dict(noise_seed=int(seed)))
                res = fit(split.train, cfg, test=es, execution=quiet)
                m, compile_s = res.metrics, res.compile_seconds
                eps = res.epsilon if res.config.private else math.inf
            rows.append(_row(p.label, seed, eps, p.config, m, time.time() - t0, compile_s,
                             data))
            this = rows[-1]      # the released baselines below come after it
            if p.config is not None and p.config.private \
                    and p.config.privacy.epsilon not in private_pop_done:
                private_pop_done.add(p.config.privacy.epsilon)
                for name, pm in released_baselines(res, split.train, es):
                    rows.append(_row(f"{name} ε={p.config.privacy.epsilon:g}", seed, eps, None, pm,
                                     0.0, 0.0, data))
            if on_cell is not None:
                on_cell(rows)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(last=f"{p.label}: {this[metric_of(base)]:.3f}")
    if bar is not None:
        bar.close()
    order = {(p.label, int(s)): k for k, (s, p) in enumerate((s, p) for s in seeds
                                                             for p in points)}
    return sorted(rows, key=lambda r: (int(r["seed"]), order.get((r["method"], int(r["seed"])),
                                                                 len(order))))


def split_data_fingerprint(split) -> str:
    """SHA-256 (16 hex chars) of every (user, item, value) of a split's parts together: the
    same for every split seed of one data set, different when the ratings change (a
    resumed grid refuses to mix cells of two data sets)."""

    parts = [split.train, split.validation.history, split.validation.targets,
             split.test.history, split.test.targets]
    m = np.int64(split.train.n_items)
    key = np.concatenate([np.asarray(r.user, np.int64) * m + np.asarray(r.item, np.int64)
                          for r in parts])
    val = np.concatenate([np.asarray(r.value, np.float64) for r in parts])
    key, first = np.unique(key, return_index=True)
    h = hashlib.sha256(np.array([split.train.n_users, split.train.n_items], np.int64).tobytes())
    h.update(key.tobytes())
    h.update(val[first].tobytes())
    return h.hexdigest()[:16]


def _row(label, seed, eps, config, m, seconds, compile_seconds, data=None) -> dict:
    row = {"method": label, "seed": int(seed), "epsilon": eps, "data": data,
           "solver": "-" if config is None else config.solver,
           "weights": "-" if config is None else
           (config.weights if config.private else "all-ones"),
           "seconds": seconds, "compile_seconds": compile_seconds}
    metric = "rmse" if "rmse" in m["overall"] else METRIC
    row[metric] = m["overall"][metric]
    if "users" in m["overall"]:
        row["users"] = m["overall"]["users"]
    if metric == METRIC:
        row["ndcg@20"] = m["overall"]["ndcg@20"]
        row["random_recall@20"] = m["overall"].get("random_recall@20", float("nan"))
    for b, bm in enumerate(m["buckets"]):
        row[f"bucket{b}_{metric}"] = bm[metric]
        if metric == METRIC:
            row[f"bucket{b}_random_recall@20"] = bm.get("random_recall@20", float("nan"))
        if "min_count" in bm:
            row[f"bucket{b}_counts"] = f"{bm['min_count']}-{bm['max_count']}"
        if "users" in bm:
            row[f"bucket{b}_users"] = bm["users"]
    return row


def _metric(summary: list[dict]) -> str:
    return "rmse" if "rmse" in summary[0] else METRIC


def summarise(rows: list[dict]) -> list[dict]:
    """Mean and std over seeds per method."""
    out = []
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for meth in methods:
        rs = [r for r in rows if r["method"] == meth]
        agg = {"method": meth, "seeds": len(rs)}
        keys = [k for k in rs[0] if k.startswith(("recall", "ndcg", "bucket", "random", "rmse",
                                                  "users"))
                and not k.endswith("_counts")]
        for k in keys:
            v = np.array([r[k] for r in rs], dtype=float)
            agg[k] = float(np.nanmean(v))
            agg[k + "_std"] = float(np.nanstd(v))
        agg["epsilon"] = float(np.mean([r["epsilon"] for r in rs]))
        for k in rs[0]:
            if k.endswith("_counts"):
                agg[k] = rs[0][k]
        out.append(agg)
    return out


def _n_buckets(summary: list[dict]) -> int:
    metric = _metric(summary)
    return len([k for k in summary[0] if k.startswith("bucket") and k.endswith("_" + metric)
                and "random" not in k and not k.endswith("_std")])


def format_table(summary: list[dict]) -> str:
    """Markdown table: overall and per-bucket Recall@20, mean ± std over seeds (buckets B1 =
    tail … B5 = head, each with its training-count range; then a row with the level of a
    random ranking, which is k/|bucket| inside a bucket, and one with the number of test users
    with a target, overall and per bucket, that each mean rests on)."""
    n_b = _n_buckets(summary)
    s0 = summary[0]

    def bname(b):
        rng = s0.get(f"bucket{b}_counts")
        tag = " tail" if b == 0 else " head" if b == n_b - 1 else ""
        return f"B{b + 1}{tag}" + (f" ({rng} ratings)" if rng else "")

    metric = _metric(summary)
    cols = ["Recall@20", "NDCG@20"] if metric == METRIC else ["RMSE"]
    head = ["method", "ε spent"] + cols + [bname(b) for b in range(n_b)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summary:
        eps = "∞" if math.isinf(s["epsilon"]) else f"{s['epsilon']:.3g}"
        cells = [s["method"], eps, _pm(s, metric)] + ([_pm(s, "ndcg@20")]
                                                     if metric == METRIC else [])
        cells += [_pm(s, f"bucket{b}_{metric}") for b in range(n_b)]
        lines.append("| " + " | ".join(cells) + " |")
    if "random_recall@20" in s0:
        cells = ["random ranking (expected)", "0", f"{s0['random_recall@20']:.4f}", "–"]
        cells += [f"{s0.get(f'bucket{b}_random_recall@20', float('nan')):.4f}"
                  for b in range(n_b)]
        lines.append("| " + " | ".join(cells) + " |")
    if _has_user_counts(summary):
        # the same test users for every method: the first row's counts
        cells = ["test users with a target", "–", _count(s0["users"])]
        cells += ["–"] * (len(cols) - 1) + [_count(s0[f"bucket{b}_users"]) for b in range(n_b)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: Printed under the table: how to read a difference between two cells of one column.
READING_NOTE = ("A cell is a mean over the test users with a target in that bucket (last row, "
                "n). Two methods whose Recall@20 p and q differ by less than about "
                "2·√(p(1−p)/n + q(1−q)/n) cannot be told apart on this test set.")


def _has_user_counts(summary: list[dict]) -> bool:
    """Whether the rows carry the test-user counts (rows from before them, e.g. an old
    cells.json, do not)."""
    s0 = summary[0]
    return "users" in s0 and all(f"bucket{b}_users" in s0 for b in range(_n_buckets(summary)))


def _count(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def _pm(s: dict, k: str) -> str:
    return f"{s[k]:.4f} ± {s[k + '_std']:.4f}" if s["seeds"] > 1 else f"{s[k]:.4f}"


#: one colour per method, consistent across panels (then the same colours hatched), from the
#: plots' shared style
plot_style = bar_style


def plot_panels(summary: list[dict]) -> list[tuple[str, list[dict]]]:
    """(panel title, methods) per private ε; the non-private baselines (ε = ∞) in every
    panel. One panel when nothing is private."""
    eps = sorted({s["epsilon"] for s in summary if math.isfinite(s["epsilon"])
                  and s["epsilon"] > 0})
    base = [s for s in summary if not (math.isfinite(s["epsilon"]) and s["epsilon"] > 0)]
    if not eps:
        return [("", summary)]
    return [(f"ε = {e:g}", base + [s for s in summary if s["epsilon"] == e]) for e in eps]


def plot_buckets(summary: list[dict], path: Path, title: str) -> None:
    """The PNG of :func:`bucket_figure`."""

    import matplotlib.pyplot as plt

    fig = bucket_figure(summary, title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PLOT_DPI)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def bucket_figure(summary: list[dict], title: str):
    """Per-bucket Recall@20 (tail → head, then overall) of every method: one panel per ε, one
    colour (and past 20 methods a hatch) per method, the legend outside the data, the random
    level as a dashed line, error bars only with ≥ 2 seeds; at most 1,920 px wide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_b = _n_buckets(summary)
    metric = _metric(summary)
    panels = plot_panels(summary)
    style = {s["method"]: plot_style(k) for k, s in enumerate(summary)}
    x = np.arange(n_b + 1)
    widest = max(len(ms) for _, ms in panels)
    legend_in = 3.6
    width_in = min(MAX_WIDTH_IN, legend_in + max(6.0, 0.55 * (n_b + 1) * max(1, widest) / 2))
    fig, axes = plt.subplots(len(panels), 1, figsize=(width_in, 1.2 + 3.0 * len(panels)),
                             squeeze=False, sharey=True)
    s0 = summary[0]
    handles = {}
    for ax, (ptitle, methods) in zip(axes[:, 0], panels):
        width = 0.84 / len(methods)
        for k, s in enumerate(methods):
            vals = [s[f"bucket{b}_{metric}"] for b in range(n_b)] + [s[metric]]
            errs = [s[f"bucket{b}_{metric}_std"] for b in range(n_b)] + [s[metric + "_std"]]
            bars = ax.bar(x + (k - (len(methods) - 1) / 2) * width, vals, width,
                          yerr=errs if s["seeds"] > 1 else None, capsize=2,
                          edgecolor="white", linewidth=0.3, **style[s["method"]])
            handles.setdefault(s["method"], bars)
        if "random_recall@20" in s0:
            rnd = [s0.get(f"bucket{b}_random_recall@20", np.nan) for b in range(n_b)] + \
                [s0["random_recall@20"]]
            h = ax.hlines(rnd, x - 0.45, x + 0.45, colors="k", linestyles="dashed",
                          linewidth=1)
            handles.setdefault("random ranking", h)
        ax.set_xticks(x, [f"B{b + 1}" + (" (tail)" if b == 0 else " (head)" if b == n_b - 1
                                         else "")
                          + (f"\n{s0[f'bucket{b}_counts']} ratings"
                             if f"bucket{b}_counts" in s0 else "") for b in range(n_b)]
                      + ["overall"], fontsize=8)
        ax.set_ylabel("Recall@20\n(each bucket ranks its items)" if metric == METRIC
                      else "RMSE (lower is better)", fontsize=8)
        if ptitle:
            ax.set_title(ptitle, fontsize=9, loc="left")
    fig.suptitle(title, fontsize=10)
    if "random ranking" in handles:                   # the reference level last
        handles["random ranking"] = handles.pop("random ranking")
    fig.legend(list(handles.values()), list(handles), loc="center left", fontsize=7,
               bbox_to_anchor=(1 - legend_in / width_in + 0.01, 0.5), frameon=False)
    fig.tight_layout(rect=(0, 0, 1 - legend_in / width_in, 0.97))
    return fig


def write_outputs(rows, out: Path, title: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(rows)
    _write_csv(rows, out / "results.csv")
    _write_csv(summary, out / "summary.csv")
    table = format_table(summary)
    if _has_user_counts(summary) and _metric(summary) == METRIC:
        table += "\n\n" + READING_NOTE
    note = f" On ML-100K, {ML100K_TUNING_NOTE}." if "100K" in title.upper() or any(
        str(r.get("dataset", "")).startswith("ml-100k") for r in rows) else ""
    atomic_write_text(out / "summary.md", f"# {title}\n\nPrivacy unit: {PRIVACY_UNIT}.{note}"
                      f"\n\n{table}\n")
    plot_buckets(summary, out / "head_tail.png", title)
    return table


def _write_csv(rows: list[dict], path: Path) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


CELLS_FILE = "cells.json"


def _grid_fingerprint(base: TrainConfig, points, seeds, eval_set) -> str:
    spec = {"base": base.to_dict(), "eval_set": eval_set, "seeds": [int(x) for x in seeds],
            "points": [[p.label, None if p.config is None else p.config.to_dict()]
                       for p in points]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def check_compare_output(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse an --out that cannot take the grid, before anything trains."""

    check_output_path(out, "--out", folder=True)
    cells = out / CELLS_FILE
    if cells.exists() and not (resume or overwrite):
        raise ConfigError(f"{out} holds the cells of an earlier grid; continue it with "
                          "--resume, or pass --overwrite to start again")
    if resume and not cells.exists():
        raise ConfigError(f"nothing to resume in {out}: no {CELLS_FILE} there")


def compare_main(args) -> int:
    base, ex = config_from_args(args)
    out = Path(args.out)
    points = build_grid(base, args.weight_grid, args.epsilons, args.solvers, args.baselines)
    validate_grid(points, args.seeds, args.epsilons)
    check_compare_output(out, resume=args.resume, overwrite=args.overwrite)
    fp = _grid_fingerprint(base, points, args.seeds, args.eval_set)
    done = []
    if args.resume:
        try:
            saved = json.loads((out / CELLS_FILE).read_text(encoding="utf-8"))
            ok = isinstance(saved, dict) and isinstance(saved.get("rows"), list)
        except (json.JSONDecodeError, UnicodeDecodeError):
            ok = False
        if not ok:
            raise ConfigError(f"{out / CELLS_FILE} is corrupted; start again with --overwrite")
        if saved.get("fingerprint") != fp:
            raise ConfigError(f"{out} holds a different grid (other settings, methods, ε or "
                              "seeds); resume with the same arguments or use another --out")
        done = [{k: (float(v) if v in ("inf", "-inf") else (math.nan if v is None else v))
                 for k, v in r.items()} for r in saved["rows"]]

    def save(rows):
        atomic_write_json(out / CELLS_FILE, {"fingerprint": fp, "rows": jsonable(rows)})

    from dpmt.train.rundir import run_lock

    title = (f"{base.data.dataset}, {args.eval_set} {TASKS[base.task].metric_label}"
             f", δ={base.privacy.delta:g}, d={base.dim}, seeds {list(args.seeds)}")
    with run_lock(out):                     # one process writes a folder at a time
        rows = run_grid(base, points, args.seeds, eval_set=args.eval_set,
                        progress=ex.progress, execution=ex, done=done, on_cell=save)
        table = write_outputs(rows, out, title)
    print(table)
    print(f"\nprivacy unit: {PRIVACY_UNIT}\nwrote {args.out}/summary.md, summary.csv, "
          f"results.csv, head_tail.png")
    return 0


#: what the demo recommends for: a user who liked Star Wars (50), The Empire Strikes Back
#: (172) and Gone with the Wind (133) — ML-100K item ids.
DEMO_HISTORY = (50, 172, 133)


def demo_main(args) -> int:
    """Fetch ML-100K, then popularity (exact and private), non-private ALS, DP uniform,
    DP adaptive and the defaults (noisy GD with Adam, weights chosen by rule) at ε = 5,
    δ = 1e-5; save the defaults' model and print three recommendations from it, with
    titles."""
    from dpmt.train.rundir import run

    # before any download or training: a file, or a folder that cannot be written
    check_output_path(args.out, "--out", folder=True)
    check_output_path(Path(args.out) / "defaults", "--out", folder=True)
    fetch("ml-100k", data_dir="data", progress=not args.quiet)
    # the defaults are what the quality benchmark chose (QUALITY.md); the grid is the same
    # code as `dpmt compare`, and the last point is TrainConfig() itself at ε = 5
    base = TrainConfig()
    points = build_grid(base, ["uniform", "adaptive", "auto"], [5.0], ["gd"], baselines=True)
    rows = run_grid(base, points, [0], progress=not args.quiet)
    title = "ML-100K demo: test Recall@20 by item popularity bucket (ε = 5, δ = 1e-5)"
    table = write_outputs(rows, Path(args.out), title)
    print(table)
    print(f"\nprivacy unit: {PRIVACY_UNIT}\nwrote {args.out}/summary.md and "
          f"{args.out}/head_tail.png")
    run_dir = Path(args.out) / "defaults"
    model_dir = run_dir / "model"             # the shareable part; run_dir/trainer is private
    cfg = points[-1].config
    trained = run(cfg, run_dir, execution=ExecutionConfig(progress=False), overwrite=True,
                  baselines=False)
    model = Model.load(model_dir)            # what a user would do: load the saved model
    ids, scores = model.recommend(list(DEMO_HISTORY), k=3)
    titles = item_titles_for("ml-100k", model.item_ids, data_dir="data") or {}
    liked = ", ".join(titles.get(i) or str(i) for i in DEMO_HISTORY)
    print(f"\nsaved model: {model_dir} ({points[-1].label}, ε = {model.epsilon:.3g}; the "
          f"defaults: {cfg.solver} with {cfg.gd.optimizer}, d = {cfg.dim}; chosen by rule "
          f"from the released statistics: {trained.auto_settings})")
    print(f"three recommendations for a user who liked {liked}:")
    for rank, i in enumerate(ids.tolist(), 1):
        print(f"  {rank}. {titles.get(i) or i}")
    print(f"(more: dpmt recommend --model {model_dir} --items 50,172,133 -k 10)")
    return 0
