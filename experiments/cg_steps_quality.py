#!/usr/bin/env python
"""How many conjugate-gradient steps does the user step need? (issue 29: fewer steps are
faster; adopted only if the quality benchmark shows the same Recall@20.)

``user_cg_steps`` sets the steps of the CG user step (``user_solve="cg"``, warm-started from
the previous iteration's U; the first iteration is exact) of every pipeline; ``cg_steps``
(left at its default) those of the CG item systems. On the quality benchmark's datasets,
splits and seeds (:func:`benchmarks.quality.datasets`), each cell is tuned as ``dpmt
quality`` tunes it (:func:`benchmarks.quality.tune_cell`: best of the grid and of the
popularity prior η on validation, reported on test) once per step count:

* ``defaults`` — ``TrainConfig()`` at each ε (noisy GD, the CG user step), η as fit chose it,
  as ``dpmt quality``'s "dpmt defaults" rows;
* ``ALS`` — the non-private ALS grid with CG item and user solves;
* ``adaptive SSP cg`` — the item-solve comparison's grid with ``item_solve="cg"``.

Prints one table (test Recall@20, mean over seeds, and the largest per-bucket change against
the first step count) and writes the rows as JSON::

    .venv/bin/python experiments/cg_steps_quality.py --steps 8 3 [--datasets 0 1 2] \\
        [--out experiments/cg_steps_quality.json]
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


#: --vary → the TrainConfig field --steps sets
FIELDS = {"user": "user_cg_steps", "item": "cg_steps"}


def cells(ds, base):
    """(method, ε, configs, tune η) of one dataset and seed."""
    out = [("defaults", eps, [base.replace(privacy=dict(epsilon=eps))], False)
           for eps in ds.epsilons]
    out.append(("ALS", math.inf, [base.replace(**route({"solver": "ssp", **g,
                                                        "item_solve": "cg"}),
                                               privacy=NonPrivate()) for g in ds.als_grid],
                True))
    grid = ds.solve_grid or (dict(dim=32, reg=10.0),)
    out += [("adaptive SSP cg", eps, [base.replace(**route({
        "weights": "adaptive", "solver": "ssp", **g, "item_solve": "cg", "epsilon": eps}))
        for g in grid], True) for eps in ds.epsilons]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, nargs="+", default=[8, 3])
    p.add_argument("--datasets", type=int, nargs="*", default=[0, 1, 2],
                   help="indices into benchmarks.quality.datasets(False)")
    p.add_argument("--seeds", type=int, nargs="*", default=None,
                   help="seeds (default: each dataset's)")
    p.add_argument("--out", default="experiments/cg_steps_quality.json")
    p.add_argument("--vary", choices=("user", "item"), default="user",
                   help="which count --steps sets: user_cg_steps (the user step) or cg_steps "
                        "(the item systems; the other left at its default)")
    p.add_argument("--methods", nargs="*", default=None,
                   help="only these cells (defaults, ALS, 'adaptive SSP cg')")
    args = p.parse_args(argv)
    field = FIELDS[args.vary]
    ex = ExecutionConfig(progress=False)
    rows = []
    dsets = datasets(False)
    for i in args.datasets:
        ds = dsets[i]
        for seed in args.seeds or ds.seeds:
            # reproducible noise on purpose, as in dpmt quality: nothing here is published
            base = ds.base.replace(data=dict(seed=seed), privacy=dict(noise_seed=seed),
                                   user_solve="cg")
            split = prepare_data(base, ex)
            for method, eps, cfgs, tune_eta in cells(ds, base):
                if args.methods and method not in args.methods:
                    continue
                for steps in args.steps:
                    t = time.time()
                    cell = tune_cell(split.train, split, [c.replace(**{field: steps})
                                                          for c in cfgs], ex,
                                     tune_eta=tune_eta)
                    rows.append({"dataset": ds.name, "seed": seed, "method": method,
                                 "epsilon": eps, field: steps, "test": cell["test"],
                                 "validation": cell["validation"], "chosen": cell["chosen"],
                                 "seconds": time.time() - t})
                    print(f"{ds.name[:24]:<24} seed {seed} {method:<15} ε={eps:<4g} "
                          f"{args.vary} steps {steps}: test {cell['test']['overall']:.4f} "
                          f"({time.time() - t:.0f}s)", file=sys.stderr, flush=True)
                    with open(args.out, "w") as f:       # after every cell: a long run
                        json.dump(rows, f, indent=1, default=str)
    print(table(rows, args.steps, field))
    return 0


def table(rows: list[dict], steps: list[int], field: str = "user_cg_steps") -> str:
    """Markdown: test Recall@20 per (dataset, method, ε) and step count, mean over seeds."""
    keys = list(dict.fromkeys((r["dataset"], r["method"], r["epsilon"]) for r in rows))
    ref = steps[0]
    what = "user steps" if field == "user_cg_steps" else "item steps"
    out = ["| data | method | ε | " + " | ".join(f"{s} {what}" for s in steps) +
           " | largest bucket change vs " + f"{ref} |",
           "|---|---|---|" + "---:|" * len(steps) + "---:|"]
    for k in keys:
        by = {s: [r for r in rows if (r["dataset"], r["method"], r["epsilon"]) == k
                  and r.get(field) == s] for s in steps}
        mean = {s: float(np.mean([r["test"]["overall"] for r in v])) if v else None
                for s, v in by.items()}
        bk = {s: np.mean([r["test"]["buckets"] for r in v], axis=0) if v else None
              for s, v in by.items()}
        worst = max((float(np.max(np.abs(bk[s] - bk[ref]))) for s in steps[1:]
                     if bk[s] is not None and bk[ref] is not None), default=0.0)
        cells_ = " | ".join("–" if mean[s] is None else f"{mean[s]:.4f}" for s in steps)
        out.append(f"| {k[0]} | {k[1]} | {k[2]:g} | {cells_} | {worst:.4f} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
