"""The generator family of the quality benchmark (issue 28): defaults fitted leave-one-
generator-out, measured by ``dpmt quality`` (its ``--family`` section).

Eight synthetic generators that differ in what matters for the defaults — planted rank (8–64),
link (the topic model of :func:`dpmt.data.synthetic.make_synthetic`, the logistic link of
:mod:`dpmt.data.synthetic_logistic`), popularity exponent (0.8–1.3), user-activity spread,
Dirichlet concentration and size (20k and 50k users) — each split into training users and
2,000 + 2,000 held-out validation / test users (Liang et al. 2018), δ = 1e-6, seed 0.

At every ε, each generator trains the candidate defaults of :data:`CANDIDATES` (the defaults
themselves, a stronger ridge, SSP with λ = 20; the popularity prior η = ½ is scored on the
defaults' own fit: post-processing). :func:`replay` then fits the rule leave-one-generator-
out: for a held-out generator g and ε, the rule takes the candidate with the best *mean
validation* Recall@20 over the other generators at that ε, and is scored by g's *test*
Recall@20, against g's own best on validation ("tuned") and against dpmt's defaults.

    python -m experiments.solver_rule        # the same generators, more candidates
"""

from __future__ import annotations

import time
from statistics import mean

from dpmt.config import ExecutionConfig, TrainConfig, route

_SIZE = "users=20000,items=3000,interactions=1000000"
#: name → dataset spec (:func:`dpmt.data.load`)
FAMILY = {
    "A base": f"synthetic:{_SIZE},seed=11",
    "B rank64": f"synthetic:{_SIZE},rank=64,concentration=0.3,seed=12",
    "C steep": f"synthetic:{_SIZE},alpha=1.3,sigma=1.5,seed=13",
    "D flat": f"synthetic:{_SIZE},alpha=0.8,rank=8,noise=0.3,seed=14",
    "E 50k": "synthetic:users=50000,items=5000,interactions=2400000,alpha=1.2,rank=32,seed=15",
    # the logistic-link generator (dpmt.data.synthetic_logistic): no rule was fitted on it
    "F logistic": f"logistic-synthetic:{_SIZE},seed=16",
    "G logistic r32": f"logistic-synthetic:{_SIZE},rank=32,alpha=1.3,signal=3,seed=17",
    "H logistic 50k": ("logistic-synthetic:users=50000,items=5000,interactions=2400000,"
                       "rank=16,alpha=1.1,sigma=1.3,signal=2.5,seed=18"),
}
#: the candidates the leave-one-out rule chooses among: name → (TrainConfig changes, η or
#: None for the fit's own); candidates with the same changes share one fit
CANDIDATES = {
    "defaults": ({}, None),
    "η = ½": ({}, 0.5),
    "λ = 10": ({"reg": 10.0}, None),
    "SSP λ = 20": ({"solver": "ssp", "reg": 20.0}, None),
}
EPSILONS = (1.0, 5.0, 20.0)
HELDOUT_USERS = 2000


def base_config(spec: str, seed: int = 0) -> TrainConfig:
    """A generator's config: held-out users, δ = 1e-6, reproducible noise (an experiment)."""
    return TrainConfig(data=dict(dataset=spec, split="heldout-users",
                                 heldout_users=HELDOUT_USERS, seed=seed),
                       privacy=dict(delta=1e-6, noise_seed=seed))


def n_fits(generators=None, epsilons=EPSILONS) -> int:
    """Fits :func:`run_family` makes (for a progress bar)."""
    fits = {tuple(sorted(kv.items())) for kv, _ in CANDIDATES.values()}
    return len(generators or FAMILY) * len(epsilons) * len(fits)


def finished(rows: list[dict], epsilons=EPSILONS) -> list[str]:
    """The generators of ``rows`` with a row for every ε and candidate, in FAMILY's order."""
    have = {(r["generator"], float(r["epsilon"]), r["candidate"]) for r in rows}
    return [g for g in FAMILY
            if all((g, float(e), c) in have for e in epsilons for c in CANDIDATES)]


def run_family(ex: ExecutionConfig, generators=None, epsilons=EPSILONS, bar=None,
               rows: list[dict] | None = None, save=None) -> list[dict]:
    """One row per (generator, ε, candidate): validation and test Recall@20, n̂·ε, seconds
    of its fit, and the settings the defaults' rules chose. ``rows`` of an interrupted run:
    its :func:`finished` generators are kept, not trained again; ``save(rows)`` after every
    generator (an interruption loses at most the generator it was in)."""
    from dpmt.runtime import release_compiled_code
    from dpmt.train.evaluate import evaluate
    from dpmt.train.loop import fit
    from dpmt.train.rundir import prepare_data

    done = finished(rows or [], epsilons)
    rows = [r for r in rows or [] if r["generator"] in done]
    for name in generators or FAMILY:
        if name in done:
            continue
        base = base_config(FAMILY[name])
        split = prepare_data(base, ex)
        for eps in epsilons:
            fits: dict = {}
            for cand, (kv, eta) in CANDIDATES.items():
                key = tuple(sorted(kv.items()))
                if key not in fits:
                    release_compiled_code()
                    t0 = time.time()
                    fits[key] = (fit(split.train, base.replace(**route({**kv, "epsilon": eps})),
                                     execution=ex), time.time() - t0)
                    if bar is not None:
                        bar.update(1)
                model, sec = fits[key]
                own = model.config
                if eta is not None:
                    model.config = own.replace(popularity_prior=eta)
                va = evaluate(model, split.train, split.validation, ks=(20,))
                te = evaluate(model, split.train, split.test, ks=(20,))
                model.config = own
                rows.append(dict(generator=name, epsilon=eps, candidate=cand,
                                 solver=own.solver, reg=own.reg,
                                 eta=own.popularity_prior if eta is None else eta,
                                 n_eps=split.train.n_users * eps,
                                 validation=va["overall"]["recall@20"],
                                 test=te["overall"]["recall@20"], seconds=sec))
        if save is not None:
            save(rows)
    return rows


