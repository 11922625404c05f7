"""Noisy GD's steps rule (issues 28, 29): ``gd.steps=None`` takes 20 steps, or K = FAST_STEPS
(8) at 20/K times the learning rate where n̂·ε ≥ 10⁵, each step's noise scaled by √(K/20) so the run's privacy is the
plan's (calibrated for 20 steps before n̂ is released) exactly."""

import dataclasses
import math

import dp_accounting
import numpy as np
import pytest

from dpmt.config import ExecutionConfig, GDConfig, NonPrivate, TrainConfig
from dpmt.config_groups import PLANNED_GD_STEPS
from dpmt.data import make_synthetic
from dpmt.privacy import epsilon_of
from dpmt.train.defaults import resolve
from dpmt.train.loop import fit
from dpmt.train.methods import method_of
from dpmt.train.methods.noisy_gd import FAST_SCALE, FAST_STEPS
from dpmt.train.plan import make_plan, resolved_plan, sampler_delta, sampler_draws
from dpmt.train.training_run import setup

from _interrupt import fit_interrupted_after_first_iteration

QUIET = ExecutionConfig(progress=False)
#: 6000 users at ε = 20: n̂·ε ≈ 1.2·10⁵ ≥ 10⁵ (fast); at ε = 5 below. Uniform popularity and
#: activity (alpha = 0, σ = 0): 2 item buckets and 1 user bucket instead of 8 and 10, so the
#: noisy-GD kernels compile several times faster; the rule reads n̂ alone, not the spread
DATA = dict(n_users=6000, n_items=300, n_interactions=60_000, seed=1, alpha=0.0,
            user_activity_sigma=0.0)


#: every ε = 20 run and plan below has this plan (2 iterations at d = 8; the rule and the
#: scaling read neither): calibrating it at ε = 20 takes ~10 s, and calibrate memoises it, so
#: the module pays for it once instead of four times
FAST = dict(iterations=2, dim=8)


@pytest.fixture(scope="module")
def ratings():
    return make_synthetic(**DATA)


def test_the_rule_from_n_eps_only():
    assert TrainConfig().gd.steps is None and TrainConfig().gd.planned_steps == 20
    fast, why = resolve(TrainConfig(privacy=dict(epsilon=5.0)), FAST_SCALE / 5.0)
    assert (fast.gd.steps, fast.gd.learning_rate) == (FAST_STEPS, pytest.approx(0.2 / FAST_STEPS))
    assert any(k == "gd.steps" and "≥" in r for k, _, r in why)
    slow, _ = resolve(TrainConfig(privacy=dict(epsilon=5.0)), FAST_SCALE / 5.0 - 1.0)
    assert (slow.gd.steps, slow.gd.learning_rate) == (PLANNED_GD_STEPS, 0.01)
    # what a user sets is kept; Poisson sampling and non-private runs keep the planned steps
    own, _ = resolve(TrainConfig(gd=GDConfig(steps=7), privacy=dict(epsilon=5.0)), 1e6)
    assert own.gd.steps == 7 and own.gd.learning_rate == 0.01
    q, _ = resolve(TrainConfig(gd=GDConfig(sampling_rate=0.5), privacy=dict(epsilon=5.0)), 1e6)
    assert q.gd.steps == PLANNED_GD_STEPS
    nonpriv, _ = resolve(TrainConfig(privacy=NonPrivate()), None)
    assert nonpriv.gd.steps == PLANNED_GD_STEPS and nonpriv.gd.learning_rate == 0.01
    # SSP has no steps: its config is left alone
    ssp, _ = resolve(TrainConfig(solver="ssp", privacy=dict(epsilon=5.0)), 1e6)
    assert ssp.gd.steps is None


@pytest.mark.parametrize("eps", [1.0, 5.0, 20.0])
def test_equivalent_releases_have_the_plans_privacy(eps):
    """K steps at z·√(K/20) against the calibrated 20 at z: the same μ = √count/z per iteration
    (so the same Gaussian mechanism), the plan's δ charged, and dp_accounting's ε of the
    whole run equal to the plan's (to its discretisation) and within the target. Fails if
    the noise were scaled by anything but √(K/20), or the count left at 20."""
    cfg = TrainConfig(data=dict(dataset="synthetic"), privacy=dict(epsilon=eps), **FAST)
    plan = make_plan(cfg, draws=sampler_draws(cfg, 300))
    model_cfg, _ = resolve(cfg, FAST_SCALE / eps)
    new = resolved_plan(plan, cfg, model_cfg)
    assert new is not None and new.head() == plan.head()
    for a, b in zip(plan.iterations, new.iterations):
        assert a.gramian == b.gramian
        (ra,), (rb,) = a.item, b.item
        assert (ra.count, rb.count) == (20, FAST_STEPS)
        assert math.sqrt(rb.count) / rb.noise_multiplier == pytest.approx(
            math.sqrt(ra.count) / ra.noise_multiplier, rel=1e-12)
        assert rb.delta == ra.delta                         # the plan's δ, charged as planned
        assert sampler_delta(rb.draws, rb.noise_multiplier, rb.count) <= rb.delta
    e_plan = epsilon_of(plan.releases(), cfg.privacy.delta)
    e_new = epsilon_of(new.releases(), cfg.privacy.delta)
    assert e_new <= eps and e_new == pytest.approx(e_plan, rel=1e-4)
    # the identity behind it, in dp_accounting alone: 20 Gaussians at z = K at z·√(K/20)
    z = ra.noise_multiplier

    def eps_of(event):
        acc = dp_accounting.pld.PLDAccountant()
        return acc.compose(event).get_epsilon(1e-6)
    twenty = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), 20)
    k = FAST_STEPS
    fast = dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(z * math.sqrt(k / 20)), k)
    assert eps_of(fast) == pytest.approx(eps_of(twenty), rel=1e-3)
    wrong = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), k)
    assert eps_of(wrong) < 0.8 * eps_of(twenty)          # the test can tell them apart


