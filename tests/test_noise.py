"""The releases' Gaussian noise (issue 11, "Fast noise"; issue 24, finding 2, 64-bit
normals): the threefry hash, the sampler's definition, accuracy, range and distribution, what
it costs in δ, and that item ``i``'s noise is a function of (key, i) only."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry2x32_p
from scipy import special, stats

from dpmt.solvers import noise, ssp
from dpmt.solvers.layout import map_batches

ALPHA = 1e-6  # false-failure rate of each statistical check (all seeded: deterministic)


def draw(key, idx, d, sigma_A=1.0, sigma_b=1.0):
    E, e = ssp._batch_noise(key, jnp.asarray(idx, jnp.uint32), d, sigma_A, sigma_b)
    return np.asarray(E, np.float64), np.asarray(e, np.float64)


def upper(E):
    iu = np.triu_indices(E.shape[-1])
    return E[..., iu[0], iu[1]]


def chi2_std_ok(x, sigma, alpha=ALPHA):
    """Two-sided chi-square test that zero-mean samples ``x`` have std ``sigma``; also returns
    the estimated std / sigma."""
    x = np.asarray(x, np.float64).ravel()
    s = np.sum(x ** 2) / sigma ** 2
    lo, hi = stats.chi2.ppf([alpha / 2, 1 - alpha / 2], df=x.size)
    return lo <= s <= hi, (s / x.size) ** 0.5


# -- the generator is JAX's threefry, bit for bit ------------------------------------------------
def test_unrolled_threefry_equals_jax_threefry_primitive():
    rng = np.random.default_rng(0)
    k = rng.integers(0, 2**32, size=(2,), dtype=np.uint32)
    x0, x1 = (rng.integers(0, 2**32, size=1000, dtype=np.uint32) for _ in range(2))
    ref = threefry2x32_p.bind(jnp.uint32(k[0]), jnp.uint32(k[1]), jnp.asarray(x0),
                              jnp.asarray(x1))
    got = noise.threefry2x32(jnp.uint32(k[0]), jnp.uint32(k[1]), jnp.asarray(x0),
                             jnp.asarray(x1))
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_fold_in_words_equal_jax_fold_in():
    key = jax.random.key(7)
    idx = np.array([0, 1, 5, 26743, 2**31 + 3, 2**32 - 1], np.uint32)
    got = np.asarray(noise.fold_in_words(noise.key_words(key), jnp.asarray(idx)))
    for row, i in zip(got, idx):
        np.testing.assert_array_equal(row, jax.random.key_data(jax.random.fold_in(key, i)))


# -- the sampler: its definition, accuracy and range ----------------------------------------------
M32 = 2**32 - 1


def reference_normals(words, n):
    """float64 reference of :func:`noise.normal_words`: JAX's threefry primitive on the counter
    pairs ``(NORMAL_TAG, c)``, ``U = (hi·2^32 + lo + ½)/2^64`` in exact integer arithmetic,
    ``p = min(U, 1 − U)``, ``z = ±(−ndtri(p))`` in float64."""
    c = jnp.arange(n, dtype=jnp.uint32)
    hi, lo = threefry2x32_p.bind(jnp.uint32(words[0]), jnp.uint32(words[1]),
                                 jnp.full((n,), noise.NORMAL_TAG, jnp.uint32), c)
    v = (np.asarray(hi).astype(object) << 32) + np.asarray(lo).astype(object)  # exact 64-bit
    upper = v >= 2**63
    num = np.where(upper, (2**64 - 1) - v, v)                 # 2^64·p − ½, an exact integer
    p = np.array([(int(k) + 0.5) / 2.0**64 for k in num])
    return np.where(upper, 1.0, -1.0) * -special.ndtri(p)


@pytest.mark.parametrize("n", [1, 7, 44, 2144])
def test_normal_words_are_the_quantiles_of_64_bit_uniforms(n):
    key = jax.random.fold_in(jax.random.key(3), 11)
    words = np.asarray(noise.key_words(key))
    got = np.asarray(noise.normal_words(jnp.asarray(words), n), np.float64)
    ref = reference_normals(words, n)
    assert got.shape == (n,)
    np.testing.assert_allclose(got, ref, rtol=5e-7, atol=1e-9)
    # the first k normals do not depend on n; batched keys = one key at a time
    np.testing.assert_array_equal(np.asarray(noise.normal_words(jnp.asarray(words), 1)),
                                  got[:1].astype(np.float32))
    W = np.stack([words, words ^ np.uint32(5)])
    Z = np.asarray(noise.normal_words(jnp.asarray(W), n))
    np.testing.assert_array_equal(Z[0], got.astype(np.float32))
    np.testing.assert_array_equal(Z[1], noise.normal_words(jnp.asarray(W[1]), n))


def test_tail_quantile_accuracy_down_to_2_to_the_minus_65():
    """Max relative error of the float32 inverse CDF against float64 scipy (itself checked
    against mpmath), over p ∈ [2^-65, ½]: log-spaced, uniform, and the region boundaries."""
    rng = np.random.default_rng(0)
    w_edges = np.array([5.0, 16.0])                          # w = −log(4p(1 − p)) boundaries
    p_edges = (1 - np.sqrt(1 - np.exp(-w_edges))) / 2
    near_edges = (p_edges[:, None] * (1 + np.linspace(-1e-5, 1e-5, 101))).ravel()
    p = np.concatenate([np.logspace(np.log10(2.0**-65), np.log10(0.5), 200_000),
                        rng.uniform(0, 0.5, 100_000), 10 ** rng.uniform(-19.5, -0.3, 100_000),
                        near_edges, [2.0**-65, 0.5]])
    p = p.astype(np.float32)
    p = p[(p >= np.float32(2.0**-65)) & (p <= 0.5)]
    got = np.asarray(jax.jit(noise.tail_quantile)(jnp.asarray(p)), np.float64)
    ref = -special.ndtri(p.astype(np.float64))
    body = ref > 1e-3
    rel = np.abs(got - ref)[body] / ref[body]
    assert rel.max() < 5e-7, (rel.max(), p[body][rel.argmax()])       # measured 3.0e-7
    assert np.abs(got - ref)[~body].max() < 1e-9                       # near p = ½, z ≈ 0
    assert np.all(got >= 0)
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(40):
        for q in (2.0**-65, 1e-12, 0.01, 0.3):
            exact = mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(q) - 1)
            assert abs(special.ndtri(q) / float(exact) - 1) < 1e-13


def test_far_tail_coefficients_are_the_documented_fit():
    """The w ≥ 16 coefficients: least squares in float64 at 4,000 Chebyshev nodes of
    √w ∈ [4, √44.5] against scipy's ndtri, centred at 5.3, rounded to float32."""
    a, b = 4.0, math.sqrt(44.5)
    s = np.cos(np.linspace(0, np.pi, 4000)) * (b - a) / 2 + (a + b) / 2
    q = np.exp(-s * s)
    p = q / (2 * (1 + np.sqrt(1 - q)))                       # 4p(1 − p) = e^−w, p ≤ ½
    target = -special.ndtri(p) / math.sqrt(2) / (1 - 2 * p)  # erfinv(x)/x
    coef = np.polyfit(s - noise._FAR_TAIL_CENTRE, target, 8)
    np.testing.assert_allclose(np.float32(coef), np.float32(noise._ERFINV_FAR_TAIL),
                               rtol=1e-5, atol=1e-12)


