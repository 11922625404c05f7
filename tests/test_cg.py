"""Warm-started conjugate gradients (dpmt.solvers.cg) and the solves built on it: the SSP item
step's ``psd="cg"`` / ``item_solve="cg"`` and the user step's ``U0`` / ``user_solve="cg"``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmt.config import NonPrivate, TrainConfig, route
from dpmt.data import make_synthetic, per_user_split
from dpmt.errors import ConfigError
from dpmt.solvers import ssp, systems
from dpmt.solvers.cg import (DEFAULT_CG_STEPS, cg_solve, check_cg_steps, check_start,
                             gram_matvec, shared_preconditioner)
from dpmt.solvers.layout import task_layout, user_layout
from dpmt.solvers.user_step import solve_users


def _spd(n, d, cond, seed=0):
    """n SPD matrices with eigenvalues spread over [1, cond], in random bases."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((n, d, d)))[0]
    lam = np.exp(rng.uniform(0, np.log(cond), (n, d)))
    M = np.einsum("nij,nj,nkj->nik", Q, lam, Q)
    return (0.5 * (M + np.swapaxes(M, 1, 2))).astype(np.float32), \
        rng.standard_normal((n, d)).astype(np.float32)


def _rel(x, ref):
    return np.linalg.norm(np.asarray(x) - ref, axis=-1) / np.linalg.norm(ref, axis=-1)


def test_cg_converges_to_the_solution_and_shrinks_the_energy_error():
    M, b = _spd(64, 12, cond=50.0)
    exact = np.linalg.solve(M.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]
    x0 = np.zeros_like(b)
    errs = []
    for k in (1, 3, 6, 12):
        res = cg_solve(jnp.asarray(M), jnp.asarray(b), jnp.asarray(x0), k)
        e = np.asarray(res.x, np.float64) - exact
        errs.append(np.einsum("ni,nij,nj->n", e, M, e))     # ‖e‖²_M, what CG minimises
        assert bool(jnp.all(res.positive))
        np.testing.assert_allclose(np.asarray(res.residual),
                                   np.linalg.norm(b - np.einsum("nij,nj->ni", M,
                                                                np.asarray(res.x)), axis=-1),
                                   rtol=1e-3, atol=1e-4)
    # the M-norm error shrinks with every extra step (Krylov spaces are nested)
    for a, c in zip(errs, errs[1:]):
        assert np.all(c <= a * (1 + 1e-4) + 1e-9)
    # d steps: exact up to float32 round-off (CG loses orthogonality in float32 at κ = 50)
    assert np.median(_rel(res.x, exact)) < 1e-4 and np.max(_rel(res.x, exact)) < 1e-2
    # and far from exact after one step at this conditioning (the test can fail)
    one = cg_solve(jnp.asarray(M), jnp.asarray(b), jnp.asarray(x0), 1)
    assert np.median(_rel(one.x, exact)) > 5e-2


def test_warm_start_at_the_solution_stays_and_helps():
    M, b = _spd(32, 16, cond=200.0, seed=1)
    exact = np.linalg.solve(M.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]
    at = cg_solve(jnp.asarray(M), jnp.asarray(b), jnp.asarray(exact, jnp.float32), 3)
    assert np.max(_rel(at.x, exact)) < 1e-4 and bool(jnp.all(at.positive))
    rng = np.random.default_rng(2)
    near = exact + 0.05 * rng.standard_normal(exact.shape) * np.linalg.norm(
        exact, axis=-1, keepdims=True) / 4
    warm = cg_solve(jnp.asarray(M), jnp.asarray(b), jnp.asarray(near, jnp.float32), 3)
    cold = cg_solve(jnp.asarray(M), jnp.asarray(b), jnp.zeros_like(jnp.asarray(b)), 3)
    assert np.median(_rel(warm.x, exact)) < 0.2 * np.median(_rel(cold.x, exact))


