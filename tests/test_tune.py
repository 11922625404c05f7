"""``dpmt tune``: private selection (Papernot & Steinke 2022) charged to the ledger, the
literature's uncharged selection labelled as such, grids refused before any data is read,
outputs written only on success; every draw from a secret (OS entropy) kept in the trainer's
private folder — nothing published lets K, a draw or a score be recomputed — and
reproducible only with --noise-seed, which every output then flags.

One tiny synthetic dataset; the candidates share d so the kernels compile once."""

import importlib
import json
import re
import math

import dp_accounting
import numpy as np
import pytest

import dpmt
from dpmt.apps import tune as tune_app
from _cli import cli
from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.errors import ConfigError, PrivacyBudgetError
from dpmt.privacy import PrivacyLedger, Release
from dpmt.privacy.ledger import RDP_ORDERS, Selection, epsilon_of
from dpmt.privacy.randomness import SEEDED_WARNING, NoiseSource
from dpmt.privacy.selection import (draw_repetitions, noisy_score, same_event, tnb_gamma,
                                    tnb_mean)

# sigma=0.3: a narrow spread of user activity, so few user-layout buckets (kernels to compile)
DATASET = "synthetic:users=300,items=60,interactions=6000,sigma=0.3"
BASE = TrainConfig(dim=4, iterations=1, data=dict(dataset=DATASET, split="heldout-users",
                                                  heldout_users=30), privacy=dict(epsilon=5.0))
ARGS = ["--dataset", DATASET, "--dim", "4", "--iterations", "1", "--split", "heldout-users",
        "--heldout-users", "30", "--quiet"]
GRID = [("reg", [1.0, 10.0]), ("user_clip", [0.05, 0.1])]
QUIET = ExecutionConfig(progress=False)


def _spec(mode="private", grid=GRID, base=BASE, **kw):
    return tune_app.Spec(base, tuple(tune_app.build_candidates(base, grid)), mode, **kw)


def _private(noise_seed=None, **kw):
    """The private tune of the fixture (split seed 1, mean 6 repetitions): draws from OS
    entropy, or from ``noise_seed``."""
    kw.setdefault("mean_runs", 6.0)
    return _spec(base=BASE.replace(data=dict(seed=1), privacy=dict(noise_seed=noise_seed)), **kw)


def _k_of(noise_seed, mean=6.0, shape=1.0):
    from dpmt.privacy.selection import draw_repetitions
    return draw_repetitions(NoiseSource.from_seed(noise_seed).numpy_rng("tune/K"), mean, shape)


#: a noise seed whose K is 4 at mean 6 (found without training)
SEED4 = next(s for s in range(1000) if _k_of(s) == 4)


def _public_files(out):
    """Every file published with the model: tune.json and model/."""
    return [out / "tune.json", *sorted((out / "model").iterdir())]




@pytest.fixture(scope="module")
def private_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "private"
    return out, tune_app.tune(_private(), out, execution=QUIET)


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "seeded"
    return out, tune_app.tune(_private(noise_seed=SEED4), out, execution=QUIET)


@pytest.fixture(scope="module")
def literature_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "literature"
    return out, tune_app.tune(_spec("literature"), out, execution=QUIET)


@pytest.fixture
def no_data(monkeypatch):
    """Nothing may read data or train: the refusal must come first."""
    def trip(*a, **k):
        raise AssertionError("data was read or a run trained before the refusal")
    monkeypatch.setattr(importlib.import_module("dpmt.train.rundir"), "prepare_data", trip)
    monkeypatch.setattr(importlib.import_module("dpmt.train.loop"), "fit", trip)


