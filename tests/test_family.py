"""The leave-one-generator-out replay of ``dpmt quality --family`` (benchmarks/family.py)."""

import pytest

from benchmarks import family


def _rows(table):
    """{(generator, ε): {candidate: (validation, test)}} → run_family-shaped rows."""
    return [dict(generator=g, epsilon=e, candidate=c, solver="ssp" if "SSP" in c else "gd",
                 validation=v, test=t)
            for (g, e), cands in table.items() for c, (v, t) in cands.items()]


TABLE = {
    # on A and B λ = 10 wins validation; on C the defaults do
    ("A", 5.0): {"defaults": (0.30, 0.31), "λ = 10": (0.33, 0.32), "SSP λ = 20": (0.20, 0.20)},
    ("B", 5.0): {"defaults": (0.30, 0.30), "λ = 10": (0.34, 0.35), "SSP λ = 20": (0.25, 0.26)},
    ("C", 5.0): {"defaults": (0.40, 0.41), "λ = 10": (0.30, 0.29), "SSP λ = 20": (0.39, 0.40)},
    ("A", 20.0): {"defaults": (0.35, 0.36), "λ = 10": (0.33, 0.33), "SSP λ = 20": (0.30, 0.30)},
    ("B", 20.0): {"defaults": (0.34, 0.34), "λ = 10": (0.33, 0.33), "SSP λ = 20": (0.31, 0.31)},
    ("C", 20.0): {"defaults": (0.39, 0.40), "λ = 10": (0.20, 0.20), "SSP λ = 20": (0.42, 0.43)},
}


def test_the_rule_is_fitted_on_the_other_generators_only():
    logo = {(r["generator"], r["epsilon"]): r for r in family.replay(_rows(TABLE))}
    assert len(logo) == 6
    # C at ε = 5: mean validation over A and B picks λ = 10, which C's own test punishes
    c5 = logo["C", 5.0]
    assert (c5["rule"], c5["rule_test"], c5["tuned"], c5["tuned_test"]) == (
        "λ = 10", 0.29, "defaults", 0.41)
    # A at ε = 5: over B and C the means are defaults 0.35, λ = 10 0.32, SSP 0.32
    assert logo["A", 5.0]["rule"] == "defaults" and logo["A", 5.0]["tuned"] == "λ = 10"
    # C at ε = 20: the others prefer the defaults; C's own validation prefers SSP
    assert logo["C", 20.0]["rule"] == "defaults" and logo["C", 20.0]["tuned"] == "SSP λ = 20"
    s = family.summary(list(logo.values()), "defaults")
    gaps = [0.31 - 0.32, 0.30 - 0.35, 0.0, 0.0, 0.0, 0.40 - 0.43]
    assert s["cells"] == 6 and s["within"] == 4      # A at ε = 5 sits at −0.01: within
    assert s["mean"] == pytest.approx(sum(gaps) / 6) and s["worst"] == pytest.approx(-0.05)


def test_a_fall_with_epsilon_is_named():
    logo = family.replay(_rows(TABLE))
    # the defaults: A 0.31 → 0.36, B 0.30 → 0.34, C 0.41 → 0.40 (falls)
    ((g, drop, e, f),) = family.not_monotone(logo)
    assert (g, e, f) == ("C", 5.0, 20.0) and drop == pytest.approx(-0.01)
    assert family.not_monotone(logo, tol=0.02) == []
    text = family.section(_rows(TABLE))
    assert "all but C (-0.0100 from ε = 5 to 20)" in text
    assert "within 0.01 of the tuned best in 4 of 6" in text
    assert text.count("\n| ") == 1 + 6            # the header row and one row per cell


def test_the_family_is_the_one_the_experiments_run():
    from experiments import solver_rule

    assert solver_rule.FAMILY == family.FAMILY and len(family.FAMILY) == 8
    assert family.n_fits() == 8 * 3 * 3          # η = ½ is scored on the defaults' fit