def test_a_shared_preconditioner_solves_systems_dominated_by_their_shared_part():
    """M_k = P + S_k with a badly conditioned shared P and small S_k: preconditioned by P⁻¹
    (shared_preconditioner), 3 steps are nearly exact; Jacobi needs far more."""
    d, n = 16, 40
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    P = (Q * np.geomspace(1.0, 1e3, d)) @ Q.T
    S = rng.standard_normal((n, d, 3)) * 0.3
    M = (P + np.einsum("nij,nkj->nik", S, S)).astype(np.float32)
    b = rng.standard_normal((n, d)).astype(np.float32)
    exact = np.linalg.solve(M.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]
    Pinv = shared_preconditioner(jnp.asarray(P, jnp.float32))
    np.testing.assert_allclose(np.asarray(Pinv) @ P, np.eye(d), atol=1e-3)
    x0 = jnp.zeros((n, d))
    pre = cg_solve(jnp.asarray(M), jnp.asarray(b), x0, 4, Pinv)
    jac = cg_solve(jnp.asarray(M), jnp.asarray(b), x0, 4)
    # S_k has rank 3: P⁻¹M_k = I + rank 3, so 4 preconditioned steps are exact
    assert np.max(_rel(pre.x, exact)) < 1e-3
    assert np.median(_rel(jac.x, exact)) > 1e-2


def test_negative_curvature_is_flagged():
    d = 5
    M = np.stack([np.eye(d), -np.eye(d), np.diag([1.0, 1, 1, 1, -3])]).astype(np.float32)
    b = np.ones((3, d), np.float32)
    res = cg_solve(jnp.asarray(M), jnp.asarray(b), jnp.zeros((3, d)), 4)
    assert np.asarray(res.positive).tolist() == [True, False, False]
    np.testing.assert_allclose(np.asarray(res.x[0]), np.ones(d), rtol=1e-6)


def test_argument_checks():
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ConfigError, match="cg_steps"):
            check_cg_steps(bad)
    assert check_cg_steps(np.int64(3)) == 3
    assert check_start(None, (4, 2)) is None
    with pytest.raises(ConfigError, match=r"U0 must have shape \(4, 2\).*one row per user"):
        check_start(np.zeros((3, 2)), (4, 2), "U0", "user")
    with pytest.raises(ConfigError, match="TrainConfig|cg_steps"):
        TrainConfig(cg_steps=0)
    with pytest.raises(ConfigError, match="user_solve"):
        TrainConfig(user_solve="lu")
    assert TrainConfig(user_solve="cg", ssp=dict(item_solve="cg")).item_cg_steps >= 1
    # one default for noisy systems (the config layer cannot import the solvers); exact
    # (non-private) systems take implicit's 3; an explicit count wins over both
    assert TrainConfig().item_cg_steps == DEFAULT_CG_STEPS
    assert TrainConfig(privacy=NonPrivate()).item_cg_steps == 3
    assert TrainConfig(cg_steps=5, privacy=NonPrivate()).item_cg_steps == 5
    assert TrainConfig(cg_steps=5).item_cg_steps == 5


#: uniform popularity and activity (alpha = 0, σ = 0): the rows' lengths span one to three
#: buckets, not five to seven, and every kernel on these layouts compiles 2-3x faster; what
#: these tests check (the solves' agreement) does not depend on the spread of row lengths
FLAT = dict(alpha=0.0, user_activity_sigma=0.0)


@pytest.fixture(scope="module")
def small():
    r = make_synthetic(n_users=300, n_items=90, n_interactions=4000, seed=4, **FLAT)
    # d = 4: every "d steps are exact" check holds at any d, and the CG loops compile faster
    d = 4
    rng = np.random.default_rng(0)
    w = rng.uniform(0.1, 1.0, r.nnz).astype(np.float32)
    U = rng.standard_normal((r.n_users, d)).astype(np.float32)
    U /= np.maximum(1.0, np.linalg.norm(U, axis=1, keepdims=True))
    return r, d, w, U


