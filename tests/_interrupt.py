"""A training run interrupted after its first iteration's checkpoint (for resume tests)."""

from unittest import mock

import pytest

import dpmt


def fit_interrupted_after_first_iteration(data, cfg, run_dir, execution) -> None:
    """``dpmt.fit`` into ``run_dir``, stopped by a KeyboardInterrupt raised from the progress
    update that follows iteration 1, i.e. after iteration 0's checkpoint."""
    calls = {"n": 0}
    real_update = dpmt.train.loop.Progress.update

    def stop_at_second(self, eps):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        real_update(self, eps)

    with mock.patch.object(dpmt.train.loop.Progress, "update", stop_at_second):
        with pytest.raises(KeyboardInterrupt):
            dpmt.fit(data, cfg, execution=execution, run_dir=run_dir)
