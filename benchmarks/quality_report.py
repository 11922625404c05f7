"""The report of the quality benchmark (:mod:`benchmarks.quality`): the summary over seeds,
the targets table, the per-dataset tables and plots, and QUALITY.md itself (with its
hand-written tail kept), and reading its raw rows back from ``quality.json``. A dataset
``ds`` here is a :class:`benchmarks.quality.Dataset` (read, never imported: the benchmark
imports its report, not the other way round).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from benchmarks import family
from dpmt._io import atomic_write_json, atomic_write_text
from dpmt.apps.plot_style import (
    MAX_WIDTH_IN,
    RANDOM,
    RANDOM_LABEL,
    legend_outside,
    line_style,
    save_png,
)
from dpmt.privacy.ledger import ML100K_TUNING_NOTE, PRIVACY_UNIT

K = 20
METRIC = f"recall@{K}"



# -- the report ------------------------------------------------------------------------------
def summarise(rows: list[dict]) -> dict:
    """{(dataset, method, ε): mean/std over seeds of test Recall@20 (overall, per bucket),
    validation, seconds, and the chosen configurations}."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["method"], r["epsilon"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        test = np.array([r["test"]["overall"] for r in rs])
        buckets = np.array([r["test"]["buckets"] for r in rs], np.float64)
        out[key] = {"test": float(test.mean()), "test_std": float(test.std()),
                    "seeds": len(rs), "buckets": np.nanmean(buckets, 0).tolist(),
                    "buckets_std": np.nanstd(buckets, 0).tolist(),
                    # the random level (older quality.json rows lack it: no line then)
                    "random": rs[0]["test"].get("random"),
                    "bucket_random": rs[0]["test"].get("bucket_random"),
                    "validation": float(np.mean([r["validation"] for r in rs])),
                    "seconds": float(sum(r["seconds"] for r in rs)),
                    "chosen": sorted({r["chosen"] for r in rs}),
                    "per_seed": {int(r["seed"]): float(r["test"]["overall"]) for r in rs},
                    "users": rs[0]["test"]["users"],
                    "users_total": int(sum(r["test"]["users"] for r in rs)),
                    "bucket_users": (np.sum([r["test"]["bucket_users"] for r in rs], 0)
                                     .astype(int).tolist()
                                     if all("bucket_users" in r["test"] for r in rs)
                                     else None)}
    return out


def two_se(p: float, q_: float, n_p: int | None, n_q: int | None) -> float:
    """Twice the standard error of the difference of two mean Recall@k figures ``p``, ``q_``,
    each a mean over ``n`` (user, seed) pairs of per-user recalls in [0, 1]: a variable in
    [0, 1] with mean p has variance ≤ p(1 − p), so se(p) ≤ √(p(1 − p)/n), and the two are
    combined as if independent (the same test users make them positively correlated, so the
    paired se is smaller: this bound is conservative). ``inf`` when a count is unknown."""
    if not n_p or not n_q or math.isnan(p) or math.isnan(q_):
        return math.inf
    return 2.0 * math.sqrt(p * (1 - p) / n_p + q_ * (1 - q_) / n_q)


def _shortfalls(s: dict, pp: dict, only: tuple[str, ...] | None = None
                ) -> tuple[list[str], bool]:
    """The figures (overall, per bucket; ``only`` those named) where ``s`` is below ``pp``,
    each with 2 se of the difference, and whether every one of them is within 2 se (not
    resolved by the test set)."""
    out, within = [], True
    cells = [("overall", s["test"], pp["test"], s.get("users_total"), pp.get("users_total"))]
    bu_s, bu_p = s.get("bucket_users"), pp.get("bucket_users")
    for b, (a, c) in enumerate(zip(s["buckets"], pp["buckets"])):
        cells.append((f"B{b + 1}", a, c, bu_s[b] if bu_s else None, bu_p[b] if bu_p else None))
    for name, a, c, na, nc in cells:
        if (only is not None and name not in only) or math.isnan(a) or math.isnan(c) \
                or a >= c - 1e-12:
            continue
        se2 = two_se(a, c, na, nc)
        within = within and (c - a) <= se2
        out.append(f"{name} {a - c:+.3f}" + (f" (2 se {se2:.3f}, {nc} users)"
                                             if math.isfinite(se2) else ""))
    return out, within


