"""Gaussian noise for the private releases: 64 random bits per normal, and what the sampler's
distance from the ideal Gaussian costs in δ (issue 24, finding 2).

**The sampler.** Normal ``c`` of a threefry key ``k`` (two uint32 words) is

    (hi, lo) = Threefry-2x32(k; counter pair (TAG, c))         TAG = 0x4E4F524D ("NORM")
    U = (hi·2^32 + lo + ½) / 2^64                               a 64-bit uniform in (0, 1)
    z = Φ⁻¹(U)                                                   in float32

Threefry-2x32 with 20 rounds (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2,
3"; the hash of JAX's default PRNG), unrolled (:func:`threefry2x32`). Both hashed words of one
counter pair make one normal. The first counter word is a constant tag that JAX's own
``fold_in`` and partitionable ``split``/``bits`` (first word 0) never use, so a normal's bits
are never the key data of a ``fold_in`` of the same key.

``Φ⁻¹(U)`` is computed without forming ``U`` (:func:`normals_from_bits`): the lower half
``hi < 2^31`` gives ``p = U``, the upper half ``p = 1 − U`` from the complemented words
``(~hi, ~lo)`` (exactly ``1 − U``), so that ``p = (h' + (l' + ½)·2^-32)·2^-32 ≤ ½`` is formed in
float32 with full relative precision down to ``2^-65``; then ``z = ∓Φ⁻¹(1 − p)`` with the sign
of the half (:func:`tail_quantile`, max relative error 3e-7 on ``[2^-65, ½]``,
tests/test_noise.py). The map ``(hi, lo) → (~hi, ~lo)`` sends ``z`` to ``−z``: the sampler is
exactly symmetric. Its range is ``[−Z_MAX, Z_MAX]``, ``Z_MAX = Φ⁻¹(1 − 2^-65) ≈ 9.1553``, the
outputs of the two extreme cells ``hi = lo = 0`` and ``hi = lo = 2^32 − 1``.

The sampler it replaces (JAX's ``jax.random.normal``: the top 23 bits of one word, then
``√2·erfinv`` in float32) reached only ``z ∈ [−5.42, 5.22]``, on a coarse grid in the tails.
Outputs impossible under a data set D were then possible under a neighbour D′ with
probability ~1e-7 per coordinate, a δ that nothing accounted.

**What it costs in privacy.** The accountant (``dp_accounting``) analyses the *ideal*
mechanism, every normal an exact ``X ~ N(0, 1)``. Couple the sampler to it: ``K =
⌊2^64 Φ(X)⌋`` has the law of the 64-bit word, and the sampler's output is ``f(X) = Φ⁻¹((K +
½)/2^64)`` (float32), the quantile transform of a 64-bit uniform. That differs from X in two
ways.

1. *Truncation.* For ``|X| > Z_MAX`` the output is ``±Z_MAX``, the clamped X: probability
   ``2Φ(−Z_MAX) ≈ 2^-64`` per normal, from the extreme cells' outputs
   (:data:`TAIL_MASS_PER_DRAW` takes it at :data:`Z_BOX`, a hair inside). It is charged
   (below).
2. *Quantisation.* Everywhere else ``f(X)`` is a point of X's own cell up to float32 round-off:
   a deterministic, data-independent rounding of the noise. For ``|z| < 7.7`` the cells are
   narrower than a float32 ulp of z; beyond, they widen up to 0.07 at the second-to-last cell.
   Like the float32 arithmetic of ``s(D) + σ·z`` itself, such a structure is exploitable only
   by someone who reads the noisy statistic at full precision (Mironov, "On significance of the
   least significant bits for differential privacy", CCS 2012; Holohan & Braghin, "Secure
   random sampling in differential privacy", ESORICS 2021; Jin, McMurtry, Rubinstein &
   Ohrimenko, "Are we there yet? Timing and floating-point attacks on differential privacy
   systems", IEEE S&P 2022). This is excluded by the threat model, not proved: the continuous
   noisy statistics (Â, b̂, Ĝ, the noisy gradient sums, Ĉ) are never written to any file;
   only V, a non-injective post-processing of them, is published.

*Claim* (truncation). Let a run release ``r = 1..R``, release ``r`` being ``n_r`` Gaussian
coordinates with noise multiplier ``z_r`` (noise std over L2 sensitivity), and let its ideal
version be (ε, δ)-DP. With every normal equal to X on ``[−b, b]``, ``b = Z_BOX ≤ Z_MAX``,
and anything in ``[−Z_MAX, Z_MAX]`` outside it, the run is

    (ε, δ + tail_delta(Σ_r n_r) + Σ_r edge_delta(z_r, n_r))-DP, for every ε.

*Proof.* Couple the two runs on the same X. They agree unless some normal leaves the box,
which has probability at most ``T = tail_delta(Σ n_r)`` (union bound). For a set S of
transcripts and R_D the transcripts whose implied D-noise lies in the box,
``P′_D(S) ≤ P_D(S ∩ R_D) + T``. Split ``S ∩ R_D`` by ``R_D′``:
``P_D(S ∩ R_D ∩ R_D′) ≤ e^ε P_D′(S ∩ R_D′) + δ ≤ e^ε P′_D′(S) + δ`` (inside its box the
clamped D′-run has the ideal density), and ``P_D(R_D \\ R_D′) ≤ Σ_r η_r``, ``η_r`` the
largest probability that release r's D-noise X is in the box and ``X − a`` is not, over
shifts ``‖a‖ ≤ 1/z_r``. This holds given any past transcript, because each release's noise is
fresh and its shift is bounded for every past (adaptive composition, Poisson sampling
included). :func:`edge_delta` bounds ``η_r``. The generic total-variation argument would
charge ``δ + (1 + e^ε)·T`` instead: the ``e^ε`` makes it useless at ε ≈ 20.

Orders of magnitude: ML-20M at d = 128 draws 26,744 × (8,256 + 128) ≈ 2.2e8 normals per item
step, so 20 item steps give ``tail_delta`` ≈ 2.4e-10. ``edge_delta`` of such a release is
below 6e-14 at noise multipliers z ≥ 0.7 and 5e-13 at z = 0.5. It grows fast below that, as
``Φ(1/z − Z_MAX)``, the probability of landing where the neighbour's clamped output cannot:
1.4e-11 at z = 0.4, 2.9e-9 at z = 0.3, 1.3e-7 at z = 0.25, 1.6e-5 at z = 0.2. The counts of
normals per release are ``dpmt.solvers.ssp.ssp_noise_draws`` / ``gramian_noise_draws``,
``dpmt.solvers.spectral_init.spectral_noise_draws`` and
``dpmt.solvers.noisy_gd.gd_noise_draws``.

**Speed** (XLA:CPU, 2 cores; ``benchmarks/noise_sampler_bench.py``, 2026-12 on a quiet
machine, best of 3 × 2 rounds). 64 bits per normal cost one threefry hash per normal where
JAX's sampler used half of one. The inverse CDF is one degree-8 polynomial whose coefficients
are selected per element from three sets (Giles' single-precision erfinv, plus a third set for
the far tail). That is cheaper than ``jax.scipy.special.ndtri``, which evaluates all three of
its rational approximations and both tails for every element. The noise alone of 26,744 items
took 1.14x as long as JAX's sampler (d = 64: 0.159 → 0.182 s; d = 128: 0.619 → 0.707 s); with
``ndtri``, 1.6x. A whole SSP item step (20,000 items, 1M interactions, d = 64) took 0.96x
("cg") and 1.02x ("shift") the time of the code before, because :func:`symmetric_from_words`
now gathers from materialised normals. Earlier measurements, still valid for the parts kept:

* JAX lowers its threefry primitive on CPU to a *rolled* 5-step loop, each step writing its
  arrays to memory. The same 20 rounds unrolled in ``jnp`` (:func:`threefry2x32`) fuse into
  one loop: 2.6x faster, bit for bit the same.
* XLA's own bit generator is slower. ``RngBitGenerator`` Philox (the ``rbg`` /
  ``unsafe_rbg`` key implementations) was 3-4x slower than threefry on CPU. Under ``vmap`` it
  also draws from the batch's first key only, so an item's noise would depend on the other
  items of its batch.

A symmetric matrix needs only its upper triangle, d(d+1)/2 normals instead of d²
(:func:`symmetric_from_words`).

Everything is a pure function of (key words, counters), with static shapes. It is jit- and
vmap-friendly and deterministic. It is the same on any number of devices and for any batching
or layout: the hash is integer arithmetic, and the rest is elementwise float32. Across
backends, ``log`` and ``sqrt`` may differ in the last bit. :data:`TAIL_MASS_PER_DRAW` allows
for that.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)     # Threefry's key-schedule constant
#: first word of every normal's counter pair (ASCII "NORM"); the second is the normal's index
NORMAL_TAG = np.uint32(0x4E4F524D)


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


# -- the inverse normal CDF ----------------------------------------------------------------------
# erfinv(x) = x·P(w), w = −log(1 − x²), P a degree-8 polynomial (highest power first) in
#   w − 2.5 for w < 5, √w − 3 for 5 ≤ w < 16: M. Giles, "Approximating the erfinv function",
#     GPU Computing Gems Jade Edition (2011), the single-precision version (XLA's ErfInv f32);
#   √w − 5.3 for w ≥ 16 (p < 2^-25, |z| > 5.5, down to p = 2^-65, w = 43.7): not in Giles'
#     single-precision version, which stops at float32's 1 − x ≥ 2^-24. Fitted here by least
#     squares in float64 at 4,000 Chebyshev nodes of √w ∈ [4, √44.5] against scipy's ndtri,
#     rounded to float32 (tests/test_noise.py refits it and checks the accuracy).
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
_ERFINV_FAR_TAIL = (1.576140533643411e-07, -7.388071026070975e-07, 2.8486990686360514e-06,
                    -1.2910629266116302e-05, 5.178102583158761e-05, -0.0001394681166857481,
                    -0.0002960223937407136, 1.0101666450500488, 5.152978897094727)
_FAR_TAIL_W = 16.0
_FAR_TAIL_CENTRE = 5.3


def tail_quantile(p) -> jax.Array:
    """``Φ⁻¹(1 − p) = −Φ⁻¹(p) ≥ 0`` of float32 ``p ∈ [2^-65, ½]``, elementwise, in float32.

    ``√2·erfinv(x)`` with ``x = 1 − 2p`` (:func:`_tail_quantile`). Max relative error 3e-7
    (≈ 5 float32 ulps) on ``[2^-65, ½]`` against float64 ``scipy.special.ndtri``; ``p``
    outside that range is not supported.
    """
    p = jnp.asarray(p, jnp.float32)
    return _tail_quantile(p, np.float32(1) - np.float32(2) * p)


@jax.jit
def _tail_quantile(p, x) -> jax.Array:
    """``√2·erfinv(x) = Φ⁻¹(1 − p)`` given both ``p`` and ``x = 1 − 2p`` (float32), each with
    its own relative precision: ``x`` near ``p = ½``, where ``1 − 2p`` would cancel, and
    ``w = −log(1 − x²) = −log(4p(1 − p))`` from ``p`` in the tails, where ``1 − x²`` would.
    The three coefficient sets are selected per element before one Horner evaluation.

    Jitted, so that it is always compiled as one fused computation, eagerly too: XLA:CPU
    contracts the Horner steps' multiply-adds into FMAs inside a fusion, and op-by-op
    execution would round them twice. The noise then differs in the last bit between eager
    and jitted callers (as ``lax.erf_inv``, one op, never did)."""
    w = -jnp.log(np.float32(4) * p * (np.float32(1) - p))
    s = jnp.sqrt(w)
    central, tail = w < np.float32(5), w < np.float32(_FAR_TAIL_W)
    u = jnp.where(central, w - np.float32(2.5),
                  jnp.where(tail, s - np.float32(3), s - np.float32(_FAR_TAIL_CENTRE)))
    acc = jnp.zeros_like(p)
    for a, b, c in zip(_ERFINV_CENTRAL, _ERFINV_TAIL, _ERFINV_FAR_TAIL):
        acc = acc * u + jnp.where(central, np.float32(a),
                                  jnp.where(tail, np.float32(b), np.float32(c)))
    return np.float32(math.sqrt(2)) * (x * acc)


def normals_from_bits(hi, lo) -> jax.Array:
    """float32 ``z = Φ⁻¹(U)``, ``U = (hi·2^32 + lo + ½)/2^64``, of uint32 words ``hi``, ``lo``
    (broadcastable), elementwise.

    The lower half (``hi < 2^31``) has ``p = U``, the upper half ``p = 1 − U``: complementing
    both words gives exactly ``1 − U = (~hi·2^32 + ~lo + ½)/2^64``. Then
    ``p = (h' + (l' + ½)·2^-32)·2^-32`` in float32 (relative error ≤ 2^-23, the smallest
    ``p = 2^-65`` exact), ``1 − 2p = (2^31 − h' − (l' + ½)·2^-32)·2^-31`` from the exact
    integer ``2^31 − h'`` (no cancellation near ``p = ½``), and ``z = ∓Φ⁻¹(1 − p)``
    (:func:`tail_quantile`).
    """
    upper = hi >> np.uint32(31)                       # 1 on the upper half
    mask = np.uint32(0) - upper                       # all ones on the upper half
    h = hi ^ mask                                     # < 2^31
    frac = ((lo ^ mask).astype(jnp.float32) + np.float32(0.5)) * np.float32(2.0 ** -32)
    p = (h.astype(jnp.float32) + frac) * np.float32(2.0 ** -32)
    x = ((np.uint32(2 ** 31) - h).astype(jnp.float32) - frac) * np.float32(2.0 ** -31)
    t = _tail_quantile(p, x)
    return jnp.where(upper != 0, t, -t)


def normal_words(words, n: int) -> jax.Array:
    """float32 ``(..., n)`` i.i.d. standard normals from key words ``(..., 2)`` (one row of
    normals per key, batched over the leading axes).

    Normal ``c < n`` is :func:`normals_from_bits` of the two words of the threefry hash of the
    counter pair ``(NORMAL_TAG, c)``: exactly ``n`` hashes, nothing drawn and discarded. The
    first ``k`` normals do not depend on ``n``.
    """
    if not 0 <= n <= 2 ** 32:
        raise ValueError(f"normal_words draws at most 2^32 normals per key, asked for {n}")
    c = jax.lax.iota(jnp.uint32, n)
    hi, lo = threefry2x32(words[..., :1], words[..., 1:], NORMAL_TAG, c)
    return normals_from_bits(hi, lo)


def normal(key, shape=(), dtype=jnp.float32) -> jax.Array:
    """Standard normals of ``shape`` from ``key``: a drop-in for ``jax.random.normal`` that
    uses this module's 64-bit sampler (:func:`normal_words` of ``key_words(key)``, in
    row-major order).

    ``key``: one typed key or raw threefry key data. The values are float32 and cast to
    ``dtype`` (a floating type). A wider type keeps float32's grid.
    """
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"normal needs a floating dtype, got {dtype}")
    z = normal_words(key_words(key), math.prod(shape))
    return z.reshape(shape).astype(dtype)


# -- what the sampler costs in δ -----------------------------------------------------------------
#: The sampler's largest output, at the cell ``hi = lo = 2^32 − 1``: float32 ``Φ⁻¹(1 − 2^-65)``
#: on XLA:CPU (one ulp above the exact 9.1552937727; −Z_MAX is the smallest output).
#: tests/test_noise.py checks it against the extreme cells.
Z_MAX = 9.155294418334961
#: Half-width of the box the privacy argument uses: ``Z_MAX`` less 2^-20 relative (about 8
#: float32 ulps), so that a backend whose float32 ``log``/``sqrt`` land a few ulps lower is
#: still covered. A smaller box is conservative for both bounds below.
Z_BOX = Z_MAX * (1 - 2.0 ** -20)
#: Ideal Gaussian mass outside the sampler's range, per normal: ``2Φ(−Z_BOX)`` (≈ 5.4e-20,
#: ≈ 2^-64). This is the clamping probability of the module docstring's coupling.
TAIL_MASS_PER_DRAW = math.erfc(Z_BOX / math.sqrt(2))
#: shifts below this size (in noise units) are "small" in :func:`edge_delta`
_EDGE_TAU = 0.25
assert _EDGE_TAU * (Z_BOX - _EDGE_TAU) >= 2   # what edge_delta's monotonicity argument needs


def tail_delta(draws: int) -> float:
    """``draws × TAIL_MASS_PER_DRAW``: the probability that any of ``draws`` normals is clamped,
    i.e. the total-variation distance between ``draws`` normals of this sampler and ideal
    Gaussians, quantisation aside.

    The argument: the sampler is the quantile transform of a 64-bit uniform. Coupled to an
    ideal Gaussian X through ``K = ⌊2^64 Φ(X)⌋``, it is a quantisation of X (a point of X's
    own cell), except on the tail event ``|X| > Z_MAX`` of probability ≈ 2^-64 per draw, where
    it outputs ``±Z_MAX`` (counted here from :data:`Z_BOX`, a hair inside). Union bound over
    the draws. The quantisation (float-rounding
    structure below that) is covered by the threat model: the continuous noisy statistics (Â,
    b̂, Ĝ, gradient sums, Ĉ) are never written to any file, and only V, a non-injective
    post-processing, is published. Mironov (CCS 2012), Holohan & Braghin (ESORICS 2021,
    "Secure random sampling in differential privacy") and Jin, McMurtry, Rubinstein &
    Ohrimenko (IEEE S&P 2022, "Are we there yet? Timing and floating-point attacks on
    differential privacy systems") show what the raw statistics would expose.

    What to charge: a run whose ideal version is (ε, δ)-DP is
    ``(ε, δ + tail_delta(N) + Σ_r edge_delta(z_r, n_r))``-DP, with ``N = Σ_r n_r`` the normals
    of all releases (module docstring). ``tail_delta`` alone is *not* a valid δ increment: a
    total-variation distance T costs ``(1 + e^ε)·T`` by itself, or ``T`` plus the edge terms.
    """
    if draws < 0:
        raise ValueError(f"draws must be ≥ 0, got {draws}")
    return float(draws) * TAIL_MASS_PER_DRAW


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _upper_tail(x: float) -> float:
    """``Φ(−x) = P(X > x)``, accurate in the far tail."""
    return 0.5 * math.erfc(x / math.sqrt(2))


def edge_delta(noise_multiplier: float, coords: int) -> float:
    """Upper bound on ``η``: the largest probability, over shifts ``a`` with ``‖a‖₂ ≤ 1/z``,
    that the noise ``X ~ N(0, I_n)`` of one Gaussian release lies in the sampler's box
    ``[−b, b]^n`` while ``X − a`` does not. ``z`` is the release's noise multiplier, ``n`` its
    coordinates, ``b = Z_BOX``. That event is an output of D that the clamped sampler cannot
    produce under the neighbour D′, whose statistic is shifted by ``σ·a``. This is the
    per-release δ term of the module docstring's claim.

    Per coordinate, the probability is ``g(|a_i|)``, ``g(a) = Φ(a − b) − Φ(−b)``. Split the
    coordinates at ``τ = 0.25``:

    * ``|a_i| < τ``: ``g(a) ≤ a·φ(b − τ)`` (φ is increasing on ``[−b, a − b]``), and
      ``Σ|a_i| ≤ √n·‖a‖``, so at most ``φ(b − τ)·√n/z`` in all.
    * ``|a_i| ≥ τ``: ``g(a) ≤ Φ(a − b)``. ``Φ(√s − b)/s`` is nondecreasing in ``s = a²`` where
      ``a(b − a) ≥ 2`` (by ``Φ(−x) ≤ φ(x)/x``), which holds on all of ``[τ, 1/z]`` when it
      holds at both ends. Then ``Σ Φ(a_i − b) ≤ Σ a_i² · z²·Φ(1/z − b) ≤ Φ(1/z − b)``.
      Otherwise (``1/z`` near or beyond b) at most ``(1/(zτ))²`` coordinates are large,
      each ``≤ Φ(1/z − b)``.

    Returns a float in [0, 1].
    """
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier}")
    if coords < 0:
        raise ValueError(f"coords must be ≥ 0, got {coords}")
    if coords == 0:
        return 0.0
    r, b = 1.0 / float(noise_multiplier), Z_BOX
    tau = min(_EDGE_TAU, r)
    small = _phi(b - tau) * r * math.sqrt(coords)
    if r <= _EDGE_TAU:
        large = 0.0
    elif r < b and r * (b - r) >= 2:
        large = _upper_tail(b - r)
    else:
        large = min(float(coords), (r / _EDGE_TAU) ** 2) * _upper_tail(b - r)
    return min(1.0, small + large)


# -- symmetric matrices --------------------------------------------------------------------------
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
    if z.shape[-1] < T:
        raise ValueError(f"symmetric_from_words needs {T} words per matrix, got {z.shape[-1]}")
    # Gather from a concatenation (one spare word per matrix), not from z itself. XLA:CPU
    # fuses a cheap elementwise producer into the gather and recomputes it per gathered
    # element, d² per matrix instead of d(d+1)/2, and it counts the threefry hash as cheap.
    # It does not fuse the concatenation, so the words are computed once, in one loop. For
    # the noise of 20,000 items at d = 64, consumed as E_i v + e_i block by block, that was
    # 2.3x faster with the 64-bit sampler (0.43 → 0.18 s) and 1.2x with JAX's.
    z = jnp.concatenate([z, z[..., :1]], axis=-1)
    lead, K = z.shape[:-1], z.shape[-1]
    n = math.prod(lead)
    if n <= 1 or n * K >= 2**31:      # one matrix, or flat int32 offsets would overflow
        return z[..., index]
    offsets = (jnp.arange(n, dtype=jnp.int32) * K).reshape(lead + (1, 1))
    return z.reshape(-1)[offsets + index]
