"""Extension points are registries (issue 27): a solver defined and registered in this file
alone trains through ``fit``, ``dpmt compare`` and ``dpmt tune`` with no other change.

The toy solver, "b-only": one Gaussian release per iteration,
b̂_i = Σ_j w_ij y_ij u_j + e_i (L2 sensitivity √β·C·y_max, since ‖u_j‖ ≤ C, |y| ≤ y_max and
Σ_i w_ij² ≤ β), then θ_i = b̂_i / λ: SSP without the quadratic term. Its noise comes from
dpmt's 64-bit sampler, one normal per coordinate, so its draws are n_items·d.
"""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmt
from _cli import cli
from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.errors import ConfigError
from dpmt.privacy import PlannedRelease
from dpmt.registry import SOLVERS, Registry
from dpmt.solvers import noise as dpmt_noise
from dpmt.solvers.steps import ItemState, ItemStep
from dpmt.train.methods import ItemMethod

QUIET = ExecutionConfig(progress=False)
DATASET = "synthetic:users=300,items=60,interactions=6000"


class BOnly(ItemMethod):
    name = "b-only"
    help = "toy: θ_i = b̂_i / λ"

    def releases(self, cfg):
        return [PlannedRelease("b", math.sqrt(cfg.budget) * cfg.user_clip * cfg.y_max)]

    def draws(self, cfg, n_items, n_features):
        return [n_items * cfg.dim]

    def noise(self, releases):
        return 0.0 if releases is None else releases[0].noise_std

    def item_step(self, steps, train, item_features):
        user, item = jnp.asarray(train.user), jnp.asarray(train.item)
        m, reg = train.n_items, steps.cfg.reg
        y = 1.0 if steps.labels is None else steps.labels

        def update(state, V, U, key, sigma, extra=None, num_users=None):
            b = jax.ops.segment_sum((steps.weights * y)[:, None] * U[user], item,
                                    num_segments=m)
            b = b + sigma * dpmt_noise.normal(key, b.shape)
            return b / reg, state

        return ItemStep(lambda key, V: ItemState(), update)


@pytest.fixture
def toy():
    entry = SOLVERS.register(BOnly())
    yield entry
    SOLVERS.unregister("b-only")


def test_a_registered_solver_trains_through_fit_with_its_own_releases(toy):
    r = dpmt.data.make_synthetic(n_users=300, n_items=60, n_interactions=6000, seed=1)
    cfg = TrainConfig(solver="b-only", weights="uniform", budget=10.0, dim=4, iterations=2,
                      data=dict(dataset="synthetic"), privacy=dict(epsilon=3.0, noise_seed=0))
    model = dpmt.fit(r, cfg, execution=QUIET)
    names = [x.name for x in model.ledger.releases]
    # the method's releases, then the default's private fold-in choice (ε ≥ 2)
    assert names == ["item_counts", "iter0/gramian", "iter0/b", "iter1/gramian", "iter1/b",
                     "fold_in_choice"]
    b = [x for x in model.ledger.releases if x.name.endswith("/b")]
    assert all(x.sensitivity == pytest.approx(math.sqrt(10.0) * 0.1) for x in b)
    assert all(x.draws == 60 * 4 and x.delta > 0 for x in b)      # the sampler's δ, charged
    assert model.epsilon <= 3.0 * (1 + 1e-9)
    V = np.asarray(model.item_embeddings)
    assert V.shape == (60, 4) and np.all(np.isfinite(V)) and np.abs(V).sum() > 0
    # the toy's step, not SSP's: the same seed under SSP gives another model
    ssp = dpmt.fit(r, cfg.replace(solver="ssp"), execution=QUIET)
    assert not np.allclose(ssp.item_embeddings, V)
    # what the method does not define falls back to the base class's defaults
    assert toy.default_prior(300.0, 3.0, "uniform")[0] == 0.0