# -- private mode: the selection is charged -----------------------------------------------------
def test_private_ledger_is_within_the_target_and_charges_the_selection(private_run):
    out, res = private_run
    led = res.model.ledger
    assert led.selection.charged and led.accountant == "rdp"
    eps = led.epsilon()
    one_repetition = epsilon_of(led.releases, led.delta, "rdp")   # training + score, once
    assert eps <= BASE.privacy.epsilon * (1 + 1e-6)
    assert eps > one_repetition > res.model.config.privacy.epsilon * 0.999
    assert eps > 0.95 * BASE.privacy.epsilon                 # the calibration uses the budget
    assert "validation_score" in led
    saved = dpmt.Model.load(out)
    assert saved.ledger.selection == led.selection
    assert saved.epsilon == pytest.approx(eps, rel=1e-12)
    doc = json.loads((out / "tune.json").read_text())
    assert doc["charged"] is True and doc["epsilon"] == pytest.approx(eps)


def test_repeat_and_select_epsilon_matches_dp_accounting_directly(private_run):
    _, res = private_run
    led, doc = res.model.ledger, res.doc
    def event_of(r):                       # built here from the release's numbers
        e = dp_accounting.GaussianDpEvent(r.noise_std / r.sensitivity)
        if r.sampling_rate is not None:
            e = dp_accounting.PoissonSampledDpEvent(r.sampling_rate, e)
        return e if r.count == 1 else dp_accounting.SelfComposedDpEvent(e, r.count)

    run = dp_accounting.ComposedDpEvent([event_of(r) for r in led.releases])
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(run, 6.0, 1.0)
    acc = dp_accounting.rdp.RdpAccountant(orders=RDP_ORDERS)
    acc.compose(event)
    # the sampler's extra δ per repetition (its tails, tiny) is charged by coupling: the
    # selection is RDP's except with probability ≤ E[K]·Σδ_r on either neighbour
    extra = sum(r.delta for r in led.releases)
    assert 0 < extra < 1e-12
    eps = led.epsilon()
    delta = BASE.privacy.delta
    assert acc.get_delta(eps) + (1 + math.exp(eps)) * 6.0 * extra <= delta * (1 + 1e-9)
    assert acc.get_epsilon(delta) <= eps == pytest.approx(acc.get_epsilon(delta), rel=1e-6)
    assert doc["calibration"]["selection"]["mean"] == 6.0
    # the PLD accountant does not support the event: the ledger refuses it with a message
    with pytest.raises(ConfigError, match="RDP accountant only"):
        PrivacyLedger(1e-5, accountant="pld", selection=led.selection)


def _keys(x):
    if isinstance(x, dict):
        return set(x) | set().union(*map(_keys, x.values())) if x else set()
    if isinstance(x, list):
        return set().union(*map(_keys, x)) if x else set()
    return set()


def _values_of(x, key):
    if isinstance(x, dict):
        return [v for k, v in x.items() if k == key] + \
            [w for v in x.values() for w in _values_of(v, key)]
    if isinstance(x, list):
        return [w for v in x for w in _values_of(v, key)]
    return []


