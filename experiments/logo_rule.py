"""Issue 28: a default rule fitted leave-one-generator-out, from runs already measured.

The issue asks for the rule that picks the defaults to be fitted on some generators and
reported on the others. This replays that on the generator family of
``experiments/solver_rule.py`` (8 generators: 5 of the project's topic model, 3 of the
logistic-link model; seed 0, 2,000 + 2,000 held-out users, δ = 1e-6) from the JSON files of
earlier runs, without training anything: for each held-out generator g and each ε, the rule
picks the candidate with the best *mean validation* Recall@20 over the other seven
generators at that ε, and is scored by g's *test* Recall@20. The rule is a function of ε
(public) alone: every generator has 20k or 50k users, so n̂·ε orders the cells as ε does.

Candidates (each one run of its own, all at the defaults but for what the name says):
``defaults`` and ``reg=10`` (2026-12-06, the current code: ``private_selection_rule.json``);
``gd-l20`` (λ = 20, 2026-12-04: ``solver_rule_gdreg.json``); ``ssp-d32-l10-it2`` and
``ssp-d32-l20-it3`` (SSP, 2026-12-04: ``solver_rule_topics.json``,
``solver_rule_logistic.json``); ``gd-eta05`` and ``gd-eta1`` (the popularity prior at ½ and
1, 2026-12-06 before the 8-step rule: ``solver_rule_eta.json``). Rows of an older code path
differ from today's by the noise draws and, above n̂·ε = 10⁵, by the steps rule (a tie on
20 pairs, QUALITY.md): the replay compares configurations, not code versions.

    python -m experiments.logo_rule [--json experiments/logo_rule.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean

HERE = Path(__file__).parent
SOURCES = {   # file -> {candidate name in the file: name here}
    "private_selection_rule.json": {"defaults": "defaults", "reg=10": "reg=10"},
    "solver_rule_gdreg.json": {"gd-l20": "gd-l20"},
    "solver_rule_topics.json": {"ssp-d32-l10-it2": "ssp-d32-l10-it2",
                                "ssp-d32-l20-it3": "ssp-d32-l20-it3"},
    "solver_rule_logistic.json": {"ssp-d32-l10-it2": "ssp-d32-l10-it2",
                                  "ssp-d32-l20-it3": "ssp-d32-l20-it3"},
    "solver_rule_eta.json": {"gd-eta05": "gd-eta05", "gd-eta1": "gd-eta1"},
}


def load() -> dict:
    """{(generator, ε): {candidate: {"validation", "test"}}} over every source file."""
    cells: dict = {}
    for name, keep in SOURCES.items():
        for r in json.loads((HERE / name).read_text()):
            cand = r.get("candidate", r.get("method"))
            if r.get("epsilon") is None or cand not in keep or r.get("seed", 0) != 0:
                continue
            cells.setdefault((r["generator"], float(r["epsilon"])), {})[keep[cand]] = \
                {"validation": r["validation"], "test": r["test"]}
    return cells


def replay(cells: dict) -> list[dict]:
    gens = sorted({g for g, _ in cells})
    cands = sorted(set.intersection(*(set(c) for c in cells.values())))
    rows = []
    for (g, eps), cell in sorted(cells.items()):
        others = [cells[(h, eps)] for h in gens if h != g and (h, eps) in cells]
        rule = max(cands, key=lambda c: mean(o[c]["validation"] for o in others))
        own = max(cands, key=lambda c: cell[c]["validation"])
        rows.append(dict(generator=g, epsilon=eps, rule=rule, rule_test=cell[rule]["test"],
                         defaults_test=cell["defaults"]["test"], tuned=own,
                         tuned_test=cell[own]["test"], candidates=cands))
    return rows


def table(rows: list[dict]) -> str:
    out = ["| held-out generator | ε | rule fitted on the other 7 | its test | defaults | "
           "tuned on its own validation | rule − tuned | defaults − tuned |",
           "|---|---:|---|---:|---:|---|---:|---:|"]
    for r in rows:
        out.append(f"| {r['generator']} | {r['epsilon']:g} | {r['rule']} | "
                   f"{r['rule_test']:.4f} | {r['defaults_test']:.4f} | {r['tuned']} "
                   f"{r['tuned_test']:.4f} | {r['rule_test'] - r['tuned_test']:+.4f} | "
                   f"{r['defaults_test'] - r['tuned_test']:+.4f} |")
    n = len(rows)
    out.append("")
    for key in ("rule", "defaults"):
        gaps = [r[f"{key}_test"] - r["tuned_test"] for r in rows]
        out.append(f"{key}: within 0.01 of the tuned best in {sum(x >= -0.01 for x in gaps)} "
                   f"of {n} cells; mean gap {mean(gaps):+.4f}, worst {min(gaps):+.4f}")
    for eps in sorted({r["epsilon"] for r in rows}):
        sub = [r for r in rows if r["epsilon"] == eps]
        gap = mean(r["rule_test"] - r["defaults_test"] for r in sub)
        out.append(f"ε = {eps:g}: rule − defaults {gap:+.4f} (mean over {len(sub)}); picks "
                   + ", ".join(sorted({r['rule'] for r in sub})))
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    rows = replay(load())
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
