"""Segmented item layouts: long rows cut into fixed-width segments (SSP item step only)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmt.config import TrainConfig
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError
from dpmt.solvers import layout as lay
from dpmt.solvers import ssp
from dpmt.solvers.layout import task_layout
from dpmt.solvers.user_step import solve_users

W = 16


def skewed(n_users=300, n_items=60, seed=0):
    """A few items rated by most users (rows ≫ W), a tail of short rows, one unrated item."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_items) ** 1.2
    users, items = [], []
    for j in range(n_users):
        k = rng.integers(2, 12)
        it = rng.choice(n_items - 1, size=k, replace=False, p=p / p.sum())
        users.append(np.full(k, j)); items.append(it)
    u, i = np.concatenate(users), np.concatenate(items)
    return Ratings(u, i, np.ones(len(u), np.float32), np.arange(n_users), np.arange(n_items))


# 30 items (not 60): the plain layout has 6 buckets, the segmented one 1 + the segments (not
# 7 and 6), so every kernel the tests run on them compiles faster; 28 long rows, 1 unrated
R = skewed(n_items=30)
# bucket_cost=0: the grid's buckets (at d = 4 the default cost would leave one bucket here)
PLAIN = task_layout(R, dim=4, bucket_cost=0)
# this small data saves ~4% of the slots with segments, under the layout's default minimum:
# the tests of the segmented path's mechanics keep them whenever they pad less
SEG = task_layout(R, dim=4, segment_width=W, segment_min_saving=0.0, bucket_cost=0)
COUNTS = np.bincount(R.item, minlength=R.n_items)


