"""The quality benchmark: ``dpmt quality`` regenerates QUALITY.md.

Protocol (the held-out-users protocol of Liang et al. 2018, as in Krichene et al. 2023):
ratings > 3.5 are positives; every method's hyper-parameters are chosen on the *validation*
users' Recall@20 and the chosen configuration is reported on the *test* users (overall and
per popularity bucket, B1 = tail), per ε, with seeds where the test set is small.

* Methods: popularity (exact counts, not private), private popularity (the run's released
  counts — free post-processing), non-private ALS (tuned), non-private EASE (Steck 2019,
  λ tuned; catalogues up to 20,000 items), and the private weightings
  uniform / tail / adaptive (eq. 11) / adaptive-normalized, each tuned over a small grid of
  solvers and model sizes, plus ``defaults`` (``TrainConfig()`` untouched: what a new user
  gets). The popularity-prior weight η (:meth:`dpmt.model.Model.item_prior`) is
  post-processing, so every fit is scored at every η of :data:`ETAS` without training again.
* Selection is *not* charged here (as in the literature); ``dpmt tune --selection private``
  is the charged version. Every private fit spends the cell's full (ε, δ).
* Ratings (:func:`run_ratings`, issue 28): ML-100K and an ML-10M-like explicit synthetic
  (:mod:`dpmt.data.synthetic_ratings`, planted biases + low rank + noise), ratings split
  80/10/10 at random; test RMSE of the exact global mean, dpmt non-private and private at
  each ε with the defaults of ``--task rating`` (untuned), the planted model itself on the
  synthetic, and per ε the reference notebook's gap ratio (private − non-private) /
  (global mean − non-private): 0 is as good as non-private, 1 no better than the mean.

Everything the command writes is measured in the run that writes the report; only the
report's hand-written tail (:data:`benchmarks.quality_report.HAND_WRITTEN`: what was tried
elsewhere and not kept, with its commands) is kept from the previous file. The report
itself is built in :mod:`benchmarks.quality_report`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

from benchmarks import family
from benchmarks.quality_report import K, METRIC, load_rating_rows, load_rows, write_report
from dpmt.baselines import MAX_EASE_ITEMS
from dpmt.config import ExecutionConfig, NonPrivate, TrainConfig, route
from dpmt.data.synthetic_ratings import EXPLICIT_PREFIX, QUICK_EXPLICIT_SPEC, is_explicit_spec
from dpmt.runtime import release_compiled_code

#: popularity-prior weights scored on every fit (post-processing of the released counts)
ETAS = (0.0, 0.5, 1.0, 2.0)

#: candidate grids: each private weighting is tuned over these (solver × size)
PRIVATE_GRID = (
    dict(),                                      # the defaults: noisy GD with Adam, d = 32
    # SSP as the reference runs it (Π(Â)); the shift solve is compared in its own rows
    dict(solver="ssp", dim=32, reg=10.0, item_solve="project", iterations=2),
    dict(solver="ssp", dim=16, reg=3.0, item_solve="project", iterations=2),
    dict(gd=dict(learning_rate=0.03)),
    dict(iterations=2),                          # the sweep count before 4 became the default
    # noisy GD as it was before Adam (plain SGD, the old defaults)
    dict(dim=8, reg=1.0, iterations=2, gd=dict(optimizer="sgd", learning_rate=100.0, steps=10)),
)
# exact item solves (solver="ssp" without noise is ALS); d = 16, λ = 5 is dpmt compare's ALS
# item_solve="shift" without noise: exact Cholesky solves, whatever the default item solve
# without the user clip (C bounds a private release's sensitivity; a non-private model has
# none): d = 64 / 128, λ = 5, α0 = 0.2 led a 48-point grid on ML-100K validation (issue 28:
# test 0.409 against C = 0.1's best 0.398, and EASE's 0.42)
ALS_GRID = (dict(solver="ssp", dim=64, reg=5.0, gravity=0.2, user_clip=100.0, iterations=10,
                 item_solve="shift"),
            dict(solver="ssp", dim=16, reg=5.0, iterations=6, item_solve="shift"),
            dict(solver="ssp", dim=64, reg=30.0, iterations=10, item_solve="shift"),
            dict(solver="ssp", dim=128, reg=5.0, gravity=0.2, user_clip=100.0, iterations=10,
                 item_solve="shift"))
#: EASE's ridge λ, chosen on validation (Steck 2019 used 500 on ML-20M)
EASE_REGS = (50.0, 100.0, 200.0, 500.0, 1000.0)
EASE = "EASE (non-private, tuned)"
WEIGHTINGS = ("uniform", "tail", "adaptive", "adaptive-normalized")
#: the SSP item solves compared on the solve grid (issue 11: adopted only at no Recall@20 cost)
SOLVES = ("project", "shift", "cg")


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One dataset of the benchmark: its base config, seeds, budgets and grids."""

    name: str
    base: TrainConfig
    seeds: tuple[int, ...]
    epsilons: tuple[float, ...]
    weightings: tuple[str, ...] = WEIGHTINGS
    private_grid: tuple[dict, ...] = PRIVATE_GRID
    als_grid: tuple[dict, ...] = ALS_GRID
    #: SSP grid of the item-solve comparison (adaptive weights, project vs shift); () = none
    solve_grid: tuple[dict, ...] = (dict(iterations=2), dict(dim=32, reg=10.0, iterations=2))
    #: EASE's λ grid (chosen on validation)
    ease_regs: tuple[float, ...] = EASE_REGS


