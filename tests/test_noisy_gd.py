"""Noisy GD / DP-SGD (Algorithm 2): per-user clipping, convergence, noise, Poisson sampling."""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError
from dpmt.solvers.encoders import (EmbeddingEncoder, MLPEncoder, embedding_params, init_encoder,
                                   item_embeddings)
from dpmt.solvers.layout import task_layout, trace_count, user_layout
from dpmt.solvers.noisy_gd import (clipped_gradient_sum, noisy_gd, noisy_gd_dp_event,
                                   noisy_gd_sensitivity, noisy_gradient, poisson_sample,
                                   squared_loss)
from dpmt.solvers.ssp import ssp_solve, weighted_statistics

ALPHA = 1e-6


def ratings(n=30, m=20, nnz=200, seed=0):
    rng = np.random.default_rng(seed)
    key = np.unique(rng.integers(0, n, nnz) * m + rng.integers(0, m, nnz))
    return Ratings(key // m, key % m, rng.normal(size=len(key)), np.arange(n), np.arange(m))


R = ratings()
D = 3
# bucket_cost=0: the power-of-two grid's buckets (at d = 3 the default cost would leave one
# bucket, and the multi-bucket paths these tests check untried)
TL = task_layout(R, dim=D, bucket_cost=0)
UL = user_layout(R, dim=D, growth=4.0)          # 2 buckets: less to compile
RNG = np.random.default_rng(0)
X = RNG.normal(size=(R.n_users, D)).astype(np.float32)
W = RNG.uniform(0.2, 1.0, R.nnz).astype(np.float32)
Y = R.value.astype(np.float32)
ENC = EmbeddingEncoder(R.n_items, D)
PARAMS = init_encoder(ENC, jax.random.key(0))


def brute_user_grads(encoder, params, loss=squared_loss):
    """Per-user gradients by jax.grad of each user's dense loss over *all* items (a 0/1 row
    mask; no layout, padding or per-rating tricks), one user at a time."""
    M = np.zeros((R.n_users, R.n_items), np.float32)
    Wd, Yd = M.copy(), M.copy()
    M[R.user, R.item] = 1.0
    Wd[R.user, R.item] = W
    Yd[R.user, R.item] = Y

    return [_dense_user_grad(encoder, loss, params, M[j], Wd[j], Yd[j], X[j])
            for j in range(R.n_users)]


@jax.jit(static_argnums=(0, 1))
def _dense_user_grad(encoder, loss, p, mask, w, y, x):
    def f(p):
        pred = encoder.apply(p) @ x                                  # all items
        return jnp.sum(mask * w * loss(pred, y))
    return jax.grad(f)(p)


def tree_norm(t):
    return float(np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2)
                             for x in jax.tree_util.tree_leaves(t))))


def tree_close(a, b, **kw):
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(x, y, **kw), a, b)


def check_clipped_sum(encoder, params, layout, **kw):
    grads = brute_user_grads(encoder, params)
    norms = np.array([tree_norm(g) for g in grads])
    G = float(np.median(norms))                                     # clip about half the users
    assert np.sum(norms > G) >= 3 and np.sum(norms < G) >= 3      # clipping partly active
    ref = jax.tree_util.tree_map(
        lambda *gs: sum(g * min(1.0, G / max(n, 1e-30)) for g, n in zip(gs, norms)), *grads)
    ones = np.ones(R.n_users, np.float32)
    got, got_norms = clipped_gradient_sum(encoder, params, layout, X, W, Y, G, user_mask=ones,
                                          **kw)
    tree_close(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_norms, norms, rtol=1e-4, atol=1e-6)
    # each user's contribution to the sum (the sensitivity) has norm ≤ G, = G when clipped
    for j in np.argsort(-norms)[:3].tolist() + np.argsort(norms)[:2].tolist():
        mask = np.ones(R.n_users, np.float32)
        mask[j] = 0
        without, _ = clipped_gradient_sum(encoder, params, layout, X, W, Y, G, user_mask=mask,
                                          **kw)
        delta = tree_norm(jax.tree_util.tree_map(lambda a, b: a - b, got, without))
        assert delta <= G * (1 + 1e-4)
        assert delta == pytest.approx(min(G, norms[j]), rel=1e-3, abs=1e-5)