def _below(short: list[str], within: bool) -> str:
    """A target row's tail: the shortfalls of :func:`_shortfalls`, and whether the test set
    resolves them."""
    if not short:
        return ""
    return ("; below: " + ", ".join(short)
            + ("; every shortfall within 2 se: the test set does not resolve it" if within
               else ""))


def _fmt(s: dict | None, key="test") -> str:
    if s is None:
        return "–"
    return f"{s[key]:.4f} ± {s[key + '_std']:.4f}" if s["seeds"] > 1 else f"{s[key]:.4f}"


def _private_methods(summary, ds, eps):
    return [m for (d, m, e) in summary if d == ds and e == eps
            and m not in ("private popularity",)]


def best_private(summary, ds: str, eps: float) -> tuple[str, dict]:
    """The private method with the best *validation* Recall@20 at ``ε`` (what a user who
    tunes on validation would deploy); its test figure is what the targets read."""
    cands = [(summary[(ds, m, eps)]["validation"], m) for m in _private_methods(summary, ds,
                                                                               eps)]
    _, m = max(cands)
    return m, summary[(ds, m, eps)]


def _paired_gap(a: dict, b: dict) -> str:
    """``a − b`` per seed (the same split and noise seed), mean ± std, when there are several
    seeds: how well the test set resolves a gap of 0.01."""
    seeds = sorted(set(a.get("per_seed", {})) & set(b.get("per_seed", {})))
    if len(seeds) < 2:
        return ""
    g = np.array([a["per_seed"][k] - b["per_seed"][k] for k in seeds])
    return f" (paired over {len(seeds)} seeds: {g.mean():+.4f} ± {g.std():.4f})"


def targets(summary, names: list[str], epsilons: dict[str, tuple]) -> list[tuple[str, bool,
                                                                                  str]]:
    """(target, met?, measured figures) for every target of issue 10 that the run covers."""
    out = []
    inf = math.inf
    for ds in names:
        for eps in epsilons[ds]:
            pp = summary.get((ds, "private popularity", eps))
            if pp is None:
                continue
            for label, (m, s) in (("defaults", ("dpmt defaults",
                                                 summary[(ds, "dpmt defaults", eps)])),
                                  ("best on validation", best_private(summary, ds, eps))):
                ok_all = s["test"] >= pp["test"]
                ok_b = all(a >= b - 1e-12 or (math.isnan(a) and math.isnan(b))
                           for a, b in zip(s["buckets"], pp["buckets"]))
                short, within = _shortfalls(s, pp)
                out.append((f"{ds}, ε={eps:g}: private model ({label}: {m}) ≥ private "
                            "popularity, overall and per bucket", ok_all and ok_b,
                            f"overall {s['test']:.4f} vs {pp['test']:.4f}; buckets "
                            + " ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(s["buckets"],
                                                                           pp["buckets"]))
                            + _below(short, within)))
            d, best = summary[(ds, "dpmt defaults", eps)], best_private(summary, ds, eps)[1]
            out.append((f"{ds}, ε={eps:g}: defaults within 0.01 of the tuned best",
                        d["test"] >= best["test"] - 0.01,
                        f"{d['test']:.4f} vs {best['test']:.4f}" + _paired_gap(d, best)))
        ease = summary.get((ds, "EASE (non-private, tuned)", inf))
        als_s = summary.get((ds, "ALS (non-private, tuned)", inf))
        if ease is not None and als_s is not None:
            out.append((f"{ds}: non-private ALS within 0.01 of EASE", als_s["test"] >=
                        ease["test"] - 0.01, f"ALS {als_s['test']:.4f}, EASE {ease['test']:.4f}"))
        if ds.startswith("Skewed synthetic"):
            # the best non-private baseline of the table (ALS or EASE) is the ceiling
            als = max(summary[(ds, m, inf)]["test"] for m in ("ALS (non-private, tuned)",
                      "EASE (non-private, tuned)") if (ds, m, inf) in summary)
            pop = summary[(ds, "popularity (exact, not private)", inf)]["test"]
            for eps, goal, what in ((20.0, als - 0.01, "≥ best non-private − 0.01"),
                                    (5.0, als - 0.02, "within 0.02 of best non-private"),
                                    (1.0, pop + 0.05, "≥ popularity + 0.05")):
                if (ds, "dpmt defaults", eps) in summary:
                    m, s = best_private(summary, ds, eps)
                    scale = ""
                    if eps == 1.0:          # how far the goal is, in the run's own figures
                        more = [f"ε = {e:g}: {best_private(summary, ds, e)[1]['test']:.4f}"
                                for e in epsilons[ds] if e > eps
                                and (ds, "dpmt defaults", e) in summary]
                        scale = (f" (best private at {', '.join(more)}; best non-private "
                                 f"{als:.4f})" if more else "")
                    ref = summary[(ds, "ALS (non-private, tuned)" if eps > 1 else
                                   "popularity (exact, not private)", inf)]
                    se2 = two_se(s["test"], ref["test"], s.get("users_total"),
                                 ref.get("users_total"))
                    gap = (f"; {s['test'] - goal:+.4f}, 2 se {se2:.4f}"
                           if s["test"] < goal and math.isfinite(se2) else "")
                    out.append((f"{ds}, ε={eps:g}: {what}", s["test"] >= goal,
                                f"{m} {s['test']:.4f}, goal {goal:.4f}{gap}{scale}"))
        if "synthetic" in ds:
            for eps in epsilons[ds]:
                u = summary.get((ds, "uniform", eps))
                if eps < 5 or u is None:
                    continue
                for w in ("adaptive", "adaptive-normalized"):
                    a = summary.get((ds, w, eps))
                    if a is None:
                        continue
                    ok = a["test"] > u["test"] and all(a["buckets"][b] > u["buckets"][b]
                                                       for b in (0, 1))
                    short, within = _shortfalls(a, u, ("overall", "B1", "B2"))
                    out.append((f"{ds}, ε={eps:g}: {w} beats uniform overall and on B1, B2",
                                ok, f"overall {a['test']:.4f} vs {u['test']:.4f}; B1 "
                                f"{a['buckets'][0]:.3f} vs {u['buckets'][0]:.3f}; B2 "
                                f"{a['buckets'][1]:.3f} vs {u['buckets'][1]:.3f}"
                                + _below(short, within)))
    return out