def test_the_report_carries_the_family_section_and_its_rows(tmp_path):
    """write_report puts the family's section in QUALITY.md and its rows in quality.json,
    from which a --resume --family run reads them back instead of training again."""
    import json

    from benchmarks.quality_report import write_report

    rows = _rows(TABLE)
    text = write_report([], [], tmp_path, "dpmt quality --family", 1.0, family_rows=rows)
    assert family.section(rows) in text
    assert (tmp_path / "QUALITY.md").read_text(encoding="utf-8") == text
    saved = json.loads((tmp_path / "quality" / "quality.json").read_text(encoding="utf-8"))
    assert saved["family_rows"] == rows
    plain = write_report([], [], tmp_path / "plain", "dpmt quality", 1.0)
    assert "leave-one-generator-out" not in plain


def test_an_interrupted_family_run_keeps_its_finished_generators(tmp_path, monkeypatch):
    """``dpmt quality --family`` saves after every generator; ``--resume --family`` trains
    only the generators it had not finished (a half-done one again). Fits are faked: this
    checks the bookkeeping, not the models."""
    import argparse
    import json
    import sys
    from types import SimpleNamespace

    import dpmt.runtime
    import dpmt.train.evaluate
    import dpmt.train.loop
    import dpmt.train.rundir
    from benchmarks import quality
    from dpmt.config import TrainConfig

    calls = []
    stop_at = {"generator": family.FAMILY["C steep"]}

    def fake_fit(train, cfg, execution=None):
        if cfg.data.dataset == stop_at["generator"] and len(calls) % 3 == 1:
            raise KeyboardInterrupt          # inside C, after one of its fits
        calls.append(cfg.data.dataset)
        return SimpleNamespace(config=TrainConfig(solver=cfg.solver, reg=cfg.reg or 3.0,
                                                  popularity_prior=0.25))

    monkeypatch.setattr(dpmt.train.loop, "fit", fake_fit)
    monkeypatch.setattr(dpmt.train.rundir, "prepare_data", lambda cfg, ex: SimpleNamespace(
        train=SimpleNamespace(n_users=100), validation=None, test=None))
    # the module (dpmt.train re-exports a function of the same name)
    monkeypatch.setattr(sys.modules["dpmt.train.evaluate"], "evaluate",
                        lambda *a, **k: {"overall": {"recall@20": 0.3}})
    monkeypatch.setattr(dpmt.runtime, "release_compiled_code", lambda: None)
    monkeypatch.setattr(quality, "datasets", lambda quick: [])
    monkeypatch.setattr(quality, "rating_datasets", lambda quick: [])
    args = argparse.Namespace(out=str(tmp_path), quick=False, no_ratings=True, data_dir="data",
                              resume=False, quiet=True, family=True)
    with pytest.raises(KeyboardInterrupt):
        quality.main(args)
    saved = json.loads((tmp_path / "quality" / "quality.json").read_text(encoding="utf-8"))
    kept = saved["family_rows"]
    assert family.finished(kept) == ["A base", "B rank64"]
    assert len(kept) == 2 * 3 * len(family.CANDIDATES)
    report = (tmp_path / "QUALITY.md").read_text(encoding="utf-8")
    assert "partial: 2 of 8 family generators" in report and "*Partial: 2 of 8" in report
    assert calls.count(family.FAMILY["C steep"]) == 1            # C was cut off mid-way

    calls.clear()
    stop_at["generator"] = None
    quality.main(argparse.Namespace(**{**vars(args), "resume": True}))
    saved = json.loads((tmp_path / "quality" / "quality.json").read_text(encoding="utf-8"))
    # only the six unfinished generators trained, C from its start: 3 ε × 3 distinct fits
    assert sorted(set(calls)) == sorted(family.FAMILY[g] for g in list(family.FAMILY)[2:])
    assert len(calls) == 6 * 3 * 3
    assert saved["family_rows"][:len(kept)] == kept
    assert family.finished(saved["family_rows"]) == list(family.FAMILY)
    assert saved["invocations"] == 2
    report = (tmp_path / "QUALITY.md").read_text(encoding="utf-8")
    assert "partial" not in report.split("\n## Defaults fitted")[0]
    assert "*Partial" not in report and "in 24 of 24 cells" in report