def test_embedding_fast_path_clipping_matches_brute_force():
    check_clipped_sum(ENC, PARAMS, TL)


@pytest.mark.slow
def test_generic_path_with_embedding_table_matches_brute_force():
    check_clipped_sum(ENC, PARAMS, UL, microbatch_size=7)


def test_generic_path_with_mlp_encoder_matches_brute_force():
    feats = RNG.normal(size=(R.n_items, 4)).astype(np.float32)
    mlp = MLPEncoder(feats, hidden=(6,), dim=D, with_table=True)
    p = init_encoder(mlp, jax.random.key(1))
    p = jax.tree_util.tree_map(lambda x: x + 0.3, p)               # non-zero table
    check_clipped_sum(mlp, p, UL, microbatch_size=8)


def test_converges_to_ssp_without_noise():
    reg = 2.0
    A, b = weighted_statistics(TL, X, W, Y)
    theta = np.asarray(ssp_solve(A, b, None, 0.0, 0.0, reg))        # weighted ridge
    # gradient of (1/n)·L_w is ((A_i + λI)θ_i − b_i)/n: step size n/L_max converges
    lmax = float(np.linalg.eigvalsh(np.asarray(A, np.float64)).max()) + reg
    sgd = optax.sgd(R.n_users / lmax)
    out = noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=250, clip_norm=1e6, noise_multiplier=0.0,
                   key=jax.random.key(0), optimizer=sgd, reg=reg)
    np.testing.assert_allclose(item_embeddings(ENC, out), theta, atol=1e-4)
    # a second call (new optimizer object, other numeric values) does not recompile the
    # gradient kernel
    before = trace_count("noisy_gradient")
    out2 = noisy_gd(ENC, out, TL, X, W, Y, steps=3, clip_norm=1e5, noise_multiplier=0.0,
                    key=jax.random.key(1), optimizer=optax.sgd(R.n_users / lmax), reg=reg)
    assert trace_count("noisy_gradient") == before
    np.testing.assert_allclose(item_embeddings(ENC, out2), theta, atol=1e-4)
    # with the public gravity term ½ Σ_i v_iᵀ M v_i: the SSP solution with extra = M
    B = RNG.normal(size=(D, D))
    M = (B @ B.T).astype(np.float32)
    theta_m = np.asarray(ssp_solve(A, b, None, 0.0, 0.0, reg, extra=M))
    lr = R.n_users / (lmax + float(np.linalg.eigvalsh(M).max()))
    out3 = noisy_gd(ENC, out, TL, X, W, Y, steps=250, clip_norm=1e6, noise_multiplier=0.0,
                    key=jax.random.key(2), optimizer=optax.sgd(lr), reg=reg,
                    extra_quadratic=M)
    np.testing.assert_allclose(item_embeddings(ENC, out3), theta_m, atol=1e-4)


def chi2_std_ok(x, sigma, alpha=ALPHA):
    x = np.asarray(x, np.float64).ravel()
    s = np.sum(x ** 2) / sigma ** 2
    lo, hi = stats.chi2.ppf([alpha / 2, 1 - alpha / 2], df=x.size)
    return lo <= s <= hi, (s / x.size) ** 0.5


@pytest.mark.parametrize("q", [None, 0.25])
def test_noise_std_matches(q):
    G, sigma, n = 0.8, 1.7, 50.0
    zero_w = np.zeros(R.nnz, np.float32)                            # no data signal, λ = 0
    samples = [noisy_gradient(ENC, PARAMS, TL, X, zero_w, Y, jax.random.key(k), clip_norm=G,
                              noise_multiplier=sigma, sampling_rate=q, num_users=n)
               for k in range(40)]
    x = np.stack([np.asarray(s["params"]["embedding"]) for s in samples])
    expected = sigma * G / ((1.0 if q is None else q) * n)          # std of noise / (q n)
    ok, est = chi2_std_ok(x, expected)
    assert ok, f"noise std {est} vs {expected}"
    # and the regulariser is added exactly (data-independent, unclipped): + (λ/n) θ
    reg = 3.0
    g = noisy_gradient(ENC, PARAMS, TL, X, zero_w, Y, jax.random.key(0), clip_norm=G,
                       noise_multiplier=sigma, sampling_rate=q, num_users=n, reg=reg)
    np.testing.assert_allclose(g["params"]["embedding"] - samples[0]["params"]["embedding"],
                               reg / n * PARAMS["params"]["embedding"], rtol=1e-4, atol=1e-6)


