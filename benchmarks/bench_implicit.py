"""``dpmt bench --against implicit``: one ALS iteration of the optional ``implicit`` package
(conjugate gradient and exact solves) next to dpmt's non-private iteration, its private SSP
iteration and **its default private path** (what ``dpmt train`` runs: :class:`TrainConfig`'s
defaults at the benchmark's ε and d), on the same matrix, interleaved in one process, with
the ratios to implicit's CG and exact iterations; and its table in BENCHMARKS.md."""

from __future__ import annotations

import dataclasses
import time


#: conjugate-gradient steps of implicit's ``use_cg`` solver (its ``cg_steps`` default)
IMPLICIT_CG_STEPS = 3
#: untimed iterations of each private run before the timed ones: the first compiles the item
#: step and runs the exact user step (``user_solve="cg"`` has no previous U yet); the second
#: compiles the CG user step
PRIVATE_WARMUP = 2
#: the key of the default private path's row (``seconds``, ``ratio_over_implicit_cg``, ...)
DEFAULT_PATH = "dpmt_private_default"


def implicit_available() -> bool:
    """Whether the optional ``implicit`` package (an ALS library) can be imported."""
    try:
        import implicit.als  # noqa: F401
    except Exception:  # noqa: BLE001 - missing, or a broken build: not available
        return False
    return True


def default_config(dim: int, epsilon: float, *, repeats: int, seed: int = 0,
                   user_cg_steps: int | None = None):
    """The config ``dpmt train --dim DIM --epsilon EPS --seed SEED`` trains with (every other
    setting :class:`~dpmt.config.TrainConfig`'s default, the auto ones left to the rules of
    :mod:`dpmt.train.defaults`), with at least :data:`PRIVATE_WARMUP` + ``repeats``
    iterations so that each round times an iteration of its own (an iteration's work does not
    depend on how many there are; only the calibrated noise scale does). ``user_cg_steps``:
    the CG user step's steps, when not the default's (``dpmt bench --user-cg-steps``)."""
    from dpmt.config import TrainConfig

    base = TrainConfig()
    return base.replace(dim=dim, iterations=max(base.iterations, PRIVATE_WARMUP + repeats),
                        data=dict(seed=seed), privacy=dict(epsilon=epsilon),
                        user_cg_steps=base.user_cg_steps if user_cg_steps is None
                        else user_cg_steps)


def private_runs(train, ssp_cfg, *, repeats: int, execution=None, noise_seed: int = 0) -> dict:
    """The private runs the comparison times, each made by fit's own
    :func:`dpmt.train.training_run.setup` (counts, auto settings, weights, layouts, steps):
    ``dpmt_private_<item_solve>``, the benchmark's SSP config ``ssp_cfg`` (adaptive weights,
    λ = 1); :data:`DEFAULT_PATH`, :func:`default_config` at ``ssp_cfg``'s d, ε, seed and
    user CG steps.
    Each has :data:`PRIVATE_WARMUP` + ``repeats`` iterations (reproducible noise: a
    benchmark, its models are never published)."""
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.train.training_run import setup

    n = PRIVATE_WARMUP + repeats
    cfgs = {f"dpmt_private_{ssp_cfg.ssp.item_solve}": ssp_cfg.replace(iterations=n),
            DEFAULT_PATH: default_config(ssp_cfg.dim, ssp_cfg.privacy.epsilon, repeats=repeats,
                                         seed=ssp_cfg.data.seed,
                                         user_cg_steps=ssp_cfg.user_cg_steps)}
    return {name: setup(train, cfg, execution=execution,
                        noise=NoiseSource.from_seed(noise_seed))
            for name, cfg in cfgs.items()}


