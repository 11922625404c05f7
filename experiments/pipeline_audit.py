"""Empirical privacy audit of the whole training run (``dpmt.fit``), user-level.

The per-mechanism audits (:mod:`experiments.audits`) check each release alone. This one checks
the *composed* run as a black box: private counts → weights read from them → user solve →
noisy Gramian Ĝ_U → SSP item step (Â and b̂), every iteration, exactly as ``dpmt.fit`` runs it,
against the ε its own ledger reports (``model.epsilon``). ``path="default"`` audits what
``dpmt train`` runs without options instead: TrainConfig's solver (noisy GD) with
``weights="auto"`` (the rule reads the released counts), its twin with the gradient noise off.

**Neighbours** (privacy unit: one user, add/remove-one). ``D`` is a synthetic implicit-feedback
data set (:func:`dpmt.data.make_synthetic`) plus ``canary_items`` fresh item ids that no user
rates; ``D' = D +`` one canary user who rates exactly those items. Both data sets have the same
item index space (the canary's items exist in ``D`` with no ratings); ``D'`` has one more user
id. The canary is as influential as the sensitivities allow on the b-statistics: its items are
rated by nobody else, ``budget = canary_items`` gives it the full weight budget Σ w² = β on
them, and its first user solve is clipped to ‖u‖ = C when it rates enough items (the
data-independent initial V has a shared direction, so the exact solve grows with the number
of items; :func:`canary_solve_norms` checks it, and ``details["canary_clipped_fraction"]``
reports it: 6 items of the tiny data and 16 of the ML-100K-sized data are clipped in every
run of the tests and of RESULTS.md; 4 of the tiny data are not in 0.3% of the runs, 8 of the
ML-100K-sized data mostly are not).

**Trials.** Each trial is one full ``dpmt.fit`` with ``TrainConfig(noise_seed=s)`` (a
reproducible noise source, so that the audit is deterministic); the seed drives
every random stream (counts noise, weights, initial V, Ĝ_U, Â, b̂), and the seeds of all
trials are distinct (``D`` and ``D'`` never share one). The data (hence every array shape)
is the same in all trials of a data set, so ``fit`` compiles once per data set.

**Score** (a function of the released V and of the public canary item ids only; it reads no
noise and no internal state): ``Σ_{i ∈ canary items} ⟨v_i, 1/√d⟩``, the projection of the
canary items' embeddings on the shared direction of the initialisation, along which the
canary's clipped embedding (hence its b-contribution w·u) points. Without the canary those rows
are ``(Π(Â_i) + α0 Ĝ_U + λI)⁻¹ e_i`` with symmetric noise; with it ``b̂_i`` gains ``w_i u``.

**Broken twin** (:func:`b_noise_scaled`): the same pipeline with the b̂ noise multiplied by
``broken_factor`` (default 0: switched off) inside the training loop, while the ledger still
records the calibrated b̂ release, so the model claims the same ε. Without the canary the
canary items' rows are then 0 (exactly with a factorisation; ~1e-8 with the default
``item_solve="cg"``, whose iterates converge to M⁻¹·0 from the previous V); with it they are
not, and the audit must report
``ε_lb > claimed ε``.

The bounds are :func:`dpmt.audit.epsilon_lower_bound` (held-out Clopper–Pearson). A lower
bound far below the claim is *not* evidence that the accounting is tight: the score only
sees V (the counts and Ĝ_U reach it only through post-processing) and a few hundred trials
cannot certify more than ``log(n/3.7)`` even for a perfect separation.

Run: ``python scripts/pipeline_audit.py`` (see :func:`main`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

from dpmt.audit import AuditResult, epsilon_lower_bound, format_table
from dpmt.config import route
from dpmt.errors import ConfigError, check_range

__all__ = ["SIZES", "PATHS", "canary_datasets", "pipeline_config", "canary_score",
           "b_noise_scaled", "canary_solve_norms", "audit_pipeline", "main"]

#: data-set sizes (users, items, interactions) of the synthetic base data, before the canary
SIZES = {
    "tiny": (200, 60, 2000),          # the default test: ~0.05 s per fit after compilation
    "ml-100k": (943, 1682, 100_000),  # MovieLens-100K's sizes: ~0.1 s per fit
}

MECHANISM = "whole training run (dpmt.fit: counts, weights, Ĝ_U, SSP Â/b̂)"
MECHANISM_DEFAULT = "whole training run, default path (dpmt.fit: counts, auto weights, noisy GD)"

# trial seeds: seed · _SEED_STRIDE + 2·t + (0 for D, 1 for D'), all < 2**31 - 1
_SEED_STRIDE = 2 ** 20


# ----------------------------------------------------------------------------------------
# Data and configuration
# ----------------------------------------------------------------------------------------
def canary_datasets(size: str = "tiny", *, canary_items: int = 6, data_seed: int = 0):
    """``(D, D', canary)``: the base data without and with the canary user, and the canary's
    item indices (the last ``canary_items`` items, rated by nobody in ``D``).

    ``size`` is a key of :data:`SIZES` or a tuple ``(n_users, n_items, n_interactions)``.
    """
    from dpmt.data import make_synthetic
    from dpmt.data.ratings import Ratings

    n_users, n_items, n_inter = SIZES[size] if isinstance(size, str) and size in SIZES \
        else _custom_size(size)
    check_range("canary_items", canary_items, low=1, integer=True)
    base = make_synthetic(n_users=n_users, n_items=n_items, n_interactions=n_inter,
                          seed=data_seed, name="pipeline-audit")
    m = base.n_items + int(canary_items)
    canary = np.arange(base.n_items, m)
    item_ids = np.arange(m)
    # the item catalogue (canary items included) is public: both neighbours release a row
    # for every item, so the canary's presence is not readable from the item list
    D = Ratings(user=base.user, item=base.item, value=base.value,
                user_ids=np.arange(base.n_users), item_ids=item_ids, name="audit-D",
                items_public=True)
    Dp = Ratings(user=np.concatenate([base.user, np.full(len(canary), base.n_users)]),
                 item=np.concatenate([base.item, canary]),
                 value=np.concatenate([base.value, np.ones(len(canary), np.float32)]),
                 user_ids=np.arange(base.n_users + 1), item_ids=item_ids, name="audit-D'",
                 items_public=True)
    return D, Dp, canary


def _custom_size(size):
    try:
        n_users, n_items, n_inter = (int(x) for x in size)
    except (TypeError, ValueError):
        raise ConfigError(f"size must be one of {', '.join(SIZES)} or (users, items, "
                          f"interactions) (got {size!r})") from None
    return n_users, n_items, n_inter


#: the audited paths: SSP with adaptive weights, and what ``dpmt train`` runs by default
#: (TrainConfig's solver and ``weights="auto"``, resolved from the released counts)
PATHS = ("ssp", "default")


def pipeline_config(epsilon: float = 1.0, delta: float = 1e-5, *, canary_items: int = 6,
                    path: str = "ssp", **overrides):
    """The audited :class:`~dpmt.TrainConfig`: d = 3, λ = 1 (the canary's embedding reaches
    the clip C), one iteration, ``budget = canary_items`` (the canary's full weight budget
    lands on its items), and by ``path``:

    * ``"ssp"``: SSP, adaptive weights (so the private counts are released and read),
      gravity on (so Ĝ_U is released);
    * ``"default"``: TrainConfig's own solver and ``weights="auto"`` (the weights, the
      regularisation and the prior chosen by rule from the released n̂ and ε), as
      ``dpmt train`` runs without options.

    ``overrides`` replace any field (e.g. ``iterations=2``, ``weights="uniform"``)."""
    import dpmt

    if path not in PATHS:
        raise ConfigError(f"path must be one of {', '.join(PATHS)} (got {path!r})")
    kw = dict(dim=3, iterations=1, budget=float(canary_items), reg=1.0,
              epsilon=float(epsilon), delta=float(delta))
    if path == "ssp":
        kw.update(weights="adaptive", solver="ssp")
    kw.update(overrides)
    return dpmt.TrainConfig(**route(kw))


def canary_score(V: np.ndarray, canary: np.ndarray) -> float:
    """The membership score of one release: ``Σ_{i ∈ canary} ⟨v_i, 1/√d⟩`` (reads the released
    item embeddings and the public canary item ids only)."""
    V = np.asarray(V, np.float64)
    return float(V[np.asarray(canary)].sum(axis=0).sum() / math.sqrt(V.shape[1]))


@contextlib.contextmanager
def b_noise_scaled(factor: float = 0.0):
    """The broken twin: inside this context the training loop's item steps add ``factor``
    times the calibrated b̂ noise (SSP) or gradient noise (noisy GD; 0: none), while the
    ledger still records the calibrated release (the model claims the same ε). Yields a
    dict counting the patched item steps (calls of the methods' ``noise``)."""
    from dpmt.registry import SOLVERS

    calls = {"patched_item_steps": 0}
    with contextlib.ExitStack() as stack:
        for name in ("ssp", "gd"):
            method = SOLVERS[name]

            def broken(releases, real=method.noise):
                noise = real(releases)
                calls["patched_item_steps"] += 1
                return noise._replace(sigma_b=noise.sigma_b * factor,
                                      gd_multiplier=noise.gd_multiplier * factor)

            stack.enter_context(mock.patch.object(method, "noise", broken))
        yield calls


def canary_solve_norms(Dp, canary, cfg, seeds) -> np.ndarray:
    """The norm of the canary's first exact user solve (before clipping) in the runs with
    these seeds: ``(Σ_{i∈canary} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_{i∈canary} v_i`` on the initial V of
    ``dpmt.train.loop`` (same key derivation as ``fit``). A diagnostic of the harness (it reads
    the initial V, which the score never does): ≥ ``cfg.user_clip`` means the canary's
    b-contribution has the largest norm the sensitivity allows."""
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.train.training_run import initial_items

    out = []
    for s in seeds:
        k_init = NoiseSource.from_seed(int(s)).jax_key("init")
        V = np.asarray(initial_items(k_init, Dp.n_items, cfg.dim, cfg.init_scale), np.float64)
        Vc = V[np.asarray(canary)]
        M = Vc.T @ Vc + cfg.gravity * (V.T @ V) + cfg.reg * np.eye(cfg.dim)
        out.append(np.linalg.norm(np.linalg.solve(M, Vc.sum(axis=0))))
    return np.asarray(out)


# ----------------------------------------------------------------------------------------
# The audit
# ----------------------------------------------------------------------------------------
def _trial_seeds(seed: int, trials: int, side: int) -> np.ndarray:
    return seed * _SEED_STRIDE + 2 * np.arange(trials) + side


def audit_pipeline(trials: int = 300, *, broken: bool = False, epsilon: float = 1.0,
                   delta: float = 1e-5, size="tiny", canary_items: int = 6,
                   broken_factor: float = 0.0, confidence: float = 0.95, seed: int = 0,
                   data_seed: int = 0, data=None, progress=None,
                   **config_overrides) -> AuditResult:
    """Audit ``dpmt.fit`` (or, with ``broken=True``, its twin with the b̂ noise scaled by
    ``broken_factor``) on the canary neighbours of :func:`canary_datasets`.

    Args:
      trials: full training runs per data set (each with its own seed).
      epsilon, delta: the target of the audited :func:`pipeline_config`; the claim audited is
        the ε the run's ledger reports (``model.epsilon``, ≤ the target), at ``delta``.
      size, canary_items, data_seed: the data (:func:`canary_datasets`); or pass ``data`` =
        ``(D, D', canary)`` to reuse one built already.
      confidence: of the one-sided lower bound.
      seed: selects the trial seeds (``seed·2²⁰ + 2t`` on D, ``+ 1`` on D'); ``0 ≤ seed < 2048``.
      progress: optional callable ``(done, total)`` called after every fit.
      config_overrides: other :class:`~dpmt.TrainConfig` fields (see :func:`pipeline_config`).

    Returns:
      an :class:`~dpmt.audit.AuditResult`; ``details`` has the data sizes, the releases
      (name, noise std, sensitivity), the share of D' runs whose canary solve is clipped to C
      (:func:`canary_solve_norms`), score means, the seconds per fit and, for the twin, the
      number of patched item steps.
    """
    import dpmt

    check_range("trials", trials, low=20, high=_SEED_STRIDE // 2 - 1, integer=True)
    check_range("seed", seed, low=0, high=(2 ** 31 - 1) // _SEED_STRIDE - 1, integer=True)
    trials = int(trials)
    D, Dp, canary = data if data is not None else canary_datasets(
        size, canary_items=canary_items, data_seed=data_seed)
    cfg = pipeline_config(epsilon, delta, canary_items=len(canary), **config_overrides)
    ex = dpmt.ExecutionConfig(progress=False)
    claimed: set[float] = set()
    releases = None
    first_fit: list[float] = []
    later: list[float] = []
    done = 0
    patch = b_noise_scaled(broken_factor) if broken else contextlib.nullcontext({})
    with patch as calls:
        scores = {}
        for side, R in ((0, D), (1, Dp)):
            s = np.empty(trials)
            for t, trial_seed in enumerate(_trial_seeds(seed, trials, side)):
                t0 = time.perf_counter()
                # the trial's noise from its own seed: deterministic audits, and each trial's
                # draws independent of every other's (as fresh OS-entropy secrets would be)
                model = dpmt.fit(R, cfg.replace(privacy=dict(noise_seed=int(trial_seed))),
                                 execution=ex)
                (first_fit if t == 0 else later).append(time.perf_counter() - t0)
                s[t] = canary_score(model.item_embeddings, canary)
                claimed.add(round(float(model.epsilon), 12))
                if releases is None:
                    releases = [(r.name, float(r.noise_std), float(r.sensitivity))
                                for r in model.ledger.releases]
                    resolved = model.config          # weights="auto" as the rule chose
                done += 1
                if progress is not None:
                    progress(done, 2 * trials)
            scores[side] = s
    if len(claimed) != 1:
        raise RuntimeError(f"the runs' ledgers disagree on ε: {sorted(claimed)}")
    if broken and calls["patched_item_steps"] != 2 * trials * cfg.iterations:
        raise RuntimeError(f"the broken twin patched {calls['patched_item_steps']} item steps, "
                           f"expected {2 * trials * cfg.iterations}: the loop no longer builds "
                           "its noise with its method's noise()")
    claimed_eps = claimed.pop()
    norms = canary_solve_norms(Dp, canary, cfg, _trial_seeds(seed, trials, 1)) / cfg.user_clip
    bound = epsilon_lower_bound(scores[1], scores[0], delta, confidence=confidence)
    details = {
        "users_D": D.n_users, "users_D_prime": Dp.n_users, "items": D.n_items,
        "ratings_D": D.nnz, "canary_items": len(canary), "target_epsilon": cfg.privacy.epsilon,
        "config": {k: getattr(resolved, k) for k in ("solver", "weights", "dim",
                                                     "iterations", "budget", "user_clip",
                                                     "gravity", "reg")},
        "canary_solve_over_clip_min": float(norms.min()),
        "canary_clipped_fraction": float(np.mean(norms >= 1.0)),
        "releases": releases, "broken_factor": broken_factor if broken else None,
        "compile_seconds": float(sum(first_fit)),
        "seconds_per_fit": float(np.mean(later)) if later else float("nan"),
        "score_mean_in": float(scores[1].mean()), "score_mean_out": float(scores[0].mean()),
        "score_sd_out": float(scores[0].std()),
        **({"patched_item_steps": calls["patched_item_steps"]} if broken else {}),
    }
    what = "b-hat noise" if cfg.solver == "ssp" else "gradient noise"
    kind = f"{what} off" if broken_factor == 0 else f"{what} x{broken_factor:g}"
    mechanism = MECHANISM if cfg.solver == "ssp" else MECHANISM_DEFAULT
    return AuditResult(mechanism, bool(broken), kind + ", ledger unchanged" if broken else "",
                       claimed_eps, float(delta), trials, bound, details)


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------
def main(argv=None) -> int:
    """Run the real audit and its broken twin (and optionally real-only audits at other ε),
    print the table (:func:`dpmt.audit.format_table`) and a line per audit on stderr.
    Exit status 0 when every real audit passes and the twin is caught."""
    p = argparse.ArgumentParser(prog="pipeline_audit",
                                description="Empirical privacy audit of the whole dpmt.fit "
                                            "pipeline, with a broken twin.")
    p.add_argument("--trials", type=int, default=1000, help="fits per data set (real run)")
    p.add_argument("--twin-trials", type=int, default=300, help="fits per data set (twin)")
    p.add_argument("--epsilon", type=float, default=1.0, help="target ε of the audited run")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--extra-epsilons", type=float, nargs="*", default=[],
                   help="also audit the real run (no twin) at these target ε")
    p.add_argument("--size", default="ml-100k", choices=list(SIZES))
    p.add_argument("--path", default="ssp", choices=list(PATHS),
                   help="ssp: SSP with adaptive weights; default: what `dpmt train` runs "
                        "(noisy GD, weights=auto)")
    p.add_argument("--canary-items", type=int, default=16)
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--broken-factor", type=float, default=0.0,
                   help="the twin's b-hat (SSP) or gradient (GD) noise, relative to the "
                        "calibrated one")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="folder for pipeline_audit.md / .json")
    args = p.parse_args(argv)

    t0 = time.time()
    data = canary_datasets(args.size, canary_items=args.canary_items)
    common = dict(delta=args.delta, confidence=args.confidence, seed=args.seed, data=data,
                  iterations=args.iterations, path=args.path)

    def report(r):
        print(f"[{time.time() - t0:7.1f}s] {r.summary()}; {r.details['seconds_per_fit']:.3f} "
              f"s/fit after {r.details['compile_seconds']:.1f} s for the first fits",
              file=sys.stderr, flush=True)
        return r

    real = report(audit_pipeline(args.trials, epsilon=args.epsilon, **common))
    twin = report(audit_pipeline(args.twin_trials, epsilon=args.epsilon, broken=True,
                                 broken_factor=args.broken_factor, **common))
    pairs = [(real, twin)]
    for eps in args.extra_epsilons:
        pairs.append((report(audit_pipeline(args.trials, epsilon=eps, **common)), None))
    D, Dp, canary = data
    table = format_table(pairs)
    print(table)
    print(f"\ndata: synthetic {args.size}-sized, D = {D.n_users} users × {D.n_items} items "
          f"({D.nnz} ratings, {len(canary)} of the items rated only by the canary), D' = D + "
          f"the canary; twin: {args.twin_trials} trials per data set; "
          f"{time.time() - t0:.0f} s in all")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "pipeline_audit.md").write_text(table + "\n")
        (out / "pipeline_audit.json").write_text(json.dumps(
            [[r.to_dict() if r is not None else None for r in pair] for pair in pairs],
            indent=2, default=str))
    ok = all(r.passed for r, _ in pairs) and not twin.passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