def datasets(quick: bool) -> list[Dataset]:
    """The benchmark's datasets (``quick``: ML-100K held-out users, one seed, two grid
    points — about 2 minutes on 2 cores)."""
    ml = TrainConfig(data=dict(dataset="ml-100k", split="heldout-users", heldout_users=100),
                     privacy=dict(delta=1e-5))
    if quick:
        return [Dataset("ML-100K held-out users (100 + 100)", ml, (0,), (1.0, 5.0, 20.0),
                        private_grid=PRIVATE_GRID[:2], als_grid=ALS_GRID[:1],
                        solve_grid=(dict(dim=32, reg=10.0),))]
    synth = TrainConfig(data=dict(dataset="synthetic:users=50000,items=5000,interactions=3000000",
                                  split="heldout-users", heldout_users=5000),
                        privacy=dict(delta=1e-6))
    ml20 = TrainConfig(data=dict(dataset="synthetic:like=ml-20m", split="heldout-users",
                                 heldout_users=10_000), privacy=dict(delta=1e-6))
    return [
        Dataset("ML-100K held-out users (100 + 100)", ml, (0, 1, 2), (1.0, 5.0, 20.0)),
        Dataset("ML-100K per-user split (80/10/10)", ml.replace(data=dict(split="per-user")),
                (0, 1, 2), (1.0, 5.0, 20.0)),
        Dataset("Skewed synthetic, 50k users × 5k items × 3M (5k + 5k held out)", synth, (0,),
                (1.0, 5.0, 20.0),
                # noisy GD at λ = 10 led λ = 3 on validation here at ε = 5 and 20
                # (experiments/defaults_sweep.py synth50k-reg)
                private_grid=PRIVATE_GRID[:2] + (dict(reg=10.0),), als_grid=ALS_GRID,
                solve_grid=(dict(dim=32, reg=10.0),)),
        Dataset("ML-20M-like synthetic (138k users, 10k + 10k held out)", ml20, (0,), (5.0,),
                weightings=("uniform", "adaptive"), private_grid=PRIVATE_GRID[:1],
                # λ = 100 led λ = 10 / 30 / 300 here on validation (0.284 against 0.259 at
                # d = 32; a 20k-item data set needs a stronger ridge than ML-100K's λ = 5)
                als_grid=(dict(solver="ssp", dim=32, reg=10.0, iterations=4,
                               item_solve="shift"),
                          dict(solver="ssp", dim=32, reg=100.0, iterations=4,
                               item_solve="shift"),
                          dict(solver="ssp", dim=64, reg=100.0, iterations=6,
                               item_solve="shift")), solve_grid=(),
                # EASE's grid above 1000: on the grid to 1000 validation chose its top, and
                # λ = 2000 / 5000 led it (0.288 / 0.290 against 0.285); 4 minutes per λ here
                ease_regs=(1000.0, 2000.0, 5000.0, 10_000.0, 20_000.0)),
    ]


@dataclasses.dataclass(frozen=True)
class RatingDataset:
    """One dataset of the rating section: its ratings split 80/10/10 at random (the ML-10M
    protocol, split seed 1234 + ``seed``), every model at the defaults of ``--task rating``."""

    name: str
    dataset: str                       # a dpmt.data.load spec
    epsilons: tuple[float, ...] = (1.0, 5.0, 20.0)
    seed: int = 0


#: the rows of the rating section
GLOBAL_MEAN = "global mean (exact, not private)"
NONPRIVATE = "dpmt non-private (task=rating defaults)"
PRIVATE = "dpmt private (task=rating defaults)"
ORACLE = "planted model (exact, clipped)"


