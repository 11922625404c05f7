"""Empirical privacy audit of the whole training run (experiments.pipeline_audit).

Full ``dpmt.fit`` runs with and without a canary user who alone rates a few items; the score
is read from the released item embeddings only. The real pipeline's lower bound must stay at
or below the ε its ledger claims (99% confidence, as in test_audit.py); the broken twin (b-hat
noise switched off, ledger unchanged) must be caught (lower bound above the claim, 95%).
Seeds are fixed, so every test is deterministic. The default path (noisy GD, weights="auto")
is audited the same way, its twin with the gradient noise off.

Sizes (2-core CPU): the default data are 200 users × 60 items (+6 canary items), ~0.04 s per
fit after ~15 s of compilation (once per data set, shared by every test here); 300 fits per
data set for the real run, 40 for the twin (perfectly separated: 20 held-out trials certify
log(0.83/0.17) ≈ 1.6 > 1). The ``slow`` version is ML-100K-sized (943 users × 1,698 items,
16 of them the canary's, 100k ratings), 1,000 and 200 fits per data set.
"""

import functools

import numpy as np
import pytest

from experiments import pipeline_audit as pa

PASS_CONF = 0.99
TWIN_CONF = 0.95
EPSILON, DELTA = 1.0, 1e-5


@functools.lru_cache(maxsize=None)
def data(size="tiny", canary_items=6):
    return pa.canary_datasets(size, canary_items=canary_items)


@functools.lru_cache(maxsize=None)
def run(broken: bool, trials: int, size="tiny", canary_items=6, path="ssp"):
    return pa.audit_pipeline(trials, broken=broken, epsilon=EPSILON, delta=DELTA,
                             data=data(size, canary_items),
                             confidence=TWIN_CONF if broken else PASS_CONF, seed=0, path=path)


def test_neighbours_differ_by_one_user_who_alone_rates_the_canary_items():
    D, Dp, canary = data()
    assert Dp.n_users == D.n_users + 1 and Dp.n_items == D.n_items
    assert not np.isin(D.item, canary).any()                      # unrated without the canary
    extra = Dp.user == D.n_users
    assert np.array_equal(np.sort(Dp.item[extra]), canary)        # the canary rates them all
    assert not np.isin(Dp.item[~extra], canary).any()             # and nobody else does
    assert np.array_equal(Dp.user[~extra], D.user) and np.array_equal(Dp.item[~extra], D.item)


def test_canary_contribution_is_at_the_clip_norm():
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.train.methods import make_steps
    from dpmt.train.training_run import initial_items

    _, Dp, canary = data()
    cfg = pa.pipeline_config(EPSILON, DELTA, canary_items=len(canary))
    norms = pa.canary_solve_norms(Dp, canary, cfg, range(20))
    assert norms.min() >= cfg.user_clip          # clipped to C in every run: worst-case norm
    # the diagnostic is the loop's own exact user solve (here with the clip out of the way)
    steps = make_steps(cfg.replace(user_clip=1e5), Dp, np.ones(Dp.nnz))
    V0 = initial_items(NoiseSource.from_seed(3).jax_key("init"), Dp.n_items, cfg.dim,
                       cfg.init_scale)
    u = np.asarray(steps.solve_users(V0))[-1]
    assert np.linalg.norm(u) == pytest.approx(norms[3], rel=1e-4)


