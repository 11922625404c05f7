"""Privacy ledger, calibration and the count / mean mechanisms."""

import json
import math

import dp_accounting
import jax
import numpy as np
import pytest
from scipy import stats

from dpmt.errors import ConfigError, DpmtError, PrivacyBudgetError
from dpmt.privacy import (PlannedRelease, PrivacyLedger, Release, calibrate, cap_per_user,
                          epsilon_of, partition_threshold, private_counts, private_mean)
from dpmt.privacy.discrete_gaussian import discrete_gaussian_pmf
from dpmt.privacy.ledger import PLD_DISCRETIZATION, RDP_ORDERS, Selection, compose
from dpmt.privacy.mechanisms import (counts_release, item_offsets_release, mean_lattice,
                                     offsets_lattice, private_item_offsets)
from dpmt.privacy.randomness import NoiseSource

SRC = NoiseSource.from_seed(11)
DG = "discrete_gaussian"


def _dg(name, sigma, coordinates, step=1, **kw):
    return Release(name, step * math.sqrt(coordinates), sigma, mechanism=DG,
                   coordinates=coordinates, step=step, **kw)


def _direct_epsilon(events, delta, accountant="pld"):
    acc = (dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
           if accountant == "pld" else dp_accounting.rdp.RdpAccountant())
    acc.compose(dp_accounting.ComposedDpEvent(events))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_ledger_matches_direct_dp_accounting(accountant):
    led = PrivacyLedger(delta=1e-5, accountant=accountant)
    led.record(Release("counts", sensitivity=10.0, noise_std=50.0))
    led.record(Release("A", sensitivity=2.0, noise_std=6.0, count=3))
    led.record(Release("sgd", sensitivity=1.0, noise_std=1.1, count=100, sampling_rate=0.01))
    direct = _direct_epsilon([
        dp_accounting.GaussianDpEvent(5.0),
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 3),
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 100),
    ], 1e-5, accountant)
    assert led.epsilon() == pytest.approx(direct, rel=2e-3)
    assert led.epsilon(1e-3) < led.epsilon()


def test_ledger_refuses_past_budget_and_records_nothing():
    led = PrivacyLedger(delta=1e-5, epsilon_budget=1.0)
    led.record(Release("a", 1.0, 6.0))
    eps = led.epsilon()
    with pytest.raises(PrivacyBudgetError, match="above the budget"):
        led.record(Release("b", 1.0, 0.5))
    assert len(led) == 1 and led.epsilon() == eps
    with pytest.raises(ConfigError, match="already in the ledger"):
        led.record(Release("a", 1.0, 100.0))


def test_ledger_json_roundtrip(tmp_path):
    led = PrivacyLedger(delta=1e-6, epsilon_budget=3.0)
    led.record(Release("x", 1.5, 4.0, count=2))
    led.save(tmp_path / "ledger.json")
    d = json.loads((tmp_path / "ledger.json").read_text())
    assert d["privacy_unit"].startswith("one user")
    assert d["releases"][0]["noise_multiplier"] == pytest.approx(4.0 / 1.5)
    back = PrivacyLedger.load(tmp_path / "ledger.json")
    assert back.epsilon() == pytest.approx(led.epsilon())
    assert [r.name for r in back.releases] == ["x"]
    assert "total: ε" in back.summary()