def dataset_section(summary, ds, plot_name: str) -> str:
    eps = ds.epsilons
    methods = list(dict.fromkeys(m for (d, m, _e) in summary if d == ds.name))
    users = next(s["users"] for (d, _m, _e), s in summary.items() if d == ds.name)
    lines = [f"## {ds.name}", "",
             f"δ = {ds.base.privacy.delta:g}; seeds {', '.join(map(str, ds.seeds))}; {users} test "
             f"users; test Recall@{K} (mean ± std over seeds) of the configuration chosen on "
             "validation.", "",
             "| method | " + " | ".join(f"ε = {e:g}" for e in eps) + " |",
             "|---|" + "---|" * len(eps)]
    for m in methods:
        cells = [_fmt(summary.get((ds.name, m, e)) or summary.get((ds.name, m, math.inf)))
                 for e in eps]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    nb = len(next(s["buckets"] for (d, _m, _e), s in summary.items() if d == ds.name))
    for e in eps:
        lines += ["", f"Per popularity bucket at ε = {e:g} (B1 = tail; each bucket ranks only "
                  "its items), chosen configuration and time:", "",
                  "| method | " + " | ".join(f"B{b + 1}" for b in range(nb))
                  + " | overall | chosen on validation | seconds |",
                  "|---|" + "---|" * (nb + 3)]
        for m in methods:
            s = summary.get((ds.name, m, e)) or summary.get((ds.name, m, math.inf))
            lines.append(f"| {m} | " + " | ".join(f"{x:.3f}" for x in s["buckets"])
                         + f" | {s['test']:.4f} | {'; '.join(s['chosen'])} | "
                         f"{s['seconds']:.0f} |")
    lines += ["", f"![Recall@{K} against ε]({plot_name})", ""]
    return "\n".join(lines)


def plot(summary, ds, path: Path) -> None:
    """The PNG of :func:`quality_figure`."""
    save_png(quality_figure(summary, ds), path)