def rating_datasets(quick: bool) -> list[RatingDataset]:
    """ML-100K and the ML-10M-like explicit synthetic (``quick``: 5k users × 1k items ×
    200k ratings instead of 70k × 10k × 10M)."""
    syn = (RatingDataset("ML-10M-like explicit synthetic, 5k users × 1k items × 200k",
                         QUICK_EXPLICIT_SPEC) if quick else
           RatingDataset("ML-10M-like explicit synthetic, 70k users × 10k items × 10M",
                         EXPLICIT_PREFIX))
    return [RatingDataset("ML-100K ratings (random 80/10/10)", "ml-100k"), syn]


def gap_ratio(private: float, nonprivate: float, global_mean: float) -> float:
    """(private − non-private) / (global mean − non-private), the reference ML-10M
    notebook's measure of what privacy costs: 0 = the non-private RMSE, 1 = no better than
    the global mean. NaN when non-private is not better than the global mean (no scale)."""
    den = global_mean - nonprivate
    return (private - nonprivate) / den if den > 0 else math.nan


def _planted_rmse(spec: str, targets) -> float:
    """RMSE on ``targets`` of the planted model of an ``explicit-synthetic`` spec: what the
    data allows (its noise and half-star rounding)."""
    import numpy as np

    from dpmt.data.synthetic_ratings import explicit_synthetic_truth, parse_explicit_spec

    truth = explicit_synthetic_truth(**parse_explicit_spec(spec))
    pred = truth.predict(targets.user_ids[targets.user], targets.item_ids[targets.item])
    return float(np.sqrt(np.mean((pred - targets.value.astype(np.float64)) ** 2)))


def run_ratings(rd: RatingDataset, ex: ExecutionConfig, bar=None) -> list[dict]:
    """The rating rows of one dataset: test RMSE of the global mean, non-private, private per
    ε (with its gap ratio) and, on the synthetic, the planted model."""
    import numpy as np

    from dpmt.train.evaluate import evaluate_ratings, mean_rating_metrics
    from dpmt.train.loop import fit
    from dpmt.train.rundir import prepare_data

    base = TrainConfig(task="rating", data=dict(dataset=rd.dataset, split="random", seed=rd.seed),
                       privacy=dict(noise_seed=rd.seed))
    t = time.time()
    split = prepare_data(base, ex)
    train, test = split.train, split.test
    sizes = {"train": int(train.nnz), "test": int(test.targets.nnz),
             "users": int(train.n_users), "items": int(train.n_items)}
    rows: list[dict] = []

    def add(method, eps, rmse, seconds, spent, chosen="defaults", **extra):
        rows.append({"dataset": rd.name, "spec": rd.dataset, "method": method,
                     "epsilon": eps, "rmse": float(rmse), "epsilon_spent": spent,
                     "seconds": seconds, "chosen": chosen, **sizes, **extra})
        if bar is not None:
            bar.set_postfix_str(f"{method} ε={eps:g}: RMSE {rmse:.4f}")
            bar.update(1)

    mean = float(np.mean(train.value, dtype=np.float64))
    gm = mean_rating_metrics(mean, train, test, {"epsilon": math.inf})["overall"]["rmse"]
    add(GLOBAL_MEAN, math.inf, gm, time.time() - t, math.inf, chosen=f"μ={mean:.4f}")
    if is_explicit_spec(rd.dataset):
        t = time.time()
        add(ORACLE, math.inf, _planted_rmse(rd.dataset, test.targets), time.time() - t,
            math.inf, chosen="-")

    def fitted(cfg):
        t0 = time.time()
        release_compiled_code()
        model = fit(train, cfg, execution=ex)
        rmse = evaluate_ratings(model, train, test)["overall"]["rmse"]
        return model, rmse, time.time() - t0

    _, nonpriv, sec = fitted(base.replace(privacy=NonPrivate()))
    add(NONPRIVATE, math.inf, nonpriv, sec, math.inf, chosen="private=False")
    for eps in rd.epsilons:
        model, rmse, sec = fitted(base.replace(privacy=dict(epsilon=eps)))
        add(PRIVATE, eps, rmse, sec, float(model.epsilon), ratio=gap_ratio(rmse, nonpriv, gm))
    return rows


def n_rating_cells(rd: RatingDataset) -> int:
    return 2 + is_explicit_spec(rd.dataset) + len(rd.epsilons)