@pytest.mark.parametrize("target", [0.5, 2.0, 8.0])
def test_calibration_hits_target(target):
    plan = ([PlannedRelease("counts", 10.0, noise_multiplier=40.0)]
            + [PlannedRelease(f"it{t}/A", 1.0) for t in range(3)]
            + [PlannedRelease(f"it{t}/b", 1.0, noise_ratio=0.5) for t in range(3)])
    cal = calibrate(plan, target, 1e-5)
    assert cal.epsilon <= target * (1 + 1e-6)
    assert cal.epsilon == pytest.approx(target, rel=1e-3)
    # the split is explicit: b's multiplier is half of A's; counts keep their fixed noise
    assert cal.by_name("it0/b").noise_multiplier == pytest.approx(
        0.5 * cal.by_name("it0/A").noise_multiplier)
    assert cal.by_name("counts").noise_multiplier == pytest.approx(40.0)
    # an independent dp_accounting computation of the same composition agrees
    assert epsilon_of(cal.releases, 1e-5) == pytest.approx(cal.epsilon, rel=1e-6)
    led = PrivacyLedger(1e-5, epsilon_budget=target)
    for r in cal.releases:
        led.record(r)  # never refused: calibration stays within the budget
    assert led.epsilon() <= target * (1 + 1e-6)


def test_calibration_refuses_unmeetable_budget():
    plan = [PlannedRelease("counts", 10.0, noise_multiplier=1.0), PlannedRelease("A", 1.0)]
    with pytest.raises(PrivacyBudgetError, match="alone spend"):
        calibrate(plan, 1.0, 1e-5)
    with pytest.raises(DpmtError, match="epsilon must be > 0"):
        calibrate(plan, 0.0, 1e-5)
    with pytest.raises(DpmtError, match=r"delta must be in \(0, 1\)"):
        calibrate(plan, 1.0, 1.0)


@pytest.mark.parametrize("kind", ["generator", "jax key"])
def test_cap_per_user_is_uniform_and_capped(kind):
    user = np.repeat(np.arange(3), [10, 2, 5])
    counts = np.zeros(10)
    for s in range(1000):
        rng = (np.random.default_rng(s) if kind == "generator" else jax.random.PRNGKey(s))
        keep = cap_per_user(user, 4, rng)
        per_user = np.bincount(user[keep], minlength=3)
        assert per_user.tolist() == [4, 2, 4]
        counts += keep[:10]
    # each of user 0's 10 ratings is kept w.p. 4/10; binomial test, 1000 draws each
    p = stats.binomtest(int(counts.min()), 1000, 0.4).pvalue
    q = stats.binomtest(int(counts.max()), 1000, 0.4).pvalue
    assert min(p, q) > 1e-4  # false-failure rate < 2e-3 across the 10 positions


def _dg_variance(sigma):
    xs = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3)
    return float(np.sum(discrete_gaussian_pmf(sigma, xs) * xs.astype(float) ** 2))


def test_private_counts_sensitivity_and_noise():
    rng = np.random.default_rng(0)
    n_users, n_items, k = 200, 30, 5
    user = np.repeat(np.arange(n_users), rng.integers(1, 12, n_users))
    item = np.concatenate([rng.choice(n_items, size=c, replace=False)
                           for c in np.bincount(user)])
    # Removing a user changes the un-noised capped histogram by at most sqrt(k) in L2:
    # compare the same capping coins with and without user 0.
    keep = cap_per_user(user, k, SRC.numpy_rng("cap"))
    full = np.bincount(item[keep], minlength=n_items)
    without = np.bincount(item[keep & (user != 0)], minlength=n_items)
    assert np.linalg.norm(full - without) <= math.sqrt(k) + 1e-12
    assert np.abs(full - without).max() <= 1 and np.count_nonzero(full - without) <= k
    heavy = np.argmax(np.bincount(user))
    without_h = np.bincount(item[keep & (user != heavy)], minlength=n_items)
    assert np.linalg.norm(full - without_h) == pytest.approx(math.sqrt(k))
    sigma = 3.0
    led = PrivacyLedger(1e-5)
    noisy, n_hat, rel = private_counts(user, item, n_items, k=k, noise_std=sigma,
                                       cap_rng=SRC.numpy_rng("c0"), noise_rng=SRC.random("n0"),
                                       ledger=led, include_user_count=True)
    assert rel.sensitivity == pytest.approx(math.sqrt(k + 1)) and "item_counts" in led
    assert (rel.mechanism, rel.coordinates, rel.step) == (DG, k + 1, 1)
    assert rel == counts_release(k, sigma, include_user_count=True)    # what the plan builds
    assert noisy.dtype == np.int64 and isinstance(n_hat, int) and np.all(noisy >= 1)
    # Empirical noise variance matches the discrete Gaussian's: 400 draws x 30 items of
    # noisy - exact, where the clamp at 1 is never active
    diffs = []
    for s in range(400):
        n_s, _ = private_counts(user, item, n_items, k=k, noise_std=sigma,
                                cap_rng=SRC.numpy_rng(f"c{s}"), noise_rng=SRC.random(f"n{s}"))
        exact = np.bincount(item[cap_per_user(user, k, SRC.numpy_rng(f"c{s}"))],
                            minlength=n_items)
        mask = exact > 5 * sigma
        d = (n_s - exact)[mask]
        assert np.all(d == np.rint(d))
        diffs.append(d)
    d = np.concatenate(diffs).astype(float)
    # chi-square test on the variance, two-sided, false-failure rate 1e-6
    chi = (len(d) - 1) * d.var(ddof=1) / _dg_variance(sigma)
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], len(d) - 1)
    assert lo < chi < hi


