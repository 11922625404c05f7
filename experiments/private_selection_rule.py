"""Issue 28: can a *charged* data-dependent choice of λ make the defaults carry over?

QUALITY.md ("Why the defaults fall with ε on two generators") found that no rule from public
quantities (n̂, ε) picks the ridge that every generator of :data:`experiments.solver_rule.
FAMILY` wants: λ = 10 stops the fall with ε on generator B and loses up to 0.05 on the
logistic ones. What is left is to choose λ on validation users, and to pay for the choice.
This runs ``dpmt tune``'s private selection (Papernot & Steinke, ICLR 2022; ε covers the
whole tuning) over ``reg ∈ {3, 10}`` with everything else at the defaults, and compares its
test Recall@20 with the defaults trained once at the full ε — the selection's repetitions run
at a smaller per-run ε, so the question is whether picking the right λ is worth more than
the budget it takes.

Per (generator, ε): the defaults at ε; each candidate once at ε (the literature's uncharged
selection: which λ validation prefers); and the private tuning's *expected* test Recall@20.
A single tuning draws K (geometric, mean 4 = ``dpmt tune``'s default for 2 candidates) and
one candidate per repetition, so one run mostly measures its own draws; instead every
candidate is trained ``--pool`` times at the calibrated per-run ε (different noise seeds, the
sampler's δ charged as ``dpmt tune`` charges it) and the selection is replayed 4,000 times on
that pool: K from :func:`dpmt.privacy.selection.draw_repetitions`, a uniform candidate and a
pooled run per repetition, its validation sum plus N(0, σ²) of the calibrated score noise,
the best noisy score kept. Held-out users (2,000 + 2,000), δ = 1e-6, the split of
``experiments/solver_rule.py`` (ML-100K: 100 + 100, δ = 1e-5, as in QUALITY.md); noise from
seeds: an experiment, not a private run.

    python -m experiments.private_selection_rule --out experiments/private_selection_rule.json
    python -m experiments.private_selection_rule --table experiments/private_selection_rule.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dpmt.apps import tune as tune_app
from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.privacy.selection import draw_repetitions, noisy_score
from dpmt.train.evaluate import evaluate
from dpmt.train.loop import fit
from dpmt.train.rundir import prepare_data

from experiments.solver_rule import FAMILY

GRID = [("reg", [3.0, 10.0])]
TRIALS = 4000
EX = ExecutionConfig(progress=False)


def _recall(model, split, part: str) -> float:
    return float(evaluate(model, split.train, getattr(split, part), ks=(20,))
                 ["overall"]["recall@20"])


def run_cell(name: str, spec: str, eps: float, seed: int, pool: int) -> list[dict]:
    small = spec == "ml-100k"        # QUALITY.md's ML-100K held-out protocol: 100 + 100 users
    base = TrainConfig(data=dict(dataset=spec, split="heldout-users",
                                 heldout_users=100 if small else 2000, seed=seed),
                       privacy=dict(delta=1e-5 if small else 1e-6, noise_seed=seed,
                                    epsilon=eps))
    split = prepare_data(base, EX)
    rows = []
    key = dict(generator=name, epsilon=eps, seed=seed)
    for label, cfg in [("defaults", base)] + [(f"reg={v:g}", base.replace(**route({"reg": v})))
                                             for v in GRID[0][1]]:
        t0 = time.time()
        m = fit(split.train, cfg, execution=EX)
        rows.append(dict(key, method=label, reg=m.config.reg, weights=m.config.weights,
                         validation=_recall(m, split, "validation"),
                         test=_recall(m, split, "test"), seconds=time.time() - t0))
        print(json.dumps(rows[-1]), flush=True)
    # the private tuning's repetitions: each candidate at the calibrated per-run ε
    tspec = tune_app.Spec(base, tuple(tune_app.build_candidates(base, GRID)), "private")
    configs, cal = tune_app.check_spec(tspec, split.train.n_items)
    draws = tune_app.charged_draws(configs, split.train.n_items)
    n_val = None
    runs = []
    for c, cfg in enumerate(configs):
        for r in range(pool):
            m = fit(split.train, cfg.replace(privacy=dict(noise_seed=1000 * seed + 10 * c + r)),
                    execution=EX, charged_draws=draws)
            o = evaluate(m, split.train, split.validation, ks=(20,))["overall"]
            n_val = int(o["users"])
            runs.append(dict(candidate=c, reg=m.config.reg, validation=float(o["recall@20"]),
                             test=_recall(m, split, "test")))
    rng = np.random.default_rng(seed)
    sel = tspec.selection
    tests, picks = [], []
    for _ in range(TRIALS):
        k = draw_repetitions(rng, sel.mean, sel.shape)
        best = None
        for _ in range(k):
            c = int(rng.integers(len(configs)))
            run = runs[c * pool + int(rng.integers(pool))]
            score = noisy_score(run["validation"] * n_val, cal.score.noise_std, rng)
            if best is None or score > best[0]:
                best = (score, run)
        tests.append(best[1]["test"])
        picks.append(best[1]["reg"])
    rows.append(dict(key, method="private selection of λ", per_run_epsilon=cal.run_epsilon,
                     tuning_epsilon=cal.epsilon, score_noise_std=cal.score.noise_std,
                     validation_users=n_val, pool=runs,
                     test=float(np.mean(tests)),
                     share_reg10=float(np.mean(np.array(picks) == 10.0))))
    print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    out = ["| generator | seed | ε | defaults | λ = 3 | λ = 10 | validation picks | private selection "
           "(share λ = 10; per-run ε; ε spent) | selection − defaults |",
           "|---|---:|---:|---:|---:|---:|---|---|---:|"]
    cells = dict.fromkeys((r["generator"], r["epsilon"], r["seed"]) for r in rows)
    for g, e, s in cells:
        c = {r["method"]: r for r in rows if (r["generator"], r["epsilon"], r["seed"]) == (g, e, s)}
        if "private selection of λ" not in c:
            continue
        p = c["private selection of λ"]
        lit = max((c["reg=3"], c["reg=10"]), key=lambda r: r["validation"])
        out.append(f"| {g} | {s} | {e:g} | {c['defaults']['test']:.4f} | {c['reg=3']['test']:.4f} | "
                   f"{c['reg=10']['test']:.4f} | λ = {lit['reg']:g} | {p['test']:.4f} "
                   f"({p['share_reg10']:.0%} λ = 10; {p['per_run_epsilon']:.2f}; "
                   f"{p['tuning_epsilon']:.2f}) | {p['test'] - c['defaults']['test']:+.4f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="private_selection_rule.json")
    ap.add_argument("--only", nargs="*", default=None,
                    help="generator keys (first letter; M: ML-100K's held-out users)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=[5.0, 20.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--pool", type=int, default=3, help="runs per candidate at the per-run ε")
    ap.add_argument("--table", nargs="+", default=None, metavar="JSON")
    args = ap.parse_args(argv)
    if args.table:
        print(table([r for p in args.table for r in json.load(open(p))]))
        return 0
    rows: list[dict] = []
    family = {**FAMILY, "ML-100K held-out": "ml-100k"}
    for name, spec in family.items():
        if args.only and name[0] not in args.only:
            continue
        for seed in args.seeds:
            for eps in args.epsilons:
                rows += run_cell(name, spec, eps, seed, args.pool)
                with open(args.out, "w") as f:
                    json.dump(rows, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
