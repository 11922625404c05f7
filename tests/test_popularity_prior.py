"""The popularity prior from the released counts and its rule (dpmt.train.defaults)."""

import json

import numpy as np
import pytest

import dpmt
from dpmt.config import ExecutionConfig, GDConfig, TrainConfig
from dpmt.data import make_synthetic, per_user_split
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.train.defaults import popularity_prior, reg_for, resolve, weights_for
from dpmt.train.methods.noisy_gd import GD_PRIOR
from dpmt.train.methods.ssp import PRIOR_MAX, PRIOR_SCALE
from dpmt.train.evaluate import evaluate, private_popularity_metrics

QUIET = ExecutionConfig(progress=False)


@pytest.fixture(scope="module")
def split():
    r = make_synthetic(n_users=400, n_items=150, n_interactions=8000, alpha=1.0, seed=3,
                       rank=4, noise=0.1, concentration=0.1)
    return per_user_split(r, seed=0)


@pytest.fixture(scope="module")
def model(split):
    return dpmt.fit(split.train, TrainConfig(dim=4,
                                             iterations=1, weights="uniform", budget=10.0,
                                             solver="ssp", data=dict(dataset="synthetic"),
                                             privacy=dict(epsilon=2.0)),
                    execution=QUIET)


def test_rule_follows_its_formula_and_is_zero_without_privacy():
    r = PRIOR_SCALE / 5000
    assert popularity_prior(1000, 5.0, True, "ssp") == pytest.approx(r * r)
    assert popularity_prior(10_000, 5.0, True, "gd") == GD_PRIOR
    assert popularity_prior(10_000, 5.0, True, "gd", "uniform") == 0.0   # GD + uniform: none
    assert popularity_prior(10, 0.1, True, "ssp") == PRIOR_MAX    # capped
    assert popularity_prior(10, 0.1, True, "gd") == GD_PRIOR
    assert popularity_prior(1e6, 20.0, True, "ssp") < 1e-3
    for solver in ("ssp", "gd"):
        assert popularity_prior(1000, 5.0, False, solver) == 0.0
    # SSP: more users or more budget, less prior
    assert popularity_prior(20_000, 5.0, True, "ssp") < popularity_prior(10_000, 5.0, True, "ssp")
    assert weights_for(700, 20.0) == "uniform" and weights_for(40_000, 1.0) == "uniform"
    assert weights_for(40_000, 5.0) == "adaptive" and weights_for(5_000, 20.0) == "adaptive"
    assert weights_for(99_999, 1.0) == "uniform" and weights_for(100_000, 1.0) == "adaptive"
    cfg, why = resolve(TrainConfig(privacy=dict(epsilon=5.0)), 943.0)          # ML-100K-sized, GD
    assert cfg.weights == "uniform" and cfg.popularity_prior == 0.0
    assert "uniform weights: η = 0" in dict((k, r) for k, _, r in why)["popularity_prior"]
    cfg, _ = resolve(TrainConfig(privacy=dict(epsilon=20.0)), 943.0)           # n̂·ε ≈ 1.9·10⁴
    assert cfg.weights == "uniform" and cfg.popularity_prior == 0.0
    cfg, _ = resolve(TrainConfig(privacy=dict(epsilon=5.0)),
                     40_000.0)         # the 50k synthetic's size
    assert cfg.weights == "adaptive" and cfg.popularity_prior == GD_PRIOR
    cfg, why = resolve(TrainConfig(solver="ssp", privacy=dict(epsilon=5.0)), PRIOR_SCALE / 5.0)
    assert cfg.popularity_prior == pytest.approx(1.0) and cfg.weights == "uniform"
    # SSP's CG item solve states its steps too (8 for the noisy systems)
    assert [w[0] for w in why] == ["weights", "reg", "cg_steps", "popularity_prior"]
    assert cfg.cg_steps == 8
    cfg, why = resolve(TrainConfig(popularity_prior=0.3, weights="tail", reg=3.0,
                                   gd=GDConfig(steps=20)), 600.0)
    assert cfg.popularity_prior == 0.3 and why == []            # an explicit value is kept


def test_fit_resolves_the_prior_from_the_released_user_count(model, tmp_path):
    # uniform weights need no counts, but the prior does: the counts are released (charged)
    assert model.item_counts is not None
    assert any(r.name == "item_counts" for r in model.ledger.releases)
    eta = model.config.popularity_prior
    assert 0 < eta <= PRIOR_MAX and "n̂ =" in model.auto_settings
    assert "chosen by rule" in model.report()
    loaded = Model.load(model.save(tmp_path / "m"))
    assert loaded.config.popularity_prior == eta                  # the resolved value is saved


