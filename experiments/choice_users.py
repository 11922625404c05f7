"""The fold-in choice scored on users kept out of training (issue 28): does a signal that V
has not fitted see what the training users' signal does not?

The private fold-in choice (:mod:`dpmt.train.fold_in_choice`) sums each candidate's
Recall@20 over the *training* users' keyed 20 % targets — ratings the item step fitted. On
generator B of :mod:`experiments.solver_rule` (the one whose defaults fall from ε = 5 to 20)
the candidates tie there while held-out users prefer a ranking closer to popularity
(QUALITY.md, "The fold-in choice cannot see B's overfitting"). Here ``--choice-users`` of the
training users (a seeded random subset; in a library version a keyed hash of the user's own
ratings, as :func:`dpmt.train.fold_in_choice.scored_users`) are removed from training and
the choice's sums are taken over them instead (same candidates, same sensitivity √K, the
plan's σ): each user is then in exactly one release, the training's or the choice's.
Validation and test Recall@20 of the resulting model, the candidate chosen and the exact
(noiseless) sums; ``--choice-users 0`` records them on the library's own path. Run on the
tree with ``git apply experiments/popular_candidate.patch`` for the tenth, popularity-led
candidate (η = 16) that was tried and not kept. ``--parallel`` gives the choice the noise of
one Gaussian release at the whole (ε, δ) (the users kept out are in no training release: a
parallel composition), the training still paying the plan's share for it (conservative).
Reproducible noise (``noise_seed``): an experiment; its models are not published.

    python -m experiments.choice_users --only B --epsilons 5 20 --seeds 0 1 \\
        --out experiments/choice_users.json
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from unittest import mock

import dp_accounting
import numpy as np

from dpmt.config import route
from dpmt.data.ratings import Ratings
from dpmt.train import fold_in_choice as fc
from dpmt.train import loop
from dpmt.train.loop import fit
from experiments.solver_rule import EX, generator_parser, generator_splits, scores


def split_users(train: Ratings, n_choice: int, seed: int) -> tuple[Ratings, Ratings]:
    """(the training users less ``n_choice`` random ones, those ones), items kept."""
    rng = np.random.default_rng(10_000 + seed)
    chosen = np.zeros(train.n_users, bool)
    chosen[rng.choice(train.n_users, min(n_choice, train.n_users), replace=False)] = True

    def part(keep: np.ndarray) -> Ratings:
        rows = keep[train.user]
        new_index = np.cumsum(keep) - 1
        return dataclasses.replace(
            train, user=new_index[train.user[rows]].astype(np.int32), item=train.item[rows],
            value=train.value[rows], user_ids=np.asarray(train.user_ids)[keep],
            timestamp=None if train.timestamp is None else train.timestamp[rows])

    return part(~chosen), part(chosen)


def full_epsilon_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ of one Gaussian release of L2 ``sensitivity`` at (ε, δ) alone (dp_accounting's PLD
    accountant, the noise multiplier by bisection)."""
    lo, hi = 1e-3, 1e3
    for _ in range(80):
        z = math.sqrt(lo * hi)
        acc = dp_accounting.pld.PLDAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(z))
        lo, hi = (z, hi) if acc.get_epsilon(delta) > epsilon else (lo, z)
    return hi * sensitivity


def main(argv=None) -> int:
    ap = generator_parser(__doc__)
    ap.add_argument("--choice-users", type=int, default=2000,
                    help="users kept out of training for the choice (0: the library's path, "
                         "the training users, with the exact sums recorded)")
    ap.add_argument("--parallel", action="store_true",
                    help="the choice's noise at the whole (ε, δ) (a parallel composition: "
                         "the choice users are in no training release), not the plan's share")
    args = ap.parse_args(argv)
    rows = []
    for name, seed, base, split in generator_splits(args.only, args.seeds):
        if args.choice_users:
            fit_users, choice = split_users(split.train, args.choice_users, seed)
        else:                        # the library's path: the training users' sums
            fit_users, choice = split.train, None
        real = fc.recall_sums
        seen = {}

        def on_choice_users(V, prior, clip, cands, ratings, key, share=1.0):
            seen["cands"] = cands
            seen["exact"] = (real(V, prior, clip, cands, ratings, key, share)
                             if choice is None else
                             real(V, prior, clip, cands, choice, key, 1.0))
            return seen["exact"]

        real_charge, real_choose = loop.charge, fc.choose

        def charge_spy(ledger, release):
            sigma = real_charge(ledger, release)
            if release is not None and release.name == "fold_in_choice":
                seen["sigma_plan"] = sigma
            return sigma

        def choose_at_full_epsilon(noisy):
            z = (np.asarray(noisy) - seen["exact"]) / seen["sigma_plan"]
            return real_choose(seen["exact"] + seen["sigma_full"] * z)

        for eps in args.epsilons:
            cfg = base.replace(**route({"epsilon": eps}))
            seen["sigma_full"] = full_epsilon_sigma(eps, 1e-6, fc.sensitivity())
            t0 = time.time()
            with mock.patch.object(fc, "recall_sums", on_choice_users), \
                    mock.patch.object(loop, "charge", charge_spy), \
                    mock.patch.object(fc, "choose", choose_at_full_epsilon
                                      if args.parallel else real_choose):
                m = fit(fit_users, cfg, execution=EX)
            row = dict(generator=name, seed=seed, epsilon=eps,
                       choice_users=args.choice_users, parallel=args.parallel,
                       sigma_plan=seen.get("sigma_plan"),
                       sigma_full=seen["sigma_full"] if args.parallel else None,
                       fold_in=[m.config.fold_in_reg, m.config.fold_in_gravity],
                       eta=m.config.popularity_prior,
                       exact_sums=[round(float(s), 2) for s in seen["exact"]],
                       candidates=[list(c) for c in seen["cands"]],
                       **scores(m, split), seconds=time.time() - t0)
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
