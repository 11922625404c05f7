#!/usr/bin/env python
"""Micro-benchmark of the Gaussian sampler (issue 24, finding 2): JAX's 23-bit normals against
the 64-bit sampler of :mod:`dpmt.solvers.noise`.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/noise_sampler_bench.py               # all
    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/noise_sampler_bench.py --no-item-step

Samplers (each a function ``(key words (..., 2), n) -> (..., n)`` normals):

* ``old``: the sampler before issue 24, kept here as the reference. It computes
  ``jax.random.normal(k, (2⌈n/2⌉,))[:n]`` with non-partitionable threefry: half a hash per
  normal (both words of the counter pairs ``(c, c + ⌈n/2⌉)``), the top 23 bits → uniform →
  ``√2·erfinv``. Range ±5.4.
* ``new``: :func:`dpmt.solvers.noise.normal_words`. One hash per normal (64 bits), then
  ``Φ⁻¹`` by one degree-8 polynomial with per-element coefficient sets. Range ±9.16.
* ``new-ndtri`` (``--all-samplers``): the same 64-bit uniforms through
  ``jax.scipy.special.ndtri``, the inverse CDF the new sampler does not use, for comparison.

Noise: the normals of the SSP item step's ``E_i``, ``d(d+1)/2`` per item for ``--items`` items
(26,744: ML-20M). They are drawn block by block of ``ssp.solve_block_rows(d)`` items, item ``i``
keyed by ``fold_in(key, i)``, as the fused item step draws them. Each block is reduced to one
sum per item, so the ``(m, d(d+1)/2)`` array is never materialised.

Item step: one private SSP item step, :func:`dpmt.solvers.ssp_item_step` (public API), on a
``make_synthetic`` data set (``--step-items`` items, ``--interactions``), with each variant
patched in for ``ssp.normal_words`` and ``ssp.symmetric_from_words``: ``old`` (the code
before issue 24: JAX's sampler, the gather straight from the normals), ``old-sampler`` (JAX's
sampler, today's gather from a concatenation), ``new`` (today's code). ``none`` is the step
without noise draws: zeros tied to the key, so that XLA cannot fold them away. It shows the
rest of the step.

Every timing is jitted, compiled and warmed up first, then best of ``--repeats``, ending in
``block_until_ready``. The variants alternate (``--rounds``) because the machine is shared.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.noise_bench import best_of  # noqa: E402
from dpmt.solvers import noise, ssp  # noqa: E402
from dpmt.solvers.layout import map_batches  # noqa: E402

_ERF_LO = np.nextafter(np.float32(-1), np.float32(0))


def old_normal_words(words, n: int) -> jax.Array:
    """The sampler before issue 24 (``noise.normal_words`` up to then): the first ``n`` of
    ``jax.random.normal(key, (2h,))``, ``h = ⌈n/2⌉``, non-partitionable threefry."""
    h = (n + 1) // 2
    c = jax.lax.iota(jnp.uint32, h)
    y0, y1 = noise.threefry2x32(words[..., :1], words[..., 1:], c, c + np.uint32(h))
    bits = jnp.concatenate([y0, y1], axis=-1)[..., :n]
    f = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | np.uint32(0x3F800000),
                                     jnp.float32) - np.float32(1)
    u = jnp.maximum(_ERF_LO, f * (np.float32(1) - _ERF_LO) + _ERF_LO)
    return np.float32(math.sqrt(2)) * jax.lax.erf_inv(u)


def ndtri_normal_words(words, n: int) -> jax.Array:
    """The new sampler's 64-bit uniforms through ``jax.scipy.special.ndtri``."""
    c = jax.lax.iota(jnp.uint32, n)
    hi, lo = noise.threefry2x32(words[..., :1], words[..., 1:], noise.NORMAL_TAG, c)
    upper = hi >> np.uint32(31)
    mask = np.uint32(0) - upper
    p = (((hi ^ mask).astype(jnp.float32)
          + ((lo ^ mask).astype(jnp.float32) + np.float32(0.5)) * np.float32(2.0 ** -32))
         * np.float32(2.0 ** -32))
    t = -jax.scipy.special.ndtri(p)
    return jnp.where(upper != 0, t, -t)


def old_symmetric_from_words(z, d: int) -> jax.Array:
    """``noise.symmetric_from_words`` before issue 24: the flat gather straight from ``z``."""
    index = noise._mirror_index(d)
    lead, K = z.shape[:-1], z.shape[-1]
    n = math.prod(lead)
    if n <= 1 or n * K >= 2**31:
        return z[..., index]
    offsets = (jnp.arange(n, dtype=jnp.int32) * K).reshape(lead + (1, 1))
    return z.reshape(-1)[offsets + index]


SAMPLERS = {"old": old_normal_words, "new": noise.normal_words}
EXTRA_SAMPLERS = {"new-ndtri": ndtri_normal_words}
#: item-step variants: (sampler, symmetric_from_words); "old" is the code before issue 24
STEP_VARIANTS = {"old": (old_normal_words, old_symmetric_from_words),
                 "old-sampler": (old_normal_words, noise.symmetric_from_words),
                 "new": (noise.normal_words, noise.symmetric_from_words)}