def test_poisson_sampling_and_events():
    q, n = 0.3, 20000
    mask = np.asarray(poisson_sample(jax.random.key(3), n, q))
    lo, hi = stats.binom.ppf([ALPHA / 2, 1 - ALPHA / 2], n, q)
    assert lo <= mask.sum() <= hi and set(np.unique(mask)) == {0.0, 1.0}
    # the sampled step sums exactly the clipped gradients of the sampled users
    key = jax.random.key(9)
    k_sample, _ = jax.random.split(key)
    m = poisson_sample(k_sample, R.n_users, 0.5)
    g = noisy_gradient(ENC, PARAMS, TL, X, W, Y, key, clip_norm=0.5, noise_multiplier=0.0,
                       sampling_rate=0.5, num_users=R.n_users)
    ref, _ = clipped_gradient_sum(ENC, PARAMS, TL, X, W, Y, 0.5, user_mask=m)
    np.testing.assert_allclose(g["params"]["embedding"],
                               np.asarray(ref["params"]["embedding"]) / (0.5 * R.n_users),
                               rtol=1e-5, atol=1e-7)
    assert 0 < float(np.sum(m)) < R.n_users
    # dp_accounting events
    assert noisy_gd_dp_event(1.1, 7) == dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(1.1), 7)
    ev = noisy_gd_dp_event(1.1, 7, sampling_rate=0.01)
    assert ev == dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 7)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(ev)
    eps_sampled = acc.get_epsilon(1e-5)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(noisy_gd_dp_event(1.1, 7))
    assert 0 < eps_sampled < acc.get_epsilon(1e-5) < np.inf
    assert noisy_gd_sensitivity(0.5) == 0.5


def test_dp_sgd_run_and_errors():
    V0 = np.zeros((R.n_items, D), np.float32)
    out = noisy_gd(ENC, embedding_params(V0), TL, X, W, Y, steps=4, clip_norm=0.5,
                   noise_multiplier=1.0, key=jax.random.key(0), sampling_rate=0.3, reg=1.0)
    V = np.asarray(item_embeddings(ENC, out))
    assert V.shape == V0.shape and np.all(np.isfinite(V)) and np.any(V != 0)
    mlp = MLPEncoder(np.ones((R.n_items, 2), np.float32), hidden=(4,), dim=D)
    with pytest.raises(ConfigError):                  # task layout needs the embedding table
        noisy_gd(mlp, init_encoder(mlp, jax.random.key(0)), TL, X, W, Y, steps=1,
                 clip_norm=1.0, noise_multiplier=1.0, key=jax.random.key(0))
    with pytest.raises(ConfigError):
        noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=1, clip_norm=0.0, noise_multiplier=1.0,
                 key=jax.random.key(0))
    with pytest.raises(ConfigError):
        noisy_gd_dp_event(1.0, 3, sampling_rate=1.5)


# -- the fast embedding path of noisy_gd (blocked passes, per-call slot data) ---------------------
UL_FULL = user_layout(R, dim=D, bucket_cost=0)


def _fast_sum(layout_u, mask, pregather=None, layout=TL):
    from dpmt.solvers.gd_blocks import fast_clipped_sum, prepare_steps

    V = PARAMS["params"]["embedding"]
    data = prepare_steps(layout, layout_u, jnp.asarray(X), jnp.asarray(W), jnp.asarray(Y),
                         pregather_bytes=pregather)
    return fast_clipped_sum(V, layout, layout_u, jnp.asarray(X), data, jnp.float32(G_FAST),
                            jnp.asarray(mask, jnp.float32))


G_FAST = 2.5                       # clips about half the users