def test_a_registered_solver_is_a_cli_choice_of_compare_and_tune(toy, tmp_path, capsys):
    args = ["--dataset", DATASET, "--dim", "4", "--iterations", "1", "--quiet"]
    rc = cli(["compare", *args, "--solvers", "b-only", "--weight-grid", "uniform",
              "--epsilons", "3", "--no-baselines", "--out", tmp_path / "cmp"])
    assert rc == 0, capsys.readouterr().err
    cells = json.loads((tmp_path / "cmp" / "cells.json").read_text())["rows"]
    trained = [c for c in cells if c["solver"] != "-"]      # "-": the released baselines
    assert trained and {c["solver"] for c in trained} == {"b-only"}
    # (compare's split, per-user: the training ratings are the same, so tune's fits reuse
    # the kernels compare's compiled)
    rc = cli(["tune", *args, "--solver", "b-only", "--grid", "reg=1,10",
              "--selection", "private", "--out", tmp_path / "tune"])
    assert rc == 0, capsys.readouterr().err
    model = dpmt.Model.load(tmp_path / "tune")
    assert model.config.solver == "b-only"
    assert any(x.name.endswith("/b") for x in model.ledger.releases)


def test_unknown_and_duplicate_names_are_refused_clearly(toy):
    with pytest.raises(ConfigError, match="solver must be one of ssp, gd, b-only"):
        TrainConfig(solver="nope")
    with pytest.raises(ConfigError, match="registered already"):
        SOLVERS.register(BOnly())
    with pytest.raises(ConfigError, match="not a registered extension"):
        SOLVERS.unregister("ssp")
    reg = Registry("thing", {})
    with pytest.raises(ConfigError, match="non-empty string 'name'"):
        reg.register(object())
    assert "b-only" in SOLVERS and list(SOLVERS)[-1] == "b-only"


def test_without_the_registration_the_name_is_unknown():
    assert "b-only" not in SOLVERS
    with pytest.raises(ConfigError, match="solver must be one of"):
        TrainConfig(solver="b-only")


# -- a weighting from this file alone ---------------------------------------------------------
class FirstK:
    """Toy weighting: each user's first k = β ratings in the data's order, weight 1. Reads
    no counts, so with SSP a private run releases none."""

    name, help = "first-k", "toy: a user's first β ratings"
    reads_counts, integer_budget, by_rule, uses_mu = False, True, False, False

    def check(self, cfg):
        if not float(cfg.budget).is_integer():
            raise ConfigError("first-k: budget must be an integer")

    def weights(self, cfg, user, item, noisy_counts, noisy_n_users, seed):
        user = np.asarray(user)
        order = np.argsort(user, kind="stable")
        rank = np.empty(len(user), np.int64)
        starts = np.searchsorted(user[order], user[order])
        rank[order] = np.arange(len(user)) - starts
        return (rank < int(cfg.budget)).astype(np.float64)


def test_a_registered_weighting_trains_and_its_budget_is_enforced():
    from dpmt.registry import WEIGHTINGS

    WEIGHTINGS.register(FirstK())
    try:
        # the data and d of the solver test above: the SSP kernels its second fit compiled
        # are reused
        r = dpmt.data.make_synthetic(n_users=300, n_items=60, n_interactions=6000, seed=1)
        cfg = TrainConfig(solver="ssp", weights="first-k", budget=5.0,
                          dim=4, iterations=1, popularity_prior=0.0, data=dict(dataset="synthetic"),
                          privacy=dict(epsilon=2.0))
        model = dpmt.fit(r, cfg, execution=QUIET)
        assert [x.name for x in model.ledger.releases] == ["iter0/gramian", "iter0/ssp_A",
                                                           "iter0/ssp_b"]    # no counts
        with pytest.raises(ConfigError, match="first-k: budget must be an integer"):
            TrainConfig(weights="first-k", budget=2.5)
        w = FirstK().weights(cfg, r.user, r.item, None, None, 0)
        assert np.bincount(r.user, weights=w ** 2).max() <= 5.0       # Σ w² ≤ β per user
    finally:
        WEIGHTINGS.unregister("first-k")