def test_private_mean_sensitivity_and_value():
    rng = np.random.default_rng(0)
    user = np.repeat(np.arange(500), 8)
    vals = rng.uniform(1, 5, len(user))
    led = PrivacyLedger(1e-5)
    mean, (rs, rc) = private_mean(vals, user, low=1.0, high=5.0, k=4, sum_noise_std=1e-3,
                                  count_noise_std=1e-3, cap_rng=SRC.numpy_rng("m"),
                                  noise_rng=SRC.random("m"), ledger=led)
    bits, step = mean_lattice(4, 1.0, 5.0)
    assert step == 4 * math.ceil(5.0 * 2 ** bits)                 # k · r_max in lattice units
    assert (rs.mechanism, rs.coordinates, rs.step, rs.sensitivity) == (DG, 1, step, step)
    assert (rc.mechanism, rc.coordinates, rc.step, rc.sensitivity) == (DG, 1, 4, 4.0)
    # no noise to speak of: the lattice rounding is unbiased, the mean that of the kept sample
    assert abs(mean - vals.mean()) < 0.05
    assert len(led) == 2
    with pytest.raises(DpmtError, match="NaN"):
        private_mean(np.array([np.nan]), np.array([0]), low=1, high=5, k=1, sum_noise_std=1,
                     count_noise_std=1, cap_rng=SRC.numpy_rng("x"), noise_rng=SRC.random("x"))


def test_lattice_rounding_is_unbiased_and_within_the_charged_step():
    """The offsets' sums: every lattice value within ±step (what the release charges), and
    the noiseless offsets equal the shrunk exact means up to the lattice's unbiased rounding."""
    rng = np.random.default_rng(1)
    k, clip, m = 3, 1.5, 4
    user = np.repeat(np.arange(2000), 3)
    item = np.tile(np.arange(3), 2000)
    y = rng.normal(0.3, 1.0, len(user)) + np.array([0.5, 0.0, -0.5])[item]
    bits, step = offsets_lattice(k, clip)
    assert step == math.ceil(clip * 2 ** bits)
    rel = item_offsets_release(k, clip, 7.0)
    assert (rel.mechanism, rel.coordinates, rel.step) == (DG, k, step)
    assert rel.sensitivity == pytest.approx(math.sqrt(k) * step)
    counts = np.array([2000, 2000, 2000, 1])
    b = private_item_offsets(y, user, item, m, counts, k=k, clip=clip, noise_std=1e-3,
                             cap_rng=SRC.numpy_rng("o"), noise_rng=SRC.random("o"),
                             label_std=1.0)
    yc = np.clip(y, -clip, clip)
    exact = np.array([yc[item == i].mean() for i in range(3)])
    # 2000 ratings per item and no noise: the prior's pull is ~ν²/(n·τ²) of the gap, tiny
    np.testing.assert_allclose(b[:3], exact, atol=5e-3)
    # no ratings and no noise: the prior mean of an item of count 1 (post-processing of the
    # released counts and sums), within the clip
    assert abs(b[3]) <= clip


