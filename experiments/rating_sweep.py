"""Rating-task defaults (issue 28): validation and test RMSE of the grids behind
``dpmt.tasks.Rating.settings`` on ML-100K and the 5k-user explicit synthetic (random 80/10/10
split, split seed 1234 + 0, the protocol of ``dpmt quality``'s rating section).

    python experiments/rating_sweep.py [--datasets ml-100k explicit-quick]
        [--grids nonprivate clip-cap slopes factors defaults] [--seeds 0 1] [--out FILE]

Grids (each row: the mean over ``--seeds`` noise seeds of validation and test RMSE):

* ``nonprivate`` — biased ALS (the rating defaults without privacy: exact item solves, no
  gravity, no user clip, 15 sweeps), d × λ, and the bias model alone (``iterations=0``) with
  and without the user slopes;
* ``clip-cap`` — the private bias model (``iterations=0``: the whole budget on μ̂, n̂_i and
  the offsets' sums), label clip c × count cap k at ε = 1, 5, 20;
* ``slopes`` — the user slopes' ridge (dpmt.labels.SLOPE_REG) at the private defaults, and
  no slopes;
* ``factors`` — the private defaults with the factors forced on (2 planned sweeps of SSP)
  and forced off (dpmt.train.defaults.RATING_FACTORS_SCALE);
* ``defaults`` — the library's defaults of ``--task rating`` (what ``dpmt quality`` runs);
* ``large`` (not run by default; ``--datasets explicit-20k --grids large``) — a 20k-user
  explicit synthetic with 100 ratings per user: biased ALS against the bias model without
  privacy, and the factors forced on and off at ε = 5 and 20 (n̂·ε = 10⁵ and 4·10⁵).

A rule is chosen on validation (the JSON's ``best``: per dataset, grid and ε); test is
reported. Reproducible noise (``noise_seed``): an experiment, its models are never published.
The committed results: experiments/rating_sweep.json (the default grids, noise seeds 0 and
1) and experiments/rating_sweep_large.json (``--datasets explicit-20k --grids large
--seeds 0``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import time

import numpy as np

from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.data.synthetic_ratings import QUICK_EXPLICIT_SPEC

DATASETS = {"ml-100k": "ml-100k", "explicit-quick": QUICK_EXPLICIT_SPEC,
            # 100 ratings per user: the factors' check at n̂·ε up to 4·10⁵ (--grids large)
            "explicit-20k": "explicit-synthetic:users=20000,items=2000,ratings=2000000"}
EPSILONS = (1.0, 5.0, 20.0)


def _grid_nonprivate():
    for dim, reg in itertools.product((8, 32), (12.0, 16.0, 20.0, 25.0)):
        yield 0.0, dict(dim=dim, reg=reg), {}
    yield 0.0, dict(iterations=0), {}
    yield 0.0, dict(iterations=0, user_offsets="refit"), {}
    yield 0.0, dict(user_offsets="refit"), {}


def _grid_clip_cap():
    for eps, c, k in itertools.product(EPSILONS, (1.0, 1.5, 2.0), (50, 100, 200)):
        yield eps, dict(iterations=0, label_clip=c, count_cap=k), {}


def _grid_slopes():
    for eps in EPSILONS:
        for reg in (30.0, 100.0, 300.0):
            yield eps, {}, {"slope_reg": reg}
        yield eps, dict(user_offsets="refit"), {}


def _grid_factors():
    for eps in EPSILONS:
        yield eps, {}, {"factors": True}
        yield eps, {}, {"factors": False}


def _grid_large():
    yield 0.0, {}, {}
    yield 0.0, dict(iterations=0), {}
    for eps in (5.0, 20.0):
        yield eps, {}, {"factors": True}
        yield eps, {}, {"factors": False}


def _grid_defaults():
    for eps in (0.0, *EPSILONS):
        yield eps, {}, {}


GRIDS = {"nonprivate": _grid_nonprivate, "clip-cap": _grid_clip_cap, "slopes": _grid_slopes,
         "factors": _grid_factors, "defaults": _grid_defaults, "large": _grid_large}


def run_cell(split, dataset: str, eps: float, fields: dict, patches: dict, seeds) -> dict:
    """Validation and test RMSE of one cell, the mean over the noise seeds (one run without
    privacy). ``patches``: module constants of the rules, set for this cell only."""
    import dpmt.labels as labels
    import dpmt.train.defaults as defaults
    from dpmt.train.evaluate import evaluate_ratings
    from dpmt.train.loop import fit

    saved = labels.SLOPE_REG, defaults.RATING_FACTORS_SCALE
    if "slope_reg" in patches:
        labels.SLOPE_REG = patches["slope_reg"]
    if "factors" in patches:
        defaults.RATING_FACTORS_SCALE = 0.0 if patches["factors"] else math.inf
    ex = ExecutionConfig(progress=False)
    base = TrainConfig(task="rating", data=dict(dataset=dataset, split="random", seed=0))
    val, test, t0 = [], [], time.time()
    try:
        for s in (seeds if eps > 0 else seeds[:1]):
            cfg = (base.replace(**route(dict(private=False, **fields))) if eps == 0 else
                   base.replace(**route(dict(epsilon=eps, noise_seed=s, **fields))))
            m = fit(split.train, cfg, execution=ex)
            val.append(evaluate_ratings(m, split.train, split.validation)["overall"]["rmse"])
            test.append(evaluate_ratings(m, split.train, split.test)["overall"]["rmse"])
    finally:
        labels.SLOPE_REG, defaults.RATING_FACTORS_SCALE = saved
    return {"epsilon": eps, **fields, **patches, "validation": float(np.mean(val)),
            "test": float(np.mean(test)), "validation_per_seed": val, "test_per_seed": test,
            "auto": m.auto_settings, "seconds": time.time() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["ml-100k", "explicit-quick"],
                    choices=list(DATASETS))
    ap.add_argument("--grids", nargs="+", default=[g for g in GRIDS if g != "large"],
                    choices=list(GRIDS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--out", default="rating_sweep.json")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    from dpmt.train.rundir import prepare_data

    out = {"protocol": "random 80/10/10 split (split seed 1234), RMSE, mean over noise seeds "
                       f"{args.seeds}", "rows": [], "best": {}}
    for name in args.datasets:
        spec = DATASETS[name]
        split = prepare_data(TrainConfig(task="rating",
                                         data=dict(dataset=spec, split="random", seed=0)),
                             ExecutionConfig(progress=False, data_dir=args.data_dir))
        tr = split.train
        gm = float(np.mean(tr.value, dtype=np.float64))
        out.setdefault("global_mean", {})[name] = {
            k: float(np.sqrt(np.mean((es.targets.value - gm) ** 2)))
            for k, es in (("validation", split.validation), ("test", split.test))}
        for grid in args.grids:
            for eps, fields, patches in GRIDS[grid]():
                row = {"dataset": name, "grid": grid,
                       **run_cell(split, spec, eps, fields, patches, args.seeds)}
                out["rows"].append(row)
                print(json.dumps({k: v for k, v in row.items()
                                  if not k.endswith("per_seed")}), flush=True)
                key = f"{name}/{grid}/{eps:g}"
                if key not in out["best"] or row["validation"] < out["best"][key]["validation"]:
                    out["best"][key] = row
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    for key, row in out["best"].items():
        print("BEST", key, json.dumps({k: v for k, v in row.items()
                                       if not k.endswith("per_seed")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
