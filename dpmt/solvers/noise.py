"""Gaussian noise for the private releases: JAX's threefry normals, computed faster on CPU.

Every draw here is, for a threefry key ``k`` (two uint32 words) and ``n`` normals,

    z = jax.random.normal(k, (2⌈n/2⌉,), float32)[:n]    with jax_threefry_partitionable=False

That is Threefry-2x32 with 20 rounds (Salmon et al. 2011, "Parallel random numbers: as easy
as 1, 2, 3"; the hash of JAX's default PRNG) of the counter pairs ``(c, c + ⌈n/2⌉)``, with
both hashed words kept, then JAX's own uniform → ``√2·erfinv`` transform. The values are
those of JAX; only the way XLA computes them differs. Why, measured on XLA:CPU (2 shared
cores, 26,744 items, d = 64; ``benchmarks/noise_bench.py`` and the issue-11 report):

* JAX lowers its threefry primitive on CPU to a *rolled* 5-step loop (short compiles), each
  step writing its arrays to memory. The same 20 rounds unrolled in ``jnp``
  (:func:`threefry2x32`) fuse into one loop: 2.6x faster, bit for bit the same.
* JAX's default "partitionable" ``jax.random.normal`` hashes one counter pair per output word
  and xors the two words. Keeping both words of each pair made the whole draw 2.3x faster.
* XLA's own bit generator is slower. ``RngBitGenerator`` Philox, which the ``rbg`` /
  ``unsafe_rbg`` key implementations use, was 3-4x slower than threefry on CPU. Under
  ``vmap`` it also draws from the batch's first key only, so an item's noise would depend on
  the other items of its batch. The Box–Muller and ``ndtri`` transforms were 1.2-3x slower
  than ``erf_inv``.

A symmetric matrix needs only its upper triangle, d(d+1)/2 normals instead of d²
(:func:`symmetric_from_words`).

Everything is a pure function of (key words, counters), with static shapes. It is jit- and
vmap-friendly and deterministic. It is the same for every device, batching and backend: the
hash is integer arithmetic, and erfinv is XLA's own float32 expansion.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)     # Threefry's key-schedule constant
_ERF_LO = np.nextafter(np.float32(-1), np.float32(0))


def _rotl(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 with 20 rounds, unrolled: the two hashed uint32 words of the counter
    words ``(x0, x1)`` under the key words ``(k0, k1)`` (all uint32, broadcastable).

    Bit-identical to ``jax.extend.random.threefry2x32_p`` (tests/test_noise.py checks it);
    unrolled so that XLA fuses the rounds into one loop instead of JAX's rolled CPU lowering.
    """
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for s in range(5):
        for r in _ROTATIONS[s % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(s + 1) % 3]
        x1 = x1 + ks[(s + 2) % 3] + np.uint32(s + 1)
    return x0, x1


def key_words(key) -> jax.Array:
    """uint32 ``(..., 2)`` threefry key words of ``key``: a typed key, or raw legacy uint32 key
    data (the sharded steps pass key data; raw data means JAX's default implementation).

    A single key of another implementation (e.g. ``rbg``) is mapped to two words of its own
    stream. Call this on the root key, never per item: under ``vmap`` the ``rbg`` streams
    depend on the whole batch.
    """
    key = jnp.asarray(key)
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key)
    if str(jax.random.key_impl(key)) == "threefry2x32":
        return jax.random.key_data(key)
    return jax.random.bits(key, (2,), jnp.uint32)


def fold_in_words(words, idx) -> jax.Array:
    """uint32 ``(n, 2)`` key words of ``jax.random.fold_in(key, i)`` for every ``i`` of
    ``idx (n,)`` (cast to uint32 like ``fold_in`` does), from ``words = key_words(key)``
    ``(2,)``: the hash of the counter pair ``(0, i)``, bit-identical to ``fold_in``."""
    i = jnp.asarray(idx).astype(jnp.uint32)
    y0, y1 = threefry2x32(words[0], words[1], jnp.zeros_like(i), i)
    return jnp.stack([y0, y1], axis=-1)


def normal_words(words, n: int) -> jax.Array:
    """float32 ``(..., n)`` i.i.d. standard normals from key words ``(..., 2)`` (one row of
    normals per key, batched over the leading axes).

    The first ``n`` of ``jax.random.normal(key, (2h,))``, ``h = ⌈n/2⌉``, with
    ``jax_threefry_partitionable=False``: the hash of the counter pairs ``(c, c + h)``,
    ``c < h``, both words kept. Then the top 23 bits → uniform on [nextafter(−1, 0), 1)
    → ``√2·erfinv``, as ``jax.random.normal`` does.
    """
    h = (n + 1) // 2
    c = jax.lax.iota(jnp.uint32, h)
    y0, y1 = threefry2x32(words[..., :1], words[..., 1:], c, c + np.uint32(h))
    bits = jnp.concatenate([y0, y1], axis=-1)[..., :n]
    # jax.random.uniform(lo, 1): the top 23 bits as the mantissa of a float in [1, 2), minus 1
    f = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | np.uint32(0x3F800000),
                                     jnp.float32) - np.float32(1)
    u = jnp.maximum(_ERF_LO, f * (np.float32(1) - _ERF_LO) + _ERF_LO)
    return np.float32(math.sqrt(2)) * jax.lax.erf_inv(u)


def symmetric_words(d: int) -> int:
    """Words per symmetric ``(d, d)`` matrix in :func:`symmetric_from_words`: ``d(d+1)/2``."""
    return d * (d + 1) // 2


@functools.lru_cache(maxsize=None)
def _mirror_index(d: int) -> np.ndarray:
    """int32 ``(d, d)``: entry ``(k, l)`` is the position of ``(min(k,l), max(k,l))`` in the
    row-major upper triangle (``np.triu_indices(d)`` order). A static constant."""
    k, l = np.meshgrid(np.arange(d), np.arange(d), indexing="ij")
    lo, hi = np.minimum(k, l), np.maximum(k, l)
    return (lo * d - lo * (lo - 1) // 2 + hi - lo).astype(np.int32)


def symmetric_from_words(z, d: int) -> jax.Array:
    """The symmetric ``(..., d, d)`` matrices whose upper triangles (diagonal included), row by
    row, are the first ``d(d+1)/2`` words of ``z (..., K)``, ``K ≥ d(d+1)/2``; the lower
    triangles mirror them.

    One gather of a static index (:func:`_mirror_index`), on the flattened words. This was the
    fastest way measured on XLA:CPU inside the item step's solve, where ``Â = A + E`` feeds the
    Cholesky in two layouts. There the noise took ~4x less time than with the batched gather
    ``z[..., index]``, whose canonical form gathers strided columns of the batch. Also measured,
    and slower: a 2×2-block layout of reshapes, transposes and selects (the whole solve 1.25x
    slower), and hashing all d² entries elementwise with symmetric counters and no gather
    (3.4x slower: XLA duplicates the cheap integer hash into every consumer).
    """
    T = symmetric_words(d)
    index = _mirror_index(d)
    lead, K = z.shape[:-1], z.shape[-1]
    if K < T:
        raise ValueError(f"symmetric_from_words needs {T} words per matrix, got {K}")
    n = math.prod(lead)
    if n <= 1 or n * K >= 2**31:      # one matrix, or flat int32 offsets would overflow
        return z[..., index]
    offsets = (jnp.arange(n, dtype=jnp.int32) * K).reshape(lead + (1, 1))
    return z.reshape(-1)[offsets + index]
