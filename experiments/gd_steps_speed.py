"""The default path with 6 and with 8 noisy-GD steps, interleaved in one ``dpmt bench --against
implicit`` run (issue 29): the machine's speed moves 20-30% between runs on the shared 2-core
VM, so two runs back to back can disagree on which is faster; one run times both in every
round, next to implicit's iteration.

``dpmt bench``'s own comparison (the default path, the benchmark's SSP run, dpmt's
non-private iterations, implicit CG and exact), plus ``dpmt_private_default_8_steps``: the
default config with ``gd.steps = 8`` at lr 0.025 (the rule before 2026-12-07), made by the
same :func:`dpmt.train.training_run.setup` and timed by the same
:func:`dpmt.train.loop.iterate`.

    python -m experiments.gd_steps_speed [--repeats 5] [--json FILE]

Measured: BENCHMARKS.md, "Six noisy-GD steps".
"""

from __future__ import annotations

import argparse
import sys

import benchmarks.bench as bench
import benchmarks.bench_implicit as bench_implicit

EIGHT = "dpmt_private_default_8_steps"


def _with_eight_steps(train, ssp_cfg, *, repeats, execution=None, noise_seed=0):
    from dpmt.privacy.randomness import NoiseSource
    from dpmt.train.training_run import setup

    runs = bench_implicit.private_runs(train, ssp_cfg, repeats=repeats, execution=execution,
                                       noise_seed=noise_seed)
    cfg8 = bench_implicit.default_config(
        ssp_cfg.dim, ssp_cfg.privacy.epsilon, repeats=repeats, seed=ssp_cfg.data.seed,
        user_cg_steps=ssp_cfg.user_cg_steps).replace(gd=dict(steps=8, learning_rate=0.025))
    runs[EIGHT] = setup(train, cfg8, execution=execution,
                        noise=NoiseSource.from_seed(noise_seed))
    return runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="benchmarks/implicit_default_path_s6_s8_interleaved.json")
    args = ap.parse_args(argv)
    bench.private_runs = _with_eight_steps
    return bench.main(["--dataset", "synthetic:users=50000,items=5000,interactions=2400000",
                       "--dim", "64", "--against", "implicit", "--against-repeats",
                       str(args.repeats), "--iterations", "1", "--no-gd", "--no-breakdown",
                       "--no-compare", "--devices", "auto", "--json", args.json])


if __name__ == "__main__":
    sys.exit(main())
