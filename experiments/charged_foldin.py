"""A charged choice of the fold-in's (λ, α0), scored on every training user (issue 28: the
lead left by ``experiments/foldin_rule.py``).

``experiments/foldin_rule.py`` found that the fold-in candidates rank the same on *training*
users (their ratings split 80/20) as on held-out users. This measures the mechanism that
finding suggests, end to end, with its cost paid out of the same (ε, δ):

1. **Budget.** The defaults' planned releases plus one more, the selection's Gaussian release
   ``foldin_selection`` of L2 sensitivity √K at relative noise ``ratio`` (z = s·ratio, s the
   plan's one scale), are calibrated together to the target (ε, δ) with ``dp_accounting``
   (:func:`dpmt.privacy.calibrate`); the training then runs at ε_train, the ledger ε of the
   training releases alone at that scale, so training + selection compose to ε.
2. **Fit** the defaults at ε_train (one fit per ratio).
3. **Score**: every training user j's ratings split 80/20 (history / targets, a split
   independent of the data); for each candidate c, user j folded in on the history with
   (λ_c, α0_c) from the released V, r_jc = Recall@20 of the targets in [0, 1] (0 without
   targets). S_c = Σ_j r_jc. Adding or removing one user moves the vector S by a vector in
   [0, 1]^K: L2 sensitivity √K. (V is already released: adaptive composition.)
4. **Release** S + N(0, (z·√K)² I) and choose as post-processing: the noisy argmax c*,
   taken only when it beats the training's own fold-in (candidate 0) by more than
   ``guard``·z·√K·√2 (guard 0 = plain argmax). The noise draw is replayed ``--draws`` times
   (test Recall@20 averaged over the draws: the mechanism's expected quality).

Reported per (dataset, ε, seed): the defaults at the full ε (own fold-in), the defaults at
ε_train (own fold-in: the cost of the budget share), and for each ratio and guard the expected
test Recall@20 of the charged choice, with how often it kept the own fold-in; the tuned best
of ``experiments/logo_rule.json`` (family) / QUALITY.md (ML-100K) beside it.

    python -m experiments.charged_foldin --only A B C D E F G H --epsilons 1 5 20
    python -m experiments.charged_foldin --only M --epsilons 1 5 20 --seeds 0 1 2

Measured 2026-12-07 (``charged_foldin_ABCDEFGH.json``, ``_M.json``, and at ε = 2
``_ABDFGH_eps2.json``, ``_M_eps2.json``): test Recall@20 of the choice at ratio ½ minus the
defaults', averaged over the 8 generators and ML-100K (3 seeds), −0.0008 / −0.0000 / +0.0043 /
+0.0094 at ε = 1 / 2 / 5 / 20 (ratio 1: −0.0007 / – / +0.0036 / +0.0095; ¼: −0.0027 / – /
+0.0029 / +0.0087); B rank64 0.3037 → 0.3215 at ε = 5 and 0.2877 → 0.3223 at ε = 20 (tuned
best 0.3215, 0.3221); ML-100K 0.2964 → 0.3060 at ε = 20, 0.1627 → 0.1555 at ε = 1. Guard 0
(plain argmax) beat guards 1 and 2 on average at ε ≥ 5 (+0.0042 / +0.0036 / +0.0029 at ε = 5,
per cell); the guards lose less at ε = 1 only (−0.0020 / −0.0017 / −0.0015). Hence
``TrainConfig(fold_in="auto")``: the choice at ε ≥ 3, ratio ½ (QUALITY.md, "A private choice
of the fold-in").

Sampler δ (the 64-bit normal sampler's tail) is left out of this budget split (it moves ε_train
by < 1e-6 relative). Reproducible noise (``noise_seed``): an experiment; its models are not
published. Output: ``experiments/charged_foldin_<only>.json``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpmt.config import TrainConfig, route
from dpmt.privacy import PlannedRelease, calibrate, epsilon_of
from dpmt.train.evaluate import evaluate
from dpmt.train.loop import fit
from dpmt.train.plan import planned_releases
from dpmt.train.rundir import prepare_data
from experiments.foldin_rule import (CANDIDATES, EX, K, emit, heldout_base, training_users,
                                     user_recall)
from experiments.solver_rule import FAMILY

RATIOS = (1.0, 0.5, 0.25)
GUARDS = (0.0, 1.0, 2.0)


def budget_split(cfg: TrainConfig, n_candidates: int, ratio: float) -> tuple[float, float]:
    """(ε_train, z_selection): the training's releases and the selection's, calibrated to
    one scale at the target (ε, δ) of ``cfg``."""
    p = cfg.privacy
    planned = planned_releases(cfg) + [PlannedRelease("foldin_selection",
                                                      math.sqrt(n_candidates),
                                                      noise_ratio=ratio)]
    cal = calibrate(planned, p.epsilon, p.delta, p.accountant)
    rel = list(cal.releases)
    return (float(epsilon_of(rel[:-1], p.delta, p.accountant)),
            float(rel[-1].noise_multiplier))


def candidates_for(cfg0: TrainConfig) -> list[tuple[float, float]]:
    """The training's own (λ, α0) first, then :data:`CANDIDATES` without it."""
    own = (float(cfg0.reg), float(cfg0.gravity))
    return [own] + [c for c in CANDIDATES if c != own]


