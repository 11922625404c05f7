"""Tried for issue 29, not kept: can noisy GD's two streaming passes per step be cheaper on
XLA:CPU? Synthetic blocks of the pre-gathered rows' shape ``(c, n, L, d)`` (about 2.7M slots,
d = 64, split over the host devices by ``shard_map``), 10 steps of a stand-in update
(residuals, a global clip factor by ``psum``, the rows, a gradient step), in one jitted
``fori_loop``; best of 4 (``--rounds``):

* ``twopass``: as :mod:`dpmt.solvers.gd_blocks` runs them, a batched mat-vec (residuals) and
  a batched vec-mat (rows), each reading all blocks;
* ``fused``: one ``lax.map`` over the chunks, each chunk's rows, its update and the next
  step's residuals while the chunk is in cache (one read of the blocks per step; needs a
  row-separable optimizer);
* ``fused_mr``: the same with multiply-and-reduce in place of the dot products;
* ``mr/ein``, ``ein/mr``: two passes, one of them multiply-and-reduce;
* ``block-diagonal k``: two passes, each k items' mat-vecs as one small matrix product of
  which only the diagonal blocks are kept (k times the FLOPs at, it was hoped, GEMM speed).

    python experiments/fused_passes.py [--devices 2] [--L 64] [--n 64]

Measured 2026-12-06 on the 2-core Intel Xeon (seconds for 10 steps):

    devices  L    n    twopass  fused   fused_mr  mr/ein  ein/mr
    2        64   64   0.543    0.639   0.923     1.607   1.387
    1        64   64   1.012    0.979   1.303
    2        64   16   0.526    0.643   0.769
    2        64   256  0.537    0.802   1.224
    2        256  8    0.513    0.604   0.769
    2        8    512  0.746                      1.791   0.663

Reading each block once per step does not pay: the two batched products run at ~25 GB/s on
2 devices (~14 GB/s on one, where fusing saves 3%), which is the products' own speed on one
thread each, not the memory's; the per-chunk loop costs more than the second read saves.
XLA's dot kernels beat multiply-and-reduce fusions by 2-3x, except the vec-mat over very
short rows (L = 8: 0.66 against 0.75 s). The block-diagonal products are slower still, 8
steps on 2 devices (a first version of this script, /tmp, the same shapes as the segments'
rows, L = 512): two passes 0.393 s, k = 2 / 4 / 8 / 16: 0.546 / 0.615 / 0.743 / 0.948 s
(L = 64: 0.399 against 0.584 / 0.642 / 0.751 / 0.973 s).
"""

from __future__ import annotations

import argparse
import os
import time


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--L", type=int, default=64, help="slots per row")
    p.add_argument("--n", type=int, default=64, help="rows per chunk")
    p.add_argument("--slots", type=int, default=2_700_000)
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args(argv)
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={a.devices}")

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    hi = jax.lax.Precision.HIGHEST
    L, n, d, nd = a.L, a.n, 64, a.devices
    c = (a.slots // (L * n)) // nd * nd
    mesh = jax.make_mesh((nd,), ("x",))
    rng = np.random.default_rng(0)
    sh = NamedSharding(mesh, P("x"))
    xs = jax.device_put(jnp.asarray(rng.standard_normal((c, n, L, d), np.float32) * 0.1), sh)
    V = jax.device_put(jnp.asarray(rng.standard_normal((c, n, d), np.float32) * 0.1), sh)
    y = jax.device_put(jnp.asarray(rng.standard_normal((c, n, L), np.float32)), sh)
    steps = 10

    ein1 = lambda x, v: jnp.einsum("cnld,cnd->cnl", x, v, precision=hi)      # noqa: E731
    ein2 = lambda cf, x: jnp.einsum("cnl,cnld->cnd", cf, x, precision=hi)    # noqa: E731
    mr1 = lambda x, v: jnp.sum(x * v[:, :, None, :], -1)                     # noqa: E731
    mr2 = lambda cf, x: jnp.sum(cf[..., None] * x, 2)                        # noqa: E731

    def two(p1, p2):
        def f(xs, V, y):
            def step(t, V):
                e = p1(xs, V) - y
                coef = e / (1 + jax.lax.psum(jnp.sum(e * e), "x"))
                return V - 0.01 * p2(coef, xs)
            return jax.lax.fori_loop(0, steps, step, V)
        return f

    def fused(p1, p2):
        def f(xs, V, y):
            def step(t, carry):
                V, e = carry
                coef = e / (1 + jax.lax.psum(jnp.sum(e * e), "x"))

                def chunk(args):
                    x, v, cf, yy = args
                    v2 = v - 0.01 * p2(cf[None], x[None])[0]
                    return v2, p1(x[None], v2[None])[0] - yy
                return jax.lax.map(chunk, (xs, V, coef, y))
            return jax.lax.fori_loop(0, steps, step, (V, p1(xs, V) - y))[0]
        return f

    def block_diagonal(k):
        """k items' mat-vecs as one (k·L × d)(d × k) product, keeping its diagonal blocks
        (k times the FLOPs, in the hope of GEMM speed); the rows pass likewise."""
        def p1(x, v):
            c, n = x.shape[:2]
            b = c * n // k
            out = jnp.einsum("bmd,bkd->bmk", x.reshape(b, k * L, d), v.reshape(b, k, d),
                             precision=hi).reshape(b, k, L, k)
            return jnp.diagonal(out, axis1=1, axis2=3).transpose(0, 2, 1).reshape(c, n, L)

        def p2(cf, x):
            c, n = x.shape[:2]
            b = c * n // k
            eye = jnp.eye(k, dtype=cf.dtype).reshape(1, k, k, 1)
            C = (cf.reshape(b, 1, k, L) * eye).reshape(b, k, k * L)
            return jnp.einsum("bkm,bmd->bkd", C, x.reshape(b, k * L, d),
                              precision=hi).reshape(c, n, d)
        return p1, p2

    variants = {"twopass": two(ein1, ein2), "fused": fused(ein1, ein2),
                "fused_mr": fused(mr1, mr2), "mr/ein": two(mr1, ein2), "ein/mr": two(ein1, mr2)}
    for k in (2, 4, 8):
        if a.n % k == 0:
            variants[f"block-diagonal {k}"] = two(*block_diagonal(k))
    best, outs = {}, {}
    for name, f in variants.items():
        g = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(P("x"),) * 3, out_specs=P("x")))
        outs[name] = np.asarray(g(xs, V, y))
        best[name] = float("inf")
        for _ in range(a.rounds):
            t = time.perf_counter()
            jax.block_until_ready(g(xs, V, y))
            best[name] = min(best[name], time.perf_counter() - t)
    ref = outs["twopass"]
    out = {"devices": nd, "L": L, "n": n, "chunks": c, "best_seconds": best,
           "max_abs_diff": {k: float(np.abs(v - ref).max()) for k, v in outs.items()},
           "load": os.getloadavg()}
    print(out)
    return out


if __name__ == "__main__":
    main()