def test_release_validation_messages():
    with pytest.raises(DpmtError, match="noise_std must be > 0"):
        Release("x", 1.0, 0.0)
    with pytest.raises(DpmtError, match="sampling_rate"):
        Release("x", 1.0, 1.0, sampling_rate=1.5)


def test_gaussian_composition_matches_closed_form():
    """n Gaussian releases with multiplier z are exactly one with multiplier z/√n: an
    accountant-independent check of how the ledger composes (grouped or not)."""
    one = epsilon_of([Release("g", 1.0, 4.0 / 3.0)], 1e-5)
    grouped = epsilon_of([Release("a", 1.0, 4.0, count=9)], 1e-5)
    split = epsilon_of([Release("a", 2.0, 8.0), Release("b", 1.0, 4.0, count=8)], 1e-5)
    assert grouped == pytest.approx(one, rel=1e-6)
    assert split == pytest.approx(one, rel=1e-6)
    # and the analytic Gaussian mechanism (Balle & Wang 2018) agrees with PLD
    assert dp_accounting.get_epsilon_gaussian(4.0 / 3.0, 1e-5) == pytest.approx(one, rel=1e-2)


# -- discrete Gaussian releases and extra δ in the ledger (issue 24) ---------------------------
def test_all_gaussian_ledger_is_the_pld_accountants():
    """Grouping by (z, q) and composing PLDs ourselves gives dp_accounting's PLDAccountant's
    ε on the same events, to the last bit (so the discrete Gaussian support changed nothing
    for Gaussian-only ledgers)."""
    rels = [Release("counts", 10.0, 50.0), Release("A", 2.0, 6.0, count=3),
            Release("b", 1.0, 3.0), Release("q=1", 1.0, 2.0, sampling_rate=1.0),
            Release("sgd", 1.0, 1.1, count=100, sampling_rate=0.01),
            Release("sgd2", 1.0, 1.1, sampling_rate=0.02)]
    for delta in (1e-5, 1e-8):
        acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
        acc.compose(compose(rels))
        assert epsilon_of(rels, delta) == pytest.approx(acc.get_epsilon(delta), rel=1e-12)


@pytest.mark.parametrize("sigma,coords", [(200.0, 101), (25.0, 1), (60.0, 31)])
def test_discrete_gaussian_epsilon_is_close_to_the_gaussians_and_an_upper_bound(sigma, coords):
    rel = _dg("counts", sigma, coords)
    eps = epsilon_of([rel], 1e-5)
    gauss = epsilon_of([Release("g", rel.sensitivity, sigma)], 1e-5)
    assert eps == pytest.approx(gauss, rel=0.03)
    # a valid upper bound: above dp_accounting's optimistic (lower) estimate of the same PLD,
    # below its pessimistic one at the ledger's grid
    pld = dp_accounting.pld.privacy_loss_distribution
    low = pld.from_discrete_gaussian_mechanism(sigma, sensitivity=1, pessimistic_estimate=False,
                                               value_discretization_interval=2e-5)
    high = pld.from_discrete_gaussian_mechanism(sigma, sensitivity=1,
                                                value_discretization_interval=1e-3)
    if coords > 1:
        low, high = low.self_compose(coords), high.self_compose(coords)
    assert low.get_epsilon_for_delta(1e-5) - 1e-9 <= eps <= high.get_epsilon_for_delta(1e-5) + 1e-9
    # RDP: the discrete Gaussian as the Gaussian with the same σ/Δ (CKS Prop. 5)
    assert epsilon_of([rel], 1e-5, "rdp") == pytest.approx(
        epsilon_of([Release("g", rel.sensitivity, sigma)], 1e-5, "rdp"), rel=1e-12)
    # a mixed ledger composes both kinds
    mixed = epsilon_of([rel, Release("A", 1.0, 4.0, count=3)], 1e-5)
    assert mixed > max(eps, epsilon_of([Release("A", 1.0, 4.0, count=3)], 1e-5))