def test_zero_prior_releases_no_counts_for_uniform_weights(split):
    m = dpmt.fit(split.train, TrainConfig(dim=4,
                                          iterations=1, weights="uniform", budget=10.0,
                                          popularity_prior=0.0, solver="ssp",
                                          data=dict(dataset="synthetic"),
                                          privacy=dict(epsilon=2.0)),
                 execution=QUIET)
    assert m.item_counts is None and m.item_prior() is None
    assert not any(r.name == "item_counts" for r in m.ledger.releases)


def test_a_huge_prior_ranks_as_private_popularity(model, split):
    """η → ∞ must reproduce the private-popularity baseline exactly (users with u ≠ 0):
    fails if the prior's sign, its counts or its per-user scale were wrong."""
    saved, saved_counts = model.config, model.item_counts
    # the released counts are integers: break their ties (below one count) in the same way
    # for both rankings, which would otherwise order tied items differently
    counts = (np.maximum(np.asarray(saved_counts, np.float64), 0.0)
              + np.linspace(0.0, 0.5, len(saved_counts)))
    model.config, model.item_counts = saved.replace(popularity_prior=1e5), counts
    try:
        m = evaluate(model, split.train, split.test)
    finally:
        model.config, model.item_counts = saved, saved_counts
    pp = private_popularity_metrics(counts, split.train, split.test, {})
    assert m["overall"]["recall@20"] == pytest.approx(pp["overall"]["recall@20"], abs=1e-9)


def test_the_prior_changes_the_ranking_and_the_metrics_agree_with_recommend(model, split):
    es = split.test
    U = model.user_embeddings(es.history)
    u = int(np.flatnonzero(es.history.user_counts() > 0)[0])
    rows = es.history.by_user.row(u)[0]
    ids, scores = model.recommend(es.history.item_ids[rows], k=10)
    prior = model.item_prior()
    s = model.item_embeddings @ U[u] + np.linalg.norm(U[u]) * prior
    s[rows] = -np.inf
    np.testing.assert_array_equal(model.item_index(ids), np.argsort(-s, kind="stable")[:10])
    plain = model.item_embeddings @ U[u]
    plain[rows] = -np.inf
    assert not np.array_equal(np.argsort(-plain)[:10], np.argsort(-s)[:10])


def test_models_of_the_old_format_are_refused_with_a_reason(model, tmp_path):
    """Format 1 published the noise seed (issue 24): such a model is not loaded as private."""
    path = model.save(tmp_path / "old")
    meta = json.loads((path / "model.json").read_text())
    meta["version"] = 1
    (path / "model.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="format 1, .*seed.*train it again"):
        Model.load(path)


def test_negative_prior_is_refused():
    with pytest.raises(ConfigError, match="popularity_prior"):
        TrainConfig(popularity_prior=-1.0)


def test_the_ridge_rule_moves_lambda_only_for_noisy_gd():
    from dpmt.config import BASE_REG

    assert reg_for(740, 1.0, True, "gd") == 10.0 and reg_for(1199, 1.0, True, "gd") == 10.0
    # the light ridge between heavy noise and little noise (ML-100K at ε = 2 … 20)
    assert reg_for(1200, 1.0, True, "gd") == 1.0 and reg_for(943, 20.0, True, "gd") == 1.0
    assert reg_for(29_999, 1.0, True, "gd") == 1.0
    assert reg_for(30_000, 1.0, True, "gd") == BASE_REG == 3.0
    assert reg_for(40_000, 1.0, True, "gd") == BASE_REG
    assert reg_for(3000, 5.0, True, "ssp") == BASE_REG         # SSP: not measured, unchanged
    assert reg_for(740, 1.0, True, "ssp") == BASE_REG          # SSP: not measured, unchanged
    assert reg_for(740, 1.0, False, "gd") == BASE_REG          # non-private
    assert reg_for(None, 1.0, True, "gd") == BASE_REG          # no released n̂: no input
    cfg, why = resolve(TrainConfig(privacy=dict(epsilon=1.0)), 943.0)
    assert cfg.reg == 10.0 and any(k == "reg" and "< 1200" in r for k, _, r in why)
    cfg, why = resolve(TrainConfig(privacy=dict(epsilon=5.0)), 943.0)
    assert cfg.reg == 1.0 and any(k == "reg" and "[1200, 30000)" in r for k, _, r in why)
    cfg, _ = resolve(TrainConfig(reg=0.5, privacy=dict(epsilon=1.0)), 943.0)  # a user's λ is kept
    assert cfg.reg == 0.5