def _part_budget(layout=TL):
    """A pre-gather budget that takes some of the layout's buckets (segments last) but not
    all."""
    from dpmt.solvers.gd_blocks import pregathered_buckets

    sizes = [4 * b.cols.size * D for b in layout._all_buckets()]
    budget = sum(sizes[: len(sizes) // 2])
    pre = pregathered_buckets(layout, D, budget)
    assert any(pre) and not all(pre)
    return budget


@pytest.mark.parametrize("users", [None, UL, UL_FULL])
@pytest.mark.parametrize("pregather", ["all", "part", "none"])
def test_fast_clipped_sum_matches_reference(users, pregather):
    """Same clipped sum and per-user norms as clipped_gradient_sum (U's rows pre-gathered
    into the task layout's slots for all, some or none of the buckets; without them the
    per-user norms over the user layout or over the task layout), and the same sensitivity:
    removing one user changes the sum by min(G, ‖g_j‖) — by no more than G."""
    budget = {"all": None, "part": _part_budget(), "none": 0}[pregather]
    ones = np.ones(R.n_users, np.float32)
    ref, ref_norms = clipped_gradient_sum(ENC, PARAMS, TL, X, W, Y, G_FAST, user_mask=ones)
    got, norms = _fast_sum(users, ones, budget)
    np.testing.assert_allclose(got, ref["params"]["embedding"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norms, ref_norms, rtol=1e-5, atol=1e-7)
    assert np.sum(np.asarray(norms) > G_FAST) >= 3 and np.sum(np.asarray(norms) < G_FAST) >= 3
    for j in np.argsort(-np.asarray(norms))[:3].tolist() + [int(np.argmin(norms))]:
        mask = ones.copy()
        mask[j] = 0
        without, _ = _fast_sum(users, mask, budget)
        delta = float(np.linalg.norm(np.asarray(got) - np.asarray(without)))
        assert delta <= G_FAST * (1 + 1e-5)
        assert delta == pytest.approx(min(G_FAST, float(norms[j])), rel=1e-4, abs=1e-6)


def test_pregathered_clip_bounds_every_user_contribution():
    """The pre-gathered path clips each user's *whole* gradient (all items, every bucket and
    segment) to norm ≤ G: each user alone in the sample contributes exactly min(G, ‖g_j‖),
    users with large gradients exactly G — a user whose rows were clipped per bucket or per
    item, or not at all, would exceed it."""
    seg = task_layout(R, dim=D, segment_width=6, segment_min_saving=0.0, growth=16.0)
    assert seg.segments is not None
    G = 0.5 * G_FAST
    from dpmt.solvers.gd_blocks import fast_clipped_sum, prepare_steps

    V = PARAMS["params"]["embedding"]
    grads = brute_user_grads(ENC, PARAMS)
    for layout, budget in ((seg, None), (seg, _part_budget(seg)), (TL, None)):
        data = prepare_steps(layout, None, jnp.asarray(X), jnp.asarray(W), jnp.asarray(Y),
                             pregather_bytes=budget)
        assert any(x is not None for x in data.x_slots)
        big = 0
        one = jax.jit(lambda mask, layout=layout, data=data: fast_clipped_sum(
            V, layout, None, jnp.asarray(X), data, jnp.float32(G), mask))
        for j in range(R.n_users):
            mask = np.zeros(R.n_users, np.float32)
            mask[j] = 1.0
            rows, norms = one(jnp.asarray(mask))
            full = tree_norm(grads[j])
            got = float(np.linalg.norm(np.asarray(rows, np.float64)))
            assert got <= G * (1 + 1e-5)
            assert got == pytest.approx(min(G, full), rel=1e-4, abs=1e-6)
            assert float(norms[j]) == pytest.approx(full, rel=1e-4, abs=1e-6)
            np.testing.assert_allclose(                   # the clipped gradient itself
                rows, np.asarray(grads[j]["params"]["embedding"]) * min(1.0, G / full),
                rtol=1e-4, atol=1e-6)
            big += full > G
        assert big >= 3


def test_pregathered_blocks_reuse_their_buffers():
    """keep_scratch / prepare_steps(reuse=True): the next call writes its rows over the kept
    (donated) buffers — the same StepData as a fresh call, bit for bit — keyed by the task
    layout."""
    from dpmt.solvers import gd_blocks as gb

    args = (jnp.asarray(W), jnp.asarray(Y))
    X2 = jnp.asarray(RNG.normal(size=X.shape), jnp.float32)
    first = gb.prepare_steps(TL, None, jnp.asarray(X), *args, reuse=True)
    gb.keep_scratch(TL, first)
    kept = [x for x in first.x_slots if x is not None]
    again = gb.prepare_steps(TL, None, X2, *args, reuse=True)
    assert all(x.is_deleted() for x in kept)                    # donated, written over
    fresh = gb.prepare_steps(TL, None, X2, *args)
    for a, b in zip(again.x_slots, fresh.x_slots):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    gb.keep_scratch(TL, again)
    seg = task_layout(R, dim=D, segment_width=6, segment_min_saving=0.0)
    gb.prepare_steps(seg, None, X2, *args, reuse=True)       # another layout: not TL's
    gb.prepare_steps(TL, None, X2, *args, reuse=True, pregather_bytes=0)   # none gathered
    assert not any(x.is_deleted() for x in again.x_slots if x is not None)
    assert TL in gb._SCRATCH
    gb.release_scratch()
    assert TL not in gb._SCRATCH


def _reference_gd(params, steps, key, optimizer, sampling_rate=None, reg=0.0, M=None, **kw):
    """The embedding path as the parent commit ran it: make_noisy_gd_step per step."""
    from dpmt.solvers.noisy_gd import make_noisy_gd_step

    state = optimizer.init(params)
    step = make_noisy_gd_step(ENC, optimizer, path="embedding", poisson=sampling_rate is not None)
    scalars = (jnp.float32(kw["clip_norm"]), jnp.float32(kw["noise_multiplier"]),
               jnp.float32(1.0 if sampling_rate is None else sampling_rate), jnp.float32(reg),
               jnp.float32(R.n_users))
    for t in range(steps):
        params, state = step(params, state, TL, jnp.asarray(X), jnp.asarray(W), jnp.asarray(Y),
                             jax.random.fold_in(key, t), *scalars, M)
    return params


@pytest.mark.parametrize("pregather", [None, 0])
@pytest.mark.parametrize("case", ["noise", "poisson+gravity", "noiseless"])
def test_fast_noisy_gd_is_the_reference_step(case, pregather, monkeypatch):
    """noisy_gd's fast path makes the same steps as the per-step reference kernels: same
    sample masks, clipped sums, noise (same key, same draws) and updates, to float32
    summation order — with or without a user layout, U's rows pre-gathered or not."""
    from dpmt.solvers import gd_blocks

    if pregather is not None:
        monkeypatch.setattr(gd_blocks, "PREGATHER_BYTES", pregather)
    B = RNG.normal(size=(D, D))
    kw = {"noise": dict(clip_norm=2.5, noise_multiplier=1.3, reg=1.0),
          "poisson+gravity": dict(clip_norm=2.5, noise_multiplier=1.0, sampling_rate=0.4,
                                  reg=2.0, M=jnp.asarray(B @ B.T, jnp.float32)),
          "noiseless": dict(clip_norm=1e6, noise_multiplier=0.0)}[case]
    opt = optax.adam(0.05)
    key = jax.random.key(5)
    ref = _reference_gd(PARAMS, 6, key, opt, **kw)["params"]["embedding"]
    M = kw.pop("M", None)
    for users in (None, UL):
        before = trace_count("fast_noisy_gradient")
        got = noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=6, key=key, optimizer=opt,
                       extra_quadratic=M, user_layout=users, **kw)["params"]["embedding"]
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
        # compiled once per layout shapes and flags: a second call with other numbers (and a
        # new optimizer object) traces nothing again
        noisy_gd(ENC, PARAMS, TL, X, W * 0.5, Y, steps=2, key=jax.random.key(1),
                 optimizer=optax.adam(0.01), extra_quadratic=M, user_layout=users,
                 **{**kw, "clip_norm": 1.5})
        assert trace_count("fast_noisy_gradient") - before <= 1


def test_fast_path_refuses_a_foreign_user_layout():
    other = user_layout(ratings(seed=1), dim=D)
    with pytest.raises(ConfigError, match="transpose"):
        noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=1, clip_norm=1.0, noise_multiplier=1.0,
                 key=jax.random.key(0), user_layout=other)
    with pytest.raises(ConfigError, match="user layout"):
        noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=1, clip_norm=1.0, noise_multiplier=1.0,
                 key=jax.random.key(0), user_layout=TL)