def quality_figure(summary, ds):
    """Test Recall@20 against ε (left: private methods as lines with markers, the
    non-private baselines as flat lines) and per bucket at the middle ε (right), one colour
    and marker per method in both panels, one legend outside them, the random level as a
    black dashed line, error bars only with ≥ 2 seeds; at most 1,920 px wide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(m for (d, m, _e) in summary if d == ds.name))
    eps = list(ds.epsilons)
    style = {m: line_style(k) for k, m in enumerate(methods)}

    def cell(m, e):
        return summary.get((ds.name, m, e)) or summary[(ds.name, m, math.inf)]

    legend_in = 3.4
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(min(MAX_WIDTH_IN, legend_in + 10.5), 4.4))
    handles, labels = [], []
    for m in methods:
        st = style[m]
        cells = [cell(m, e) for e in eps]
        ys = [c["test"] for c in cells]
        seeds = min(c["seeds"] for c in cells)
        if (ds.name, m, math.inf) in summary:               # not private: a flat line
            h = a1.axhline(ys[0], color=st["color"], linestyle=(0, (6, 2, 1, 2)),
                           linewidth=1.4)
            if seeds > 1:
                a1.axhspan(ys[0] - cells[0]["test_std"], ys[0] + cells[0]["test_std"],
                           color=st["color"], alpha=0.12, linewidth=0)
        elif seeds > 1:
            h = a1.errorbar(eps, ys, yerr=[c["test_std"] for c in cells], capsize=2,
                            markersize=5, linewidth=1.3, **st)
        else:
            (h,) = a1.plot(eps, ys, markersize=5, linewidth=1.3, **st)
        handles.append(h)
        labels.append(m)
    s0 = cell(methods[0], eps[0])
    if s0.get("random") is not None:
        handles.append(a1.axhline(s0["random"], **RANDOM))
        labels.append(RANDOM_LABEL)
    a1.set_xscale("log")
    a1.set_xticks(eps, [f"{e:g}" for e in eps])
    a1.minorticks_off()
    a1.set_xlabel("ε (user-level; baselines are not private)")
    a1.set_ylabel(f"test Recall@{K}")
    a1.set_title("overall", fontsize=9, loc="left")
    a1.grid(alpha=0.3)

    e = eps[len(eps) // 2]
    nb = len(cell(methods[0], e)["buckets"])
    x = np.arange(nb)
    width = 0.84 / len(methods)
    for k, m in enumerate(methods):
        c = cell(m, e)
        a2.bar(x + (k - (len(methods) - 1) / 2) * width, c["buckets"], width,
               yerr=c.get("buckets_std") if c["seeds"] > 1 else None, capsize=2,
               color=style[m]["color"], edgecolor="white", linewidth=0.3)
    rnd = s0.get("bucket_random")
    if rnd is not None and all(r is not None for r in rnd):
        a2.hlines(rnd, x - 0.45, x + 0.45, colors=RANDOM["color"],
                  linestyles=RANDOM["linestyle"], linewidth=RANDOM["linewidth"])
    a2.set_xticks(x, [f"B{b + 1}" + (" (tail)" if b == 0 else " (head)" if b == nb - 1
                                     else "") for b in range(nb)])
    a2.set_ylabel(f"test Recall@{K} (each bucket ranks its items)")
    a2.set_title(f"per popularity bucket at ε = {e:g}", fontsize=9, loc="left")
    fig.suptitle(ds.name, fontsize=10)
    legend_outside(fig, handles, labels, legend_in)
    return fig


# -- the rating section (rows of benchmarks.quality.run_ratings) ------------------------------
#: issue 28's ML-100K rating targets (random split, test RMSE, the defaults of --task rating)
RATING_TARGETS = {math.inf: 0.92, 1.0: 1.04, 5.0: 1.00, 20.0: 0.97}


def rating_targets(rows: list[dict]) -> list[tuple[str, bool, str]]:
    """(target, met?, measured) for issue 28's ML-100K rating targets the run covers."""
    out = []
    for r in rows:
        goal = RATING_TARGETS.get(r["epsilon"])
        if r["spec"] != "ml-100k" or goal is None or r["method"].startswith(("global",
                                                                             "planted")):
            continue
        what = "non-private" if math.isinf(r["epsilon"]) else f"private ε={r['epsilon']:g}"
        out.append((f"{r['dataset']}: {what} RMSE ≤ {goal:.2f} (defaults of --task rating)",
                    r["rmse"] <= goal, f"{r['rmse']:.4f}"))
    return out


