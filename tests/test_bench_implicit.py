"""`dpmt bench --against implicit`: implicit's ALS (CG, exact) beside dpmt's non-private
iteration, its private SSP iteration and its **default private path** — what `dpmt train`
runs — on the same data, with every row's ratio to implicit's (no timing asserts; the rows
that need implicit skip without it)."""

import json

import pytest

from benchmarks import bench, bench_implicit, bench_report
from benchmarks.bench_implicit import DEFAULT_PATH, PRIVATE_WARMUP
from dpmt.config import TrainConfig

SPEC = "synthetic:users=80,items=30,interactions=900,seed=0"
D, REPEATS = 4, 2


def test_default_config_is_dpmt_trains_with_enough_iterations():
    """Needs no implicit: TrainConfig's defaults, only d, ε, the seed and the iteration count
    (warm-up + rounds, at least the default's) changed."""
    base = TrainConfig()
    for repeats in (1, 2, 5):
        cfg = bench_implicit.default_config(16, 2.0, repeats=repeats, seed=3)
        assert cfg.iterations == max(base.iterations, PRIVATE_WARMUP + repeats)
        assert cfg.replace(dim=base.dim, iterations=base.iterations, data=dict(seed=base.data.seed),
                           privacy=dict(epsilon=base.privacy.epsilon)) == base
        assert (cfg.solver, cfg.user_solve, cfg.weights, cfg.reg) == \
            (base.solver, base.user_solve, base.weights, base.reg)


@pytest.fixture(scope="module")
def measured():
    """One bench_once with --against implicit on a tiny synthetic spec, with every call of
    the library's iteration counted per run and the private runs kept."""
    # missing, or a broken build (as bench_implicit.implicit_available): skip
    pytest.importorskip("implicit.als", exc_type=ImportError)
    from dpmt.train import loop

    calls, kept = {}, {}
    real_iterate, real_runs = loop.iterate, bench.private_runs

    def iterate(run, t):
        calls.setdefault(id(run), []).append(t)
        return real_iterate(run, t)

    def private_runs(*a, **k):
        kept.update(real_runs(*a, **k))
        return kept

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loop, "iterate", iterate)
        mp.setattr(bench, "private_runs", private_runs)
        res = bench.bench_once(dim=D, dataset=SPEC, iterations=1, gd=False, breakdown=False,
                               compare=False, matmul_size=256, against="implicit",
                               against_repeats=REPEATS, log=lambda *a: None)
    return res, kept, calls


def test_the_spec_is_the_data(measured):
    res, _, _ = measured
    assert (res["n_users"], res["n_items"]) == (80, 30) and res["interactions"] <= 900
    assert "synthetic:users=80" in res["dataset"]


def test_every_row_is_timed_side_by_side(measured):
    res, _, _ = measured
    a = res["against_implicit"]
    # the non-private solves take implicit's 3 CG steps on both sides by default
    # (TrainConfig.item_cg_steps without noise, user_cg_steps), so no extra 3-step row
    assert (a["cg_steps"], a["user_cg_steps"]) == (3, 3)
    assert set(a["seconds"]) == {"dpmt_nonprivate_project", "dpmt_nonprivate_shift",
                                 "dpmt_nonprivate_cg",
                                 "dpmt_nonprivate_cg_exact_users", "implicit_cg",
                                 "implicit_exact", "dpmt_private_cg", DEFAULT_PATH}
    assert all(len(v) == REPEATS for v in a["seconds_all"].values())
    assert all(v > 0 for v in a["seconds"].values())
    json.dumps(res)


