"""SSP against the defaults at large n̂·ε, with the popularity prior η as post-processing
(issue 28): does η = ¼ (noisy GD's) close SSP's loss on the ML-20M-like data?

For each generator of :mod:`experiments.solver_rule` (FAMILY and LARGE) and ε: the
candidates of ``--candidates`` (default: the defaults and SSP at d = 32, λ = 20, 3 sweeps),
each fitted once, validation and test Recall@20 (overall and per popularity bucket) at the
rule's own η (``eta`` null) and at every η of ``--etas`` (η scales the released counts' prior
in the scores, :meth:`dpmt.scoring.Scorer.prior`: free post-processing of one fit). It also
measured the solver rule of :mod:`dpmt.train.defaults` (QUALITY.md, "SSP where n̂·ε and the
released counts per item are large").
Reproducible noise (``noise_seed``): an experiment; its models are not published.

    python -m experiments.ssp_prior --only K --epsilons 5 --out experiments/ssp_prior_K.json
"""

from __future__ import annotations

import json
import time

from dpmt.config import route
from dpmt.train.loop import fit
from experiments.solver_rule import CANDIDATES, EX, generator_parser, generator_splits, scores


def main(argv=None) -> int:
    ap = generator_parser(__doc__)
    ap.add_argument("--etas", type=float, nargs="+", default=[0.0, 0.125, 0.25, 0.5])
    ap.add_argument("--candidates", nargs="+", default=["defaults", "ssp-d32-l20-it3"],
                    choices=list(CANDIDATES))
    args = ap.parse_args(argv)
    rows = []
    for name, seed, base, split in generator_splits(args.only, args.seeds):
        for eps in args.epsilons:
            for cand in args.candidates:
                cfg = base.replace(**route({**CANDIDATES[cand], "epsilon": eps}))
                t0 = time.time()
                m = fit(split.train, cfg, execution=EX)
                sec = time.time() - t0
                own = m.config
                # the rule's own η first (the model as fitted), then --etas
                for eta in [None, *args.etas]:
                    m.config = own if eta is None else own.replace(popularity_prior=eta)
                    row = dict(generator=name, seed=seed, epsilon=eps, candidate=cand,
                               rule_eta=own.popularity_prior, eta=eta,
                               solver=own.solver, weights=own.weights, reg=own.reg,
                               n_eps=split.train.n_users * eps,
                               n_items=split.train.n_items, **scores(m, split),
                               seconds=sec)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                m.config = own
                with open(args.out, "w") as f:
                    json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