def test_item_step_cg_solves_the_shift_system_with_the_same_noise(small):
    """psd="cg" draws the same released Â, b̂ as "shift" (same key) and solves the same
    system: with d steps it matches shift's θ; from shift's θ it stays there; from zero with
    one step it does not (so the comparison could fail)."""
    r, d, w, U = small
    lay = task_layout(r, dim=d)
    key = jax.random.PRNGKey(3)
    kw = dict(extra=0.1 * jnp.eye(d))
    th_shift = np.asarray(ssp.ssp_item_step(lay, U, w, None, key, 0.3, 0.2, 1.0, psd="shift",
                                            **kw))
    th_cg = ssp.ssp_item_step(lay, U, w, None, key, 0.3, 0.2, 1.0, psd="cg", cg_steps=d,
                              x0=np.zeros((r.n_items, d)), **kw)
    assert np.max(_rel(th_cg, th_shift)) < 1e-3
    # (one step from either start: the same compiled solve)
    th_at = ssp.ssp_item_step(lay, U, w, None, key, 0.3, 0.2, 1.0, psd="cg", cg_steps=1,
                              x0=th_shift, **kw)
    assert np.max(_rel(th_at, th_shift)) < 1e-4
    th_one = ssp.ssp_item_step(lay, U, w, None, key, 0.3, 0.2, 1.0, psd="cg", cg_steps=1,
                               x0=np.zeros((r.n_items, d)), **kw)
    assert np.median(_rel(th_one, th_shift)) > 1e-3
    # another key (other noise) moves θ by far more than the solves differ
    th_other = np.asarray(ssp.ssp_item_step(lay, U, w, None, jax.random.PRNGKey(4), 0.3, 0.2,
                                            1.0, psd="shift", **kw))
    assert np.median(_rel(th_other, th_shift)) > 1e-2
    # the unfused path (ssp_solve on the statistics) agrees
    A, b = ssp.weighted_statistics(lay, U, w)
    th_u = ssp.ssp_solve(A, b, key, 0.3, 0.2, 1.0, psd="cg", cg_steps=d, **kw)
    assert np.max(_rel(th_u, th_shift)) < 1e-3
    # a start that is not finite: CG fails its checks there, the Cholesky solve takes over
    th_nan = ssp.ssp_item_step(lay, U, w, None, key, 0.3, 0.2, 1.0, psd="cg", cg_steps=d,
                               x0=np.full((r.n_items, d), np.nan), **kw)
    assert np.max(_rel(th_nan, th_shift)) < 1e-5
    with pytest.raises(ConfigError, match="x0 must have shape"):
        ssp.ssp_item_step(lay, U, w, None, key, 0.3, 0.2, 1.0, psd="cg", x0=np.zeros((2, d)))


def test_item_cg_falls_back_per_item_when_a_system_is_not_positive_definite():
    """A released Â far below −s (an impossible noise draw, forced here) makes M indefinite:
    CG flags it and that item alone takes shift's checked solve (eigenvalues floored at λ)."""
    d, reg = 4, 1.0
    A = np.stack([np.eye(d), -5.0 * np.eye(d), 2.0 * np.eye(d)]).astype(np.float32)
    b = np.ones((3, d), np.float32)
    th = systems.cg_shift_solve(jnp.asarray(A), jnp.asarray(b), None, reg, 0.0,
                                jnp.zeros((3, d)), 3)
    ref, ok = systems.shift_solve(jnp.asarray(A), jnp.asarray(b), None, reg, 0.0)
    assert np.asarray(ok).tolist() == [True, False, True]
    np.testing.assert_allclose(np.asarray(th), np.asarray(ref), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(th[1]), np.ones(d) / reg, rtol=1e-5)


def test_the_matrix_free_operator_is_the_formed_system():
    """gram_matvec applies Σ_l w_l x_l x_lᵀ + S without forming it (weights of both signs, a
    zero pad slot), and CG on the operator follows CG on the formed matrices."""
    rng = np.random.default_rng(7)
    n, L, d = 5, 6, 4
    X = rng.standard_normal((n, L, d)).astype(np.float32)
    w = rng.uniform(-0.5, 1.0, (n, L)).astype(np.float32)
    w[:, -1] = 0.0
    X[:, -1] = 1e3                     # a pad slot's row: ignored through w = 0
    S = (2.0 * np.eye(d) + 0.1).astype(np.float32)
    M = np.einsum("nl,nld,nle->nde", w, X, X) + S
    p = rng.standard_normal((n, d)).astype(np.float32)
    op = gram_matvec(jnp.asarray(X), jnp.asarray(w), shared=jnp.asarray(S))
    np.testing.assert_allclose(np.asarray(op(jnp.asarray(p))), np.einsum("nde,ne->nd", M, p),
                               rtol=1e-4, atol=1e-3)
    w_pos = np.abs(w)
    M_pos = np.einsum("nl,nld,nle->nde", w_pos, X, X) + S
    b = rng.standard_normal((n, d)).astype(np.float32)
    P = shared_preconditioner(jnp.asarray(S))
    formed = cg_solve(jnp.asarray(M_pos), b, jnp.zeros((n, d)), 3, P)
    free = cg_solve(gram_matvec(jnp.asarray(X), jnp.asarray(w_pos), shared=jnp.asarray(S)), b,
                    jnp.zeros((n, d)), 3, P)
    np.testing.assert_allclose(np.asarray(free.x), np.asarray(formed.x), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np.asarray(free.residual), np.asarray(formed.residual),
                               rtol=1e-2, atol=1e-4)
    with pytest.raises(ValueError, match="needs precond"):
        cg_solve(op, b, jnp.zeros((n, d)), 3)