def test_private_outputs_publish_no_seed_no_k_no_repetitions(private_run):
    """Issue 24 (1): from what tune publishes (tune.json, model/), K, the repetitions, the
    draws' seeds, the scores and the exact test-user counts cannot be read or recomputed."""
    out, res = private_run
    priv = res.private
    secret = priv["noise"]["secret_hex"]
    k = priv["repetitions_drawn"]
    assert k == len(res.repetitions) >= 1
    scores = [r["score"] for r in res.repetitions] + [r["exact_sum"] for r in res.repetitions]
    test_users = priv["selected"]["test"]["users"]
    for f in [p for p in _public_files(out) if p.suffix == ".json"]:
        text = f.read_text()
        doc = json.loads(text)
        assert secret not in text, f
        keys = _keys(doc)
        assert not keys & {"repetitions", "repetitions_drawn", "K", "test",
                           "exact_recall@20", "exact_sum", "validation_score",
                           "validation_recall@20", "secret_hex", "users"}, (f, keys)
        if f.name == "tune.json":             # (model.json: the selected run's own time)
            assert "seconds" not in keys
        # the only seeds published: the public split seed, and no noise seed
        assert set(map(str, _values_of(doc, "seed"))) <= {"1"}, f
        assert set(_values_of(doc, "noise_seed")) <= {None}, f
        for x in scores:
            # as a number token: "22" must not match inside "2022" (a cited year)
            for form in (repr(float(x)), f"{x:.6g}"):
                assert not re.search(rf"(?<![\d.]){re.escape(form)}(?![\d])", text), \
                    (f, x, form)
        assert f'"users": {test_users}' not in text
    assert (out / "model" / "item_embeddings.npz").is_file()
    doc = json.loads((out / "tune.json").read_text())
    assert [c["values"] for c in doc["candidates"]] == [
        {"reg": r, "user_clip": c} for r in (1.0, 10.0) for c in (0.05, 0.1)]
    assert doc["score"]["noise_std"] == pytest.approx(res.model.ledger.releases[-1].noise_std)
    assert doc["noise"]["source"] == "secret key from OS entropy"
    assert all("K =" not in line and "test Recall" not in line for line in doc["report"])
    # the private side holds them, in the trainer's folder only, readable by its owner only
    pf = out / "trainer" / "tune_private.json"
    assert json.loads(pf.read_text()) == json.loads(json.dumps(priv))
    assert (pf.stat().st_mode & 0o077) == 0
    assert "not a release covered by ε" in priv["selected"]["test"]["note"]
    assert priv["selected"]["validation_score"]["noise_std"] == doc["score"]["noise_std"]
    assert any("K = " in line for line in priv["report"])
    assert json.loads((out / "model" / "ledger.json").read_text())["selection"]["charged"]


def test_two_private_tunes_without_a_seed_differ_in_their_draws(private_run, tmp_path):
    from dpmt.apps.tune_report import PRIVATE_FILE

    out, first = private_run
    spec = _private()
    again = tune_app.tune(_private(mean_runs=1.0), tmp_path / "again", execution=QUIET)
    s1, s2 = first.private["noise"]["secret_hex"], again.private["noise"]["secret_hex"]
    assert s1 != s2 and not first.private["noise"]["reproducible"]
    assert again.repetitions[0]["score"] not in [r["score"] for r in first.repetitions]
    assert json.loads((tmp_path / "again" / "trainer" / PRIVATE_FILE).read_text())[
        "noise"]["secret_hex"] == s2
    # the draws themselves (K and the candidates) change from one secret to the next
    draws = {tuple(d.candidate for d in tune_app._draws(spec, 4, NoiseSource.fresh()))
             for _ in range(20)}
    assert len(draws) > 5 and len({len(d) for d in draws}) > 1
    # and a run's own draws are those of its secret
    mine = tune_app._draws(spec, 4, NoiseSource.from_private_state(first.private["noise"]))
    assert [d.candidate for d in mine] == [r["candidate"] for r in first.repetitions]


def test_the_score_noise_is_there(seeded_run):
    """Without the Gaussian noise the released scores would equal the exact sums."""
    _, res = seeded_run
    sigma = res.doc["score"]["noise_std"]
    d = np.array([(r["score"] - r["exact_sum"]) / sigma for r in res.repetitions])
    assert len(d) == 4
    assert np.all(np.abs(d) < 6) and np.sqrt(np.mean(d ** 2)) > 0.2, d
    rng = np.random.default_rng(0)
    draws = np.array([noisy_score(10.0, 2.0, rng) for _ in range(20000)])
    assert draws.mean() == pytest.approx(10.0, abs=0.06)
    assert draws.std() == pytest.approx(2.0, rel=0.03)


def test_the_selected_model_is_the_best_noisy_score_and_loads_and_recommends(private_run):
    out, res = private_run
    best = max(res.repetitions, key=lambda r: r["score"])
    assert res.doc["selected"]["index"] == best["candidate"]
    assert res.model.config.data.seed == 1                 # the public split seed, not a draw
    model = dpmt.Model.load(out)
    np.testing.assert_array_equal(model.item_embeddings, res.model.item_embeddings)
    ids, scores = model.recommend(list(model.item_ids[:3]), k=5)
    assert len(ids) == 5 and not set(ids) & set(model.item_ids[:3])


