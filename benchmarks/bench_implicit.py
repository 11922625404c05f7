"""``dpmt bench --against implicit``: one ALS iteration of the optional ``implicit`` package
(conjugate gradient and exact solves) next to dpmt's non-private and private iterations on the
same matrix, interleaved in one process, and its table in BENCHMARKS.md."""

from __future__ import annotations

import dataclasses
import time


#: conjugate-gradient steps of implicit's ``use_cg`` solver (its ``cg_steps`` default)
IMPLICIT_CG_STEPS = 3


def implicit_available() -> bool:
    """Whether the optional ``implicit`` package (an ALS library) can be imported."""
    try:
        import implicit.als  # noqa: F401
    except Exception:  # noqa: BLE001 - missing, or a broken build: not available
        return False
    return True


def against_implicit(train, w, steps, V, *, repeats: int = 3, private=None,
                     log=print) -> dict:
    """One ALS iteration of ``implicit`` next to dpmt's non-private iteration, interleaved.

    implicit (optional dependency): ``AlternatingLeastSquares(factors=d, iterations=1,
    use_cg=True / False)`` fitted on the ``n_users × n_items`` CSR matrix of the training
    pairs with the dpmt weights as values (one ``fit`` = one user and one item solve).
    dpmt: ``steps.solve_users(V)`` (the exact user step) then the item step with no noise
    (``ItemNoise()``), with the exact gravity term ``α0·UᵀU``, once with each item solve
    ("project": eigh + Cholesky per item even without noise; "shift": s = 0, Cholesky only —
    the plain weighted ALS; "cg": ``cfg.cg_steps`` warm-started conjugate-gradient steps for
    the item and the user systems, matrix-free (no Gram matrix formed) as implicit's CG
    solver does — its starting points are
    the exact U at ``V`` and ``V`` itself, computed once; a fixed step count does the same
    work from any start). ``private = (noise, sigma_gramian, key)``: also time dpmt's
    *private* iteration (exact user step, noisy Gramian, the noisy item step with
    ``steps.cfg.item_solve``), for the ratio private / non-private. Each round times every
    run back to back; the best round of each is reported, with the ratios. implicit runs with
    BLAS limited to one thread (its own advice; it parallelises over rows with OpenMP, all
    cores). The objectives differ (implicit: implicit-feedback ALS over all items with
    confidences, the ``YᵀY`` trick; dpmt: weighted ridge over the observed pairs); the per-row
    work (a d × d system per row, ``nnz·d²`` for the statistics) is the same order.
    """
    import jax
    import numpy as np
    import scipy.sparse as sp
    from implicit.als import AlternatingLeastSquares

    from dpmt.solvers.ssp import gramian, noisy_gramian
    from dpmt.solvers.steps import ItemNoise, ssp_item_step

    cfg = steps.cfg
    d = cfg.dim
    csr = sp.csr_matrix((np.asarray(w, np.float32), (np.asarray(train.user),
                                                     np.asarray(train.item))),
                        shape=(train.n_users, train.n_items))
    dp = {}
    # name: (item solve, user solve, CG steps); CG at dpmt's step count, at implicit's (3)
    # where that differs, and the CG item solve with the exact user step (TrainConfig's solves)
    modes = {"project": ("project", "exact", cfg.cg_steps),
             "shift": ("shift", "exact", cfg.cg_steps), "cg": ("cg", "cg", cfg.cg_steps),
             "cg_exact_users": ("cg", "exact", cfg.cg_steps)}
    if cfg.cg_steps != IMPLICIT_CG_STEPS:
        modes[f"cg_{IMPLICIT_CG_STEPS}"] = ("cg", "cg", IMPLICIT_CG_STEPS)
    for name, (item_solve, user_solve, cg_steps) in modes.items():
        st = dataclasses.replace(steps, cfg=cfg.replace(
            item_solve=item_solve, user_solve=user_solve, cg_steps=cg_steps))
        st.item_step = ssp_item_step(st)
        dp[name] = st
    U_start = jax.block_until_ready(dp["shift"].solve_users(V))

    def dpmt_iteration(st, noise=ItemNoise(), sigma_gram=0.0, key=None):
        """User step, (noisy) Gramian, item step; without noise: the exact ALS iteration
        (with ``user_solve="cg"`` the user step starts from ``U_start``)."""
        k_gram, k_item = jax.random.split(key) if key is not None else (None, None)
        U = st.solve_users(V, U_start)
        G = gramian(U) if key is None else noisy_gramian(U, k_gram, sigma_gram)
        extra = cfg.gravity * G if cfg.gravity > 0 else None
        V_new, _ = st.item_step.update(st.item_step.init(None, V), V, U, k_item, noise,
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

    runs = {f"dpmt_nonprivate_{name}": lambda st=st: dpmt_iteration(st)
            for name, st in dp.items()}
    runs["implicit_cg"] = lambda: implicit_iteration(True)
    runs["implicit_exact"] = lambda: implicit_iteration(False)
    if private is not None:
        # the same solves as the non-private row it is compared with (the user step is never
        # released, so its solve is not a privacy question): only the noise differs
        runs[f"dpmt_private_{cfg.item_solve}"] = \
            lambda: dpmt_iteration(dp[cfg.item_solve], *private)
    for fn in runs.values():          # warm-up: compiles dpmt's kernels, loads implicit's
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
    import implicit

    ratios = {}
    if private is not None:
        ratios["ratio_dpmt_private_over_nonprivate"] = \
            best[f"dpmt_private_{cfg.item_solve}"] / best[f"dpmt_nonprivate_{cfg.item_solve}"]
    return {"implicit_version": getattr(implicit, "__version__", "?"), **ratios,
            "factors": d, "regularization": cfg.reg, "repeats": repeats,
            "cg_steps": cfg.cg_steps,
            "ratio_dpmt_cg_over_implicit_cg": best["dpmt_nonprivate_cg"] / best["implicit_cg"],
            "ratio_dpmt_cg_over_implicit_exact":
                best["dpmt_nonprivate_cg"] / best["implicit_exact"],
            "seconds": best, "seconds_all": times,
            "ratio_dpmt_project_over_implicit_cg":
                best["dpmt_nonprivate_project"] / best["implicit_cg"],
            "ratio_dpmt_project_over_implicit_exact":
                best["dpmt_nonprivate_project"] / best["implicit_exact"],
            "ratio_dpmt_shift_over_implicit_cg":
                best["dpmt_nonprivate_shift"] / best["implicit_cg"],
            "ratio_dpmt_shift_over_implicit_exact":
                best["dpmt_nonprivate_shift"] / best["implicit_exact"],
            "note": "dpmt: one exact user step + non-private item step (weighted ridge over "
                    "observed pairs); implicit: one fit iteration (user + item solves, "
                    "implicit-feedback objective) on the same CSR pattern"}


def implicit_lines(results: list[dict]) -> list[str]:
    """The side by side with implicit of every result that has one (``--against implicit``)."""
    out = []
    names = {"dpmt_nonprivate_shift": "dpmt, non-private, shift solve (s = 0: exact ridge)",
             "dpmt_nonprivate_project": "dpmt, non-private, project solve (eigh + Cholesky)",
             "dpmt_nonprivate_cg": "dpmt, non-private, CG item and user solves (warm-started, "
                                   "matrix-free)",
             "dpmt_nonprivate_cg_exact_users": "dpmt, non-private, CG item solve, exact user "
                                               "step (TrainConfig's default solves)",
             f"dpmt_nonprivate_cg_{IMPLICIT_CG_STEPS}": "dpmt, non-private, CG item and user "
                                                         f"solves, {IMPLICIT_CG_STEPS} steps "
                                                         "(implicit's count)",
             "dpmt_private_cg": "dpmt, **private** SSP iteration (ε = 5 plan), CG item and "
                                "user solves",
             "dpmt_private_shift": "dpmt, **private** SSP iteration (ε = 5 plan), shift",
             "dpmt_private_project": "dpmt, **private** SSP iteration (ε = 5 plan), project",
             "implicit_cg": "implicit ALS, conjugate gradient (3 CG steps)",
             "implicit_exact": "implicit ALS, exact (Cholesky)"}
    for r in results:
        a = r.get("against_implicit")
        if not a:
            continue
        sec = a["seconds"]
        ref = "dpmt_nonprivate_shift" if "dpmt_nonprivate_shift" in sec else next(iter(sec))
        out += ["", f"### Side by side with implicit ({r['interactions']:,} interactions, "
                    f"{r['n_users']:,} users × {r['n_items']:,} items, d = {r['dim']}, one "
                    "process, interleaved)", "",
                f"implicit {a['implicit_version']}, `AlternatingLeastSquares(factors={a['factors']}"
                f", regularization={a['regularization']}, iterations=1)`, BLAS limited to one "
                f"thread (its advice; its own threads use every core); best of "
                f"{a['repeats']} rounds, each timing every row back to back.", "",
                "| one iteration | seconds (rounds) | this / dpmt non-private shift |",
                "|---|---:|---:|"]
        for k, v in sec.items():
            rounds = ", ".join(f"{x:.2f}" for x in a["seconds_all"][k])
            out.append(f"| {names.get(k, k)} | {v:.2f} ({rounds}) | {v / sec[ref]:.2f} |")
        out.append("")
        if "implicit_exact" in sec and "implicit_cg" in sec:
            out.append(f"* dpmt's non-private iteration is {sec['implicit_exact'] / sec[ref]:.2f}x "
                       f"as fast as implicit's exact one (target ≥ 1) and "
                       f"{sec[ref] / sec['implicit_cg']:.2f}x implicit's CG time (target ≤ 3).")
        if "dpmt_nonprivate_cg" in sec and "implicit_cg" in sec:
            out.append(f"* With conjugate gradients on both sides ({a.get('cg_steps', '?')} "
                       f"warm-started steps in dpmt, 3 in implicit), dpmt's non-private "
                       f"iteration takes {sec['dpmt_nonprivate_cg'] / sec['implicit_cg']:.2f}x "
                       f"implicit's CG time and is "
                       f"{sec['implicit_exact'] / sec['dpmt_nonprivate_cg']:.2f}x as fast as "
                       "implicit's exact one.")
        if "dpmt_nonprivate_cg_exact_users" in sec and "implicit_cg" in sec:
            out.append(f"* With dpmt's default solves (CG items, exact users) it takes "
                       f"{sec['dpmt_nonprivate_cg_exact_users'] / sec['implicit_cg']:.2f}x "
                       "implicit's CG time.")
        k3 = f"dpmt_nonprivate_cg_{IMPLICIT_CG_STEPS}"
        if k3 in sec and "implicit_cg" in sec:
            out.append(f"* With {IMPLICIT_CG_STEPS} CG steps on both sides it takes "
                       f"{sec[k3] / sec['implicit_cg']:.2f}x implicit's CG time.")
        if "ratio_dpmt_private_over_nonprivate" in a:
            out.append(f"* dpmt's private iteration takes "
                       f"{a['ratio_dpmt_private_over_nonprivate']:.2f}x its non-private one "
                       "(target ≤ 1.5).")
        out.append("* The objectives differ: implicit solves implicit-feedback ALS over all "
                   "items with confidences (the `YᵀY` trick), dpmt weighted ridge over the "
                   "observed pairs with a d × d system per row; this compares engineering "
                   "throughput only.")
    return out
