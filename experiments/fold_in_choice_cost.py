"""The one-off cost of the private fold-in choice, with the cut-off by numpy's partition and by
block maxima (:func:`dpmt.train.fold_in_choice._kth_largest`), interleaved in one process
(the shared 2-core VM's speed moves 20-30% between runs) and checked to give the same sums.

On the benchmark data of BENCHMARKS.md (50k users × 5k items, 2.4M ratings), a random V of
d = 64, the popularity prior of the default η: ``recall_sums`` for the 10⁴ users the default
scores (share 10⁴ / n), every round timing both cut-offs.

    python -m experiments.fold_in_choice_cost [--repeats 3] [--users 10000] [--items 5000]
                                              [--json FILE]

``--items 20000`` is the catalogue of ML-20M (the same users and ratings).

Measured: BENCHMARKS.md, "The fold-in choice's one-off cost".
"""

from __future__ import annotations

import argparse
import json
import time
from unittest import mock

import numpy as np

from dpmt.data import make_synthetic
from dpmt.train import fold_in_choice as fc

SPEC = dict(n_users=50_000, n_items=5_000, n_interactions=2_400_000, seed=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--users", type=int, default=fc.MAX_USERS)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--items", type=int, default=SPEC["n_items"])
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    spec = dict(SPEC, n_items=args.items)
    r = make_synthetic(**spec)
    rng = np.random.default_rng(0)
    V = (rng.normal(size=(r.n_items, args.dim)) / np.sqrt(args.dim)).astype(np.float32)
    counts = np.bincount(r.item, minlength=r.n_items).astype(np.float64)
    prior = 0.25 * np.log1p(counts) / np.log1p(counts).max()
    cands = fc.candidates(3.0, 0.5)
    share = args.users / r.n_users
    times = {"partition": [], "blocks": []}
    sums = {}
    for _ in range(args.repeats):
        for name, start in (("partition", 10**12), ("blocks", fc.BLOCKS_FROM_ITEMS)):
            with mock.patch.object(fc, "BLOCKS_FROM_ITEMS", start):
                t = time.perf_counter()
                sums[name] = fc.recall_sums(V, prior, 1.0, cands, r, key=7, share=share)
                times[name].append(time.perf_counter() - t)
    same = bool(np.array_equal(sums["partition"], sums["blocks"]))
    out = {"data": spec, "dim": args.dim, "users_scored_share": share,
           "candidates": len(cands), "seconds": times,
           "best": {k: min(v) for k, v in times.items()},
           "median": {k: float(np.median(v)) for k, v in times.items()},
           "same_sums": same, "sums": sums["blocks"].tolist()}
    print(json.dumps({k: out[k] for k in ("best", "median", "same_sums")}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