def replay(S: np.ndarray, test: np.ndarray, z: float, guard: float, draws: int,
           rng) -> tuple[float, float]:
    """Expected test Recall@20 of the guarded noisy argmax over ``draws`` noise draws, and the
    share of draws that kept candidate 0."""
    sd = z * math.sqrt(len(S))
    noisy = S[None, :] + rng.normal(0.0, sd, size=(draws, len(S)))
    best = np.argmax(noisy, axis=1)
    lead = noisy[np.arange(draws), best] - noisy[:, 0]
    pick = np.where(lead > guard * sd * math.sqrt(2.0), best, 0)
    return float(np.mean(test[pick])), float(np.mean(pick == 0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", required=True,
                    help="generator keys (first letter of experiments.solver_rule.FAMILY; "
                         "M = ML-100K)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 5.0, 20.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--ratios", type=float, nargs="+", default=list(RATIOS))
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--tag", default="", help="suffix of the output file")
    args = ap.parse_args(argv)
    family = dict(FAMILY, **{"M ml100k": "ml-100k"})
    out_path = f"experiments/charged_foldin_{''.join(args.only)}{args.tag}.json"
    rows = []
    for name, spec in family.items():
        if name[0] not in args.only:
            continue
        for seed in args.seeds:
            base = heldout_base(spec, seed)     # training's fold-in: this script chooses
            split = prepare_data(base, EX)
            tr = training_users(split.train, split.train.n_users,
                                np.random.default_rng(1000 + seed))
            for eps in args.epsilons:
                t0 = time.time()
                cfg = base.replace(**route({"epsilon": eps}))
                full = fit(split.train, cfg, execution=EX)
                row = dict(generator=name, epsilon=eps, seed=seed,
                           training=dict(reg=full.config.reg, gravity=full.config.gravity),
                           defaults_test=evaluate(full, split.train, split.test, ks=(K,))
                           ["overall"][f"recall@{K}"], ratios={})
                for ratio in args.ratios:
                    cands = candidates_for(full.config)
                    eps_train, z = budget_split(cfg, len(cands), ratio)
                    model = fit(split.train, cfg.replace(**route({"epsilon": eps_train})),
                                execution=EX)
                    cfg0 = model.config
                    cands = candidates_for(cfg0)
                    test, S = [], []
                    for reg, grav in cands:
                        c = cfg0.replace(reg=reg, gravity=grav)
                        model.config = c
                        test.append(evaluate(model, split.train, split.test, ks=(K,))
                                    ["overall"][f"recall@{K}"])
                        S.append(float(np.nansum(user_recall(model, c, tr.history,
                                                             tr.targets))))
                    model.config = cfg0
                    test, S = np.array(test), np.array(S)
                    rng = np.random.default_rng(7 + seed)
                    r = dict(epsilon_train=eps_train, z=z, noise_sd=z * math.sqrt(len(S)),
                             candidates=[f"{a:g}/{b:g}" for a, b in cands],
                             own_test=float(test[0]), test=test.tolist(), S=S.tolist(),
                             noiseless_pick=int(np.argmax(S)))
                    for g in GUARDS:
                        r[f"guard {g:g}"] = replay(S, test, z, g, args.draws, rng)
                    row["ratios"][f"{ratio:g}"] = r
                row["seconds"] = time.time() - t0
                emit(rows, row, out_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