def test_extra_delta_is_taken_from_the_accountants_delta():
    g = [Release("a", 1.0, 3.0, count=4), _dg("c", 40.0, 11)]
    x = 2e-6
    with_extra = g[:1] + [_dg("c", 40.0, 11, delta=x)]
    assert epsilon_of(with_extra, 1e-5) == pytest.approx(
        epsilon_of(g, 1e-5 - (1 + 1e-5) * x), rel=1e-12)
    assert epsilon_of(with_extra, 1e-5) > epsilon_of(g, 1e-5)
    assert epsilon_of(with_extra, 1e-5, "rdp") == pytest.approx(
        epsilon_of(g, 1e-5 - (1 + 1e-5) * x, "rdp"), rel=1e-12)
    with pytest.raises(PrivacyBudgetError, match="extra δ"):
        epsilon_of([_dg("c", 40.0, 11, delta=1e-5)], 1e-5)
    led = PrivacyLedger(1e-5)
    with pytest.raises(PrivacyBudgetError, match="extra δ"):
        led.record(Release("x", 1.0, 3.0, delta=2e-5))
    assert len(led) == 0


def test_charged_selection_pays_its_extra_delta_per_repetition():
    sel = Selection("private", candidates=4, mean=3.0)
    plain = [Release("a", 1.0, 3.0), _dg("c", 40.0, 11)]
    extra = [Release("a", 1.0, 3.0), _dg("c", 40.0, 11, delta=1e-7)]
    e0 = epsilon_of(plain, 1e-5, "rdp", sel)
    e1 = epsilon_of(extra, 1e-5, "rdp", sel)
    assert e1 > e0
    acc = dp_accounting.rdp.RdpAccountant(orders=RDP_ORDERS)
    acc.compose(sel.wrap(compose(extra)))
    assert acc.get_delta(e1) + (1 + math.exp(e1)) * 3.0 * 1e-7 <= 1e-5
    with pytest.raises(PrivacyBudgetError, match="private selection"):
        epsilon_of([Release("a", 1.0, 3.0, delta=2e-6)], 1e-5, "rdp", sel)


def test_discrete_gaussian_release_json_summary_and_validation(tmp_path):
    led = PrivacyLedger(1e-5, epsilon_budget=10.0)
    led.record(_dg("item_counts", 30.0, 11, delta=1e-6))
    led.record(Release("g", 1.0, 4.0, count=2, draws=1000))
    led.save(tmp_path / "ledger.json")
    d = json.loads((tmp_path / "ledger.json").read_text())
    r0, r1 = d["releases"]
    assert (r0["mechanism"], r0["coordinates"], r0["step"], r0["delta"]) == (DG, 11, 1, 1e-6)
    assert r1["mechanism"] == "gaussian" and "coordinates" not in r1 and r1["draws"] == 1000
    assert d["extra_delta"] == pytest.approx(1e-6)
    back = PrivacyLedger.load(tmp_path / "ledger.json")
    assert back.releases == led.releases and back.epsilon() == led.epsilon()
    text = back.summary()
    assert "DG 11×1" in text and "extra δ" in text and "1e-06" in text
    # a ledger written before these fields loads as Gaussian, no extra δ
    old = {"delta": 1e-5, "releases": [{"name": "x", "sensitivity": 1.0, "noise_std": 3.0}]}
    assert PrivacyLedger.from_dict(old).releases[0] == Release("x", 1.0, 3.0)
    with pytest.raises(DpmtError, match="coordinates"):
        Release("c", 1.0, 3.0, mechanism=DG)
    with pytest.raises(DpmtError, match="step·√coordinates"):
        Release("c", 2.0, 3.0, mechanism=DG, coordinates=5, step=1)
    with pytest.raises(DpmtError, match="mechanism"):
        Release("c", 1.0, 3.0, mechanism="laplace")
    with pytest.raises(DpmtError, match="discrete Gaussian releases only"):
        Release("c", 1.0, 3.0, coordinates=2)