def test_the_default_row_is_what_dpmt_train_runs(measured):
    """Labelled from the run's resolved config and method: a benchmark that timed SSP (or
    the exact user step) as 'the default' fails here."""
    res, runs, calls = measured
    base = TrainConfig()
    run = runs[DEFAULT_PATH]
    # the run is setup's for `dpmt train --dim 4 --epsilon 5 --seed 0` (enough iterations)
    assert run.cfg == bench_implicit.default_config(D, 5.0, repeats=REPEATS, seed=0)
    assert run.method.name == base.solver == run.model_cfg.solver
    assert run.model_cfg.user_solve == base.user_solve
    desc = res["against_implicit"]["private_runs"][DEFAULT_PATH]
    assert desc["solver"] == run.method.name and desc["user_solve"] == run.model_cfg.user_solve
    assert (desc["weights"], desc["reg"]) == (run.model_cfg.weights, run.model_cfg.reg)
    assert set(desc["differs_from_train_defaults"]) <= {"dim", "epsilon", "seed",
                                                         "iterations"}
    # timed by the library's iteration: warm-up, then one per round, in order
    assert calls[id(run)] == list(range(PRIVATE_WARMUP + REPEATS))
    assert run.state.iteration == run.cfg.iterations
    # the SSP row is the benchmark's SSP config, also through iterate
    ssp = runs["dpmt_private_cg"]
    assert ssp.method.name == "ssp" and res["against_implicit"]["private_runs"][
        "dpmt_private_cg"]["solver"] == "ssp"
    assert calls[id(ssp)] == list(range(PRIVATE_WARMUP + REPEATS))
    # the table names what ran
    lines = bench_report.implicit_lines([res])
    row = next(x for x in lines if "the default path" in x)
    assert f"user_solve {run.model_cfg.user_solve}" in row
    assert ("noisy GD" in row) == (run.method.name == "gd")
    assert ("SSP" in row) == (run.method.name == "ssp")
    assert f"{run.model_cfg.gd.steps} {run.model_cfg.gd.optimizer} steps" in row


def test_the_ratios_are_the_ratios_of_the_measured_seconds(measured):
    res, _, _ = measured
    a = res["against_implicit"]
    sec = a["seconds"]
    for k, v in sec.items():
        assert a["ratio_over_implicit_cg"][k] == pytest.approx(v / sec["implicit_cg"])
        assert a["ratio_over_implicit_exact"][k] == pytest.approx(v / sec["implicit_exact"])
        assert v == min(a["seconds_all"][k])
    assert a["ratio_default_over_implicit_cg"] == pytest.approx(
        sec[DEFAULT_PATH] / sec["implicit_cg"])
    assert a["ratio_default_over_implicit_exact"] == pytest.approx(
        sec[DEFAULT_PATH] / sec["implicit_exact"])
    assert a["ratio_default_over_ssp"] == pytest.approx(
        sec[DEFAULT_PATH] / sec["dpmt_private_cg"])
    # the keys readers used before the default row
    assert a["ratio_dpmt_private_over_nonprivate"] == pytest.approx(
        sec["dpmt_private_cg"] / sec["dpmt_nonprivate_cg"])
    assert a["ratio_dpmt_cg_over_implicit_cg"] == pytest.approx(
        sec["dpmt_nonprivate_cg"] / sec["implicit_cg"])
    assert a["ratio_dpmt_shift_over_implicit_cg"] == pytest.approx(
        sec["dpmt_nonprivate_shift"] / sec["implicit_cg"])
    # the markdown: "× implicit CG" and "× implicit exact" columns from the same seconds
    text = "\n".join(bench_report.implicit_lines([res]))
    assert "| × implicit CG | × implicit exact |" in text
    x_cg, x_ex = sec[DEFAULT_PATH] / sec["implicit_cg"], sec[DEFAULT_PATH] / sec["implicit_exact"]
    assert f"**{x_cg:.2f}** | **{x_ex:.2f}** |" in text
    assert f"default private path takes {x_cg:.2f}x implicit's CG iteration" in text
    assert "implicit ALS, exact (Cholesky)" in text and "(target ≤ 1.5)" in text
    assert "CG items and users, 3 / 3 warm-started steps" in text
    assert "With 3 CG steps on both sides" not in text      # that is the default row now


def test_old_results_still_report():
    """A JSON result from before the default row (no private_runs, no ratio dicts) still
    makes its table."""
    a = {"implicit_version": "0.7.3", "factors": 4, "regularization": 1.0, "repeats": 1,
         "cg_steps": 8, "seconds": {"dpmt_nonprivate_shift": 2.0, "implicit_cg": 1.0,
                                    "implicit_exact": 4.0, "dpmt_private_cg": 3.0},
         "seconds_all": {"dpmt_nonprivate_shift": [2.0], "implicit_cg": [1.0],
                         "implicit_exact": [4.0], "dpmt_private_cg": [3.0]}}
    text = "\n".join(bench_report.implicit_lines(
        [{"against_implicit": a, "interactions": 10, "n_users": 2, "n_items": 5, "dim": 4}]))
    assert "| implicit ALS, exact (Cholesky) | 4.00 (4.00) | 4.00 | 1.00 |" in text
    assert "SSP iteration (ε = 5 plan)" in text and "| 3.00 (3.00) | 3.00 | 0.75 |" in text