def test_extreme_cells_reach_beyond_9_and_are_the_range():
    hi = jnp.asarray([0, 0, 0, M32, M32, M32, 2**31 - 1, 2**31, 1, 2**31 - 2], jnp.uint32)
    lo = jnp.asarray([0, 1, M32, M32, M32 - 1, 0, M32, 0, 0, 7], jnp.uint32)
    z = np.asarray(noise.normals_from_bits(hi, lo), np.float64)
    assert z[0] == -noise.Z_MAX and z[3] == noise.Z_MAX                # hi = lo = 0 / 2^32 − 1
    assert abs(noise.Z_MAX - 9.1552937727) < 2e-6                      # Φ⁻¹(1 − 2^-65)
    assert -9.1 < z[1] < -9.0 and 9.0 < z[4] < 9.1                     # the next cells: 3·2^-65
    assert -6.24 < z[2] < -6.22 and z[5] == -z[2]                      # U just below 2^-32
    assert abs(z[6]) < 1e-9 and abs(z[7]) < 1e-9                       # U ≈ ½
    assert z[8] == pytest.approx(special.ndtri((2**32 + 0.5) / 2**64), rel=5e-7)
    # nothing outside [−Z_MAX, Z_MAX]: random words, and every word with hi = 0 region
    rng = np.random.default_rng(1)
    words = rng.integers(0, 2**32, size=(2, 200_000), dtype=np.uint32)
    words[:, :2000] = 0                                                # U < 2^13·2^-64
    words[1, :1000] = rng.integers(0, 2**13, 1000)                     # deep lower tail
    words[:, 1000:2000] = M32 - words[:, :1000]                        # and its mirror
    zz = np.asarray(noise.normals_from_bits(jnp.asarray(words[0]), jnp.asarray(words[1])))
    assert np.abs(zz).max() <= noise.Z_MAX
    assert zz[:1000].max() < -8 and zz[1000:2000].min() > 8            # tails beyond 8