# -- one cell ------------------------------------------------------------------------------
def _scores_at_etas(model, train, es) -> dict[float, dict]:
    """Metrics of ``model`` on ``es`` at every η of :data:`ETAS` (post-processing)."""
    from dpmt.train.evaluate import evaluate

    out, cfg = {}, model.config
    for eta in ETAS:
        model.config = cfg.replace(popularity_prior=eta)
        out[eta] = evaluate(model, train, es, ks=(K,))
    model.config = cfg
    return out


def _entry(m: dict) -> dict:
    return {"overall": m["overall"][METRIC],
            "buckets": [b[METRIC] for b in m["buckets"]],
            # a random ranking's expected Recall@20 (k/|items|, per bucket k/|bucket|)
            "random": m["overall"].get(f"random_{METRIC}"),
            "bucket_random": [b.get(f"random_{METRIC}") for b in m["buckets"]],
            "users": m["overall"]["users"],
            # users with a target in each bucket: what a bucket's figure rests on
            "bucket_users": [b["users"] for b in m["buckets"]]}


def tune_cell(train, split, configs: list[TrainConfig], ex, tune_eta: bool = True) -> dict:
    """Fit every config, score each at every η of :data:`ETAS` (or only at the η fit()
    chose, ``tune_eta=False``) on validation, report the best on test."""
    from dpmt.train.evaluate import evaluate
    from dpmt.train.loop import fit

    t0 = time.time()
    best = None
    tried = []
    first = None
    for cfg in configs:
        release_compiled_code()          # hundreds of fits in one process: see its docstring
        model = fit(train, cfg, execution=ex)
        first = first or model
        scored = (_scores_at_etas(model, train, split.validation) if tune_eta else
                  {model.config.popularity_prior: evaluate(model, train, split.validation,
                                                           ks=(K,))})
        for eta, m in scored.items():
            v = m["overall"][METRIC]
            tried.append({"config": _short(cfg), "eta": eta, "validation": v})
            if best is None or v > best[0]:
                best = (v, eta, cfg, model)
    v, eta, cfg, model = best
    model.config = model.config.replace(popularity_prior=eta)
    test = evaluate(model, train, split.test, ks=(K,))
    return {"validation": v, "test": _entry(test), "chosen": _short(cfg) + f" η={eta:.3g}",
            "epsilon_spent": model.epsilon if cfg.private else math.inf,
            "seconds": time.time() - t0, "tried": tried, "_first": first}


def ease_cell(train, split, regs=EASE_REGS) -> dict:
    """EASE (Steck 2019, :mod:`dpmt.baselines`) with λ chosen on validation from ``regs``,
    reported on test: the strongest non-private baseline of the table."""
    from dpmt.baselines import ease_gram, ease_weights
    from dpmt.train.evaluate import ease_metrics

    t0 = time.time()
    G = ease_gram(train)
    tried, best = [], None
    for r in regs:
        # one m × m inverse per λ (minutes at 27k items): the best B is kept for the test
        B = ease_weights(train, r, G)
        tried.append((ease_metrics(train, split.validation, r, ks=(K,), weights=B)[
            "overall"][METRIC], r))
        if best is None or tried[-1] > best[0]:
            best = (tried[-1], B)
        del B
    (v, reg), B = best
    test = ease_metrics(train, split.test, reg, ks=(K,), weights=B)
    return {"validation": v, "test": _entry(test), "chosen": f"λ={reg:g}",
            "epsilon_spent": math.inf, "seconds": time.time() - t0,
            "tried": [{"config": f"λ={r:g}", "validation": x} for x, r in tried]}


def _short(cfg: TrainConfig) -> str:
    """The settings that differ from the defaults, in flag-like form."""
    base = TrainConfig()
    keep = ("dataset", "split", "heldout_users", "delta", "epsilon", "seed", "noise_seed",
            "weights", "popularity_prior", "cg_steps")
    out = [d.split(": ")[0] + "=" + d.split(" → ")[1].strip("'")
           for d in base.diff(cfg) if d.split(":")[0] not in keep]
    if cfg.item_cg_steps != cfg.replace(cg_steps=None).item_cg_steps:
        out.append(f"cg_steps={cfg.item_cg_steps}")    # not the rule's (8 private, 3 not)
    return " ".join(sorted(out)) or "defaults"


