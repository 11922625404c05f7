"""One default private fit (ε = 5, noise_seed 1, per-user split seed 0), compilation included,
in a fresh process per setting of the layout's bucket cost: the wall time, the XLA backend
compile time, the buckets of the two layouts, test Recall@20 and the released V.

    python experiments/bucket_cost.py            # ML-100K d = 32 / 128, 1M synthetic d = 64
    python experiments/bucket_cost.py --one 0 ml-100k 32     # one cell (what the driver runs)

The first form writes experiments/bucket_cost.json. ``cost 0`` is the layout before
``BUCKET_COST_D2`` (as many buckets as the power-of-two grid fills)."""

import argparse
import json
import os
import subprocess
import sys
import time

CELLS = [("ml-100k", 32), ("ml-100k", 128),
         ("synthetic:users=20000,items=3000,interactions=1000000,seed=0", 64)]


def one(cost: float | None, data: str, dim: int) -> dict:
    import collections

    import jax
    import jax.monitoring
    import numpy as np

    comp = collections.Counter()
    jax.monitoring.register_event_duration_secs_listener(
        lambda n, s, **k: comp.__setitem__(n, comp[n] + s))
    import dpmt.solvers.boundaries as bounds
    import dpmt.solvers.layout as L
    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.data import load, per_user_split
    from dpmt.train import fit

    default = bounds.BUCKET_COST_D2
    if cost is not None:
        bounds.BUCKET_COST_D2 = cost       # what build_layout's default cost reads
    split = per_user_split(load(data), seed=0)
    cfg = TrainConfig(dim=dim, privacy=dict(epsilon=5.0, noise_seed=1))
    buckets = [len(L.task_layout(split.train, dim=dim).buckets),
               len(L.user_layout(split.train, dim=dim).buckets)]
    t = time.perf_counter()
    res = fit(split.train, cfg, test=split.test, execution=ExecutionConfig(progress=False))
    wall = time.perf_counter() - t
    return dict(bucket_cost_d2=bounds.BUCKET_COST_D2, default=bounds.BUCKET_COST_D2 == default,
                data=data, dim=dim, buckets_items_users=buckets, wall_s=round(wall, 2),
                compile_s=round(comp["/jax/core/compile/backend_compile_duration"], 2),
                recall20=res.metrics["overall"]["recall@20"],
                V=np.asarray(res.item_embeddings).tolist())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--one", nargs=3, metavar=("COST", "DATA", "DIM"))
    ap.add_argument("--out", default="experiments/bucket_cost.json")
    a = ap.parse_args()
    if a.one:
        c = None if a.one[0] == "default" else float(a.one[0])
        print("RESULT" + json.dumps(one(c, a.one[1], int(a.one[2]))))
        return
    import numpy as np

    rows = []
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    for data, dim in CELLS:
        runs = {}
        for cost in ("0", "default"):
            p = subprocess.run([sys.executable, "-m", "experiments.bucket_cost", "--one", cost,
                                data, str(dim)], env=env, capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-2000:]
            runs[cost] = json.loads([x for x in p.stdout.splitlines()
                                     if x.startswith("RESULT")][-1][6:])
        dV = float(np.abs(np.asarray(runs["0"].pop("V")) - np.asarray(runs["default"].pop("V"))).max())
        row = dict(data=data, dim=dim, grid=runs["0"], default=runs["default"], max_abs_dV=dV)
        rows.append(row)
        g, d = runs["0"], runs["default"]
        print(f"{data[:40]:40s} d={dim:3d} buckets {g['buckets_items_users']} -> "
              f"{d['buckets_items_users']}  wall {g['wall_s']:.1f} -> {d['wall_s']:.1f} s  "
              f"compile {g['compile_s']:.1f} -> {d['compile_s']:.1f} s  recall "
              f"{g['recall20']:.4f} / {d['recall20']:.4f}  max|dV| {dV:.1e}", flush=True)
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