def replay(rows: list[dict]) -> list[dict]:
    """The leave-one-generator-out rule on ``rows`` (:func:`run_family`'s): per held-out
    generator and ε, the candidate with the best mean validation Recall@20 over the other
    generators at that ε ("rule"), the generator's own best on validation ("tuned"), and the
    test Recall@20 of both and of the defaults."""
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["generator"], float(r["epsilon"])), {})[r["candidate"]] = r
    out = []
    for (g, eps), cell in sorted(cells.items()):
        others = [c for (h, e), c in cells.items() if e == eps and h != g]
        cands = [c for c in cell if all(c in o for o in others)]
        if not others or "defaults" not in cell:
            continue
        rule = max(cands, key=lambda c: mean(o[c]["validation"] for o in others))
        own = max(cands, key=lambda c: cell[c]["validation"])
        out.append(dict(generator=g, epsilon=eps, rule=rule, rule_test=cell[rule]["test"],
                        defaults_test=cell["defaults"]["test"],
                        defaults_solver=cell["defaults"]["solver"], tuned=own,
                        tuned_test=cell[own]["test"]))
    return out


def summary(logo: list[dict], key: str) -> dict:
    """``key`` ("rule" or "defaults") against the tuned best: cells within 0.01, mean and
    worst gap, and the generators whose defaults fall with ε."""
    gaps = [r[f"{key}_test"] - r["tuned_test"] for r in logo]
    return dict(within=sum(x >= -0.01 - 1e-12 for x in gaps), cells=len(gaps),
                mean=mean(gaps) if gaps else float("nan"),
                worst=min(gaps) if gaps else float("nan"))


def not_monotone(logo: list[dict], tol: float = 0.0) -> list[tuple[str, float, float, float]]:
    """``(generator, drop, ε, larger ε)`` for every generator whose defaults' test Recall@20
    falls by more than ``tol`` from one ε to the next larger one (its largest such fall)."""
    out = []
    for g in sorted({r["generator"] for r in logo}):
        seq = sorted((r["epsilon"], r["defaults_test"]) for r in logo if r["generator"] == g)
        falls = [(b - a, e, f) for (e, a), (f, b) in zip(seq, seq[1:]) if b < a - tol]
        if falls:
            out.append((g, *min(falls)))
    return out


def section(rows: list[dict]) -> str:
    """The QUALITY.md section of the family run."""
    logo = replay(rows)
    n_gen = len({r["generator"] for r in rows})
    partial = ("" if n_gen >= len(FAMILY) else
               f"*Partial: {n_gen} of {len(FAMILY)} generators; `dpmt quality --resume "
               "--family` trains the others.* ")
    names = ", ".join(sorted({r["generator"] for r in rows}))
    out = ["## Defaults fitted leave-one-generator-out (issue 28)", "",
           f"{partial}{n_gen} synthetic generators ({names};"
           " `benchmarks/family.py`), seed 0, 2,000 + 2,000 held-out users, δ = 1e-6. For "
           f"each held-out generator and ε the rule takes the candidate ({', '.join(CANDIDATES)})"
           " with the best mean validation Recall@20 over the other generators, scored on the "
           "held-out one's test users; \"tuned\" is the held-out generator's own best on "
           "validation among the same candidates. Test Recall@20:", "",
           "| held-out generator | ε | rule (fitted on the others) | its test | dpmt defaults "
           "(solver) | tuned on its own validation | rule − tuned | defaults − tuned |",
           "|---|---:|---|---:|---:|---|---:|---:|"]
    for r in logo:
        out.append(f"| {r['generator']} | {r['epsilon']:g} | {r['rule']} | "
                   f"{r['rule_test']:.4f} | {r['defaults_test']:.4f} ({r['defaults_solver']}) "
                   f"| {r['tuned']} {r['tuned_test']:.4f} | "
                   f"{r['rule_test'] - r['tuned_test']:+.4f} | "
                   f"{r['defaults_test'] - r['tuned_test']:+.4f} |")
    out.append("")
    for key, label in (("rule", "The leave-one-out rule"), ("defaults", "dpmt's defaults")):
        s = summary(logo, key)
        out.append(f"* {label}: within 0.01 of the tuned best in {s['within']} of "
                   f"{s['cells']} cells; mean gap {s['mean']:+.4f}, worst {s['worst']:+.4f}.")
    falls = not_monotone(logo)
    out.append("* The defaults' test Recall@20 is non-decreasing in ε on "
               + ("every generator." if not falls else "all but " + ", ".join(
                   f"{g} ({d:+.4f} from ε = {e:g} to {f:g})" for g, d, e, f in falls)
                  + f" (one seed, {HELDOUT_USERS:,} test users: per-user recall is in "
                  "[0, 1], so a Recall@20 near 0.3 has a standard error of at most about "
                  "0.01)."))
    return "\n".join(out) + "\n"