def run_dataset(ds: Dataset, ex: ExecutionConfig, bar=None) -> list[dict]:
    """Every (seed, ε, method) cell of one dataset: one row each."""
    from dpmt.train.evaluate import popularity_metrics, private_popularity_metrics
    from dpmt.train.rundir import prepare_data

    rows = []

    def add(method, seed, eps, cell):
        cell = {k: v for k, v in cell.items() if not k.startswith("_")}
        rows.append({"dataset": ds.name, "method": method, "seed": seed, "epsilon": eps,
                     **cell})
        if bar is not None:
            bar.set_postfix_str(f"{method} ε={eps:g}: {cell['test']['overall']:.3f}")
            bar.update(1)

    for seed in ds.seeds:
        # reproducible noise on purpose: a benchmark's models are never published
        base = ds.base.replace(data=dict(seed=seed), privacy=dict(noise_seed=seed))
        t = time.time()
        split = prepare_data(base, ex)
        train = split.train
        pop_t = popularity_metrics(train, split.test, ks=(K,))
        add("popularity (exact, not private)", seed, math.inf,
            {"validation": popularity_metrics(train, split.validation, ks=(K,))["overall"][
                METRIC], "test": _entry(pop_t), "chosen": "-", "seconds": time.time() - t,
             "epsilon_spent": math.inf})
        # ALS = exact item solves without noise (solver="ssp", private=False), whatever the
        # default solver is
        als = tune_cell(train, split, [base.replace(**route({"solver": "ssp", **g}),
                                                    privacy=NonPrivate())
                                       for g in ds.als_grid], ex)
        add("ALS (non-private, tuned)", seed, math.inf, als)
        if train.n_items <= MAX_EASE_ITEMS:
            add(EASE, seed, math.inf, ease_cell(train, split, ds.ease_regs))
        for eps in ds.epsilons:
            cell = tune_cell(train, split, [base.replace(privacy=dict(epsilon=eps))], ex,
                             tune_eta=False)
            add("dpmt defaults", seed, eps, cell)
            counts = cell["_first"].item_counts
            if counts is not None:
                pv = private_popularity_metrics(counts, train, split.validation, {}, ks=(K,))
                pt = private_popularity_metrics(counts, train, split.test, {}, ks=(K,))
                add("private popularity", seed, eps,
                    {"validation": pv["overall"][METRIC], "test": _entry(pt), "chosen": "-",
                     "seconds": 0.0, "epsilon_spent": cell["epsilon_spent"]})
            for w in ds.weightings:
                cfgs = [base.replace(**route({**g, "weights": w, "epsilon": eps}))
                        for g in ds.private_grid]
                add(w, seed, eps, tune_cell(train, split, cfgs, ex))
            for solve in SOLVES if ds.solve_grid else ():
                # issue 11: the eigh-free solve is adopted only if it costs no Recall@20
                cfgs = [base.replace(**route({"weights": "adaptive", "solver": "ssp", **g,
                                              "item_solve": solve, "epsilon": eps}))
                        for g in ds.solve_grid]
                add(f"adaptive, SSP {solve}", seed, eps, tune_cell(train, split, cfgs, ex))
    return rows


def n_cells(ds: Dataset) -> int:
    per_eps = 2 + len(ds.weightings) + (len(SOLVES) if ds.solve_grid else 0)
    return len(ds.seeds) * (3 + len(ds.epsilons) * per_eps)   # popularity, ALS, EASE

#: ``dpmt quality`` (an entry point of the ``dpmt.commands`` group, see pyproject.toml)
HELP = ("the quality benchmark: Recall@20 of every method, tuned on validation, reported on "
        "test, per ε and per popularity bucket; writes QUALITY.md")


def _partial(done: set[str], n_all: int) -> str:
    """The report's label while datasets are missing; a resumed run that fills the last gap
    is complete whatever the order its datasets ran in."""
    return "" if len(done) >= n_all else f" (partial: {len(done)} of {n_all} datasets)"