@pytest.mark.parametrize("pregather", [None, 0])
def test_fast_path_on_a_segmented_task_layout(pregather, monkeypatch):
    """Long item rows cut into segments (as fit builds the layout on one device): the same
    steps, the norms pass over the task layout included, U's rows pre-gathered or not; the
    reference kernels refuse it."""
    from dpmt.solvers import gd_blocks

    if pregather is not None:
        monkeypatch.setattr(gd_blocks, "PREGATHER_BYTES", pregather)
    seg = task_layout(R, dim=D, segment_width=6, segment_min_saving=0.0, growth=16.0)
    assert len(seg.buckets) == 1 and len(seg.long_rows) == 17     # 3 short rows, 17 long
    opt = optax.adam(0.05)
    kw = dict(clip_norm=2.5, noise_multiplier=1.0, reg=1.0, key=jax.random.key(3),
              optimizer=opt, steps=4)
    ref = noisy_gd(ENC, PARAMS, TL, X, W, Y, **kw)["params"]["embedding"]
    for users in (None, UL):
        got = noisy_gd(ENC, PARAMS, seg, X, W, Y, user_layout=users, **kw)
        np.testing.assert_allclose(got["params"]["embedding"], ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="segment"):
        clipped_gradient_sum(ENC, PARAMS, seg, X, W, Y, 1.0)


