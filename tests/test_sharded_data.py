"""Sharded data: each process holds only its own users' ratings (issue 29).

The shard files (dpmt.data.shards), the split-invariant capping and weights, and fit with
``ExecutionConfig(sharded_data=True)``: every release sums the processes' statistics before
its one noise draw, so any number of processes makes the same model. The processes are
simulated by threads whose ``process_sum`` is a barrier (the real jax.distributed run is
the slow test at the end, through scripts/multihost.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.data import make_synthetic, per_user_split
from dpmt.data.ratings import Ratings
from dpmt.data.shards import (read_manifest, read_user_shard, shards_of_process, user_shards,
                              write_user_shards)
from dpmt.data.splits import keyed_cap_mask
from dpmt.errors import ConfigError, DataError
from dpmt.privacy import private_counts
from dpmt.privacy.randomness import NoiseSource
from dpmt.solvers import collectives
from dpmt.train.loop import fit


@pytest.fixture(scope="module")
def ratings():
    return make_synthetic(n_users=400, n_items=120, n_interactions=8000, seed=3)


@pytest.fixture(scope="module")
def fit_ratings():
    """The fits' data: the same users (so the same uneven splits over 2 and 3 processes), with
    a narrower spread of user activity (6 to 32 ratings) and item popularity. Each process's
    shard has its own shapes, so each fit compiles its own user and item steps, and a step
    compiles one kernel per layout bucket: 3 user buckets instead of 8 took the compiles of
    a one-process fit from ~44 s to ~17 s (2026-12-07, a loaded 2-core machine)."""
    return make_synthetic(n_users=400, n_items=120, n_interactions=6000,
                          user_activity_sigma=0.3, alpha=0.5, seed=3)


def _pairs(r):
    return set(zip(np.asarray(r.user_ids)[r.user].tolist(),
                   np.asarray(r.item_ids)[r.item].tolist()))


# -- the shard files --------------------------------------------------------------------------
def test_shards_partition_the_users_and_each_process_reads_its_own(ratings, tmp_path):
    m = write_user_shards(ratings, tmp_path / "s", 8)
    assert sum(m["ratings"]) == ratings.nnz and sum(m["users"]) == ratings.n_users
    got, users = set(), []
    for p in range(3):
        r, info = read_user_shard(tmp_path / "s", p, 3)
        assert r.items_public and list(r.item_ids) == list(ratings.item_ids)
        assert info["shards"] == shards_of_process(8, p, 3)
        assert info["fraction"] == pytest.approx(r.nnz / ratings.nnz)
        assert not (_pairs(r) & got)          # no rating read twice
        got |= _pairs(r)
        users.append(set(np.asarray(r.user_ids).tolist()))
    assert got == _pairs(ratings)
    assert not (users[0] & users[1]) and not (users[1] & users[2])   # a user in one process
    # the shard of a user is a function of its id alone: the same without the others
    assert np.array_equal(user_shards(ratings.user_ids[::7], 8),
                          user_shards(ratings.user_ids, 8)[::7])


def test_shard_folders_refuse_what_would_lose_or_mix_data(ratings, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(DataError, match="not an empty folder"):
        write_user_shards(ratings, tmp_path / "full", 4)
    assert (tmp_path / "full" / "x").read_text() == "keep me"
    no_catalogue = Ratings.from_raw(np.array([1, 2]), np.array([5, 6]), np.ones(2))
    with pytest.raises(DataError, match="public item catalogue"):
        write_user_shards(no_catalogue, tmp_path / "n", 2)
    assert not (tmp_path / "n").exists()
    write_user_shards(ratings, tmp_path / "s", 2)
    with pytest.raises(ConfigError, match="at least as many shards as processes"):
        read_user_shard(tmp_path / "s", 0, 3)
    with pytest.raises(DataError, match="manifest.json"):
        read_manifest(tmp_path / "full")


# -- split-invariant randomness ----------------------------------------------------------------
def test_keyed_cap_is_the_same_on_any_split_of_the_users(ratings):
    k = 10
    full = keyed_cap_mask(ratings, k, seed=11)
    assert np.bincount(ratings.user[full]).max() <= k
    half = np.isin(ratings.user, np.arange(0, ratings.n_users, 2))
    part = ratings.select(half)
    assert np.array_equal(keyed_cap_mask(part, k, seed=11), full[half])
    assert not np.array_equal(keyed_cap_mask(ratings, k, seed=12), full)


def test_private_counts_refuse_a_cap_mask_that_breaks_the_sensitivity(ratings):
    keep = np.ones(ratings.nnz, bool)       # every rating: users above k
    src = NoiseSource.create(0)
    with pytest.raises(DataError, match="more than k = 5"):
        private_counts(ratings.user, ratings.item, ratings.n_items, k=5, noise_std=2.0,
                       cap_rng=None, noise_rng=src.random("c"), keep=keep)


# -- fit on sharded data: simulated processes ------------------------------------------------------
class ThreadProcesses:
    """P threads standing for P processes: ``sum`` is process_sum with a barrier. One thread
    runs at a time (a baton, released only while a thread waits in ``sum``), as separate
    processes never share a compiler. (The baton did not stop the segfault in XLA's compile
    that quarantined the fold-in choice's test below: that crash came with one thread
    running.)"""

    def __init__(self, processes: int):
        self.P = processes
        self.barrier = threading.Barrier(processes, timeout=120)
        self.slots = [None] * processes
        self.local = threading.local()
        self.calls = 0
        self.baton = threading.Lock()

    def sum(self, x):
        rank = self.local.rank
        self.slots[rank] = np.asarray(x)
        self.baton.release()
        try:
            self.barrier.wait()
            parts = list(self.slots)
            self.barrier.wait()
        finally:
            self.baton.acquire()
        if rank == 0:
            self.calls += 1
        if np.issubdtype(parts[0].dtype, np.integer):
            return np.sum(np.stack(parts).astype(np.int64), axis=0).astype(parts[0].dtype)
        out = parts[0].astype(np.float32).copy()
        for p in parts[1:]:
            out += p.astype(np.float32)
        return out

    def run(self, fn, args_per_rank):
        results, errors = [None] * self.P, []

        def target(rank):
            self.local.rank = rank
            with self.baton:
                try:
                    results[rank] = fn(*args_per_rank[rank])
                except BaseException as e:          # noqa: BLE001 (re-raised below)
                    errors.append(e)
                    self.barrier.abort()

        # XLA compiles in these threads: give them the stack a main thread would have room for
        old_size = threading.stack_size(64 << 20)
        try:
            threads = [threading.Thread(target=target, args=(r,)) for r in range(self.P)]
            for t in threads:
                t.start()
        finally:
            threading.stack_size(old_size)
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


def _shard_users(r, processes):
    shard = user_shards(r.user_ids, processes)[r.user]
    return [r.select(shard == p) for p in range(processes)]


def _config(solver, weights, noise_seed=0):
    return TrainConfig(solver=solver, weights=weights, dim=8,
                       iterations=2, count_cap=8, budget=8, data=dict(dataset="synthetic"),
                       privacy=dict(epsilon=2.0, noise_seed=noise_seed))


_FITS: dict = {}


def _fits_on_processes(fit_ratings, solver, weights, P) -> list:
    """Every process's model for P processes holding disjoint users, each splitting its own
    users. Memoised: the test below and the noise test read the same fits (each process's
    shard has its own shapes, so each fit compiles its own kernels: ~5 s a shard)."""
    if (solver, weights, P) not in _FITS:
        cfg = _config(solver, weights)
        ex = ExecutionConfig(progress=False, sharded_data=True)
        procs = ThreadProcesses(P)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(collectives, "process_sum", procs.sum)

            def train(shard):
                split = per_user_split(shard, seed=0)
                return fit(split.train, cfg, test=split.test, execution=ex)

            models = procs.run(train, [(s,) for s in _shard_users(fit_ratings, P)])
        assert procs.calls > 0 or P == 1
        _FITS[solver, weights, P] = models
    return _FITS[solver, weights, P]


@pytest.mark.parametrize("solver,weights", [("ssp", "uniform"), ("gd", "adaptive")])
def test_two_and_three_processes_make_the_one_process_model(fit_ratings, solver, weights):
    """The same releases (ledger), V to float32 round-off and the same Recall@20 for 1, 2
    and 3 processes holding disjoint users, with user caps and sampled weights active (so a
    cap or a sample drawn by position, not by id, would fail it)."""
    assert fit_ratings.user_counts().max() > 8          # the cap and the sample both bite
    results = {}
    for P in (1, 2, 3):
        models = _fits_on_processes(fit_ratings, solver, weights, P)
        V = [m.item_embeddings for m in models]
        assert all(np.array_equal(v, V[0]) for v in V)      # every process the same V
        results[P] = models[0]
    one = results[1]
    for P in (2, 3):
        m = results[P]
        assert np.abs(m.item_embeddings - one.item_embeddings).max() <= \
            1e-4 * max(1.0, np.abs(one.item_embeddings).max())
        assert m.epsilon == one.epsilon <= 2.0 + 1e-3
        assert [r.name for r in m.ledger.releases] == [r.name for r in one.ledger.releases]
        assert m.metrics["overall"]["users"] == one.metrics["overall"]["users"]
        assert m.metrics["overall"]["recall@20"] == pytest.approx(
            one.metrics["overall"]["recall@20"], abs=1e-3)


def test_the_noise_is_added_once_to_the_sum_not_per_process(fit_ratings):
    """If each process noised its own part (or the noise were drawn before the sum), the
    two-process V would differ from the one-process V by far more than round-off. (The one-
    and two-process SSP fits of the test above; only the other secret's fit is new, and it
    reuses the one-process fit's kernels.)"""
    one, two = (_fits_on_processes(fit_ratings, "ssp", "uniform", P)[0].item_embeddings
                for P in (1, 2))
    split = per_user_split(fit_ratings, seed=0)
    other = fit(split.train, _config("ssp", "uniform", noise_seed=1), test=split.test,
                execution=ExecutionConfig(progress=False, sharded_data=True)).item_embeddings
    assert np.abs(two - one).max() <= 1e-4 * max(1.0, np.abs(one).max())
    # and the sum is what is noised: a different secret moves V by the noise's size
    assert np.abs(other - one).max() > 100 * np.abs(two - one).max()


# quarantined from `make test` (run by `make test-slow`): in 2 of 4 full runs on 2026-12-07 the
# interpreter segfaulted inside XLA's compile of the user solve in one of its threads (one
# thread at a time, so not a race between compiles); alone it passed 4 of 4. A crash in CI
# would block every change, so it runs with the slow tests until the cause is found
@pytest.mark.slow
def test_the_fold_in_choice_sums_every_process_users_before_its_noise(ratings, monkeypatch):
    """fold_in='private' (dpmt.train.fold_in_choice): each process sums its own users'
    recalls, the sums are added over the processes, one noise draw: the noisy sums and the
    choice of 2 processes are the one-process ones."""
    from dpmt.train import fold_in_choice as fc

    cfg = TrainConfig(fold_in="private", dim=8, iterations=2, data=dict(dataset="synthetic"),
                      privacy=dict(epsilon=2.0, noise_seed=0))
    ex = ExecutionConfig(progress=False, sharded_data=True)
    seen, real = [], fc.choose
    monkeypatch.setattr(fc, "choose", lambda s: seen.append(np.array(s)) or real(s))
    one = fit(ratings, cfg, execution=ex)
    procs = ThreadProcesses(2)
    monkeypatch.setattr(collectives, "process_sum", procs.sum)
    two = procs.run(lambda s: fit(s, cfg, execution=ex),
                    [(s,) for s in _shard_users(ratings, 2)])
    assert len(seen) == 3
    np.testing.assert_allclose(seen[1], seen[0], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(seen[2], seen[0], rtol=1e-4, atol=1e-3)
    for m in two:
        assert (m.config.fold_in_reg, m.config.fold_in_gravity) == \
            (one.config.fold_in_reg, one.config.fold_in_gravity)
        assert [r.name for r in m.ledger.releases] == [r.name for r in one.ledger.releases]
        assert m.ledger.releases[-1].name == "fold_in_choice"


@pytest.mark.parametrize("change,message", [
    (dict(task="rating", dataset="ml-100k"), "rating task"),
    (dict(init="spectral"), "init='spectral'"),
])
def test_sharded_data_refuses_what_it_does_not_sum_before_any_release(ratings, change,
                                                                      message):
    cfg = TrainConfig(**route({**dict(dataset="synthetic", dim=4, iterations=1, epsilon=2.0,
                                      noise_seed=0), **change}))
    data = ratings
    if cfg.task == "rating":      # explicit ratings in 1..5
        data = Ratings(user=ratings.user, item=ratings.item,
                       value=(1 + ratings.item % 5).astype(np.float32),
                       user_ids=ratings.user_ids, item_ids=ratings.item_ids, name="x",
                       items_public=True)
    with pytest.raises(ConfigError, match="sharded_data=True does not support.*" + message):
        fit(data, cfg, execution=ExecutionConfig(progress=False, sharded_data=True))


def test_sharded_data_refuses_a_private_item_selection_and_checkpoints(ratings, tmp_path):
    ex = ExecutionConfig(progress=False, sharded_data=True)
    cfg = TrainConfig(dim=4, iterations=1, data=dict(dataset="synthetic"),
                      privacy=dict(epsilon=2.0, noise_seed=0))
    no_catalogue = Ratings(user=ratings.user, item=ratings.item, value=ratings.value,
                           user_ids=ratings.user_ids, item_ids=ratings.item_ids,
                           name="x", items_public=False)
    with pytest.raises(ConfigError, match="public catalogue"):
        fit(no_catalogue, cfg, execution=ex)
    with pytest.raises(ConfigError, match="checkpoints"):
        fit(ratings, cfg, execution=ex, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


# -- the real thing: jax.distributed over loopback ------------------------------------------------
@pytest.mark.slow   # three processes (~40 s)
def test_two_processes_reading_their_own_shards_match_one_process(tmp_path):
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "scripts", "multihost.py")
    out = tmp_path / "res.json"
    p = subprocess.run([sys.executable, script, "launch", "--num-processes", "2",
                        "--shard-data", "--noise-seed", "0", "--solver", "gd",
                        "--out", str(tmp_path), "--json", str(out), "--timeout", "240"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
    res = json.loads(out.read_text())
    assert res["max_abs_diff_between_processes"] == 0.0
    assert res["max_abs_diff_vs_single_process"] <= 1e-5 * max(1.0, res["scale"])
    w = res["workers"]
    assert sum(x["ratings_read"] for x in w) == w[0]["ratings_read"] / w[0]["ratings_fraction"]
    for x in w:
        assert x["ratings_fraction"] <= 0.5 + 0.05 and x["users_fraction"] <= 0.5 + 0.05
        assert x["epsilon"] == res["single_process"]["epsilon"]
