"""Is there a stronger non-private ceiling than dpmt's tuned ALS on ML-100K held-out users?
(issue 28: "tuned iALS per Rendle et al. 2021 ... as the best non-private baselines").

iALS with frequency-scaled regularisation (Rendle, Krichene, Zhang & Koren 2021, "Revisiting
the performance of iALS on item recommendation benchmarks", eq. 3):

    L(W, H) = Σ_{(u,i)∈S} (⟨w_u, h_i⟩ − 1)² + α0 Σ_u Σ_i ⟨w_u, h_i⟩²
              + λ ( Σ_u (|I_u| + α0 |I|)^ν ‖w_u‖² + Σ_i (|U_i| + α0 |U|)^ν ‖h_i‖² )

solved exactly by alternating least squares (dense NumPy: ML-100K is 943 × 1,682). ν = 0 is
dpmt's ALS (a constant ridge λ and gravity α0); ν = 1 is the paper's recommendation.
Evaluated with dpmt's own split and metric (`dpmt quality`'s held-out users protocol:
`prepare_data`, `ranking_metrics`, Recall@20): the held-out users are folded in from their
history with the same user solve; the grid is chosen on validation, reported on test.

    python experiments/ials_ceiling.py [--seeds 0 1 2] [--json experiments/ials_ceiling.json]

Result (2026-12-05, seeds 0 and 1; the run for seed 2 hit its 40-minute limit while sharing
the machine): test Recall@20 of the validation-chosen point, seed 0 / seed 1 —
constant ridge (ν = 0; d = 256, λ = 3, α0 = 0.1 both seeds) 0.4243 / 0.4110; iALS ν = 1
(d = 64, λ = 0.01, α0 = 0.3 both seeds) 0.4071 / 0.4088; EASE 0.4185 / 0.3910. The
frequency-scaled ridge does not beat the constant one here. The ν = 0 point reproduces
dpmt's ALS at the same settings (seed 0: dpmt 0.4235).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np

from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.metrics import ranking_metrics
from dpmt.train.evaluate import ease_metrics
from dpmt.baselines import ease_gram
from dpmt.train.rundir import prepare_data

K = 20


def _dense(r, n_users=None):
    X = np.zeros((n_users or r.n_users, r.n_items), np.float64)
    X[np.asarray(r.user, np.int64), np.asarray(r.item, np.int64)] = 1.0
    return X


def _solve_rows(X, H, lam, alpha0, nu):
    """Rows w_u = argmin Σ_{i∈I_u}(⟨w,h_i⟩−1)² + α0 Σ_i ⟨w,h_i⟩² + λ(|I_u| + α0 m)^ν ‖w‖²."""
    m, d = H.shape
    G0 = alpha0 * H.T @ H
    out = np.zeros((X.shape[0], d))
    n = X.sum(1)
    for u in range(X.shape[0]):
        idx = np.flatnonzero(X[u])
        if idx.size == 0:
            continue
        Hu = H[idx]
        A = G0 + Hu.T @ Hu + lam * (n[u] + alpha0 * m) ** nu * np.eye(d)
        out[u] = np.linalg.solve(A, Hu.sum(0))
    return out


def fit_ials(X, d, lam, alpha0, nu, iters, seed):
    rng = np.random.default_rng(seed)
    n, m = X.shape
    W = rng.normal(0, 0.1 / np.sqrt(d), (n, d))
    H = rng.normal(0, 0.1 / np.sqrt(d), (m, d))
    for _ in range(iters):
        W = _solve_rows(X, H, lam, alpha0, nu)
        H = _solve_rows(X.T, W, lam, alpha0, nu)
    return H


def recall(H, eval_set, lam, alpha0, nu):
    Xh = _dense(eval_set.history)
    W = _solve_rows(Xh, H, lam, alpha0, nu)
    m = ranking_metrics(np.asarray(W, np.float32), np.asarray(H, np.float32),
                        eval_set.history, eval_set.targets, ks=(K,))
    return m["overall"][f"recall@{K}"]


GRID = dict(d=(64, 128, 256), lam=(0.1, 0.3, 1.0, 3.0, 10.0), alpha0=(0.1, 0.3, 1.0),
            nu=(0.0, 1.0))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    base = TrainConfig(data=dict(dataset="ml-100k", split="heldout-users", heldout_users=100))
    rows = []
    for seed in a.seeds:
        split = prepare_data(base.replace(data=dict(seed=seed)), ExecutionConfig(progress=False))
        X = _dense(split.train)
        G = ease_gram(split.train)
        ease = max((ease_metrics(split.train, split.validation, r, ks=(K,), gram=G)["overall"][
            f"recall@{K}"], r) for r in (50.0, 100.0, 200.0, 500.0, 1000.0))
        ease_test = ease_metrics(split.train, split.test, ease[1], ks=(K,), gram=G)[
            "overall"][f"recall@{K}"]
        best = {}
        for d, lam, alpha0, nu in itertools.product(*GRID.values()):
            # ν = 1 multiplies λ by (n + α0 m) ~ 10²–10³: its λ grid is the same on that scale
            lam_eff = lam if nu == 0 else lam / 100.0
            t = time.time()
            H = fit_ials(X, d, lam_eff, alpha0, nu, a.iters, seed)
            val = recall(H, split.validation, lam_eff, alpha0, nu)
            key = "ALS (ν = 0)" if nu == 0 else "iALS (ν = 1)"
            if key not in best or val > best[key]["validation"]:
                best[key] = dict(validation=val, d=d, lam=lam_eff, alpha0=alpha0, H=H,
                                 seconds=time.time() - t)
        for key, b in best.items():
            b["test"] = recall(b.pop("H"), split.test, b["lam"], b["alpha0"],
                               0.0 if key.startswith("ALS") else 1.0)
            rows.append(dict(seed=seed, method=key, **b))
            print(seed, key, {k: (round(v, 4) if isinstance(v, float) else v)
                              for k, v in b.items()}, flush=True)
        rows.append(dict(seed=seed, method="EASE", validation=ease[0], lam=ease[1],
                         test=ease_test))
        print(seed, "EASE", round(ease[0], 4), ease[1], round(ease_test, 4), flush=True)
    for meth in dict.fromkeys(r["method"] for r in rows):
        t = [r["test"] for r in rows if r["method"] == meth]
        print(f"{meth}: test Recall@20 {np.mean(t):.4f} ± {np.std(t):.4f} over seeds {a.seeds}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(grid=GRID, iters=a.iters, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
