"""Noisy GD (the default item step) against SSP across a family of synthetic generators
(issues 28 and 29): which solver should the defaults pick, by n̂·ε?

For every generator of :data:`FAMILY` (the project's topic generator, :func:`dpmt.data.synthetic.
make_synthetic`, with different planted rank, Dirichlet concentration, popularity exponent,
user-activity spread, popularity-only share and size; and the logistic-link generator,
:mod:`dpmt.data.synthetic_logistic`, on which no rule was fitted) and ε in (1, 5, 20): the defaults
(``TrainConfig()``: noisy GD with Adam, weights and λ by their rules) and SSP candidates,
held-out users (Liang et al. 2018), validation and test Recall@20, seconds per fit, and n̂·ε
of the run. Reproducible noise (``noise_seed``): an experiment; its models are not published.

    python experiments/solver_rule.py --out solver_rule.json [--only A B] [--seeds 0]
    python experiments/solver_rule.py --large --epsilons 5 10 [--candidates ...]
    python experiments/solver_rule.py --table solver_rule.json [more.json ...]
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks import family
from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.train.evaluate import evaluate, private_popularity_metrics
from dpmt.train.loop import fit
from dpmt.train.rundir import prepare_data

# the family of the quality benchmark (`dpmt quality --family`): one definition
FAMILY = dict(family.FAMILY)
#: 100k-user and larger members (``--large``), reaching n̂·ε ≈ 5·10⁵–10⁶ at ε = 5–10 with δ = 1e-6
#: (SSP's plan is refused at ε = 100 there: the sampler's extra δ grows with ε). Kept apart
#: from FAMILY so that the scripts that replay FAMILY run what they report.
LARGE = {
    "I topics 100k": ("synthetic:users=100000,items=8000,interactions=5000000,alpha=1.1,"
                      "rank=32,seed=19"),
    "J logistic 100k": ("logistic-synthetic:users=100000,items=8000,interactions=5000000,"
                        "rank=24,alpha=1.2,sigma=1.3,signal=2.5,seed=20"),
    "K ML-20M-like": "synthetic:like=ml-20m",     # the quality benchmark's (138k users)
    # fresh members (2026-12-07) to test the solver rule of dpmt.train.defaults on data it was
    # not fitted on: a large catalogue with few raters per item, and a small one with many
    "N logistic 20k items": ("logistic-synthetic:users=120000,items=20000,interactions=6000000,"
                             "rank=24,alpha=1.1,sigma=1.3,signal=2.5,seed=21"),
    "P topics 4k items": ("synthetic:users=80000,items=4000,interactions=3600000,alpha=1.0,"
                          "rank=16,seed=22"),
    # the quality benchmark's 50k-user synthetic (QUALITY.md), on this script's protocol
    "S synth50k": "synthetic:users=50000,items=5000,interactions=3000000",
}
CANDIDATES = {
    "defaults": {},
    # noisy GD chosen by the user: the defaults before the solver rule (dpmt.train.defaults)
    "gd": dict(solver="gd"),
    "ssp-d32-l10-it2": dict(solver="ssp", dim=32, reg=10.0, iterations=2),
    "ssp-d32-l20-it3": dict(solver="ssp", dim=32, reg=20.0, iterations=3),
    # SSP at the defaults' 4 sweeps (the plan noisy GD is calibrated for)
    "ssp-d32-l20-it4": dict(solver="ssp", dim=32, reg=20.0, iterations=4),
    "ssp-d32-l30-it4": dict(solver="ssp", dim=32, reg=30.0, iterations=4),
    "ssp-d32-l10-it3": dict(solver="ssp", dim=32, reg=10.0, iterations=3),
    "ssp-d64-l20-it3": dict(solver="ssp", dim=64, reg=20.0, iterations=3),
    "ssp-d64-l20-it4": dict(solver="ssp", dim=64, reg=20.0, iterations=4),
    # the defaults with a larger ridge (the λ rule gives noisy GD λ = 3 from n̂·ε = 3·10⁴)
    "gd-l1": dict(reg=1.0),
    "gd-l10": dict(reg=10.0),
    "gd-l20": dict(reg=20.0),
    # cheaper noisy GD (issue 29: the default path's cost is its 20 steps per sweep)
    "gd-s10-lr02": dict(gd=dict(steps=10, learning_rate=0.02)),
    "gd-s10": dict(gd=dict(steps=10)),
    "gd-s5-lr04": dict(gd=dict(steps=5, learning_rate=0.04)),
    "gd-s8-lr025": dict(gd=dict(steps=8, learning_rate=0.025)),
    "gd-s6-lr033": dict(gd=dict(steps=6, learning_rate=0.2 / 6)),
    "gd-it3": dict(iterations=3),
    # why the defaults fall with ε on some generators (issue 28): one rule at a time undone
    "gd-uniform": dict(weights="uniform"),
    "gd-eta0": dict(popularity_prior=0.0),
    "gd-s20-lr01": dict(gd=dict(steps=20, learning_rate=0.01)),
    "gd-it2": dict(iterations=2),
    "gd-d16": dict(dim=16),
    "als": dict(private=False),          # the non-private ALS at the defaults' d and λ
    "gd-eta05": dict(popularity_prior=0.5),
    "gd-eta1": dict(popularity_prior=1.0),
}
#: what a run compares unless --candidates says otherwise
DEFAULT_CANDIDATES = ("defaults", "ssp-d32-l10-it2", "ssp-d32-l20-it3")
EX = ExecutionConfig(progress=False)


def generator_parser(doc: str) -> argparse.ArgumentParser:
    """The options the experiments run on chosen generators share (ssp_prior, choice_users):
    --out, --only, --epsilons (required) and --seeds; ``doc``'s first paragraph describes."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="+", required=True, help="generator keys (first letter)")
    ap.add_argument("--epsilons", type=float, nargs="+", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    return ap


def generator_splits(only, seeds):
    """``(name, seed, base config, split)`` of each chosen generator (FAMILY and LARGE, by
    first letter) and seed: 2,000 held-out users, δ = 1e-6, the seed as data and noise seed."""
    for name, spec in {**FAMILY, **LARGE}.items():
        if name[0] not in only:
            continue
        for seed in seeds:
            base = TrainConfig(data=dict(dataset=spec, split="heldout-users", heldout_users=2000,
                                         seed=seed), privacy=dict(delta=1e-6, noise_seed=seed))
            yield name, seed, base, prepare_data(base, EX)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="solver_rule.json")
    ap.add_argument("--only", nargs="*", default=None, help="generator keys (first letter)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 5.0, 20.0])
    ap.add_argument("--candidates", nargs="+", default=list(DEFAULT_CANDIDATES),
                    choices=list(CANDIDATES))
    ap.add_argument("--large", action="store_true",
                    help="run the larger generators of LARGE instead of FAMILY")
    ap.add_argument("--table", nargs="+", default=None, metavar="JSON",
                    help="print the markdown table of earlier runs and exit")
    args = ap.parse_args(argv)
    if args.table:
        rows = [r for path in args.table for r in json.load(open(path))]
        print(table(rows))
        return 0
    generators = LARGE if args.large else FAMILY
    unknown = set(args.only or ()) - {name[0] for name in generators}
    if unknown:
        ap.error(f"--only {' '.join(sorted(unknown))}: no such generator "
                 f"{'in LARGE (drop --large for FAMILY)' if args.large else 'in FAMILY (--large for LARGE)'}"
                 f"; the keys are {' '.join(name[0] for name in generators)}")
    rows = []
    for name, spec in generators.items():
        if args.only and name[0] not in args.only:
            continue
        for seed in args.seeds:
            base = TrainConfig(data=dict(dataset=spec, split="heldout-users", heldout_users=2000,
                                         seed=seed), privacy=dict(delta=1e-6, noise_seed=seed))
            split = prepare_data(base, EX)
            counts = split.train.item_counts()      # exact popularity, for scale
            pop = {part: private_popularity_metrics(counts, split.train, getattr(split, part),
                                                    {}, ks=(20,))["overall"]["recall@20"]
                   for part in ("validation", "test")}
            rows.append(dict(generator=name, spec=spec, seed=seed, epsilon=None,
                             candidate="popularity (exact)", **pop))
            print(json.dumps(rows[-1]), flush=True)
            _save(rows, args.out)
            for eps in args.epsilons:
                for cand in args.candidates:
                    kv = CANDIDATES[cand]
                    cfg = base.replace(**route({**kv, "epsilon": eps}))
                    t0 = time.time()
                    m = fit(split.train, cfg, execution=EX)
                    sec = time.time() - t0
                    row = dict(generator=name, spec=spec, seed=seed, epsilon=eps,
                               candidate=cand, solver=m.config.solver,
                               weights=m.config.weights, reg=m.config.reg,
                               eta=m.config.popularity_prior,
                               n_eps=split.train.n_users * eps,   # n̂ ≈ n (noise ≪ n)
                               **scores(m, split), seconds=sec)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    _save(rows, args.out)
    return 0


def scores(model, split) -> dict:
    """Validation and test Recall@20 of ``model`` on ``split``, and test per popularity
    bucket (tail first)."""
    va = evaluate(model, split.train, split.validation, ks=(20,))
    te = evaluate(model, split.train, split.test, ks=(20,))
    return dict(validation=va["overall"]["recall@20"], test=te["overall"]["recall@20"],
                test_buckets=[b["recall@20"] for b in te.get("buckets", [])])


def _save(rows: list[dict], path: str) -> None:
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)


