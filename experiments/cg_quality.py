"""Does the conjugate-gradient solve cost Recall@20? (issue 11: adopt a faster solve only if the
quality benchmark shows equal or better Recall@20.)

On the quality benchmark's own datasets, splits, seeds, budgets and grids
(:func:`benchmarks.quality.datasets`, the cells of its "adaptive, SSP shift" rows and its ALS
rows), each cell is tuned three ways with :func:`benchmarks.quality.tune_cell` (best of the grid
and of the popularity-prior η on validation, reported on test):

* ``shift`` — QUALITY.md's row: checked Cholesky item solve, exact user step;
* ``cg-items`` — ``item_solve="cg"``: the same released systems by ``cg_steps`` warm-started
  CG steps, exact user step;
* ``cg-both`` — also ``user_solve="cg"``.

The ALS rows (non-private) compare the exact solves with ``cg-both`` and with ``cg-both-3``
(3 CG steps, as implicit's CG solver takes). Prints one table of
test Recall@20 (mean over seeds; overall and per popularity bucket) and writes the JSON::

    python experiments/cg_quality.py [--quick] [--cg-steps 8] [--out cg_quality.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from benchmarks.quality import datasets, tune_cell
from dpmt.config import ExecutionConfig, NonPrivate, route
from dpmt.train.rundir import prepare_data

VARIANTS = {"shift": dict(item_solve="shift", user_solve="exact"),
            "cg-items": dict(item_solve="cg", user_solve="exact"),
            "cg-both": dict(item_solve="cg", user_solve="cg"),
            # the ALS cells only: implicit's CG step count (the side by side in BENCHMARKS.md)
            "cg-both-3": dict(item_solve="cg", user_solve="cg", cg_steps=3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="dpmt quality --quick's dataset only")
    p.add_argument("--cg-steps", type=int, default=None,
                   help="CG steps (default: TrainConfig's)")
    p.add_argument("--datasets", type=int, nargs="*", default=None,
                   help="indices into the quality datasets (default: those with SSP rows)")
    p.add_argument("--out", default="cg_quality.json")
    args = p.parse_args(argv)
    ex = ExecutionConfig(progress=False)
    rows = []
    dsets = datasets(args.quick)
    chosen = args.datasets if args.datasets is not None else \
        [i for i, d in enumerate(dsets) if d.solve_grid]
    for i in chosen:
        ds = dsets[i]
        for seed in ds.seeds:
            base = ds.base.replace(data=dict(seed=seed))
            if args.cg_steps is not None:
                base = base.replace(cg_steps=args.cg_steps)
            split = prepare_data(base, ex)
            cells = [("ALS", math.inf, [base.replace(**route({"solver": "ssp", **g}),
                                                     privacy=NonPrivate())
                                        for g in ds.als_grid])]
            cells += [("adaptive SSP", eps, [base.replace(**route({
                "weights": "adaptive", "solver": "ssp", **g, "epsilon": eps}))
                for g in ds.solve_grid]) for eps in ds.epsilons]
            for method, eps, cfgs in cells:
                for name, kw in VARIANTS.items():
                    if name == ("cg-items" if method == "ALS" else "cg-both-3"):
                        continue
                    t = time.time()
                    cell = tune_cell(split.train, split, [c.replace(**route(kw)) for c in cfgs], ex)
                    rows.append({"dataset": ds.name, "seed": seed, "method": method,
                                 "epsilon": eps, "variant": name,
                                 "cg_steps": kw.get("cg_steps", base.item_cg_steps),
                                 "test": cell["test"],
                                 "validation": cell["validation"], "chosen": cell["chosen"],
                                 "seconds": time.time() - t})
                    print(f"{ds.name[:28]:<28} seed {seed} {method:<12} ε={eps:<4g} "
                          f"{name:<8} test {cell['test']['overall']:.4f} "
                          f"({time.time() - t:.0f}s)", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1, default=str)
    print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """Markdown: test Recall@20 per (dataset, method, ε, variant), mean over seeds."""
    keys = []
    for r in rows:
        k = (r["dataset"], r["method"], r["epsilon"])
        if k not in keys:
            keys.append(k)
    names = list(VARIANTS)
    out = ["| data | method | ε | " + " | ".join(names) + " | cg-both − shift (buckets) |",
           "|---|---|---|" + "---:|" * len(names) + "---|"]
    for k in keys:
        by = {n: [r for r in rows if (r["dataset"], r["method"], r["epsilon"]) == k
                  and r["variant"] == n] for n in names}
        mean = {n: float(np.mean([r["test"]["overall"] for r in v])) if v else None
                for n, v in by.items()}
        bk = {n: np.mean([r["test"]["buckets"] for r in v], axis=0) if v else None
              for n, v in by.items()}
        diff = ", ".join(f"{x:+.3f}" for x in bk["cg-both"] - bk["shift"])
        cells = " | ".join("–" if mean[n] is None else f"{mean[n]:.4f}" for n in names)
        out.append(f"| {k[0]} | {k[1]} | {k[2]:g} | {cells} | "
                   f"{mean['cg-both'] - mean['shift']:+.4f} ({diff}) |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