def test_sampler_is_exactly_symmetric():
    """(hi, lo) → (~hi, ~lo) maps U to 1 − U exactly, and the sampler's z to −z bit for bit."""
    rng = np.random.default_rng(2)
    hi, lo = (jnp.asarray(rng.integers(0, 2**32, size=100_000, dtype=np.uint32))
              for _ in range(2))
    z = np.asarray(noise.normals_from_bits(hi, lo))
    zc = np.asarray(noise.normals_from_bits(~hi, ~lo))
    np.testing.assert_array_equal(zc, -z)
    assert np.all(np.sign(z[z != 0]) == np.where(np.asarray(hi) >= 2**31, 1, -1)[z != 0])


@pytest.mark.parametrize("hi_max", [2**8, 1])
def test_tail_cells_have_the_gaussian_tail_law(hi_max):
    """Given U < hi_max·2^-32 (forced: hi < hi_max, lo uniform), Φ(z)·2^32/hi_max is uniform
    on (0, 1): the conditional law of the far tail (beyond 5.29σ; for hi = 0, beyond 6.23σ,
    down to the last cell at −9.16σ) is the Gaussian's, up to the 64-bit grid."""
    rng = np.random.default_rng(hi_max)
    n = 200_000
    hi = rng.integers(0, hi_max, n, dtype=np.uint32)
    lo = rng.integers(0, 2**32, n, dtype=np.uint32)
    z = np.asarray(noise.normals_from_bits(jnp.asarray(hi), jnp.asarray(lo)), np.float64)
    u = special.ndtr(z) * 2.0**32 / hi_max
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert z.max() < (-5.29 if hi_max > 1 else -6.23)
    mirror = noise.normals_from_bits(jnp.asarray(~hi), jnp.asarray(~lo))
    np.testing.assert_array_equal(np.asarray(mirror), -z.astype(np.float32))


def test_a_million_normals_have_the_gaussian_law():
    z = np.asarray(noise.normal(jax.random.key(21), (1_000_000,)), np.float64)
    n = z.size
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert chi2_std_ok(z, 1.0)[0]
    assert abs(stats.skew(z)) < 5 * math.sqrt(6 / n)
    assert abs(stats.kurtosis(z)) < 5 * math.sqrt(24 / n)
    assert stats.kstest(z, "norm").pvalue > ALPHA
    # quantiles: the count below each Gaussian quantile is Binomial(n, q)
    for q in (1e-4, 1e-3, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999):
        k = int(np.sum(z < special.ndtri(q)))
        lo_, hi_ = stats.binom.ppf([ALPHA / 2, 1 - ALPHA / 2], n, q)
        assert lo_ <= k <= hi_, (q, k, n * q)


