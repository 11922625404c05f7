"""Rating-task defaults (issue 28): ML-100K, random 80/10/10 split, RMSE on validation for a
small grid at ε = 1, 5, 20 and without privacy; the best cell per ε then reported on test.

    python experiments/rating_sweep.py [--out rating_sweep.json] [--seeds 0]

The user bias b_j (``user_bias``, on by default) is in every cell; the grid varies the user
clip C, the bias shrinkage λ_b, the dimension d and whether item offsets are released.
Reproducible noise (``noise_seed``): an experiment, its models are never published.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.train.evaluate import evaluate_ratings
from dpmt.train.loop import fit
from dpmt.train.rundir import prepare_data

GRID = {"user_clip": (0.1, 0.3, 1.0), "user_bias_reg": (2.0, 5.0, 15.0), "dim": (8, 32),
        "item_offsets": (True, False)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="rating_sweep.json")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 5.0, 20.0, 0.0],
                    help="0 = no privacy")
    args = ap.parse_args(argv)
    ex = ExecutionConfig(progress=False)
    rows = []
    for eps in args.epsilons:
        for values in itertools.product(*GRID.values()):
            cell = dict(zip(GRID, values))
            res = {}
            for s in args.seeds:
                cfg = TrainConfig(**route({"task": "rating", **cell, "split": "random", "seed": s,
                                           "private": eps > 0, "noise_seed": s,
                                           "epsilon": eps if eps > 0 else 5.0}))
                split = prepare_data(cfg, ex)
                t0 = time.time()
                m = fit(split.train, cfg, test=split.validation, execution=ex)
                res.setdefault("validation", []).append(m.metrics["overall"]["rmse"])
                test = evaluate_ratings(m, split.train, split.test)
                res.setdefault("test", []).append(test["overall"]["rmse"])
                res.setdefault("seconds", []).append(time.time() - t0)
            row = {"epsilon": eps, **cell,
                   **{k: sum(v) / len(v) for k, v in res.items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    best = {}
    for r in rows:
        b = best.get(r["epsilon"])
        if b is None or r["validation"] < b["validation"]:
            best[r["epsilon"]] = r
    print("BEST " + json.dumps(best), flush=True)
    with open(args.out, "w") as f:
        json.dump({"rows": rows, "best": best}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