def test_same_noise_seed_same_selection_and_same_model_and_it_says_so(seeded_run, tmp_path):
    out, first = seeded_run
    again = tune_app.tune(_private(noise_seed=SEED4), tmp_path / "again", execution=QUIET)
    assert again.doc["selected"]["index"] == first.doc["selected"]["index"]
    assert [(r["candidate"], r["score"]) for r in again.repetitions] == \
        [(r["candidate"], r["score"]) for r in first.repetitions]
    np.testing.assert_array_equal(again.model.item_embeddings, first.model.item_embeddings)
    doc = json.loads((out / "tune.json").read_text())
    assert doc["noise"]["note"] == SEEDED_WARNING
    assert f"WARNING: {SEEDED_WARNING}" in doc["report"]
    assert str(SEED4) not in json.dumps(doc["base_config"]) or SEED4 == 1
    assert json.loads((out / "model" / "model.json").read_text())["noise"]["note"] == \
        SEEDED_WARNING
    assert first.private["noise"]["reproducible"] is True


# -- literature mode: labelled as not charged ----------------------------------------------------
def test_literature_outputs_say_the_selection_was_not_charged(literature_run, tmp_path,
                                                              capsys):
    out, res = literature_run
    doc = json.loads((out / "tune.json").read_text())
    assert doc["charged"] is False and "NOT charged" in doc["statement"]
    assert "ε covers one training run" in doc["statement"]
    assert not any("validation_recall@20" in c for c in doc["candidates"])   # exact: private
    priv = json.loads((out / "trainer" / "tune_private.json").read_text())
    assert [c["index"] for c in priv["candidates"]] == [0, 1, 2, 3]
    assert json.loads((out / "trainer" / "metrics.json").read_text())["tuning"]["charged"] \
        is False
    assert json.loads((out / "model" / "ledger.json").read_text())["selection"]["charged"] \
        is False
    assert "NOT charged" in (out / "trainer" / "train.log").read_text()
    assert any("NOT charged" in line for line in doc["report"])
    # ε is one run's, at the target
    led = res.model.ledger
    assert led.epsilon() == pytest.approx(epsilon_of(led.releases, led.delta, led.accountant))
    assert led.epsilon() <= BASE.privacy.epsilon * (1 + 1e-6)
    best = max(priv["candidates"], key=lambda c: c["validation_recall@20"])
    assert doc["selected"]["index"] == best["index"]
    # the CLI says so on stdout
    rc = cli(["tune", *ARGS, "--grid", "reg=1,10", "--selection", "literature",
              "--out", tmp_path / "lit"])
    assert rc == 0
    assert "NOT charged" in capsys.readouterr().out


# -- refusals before any data -------------------------------------------------------------------
@pytest.mark.parametrize("grid", [[("gravity", [0.0, 0.5])], [("solver", ["ssp", "gd"])],
                                  [("iterations", [1, 2])]])
def test_a_grid_with_different_privacy_plans_is_refused_before_training(grid, no_data,
                                                                        tmp_path):
    with pytest.raises(ConfigError, match="different privacy plans"):
        tune_app.tune(_spec(grid=grid), tmp_path / "x", execution=QUIET)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("spec,field", [
    ("dim=0", "dim"), ("dim=1.5", "dim"), ("reg=-1", "reg"), ("weights=bogus", "weights"),
    ("gd_steps=0", "gd.steps"), ("foo=1", "foo"), ("epsilon=1,2", "epsilon"),
    ("seed=1,2", "seed"), ("noise_seed=1,2", "noise_seed"), ("dataset=ml-1m", "dataset"),
    ("reg=1,1", "reg"), ("mu=x", "mu")])
