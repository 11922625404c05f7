"""run_predictor: the whole-stream paths it dispatches to equal the per-round loop."""

import numpy as np
import pytest

from dpmt.online import point_functions, thresholds
from dpmt.online.predictors import PREDICTORS, make_predictor, run_predictor
from dpmt.online.streams import point3_adversary, threshold_stream


def _loop(p, xs, ys):
    m = 0
    for x, y in zip(xs.tolist(), ys.tolist()):
        m += p.predict(x) != y
        p.update(y)
    return m


CASES = [(name, "thresholds") for name in sorted(PREDICTORS)] + [
    ("jdp", "point3"), ("jdp", "random-labels"), ("name-and-shame", "random-labels"),
    ("soa", "random-labels")]


@pytest.mark.parametrize("name,case", CASES)
def test_run_predictor_equals_loop(name, case):
    """Every named predictor: run_predictor (bulk ``run``, chunked smaller than the stream,
    with progress) gives the per-round loop's mistakes and final state, same seed."""
    T = 6000
    if case == "point3":
        H = point_functions(3)
        xs, ys = point3_adversary(T, 0.5, seed=3).arrays()
    else:
        H = thresholds(31)
        xs, ys = threshold_stream(31, T, seed=4, dist="boundary").arrays()
        if case == "random-labels":
            ys = np.random.default_rng(5).integers(0, 2, T).astype(np.int8)
    # ε = 16, δ = 0.01: the JDP predictor's candidates, replacements and F are all active
    kw = dict(epsilon=16.0, delta=0.01, seed=7, horizon=T, gamma=0.05)
    a, b = make_predictor(name, H, **kw), make_predictor(name, H, **kw)
    seen = []
    ma = run_predictor(a, xs, ys, progress=seen.append, chunk=2500)
    mb = _loop(b, xs, ys)
    assert ma == mb == a.mistakes == b.mistakes
    assert sum(seen) == T and len(seen) == 3
    if name == "jdp":
        assert (a.A.m, a.F.retained, a.combiner.c1, a.combiner.c2) == \
            (b.A.m, b.F.retained, b.combiner.c1, b.combiner.c2)
        assert a.rounds == b.rounds == T


def test_run_predictor_uses_the_bulk_path_for_jdp(monkeypatch):
    """JDPPredictor goes through ``run`` (not predict/update)."""
    from dpmt.online.jdp import JDPPredictor
    H = thresholds(15)
    p = JDPPredictor(H, 1.0, 1e-6, seed=0)

    def boom(*a, **k):
        raise AssertionError("per-round path used")

    monkeypatch.setattr(p, "predict", boom)
    xs, ys = threshold_stream(15, 1000, seed=0).arrays()
    assert run_predictor(p, xs, ys) == p.mistakes


def test_several_epsilons(tmp_path):
    """--epsilons: ε-dependent predictors run per ε, ε-free ones once (same mistakes under
    each ε), one table per (stream, ε) and one plot per ε."""
    from experiments.online_separation import (main, markdown_table, separation_experiment,
                                               summarise)
    rows = separation_experiment([40, 200], reps=2, streams=("thresholds",),
                                 predictors=("soa", "name-and-shame", "at-learner"),
                                 delta=0.1, n_thresholds=7, progress=False,
                                 epsilons=[1.0, 8.0])
    assert len(rows) == 2 * 2 * 3 * 2
    by = {(r["predictor"], r["eps_req"], r["T"], r["rep"]): r for r in rows}
    for (name, e, T, rep), r in by.items():
        if name != "at-learner":
            assert r["mistakes"] == by[(name, 1.0, T, rep)]["mistakes"]
    assert all(0 < r["epsilon"] <= r["eps_req"] for r in rows if r["predictor"] == "at-learner")
    md = markdown_table(summarise(rows))
    assert md.count("requested ε = 1") == 1 and md.count("requested ε = 8") == 1
    assert main(["--Ts", "30,60", "--reps", "2", "--predictors", "soa,at-learner",
                 "--streams", "thresholds", "--epsilons", "1,8", "--n-thresholds", "7",
                 "--workers", "1", "--no-progress", "--out", str(tmp_path)]) == 0
    for f in ("mistakes_vs_T_eps1.png", "mistakes_vs_T_eps8.png", "table.md"):
        assert (tmp_path / f).stat().st_size > 0
    assert main(["--epsilons", "1,x", "--out", str(tmp_path)]) == 2


def test_jdp_options_pass_through():
    from dpmt.errors import ConfigError
    H = thresholds(31)
    p = make_predictor("jdp", H, epsilon=16.0, delta=0.01, seed=7, jdp_options={"levels": 1})
    assert p.params.levels == 1
    with pytest.raises(ConfigError, match="unknown"):
        make_predictor("jdp", H, epsilon=16.0, delta=0.01, jdp_options={"D": 3})