@pytest.mark.parametrize("target", [1.0, 8.0])
def test_calibration_with_discrete_gaussians_and_extra_delta(target):
    plan = ([PlannedRelease("counts", math.sqrt(31), mechanism=DG, coordinates=31, step=1,
                            delta=1e-6, noise_ratio=2.0)]
            + [PlannedRelease(f"it{t}/A", 1.0) for t in range(3)])
    cal = calibrate(plan, target, 1e-5)
    assert cal.epsilon <= target * (1 + 1e-6)
    assert cal.epsilon == pytest.approx(target, rel=2e-3)
    c = cal.by_name("counts")
    assert (c.mechanism, c.coordinates, c.step, c.delta) == (DG, 31, 1, 1e-6)
    assert c.noise_multiplier == pytest.approx(2.0 * cal.by_name("it0/A").noise_multiplier)
    assert epsilon_of(cal.releases, 1e-5) == pytest.approx(cal.epsilon, rel=1e-12)
    led = PrivacyLedger(1e-5, epsilon_budget=target)
    for r in cal.releases:
        led.record(r)
    with pytest.raises(PrivacyBudgetError, match="extra δ"):
        calibrate([PlannedRelease("x", 1.0, delta=1e-5)], 1.0, 1e-5)


def test_plan_releases_integer_statistics_and_selects_items():
    from dpmt.config import TrainConfig
    from dpmt.train.plan import PARTITION_DELTA_SHARE, make_plan

    cfg = TrainConfig(task="rating", solver="ssp", gravity=0.0, dim=2, iterations=1,
                      weights="uniform", label_clip=1.5, privacy=dict(epsilon=4.0))
    plan = make_plan(cfg)
    k = cfg.effective_count_cap
    lo, hi = cfg.data.rating_bounds
    _, step = mean_lattice(k, lo, hi)
    assert (plan.mean_sum.mechanism, plan.mean_sum.step) == (DG, step)
    assert (plan.mean_count.mechanism, plan.mean_count.step) == (DG, k)
    assert plan.counts.mechanism == DG and plan.counts.coordinates == k + 1
    off = item_offsets_release(k, 1.5, plan.item_offsets.noise_std)
    assert plan.item_offsets == off                       # the mechanism's own release
    assert plan.item_threshold is None and plan.counts.delta == 0
    assert plan.epsilon <= 4.0 * (1 + 1e-6)
    sel = make_plan(cfg, select_items=True)
    assert sel.counts.delta == pytest.approx(PARTITION_DELTA_SHARE * cfg.privacy.delta)
    assert sel.item_threshold == partition_threshold(k, sel.counts.noise_std,
                                                     PARTITION_DELTA_SHARE * cfg.privacy.delta)
    led = PrivacyLedger(cfg.privacy.delta, epsilon_budget=cfg.privacy.epsilon)
    for r in sel.releases():
        led.record(r)
    assert led.epsilon() <= cfg.privacy.epsilon * (1 + 1e-6)
    # implicit feedback with uniform weights releases no counts unless items are selected
    imp = TrainConfig(weights="uniform", solver="ssp", popularity_prior=0.0, dim=2, iterations=1)
    assert make_plan(imp).counts is None
    assert make_plan(imp, select_items=True).counts.delta > 0


# -- the 64-bit sampler's δ, charged by fit (issue 24, finding 2) ------------------------------
@pytest.mark.parametrize("kw", [dict(solver="ssp", gravity=1.0),
                                dict(solver="gd", init="spectral", spectral_items=30)])