def test_noiseless_item_cg_is_matrix_free_and_solves_the_same_system(small):
    """Without noise (non-private ALS) the fused item step's CG never forms the Gram matrices;
    it must agree with CG on the formed statistics (ssp_solve), reach the exact ridge solution
    with d steps, and fall back to the exact solve from a non-finite start."""
    r, d, w, U = small
    lay = task_layout(r, dim=d)
    kw = dict(extra=0.1 * jnp.eye(d))
    A, b = ssp.weighted_statistics(lay, U, w)
    exact = np.asarray(ssp.ssp_solve(A, b, None, 0.0, 0.0, 1.0, psd="shift", **kw))
    rng = np.random.default_rng(2)
    x0 = (exact + 0.1 * rng.standard_normal(exact.shape)).astype(np.float32)
    free = np.asarray(ssp.ssp_item_step(lay, U, w, None, None, 0.0, 0.0, 1.0, psd="cg",
                                        cg_steps=2, x0=x0, **kw))
    formed = np.asarray(ssp.ssp_solve(A, b, None, 0.0, 0.0, 1.0, psd="cg", cg_steps=2, x0=x0,
                                      **kw))
    np.testing.assert_allclose(free, formed, rtol=1e-4, atol=1e-5)
    assert np.median(_rel(free, exact)) > 1e-4          # 2 steps from x0: not yet exact
    full = ssp.ssp_item_step(lay, U, w, None, None, 0.0, 0.0, 1.0, psd="cg", cg_steps=d, x0=x0,
                             **kw)
    assert np.max(_rel(full, exact)) < 1e-3
    nan = ssp.ssp_item_step(lay, U, w, None, None, 0.0, 0.0, 1.0, psd="cg", cg_steps=2,
                            x0=np.full_like(x0, np.nan), **kw)
    assert np.max(_rel(nan, exact)) < 1e-5


def test_user_step_cg_from_a_start(small):
    r, d, w, _ = small
    ul = user_layout(r, dim=d)
    V = np.random.default_rng(5).standard_normal((r.n_items, d)).astype(np.float32)
    kw = dict(reg=1.0, alpha0=0.05)
    exact = np.asarray(solve_users(ul, V, **kw))
    rated = np.linalg.norm(exact, axis=1) > 0
    full = solve_users(ul, V, U0=np.zeros_like(exact), cg_steps=d, **kw)
    assert np.max(_rel(np.asarray(full)[rated], exact[rated])) < 1e-3
    few = solve_users(ul, V, U0=np.zeros_like(exact), cg_steps=1, **kw)
    assert np.median(_rel(np.asarray(few)[rated], exact[rated])) > 1e-2
    at = solve_users(ul, V, U0=exact, cg_steps=2, **kw)
    assert np.max(_rel(np.asarray(at)[rated], exact[rated])) < 1e-4
    np.testing.assert_array_equal(np.asarray(at)[~rated], 0.0)
    with pytest.raises(ConfigError, match="U0 must have shape"):
        solve_users(ul, V, U0=np.zeros((3, d)), **kw)
    # a non-finite start: those users are solved exactly, the others by CG as before
    bad = np.asarray(exact).copy()
    bad[np.flatnonzero(rated)[:5]] = np.nan
    got = np.asarray(solve_users(ul, V, U0=bad, cg_steps=2, **kw))
    assert np.all(np.isfinite(got))
    assert np.max(_rel(got[rated], exact[rated])) < 1e-4


