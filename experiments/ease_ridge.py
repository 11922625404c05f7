"""EASE's ridge λ above the quality benchmark's grid (issue 28: the non-private ceiling).

On the grid λ ∈ {50, …, 1000} of ``dpmt quality`` validation chose its top, λ = 1000, on
both synthetic datasets: a choice at the edge of a grid says the grid is too small. This
scores EASE (:mod:`dpmt.baselines`) at λ = 1000, 2000 and 5000 on the validation and test
users of each synthetic dataset of ``dpmt quality`` (seed 0, its split), so the grid can be
extended where it matters.

    python -m experiments.ease_ridge [--only synth50k|ml20m] [--json FILE]

Measured 2026-12-06 on 2 cores (seed 0; validation / test Recall@20):

* ML-20M-like (26,744 items, ~4 minutes per λ): 1000 0.2850 / 0.2838, 2000 0.2881 / 0.2871,
  5000 0.2900 / 0.2892: still rising, so ``dpmt quality`` searches {1000, …, 20000} there
  (it chose 10,000: validation 0.2913, test 0.2898; QUALITY.md).
* 50k × 5k synthetic: 1000 0.2980 / 0.3001, 2000 0.3007 / 0.3005, 5000 0.2997 / 0.2999:
  the peak lies between, worth +0.0004 on test; its grid is left as it is.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks import quality as q
from dpmt.baselines import ease_gram, ease_weights
from dpmt.config import ExecutionConfig
from dpmt.train.evaluate import ease_metrics
from dpmt.train.rundir import prepare_data

REGS = (1000.0, 2000.0, 5000.0)
DATASETS = {"synth50k": "Skewed synthetic", "ml20m": "ML-20M-like"}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(DATASETS), help="one dataset (default: both)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    ex = ExecutionConfig(progress=False)
    rows = []
    for key, prefix in DATASETS.items():
        if args.only and key != args.only:
            continue
        ds = next(d for d in q.datasets(False) if d.name.startswith(prefix))
        split = prepare_data(ds.base.replace(data=dict(seed=0), privacy=dict(noise_seed=0)), ex)
        G = ease_gram(split.train)
        for reg in REGS:
            t = time.time()
            B = ease_weights(split.train, reg, G)
            val, test = (ease_metrics(split.train, s, reg, ks=(q.K,), weights=B)["overall"][
                q.METRIC] for s in (split.validation, split.test))
            rows.append({"dataset": ds.name, "reg": reg, "validation": val, "test": test,
                         "seconds": time.time() - t})
            print(f"{key} λ={reg:g}: validation {val:.4f} test {test:.4f} "
                  f"({rows[-1]['seconds']:.0f} s)", flush=True)
            del B
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
