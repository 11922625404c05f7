"""dpmt quality: selection on validation, reporting on test, the targets, the report."""

import math

import pytest

from dpmt.apps import quality as q
from dpmt.config import ExecutionConfig, TrainConfig

QUIET = ExecutionConfig(progress=False)
BASE = TrainConfig(dataset="synthetic:users=500,items=120,interactions=10000",
                   split="heldout-users", heldout_users=50, delta=1e-5, iterations=1)
DS = q.Dataset("Skewed synthetic tiny", BASE, (0,), (2.0,), weightings=("uniform", "adaptive"),
               private_grid=(dict(dim=4), dict(dim=8, reg=10.0)), als_grid=(dict(dim=4),),
               solve_grid=(dict(dim=4),))


@pytest.fixture(scope="module")
def rows():
    return q.run_dataset(DS, QUIET)


def test_the_als_baseline_is_exact_alternating_least_squares(rows):
    als = next(r for r in rows if r["method"] == "ALS (non-private, tuned)")
    assert all("solver=ssp" in t["config"] and "private=False" in t["config"]
               for t in als["tried"])


def test_every_cell_is_run_once_and_privacy_is_stated(rows):
    assert len(rows) == q.n_cells(DS)
    methods = [r["method"] for r in rows]
    for m in ("popularity (exact, not private)", "ALS (non-private, tuned)", "dpmt defaults",
              "private popularity", "uniform", "adaptive", "adaptive, SSP project",
              "adaptive, SSP shift"):
        assert methods.count(m) == 1
    for r in rows:
        if r["method"] in ("uniform", "adaptive", "dpmt defaults"):
            assert 0 < r["epsilon_spent"] <= 2.0 * (1 + 1e-6)
        if r["method"].startswith(("ALS", "popularity")):
            assert math.isinf(r["epsilon_spent"])


def test_the_chosen_configuration_is_the_best_on_validation(rows):
    for r in rows:
        if r.get("tried"):
            best = max(t["validation"] for t in r["tried"])
            assert r["validation"] == best
            winners = [t for t in r["tried"] if t["validation"] == best]
            assert any(r["chosen"].startswith(t["config"]) for t in winners)
    tuned = next(r for r in rows if r["method"] == "uniform")
    # 2 configs × every η, all scored on validation
    assert len(tuned["tried"]) == 2 * len(q.ETAS)
    # the defaults are not tuned: one fit, scored at the η its rule chose
    d = next(r for r in rows if r["method"] == "dpmt defaults")
    assert len(d["tried"]) == 1


def test_report_has_the_targets_the_tables_and_the_plot(rows, tmp_path):
    text = q.write_report(rows, [DS], tmp_path, "dpmt quality (test)", 1.0)
    assert (tmp_path / "QUALITY.md").read_text() == text
    assert (tmp_path / "quality" / "quality_0.png").stat().st_size > 1000
    assert (tmp_path / "quality" / "quality.json").is_file()
    assert "Privacy unit: one user" in text and "## Targets" in text
    assert "| uniform |" in text and "ε = 2" in text
    assert "ALS (non-private, tuned)" in text


def _summary(model, pop, buckets_model, buckets_pop):
    key = ("Skewed synthetic x", "dpmt defaults", 5.0)
    s = lambda t, b, v=0.0: {"test": t, "test_std": 0.0, "seeds": 1, "buckets": b,
                             "validation": v, "seconds": 0.0, "chosen": [], "users": 10}
    return {key: s(model, buckets_model, 0.3),
            ("Skewed synthetic x", "uniform", 5.0): s(model - 0.05, buckets_model, 0.1),
            ("Skewed synthetic x", "private popularity", 5.0): s(pop, buckets_pop),
            ("Skewed synthetic x", "ALS (non-private, tuned)", math.inf): s(0.5, buckets_pop),
            ("Skewed synthetic x", "popularity (exact, not private)", math.inf):
                s(0.2, buckets_pop)}


def test_targets_fail_when_the_model_is_below_private_popularity():
    names, eps = ["Skewed synthetic x"], {"Skewed synthetic x": (5.0,)}
    good = dict((t, ok) for t, ok, _ in q.targets(_summary(0.3, 0.2, [0.1, 0.2], [0.1, 0.1]),
                                                  names, eps))
    bad = dict((t, ok) for t, ok, _ in q.targets(_summary(0.3, 0.2, [0.05, 0.2], [0.1, 0.1]),
                                                 names, eps))
    key = next(t for t in good if "defaults: dpmt defaults" in t)
    assert good[key] and not bad[key]                      # one tail bucket below: refused
    near = next(t for t in good if "within 0.02 of non-private ALS" in t)
    assert not good[near]                                  # 0.3 vs ALS 0.5


def test_rows_read_back_from_the_json_give_the_same_summary(rows, tmp_path):
    """--resume reads quality.json: ε = ∞ and NaN buckets must come back as numbers."""
    import json

    q.write_report(rows, [DS], tmp_path, "t", 1.0)
    back = q.load_rows(json.loads((tmp_path / "quality" / "quality.json").read_text())["rows"])
    a, b = q.summarise(rows), q.summarise(back)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k]["test"] == pytest.approx(b[k]["test"])
        assert a[k]["buckets"] == pytest.approx(b[k]["buckets"], nan_ok=True)


def test_defaults_gap_is_paired_over_seeds():
    a = {"per_seed": {0: 0.20, 1: 0.25, 2: 0.30}}
    b = {"per_seed": {0: 0.22, 1: 0.26, 2: 0.30}}
    assert q._paired_gap(a, b) == " (paired over 3 seeds: -0.0100 ± 0.0082)"
    assert q._paired_gap({"per_seed": {0: 0.2}}, {"per_seed": {0: 0.1}}) == ""
    assert q._paired_gap({}, b) == ""


def test_a_shortfall_is_called_unresolved_only_within_two_standard_errors():
    # p(1-p)/n bound: 0.1 vs 0.2 over 20 users each: 2·√(0.09/20 + 0.16/20) = 0.2236
    assert q.two_se(0.1, 0.2, 20, 20) == pytest.approx(2 * math.sqrt((0.09 + 0.16) / 20))
    assert q.two_se(0.1, 0.2, None, 20) == math.inf
    small = {"test": 0.30, "users_total": 300, "buckets": [0.10, 0.3],
             "bucket_users": [20, 100]}
    pp = {"test": 0.20, "users_total": 300, "buckets": [0.20, 0.2], "bucket_users": [20, 100]}
    short, within = q._shortfalls(small, pp)
    assert short == ["B1 -0.100 (2 se 0.224, 20 users)"] and within
    # the same gap over 2000 users is resolved: 2 se = 0.0274 < 0.1
    many = dict(small, bucket_users=[2000, 100])
    short, within = q._shortfalls(many, dict(pp, bucket_users=[2000, 100]))
    assert len(short) == 1 and not within
    # an overall shortfall counts too
    short, within = q._shortfalls(dict(small, test=0.1), dict(pp, test=0.3))
    assert short[0].startswith("overall -0.200") and not within
