"""The solver rule (issue 28): a solver left to the task is SSP (λ = 20) where the
released n̂·ε ≥ 4.5·10⁵ and the released counts average ≥ 170 per item; the plan, made for
noisy GD before n̂ is out, is kept exactly: the switched iterations are Gaussian releases of
the planned iterations' μ (μ-GDP), within the δ the plan charged."""

import math

import dp_accounting
import numpy as np
import pytest

from dpmt.config import ExecutionConfig, NonPrivate, TrainConfig
from dpmt.data import make_synthetic
from dpmt.privacy import epsilon_of
from dpmt.privacy.selection import same_event
from dpmt.train import defaults
from dpmt.train import plan as plan_mod
from dpmt.train.defaults import (SSP_MIN_COUNT, SSP_SCALE, SSP_SWITCH, resolve, solver_switch,
                                 switchable)
from dpmt.train.loop import fit
from dpmt.train.plan import make_plan, resolved_plan, sampler_delta, sampler_draws
from dpmt.train.training_run import setup

from _interrupt import fit_interrupted_after_first_iteration

QUIET = ExecutionConfig(progress=False)
# uniform data (alpha = 0, σ = 0): few layout buckets, so the kernels compile fast
DATA = dict(n_users=400, n_items=60, n_interactions=6000, seed=4, alpha=0.0,
            user_activity_sigma=0.0)


@pytest.fixture(scope="module")
def ratings():
    return make_synthetic(**DATA)


def _mu(releases) -> float:
    """μ of a composition of Gaussian releases: √Σ count·(Δ/σ)²."""
    return math.sqrt(sum(r.count * (r.sensitivity / r.noise_std) ** 2 for r in releases))


def _above(eps: float, m: int = 100):
    """(n̂, counts) just above both scales at ε."""
    return SSP_SCALE / eps, np.full(m, SSP_MIN_COUNT)


def test_the_rule_reads_both_released_quantities():
    cfg = TrainConfig(privacy=dict(epsilon=20.0))
    n, counts = _above(20.0)
    ssp, why = resolve(cfg, n, counts)
    assert (ssp.solver, ssp.reg) == ("ssp", 20.0) == (SSP_SWITCH["solver"], SSP_SWITCH["reg"])
    assert ssp.iterations == 4          # the task's sweeps, as planned
    assert [k for k, _, _ in why[:2]] == ["solver", "reg"]
    assert "≥ 450000" in why[0][2] and "≥ 170" in why[0][2]
    # either quantity below its scale: noisy GD, as before the rule
    for n_, c_ in ((n * 0.99, counts), (n, counts * 0.99)):
        gd, why = resolve(cfg, n_, c_)
        assert gd.solver == "gd" and gd.iterations == 4 and not any(k == "solver"
                                                                     for k, _, _ in why)
    # the mean of max(n̂_i, 0): a negative noisy count weighs as 0 (unclipped, this mean
    # would be 0)
    half = np.full(50, 2 * SSP_MIN_COUNT)
    assert solver_switch(cfg, n, np.r_[half, -half])[0] is True
    assert solver_switch(cfg, n, np.r_[half - 1, 0 * half])[0] is False
    # no counts released, or no n̂: no switch
    assert resolve(cfg, n)[0].solver == "gd" and resolve(cfg, None, counts)[0].solver == "gd"


@pytest.mark.parametrize("kw", [dict(solver="gd"), dict(privacy=NonPrivate()),
                                dict(init="spectral"), dict(gd=dict(sampling_rate=0.5)),
                                dict(gd=dict(steps=10)), dict(gd=dict(learning_rate=0.02)),
                                dict(task="rating", data=dict(split="random"))])
def test_what_the_user_chose_is_kept(kw):
    cfg = TrainConfig(**kw) if "privacy" in kw else TrainConfig(
        **{**kw, "privacy": dict(epsilon=20.0)})
    assert not switchable(cfg)
    n, counts = _above(20.0)
    assert resolve(cfg, n, counts)[0].solver == cfg.solver


def test_settings_the_user_gave_are_kept_through_the_switch():
    n, counts = _above(20.0)
    own, _ = resolve(TrainConfig(reg=5.0, iterations=2, privacy=dict(epsilon=20.0)), n, counts)
    assert (own.solver, own.reg, own.iterations) == ("ssp", 5.0, 2)