# -- what the sampler costs in δ -------------------------------------------------------------------
def test_tail_mass_and_tail_delta():
    exact = special.erfc(noise.Z_BOX / math.sqrt(2))                   # 2Φ(−Z_BOX)
    at_range = special.erfc(noise.Z_MAX / math.sqrt(2))
    assert noise.TAIL_MASS_PER_DRAW == pytest.approx(exact, rel=1e-12)
    assert noise.TAIL_MASS_PER_DRAW == pytest.approx(2.0**-64, rel=1e-3)
    assert at_range <= noise.TAIL_MASS_PER_DRAW <= at_range * 1.001
    assert noise.Z_MAX * (1 - 2**-18) < noise.Z_BOX < noise.Z_MAX
    assert noise.tail_delta(0) == 0.0
    assert noise.tail_delta(10**9) == pytest.approx(10**9 * 2.0**-64, rel=1e-3)
    n = ssp.ssp_noise_draws(26_744, 128)
    assert noise.tail_delta(sum(n)) == pytest.approx(26_744 * 8_384 * 5.4215e-20, rel=1e-4)
    with pytest.raises(ValueError):
        noise.tail_delta(-1)


def _edge_probability(a, b):
    """Σ_i P(|X_i| ≤ b, |X_i − a_i| > b), the union bound edge_delta bounds (float64)."""
    a = np.minimum(np.abs(np.asarray(a, np.float64)), 2 * b)
    return float(np.sum(stats.norm.sf(b - a) - stats.norm.sf(b)))


@pytest.mark.parametrize("z", [0.15, 0.2, 0.3, 0.5, 1.0, 3.0])
def test_edge_delta_bounds_every_shift(z):
    b, r, rng = noise.Z_BOX, 1 / z, np.random.default_rng(3)
    for n in (1, 2, 10, 1000):
        bound = noise.edge_delta(z, n)
        shifts = [np.r_[r, np.zeros(n - 1)],                           # concentrated
                  np.full(n, r / math.sqrt(n))]                        # spread
        for k in (2, 3, 5):
            if k <= n:
                shifts.append(np.r_[np.full(k, r / math.sqrt(k)), np.zeros(n - k)])
        for _ in range(50):                                            # random directions
            a = rng.normal(size=n) * rng.exponential(size=n) ** 3
            shifts.append(r * a / np.linalg.norm(a))
        worst = max(_edge_probability(a, b) for a in shifts)
        assert worst <= bound, (n, worst, bound)
        assert bound <= max(10 * worst, 2e-14 * math.sqrt(n) / z)       # and not far above
    if z <= 0.5:   # the concentrated shift's own probability, nearly tight
        assert noise.edge_delta(z, 1) <= 1.01 * _edge_probability([r], b)


def test_edge_delta_values():
    assert noise.edge_delta(1.0, 0) == 0.0
    assert noise.edge_delta(0.25, 2_000_000) == pytest.approx(stats.norm.sf(noise.Z_BOX - 4),
                                                              rel=1e-3)
    assert noise.edge_delta(1.0, 2.2e8) < 1e-13
    assert noise.edge_delta(0.01, 10) == 1.0
    zs = [0.1, 0.2, 0.3, 0.5, 1, 2, 10]
    vals = [noise.edge_delta(z, 10**6) for z in zs]
    assert vals == sorted(vals, reverse=True)                          # more noise, less δ
    with pytest.raises(ValueError):
        noise.edge_delta(0.0, 5)


