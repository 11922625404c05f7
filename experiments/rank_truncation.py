"""The released V truncated to its top-r singular subspace (free post-processing): does a
lower-rank V, denoised, rank better? ML-100K held-out users (100 + 100, δ = 1e-5), the
defaults trained with ``fold_in="training"`` and λ = 3 (the rule's λ there when measured,
2026-12-07), then V ← V·P_r (P_r the projector on V's top-r right singular vectors) and users
folded in with (λ, α0) ∈ :data:`FOLD`; [validation, test] Recall@20 per (r, λ/α0).

    python -m experiments.rank_truncation --epsilons 20 5 --seeds 0 1 2 > experiments/rank_truncation.jsonl

Measured (test, mean over 3 seeds; QUALITY.md "Tried, not kept"): at ε = 20 the best fold-in
(3/2) gives 0.3090 / 0.3153 / 0.3112 / 0.3109 / 0.3100 / 0.3062 at r = 32 / 24 / 16 / 12 /
8 / 4; at ε = 5 (1/0.5) 0.2611 / 0.2545 / 0.2498 / 0.2546 / 0.2525 / 0.2471: no gain. V's
singular values at ε = 20 (seed 0): 5.6, 3.5, 2.4, 2.0, then a flat ~1.5 floor.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.train.evaluate import evaluate
from dpmt.train.loop import fit
from dpmt.train.rundir import prepare_data

EX = ExecutionConfig(progress=False)
RANKS = (32, 24, 16, 12, 8, 4)
FOLD = [(3.0, 0.5), (1.0, 0.5), (3.0, 2.0), (10.0, 0.5), (30.0, 0.0)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[20.0, 5.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args(argv)
    for seed in args.seeds:
        base = TrainConfig(fold_in="training", reg=3.0,
                           data=dict(dataset="ml-100k", split="heldout-users",
                                     heldout_users=100, seed=seed),
                           privacy=dict(delta=1e-5, noise_seed=seed))
        split = prepare_data(base, EX)
        for eps in args.epsilons:
            model = fit(split.train, base.replace(**route({"epsilon": eps})), execution=EX)
            cfg0, V0 = model.config, model.item_embeddings.copy()
            _, s, Vt = np.linalg.svd(V0.astype(np.float64), full_matrices=False)
            row = {"eps": eps, "seed": seed, "sv": [round(float(x), 2) for x in s]}
            for r in RANKS:
                model.item_embeddings = (V0 @ (Vt[:r].T @ Vt[:r])).astype(np.float32)
                for reg, grav in FOLD:
                    model.config = cfg0.replace(reg=reg, gravity=grav)
                    row[f"r{r} {reg:g}/{grav:g}"] = [
                        round(evaluate(model, split.train, getattr(split, p), ks=(20,))
                              ["overall"]["recall@20"], 4) for p in ("validation", "test")]
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