def run_description(run) -> dict:
    """What a private run actually runs, from its *resolved* config (``run.model_cfg``, the
    auto settings decided by setup) and its method: the row's label and the JSON's record."""
    c = run.model_cfg
    out = {"solver": run.method.name, "config_solver": c.solver, "user_solve": c.user_solve,
           "weights": c.weights, "reg": c.reg, "epsilon": c.privacy.epsilon,
           "delta": c.privacy.delta,
           "dim": c.dim, "iterations": c.iterations, "gravity": c.gravity,
           "cg_steps": c.item_cg_steps, "user_cg_steps": c.user_cg_steps}
    if run.method.name == "ssp":
        out["item_solve"] = c.ssp.item_solve
    else:
        out.update(gd_steps=c.gd.steps, gd_optimizer=c.gd.optimizer,
                   gd_learning_rate=c.gd.learning_rate,
                   gd_sampling_rate=c.gd.sampling_rate, gd_encoder=c.gd.encoder)
    from dpmt.config import TrainConfig

    base, given = TrainConfig().flat_dict(), run.cfg.flat_dict()
    out["differs_from_train_defaults"] = sorted(k for k in given if given[k] != base[k])
    return out


def run_label(desc: dict, default: bool = False) -> str:
    """The table's label of a private row, from :func:`run_description` (so it names what ran)."""
    if desc["solver"] == "gd":
        how = (f"noisy GD ({desc['gd_steps']} {desc['gd_optimizer']} steps"
               f"{'' if desc.get('gd_sampling_rate') is None else ', sampled'})")
    else:
        how = f"SSP, item_solve {desc['item_solve']}"
    text = (f"{how}, user_solve {desc['user_solve']}, {desc['weights']} weights, "
            f"λ = {desc['reg']:g}, ε = {desc['epsilon']:g}")
    if default:
        return f"dpmt, **private, the default path** (`dpmt train`: {text})"
    return f"dpmt, **private** {text}"