def test_draw_counts_match_the_draws():
    m, d = 7, 5
    E, e = ssp._batch_noise(jax.random.key(0), jnp.arange(m, dtype=jnp.uint32), d, 1.0, 1.0)
    assert ssp.ssp_noise_draws(m, d) == (upper(np.asarray(E)).size, np.asarray(e).size)
    assert ssp.gramian_noise_draws(d) == upper(np.asarray(ssp.symmetric_noise(
        jax.random.key(0), d, 1.0))).size
    from dpmt.solvers.noisy_gd import gd_noise_draws
    from dpmt.solvers.spectral_init import spectral_noise_draws
    assert spectral_noise_draws(30) == 465
    assert gd_noise_draws(26_744 * 64, 3) == 3 * 26_744 * 64


def test_normal_is_a_drop_in_for_jax_random_normal():
    key = jax.random.key(13)
    z = noise.normal(key, (3, 4))
    assert z.shape == (3, 4) and z.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(z).ravel(),
                                  noise.normal_words(noise.key_words(key), 12))
    np.testing.assert_array_equal(noise.normal(jax.random.key_data(key), (3, 4)), z)  # raw key
    np.testing.assert_array_equal(jax.jit(noise.normal, static_argnums=(1, 2))(key, (3, 4),
                                                                               jnp.float32), z)
    assert noise.normal(key, 5).shape == (5,) and noise.normal(key).shape == ()
    assert noise.normal(key, (2,), jnp.bfloat16).dtype == jnp.bfloat16
    assert not np.array_equal(noise.normal(jax.random.key(14), (3, 4)), z)
    with pytest.raises(TypeError):
        noise.normal(key, (2,), jnp.int32)


def test_noisy_gradient_noise_is_the_64_bit_sampler():
    """noisy_gd adds std · noise.normal(k_i) to leaf i, k_i = split(split(key)[1], leaves)."""
    from dpmt.data.ratings import Ratings
    from dpmt.solvers import EmbeddingEncoder, embedding_params, task_layout
    from dpmt.solvers.noisy_gd import clipped_gradient_sum, noisy_gradient

    rng = np.random.default_rng(0)
    n_users, n_items, d = 12, 9, 3
    pairs = np.unique(rng.integers(0, n_users, 40) * n_items + rng.integers(0, n_items, 40))
    R = Ratings(pairs // n_items, pairs % n_items, np.ones(len(pairs)), np.arange(n_users),
                np.arange(n_items))
    layout = task_layout(R, dim=d)
    X = jnp.asarray(rng.normal(size=(n_users, d)) * 0.3, jnp.float32)
    params = embedding_params(jnp.asarray(rng.normal(size=(n_items, d)), jnp.float32))
    key, sigma, G = jax.random.key(5), 0.7, 0.5
    g = noisy_gradient(EmbeddingEncoder(n_items, d), params, layout, X, None, None, key,
                       clip_norm=G, noise_multiplier=sigma, num_users=1.0)
    ref, _ = clipped_gradient_sum(EmbeddingEncoder(n_items, d), params, layout, X, None, None,
                                  G)
    (k_leaf,) = jax.random.split(jax.random.split(key)[1], 1)
    expect = (np.asarray(ref["params"]["embedding"])
              + sigma * G * np.asarray(noise.normal(k_leaf, (n_items, d))))
    np.testing.assert_allclose(np.asarray(g["params"]["embedding"]), expect, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8, 9, 64])
def test_symmetric_layout_is_the_row_major_upper_triangle_mirrored(d):
    k = noise.symmetric_words(d)
    assert k == d * (d + 1) // 2
    z = jnp.arange(k, dtype=jnp.float32)
    E = np.asarray(noise.symmetric_from_words(z, d))
    np.testing.assert_array_equal(upper(E), np.arange(k))            # each word once, in order
    np.testing.assert_array_equal(E, E.T)                             # lower = mirrored upper
    # batched (flat gather, words beyond the triangle ignored) = one matrix at a time
    Z = jnp.asarray(np.random.default_rng(d).normal(size=(2, 3, k + d)), jnp.float32)
    Eb = np.asarray(noise.symmetric_from_words(Z, d))
    assert Eb.shape == (2, 3, d, d)
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(Eb[i, j], noise.symmetric_from_words(Z[i, j], d))
            np.testing.assert_array_equal(upper(Eb[i, j]), Z[i, j, :k])