def test_every_rating_is_in_exactly_one_slot_and_long_rows_are_segmented():
    r, c, p = SEG.triplets()
    np.testing.assert_array_equal(np.sort(p), np.arange(R.nnz))
    np.testing.assert_array_equal(np.asarray(R.item)[p], r)
    np.testing.assert_array_equal(np.asarray(R.user)[p], c)
    np.testing.assert_array_equal(SEG.long_rows, np.flatnonzero(COUNTS > W))
    assert SEG.segments.width == W
    # a long row has ⌈n_i / W⌉ segments; short rows sit in buckets no wider than W
    seg_rows = np.asarray(SEG.segments.bucket.rows)[np.asarray(SEG.segments.bucket.valid)
                                                    .any(-1)]
    np.testing.assert_array_equal(np.bincount(seg_rows, minlength=R.n_items)[SEG.long_rows],
                                  -(-COUNTS[SEG.long_rows] // W))
    assert max(b.width for b in SEG.buckets) <= W
    # less padding, no more kernel instances than the plain layout
    assert SEG.padding_overhead < PLAIN.padding_overhead
    assert len(SEG.buckets) + 1 <= len(PLAIN.buckets)
    # the unrated item is empty; the long rows (which map to the zero row too) are not
    np.testing.assert_array_equal(ssp.empty_rows(SEG), np.flatnonzero(COUNTS == 0))


def test_without_long_rows_the_layout_is_unchanged():
    L = task_layout(R, dim=4, segment_width=int(COUNTS.max()), bucket_cost=0)
    assert L.segments is None and L.padded_slots == PLAIN.padded_slots


def _inputs(seed=0):
    k = jax.random.split(jax.random.PRNGKey(seed), 3)
    X = 0.1 * jax.random.normal(k[0], (R.n_users, 4))
    w = jax.random.uniform(k[1], (R.nnz,), minval=0.1, maxval=1.0)
    y = jax.random.uniform(k[2], (R.nnz,), minval=-1.0, maxval=1.0)
    return X, w, y


def test_statistics_and_the_private_item_step_match_the_plain_layout():
    # the reference is unsegmented with its rows in 2 buckets (growth 10³: widths ≤ 1 and
    # the rest), not PLAIN's 6: the same per-row sums, and each item step compiles ~3x faster
    PLAIN = task_layout(R, dim=4, growth=1e3)
    assert PLAIN.segments is None and len(PLAIN.buckets) <= 2
    X, w, y = _inputs()
    A1, b1 = ssp.weighted_statistics(PLAIN, X, w, y)
    A2, b2 = ssp.weighted_statistics(SEG, X, w, y)
    np.testing.assert_allclose(A2, A1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b2, b1, rtol=1e-5, atol=1e-6)
    key = jax.random.PRNGKey(3)
    # the default solve (shift); project shares the code path after the statistics
    t1 = np.asarray(ssp.ssp_item_step(PLAIN, X, w, y, key, 0.4, 0.3, 1.0, psd="shift"))
    t2 = np.asarray(ssp.ssp_item_step(SEG, X, w, y, key, 0.4, 0.3, 1.0, psd="shift"))
    # same noise per item (keyed by the item), same statistics up to summation order
    np.testing.assert_allclose(t2, t1, rtol=1e-4, atol=1e-5)
    assert np.abs(t2[SEG.long_rows]).sum() > 0
    # the CG solve (the default) starts every row, long ones too, from its own x0 row
    x0 = np.asarray(t1) * 0.5
    t3 = np.asarray(ssp.ssp_item_step(PLAIN, X, w, y, key, 0.4, 0.3, 1.0, psd="cg", x0=x0))
    t4 = np.asarray(ssp.ssp_item_step(SEG, X, w, y, key, 0.4, 0.3, 1.0, psd="cg", x0=x0))
    np.testing.assert_allclose(t4, t3, rtol=1e-4, atol=1e-5)
    assert np.linalg.norm(t3 - t1) < 1e-2 * np.linalg.norm(t1)
    # noiseless (ALS) too
    t1 = ssp.ssp_item_step(PLAIN, X, w, y, None, 0.0, 0.0, 1.0)
    t2 = ssp.ssp_item_step(SEG, X, w, y, None, 0.0, 0.0, 1.0)
    np.testing.assert_allclose(t2, t1, rtol=1e-4, atol=1e-5)


def test_kernels_that_would_miss_the_long_rows_refuse_a_segmented_layout():
    from dpmt.solvers import sharding
    from dpmt.solvers.noisy_gd import clipped_gradient_sum

    seg_users = lay.build_layout(R.user, R.item, R.n_users, R.n_items, dim=4, kind="users",
                                 segment_width=2, segment_min_saving=0.0)
    assert seg_users.segments is not None
    with pytest.raises(ConfigError, match="segment"):
        solve_users(seg_users, jnp.zeros((R.n_items, 4)))
    from dpmt.solvers.encoders import EmbeddingEncoder

    enc = EmbeddingEncoder(R.n_items, 4)
    params = enc.init(jax.random.PRNGKey(0), jnp.arange(R.n_items))
    X, w, y = _inputs()
    # a sharded layout keeps its segments (noisy GD's kernel on a mesh reads them); the
    # sharded SSP item step and user step, which do not, refuse it
    mesh = sharding.make_mesh(1)
    sl = sharding.shard_layout(SEG, mesh)
    assert sl.layout.segments is not None
    with pytest.raises(ConfigError, match="segment"):
        sharding.sharded_ssp_item_step(mesh, sl, X, w, y, jax.random.PRNGKey(0), 0.1, 0.1,
                                       1.0)
    with pytest.raises(ConfigError, match="segment"):
        sharding.sharded_solve_users(mesh, sharding.shard_layout(seg_users, mesh),
                                     jnp.zeros((R.n_items, 4)))
    with pytest.raises(ConfigError, match="segment"):
        clipped_gradient_sum(enc, params, SEG, X, w, y, 1.0)


def test_make_steps_segments_the_item_layouts_whose_rows_are_additive(monkeypatch):
    """SSP's statistics and noisy GD's embedding-table clipped rows are sums over a row's
    entries: long item rows in segments. The MLP encoder's per-user gradients run over user
    rows: its item layout stays whole."""
    from dpmt.config import GDConfig
    from dpmt.train.methods import make_steps

    # head items: 700-3500 ratings; segments save 6.8% of the slots here, so the minimum is
    # lowered to see the wiring (the minimum itself: the test below)
    monkeypatch.setattr(lay, "SEGMENT_MIN_SAVING", 0.0)
    big = skewed(n_users=4000, n_items=40)
    assert np.bincount(big.item).max() > lay.SEGMENT_WIDTH
    w = np.ones(big.nnz, np.float32)
    ssp_steps = make_steps(TrainConfig(solver="ssp", dim=4), big, w)
    assert ssp_steps.items.segments is not None and ssp_steps.users.segments is None
    gd_steps = make_steps(TrainConfig(solver="gd", dim=4), big, w)
    assert gd_steps.items.segments is not None and gd_steps.users.segments is None
    feats = np.ones((big.n_items, 3), np.float32)
    mlp = make_steps(TrainConfig(solver="gd", dim=4, gd=GDConfig(encoder="mlp")), big, w,
                     item_features=feats)
    assert mlp.items.segments is None


def test_segments_are_used_only_where_they_pad_less():
    # every row has W + 1 entries: two segments would pad to 2W, one bucket pads nothing
    n = W + 1
    users = np.tile(np.arange(n), 5)
    items = np.repeat(np.arange(5), n)
    r = Ratings(users, items, np.ones(len(users), np.float32), np.arange(n), np.arange(5))
    L = task_layout(r, dim=4, segment_width=W, segment_min_saving=0.0)
    assert L.segments is None and L.padding_overhead == 1.0


def test_segments_are_kept_only_if_they_save_the_minimum_fraction_of_slots():
    # SEG's saving over PLAIN; a minimum just above it drops the segments (the layout is then
    # the plain one), just below keeps them; the default minimum drops them here (~4%)
    saving = 1.0 - SEG.padded_slots / PLAIN.padded_slots
    assert 0.0 < saving < lay.SEGMENT_MIN_SAVING
    above = task_layout(R, dim=4, segment_width=W, segment_min_saving=saving + 1e-3,
                        bucket_cost=0)
    assert above.segments is None and above.padded_slots == PLAIN.padded_slots
    assert task_layout(R, dim=4, segment_width=W, bucket_cost=0).segments is None
    assert task_layout(R, dim=4, segment_width=W, segment_min_saving=saving - 1e-3,
                       bucket_cost=0).segments is not None
    with pytest.raises(ConfigError, match="segment_min_saving"):
        task_layout(R, dim=4, segment_width=W, segment_min_saving=1.0)
