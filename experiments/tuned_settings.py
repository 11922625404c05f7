"""Which of the tuned best's settings closes ML-100K's gap at ε = 20 (issue 28)? The defaults
with one setting of the tuned best at a time (d = 8, SGD at lr 100 with 10 steps, 2 sweeps,
λ = 1, the adaptive-normalized weights; ``dpmt quality``'s choice on validation), ML-100K
held-out users (100 + 100, δ = 1e-5), 3 seeds, the private fold-in choice in every run.

    python -m experiments.tuned_settings --epsilons 20 5 --seeds 0 1 2 > experiments/tuned_settings.jsonl

One JSON line per (ε, seed): [validation, test] Recall@20 per candidate. Every candidate
trains at λ = 3 unless it sets λ: the λ the rule gave these cells when this was measured
(2026-12-07), before the light ridge it led to (``experiments/light_reg.py``). Test, mean
over the 3 seeds, minus ``defaults``: at ε = 20 d16 +0.0081 ± 0.0041, d8 +0.0036 ± 0.0127,
it2 +0.0013, an −0.0011, the reference's SGD configurations +0.015 to +0.023 (validation
level), l1 +0.0286 ± 0.0053; at ε = 5 d16 −0.0173, d8 −0.0245, the SGD configurations −0.012
to −0.054, l1 +0.0102 ± 0.0036.
"""

from __future__ import annotations

import argparse
import json

from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.train.evaluate import evaluate
from dpmt.train.loop import fit
from dpmt.train.rundir import prepare_data

EX = ExecutionConfig(progress=False)
_SGD = dict(learning_rate=100.0, optimizer="sgd", steps=10)
CANDIDATES = {
    "defaults": {}, "d16": dict(dim=16), "d8": dict(dim=8), "it2": dict(iterations=2),
    "d8-it2": dict(dim=8, iterations=2), "d16-it2": dict(dim=16, iterations=2),
    # the tuned best of dpmt quality at ε = 20, with its weights and with uniform ones
    "ref-an": dict(dim=8, gd=_SGD, iterations=2, reg=1.0, weights="adaptive-normalized"),
    "ref-u": dict(dim=8, gd=_SGD, iterations=2, reg=1.0, weights="uniform"),
    "ref-d32-u": dict(gd=_SGD, iterations=2, reg=1.0, weights="uniform"),
    "ref-an-it4": dict(dim=8, gd=_SGD, reg=1.0, weights="adaptive-normalized"),
    "an": dict(weights="adaptive-normalized"), "l1": dict(reg=1.0)}
#: the rule's λ in these cells when measured
REG_THEN = 3.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[20.0, 5.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--candidates", nargs="+", choices=list(CANDIDATES),
                    default=list(CANDIDATES))
    args = ap.parse_args(argv)
    for seed in args.seeds:
        base = TrainConfig(data=dict(dataset="ml-100k", split="heldout-users",
                                     heldout_users=100, seed=seed),
                           privacy=dict(delta=1e-5, noise_seed=seed))
        split = prepare_data(base, EX)
        for eps in args.epsilons:
            row = {"spec": "ml-100k", "split": "heldout-users", "eps": eps, "seed": seed}
            for name in args.candidates:
                kv = {"reg": REG_THEN, **CANDIDATES[name], "epsilon": eps}
                m = fit(split.train, base.replace(**route(kv)), execution=EX)
                row[name] = [round(evaluate(m, split.train, getattr(split, p), ks=(20,))
                                   ["overall"]["recall@20"], 4)
                             for p in ("validation", "test")]
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
