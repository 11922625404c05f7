"""Does cutting long item rows into segments speed up the private SSP item step? (issue 11)

Builds the ML-20M-like synthetic data at ``N`` interactions and times
:func:`dpmt.solvers.ssp.ssp_item_step` (shift solve, noise on, the gravity term on) on the
plain task layout and on the segmented one (``segment_width=SEGMENT_WIDTH``), on the same
inputs, interleaved over ``rounds`` rounds (best of each), after one compiling call each. It
also checks that the two give the same θ (same noise per item; float32 summation order).

    python experiments/segments_bench.py [N=20000263] [d=64] [rounds=3]

Measured on 2026-12-01 (2 cores, quiet), N = 20,000,263 (138,493 users, 26,744 items):
padding 1.395 → 1.111 (10 buckets + segments of 512 for 6,281 long rows, against 11
buckets); item step d = 64: 5.19 s → 4.29 s (1.21x), d = 128: 13.93 s → 11.31 s (1.23x),
compile time unchanged (17.9 / 17.2 s and 21.0 / 20.8 s); max |Δθ| / max |θ| ≈ 6.5e-7.
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.bench import make_dataset
from dpmt.solvers import ssp
from dpmt.solvers.layout import SEGMENT_WIDTH, task_layout


def main(n: int = 20_000_263, d: int = 64, rounds: int = 3) -> None:
    train = make_dataset(n)
    print(f"data: {train.n_users} users, {train.n_items} items, {train.nnz} ratings")
    layouts = {}
    for name, w in (("plain", None), ("segments", SEGMENT_WIDTH)):
        t = time.perf_counter()
        L = task_layout(train, dim=d, segment_width=w, segment_min_saving=0.0)
        layouts[name] = L
        print(f"{name}: padding {L.padding_overhead:.3f}, {len(L.buckets)} buckets"
              + (f" + segments of {L.segments.width} ({len(L.long_rows)} long rows)"
                 if L.segments is not None else "") + f", built in {time.perf_counter() - t:.1f}s")
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    U = jax.random.normal(k[0], (train.n_users, d))
    U = 0.1 * U / jnp.linalg.norm(U, axis=1, keepdims=True)        # ‖u‖ = C = 0.1
    w = jnp.full((train.nnz,), 0.05, jnp.float32)
    extra = 0.5 * ssp.gramian(U)
    sigma_A, sigma_b, reg = 0.15, 1.5, 1.0                           # the bench's scales
    run = {name: (lambda L=L: jax.block_until_ready(ssp.ssp_item_step(
        L, U, w, None, k[1], sigma_A, sigma_b, reg, extra=extra, psd="shift")))
        for name, L in layouts.items()}
    out = {}
    for name, f in run.items():
        t = time.perf_counter()
        out[name] = np.asarray(f())
        print(f"{name}: first call (compiles) {time.perf_counter() - t:.1f}s")
    diff = np.abs(out["segments"] - out["plain"]).max() / np.abs(out["plain"]).max()
    print(f"max |θ_seg − θ_plain| / max |θ_plain| = {diff:.2e}")
    best = {name: np.inf for name in run}
    for r in range(rounds):
        for name, f in run.items():
            t = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t)
    for name in run:
        print(f"{name}: best of {rounds} {best[name]:.2f}s")
    print(f"speed-up {best['plain'] / best['segments']:.2f}x")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*args)