def test_fit_charges_every_continuous_normal_it_draws(kw):
    """Each continuous release in the ledger carries the normals the run draws
    (sampler_draws of the data's shape) and their δ (tail + edge at its multiplier); the run's
    ε is the accountant's at δ minus them. Fails if a release's draws were not charged, or
    charged at another count."""
    import dpmt
    from dpmt.config import ExecutionConfig, TrainConfig, route
    from dpmt.solvers import noise
    from dpmt.train.plan import sampler_draws

    r = dpmt.data.make_synthetic(n_users=200, n_items=50, n_interactions=3000, seed=2)
    cfg = TrainConfig(**route(dict(dim=3, iterations=2, **kw, dataset="synthetic", epsilon=2.0,
                                   noise_seed=1)))
    model = dpmt.fit(r, cfg, execution=ExecutionConfig(progress=False))
    draws = sampler_draws(model.config, r.n_items)
    continuous = [x for x in model.ledger.releases if x.mechanism == "gaussian"]
    assert {x.name for x in continuous} == set(draws) and len(draws) >= 4
    for x in continuous:
        assert x.draws == draws[x.name]
        per = -(-x.draws // x.count)
        owed = noise.tail_delta(x.draws) + x.count * noise.edge_delta(x.noise_multiplier, per)
        assert owed <= x.delta <= 1.02 * owed + 1e-30, x.name
    extra = sum(x.delta for x in model.ledger.releases)
    assert 0 < extra < 1e-12
    assert model.ledger.epsilon() == pytest.approx(
        epsilon_of(model.ledger.releases, cfg.privacy.delta), rel=1e-12)
    assert model.ledger.epsilon() <= cfg.privacy.epsilon * (1 + 1e-9)


def test_fit_refuses_to_charge_fewer_normals_than_it_draws():
    import dpmt
    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.train.plan import sampler_draws

    r = dpmt.data.make_synthetic(n_users=100, n_items=30, n_interactions=1000, seed=2)
    cfg = TrainConfig(dim=3, iterations=1, solver="ssp", data=dict(dataset="synthetic"),
                      privacy=dict(epsilon=2.0))
    few = {name: n - 1 for name, n in sampler_draws(cfg, r.n_items).items()}
    with pytest.raises(ConfigError, match="fewer normals"):
        dpmt.fit(r, cfg, execution=ExecutionConfig(progress=False), charged_draws=few)


def test_subsampled_releases_are_accounted_at_the_integer_orders_quietly(caplog):
    """A Poisson-subsampled release's RDP is exact at integer orders and a slow series
    elsewhere (which dp_accounting may drop with a warning): a composition with one is
    accounted at RDP_INTEGER_ORDERS — a bound at least the all-orders one, within 0.5% here —
    and logs nothing; one without keeps every order."""
    import logging

    from dpmt.privacy.ledger import RDP_INTEGER_ORDERS

    rel = [Release("counts", 1.0, 2.0), Release("gd", 1.0, 1.744, count=40, sampling_rate=0.5)]
    with caplog.at_level(logging.WARNING):
        eps = epsilon_of(rel, 1e-5, "rdp")
    assert not [r for r in caplog.records if "converge" in r.getMessage()]
    acc = dp_accounting.rdp.RdpAccountant(orders=RDP_INTEGER_ORDERS)
    acc.compose(compose(rel))
    assert eps == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    full = dp_accounting.rdp.RdpAccountant(orders=RDP_ORDERS)
    full.compose(compose(rel))
    assert full.get_epsilon(1e-5) <= eps <= 1.005 * full.get_epsilon(1e-5)
    plain = rel[:1] + [Release("gd", 1.0, 1.744, count=40)]
    full = dp_accounting.rdp.RdpAccountant(orders=RDP_ORDERS)
    full.compose(compose(plain))
    assert epsilon_of(plain, 1e-5, "rdp") == pytest.approx(full.get_epsilon(1e-5), rel=1e-9)
