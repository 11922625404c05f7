#!/usr/bin/env python
"""Empirical privacy audits of dpmt's mechanisms (full size) and of their broken twins.

Runs :func:`experiments.audits.run_all` and prints / writes the table: mechanism, claimed ε, δ,
trials, empirical ε lower bound (with CI, and the audit that gave it: GDP for the Gaussian
mechanisms, threshold for the online ones) and each broken twin's bound (``--twins``: gross,
subtle, finest; see ``experiments.audits.TWINS``). ``--repeats R`` also re-runs each audit
and twin at ``--repeat-trials`` trials with R seeds to measure the tests' false-failure
rates. See ``experiments/audits.py`` for the audits, ``dpmt/audit.py`` for the statistics,
and ``scripts/audit_power.py`` / ``docs/audit_power.md`` for the measured power.

    python scripts/privacy_audit.py                      # 50,000 trials per dataset
    python scripts/privacy_audit.py --trials 4000 --out runs/audit
    python scripts/privacy_audit.py --twins gross subtle finest
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root

from dpmt import audit  # noqa: E402
from experiments import audits  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=50_000, help="releases per dataset")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mechanisms", nargs="+", default=None, choices=list(audits.MECHANISMS))
    p.add_argument("--twins", nargs="+", default=["gross", "subtle"],
                   choices=["gross", "subtle", "finest"])
    p.add_argument("--repeat-twin", default="subtle", choices=["gross", "subtle", "finest"])
    p.add_argument("--repeats", type=int, default=0,
                   help="also estimate false-failure rates from this many seeds")
    p.add_argument("--repeat-trials", type=int, default=4000)
    p.add_argument("--real-confidence", type=float, default=0.99,
                   help="confidence of the real audits in the repeats (the tests use 0.99)")
    p.add_argument("--out", default=None, help="folder for audit.md and audit.json")
    args = p.parse_args(argv)

    t0 = time.time()

    def progress(name, pair):
        for r in pair:
            print(f"[{time.time() - t0:7.1f}s] {r.summary()}", file=sys.stderr, flush=True)

    pairs = audits.run_all(args.trials, confidence=args.confidence, seed=args.seed,
                           mechanisms=args.mechanisms, twins=tuple(args.twins),
                           progress=progress)
    table = audit.format_table(pairs)
    print(table)
    rates = []
    if args.repeats:
        for name in args.mechanisms or audits.MECHANISMS:
            r = audits.repeat_rates(name, args.repeats, args.repeat_trials,
                                    real_confidence=args.real_confidence,
                                    twin_confidence=args.confidence, twin=args.repeat_twin)
            rates.append(r)
            print(f"{name}: {r}", flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "audit.md").write_text(table + "\n")
        (out / "audit.json").write_text(json.dumps(
            {"results": [[r.to_dict() for r in pair] for pair in pairs],
             "repeat_rates": rates}, indent=2, default=str))
        print(f"wrote {out}/audit.md and {out}/audit.json")
    return 0 if all(r.passed and not t.passed for r, t in pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