def test_twin_patch_changes_only_the_b_noise():
    import dpmt

    D, _, canary = data()
    cfg = pa.pipeline_config(EPSILON, DELTA, canary_items=len(canary), noise_seed=7)
    ex = dpmt.ExecutionConfig(progress=False)
    real = dpmt.fit(D, cfg, execution=ex)
    with pa.b_noise_scaled(1.0) as calls:                          # factor 1: no change at all
        same = dpmt.fit(D, cfg, execution=ex)
    with pa.b_noise_scaled(0.0):
        broken = dpmt.fit(D, cfg, execution=ex)
    assert calls["patched_item_steps"] == cfg.iterations
    np.testing.assert_array_equal(same.item_embeddings, real.item_embeddings)
    # the ledger still claims the calibrated b-hat release
    assert broken.epsilon == real.epsilon
    assert [r.noise_std for r in broken.ledger.releases] == \
        [r.noise_std for r in real.ledger.releases]
    # without any rating and without b-hat noise the canary items' rows are zero: exactly
    # with a factorisation, up to the CG solve's tolerance with the default item_solve="cg"
    # (its iterates start from the previous V and converge to θ = M⁻¹·0)
    scale = np.abs(real.item_embeddings[canary]).max()
    assert np.abs(broken.item_embeddings[canary]).max() <= 1e-5 * scale
    assert np.all(np.abs(real.item_embeddings[canary]).sum(axis=1) > 0)
    exact = dpmt.fit(D, cfg.replace(ssp=dict(item_solve="shift")), execution=ex)
    with pa.b_noise_scaled(0.0):
        broken_exact = dpmt.fit(D, cfg.replace(ssp=dict(item_solve="shift")), execution=ex)
    assert not np.any(broken_exact.item_embeddings[canary])
    assert np.all(np.abs(exact.item_embeddings[canary]).sum(axis=1) > 0)


def test_whole_pipeline_bound_stays_below_the_ledgers_epsilon():
    real = run(False, 300)
    assert real.claimed_epsilon <= EPSILON * (1 + 1e-9)
    assert real.details["releases"][0][0] == "item_counts"        # counts released and read
    assert {n.split("/")[-1] for n, _, _ in real.details["releases"]} == \
        {"item_counts", "gramian", "ssp_A", "ssp_b"}
    assert real.details["canary_clipped_fraction"] == 1.0   # worst-case b-contribution
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()


def test_audit_catches_pipeline_whose_b_noise_is_off_but_still_claimed():
    twin = run(True, 40)
    assert twin.claimed_epsilon == pytest.approx(run(False, 300).claimed_epsilon)
    assert twin.details["patched_item_steps"] == 2 * 40
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()


# -- the default path: what `dpmt train` runs without options (issue 24, finding 7) ----------
def test_default_path_bound_stays_below_the_ledgers_epsilon():
    """TrainConfig's solver (noisy GD) with weights="auto" resolved from the released counts,
    every trial's noise from its own key, the item catalogue public, the score read from V."""
    real = run(False, 100, path="default")
    assert real.details["config"]["solver"] == "gd"
    assert real.details["releases"][0][0] == "item_counts"       # the rule reads n̂
    assert any(n.endswith("/gd") for n, _, _ in real.details["releases"])
    assert real.claimed_epsilon <= EPSILON * (1 + 1e-9)
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()


def test_audit_catches_default_path_whose_gradient_noise_is_off_but_still_claimed():
    twin = run(True, 40, path="default")
    assert twin.details["patched_item_steps"] == 2 * 40
    assert twin.claimed_epsilon == pytest.approx(run(False, 100, path="default").claimed_epsilon)
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()


def test_audit_refuses_too_few_trials_and_out_of_range_seeds():
    from dpmt.errors import ConfigError

    with pytest.raises(ConfigError):
        pa.audit_pipeline(10, data=data())
    with pytest.raises(ConfigError):
        pa.audit_pipeline(40, seed=-1, data=data())


@pytest.mark.slow
def test_full_size_whole_pipeline_audit_and_twin():
    real = run(False, 1000, "ml-100k", 16)
    twin = run(True, 200, "ml-100k", 16)
    assert real.details["canary_clipped_fraction"] == 1.0
    assert real.claimed_epsilon <= EPSILON * (1 + 1e-9)
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()


@pytest.mark.slow
def test_full_size_default_path_audit_and_twin():
    real = run(False, 1000, "ml-100k", 16, path="default")
    twin = run(True, 200, "ml-100k", 16, path="default")
    assert real.claimed_epsilon <= EPSILON * (1 + 1e-9)
    assert real.epsilon_lb <= real.claimed_epsilon, real.summary()
    assert twin.epsilon_lb > twin.claimed_epsilon, twin.summary()