def table(rows: list[dict]) -> str:
    """Validation / test Recall@20 per (generator, ε): every candidate, which one validation
    picks, the defaults' gap to it on test, and whether the defaults rise with ε."""
    pop = {r["generator"]: r for r in rows if r["epsilon"] is None}
    rows = [r for r in rows if r["epsilon"] is not None]
    cands = list(dict.fromkeys(r["candidate"] for r in rows))
    out = ["| generator | ε | n·ε | popularity val / test | " + " | ".join(f"{c} val / test" for c in cands)
           + " | best on val | defaults − best (test) |",
           "|---|---:|---:|---|" + "---|" * len(cands) + "---|---:|"]
    for gen in dict.fromkeys(r["generator"] for r in rows):
        for eps in sorted({r["epsilon"] for r in rows if r["generator"] == gen}):
            cell = {r["candidate"]: r for r in rows
                    if r["generator"] == gen and r["epsilon"] == eps}
            best = max(cell.values(), key=lambda r: r["validation"])
            gap = cell["defaults"]["test"] - best["test"] if "defaults" in cell else float("nan")
            p = pop.get(gen)
            out.append(f"| {gen} | {eps:g} | {next(iter(cell.values()))['n_eps']:.3g} | "
                       + (f"{p['validation']:.4f} / {p['test']:.4f} | " if p else "– | ")
                       + " | ".join(f"{cell[c]['validation']:.4f} / {cell[c]['test']:.4f}"
                                    if c in cell else "–" for c in cands)
                       + f" | {best['candidate']} | {gap:+.4f} |")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
