"""Synthetic generator: sizes, determinism, Zipf skew, planted low-rank signal."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import gini, make_synthetic, make_synthetic_like, per_user_split
from dpmt.data import synthetic as S
from dpmt.errors import ConfigError


def check_valid(r, n_users, n_items, nnz):
    assert (r.n_users, r.n_items, r.nnz) == (n_users, n_items, nnz)
    key = np.sort(r.user.astype(np.int64) * n_items + r.item)
    assert not np.any(key[1:] == key[:-1])                      # no repeated pair
    assert np.all(r.value == 1.0) and r.timestamp is None
    assert np.all(np.diff(r.user) >= 0)                         # grouped by user


def test_shapes_counts_and_truth():
    r, t = make_synthetic(n_users=800, n_items=300, n_interactions=20_000, seed=0,
                          return_truth=True)
    check_valid(r, 800, 300, 20_000)
    np.testing.assert_array_equal(r.user_counts(), t.user_activity)
    assert r.user_counts().min() >= 1
    assert t.user_factors.shape == (800, 16) and t.item_factors.shape == (300, 16)
    assert t.user_factors.dtype == np.float32
    np.testing.assert_allclose(t.user_factors.sum(axis=1), 1, rtol=1e-5)
    assert abs(t.item_popularity.sum() - 1) < 1e-9
    # q_j = p * g_j is a distribution for every user: Σ_i p_i g_j(i) = 1
    users = np.arange(800).repeat(300)
    items = np.tile(np.arange(300), 800)
    q = (t.preference(users, items) * t.item_popularity[items]).reshape(800, 300)
    np.testing.assert_allclose(q.sum(axis=1), 1, rtol=1e-4)


def test_deterministic():
    a = make_synthetic(n_users=200, n_items=100, n_interactions=3000, seed=7)
    b = make_synthetic(n_users=200, n_items=100, n_interactions=3000, seed=7)
    c = make_synthetic(n_users=200, n_items=100, n_interactions=3000, seed=8)
    np.testing.assert_array_equal(a.item, b.item)
    assert not np.array_equal(a.item, c.item)


def test_zipf_skew_visible():
    kw = dict(n_users=2000, n_items=1000, n_interactions=40_000, seed=0)
    g_hi = gini(make_synthetic(alpha=1.2, **kw).item_counts())
    g_lo = gini(make_synthetic(alpha=0.2, **kw).item_counts())
    assert g_hi > g_lo + 0.3, (g_hi, g_lo)


def test_popularity_follows_planted_p():
    r, t = make_synthetic(n_users=3000, n_items=400, n_interactions=60_000, alpha=1.0,
                          noise=1.0, seed=1, return_truth=True)
    n_i = r.item_counts()
    rho = np.corrcoef(np.log(n_i + 1), np.log(t.item_popularity))[0, 1]
    assert rho > 0.9, rho


def auc(t, users, items, rng):
    """P(affinity of a user's item > affinity of a random item for the same user)."""
    pos = t.affinity(users, items)
    neg = t.affinity(users, rng.integers(0, t.item_factors.shape[0], len(users)))
    return (pos > neg).mean() + 0.5 * (pos == neg).mean()


def test_planted_signal_in_heldout_items():
    r, t = make_synthetic(n_users=1500, n_items=500, n_interactions=45_000, seed=2,
                          return_truth=True)
    s = per_user_split(r, (0.8, 0.0, 0.2), seed=0)
    test = s.test.targets
    rng = np.random.default_rng(0)
    assert auc(t, test.user, test.item, rng) > 0.65
    # no signal when every pick follows popularity alone
    r0, t0 = make_synthetic(n_users=1500, n_items=500, n_interactions=45_000, seed=2,
                            noise=1.0, return_truth=True)
    assert abs(auc(t0, r0.user, r0.item, rng) - 0.5) < 0.02


def test_heavy_users_and_short_pools_use_exact_sampler(monkeypatch):
    called = []
    dense = S._Sampler.dense
    monkeypatch.setattr(S._Sampler, "dense", lambda self, u, *a: called.append(len(u)) or
                        dense(self, u, *a))
    # very skewed popularity + heavy users: pools run short, dense path needed
    r = make_synthetic(n_users=100, n_items=200, n_interactions=8000, concentration=0.01,
                       user_activity_sigma=2.0, seed=3)
    check_valid(r, 100, 200, 8000)
    assert called and sum(called) > 0
    # a user may take (almost) the whole catalogue
    r = make_synthetic(n_users=3, n_items=50, n_interactions=150, seed=0)
    check_valid(r, 3, 50, 150)
    assert np.all(r.user_counts() == 50)


def test_max_per_user():
    r = make_synthetic(n_users=100, n_items=300, n_interactions=2000, max_per_user=25,
                       user_activity_sigma=2.0)
    assert r.user_counts().max() <= 25 and r.nnz == 2000


@pytest.mark.parametrize("kw,msg", [
    (dict(n_users=10, n_items=5, n_interactions=5), "must be >= n_users"),
    (dict(n_users=10, n_items=5, n_interactions=51), "exceeds n_users"),
    (dict(alpha=-1), "alpha must be >= 0"),
    (dict(noise=1.5), r"noise must be in \[0, 1\]"),
    (dict(concentration=0), "concentration must be > 0"),
    (dict(n_users=2.5), "n_users must be an integer"),
])
def test_bad_arguments(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        make_synthetic(**kw)


def test_allocate_exact():
    w = np.random.default_rng(0).lognormal(0, 2, 1000)
    k = S._allocate(50_000, w, 1, 300)
    assert k.sum() == 50_000 and k.min() >= 1 and k.max() <= 300
    assert np.corrcoef(np.minimum(w, w[k < 300].max()), k)[0, 1] > 0.9


def test_make_synthetic_like():
    r = make_synthetic_like("ml-1m", scale=0.05, seed=0)
    assert r.n_items == 3706 and r.n_users == 302 and r.nnz == round(1_000_209 * 0.05)
    assert r.name == "synthetic-ml-1mx0.05"
    with pytest.raises(ConfigError, match="unknown dataset"):
        make_synthetic_like("netflix")


@pytest.mark.slow
def test_ml20m_scale():
    r = make_synthetic_like("ml-20m", seed=0)
    check_valid(r, 138_493, 26_744, 20_000_263)


def test_pool_and_exact_samplers_agree():
    # 6000 identical users: the pool sampler (successive sampling from i.i.d. draws) and
    # the exact Gumbel-top-k sampler must give the same inclusion probabilities; also
    # when both continue from a first pick.
    rng = np.random.default_rng(0)
    n_users, n_items, k = 6000, 8, 3
    p = rng.dirichlet(np.ones(n_items))
    theta = np.tile(rng.dirichlet(np.ones(4)), (n_users, 1))
    phi = rng.dirichlet(np.full(4, 0.5), n_items)
    phi_t = phi / (p @ phi)
    users, need = np.arange(n_users), np.full(n_users, k)
    s = S._Sampler(theta, phi_t, p, need, 0.2, np.random.default_rng(1))
    u1, i1, short, _ = s.pool(users, need, 1.0)
    assert len(short) == 0 and np.all(np.bincount(u1, minlength=n_users) == k)
    none = np.zeros(0, np.int64)
    u2, i2 = s.dense(users, need, none, none)
    assert np.all(np.bincount(u2, minlength=n_users) == k)
    f_pool = np.bincount(i1, minlength=n_items) / n_users
    f_exact = np.bincount(i2, minlength=n_items) / n_users
    np.testing.assert_allclose(f_pool, f_exact, atol=0.04)
    assert f_exact.max() - f_exact.min() > 0.2                 # not trivially uniform
    # continuation: everyone has item 0 already; two more picks among the rest
    taken_i = np.zeros(n_users, np.int64)
    u3, i3, _, _ = s.pool(users, np.full(n_users, 2), 1.0, np.sort(users * n_items))
    u4, i4 = s.dense(users, np.full(n_users, 2), users, taken_i)
    assert not np.any(i3 == 0) and not np.any(i4 == 0)
    np.testing.assert_allclose(np.bincount(i3, minlength=n_items) / n_users,
                               np.bincount(i4, minlength=n_items) / n_users, atol=0.04)


def test_short_pools_continue_exactly():
    # one user, tiny catalogue, needs every item: pools run short and continue
    r = make_synthetic(n_users=1, n_items=40, n_interactions=40, concentration=0.01, seed=0,
                       pool_factor=1)
    assert sorted(r.item.tolist()) == list(range(40))