@pytest.mark.parametrize("eps", [5.0, 20.0])
def test_the_switched_iterations_have_the_plans_privacy(eps):
    """The planned noisy-GD iterations (4 × (Gramian + 20 steps)) and the switched SSP ones
    (4 × (Gramian, Â, b̂)) compose to the same μ, the switched δ is within the planned, the
    head and the fold-in choice are the plan's, and dp_accounting's ε of the whole run equals
    the plan's. Fails if the scale missed the change of releases per sweep."""
    m = 400
    cfg = TrainConfig(data=dict(dataset="synthetic"), privacy=dict(epsilon=eps, delta=1e-6))
    plan = make_plan(cfg, draws=sampler_draws(cfg, m))
    n, counts = _above(eps, m)
    model_cfg, _ = resolve(cfg, n, counts)
    new = resolved_plan(plan, cfg, model_cfg, sampler_draws(model_cfg, m))
    assert new is not None and model_cfg.solver == "ssp"
    assert new.head() == plan.head() and new.fold_in == plan.fold_in
    old = [r for it in plan.iterations for r in it.all()]
    now = [r for it in new.iterations for r in it.all()]
    assert (len(old), len(now)) == (4 * 2, 4 * 3)
    assert [len(it.item) for it in new.iterations] == [2] * 4
    assert all(it.gramian is not None for it in new.iterations)
    assert _mu(now) == pytest.approx(_mu(old), rel=1e-12)
    # one scale over the new releases' own ratios (Â and b̂ at b_noise_ratio = 1, the Gramian
    # at gram_noise_ratio = 1): all at one multiplier
    assert len({round(r.noise_multiplier, 12) for r in now}) == 1
    for r in now:
        assert sampler_delta(r.draws, r.noise_multiplier, r.count) <= r.delta * (1 + 1e-12)
    # the plan's δ, charged as planned: dpmt tune's repetitions are the same DP event
    assert sum(r.delta for r in now) == pytest.approx(sum(r.delta for r in old), rel=1e-12)
    assert same_event(now, old) and same_event(new.releases(), plan.releases())
    e_plan = epsilon_of(plan.releases(), cfg.privacy.delta)
    e_new = epsilon_of(new.releases(), cfg.privacy.delta)
    assert e_new <= eps and e_new == pytest.approx(e_plan, rel=1e-4)
    # the identity in dp_accounting alone, and that it can tell a wrong scale apart: a scale
    # that counted one item release per sweep (SSP makes two) would be leakier
    z_old = [r.noise_multiplier for r in old]
    z_new = now[0].noise_multiplier

    def eps_of(zs):
        acc = dp_accounting.pld.PLDAccountant()
        for z, c in zs:
            acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), c))
        return acc.get_epsilon(1e-6)
    planned = eps_of([(z, r.count) for z, r in zip(z_old, old)])
    assert eps_of([(z_new, 12)]) == pytest.approx(planned, rel=2e-3)
    wrong = z_new * math.sqrt(2 / 3)     # Σ 1/r² over (Gramian, one item release): 2, not 3
    assert eps_of([(wrong, 12)]) > 1.05 * planned


def test_a_plan_that_cannot_hold_the_switch_keeps_noisy_gd(ratings, monkeypatch):
    """When the switched iterations would draw more δ than the plan charged (here: nothing
    reserved for them, and at d = 64 SSP draws more normals than noisy GD), the run trains
    the planned method, never an uncalibrated one."""
    monkeypatch.setattr(defaults, "SSP_SCALE", 1.0)
    monkeypatch.setattr(defaults, "SSP_MIN_COUNT", 0.0)
    monkeypatch.setattr(plan_mod, "switchable", lambda cfg: False)   # no δ reserved
    cfg = TrainConfig(dim=64, privacy=dict(epsilon=20.0, noise_seed=0))
    run = setup(ratings, cfg, execution=QUIET)
    assert run.model_cfg.solver == "gd" and len(run.plan.iterations) == 4
    # with the reservation (the default), the same run switches
    monkeypatch.undo()
    monkeypatch.setattr(defaults, "SSP_SCALE", 1.0)
    monkeypatch.setattr(defaults, "SSP_MIN_COUNT", 0.0)
    assert setup(ratings, cfg, execution=QUIET).model_cfg.solver == "ssp"


