"""The measured power of the per-mechanism privacy audits (issue 24, finding 7).

*Power* here: for a mechanism whose true sensitivity is ``r`` × the claimed one (claimed
ε = 2 at δ = 1e-5, so μ_claim = 0.5016 for a Gaussian mechanism), the smallest ``r`` the
audit flags (``ε_lb > claimed ε`` at 95% confidence) in ≥ 95% of repetitions, at the suite's
trial count (4,000 per dataset) and at the full one (50,000, ``make test-slow`` and
``scripts/privacy_audit.py``). Three measurements:

1. :func:`gdp_power` — the exact power of the GDP audit (:func:`dpmt.audit.gdp_lower_bound`
   with the test fixed at the midpoint) on a Gaussian mechanism: every per-mechanism score
   is a 1-D Gaussian with shift ``r·μ_claim`` (in units of its std), so the two event counts
   are binomial and the catch probability is a finite sum (no simulation).
   :func:`smallest_ratio` bisects it for the 95% point.
2. :func:`threshold_power` — the same question for the assumption-free threshold audit
   (:func:`dpmt.audit.epsilon_lower_bound`, held-out Clopper–Pearson, the audit of issue 24),
   by simulation on the same 1-D Gaussians.
3. :func:`catch_rate` — the real audits of :mod:`experiments.audits` (the library's own
   mechanism code), seeds ``0..R−1``, with the twin whose true sensitivity is ``r`` ×
   (:data:`RATIO_TWINS`), and the false-positive rate of the correct mechanism.

For the online mechanisms (Mirror, Combine_D: (ε, δ) claims on Bernoulli releases, threshold
audit) the break is stated as the exact ε of the canary pair
(:func:`experiments.audits.pair_epsilon`) over the claimed ε.

Run: ``python scripts/audit_power.py`` (the tables of ``docs/audit_power.md``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpmt import audit
from experiments import audits

SUITE = 4000
ONLINE_SUITE = 10_000      # Mirror and Combine_D in tests/test_audit.py
FULL = 50_000

#: name -> r ↦ keyword arguments of a twin whose true sensitivity is r × the claimed one
RATIO_TWINS = {
    "ssp_A": lambda r: {"break_kind": "weights", "break_factor": r * r},
    "ssp_b": lambda r: {"break_kind": "clip", "break_factor": r},
    "noisy_gd": lambda r: {"break_factor": r},
    "noisy_gd_poisson": lambda r: {"break_factor": r},
    "counts": lambda r: {"break_kind": "noise", "break_factor": 1.0 / r},
    "spectral_init": lambda r: {"break_kind": "noise", "break_factor": 1.0 / r},
}


def gdp_power(r: float, n: int, *, epsilon: float = 2.0, delta: float = 1e-5,
              confidence: float = 0.95) -> float:
    """Exact probability that the GDP audit with the midpoint test flags a Gaussian mechanism
    of true μ = ``r``·μ_claim (``n`` trials per dataset): ``μ_lb > μ_claim``."""
    mu_c = audit.gdp_mu(epsilon, delta)
    mu = r * mu_c
    t = mu / 2
    p_in, p_out = stats.norm.sf(t - mu), stats.norm.sf(t)
    alpha = 1.0 - confidence
    k_out = np.arange(n + 1)
    pmf_out = stats.binom.pmf(k_out, n, p_out)
    keep = pmf_out > 1e-16
    k_out, pmf_out = k_out[keep], pmf_out[keep]
    # flagged iff CP_lower(k_in) > Φ(μ_c + Φ⁻¹(CP_upper(k_out))); CP_lower increases in k_in
    need = stats.norm.cdf(mu_c + stats.norm.ppf(audit.clopper_pearson_upper(k_out, n,
                                                                            alpha / 2)))
    lower = audit.clopper_pearson_lower(np.arange(n + 1), n, alpha / 2)
    k_min = np.searchsorted(lower, need, side="right")
    return float(np.sum(pmf_out * stats.binom.sf(k_min - 1, n, p_in)))


def smallest_ratio(n: int, *, power: float = 0.95, tol: float = 1e-3, **kw) -> float:
    """The smallest r with :func:`gdp_power` ≥ ``power`` (bisection; the power increases
    in r)."""
    lo, hi = 1.0, 4.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if gdp_power(mid, n, **kw) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def threshold_power(r: float, n: int, reps: int, *, epsilon: float = 2.0,
                    delta: float = 1e-5, confidence: float = 0.95, seed: int = 0) -> float:
    """Share of ``reps`` simulated audits in which the threshold audit
    (:func:`~dpmt.audit.epsilon_lower_bound`) flags a Gaussian mechanism of true μ =
    ``r``·μ_claim."""
    mu = r * audit.gdp_mu(epsilon, delta)
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        b = audit.epsilon_lower_bound(rng.normal(mu, 1, n), rng.normal(0, 1, n), delta,
                                      confidence=confidence)
        hits += b.lower > epsilon
    return hits / reps


def catch_rate(name: str, r: float | None, trials: int, seeds, *, confidence: float = 0.95,
               twin: str | None = None) -> dict:
    """Run the real audit ``name`` over ``seeds``: with ``r`` the :data:`RATIO_TWINS` twin of
    true sensitivity r × the claimed one, with ``twin`` a named twin of
    :data:`experiments.audits.TWINS`, with neither the correct mechanism. Returns the share
    flagged and the bounds."""
    kw = {}
    if r is not None:
        kw = {**RATIO_TWINS[name](r), "broken": True}
    res = [audits.run_audit(name, trials, twin=twin, confidence=confidence, seed=int(s), **kw)
           for s in seeds]
    lbs = np.array([x.epsilon_lb for x in res])
    return {"mechanism": name, "r": r, "twin": twin, "trials": trials, "reps": len(res),
            "confidence": confidence, "claimed": res[0].claimed_epsilon,
            "flagged": float(np.mean([not x.passed for x in res])),
            "lb_mean": float(lbs.mean()), "lb_sd": float(lbs.std()),
            "lb_min": float(lbs.min()), "lb_max": float(lbs.max()),
            "mu_hat_mean": (float(np.mean([x.gdp.mu_estimate for x in res]))
                            if res[0].gdp is not None else None),
            "sensitivity_ratio": res[0].details.get("sensitivity_ratio"),
            "pair_epsilon": res[0].details.get("pair_epsilon")}


def _fmt_rate(d):
    return f"{d['flagged']:.0%} ({d['reps']} seeds; ε_lb {d['lb_mean']:.2f} ± {d['lb_sd']:.2f})"


def main(argv=None) -> int:
    import argparse
    import sys
    import time

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=100, help="seeds per real audit at suite size")
    p.add_argument("--full-reps", type=int, default=20, help="seeds per audit at full size")
    p.add_argument("--sim-reps", type=int, default=200,
                   help="simulated audits per point of the threshold audit's power")
    p.add_argument("--mechanisms", nargs="+", default=list(RATIO_TWINS) + ["mirror",
                                                                          "combiner"])
    p.add_argument("--skip-full", action="store_true")
    p.add_argument("--skip-simulation", action="store_true",
                   help="skip the threshold audit's simulated power (section 2)")
    args = p.parse_args(argv)
    t0 = time.time()

    def log(msg):
        print(f"[{time.time() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    mu_c = audit.gdp_mu(2.0, 1e-5)
    print(f"claimed ε = 2 at δ = 1e-5: μ_claim = {mu_c:.4f}; ε of r·μ_claim: " + ", ".join(
        f"r={r:g}: {audit.gdp_epsilon(r * mu_c, 1e-5):.2f}" for r in (1.1, 1.25, 1.5, 2)))
    print("\n## 1. GDP audit, exact power on a Gaussian mechanism (midpoint test)\n")
    print("| trials/dataset | confidence | P[flag] at r = 1 | 1.1 | 1.25 | 1.5 | 2 | "
          "smallest r flagged in ≥ 95% |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (SUITE, FULL):
        for conf in (0.95, 0.99):
            row = [gdp_power(r, n, confidence=conf) for r in (1.0, 1.1, 1.25, 1.5, 2.0)]
            print(f"| {n} | {conf:.0%} | " + " | ".join(f"{x:.4f}" for x in row)
                  + f" | {smallest_ratio(n, confidence=conf):.3f} |")
    log("exact power done")

    if not args.skip_simulation:
        print("\n## 2. Threshold audit (held-out Clopper-Pearson), simulated, same "
              "mechanisms\n")
        print("| trials/dataset | r = 1.5 | 2 | 3 | simulated audits (95% confidence) |")
        print("|---|---|---|---|---|")
        for n in (SUITE, FULL):
            reps = args.sim_reps if n == SUITE else max(20, args.sim_reps // 10)
            row = [threshold_power(r, n, reps) for r in (1.5, 2.0, 3.0)]
            print(f"| {n} | " + " | ".join(f"{x:.0%}" for x in row) + f" | {reps} |")
        log("threshold power done")

    print("\n## 3. The real audits (experiments.audits), GDP audit, seeds 0..R-1\n")
    print("| mechanism | trials | correct mechanism flagged (99% conf.) | r = 1.25 | r = 1.5 "
          "| named subtle twin (r) |")
    print("|---|---|---|---|---|---|")
    sizes = [(SUITE, args.reps)] + ([] if args.skip_full else [(FULL, args.full_reps)])
    for name in [m for m in args.mechanisms if m in RATIO_TWINS]:
        for n, reps in sizes:
            seeds = range(reps)
            fp = catch_rate(name, None, n, seeds, confidence=0.99)
            rs = (1.25, 1.5) if n == SUITE else (1.1, 1.25)
            c = [catch_rate(name, r, n, seeds) for r in rs]
            tw = catch_rate(name, None, n, seeds, twin="subtle" if n == SUITE else "finest")
            label = "" if n == SUITE else f" (r = {rs[0]:g} / {rs[1]:g})"
            print(f"| {name} | {n}{label} | {_fmt_rate(fp)} | {_fmt_rate(c[0])} | "
                  f"{_fmt_rate(c[1])} | {_fmt_rate(tw)} (r = {tw['sensitivity_ratio']:.3f}) |")
            log(f"{name} at {n} done")

    online = [m for m in args.mechanisms if m in ("mirror", "combiner")]
    if online:
        print("\n## 4. Online mechanisms (threshold audit), exact ε of the canary pair\n")
        print("| mechanism | twin | trials | claimed ε | exact ε of the pair | flagged |")
        print("|---|---|---|---|---|---|")
        for name in online:
            n_suite = ONLINE_SUITE
            for twin in (None, "gross", "subtle", "finest"):
                for n, reps in [(n_suite, min(args.reps, 40))] + (
                        [] if args.skip_full else [(FULL, args.full_reps)]):
                    d = catch_rate(name, None, n, range(reps), twin=twin,
                                   confidence=0.99 if twin is None else 0.95)
                    ex = audits.run_audit(name, 40, twin=twin, exact=True
                                          ).details["pair_epsilon"]
                    kw = audits.TWINS[name].get(twin, {})
                    print(f"| {name} | {twin or 'correct'} {kw} | {n} | {d['claimed']:.3f} | "
                          f"{ex[0]:.3f}–{ex[1]:.3f} | {_fmt_rate(d)} |")
                log(f"{name} {twin} done")
    log("all done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