def main(args) -> int:
    """``dpmt quality [--quick] [--no-ratings] [--out DIR]``."""
    from tqdm.auto import tqdm

    from dpmt._io import check_output_path

    out = Path(args.out)
    check_output_path(out, "--out", folder=True)
    dsets = datasets(args.quick)
    rdsets = [] if args.no_ratings else rating_datasets(args.quick)
    ex = ExecutionConfig(progress=False, data_dir=args.data_dir)
    t0 = time.time()
    rows: list[dict] = []
    rating_rows: list[dict] = []
    done: set[str] = set()
    invocations = 1
    family_on = bool(getattr(args, "family", False))
    family_rows: list[dict] | None = None
    saved = out / "quality" / "quality.json"
    if args.resume and saved.is_file():
        # an interrupted run: its finished datasets are kept, their time counted
        prev = json.loads(saved.read_text(encoding="utf-8"))
        names = {d.name for d in dsets}
        rows = [r for r in load_rows(prev["rows"]) if r["dataset"] in names]
        rnames = {d.name for d in rdsets}
        rating_rows = [r for r in load_rating_rows(prev.get("rating_rows", []))
                       if r["dataset"] in rnames]
        done = {r["dataset"] for r in rows + rating_rows}
        if family_on and prev.get("family_rows"):
            family_rows = list(prev["family_rows"])
        t0 -= float(prev.get("seconds", 0.0))
        invocations = int(prev.get("invocations", 1)) + (
            len(done) < len(dsets) + len(rdsets)
            or (family_on and len(family.finished(family_rows or [])) < len(family.FAMILY)))
    # the generators still to train (an interrupted family run kept the ones it finished)
    family_todo = ([g for g in family.FAMILY if g not in family.finished(family_rows or [])]
                   if family_on else [])
    n_family = family.n_fits(family_todo) if family_todo else 0
    bar = None if args.quiet else tqdm(total=sum(n_cells(d) for d in dsets)
                                       + sum(n_rating_cells(d) for d in rdsets) + n_family,
                                       unit="cell", desc="quality")
    command = ("dpmt quality" + (" --quick" if args.quick else "")
               + (" --no-ratings" if args.no_ratings else "")
               + (" --family" if family_on else ""))
    n_all = len(dsets) + len(rdsets)
    text = None
    for d in dsets:
        if d.name in done:
            continue
        rows += run_dataset(d, ex, bar)
        done.add(d.name)
        # the report so far after every dataset: an interrupted run keeps what it measured
        text = write_report(rows, [x for x in dsets if x.name in done], out,
                            command + _partial(done, n_all), time.time() - t0,
                            invocations, rating_rows, family_rows)
    for d in rdsets:
        if d.name in done:
            continue
        rating_rows += run_ratings(d, ex, bar)
        done.add(d.name)
        text = write_report(rows, dsets, out, command + _partial(done, n_all), time.time() - t0,
                            invocations, rating_rows, family_rows)
    if family_todo:
        def save_family(part: list[dict]) -> None:
            n_done = len(family.finished(part))
            label = "" if n_done >= len(family.FAMILY) else (
                f" (partial: {n_done} of {len(family.FAMILY)} family generators)")
            write_report(rows, dsets, out, command + _partial(done, n_all) + label,
                         time.time() - t0, invocations, rating_rows, part)

        family_rows = family.run_family(ex, bar=bar, rows=family_rows, save=save_family)
        text = None
    if bar is not None:
        bar.close()
    if text is None:              # after the family, or --resume of a run that had finished
        text = write_report(rows, dsets, out, command, time.time() - t0, invocations,
                            rating_rows, family_rows)
    print(text.split("\n## ")[1].join(["## ", ""]))      # the targets table
    if rating_rows:                                      # and the rating section
        print(text.split("\n## Ratings")[1].split("\n## ")[0].join(["## Ratings", ""]))
    print(f"wrote {out / 'QUALITY.md'}")
    return 0


def add_arguments(p) -> None:
    p.add_argument("--quick", action="store_true",
                   help="ML-100K held-out users only, one seed, two grid points per "
                        "weighting, and the rating section on ML-100K and a 5k-user "
                        "explicit synthetic (about 3 minutes on 2 cores)")
    p.add_argument("--no-ratings", action="store_true",
                   help="leave out the rating section (test RMSE on ML-100K and the "
                        "ML-10M-like explicit synthetic; about 1 minute with --quick)")
    p.add_argument("--out", default=".", metavar="DIR",
                   help="where QUALITY.md goes, its plots and raw rows in DIR/quality/ "
                        "(default: .)")
    p.add_argument("--data-dir", default="data", metavar="DIR",
                   help="where datasets are read or fetched (default: data)")
    p.add_argument("--family", action="store_true",
                   help="also the generator family (benchmarks/family.py: 8 synthetic "
                        "generators × ε 1, 5, 20 × 3 fits, about 25 minutes on 2 cores): the "
                        "defaults against a rule fitted leave-one-generator-out")
    p.add_argument("--resume", action="store_true",
                   help="keep the datasets (and, with --family, the family generators) "
                        "an interrupted run in --out finished (from "
                        "DIR/quality/quality.json) and run only the others")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


#: the entry point's ``run(args)``
run = main