# -- the distribution --------------------------------------------------------------------------
def test_item_noise_is_exactly_symmetric_with_std_sigma():
    m, d, sA, sb = 4000, 8, 0.7, 1.9
    E, e = draw(jax.random.key(0), np.arange(m), d, sA, sb)
    assert E.shape == (m, d, d) and e.shape == (m, d)
    np.testing.assert_array_equal(E, np.swapaxes(E, 1, 2))           # lower = mirrored upper
    off = E[:, np.triu_indices(d, 1)[0], np.triu_indices(d, 1)[1]]
    diag = E[:, np.arange(d), np.arange(d)]
    for x, s, what in ((off, sA, "off-diagonal"), (diag, sA, "diagonal"), (e, sb, "e")):
        ok, ratio = chi2_std_ok(x, s)
        assert ok, f"{what} std {ratio} x {s}"
        assert abs(ratio - 1) < 0.02, what                            # tight: ±2%
        assert abs(x.mean()) < 5 * s / np.sqrt(x.size), what
    # normal, not merely unit variance: Kolmogorov–Smirnov on all released entries
    z = np.concatenate([upper(E).ravel() / sA, e.ravel() / sb])
    assert stats.kstest(z, "norm").pvalue > ALPHA
    assert abs(stats.kurtosis(z)) < 0.05                              # excess kurtosis 0


def test_symmetric_noise_std_and_symmetry():
    keys = jax.random.split(jax.random.key(5), 2000)
    E = np.asarray(jax.vmap(lambda k: ssp.symmetric_noise(k, 6, 0.4))(keys), np.float64)
    np.testing.assert_array_equal(E, np.swapaxes(E, 1, 2))
    ok, est = chi2_std_ok(upper(E), 0.4)
    assert ok, est
    assert stats.kstest(upper(E).ravel() / 0.4, "norm").pvalue > ALPHA
    assert len(np.unique(E[:, 0, 0])) == len(keys)                   # a new draw per key


def test_noise_entries_items_and_keys_are_uncorrelated():
    m, d = 4000, 8
    E, e = draw(jax.random.key(1), np.arange(m), d)
    Z = np.concatenate([upper(E), e], axis=1)                         # (m, 44) released words
    C = np.corrcoef(Z, rowvar=False)
    off = C[~np.eye(C.shape[0], dtype=bool)]
    assert np.abs(off).max() < 5 / np.sqrt(m)                        # entries of one item
    # neighbouring items, and the same items under another key
    assert abs(np.corrcoef(Z[:-1].ravel(), Z[1:].ravel())[0, 1]) < 5 / np.sqrt(Z[1:].size)
    E2, e2 = draw(jax.random.key(2), np.arange(m), d)
    Z2 = np.concatenate([upper(E2), e2], axis=1)
    assert abs(np.corrcoef(Z.ravel(), Z2.ravel())[0, 1]) < 5 / np.sqrt(Z.size)
    assert not np.any(np.all(Z[:-1] == Z[1:], axis=1))