@pytest.mark.parametrize("case", ["noise", "poisson+gravity"])
@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_an_optimizer_spec_runs_the_reference_steps_in_one_compiled_loop(case, name):
    """``OptimizerSpec(name, lr)``: the whole item step in one ``fori_loop`` makes the steps
    of the per-step reference (same key per step, same draws, same optax update) to float32
    summation order, and a second call with another rate, step count and data compiles
    nothing (the rate is optimizer state, the steps a traced bound)."""
    from dpmt.solvers.gd_fast import OptimizerSpec

    B = RNG.normal(size=(D, D))
    kw = {"noise": dict(clip_norm=2.5, noise_multiplier=1.0),
          "poisson+gravity": dict(clip_norm=2.0, noise_multiplier=0.7, sampling_rate=0.6,
                                  reg=2.0, M=jnp.asarray(B @ B.T, jnp.float32))}[case]
    lr = 0.05 if name == "adam" else 0.5
    key = jax.random.key(5)
    ref = _reference_gd(PARAMS, 6, key, getattr(optax, name)(lr), **kw)["params"]["embedding"]
    M = kw.pop("M", None)
    got, state = noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=6, key=key,
                          optimizer=OptimizerSpec(name, lr), extra_quadratic=M,
                          return_state=True, **kw)
    # Adam divides by √v̂: a float32 summation-order difference in a small coordinate
    # moves it by ~1e-6 (|V| ~ 0.3)
    np.testing.assert_allclose(got["params"]["embedding"], ref, rtol=1e-4, atol=1e-5)
    assert float(state.hyperparams["learning_rate"]) == pytest.approx(lr)
    # a wrong rate would move V: the spec's rate is the one applied
    other = noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=6, key=key,
                     optimizer=OptimizerSpec(name, 2 * lr), extra_quadratic=M, **kw)
    assert not np.allclose(other["params"]["embedding"], ref, rtol=1e-3, atol=1e-4)
    before = trace_count("fast_steps")
    noisy_gd(ENC, PARAMS, TL, X, W * 0.5, Y, steps=3, key=jax.random.key(1),
             optimizer=OptimizerSpec(name, lr / 3), extra_quadratic=M,
             **{**kw, "clip_norm": 1.5})
    assert trace_count("fast_steps") == before


def test_an_optimizer_spec_names_an_optax_optimizer():
    from dpmt.solvers.gd_fast import OptimizerSpec

    with pytest.raises(ConfigError, match="optax optimizer 'adamm'"):
        noisy_gd(ENC, PARAMS, TL, X, W, Y, steps=1, clip_norm=1.0, noise_multiplier=1.0,
                 key=jax.random.key(0), optimizer=OptimizerSpec("adamm", 0.1))