def test_invalid_grid_values_are_refused_naming_the_field(spec, field, no_data, tmp_path,
                                                          capsys):
    rc = cli(["tune", *ARGS, "--grid", spec, "--out", tmp_path / "x"])
    err = capsys.readouterr().err
    assert rc == 2 and field in err and "Traceback" not in err, err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("change,match", [
    (dict(epsilon=0.01), "cannot meet ε = 0.01"),
    (dict(epsilon=1.0, count_noise_multiplier=0.3), "fixed-noise releases")])
def test_an_unreachable_target_is_refused_before_training(change, match, no_data, tmp_path):
    with pytest.raises(PrivacyBudgetError, match=match):
        tune_app.tune(_spec(base=BASE.replace(**route(change)), mean_runs=1000.0), tmp_path / "x",
                      execution=QUIET)
    assert not (tmp_path / "x").exists()


def test_k_zero_outputs_nothing(no_data, tmp_path):
    seed = next(s for s in range(100) if _k_of(s, 1.0, None) == 0)
    spec = _spec(base=BASE.replace(privacy=dict(noise_seed=seed)), mean_runs=1.0, shape=None)
    with pytest.raises(PrivacyBudgetError, match="K = 0"):
        tune_app.tune(spec, tmp_path / "x", execution=QUIET)
    assert not (tmp_path / "x").exists()


# -- output directories ---------------------------------------------------------------------------
def test_out_dir_is_refused_resumed_or_overwritten_like_train(private_run, no_data):
    out, res = private_run
    with pytest.raises(ConfigError, match="already holds a trained model"):
        tune_app.tune(_private(), out, execution=QUIET)
    again = tune_app.tune(_private(), out, execution=QUIET, resume=True)
    assert again.doc["model_fingerprint"] == res.doc["model_fingerprint"]
    with pytest.raises(ConfigError, match="different tune"):
        tune_app.tune(_private(score_noise_ratio=2.0), out, execution=QUIET, resume=True)


def test_an_unfinished_private_tune_resumes_with_its_own_secret(monkeypatch, tmp_path):
    """The secret is saved in trainer/ before training: --resume redraws the same K and
    draws (no silent re-roll); without --resume the unfinished tune is refused."""
    from dpmt.apps.tune_report import PRIVATE_FILE

    loop = importlib.import_module("dpmt.train.loop")
    real, calls = loop.fit, []

    def fail(*a, **k):
        calls.append(k["noise"])
        raise ConfigError("the run fails")
    spec = _private(mean_runs=2.0)
    out = tmp_path / "x"
    monkeypatch.setattr(loop, "fit", fail)
    with pytest.raises(ConfigError, match="the run fails"):
        tune_app.tune(spec, out, execution=QUIET)
    pf = out / "trainer" / PRIVATE_FILE
    state = json.loads(pf.read_text())
    assert state["status"] == "running" and not state["noise"]["reproducible"]
    assert (pf.stat().st_mode & 0o077) == 0
    assert not (out / "tune.json").exists() and not (out / "model").exists()
    with pytest.raises(ConfigError, match="unfinished tune"):
        tune_app.tune(spec, out, execution=QUIET)
    with pytest.raises(ConfigError, match="different tune"):
        tune_app.tune(_private(mean_runs=3.0), out, execution=QUIET, resume=True)
    monkeypatch.setattr(loop, "fit", real)
    res = tune_app.tune(spec, out, execution=QUIET, resume=True)
    assert res.private["noise"] == state["noise"]
    src = NoiseSource.from_private_state(state["noise"])
    assert src.child("rep0") == calls[0]
    assert [d.candidate for d in tune_app._draws(spec, 4, src)] == \
        [r["candidate"] for r in res.repetitions]
    assert (out / "tune.json").is_file() and (out / "model" / "model.json").is_file()
    assert json.loads(pf.read_text())["status"] == "finished"


