#!/usr/bin/env python
"""Micro-benchmark of the SSP item noise: the old draw against the current one.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/noise_bench.py              # noise only
    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/noise_bench.py --item-step  # + item step

Noise: ``E_i`` (d, d), ``e_i`` (d,) of all ``m`` items, drawn block by block of
``ssp.solve_block_rows(d)`` items as the fused item step draws them. Each block is consumed as
``E_i v + e_i`` (one matrix-vector product per item, the same for both variants). That needs
each block's ``E`` in memory, as the item step's solve does, but never the whole (m, d, d)
array (1.75 GB at d = 128). A plain sum would not do: XLA then simplifies the mirroring of the
triangle away, and the result was a 7x speed-up that the item step never sees.

* old: ``jax.random.normal(fold_in(key, i), (d² + d,))`` per item (JAX's default partitionable
  threefry), upper triangle of the first d² mirrored; the code before issue 11.
* new: :func:`dpmt.solvers.ssp._batch_noise` (d(d+1)/2 + d normals per item from the unrolled
  threefry of :mod:`dpmt.solvers.noise`).

``--item-step``: one private SSP item step (:func:`dpmt.solvers.ssp.ssp_item_step`) on a
synthetic ML-20M-like data set (``--interactions``, 26,744 items) with the old noise
monkeypatched in, with the new one, and with no noise draw at all (zeros: the rest of the
step). Each variant is compiled and warmed up, then timed best of 3. The variants alternate
(``--rounds``) because the machine is shared.
Every timing is jitted, warmed up, best of ``--repeats``, and ends in ``block_until_ready``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dpmt.solvers import ssp  # noqa: E402
from dpmt.solvers.layout import map_batches  # noqa: E402


def old_item_noise(key, i, d, sigma_A, sigma_b):
    """The item noise before issue 11 (kept here as the reference of the benchmark)."""
    z = jax.random.normal(jax.random.fold_in(key, i), (d * d + d,), jnp.float32)
    Z = z[: d * d].reshape(d, d)
    E = (jnp.triu(Z) + jnp.triu(Z, 1).T) * sigma_A
    return E, sigma_b * z[d * d:]


def old_batch_noise(key, idx, d, sigma_A, sigma_b):
    return jax.vmap(lambda i: old_item_noise(key, i, d, sigma_A, sigma_b))(idx)


NOISE = {"old": old_batch_noise, "new": ssp._batch_noise}


def no_noise(key, idx, d, sigma_A, sigma_b):
    """Zeros of the noise's shapes (scaled by the traced σ, so XLA cannot fold them away): the
    item step's time without any noise draw, for the noise's share of it."""
    n = idx.shape[0]
    return (jnp.zeros((n, d, d), jnp.float32) * sigma_A, jnp.zeros((n, d), jnp.float32) * sigma_b)


def best_of(fn, repeats: int) -> float:
    jax.block_until_ready(fn())                       # warm-up (and compile)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def noise_fn(batch_noise, m: int, d: int):
    """jitted: ``E_i v + e_i`` (m, d) of items 0..m-1, in blocks of ``solve_block_rows(d)``."""
    idx = jnp.arange(m, dtype=jnp.uint32)

    v = jnp.linspace(-1.0, 1.0, d, dtype=jnp.float32)

    @jax.jit
    def draw(key):
        def block(i):
            E, e = batch_noise(key, i, d, jnp.float32(0.5), jnp.float32(0.7))
            return jnp.einsum("nkl,l->nk", E, v) + e
        return map_batches(block, (idx,), ssp.solve_block_rows(d))

    return draw


def bench_noise(m: int, dims, repeats: int, rounds: int) -> list[dict]:
    key = jax.random.key(0)
    rows = []
    for d in dims:
        fns = {name: noise_fn(f, m, d) for name, f in NOISE.items()}
        t = {name: float("inf") for name in fns}
        for _ in range(rounds):                       # alternate: the machine is shared
            for name, fn in fns.items():
                t[name] = min(t[name], best_of(lambda: fn(key), repeats))
        rows.append({"what": f"item noise, m = {m:,}, d = {d}", "old": t["old"], "new": t["new"]})
    return rows


def bench_item_step(interactions: int, d: int, psd: str, repeats: int, rounds: int) -> dict:
    from dpmt.data import make_synthetic_like
    from dpmt.solvers.layout import task_layout

    r = make_synthetic_like("ml-20m", scale=interactions / 20_000_263, seed=0)
    layout = task_layout(r, dim=d)
    rng = np.random.default_rng(0)
    U = rng.normal(size=(r.n_users, d)).astype(np.float32)
    U /= np.maximum(1.0, np.linalg.norm(U, axis=1, keepdims=True))     # clipped, ‖u‖ ≤ 1
    w = np.full(r.nnz, 0.5, np.float32)
    key = jax.random.key(1)
    current = ssp._batch_noise
    variants = dict(NOISE, none=no_noise)
    t = {name: float("inf") for name in variants}
    try:
        for _ in range(rounds):
            for name, f in variants.items():
                ssp._batch_noise = f        # read at trace time by private_rows_solve
                jax.clear_caches()          # so the item step is traced again with it
                t[name] = min(t[name], best_of(lambda: ssp.ssp_item_step(
                    layout, U, w, None, key, 0.3, 0.3, 1.0, psd=psd), repeats))
    finally:
        ssp._batch_noise = current
        jax.clear_caches()
    return {"what": f"ssp_item_step psd={psd}, {r.nnz:,} interactions, {r.n_items:,} items, "
                    f"d = {d}", "old": t["old"], "new": t["new"], "none": t["none"]}


def markdown(rows: list[dict]) -> str:
    """The table; for item steps also the step without noise and the noise's share of it
    (step − step without noise, old → new)."""
    out = ["| what | old s | new s | speed-up | without noise s | noise in the step s |",
           "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        extra = "| | |"
        if "none" in r:
            extra = (f"| {r['none']:.3f} | {r['old'] - r['none']:.3f} → "
                     f"{r['new'] - r['none']:.3f} |")
        out.append(f"| {r['what']} | {r['old']:.3f} | {r['new']:.3f} | "
                   f"{r['old'] / r['new']:.2f}x {extra}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=26_744)
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2, help="old/new alternations (best kept)")
    p.add_argument("--item-step", action="store_true", help="also time ssp_item_step")
    p.add_argument("--interactions", type=int, default=2_000_000)
    p.add_argument("--step-dims", type=int, nargs="+", default=[64])
    p.add_argument("--psd", nargs="+", default=["shift"], choices=["shift", "project", "floor"])
    args = p.parse_args(argv)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, "
          f"{os.cpu_count()} CPUs; best of {args.repeats} x {args.rounds} rounds", flush=True)
    rows = bench_noise(args.items, args.dims, args.repeats, args.rounds)
    if args.item_step:
        for d in args.step_dims:
            for psd in args.psd:
                rows.append(bench_item_step(args.interactions, d, psd, args.repeats,
                                            args.rounds))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
