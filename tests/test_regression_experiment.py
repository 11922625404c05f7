"""The multi-task regression experiment's building blocks (experiments.regression)."""

import numpy as np
import pytest

from experiments.regression import RegressionSetting, excess_risks, make_tasks


def test_equal_task_sizes_make_weights_coincide():
    """α = 0: all n_i equal, so μ = 0 and μ = 1/2 give the same weights, the same released
    statistics (same key) and the same excess risk; R1 = 1."""
    s = RegressionSetting(n_users=400, n_tasks=10, alpha=0.0, max_task_size=60, epsilon=2.0)
    r = excess_risks(s, seed=0)
    assert r["R1"] == pytest.approx(1.0)
    assert r["excess_mu0"] == pytest.approx(r["excess_mu0.5"], rel=1e-5)
    assert r["excess_mu0"] > 0


def test_tasks_follow_assumption_and_clips():
    s = RegressionSetting(n_users=300, n_tasks=8, alpha=1.0, max_task_size=200)
    sizes, task, user, x, y = make_tasks(s, seed=1)
    assert np.array_equal(np.bincount(task), sizes)
    # no user twice in a task; features and labels clipped
    pairs = task.astype(np.int64) * s.n_users + user
    assert len(np.unique(pairs)) == len(pairs)
    assert np.linalg.norm(x, axis=1).max() <= s.clip + 1e-12
    assert np.abs(y).max() <= s.y_max
    assert sizes[0] > sizes[-1]  # skewed