EXTRA_STEP_VARIANTS = {"new-ndtri": (ndtri_normal_words, noise.symmetric_from_words)}


def no_normals(words, n: int) -> jax.Array:
    """Zeros of the normals' shape (tied to the key words, so that XLA keeps the shape work)."""
    return jnp.zeros(words.shape[:-1] + (n,), jnp.float32) * words[..., :1].astype(jnp.float32)


def noise_fn(sampler, m: int, d: int):
    """jitted: per-item sums of the ``d(d+1)/2`` normals of items 0..m-1, in blocks."""
    idx = jnp.arange(m, dtype=jnp.uint32)
    K = noise.symmetric_words(d)

    @jax.jit
    def draw(key):
        words = noise.key_words(key)

        def block(i):
            return sampler(noise.fold_in_words(words, i), K).sum(axis=-1)
        return map_batches(block, (idx,), ssp.solve_block_rows(d))

    return draw


def bench_noise(samplers: dict, m: int, dims, repeats: int, rounds: int) -> list[dict]:
    key = jax.random.key(0)
    rows = []
    for d in dims:
        fns = {name: noise_fn(f, m, d) for name, f in samplers.items()}
        t = {name: float("inf") for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                t[name] = min(t[name], best_of(lambda: fn(key), repeats))
        rows.append({"what": f"noise only: {m:,} items × {noise.symmetric_words(d):,} "
                             f"normals (d = {d})", **t})
    return rows


def bench_item_step(variants: dict, n_items: int, interactions: int, d: int, psd: str,
                    repeats: int, rounds: int) -> dict:
    from dpmt.data import make_synthetic
    from dpmt.solvers import ssp_item_step, task_layout

    r = make_synthetic(n_users=max(1000, interactions // 50), n_items=n_items,
                       n_interactions=interactions, seed=0)
    layout = task_layout(r, dim=d)
    rng = np.random.default_rng(0)
    U = rng.normal(size=(r.n_users, d)).astype(np.float32)
    U /= np.maximum(1.0, np.linalg.norm(U, axis=1, keepdims=True))     # clipped, ‖u‖ ≤ 1
    w = np.full(r.nnz, 0.5, np.float32)
    key = jax.random.key(1)
    variants = dict(variants, none=(no_normals, noise.symmetric_from_words))
    t = {name: float("inf") for name in variants}
    current = ssp.normal_words, ssp.symmetric_from_words
    try:
        for _ in range(rounds):
            for name, (f, sym) in variants.items():
                # read at trace time by ssp._batch_noise
                ssp.normal_words, ssp.symmetric_from_words = f, sym
                jax.clear_caches()          # so that the item step is traced again with it
                t[name] = min(t[name], best_of(lambda: ssp_item_step(
                    layout, U, w, None, key, 0.3, 0.3, 1.0, psd=psd), repeats))
    finally:
        ssp.normal_words, ssp.symmetric_from_words = current
        jax.clear_caches()
    return {"what": f"ssp_item_step psd={psd}: {r.nnz:,} interactions, {r.n_items:,} items, "
                    f"d = {d}", **t}


def markdown(rows: list[dict], names: list[str]) -> str:
    others = [n for n in names if n != "old"]
    out = ["| what | " + " | ".join(f"{n} s" for n in names) + " | "
           + " | ".join(f"{n} / old" for n in others) + " | without noise s |",
           "|---|" + "---:|" * (len(names) + len(others) + 1)]
    for r in rows:
        none = f"{r['none']:.3f}" if "none" in r else ""
        out.append(f"| {r['what']} | " + " | ".join(f"{r[n]:.3f}" for n in names) + " | "
                   + " | ".join(f"{r[n] / r['old']:.2f}x" for n in others) + f" | {none} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=26_744)
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2, help="alternations of the variants")
    p.add_argument("--all-samplers", action="store_true", help="also time new-ndtri")
    p.add_argument("--no-item-step", dest="item_step", action="store_false")
    p.add_argument("--step-items", type=int, default=20_000)
    p.add_argument("--interactions", type=int, default=1_000_000)
    p.add_argument("--step-dims", type=int, nargs="+", default=[64])
    p.add_argument("--psd", nargs="+", default=["cg"], choices=["cg", "shift", "project"],
                   help="item solves to time (cg: dpmt's default item_solve)")
    args = p.parse_args(argv)
    samplers = dict(SAMPLERS, **(EXTRA_SAMPLERS if args.all_samplers else {}))
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; best of {args.repeats} x {args.rounds} "
          "rounds", flush=True)
    rows = bench_noise(samplers, args.items, args.dims, args.repeats, args.rounds)
    print(markdown(rows, list(samplers)), flush=True)
    if args.item_step:
        variants = dict(STEP_VARIANTS, **(EXTRA_STEP_VARIANTS if args.all_samplers else {}))
        steps = [bench_item_step(variants, args.step_items, args.interactions, d, psd,
                                 args.repeats, args.rounds)
                 for d in args.step_dims for psd in args.psd]
        print(markdown(steps, list(variants)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
