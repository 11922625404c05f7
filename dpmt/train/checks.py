"""The invariants every sensitivity of a training run assumes, checked at ``fit``'s entry.

One rating per (user, item) pair, finite values inside the stated rating range, per-user
weight budgets Σ_i w_ij² ≤ β, a checkpoint whose ledger belongs to this run, a run that fits
in memory: enforced here, at the one entry point every path goes through (the CLI,
:func:`dpmt.train.rundir.run`, the benchmark, user code), before anything is released.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.data.ratings import Ratings
from dpmt.data.splits import EvalSet
from dpmt.errors import ConfigError, DataError
from dpmt.registry import TASKS
from dpmt.solvers.steps import estimate_bytes
from dpmt.train.plan import PrivacyPlan, beta_of


def check_inputs(train, config, execution, validation, test):
    if not isinstance(train, Ratings):
        raise DataError(f"fit() trains on a dpmt.data.Ratings (got {type(train).__name__}); "
                        "build one with dpmt.data.load(...) or Ratings.from_raw(...)")
    cfg = TrainConfig() if config is None else config
    if not isinstance(cfg, TrainConfig):
        raise ConfigError(f"config must be a dpmt.TrainConfig (got {type(cfg).__name__}); "
                          "for a dict use TrainConfig.from_dict(d)")
    ex = ExecutionConfig() if execution is None else execution
    if not isinstance(ex, ExecutionConfig):
        raise ConfigError(f"execution must be a dpmt.ExecutionConfig (got "
                          f"{type(ex).__name__})")
    for name, es in (("validation", validation), ("test", test)):
        if es is not None and not isinstance(es, EvalSet):
            raise DataError(f"{name} must be a dpmt.data.EvalSet (history + targets; got "
                            f"{type(es).__name__}), e.g. split.test of per_user_split(...)")
        if es is not None and (es.history.n_items != train.n_items
                               or es.targets.n_items != train.n_items):
            raise DataError(f"{name} indexes {es.history.n_items} items but the training set "
                            f"has {train.n_items}: build both from one split")
    if train.nnz == 0:
        raise DataError("the training set is empty: nothing to train on")
    if train.n_users < 2 or train.n_items < 2:
        raise DataError(f"{train.n_users} user(s) × {train.n_items} item(s) is too small to "
                        "train a model or to protect anyone in it")
    check_memory(cfg, train)
    check_one_rating_per_pair(train)
    if not np.all(np.isfinite(np.asarray(train.value, np.float64))):
        raise DataError("the training ratings contain NaN or infinite values")
    if TASKS[cfg.task].labelled:
        lo, hi = cfg.data.rating_bounds
        v = np.asarray(train.value, np.float64)
        if v.min() < lo or v.max() > hi:
            raise DataError(f"ratings must lie in the rating range [{lo:g}, {hi:g}] that the "
                            f"private mean's sensitivity assumes (got {v.min():g}..{v.max():g}); "
                            "set --rating-range LOW,HIGH")
    return cfg, ex, (test if test is not None else validation)


def check_memory(cfg: TrainConfig, train) -> None:
    """Refuse, before any release, a run that cannot fit in this machine's memory."""

    need = estimate_bytes(train.n_users, train.n_items, train.nnz, cfg.dim)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > 0.9 * have:
        raise ConfigError(f"this run needs about {need / 2**30:.1f} GiB ({train.n_users} users, "
                          f"{train.n_items} items, d = {cfg.dim}) and the machine has "
                          f"{have / 2**30:.1f} GiB: lower --dim, or shard it over hosts")


def warn_if_delta_protects_nobody(cfg: TrainConfig, noisy_n: float | None) -> None:
    """δ ≥ 1/n allows a mechanism that publishes one user's data outright: warn (n is the
    released noisy user count; nothing exact is read)."""

    if noisy_n is not None and noisy_n > 0 and cfg.privacy.delta >= 1.0 / noisy_n:
        # a power of ten at least 10× below 1/n̂ (a fixed suggestion would itself be ≥ 1/n
        # on large data: 1e-5 is, from 100,000 users on)
        suggest = 10.0 ** (math.floor(math.log10(1.0 / noisy_n)) - 1)
        warnings.warn(f"δ = {cfg.privacy.delta:g} is at least 1/n̂ (n̂ ≈ {noisy_n:.0f} users): an "
                      "(ε, δ) guarantee with δ ≥ 1/n allows publishing some user's data "
                      f"outright; use δ well below 1/n (e.g. --delta {suggest:g})",
                      stacklevel=3)


def check_one_rating_per_pair(train) -> None:
    """Every sensitivity assumes a user contributes at most once per item (the count of item
    i moves by ≤ 1, Σ_i w_ij² counts each item once). Duplicates would break them silently."""
    key = train.user.astype(np.int64) * np.int64(train.n_items) + train.item.astype(np.int64)
    key = np.sort(key)
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.size:
        k = int(key[dup[0]])
        u, i = divmod(k, int(train.n_items))
        raise DataError(
            f"the training set has {dup.size} duplicate (user, item) pair(s), e.g. user "
            f"{train.user_ids[u]!r} × item {train.item_ids[i]!r}; user-level privacy assumes one "
            "rating per pair: load with on_duplicate='keep-last' (CLI: --on-duplicate "
            "keep-last) or deduplicate the data")


def check_weight_budget(cfg: TrainConfig, train, w: np.ndarray) -> None:
    """Σ_i w_ij² ≤ β for every user: what every item-step sensitivity assumes."""
    if not cfg.private:
        return
    w = np.asarray(w, np.float64)
    if w.shape != (train.nnz,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RuntimeError("internal error: the weights are not finite, non-negative, one "
                           "per rating")
    spent = np.bincount(train.user, weights=w * w, minlength=train.n_users)
    beta = beta_of(cfg)
    if spent.max(initial=0.0) > beta * (1 + 1e-6):
        raise RuntimeError(f"internal error: a user's Σ w² = {spent.max():.6g} exceeds β = "
                           f"{beta:g}; refusing to release anything")


def check_resumed_ledger(saved: dict, plan: PrivacyPlan | None, cfg: TrainConfig,
                         head_only: bool = False) -> None:
    """Refuse (DataError) a checkpoint whose ledger is not ``plan``'s after its iterations.
    ``head_only``: only what is known before the rules resolve the iterations (the privacy
    setting, the releases made once); the full check comes with the resolved plan."""
    ledger = saved["ledger"]
    if (plan is None) != (ledger is None):
        raise DataError("the checkpoint's privacy setting differs from this run's")
    if ledger is None:
        return
    done, head = saved["iteration"], len(plan.head())
    if head_only:
        if len(ledger) < head:
            raise DataError(f"the checkpoint records {len(ledger)} releases; this run makes "
                            f"{head} before its first iteration: it belongs to another run")
        return
    expected = head + sum(len(it.all()) for it in plan.iterations[:done])
    if len(ledger) != expected or done > cfg.iterations:
        raise DataError(f"the checkpoint records {len(ledger)} releases after {done} "
                        f"iterations; this run's plan has {expected}: it belongs to another "
                        "run")


# -- helpers ---------------------------------------------------------------------------------
