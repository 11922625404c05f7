"""Tried for issue 29, not kept: U's pre-gathered rows in bfloat16 (half the bytes of the two
streaming passes of a noisy-GD step). XLA:CPU's batched mat-vec / vec-mat on bfloat16 rows
(``preferred_element_type=float32``) and the same as an upcast multiply-reduce, against the
float32 einsum noisy GD runs (``dpmt.solvers.gd_blocks``), on 2.7M slots × d = 64.

    python experiments/bf16_rows.py

Measured 2026-12-06 on the 2-core Intel Xeon (other jobs running; ratios within one run):
p1 f32 88 ms, bf16 319 ms; p2 f32 87 ms, bf16 367 ms; upcast multiply-reduce 300-500 ms.
A quieter rerun: p1 51 / 198 ms, p2 49 / 198 ms. bfloat16 is 3.6-4.2x slower on this CPU, so
the rows stay float32. (A kept bf16 path would
also have to compute ‖x_j‖ from the rounded rows, or the clip would not bound what is summed.)
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

HI = jax.lax.Precision.HIGHEST


@jax.jit
def p1(xs, v):
    """The residual pass: per slot ⟨x_j, v_i⟩ (batched mat-vec)."""
    return jnp.einsum("cnld,cnd->cnl", xs, v.astype(xs.dtype), precision=HI,
                      preferred_element_type=jnp.float32)


@jax.jit
def p2(xs, coef):
    """The rows pass: per row Σ_j coef_ij x_j (batched vec-mat)."""
    return jnp.einsum("cnl,cnld->cnd", coef.astype(xs.dtype), xs, precision=HI,
                      preferred_element_type=jnp.float32)


@jax.jit
def p1u(xs, v):
    """p1 as an upcast multiply-reduce (the convert fused into the reduction)."""
    return jnp.sum(xs.astype(jnp.float32) * v[:, :, None, :], axis=-1)


@jax.jit
def p2u(xs, coef):
    """p2 as an upcast multiply-reduce."""
    return jnp.sum(xs.astype(jnp.float32) * coef[..., None], axis=2)


def main() -> None:
    c, n, l, d = 1000, 64, 42, 64                     # ~2.7M slots
    k = jax.random.PRNGKey(0)
    xs32 = jax.random.normal(k, (c, n, l, d), jnp.float32)
    xs16 = xs32.astype(jnp.bfloat16)
    v = jax.random.normal(k, (c, n, d), jnp.float32)
    coef = jax.random.normal(k, (c, n, l), jnp.float32)
    for name, f, a, b in [("p1 f32", p1, xs32, v), ("p1 bf16", p1, xs16, v),
                          ("p1u f32", p1u, xs32, v), ("p1u bf16", p1u, xs16, v),
                          ("p2 f32", p2, xs32, coef), ("p2 bf16", p2, xs16, coef),
                          ("p2u f32", p2u, xs32, coef), ("p2u bf16", p2u, xs16, coef)]:
        f(a, b).block_until_ready()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            f(a, b).block_until_ready()
            ts.append(time.perf_counter() - t)
        print(name, f"{min(ts) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