def test_nothing_is_written_when_a_repetition_fails(monkeypatch, tmp_path):
    loop = importlib.import_module("dpmt.train.loop")
    calls = []

    def fail(*a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise ConfigError("the second run fails")
        return real(*a, **k)
    real = loop.fit
    monkeypatch.setattr(loop, "fit", fail)
    with pytest.raises(ConfigError, match="second run"):
        tune_app.tune(_spec("literature"), tmp_path / "x", execution=QUIET)
    assert not (tmp_path / "x").exists()        # nothing written, not even the folder


# -- the privacy pieces ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0, None])
def test_the_number_of_repetitions_has_the_accounted_mean(shape):
    rng = np.random.default_rng(1)
    k = np.array([draw_repetitions(rng, 5.0, shape) for _ in range(20000)])
    assert k.mean() == pytest.approx(5.0, rel=0.04)
    assert (k.min() >= 1) == (shape is not None)
    if shape is not None:
        from dp_accounting.rdp.rdp_privacy_accountant import \
            _gamma_truncated_negative_binomial as dp_gamma

        g = tnb_gamma(5.0, shape)
        assert tnb_mean(g, shape) == pytest.approx(5.0, rel=1e-9)
        assert g >= dp_gamma(shape, 5.0) * (1 - 1e-12)   # the accountant's γ is ≤ ours


def test_ledger_with_a_selection_round_trips():
    rel = [Release("a", 1.0, 3.0), Release("b", 2.0, 6.0, count=2)]
    sel = Selection("private", 4, 8.0, 1.0)
    led = PrivacyLedger(1e-5, epsilon_budget=10.0, accountant="rdp", selection=sel)
    for r in rel:
        led.record(r)
    back = PrivacyLedger.from_dict(json.loads(led.to_json()))
    assert back.selection == sel and back.epsilon() == pytest.approx(led.epsilon())
    assert led.epsilon() > epsilon_of(rel, 1e-5, "rdp")
    assert "Papernot & Steinke" in led.summary()
    assert same_event(rel, [Release("x", 5.0, 15.0), Release("y", 1.0, 3.0, count=2)])
    assert not same_event(rel, [Release("a", 1.0, 3.0)])
    lit = PrivacyLedger(1e-5, selection=Selection("literature", 4))
    lit.record(rel[0])
    assert lit.epsilon() == pytest.approx(epsilon_of(rel[:1], 1e-5))
    assert math.isfinite(lit.epsilon()) and "NOT charged" in lit.summary()


# -- the sampler's extra δ inside a selection --------------------------------------------------
def _run_plan(extra_delta: float):
    """A one-release run (Gaussian, Δ = 1) calibrated to per-run ε at δ = 1e-6, carrying the
    sampler's ``extra_delta``: per-run ε ↦ (releases, base multiplier)."""
    from dpmt.privacy.calibration import PlannedRelease, calibrate

    def plan(e):
        z = calibrate([PlannedRelease("x", 1.0)], e, 1e-6, "rdp").scale
        return (Release("x", 1.0, z, delta=extra_delta),), z
    return plan


def test_a_selection_capped_by_the_sampler_delta_is_calibrated_below_the_target():
    """With the sampler's extra δ, (1 + e^ε′)·E[K]·δ_extra uses up δ past some ε′: at a
    large target the largest feasible per-run ε is kept (it raised before, after the data
    was read), and the selection it reports is what dp_accounting gives for it."""
    from dpmt.privacy.selection import calibrate_selection

    sel = Selection("private", 2, 4.0, 1.0)
    extra = 4e-13                                   # a 20k × 3k run's tails, per repetition
    cal = calibrate_selection(_run_plan(extra), epsilon=20.0, delta=1e-6, selection=sel)
    free = calibrate_selection(_run_plan(0.0), epsilon=20.0, delta=1e-6, selection=sel)
    assert free.epsilon == pytest.approx(20.0, rel=1e-3)
    assert cal.epsilon < 15.0 and cal.run_epsilon < free.run_epsilon
    # the coupling bound holds at the reported ε, and a larger target buys no more per-run ε
    rep = (*cal.releases, cal.score)
    assert epsilon_of(list(rep), 1e-6, "rdp", sel) == pytest.approx(cal.epsilon, rel=1e-6)
    acc = dp_accounting.rdp.RdpAccountant(orders=RDP_ORDERS)
    acc.compose(sel.wrap(dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(r.noise_std / r.sensitivity) for r in rep])))
    assert acc.get_delta(cal.epsilon) + (1 + math.exp(cal.epsilon)) * 4.0 * extra <= 1e-6
    more = calibrate_selection(_run_plan(extra), epsilon=cal.epsilon * 1.5, delta=1e-6,
                               selection=sel)
    assert more.run_epsilon == pytest.approx(cal.run_epsilon, rel=1e-3)