def rating_section(rows: list[dict]) -> str:
    """The markdown of the rating section: one table, a row per (dataset, method)."""
    lines = ["## Ratings: test RMSE, random 80/10/10 split", "",
             "Every dpmt model at the defaults of `--task rating` (only ε set; not tuned). "
             "*gap ratio* = (private − non-private) / (global mean − non-private), the "
             "reference ML-10M notebook's figure: 0 is the non-private RMSE, 1 no better than "
             "the global mean. The planted model (synthetic only) is the generator's own "
             "μ + b_j + b_i + ⟨x_j, y_i⟩ clipped to 0.5..5: what its noise and half-star "
             "rounding allow.", "",
             "| dataset | method | ε | test RMSE | gap ratio | ε spent | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        eps = "–" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
        ratio = r.get("ratio")
        ratio = "–" if ratio is None else ("n/a" if math.isnan(ratio) else f"{ratio:.3f}")
        spent = "–" if math.isinf(r["epsilon_spent"]) else f"{r['epsilon_spent']:.3g}"
        lines.append(f"| {r['dataset']} | {r['method']} | {eps} | {r['rmse']:.4f} | {ratio} |"
                     f" {spent} | {r['seconds']:.0f} |")
    sizes = {r["dataset"]: (r["users"], r["items"], r["train"], r["test"]) for r in rows}
    lines += ["", "Sizes: " + "; ".join(f"{d}: {u} users × {i} items, {n} training and {t} "
                                        "test ratings" for d, (u, i, n, t) in sizes.items()),
              ""]
    return "\n".join(lines)


def load_rating_rows(rows: list[dict]) -> list[dict]:
    """Rating rows read back from quality.json, with ε = ∞ and NaN ratios restored."""
    out = []
    for r in rows:
        r = dict(r, epsilon=_number(r["epsilon"]), epsilon_spent=_number(r["epsilon_spent"]))
        if "ratio" in r:
            r["ratio"] = _number(r["ratio"])
        out.append(r)
    return out


#: how to read the targets (the figures are in the tables; nothing here is a measurement)
READING = """### Reading the targets

* **Private popularity** ranks by the run's *own* released counts, which the defaults run
  gives for free. With four sweeps the counts get a smaller share of the same budget than
  with two, so this baseline is weaker than in a two-sweep run. It is not the best
  popularity that ε could buy.
* **ML-100K per bucket.** B1 and B2 hold the items with the fewest training ratings (the
  bucket ranges are in `dpmt train`'s output: 0–7 ratings). With 100 test users (held-out
  split), 8–19 of them have a target in B1 per seed (about 35 on the per-user split), and a
  ranking of B1's ~280–340 items at random scores 20/|B1| ≈ 0.06–0.07. Both the model and
  private popularity rank B1 close to that level: with uniform weights and η = 0 (the
  defaults' rule at n̂·ε < 10⁵) a tail item's score is ⟨u, v_i⟩ of an embedding learnt from a
  few noisy ratings, and the released count of an item with 1–2 ratings is mostly noise. The
  targets table gives every shortfall with twice its standard error (per-user recall is in
  [0, 1], so its variance is at most p(1 − p); over the users and seeds with a target in the
  bucket); where every shortfall is within it, the test set cannot tell the two apart.
  Overall, the defaults rank above private popularity in every cell.
* **Why uniform beats adaptive on ML-100K at ε ≤ 5.** The adaptive weights (eq. 11) assume
  homogeneous users (Assumption 4.1 of the paper) and read the noisy n̂_i. At ML-100K's
  n̂ ≈ 740–940 the count noise is of the order of a tail item's count, so the weights of tail
  items are mostly noise, and the weighting spends less of the budget than uniform sampling.
  With more users per unit of noise (the synthetics, n̂ ≈ 4·10⁴–1.2·10⁵) the tail counts are
  resolved and adaptive can win. This is why the rule for `weights="auto"` switches on n̂·ε.
  Its threshold comes from validation sweeps (`experiments/defaults_sweep.py`), and the
  "defaults within 0.01" rows show where it misses.
* **The synthetic at ε = 1.** The goal, popularity + 0.05, lies close to non-private ALS on
  this dataset; the targets row gives the best private model at the larger budgets and the
  non-private ALS of the same run beside it, for scale.
* **"Defaults within 0.01"** compares an untuned configuration with the best of a grid chosen
  on validation. Where the test set is small, the gap paired over seeds (shown) tells how
  well the test set resolves 0.01."""


#: QUALITY.md's hand-written tail (what was tried and not kept, with its commands) starts at
#: this line; ``dpmt quality`` regenerates everything above it and keeps the tail as it is
HAND_WRITTEN = ("<!-- everything below is written by hand (measured elsewhere, with its "
                "command) and kept when `dpmt quality` regenerates the report above -->")


def hand_written_tail(path: Path) -> str:
    """The part of an existing report from :data:`HAND_WRITTEN` on ("" if none)."""
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    return text[text.index(HAND_WRITTEN):] if HAND_WRITTEN in text else ""


def write_report(rows: list[dict], dsets: list, out: Path, command: str,
                 seconds: float, invocations: int = 1,
                 rating_rows: list[dict] | None = None,
                 family_rows: list[dict] | None = None) -> str:
    """QUALITY.md (+ plots, quality.json) from the rows of one run (``invocations`` > 1: an
    interrupted run finished by ``--resume``, said so in the report), with the rating
    section when there are ``rating_rows`` and the generator family's
    (:func:`benchmarks.family.section`) when there are ``family_rows``. The report's
    hand-written tail (:data:`HAND_WRITTEN`), if it has one, is kept."""
    rating_rows = list(rating_rows or [])
    summary = summarise(rows)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# Quality benchmark", "",
             f"Generated by `{command}` in {seconds / 60:.1f} minutes on this machine"
             + (f" (over {invocations} invocations: `--resume` ran the datasets an interrupted "
                "one had not finished)" if invocations > 1 else "")
             + "; every figure below was measured in that run.", "",
             f"Privacy unit: {PRIVACY_UNIT}. Every private cell spends its whole (ε, δ) "
             "(counts + every iteration), accounted with dp_accounting. On ML-100K, "
             f"{ML100K_TUNING_NOTE}. Benchmark runs draw reproducible noise from their seed "
             "(their models are never published).", "",
             "Protocol: ratings > 3.5 are positives; hyper-parameters (solver, d, λ, the "
             "popularity-prior weight η) chosen on the validation users' Recall@20, the "
             "chosen configuration reported on the test users. The selection is not charged "
             "(as in the literature; `dpmt tune --selection private` charges it). `dpmt "
             "defaults` is `TrainConfig()` with only the data, ε and δ set.", ""]
    eps = {d.name: d.epsilons for d in dsets}
    tg = targets(summary, [d.name for d in dsets], eps) + rating_targets(rating_rows)
    parts += ["## Targets", "", "| target | met | measured (test) |", "|---|---|---|"]
    parts += [f"| {t} | {'yes' if ok else '**no**'} | {why} |" for t, ok, why in tg]
    parts += ["", READING, ""]
    assets = out / "quality"               # plots and raw rows beside the report
    assets.mkdir(parents=True, exist_ok=True)
    for k, d in enumerate(dsets):
        name = f"quality_{k}.png"
        plot(summary, d, assets / name)
        parts.append(dataset_section(summary, d, f"quality/{name}"))
    if rating_rows:
        parts.append(rating_section(rating_rows))
    if family_rows:
        parts.append(family.section(family_rows))
    text = "\n".join(parts) + "\n"
    tail = hand_written_tail(out / "QUALITY.md")
    if tail:
        text += "\n" + tail
    atomic_write_json(assets / "quality.json", {"rows": rows, "rating_rows": rating_rows,
                                                "family_rows": family_rows or [],
                                                "command": command, "seconds": seconds,
                                                "invocations": invocations})
    atomic_write_text(out / "QUALITY.md", text)
    return text


def _number(x):
    """A number as :func:`dpmt._io.jsonable` wrote it ("inf" / "-inf" strings, None = NaN)."""
    if x is None:
        return math.nan
    return float(x) if isinstance(x, str) else x


def load_rows(rows: list[dict]) -> list[dict]:
    """Rows read back from quality.json, with ε = ∞ and NaN buckets restored."""
    out = []
    for r in rows:
        r = dict(r, epsilon=_number(r["epsilon"]), epsilon_spent=_number(r["epsilon_spent"]))
        r["test"] = dict(r["test"], overall=_number(r["test"]["overall"]),
                         buckets=[_number(b) for b in r["test"]["buckets"]])
        r["validation"] = _number(r["validation"])
        out.append(r)
    return out