def test_the_user_step_takes_user_cg_steps_and_the_item_step_cg_steps(small):
    """``user_cg_steps`` is the CG user step's count, ``cg_steps`` the item systems': the
    training steps' user solve is solve_users at user_cg_steps, whatever cg_steps says."""
    from dpmt.solvers.steps import build_steps

    r, d, w, _ = small
    V = np.random.default_rng(5).standard_normal((r.n_items, d)).astype(np.float32)
    U0 = np.zeros((r.n_users, d), np.float32)
    got = {}
    for user, item in ((1, 8), (1, 1), (4, 1)):
        cfg = TrainConfig(dim=d, solver="ssp", reg=1.0, gravity=0.05, user_cg_steps=user,
                          cg_steps=item, privacy=dict(epsilon=1.0))
        got[user, item] = np.asarray(build_steps(cfg, r, w).solve_users(V, U0))
    ul = user_layout(r, dim=d)
    kw = dict(reg=1.0, alpha0=0.05, clip_norm=TrainConfig(dim=d).user_clip, U0=U0)
    np.testing.assert_array_equal(got[1, 8], got[1, 1])
    np.testing.assert_allclose(got[1, 8], np.asarray(solve_users(ul, V, cg_steps=1, **kw)),
                               rtol=1e-6, atol=1e-7)
    assert not np.allclose(got[4, 1], got[1, 1])


def test_fit_with_cg_solves_spends_the_same_budget_and_tracks_the_exact_model():
    """item_solve="cg", user_solve="cg": the same releases (ε, noise) as shift; with d CG steps
    the model is shift's up to round-off, with 1 step it is not."""
    from dpmt.train.loop import fit

    r = make_synthetic(n_users=400, n_items=120, n_interactions=6000, seed=1, **FLAT)
    split = per_user_split(r, seed=0)
    base = TrainConfig(solver="ssp", weights="adaptive", dim=4, iterations=3,
                       data=dict(dataset="synthetic", seed=2),
                       privacy=dict(epsilon=3.0, noise_seed=2))
    runs = {name: fit(split.train, base.replace(**route(kw))) for name, kw in {
        "shift": dict(item_solve="shift"),
        "cg": dict(item_solve="cg", user_solve="cg", cg_steps=4, user_cg_steps=4),
        "cg1": dict(item_solve="cg", user_solve="cg", cg_steps=1, user_cg_steps=1)}.items()}
    assert runs["cg"].epsilon == runs["shift"].epsilon
    assert [(e.name, e.noise_std) for e in runs["cg"].ledger.releases] == \
        [(e.name, e.noise_std) for e in runs["shift"].ledger.releases]
    V = {k: np.asarray(m.item_embeddings) for k, m in runs.items()}
    assert np.linalg.norm(V["cg"] - V["shift"]) <= 1e-3 * np.linalg.norm(V["shift"])
    assert np.linalg.norm(V["cg1"] - V["shift"]) > 1e-2 * np.linalg.norm(V["shift"])


def test_a_non_private_fit_takes_3_item_cg_steps_and_a_private_one_8():
    """``cg_steps=None``: the non-private item step takes EXACT_CG_STEPS = 3 (the model of an
    explicit ``cg_steps=3``, not of 8) and the resolved config says so; a private SSP run
    takes 8 (its model is an explicit 8's, not 3's)."""
    from dpmt.config import EXACT_CG_STEPS, NOISY_CG_STEPS
    from dpmt.train.loop import fit

    r = make_synthetic(n_users=300, n_items=90, n_interactions=4000, seed=6, **FLAT)
    split = per_user_split(r, seed=0)
    base = TrainConfig(solver="ssp", dim=4, iterations=3, reg=1.0,
                       data=dict(dataset="synthetic", seed=2), privacy=NonPrivate())
    V = {}
    for steps in (None, EXACT_CG_STEPS, NOISY_CG_STEPS):
        m = fit(split.train, base.replace(cg_steps=steps))
        V[steps] = np.asarray(m.item_embeddings)
        if steps is None:
            assert m.config.cg_steps == EXACT_CG_STEPS      # resolved, as model.json states
    np.testing.assert_array_equal(V[None], V[EXACT_CG_STEPS])
    assert not np.allclose(V[None], V[NOISY_CG_STEPS])
    private = base.replace(privacy=dict(epsilon=3.0, noise_seed=2))
    P = {steps: np.asarray(fit(split.train, private.replace(cg_steps=steps)).item_embeddings)
         for steps in (None, EXACT_CG_STEPS, NOISY_CG_STEPS)}
    np.testing.assert_array_equal(P[None], P[NOISY_CG_STEPS])
    assert not np.allclose(P[None], P[EXACT_CG_STEPS])