def test_a_fast_run_uses_the_scaled_noise_and_spends_the_planned_epsilon(ratings):
    cfg = TrainConfig(privacy=dict(epsilon=20.0, noise_seed=0), **FAST)
    run = setup(ratings, cfg, execution=QUIET)
    planned = make_plan(cfg, draws=sampler_draws(cfg, ratings.n_items))
    assert run.model_cfg.gd.steps == FAST_STEPS and run.noisy_n * 20.0 >= FAST_SCALE
    (rel,) = run.plan.iterations[0].item
    (ref,) = planned.iterations[0].item
    assert rel.count == FAST_STEPS
    assert rel.noise_std == pytest.approx(ref.noise_std * math.sqrt(FAST_STEPS / 20), rel=1e-12)
    # the noise the step draws is the scaled release's
    assert run.method.noise(run.plan.iterations[0].item).gd_multiplier == pytest.approx(
        ref.noise_multiplier * math.sqrt(FAST_STEPS / 20), rel=1e-12)
    model = fit(ratings, cfg, execution=QUIET)
    slow = fit(ratings, cfg.replace(gd=dict(steps=PLANNED_GD_STEPS)), execution=QUIET)
    recorded = [r for r in model.ledger.releases if r.name.endswith("/gd")]
    assert [r.count for r in recorded] == [FAST_STEPS] * 2
    assert model.epsilon <= 20.0
    assert model.epsilon == pytest.approx(slow.epsilon, rel=1e-4)
    assert model.config.gd.steps == FAST_STEPS and f"gd.steps = {FAST_STEPS}" in model.auto_settings
    assert not np.allclose(model.item_embeddings, slow.item_embeddings)   # it did change


def test_below_the_scale_nothing_changes(ratings):
    """n̂·ε < 10⁵: the rule's 20 steps are the old default's, bit for bit."""
    # d = 8: the kernels the ε = 20 runs compiled
    cfg = TrainConfig(iterations=1, dim=8, privacy=dict(epsilon=5.0, noise_seed=0))
    auto = fit(ratings, cfg, execution=QUIET)
    old = fit(ratings, cfg.replace(gd=dict(steps=20)), execution=QUIET)
    assert auto.config.gd.steps == 20
    np.testing.assert_array_equal(auto.item_embeddings, old.item_embeddings)
    assert auto.epsilon == old.epsilon


def test_no_equivalent_keeps_the_planned_steps(ratings, monkeypatch):
    """When the method cannot match the plan's privacy (here: forced), the run trains the
    settings the plan was calibrated for, never an uncalibrated one."""
    method = method_of(TrainConfig())
    monkeypatch.setattr(type(method), "equivalent_releases", lambda self, planned, cfg:
                        planned if cfg.gd.planned_steps == planned[0].count else None)
    run = setup(ratings, TrainConfig(privacy=dict(epsilon=20.0, noise_seed=0), **FAST),
                execution=QUIET)
    assert run.model_cfg.gd.steps == PLANNED_GD_STEPS
    assert run.model_cfg.gd.learning_rate == 0.01
    assert run.plan.iterations[0].item[0].count == PLANNED_GD_STEPS


def test_a_fast_run_resumes_bit_identically(ratings, tmp_path):
    # stopped after the first of 2 iterations: the second is trained after the resume
    cfg = TrainConfig(privacy=dict(epsilon=20.0, noise_seed=0), **FAST)
    ref = fit(ratings, cfg, execution=QUIET, run_dir=tmp_path / "ref")
    fit_interrupted_after_first_iteration(ratings, cfg, tmp_path / "cut", QUIET)
    back = fit(ratings, cfg, execution=QUIET, run_dir=tmp_path / "cut", resume=True)
    assert back.config.gd.steps == FAST_STEPS
    np.testing.assert_array_equal(back.item_embeddings, ref.item_embeddings)
    assert back.epsilon == ref.epsilon


def test_a_version_2_config_keeps_its_20_steps():
    """Before version 3 a missing gd.steps meant 20; it still does."""
    old = {**TrainConfig(user_cg_steps=8).flat_dict(), "config_version": 2}  # flat, as v2 was
    del old["gd"]["steps"]
    assert TrainConfig.from_dict(old).gd.steps == 20
    assert TrainConfig.from_dict(TrainConfig().stored()).gd.steps is None
