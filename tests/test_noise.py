"""The SSP noise (issue 11, "Fast noise"): JAX's threefry normals computed by
:mod:`dpmt.solvers.noise`, their distribution, and that item ``i``'s noise is a function of
(key, i) only."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry2x32_p
from scipy import stats

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


@pytest.mark.parametrize("n", [1, 7, 44, 2144])
def test_normal_words_equal_jax_normal_with_original_threefry_counters(n):
    key = jax.random.fold_in(jax.random.key(3), 11)
    got = np.asarray(noise.normal_words(noise.key_words(key), n))
    with jax.threefry_partitionable(False):
        ref = np.asarray(jax.random.normal(key, (2 * ((n + 1) // 2),), jnp.float32))[:n]
    np.testing.assert_array_equal(got, ref)


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