# -- a function of (key, i) only ------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_item_noise_does_not_depend_on_the_batch(impl):
    key, d = jax.random.key(9, impl=impl), 6
    E1, e1 = draw(key, [5, 9], d)
    E2, e2 = draw(key, [9, 2, 5], d)
    np.testing.assert_array_equal(E1[0], E2[2])
    np.testing.assert_array_equal(E1[1], E2[0])
    np.testing.assert_array_equal(e1, e2[[2, 0]])
    assert not np.array_equal(E2[0], E2[1])
    # jitted, one item at a time, and in map_batches blocks of any size (zero-padded)
    idx = jnp.arange(23, dtype=jnp.uint32)
    Ea, ea = draw(key, idx, d)
    jitted = jax.jit(ssp._batch_noise, static_argnums=2)
    np.testing.assert_array_equal(np.asarray(jitted(key, idx, d, 1.0, 1.0)[0]), Ea)
    for bs in (1, 4, 7):
        Eb, eb = map_batches(lambda i: ssp._batch_noise(key, i, d, 1.0, 1.0), (idx,), bs)
        np.testing.assert_array_equal(np.asarray(Eb), Ea)
        np.testing.assert_array_equal(np.asarray(eb), ea)
    Ei, ei = ssp._item_noise(key, jnp.uint32(17), d, 1.0, 1.0)
    np.testing.assert_array_equal(np.asarray(Ei), Ea[17])
    np.testing.assert_array_equal(np.asarray(ei), ea[17])


def test_raw_key_data_gives_the_same_noise_as_the_typed_key():
    """The sharded item step passes raw key data; the one-device step a typed key."""
    key, d = jax.random.key(4), 5
    idx = [3, 0, 8]
    Et, et = draw(key, idx, d)
    Er, er = draw(jax.random.key_data(key), idx, d)
    np.testing.assert_array_equal(Et, Er)
    np.testing.assert_array_equal(et, er)
    Eo, _ = draw(jax.random.key(5), idx, d)
    assert not np.allclose(Et, Eo)


def test_noise_is_deterministic_float32_and_scaled():
    key, d = jax.random.key(12), 4
    idx = jnp.arange(10, dtype=jnp.uint32)
    E, e = ssp._batch_noise(key, idx, d, 2.0, 3.0)
    assert E.dtype == jnp.float32 and e.dtype == jnp.float32
    E1, e1 = ssp._batch_noise(key, idx, d, 1.0, 1.0)
    np.testing.assert_allclose(np.asarray(E), 2 * np.asarray(E1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(e), 3 * np.asarray(e1), rtol=1e-6)
    E2, e2 = ssp._batch_noise(key, idx, d, 2.0, 3.0)
    np.testing.assert_array_equal(np.asarray(E), np.asarray(E2))


def test_privatize_statistics_adds_the_batch_noise():
    m, d = 30, 5
    rng = np.random.default_rng(0)
    A = rng.normal(size=(m, d, d)).astype(np.float32)
    A = A + np.swapaxes(A, 1, 2)
    b = rng.normal(size=(m, d)).astype(np.float32)
    key = jax.random.key(8)
    A_hat, b_hat = ssp.privatize_statistics(A, b, key, 0.3, 0.6)
    E, e = ssp._batch_noise(key, jnp.arange(m, dtype=jnp.uint32), d, 0.3, 0.6)
    # (allclose: XLA may fuse σ·z + A into one fused multiply-add)
    np.testing.assert_allclose(np.asarray(A_hat), A + np.asarray(E), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(b_hat), b + np.asarray(e), rtol=1e-6, atol=1e-6)
    # and the solve of ssp_solve / private_rows_solve adds the same noise (no projection
    # differences: compare the noisy statistics through the noiseless solve)
    th = ssp.ssp_solve(A, b, key, 0.3, 0.6, 1.0, batch_size=7)
    th_ref = ssp.ssp_solve(A_hat, b_hat, None, 0.0, 0.0, 1.0)
    np.testing.assert_allclose(np.asarray(th), np.asarray(th_ref), rtol=1e-5, atol=1e-6)
    idx = jnp.asarray([29, 3, 11], jnp.uint32)
    th_rows = ssp.private_rows_solve(jnp.asarray(A)[idx], jnp.asarray(b)[idx], idx, key, 0.3,
                                     0.6, 1.0, None, psd="project", batch_size=2, noisy=True)
    np.testing.assert_allclose(np.asarray(th_rows), np.asarray(th)[np.asarray(idx)],
                               rtol=1e-5, atol=1e-6)