def against_implicit(train, w, steps, V, *, repeats: int = 3, private_runs=None,
                     log=print) -> dict:
    """One ALS iteration of ``implicit`` next to dpmt's iterations, interleaved.

    implicit (optional dependency): ``AlternatingLeastSquares(factors=d, iterations=1,
    use_cg=True / False)`` fitted on the ``n_users × n_items`` CSR matrix of the training
    pairs with the dpmt weights as values (one ``fit`` = one user and one item solve).
    dpmt, non-private: ``steps.solve_users(V)`` then the item step with no noise
    (``ItemNoise()``), with the exact gravity term ``α0·UᵀU``, once with each item solve
    ("project": eigh + Cholesky per item even without noise; "shift": s = 0, Cholesky only —
    the plain weighted ALS; "cg": a non-private config's item steps,
    :data:`~dpmt.config.EXACT_CG_STEPS` (``steps.cfg`` is the benchmark's resolved private
    config, whose 8 are for noisy systems) / ``cfg.user_cg_steps`` warm-started
    conjugate-gradient steps for the item / the user systems, matrix-free (no Gram matrix
    formed) as implicit's CG solver does — TrainConfig's solves; its starting points are the exact U at ``V`` and
    ``V`` itself, computed once; a fixed step count does the same work from any start).

    ``private_runs``: name → :class:`~dpmt.train.training_run.TrainingRun` (from
    :func:`private_runs`: the SSP run and the default path, :data:`DEFAULT_PATH`), each timed
    by the library's own iteration, :func:`dpmt.train.loop.iterate` — :data:`PRIVATE_WARMUP`
    untimed iterations, then one per round (the releases charged as fit charges them).

    Each round times every run back to back; the best round of each is reported
    (``seconds``), with ``ratio_over_implicit_cg`` / ``ratio_over_implicit_exact`` for every
    row (its best seconds over implicit's). implicit runs with BLAS limited to one thread (its
    own advice; it parallelises over rows with OpenMP, all cores). The objectives differ
    (implicit: implicit-feedback ALS over all items with confidences, the ``YᵀY`` trick;
    dpmt: weighted ridge over the observed pairs); the per-row work (a d × d system per row,
    ``nnz·d²`` for the statistics) is the same order.
    """
    import jax
    import numpy as np
    import scipy.sparse as sp
    from implicit.als import AlternatingLeastSquares

    from dpmt.config import EXACT_CG_STEPS
    from dpmt.solvers.ssp import gramian
    from dpmt.solvers.steps import ItemNoise, ssp_item_step
    from dpmt.train.loop import iterate, run_epsilon

    cfg = steps.cfg
    d = cfg.dim
    csr = sp.csr_matrix((np.asarray(w, np.float32), (np.asarray(train.user),
                                                     np.asarray(train.item))),
                        shape=(train.n_users, train.n_items))
    dp = {}
    # name: (item solve, user solve, item CG steps, user CG steps); CG at dpmt's step counts
    # (TrainConfig's solves: these systems carry no noise, so its non-private item steps),
    # at implicit's (3 and 3) where they differ, and the CG item solve with the exact user step
    item_cg, user_cg = EXACT_CG_STEPS, cfg.user_cg_steps
    modes = {"project": ("project", "exact", item_cg, user_cg),
             "shift": ("shift", "exact", item_cg, user_cg),
             "cg": ("cg", "cg", item_cg, user_cg),
             "cg_exact_users": ("cg", "exact", item_cg, user_cg)}
    if (item_cg, user_cg) != (IMPLICIT_CG_STEPS, IMPLICIT_CG_STEPS):
        modes[f"cg_{IMPLICIT_CG_STEPS}"] = ("cg", "cg", IMPLICIT_CG_STEPS, IMPLICIT_CG_STEPS)
    for name, (item_solve, user_solve, cg_steps, user_cg_steps) in modes.items():
        st = dataclasses.replace(steps, cfg=cfg.replace(
            user_solve=user_solve, cg_steps=cg_steps, user_cg_steps=user_cg_steps,
            ssp=dict(item_solve=item_solve)))
        st.item_step = ssp_item_step(st)
        dp[name] = st
    U_start = jax.block_until_ready(dp["shift"].solve_users(V))

    def dpmt_iteration(st):
        """User step, Gramian, item step without noise: the exact ALS iteration (with
        ``user_solve="cg"`` the user step starts from ``U_start``)."""
        U = st.solve_users(V, U_start)
        extra = cfg.gravity * gramian(U) if cfg.gravity > 0 else None
        V_new, _ = st.item_step.update(st.item_step.init(None, V), V, U, None, ItemNoise(),
                                       extra, float(train.n_users))
        return V_new

    def implicit_iteration(use_cg):
        # implicit's own advice: BLAS single-threaded (it parallelises over rows itself)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, "blas"):
            model = AlternatingLeastSquares(factors=d, regularization=cfg.reg, iterations=1,
                                            use_cg=use_cg, calculate_training_loss=False,
                                            random_state=0)
            model.fit(csr, show_progress=False)
        return model.item_factors

    def private_iteration(run):
        """The next iteration of ``run``, as fit runs it."""
        if run.state.iteration >= run.model_cfg.iterations:
            raise RuntimeError(f"private run planned for {run.model_cfg.iterations} iterations "
                               "only: build it with private_runs(..., repeats=repeats)")
        return iterate(run, run.state.iteration).V

    runs = {f"dpmt_nonprivate_{name}": lambda st=st: dpmt_iteration(st)
            for name, st in dp.items()}
    runs["implicit_cg"] = lambda: implicit_iteration(True)
    runs["implicit_exact"] = lambda: implicit_iteration(False)
    private_runs = dict(private_runs or {})
    for name, run in private_runs.items():
        runs[name] = lambda run=run: private_iteration(run)
    for name, fn in runs.items():     # warm-up: compiles dpmt's kernels, loads implicit's
        for _ in range(PRIVATE_WARMUP if name in private_runs else 1):
            jax.block_until_ready(fn())
    times: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(repeats):
        for k, fn in runs.items():
            t = time.perf_counter()
            jax.block_until_ready(fn())
            times[k].append(time.perf_counter() - t)
        log(f"against implicit, round {r}: "
            + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
    best = {k: float(min(v)) for k, v in times.items()}
    # part of every private row's seconds: iterate's ε so far (dp_accounting over every
    # release of the run), timed once more on its own for the breakdown
    accounting = {}
    for name, run in private_runs.items():
        t = time.perf_counter()
        run_epsilon(run)
        accounting[name] = time.perf_counter() - t
    import implicit

    out = {"implicit_version": getattr(implicit, "__version__", "?"),
           "factors": d, "regularization": cfg.reg, "repeats": repeats,
           "cg_steps": item_cg, "user_cg_steps": cfg.user_cg_steps, "seconds": best,
           "seconds_all": times,
           # every row's best seconds over implicit's: "× implicit CG", "× implicit exact"
           "ratio_over_implicit_cg": {k: v / best["implicit_cg"] for k, v in best.items()},
           "ratio_over_implicit_exact": {k: v / best["implicit_exact"]
                                         for k, v in best.items()},
           "private_runs": {k: run_description(run) for k, run in private_runs.items()},
           "private_warmup_iterations": PRIVATE_WARMUP,
           # seconds of the ε accounting each private iteration ends with, after the last
           "private_accounting_seconds": accounting,
           "ratio_dpmt_cg_over_implicit_cg": best["dpmt_nonprivate_cg"] / best["implicit_cg"],
           "ratio_dpmt_cg_over_implicit_exact":
               best["dpmt_nonprivate_cg"] / best["implicit_exact"],
           "ratio_dpmt_project_over_implicit_cg":
               best["dpmt_nonprivate_project"] / best["implicit_cg"],
           "ratio_dpmt_project_over_implicit_exact":
               best["dpmt_nonprivate_project"] / best["implicit_exact"],
           "ratio_dpmt_shift_over_implicit_cg":
               best["dpmt_nonprivate_shift"] / best["implicit_cg"],
           "ratio_dpmt_shift_over_implicit_exact":
               best["dpmt_nonprivate_shift"] / best["implicit_exact"],
           "note": "dpmt non-private: one user step + non-private item step (weighted ridge "
                   "over observed pairs); dpmt private: dpmt.train.loop.iterate of a run "
                   "made by dpmt.train.training_run.setup; implicit: one fit iteration (user "
                   "+ item solves, implicit-feedback objective) on the same CSR pattern"}
    ssp_key = f"dpmt_private_{cfg.ssp.item_solve}"
    if ssp_key in best:
        # the same solves as the non-private row it is compared with (the user step is never
        # released, so its solve is not a privacy question): only the noise differs
        out["ratio_dpmt_private_over_nonprivate"] = \
            best[ssp_key] / best[f"dpmt_nonprivate_{cfg.ssp.item_solve}"]
    if DEFAULT_PATH in best:
        out["ratio_default_over_implicit_cg"] = out["ratio_over_implicit_cg"][DEFAULT_PATH]
        out["ratio_default_over_implicit_exact"] = \
            out["ratio_over_implicit_exact"][DEFAULT_PATH]
        if ssp_key in best:
            out["ratio_default_over_ssp"] = best[DEFAULT_PATH] / best[ssp_key]
    return out


#: labels of the non-private and implicit rows
ROW_NAMES = {
    "dpmt_nonprivate_shift": "dpmt, non-private, shift solve (s = 0: exact ridge)",
    "dpmt_nonprivate_project": "dpmt, non-private, project solve (eigh + Cholesky)",
    "dpmt_nonprivate_cg": "dpmt, non-private, CG item and user solves (warm-started, "
                          "matrix-free: TrainConfig's default solves)",
    "dpmt_nonprivate_cg_exact_users": "dpmt, non-private, CG item solve, exact user step",
    f"dpmt_nonprivate_cg_{IMPLICIT_CG_STEPS}": "dpmt, non-private, CG item and user solves, "
                                               f"{IMPLICIT_CG_STEPS} steps (implicit's count)",
    # JSON files from before the private rows recorded what they ran
    "dpmt_private_cg": "dpmt, **private** SSP iteration (ε = 5 plan), CG item and user solves",
    "dpmt_private_shift": "dpmt, **private** SSP iteration (ε = 5 plan), shift",
    "dpmt_private_project": "dpmt, **private** SSP iteration (ε = 5 plan), project",
    "implicit_cg": "implicit ALS, conjugate gradient (3 CG steps)",
    "implicit_exact": "implicit ALS, exact (Cholesky)"}


def row_label(a: dict, key: str) -> str:
    """A row's label: a private row's from what it ran (``private_runs``), else
    :data:`ROW_NAMES`."""
    desc = a.get("private_runs", {}).get(key)
    if desc is not None:
        return run_label(desc, default=key == DEFAULT_PATH)
    return ROW_NAMES.get(key, key)


def implicit_lines(results: list[dict]) -> list[str]:
    """The side by side with implicit of every result that has one (``--against implicit``)."""
    out = []
    for r in results:
        a = r.get("against_implicit")
        if not a:
            continue
        sec = a["seconds"]
        cg, ex = sec.get("implicit_cg"), sec.get("implicit_exact")
        out += ["", f"### Side by side with implicit ({r['interactions']:,} interactions, "
                    f"{r['n_users']:,} users × {r['n_items']:,} items, d = {r['dim']}, one "
                    "process, interleaved)", "",
                f"implicit {a['implicit_version']}, `AlternatingLeastSquares(factors={a['factors']}"
                f", regularization={a['regularization']}, iterations=1)`, BLAS limited to one "
                f"thread (its advice; its own threads use every core); best of "
                f"{a['repeats']} rounds, each timing every row back to back. The private rows "
                "are `dpmt.train.loop.iterate` on runs made by fit's `setup`"
                + (f" ({a['private_warmup_iterations']} untimed iterations first)"
                   if "private_warmup_iterations" in a else "") + ".", "",
                "| one iteration | seconds (rounds) | × implicit CG | × implicit exact |",
                "|---|---:|---:|---:|"]
        for k, v in sec.items():
            rounds = ", ".join(f"{x:.2f}" for x in a["seconds_all"][k])
            x_cg = f"{v / cg:.2f}" if cg else "–"
            x_ex = f"{v / ex:.2f}" if ex else "–"
            label = row_label(a, k)
            if k == DEFAULT_PATH:
                out.append(f"| {label} | **{v:.2f}** ({rounds}) | **{x_cg}** | **{x_ex}** |")
            else:
                out.append(f"| {label} | {v:.2f} ({rounds}) | {x_cg} | {x_ex} |")
        out.append("")
        if DEFAULT_PATH in sec and cg and ex:
            line = (f"* dpmt's default private path takes {sec[DEFAULT_PATH] / cg:.2f}x "
                    f"implicit's CG iteration (target ≤ 2) and {sec[DEFAULT_PATH] / ex:.2f}x "
                    "its exact one")
            if "ratio_default_over_ssp" in a:
                line += f"; {a['ratio_default_over_ssp']:.2f}x the private SSP iteration"
            out.append(line + ".")
        if "dpmt_nonprivate_cg" in sec and cg and ex:
            out.append(f"* dpmt's non-private iteration with its default solves (CG items and "
                       f"users, {a.get('cg_steps', '?')} / "
                       f"{a.get('user_cg_steps', a.get('cg_steps', '?'))} warm-started steps; "
                       "implicit's CG "
                       f"takes 3) takes {sec['dpmt_nonprivate_cg'] / cg:.2f}x implicit's CG "
                       f"time (target ≤ 1.5) and {sec['dpmt_nonprivate_cg'] / ex:.2f}x its "
                       "exact time (target ≤ 1).")
        ref = "dpmt_nonprivate_shift"
        if ref in sec and cg and ex:
            out.append(f"* With exact (Cholesky) solves, dpmt's non-private iteration is "
                       f"{ex / sec[ref]:.2f}x as fast as implicit's exact one and takes "
                       f"{sec[ref] / cg:.2f}x implicit's CG time.")
        k3 = f"dpmt_nonprivate_cg_{IMPLICIT_CG_STEPS}"
        if k3 in sec and cg:
            out.append(f"* With {IMPLICIT_CG_STEPS} CG steps on both sides it takes "
                       f"{sec[k3] / cg:.2f}x implicit's CG time.")
        if "ratio_dpmt_private_over_nonprivate" in a:
            out.append(f"* dpmt's private SSP iteration takes "
                       f"{a['ratio_dpmt_private_over_nonprivate']:.2f}x its non-private one "
                       "(target ≤ 1.5).")
        out.append("* The objectives differ: implicit solves implicit-feedback ALS over all "
                   "items with confidences (the `YᵀY` trick), dpmt weighted ridge over the "
                   "observed pairs with a d × d system per row; this compares engineering "
                   "throughput only.")
    return out
