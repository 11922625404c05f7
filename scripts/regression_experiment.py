#!/usr/bin/env python
"""Uniform vs optimal task weights under SSP on synthetic multi-task linear regression:
measured excess-risk ratio against the predicted R1, across task-size skews.

Example: python scripts/regression_experiment.py --seeds 5 --epsilon 1
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root

from experiments.regression import format_rows, run_experiment  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.5, 1.0, 1.5])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--tasks", type=int, default=200)
    a = p.parse_args()
    rows = run_experiment(alphas=a.alphas, seeds=range(a.seeds), epsilon=a.epsilon,
                          n_users=a.users, n_tasks=a.tasks)
    print(f"SSP, ε = {a.epsilon:g}, δ = 1e-5, privacy unit: one user (add/remove-one); "
          f"{a.seeds} seeds")
    print(format_rows(rows))


if __name__ == "__main__":
    main()