@pytest.fixture(scope="module")
def switched(ratings):
    """A default run whose rule switched (the scales lowered to fit test data)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(defaults, "SSP_SCALE", 1.0)
        mp.setattr(defaults, "SSP_MIN_COUNT", 0.0)
        cfg = TrainConfig(dim=4, privacy=dict(epsilon=5.0, noise_seed=0))
        run = setup(ratings, cfg, execution=QUIET)
        model = fit(ratings, cfg, execution=QUIET)
    return cfg, run, model


def test_a_switched_fit_trains_ssp_with_the_equivalent_noise(ratings, switched):
    cfg, run, model = switched
    planned = make_plan(cfg, draws=sampler_draws(cfg, ratings.n_items))
    assert run.model_cfg.solver == "ssp" and run.method.name == "ssp"
    assert (model.config.solver, model.config.reg, model.config.iterations) == ("ssp", 20.0, 4)
    assert "solver = ssp" in model.auto_settings
    # the step draws the switched releases' noise
    a, b = run.plan.iterations[0].item
    noise = run.method.noise(run.plan.iterations[0].item)
    assert (noise.sigma_A, noise.sigma_b) == (a.noise_std, b.noise_std)
    # the ledger holds the plan's head, 4 × (Gramian, Â, b̂) and the fold-in choice
    names = [r.name for r in model.ledger.releases]
    assert [n for n in names if n.startswith("iter")] == [
        f"iter{t}/{k}" for t in range(4) for k in ("gramian", "ssp_A", "ssp_b")]
    its = [r for r in model.ledger.releases if r.name.startswith("iter")]
    assert _mu(its) == pytest.approx(_mu([r for it in planned.iterations for r in it.all()]),
                                     rel=1e-12)
    assert model.epsilon <= cfg.privacy.epsilon
    assert model.epsilon == pytest.approx(planned.epsilon, rel=1e-4)
    assert np.all(np.isfinite(model.item_embeddings))


def test_a_switched_run_resumes_bit_identical(ratings, switched, tmp_path, monkeypatch):
    cfg, _, ref = switched
    monkeypatch.setattr(defaults, "SSP_SCALE", 1.0)
    monkeypatch.setattr(defaults, "SSP_MIN_COUNT", 0.0)

    fit_interrupted_after_first_iteration(ratings, cfg, tmp_path,
                                          ExecutionConfig(progress=True))
    assert int(np.load(tmp_path / "checkpoint.npz")["iteration"]) == 1
    back = fit(ratings, cfg, execution=QUIET, run_dir=tmp_path, resume=True)
    assert back.config.solver == "ssp"
    np.testing.assert_array_equal(back.item_embeddings, ref.item_embeddings)
    assert back.epsilon == ref.epsilon
    assert [r.name for r in back.ledger.releases] == [r.name for r in ref.ledger.releases]


def test_the_plan_charges_the_larger_phase_for_a_switchable_config():
    """sampler_draws of a switchable config charges at least the switched phase's normals;
    of a config the rule cannot switch, exactly its own. At d = 64 SSP's 4 sweeps draw more
    (4·(d(d+1)/2 + d) = 8576 a item) than noisy GD's 4 × 20 steps (80·d = 5120)."""
    m = 500
    auto = TrainConfig(dim=64, privacy=dict(epsilon=5.0))
    own = TrainConfig(dim=64, solver="gd", privacy=dict(epsilon=5.0))
    ssp = defaults.switched_config(auto)
    total = lambda d: sum(n for k, n in d.items() if k.startswith("iter"))   # noqa: E731
    assert total(sampler_draws(auto, m)) >= total(sampler_draws(ssp, m)) > total(
        sampler_draws(own, m))
    from dpmt.solvers.gd_privacy import gd_noise_draws
    assert sampler_draws(own, m)["iter0/gd"] == gd_noise_draws(m * own.dim, 20)


def test_a_plan_without_sampler_draws_switches_at_the_plans_delta():
    """Without the data's shape (no draws: no sampler δ), the switched releases still carry
    the plan's δ for the iterations, in equal shares."""
    # ε = 5: the shares do not depend on ε, and ε = 20 calibrates ~3x slower
    cfg = TrainConfig(privacy=dict(epsilon=5.0))
    plan = make_plan(cfg)
    n, counts = _above(5.0)
    model_cfg, _ = resolve(cfg, n, counts)
    new = resolved_plan(plan, cfg, model_cfg)
    assert new is not None
    old = [r for it in plan.iterations for r in it.all()]
    now = [r for it in new.iterations for r in it.all()]
    assert sum(r.delta for r in now) == pytest.approx(sum(r.delta for r in old), rel=1e-12,
                                                      abs=1e-300)
    assert _mu(now) == pytest.approx(_mu(old), rel=1e-12)