def test_a_selection_whose_extra_delta_alone_exceeds_delta_is_refused_saying_why():
    from dpmt.privacy.selection import calibrate_selection

    with pytest.raises(PrivacyBudgetError, match="sampler's tails.*--delta"):
        calibrate_selection(_run_plan(1e-6), epsilon=5.0, delta=1e-6,
                            selection=Selection("private", 2, 4.0, 1.0))


def test_the_report_says_why_a_tuning_spends_less_than_its_target():
    from dpmt.apps.tune_report import UNDER_TARGET, report_lines

    doc = {"selection": "private", "statement": "s", "noise": {"source": "os entropy"},
           "per_run_epsilon": 9.3, "score": {"noise_std": 5.6}, "epsilon": 13.0,
           "delta": 1e-6, "target_epsilon": 20.0, "selected": {"index": 0, "values": {}}}
    assert UNDER_TARGET.format(delta=1e-6) in report_lines(doc)
    assert UNDER_TARGET.format(delta=1e-6) not in report_lines(dict(doc, epsilon=19.99))


def test_gaussian_steps_traded_at_equal_privacy_are_the_same_event():
    """The steps rule's 8 steps at z·√(8/20) are exactly 20 at z (one Gaussian of z/√20):
    the same repetition; with Poisson sampling they are not (it composes otherwise)."""
    z = 3.0
    twenty = [Release("c", 1.0, 2.0), Release("g", 1.0, z, count=20, delta=1e-13)]
    eight = [Release("c", 1.0, 2.0), Release("g", 1.0, z * math.sqrt(8 / 20), count=8,
                                             delta=1e-13)]
    assert same_event(twenty, eight)
    assert not same_event(twenty, [Release("c", 1.0, 2.0), Release("g", 1.0, z, count=8,
                                                                   delta=1e-13)])
    sub = lambda k, zz: [Release("g", 1.0, zz, count=k, sampling_rate=0.5)]  # noqa: E731
    assert not same_event(sub(20, z), sub(8, z * math.sqrt(8 / 20)))


def test_a_private_tune_whose_runs_take_the_fast_steps_saves_its_model(monkeypatch, tmp_path):
    """Above n̂·ε = FAST_SCALE a run trades the planned 20 noisy-GD steps for 8 at the same
    privacy; the selected run's ledger then differs from the calibrated repetition in form,
    not in event, and the tuning saves it (it refused with an internal error before)."""
    from dpmt.train.methods import noisy_gd

    monkeypatch.setattr(noisy_gd, "FAST_SCALE", 1.0)
    res = tune_app.tune(_private(noise_seed=SEED4, mean_runs=1.0), tmp_path / "t",
                        execution=QUIET)
    steps = [r for r in res.model.ledger.releases if r.count == noisy_gd.FAST_STEPS]
    assert res.model.config.gd.steps == noisy_gd.FAST_STEPS and steps
    assert res.model.ledger.epsilon() <= BASE.privacy.epsilon * (1 + 1e-6)
    assert (tmp_path / "t" / "model").is_dir()
