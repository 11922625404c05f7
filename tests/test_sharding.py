"""Multi-device item and user steps (dpmt.solvers.sharding): same seed, same model on 1, 2 and
4 devices. CPU devices come from XLA_FLAGS=--xla_force_host_platform_device_count=4, which
must be set before JAX starts, so the multi-device checks run in a subprocess."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dpmt.data import make_synthetic
from dpmt.errors import ConfigError
from dpmt.solvers import layout as L
from dpmt.solvers import sharding
from _devices import run_on_devices
from dpmt.config import NonPrivate


def test_pad_layout_keeps_every_entry_and_row():
    r = make_synthetic(n_users=120, n_items=60, n_interactions=1500, seed=2)
    for lay, row in ((L.task_layout(r, dim=4, max_chunk_bytes=3000), r.item),
                     (L.user_layout(r, dim=4, max_chunk_bytes=3000), r.user)):
        for k in (1, 3, 4):
            p = sharding.pad_layout(lay, k)
            assert all(b.chunk_rows % k == 0 for b in p.buckets)
            r0, c0, p0 = lay.triplets()
            r1, c1, p1 = p.triplets()
            o0, o1 = np.argsort(p0), np.argsort(p1)
            np.testing.assert_array_equal(p0[o0], p1[o1])
            np.testing.assert_array_equal(r0[o0], r1[o1])
            np.testing.assert_array_equal(c0[o0], c1[o1])
            # inverse: each non-empty row points at its own slot row
            flat = np.concatenate([np.asarray(b.rows).reshape(-1) for b in p.buckets])
            inv = np.asarray(p.inverse)
            nonempty = np.bincount(row, minlength=lay.n_rows) > 0
            np.testing.assert_array_equal(flat[inv[nonempty]], np.flatnonzero(nonempty))
            assert np.all(inv[~nonempty] == p.total_rows)


def test_mesh_and_layout_checks():
    with pytest.raises(ConfigError, match="device_count"):
        sharding.make_mesh(10_000)
    mesh = sharding.make_mesh(1)
    r = make_synthetic(n_users=50, n_items=20, n_interactions=300, seed=0)
    with pytest.raises(ConfigError, match="ShardedLayout"):
        sharding.sharded_solve_users(mesh, L.user_layout(r, dim=2), np.zeros((20, 2)))
    su = sharding.shard_layout(L.user_layout(r, dim=2), mesh)
    with pytest.raises(ConfigError, match="one row per item"):
        sharding.sharded_ssp_item_step(mesh, su, np.zeros((50, 2)), None, None, None,
                                       0.0, 0.0, 1.0)


SCRIPT = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from dpmt.data import make_synthetic
    from dpmt.data.ratings import Ratings
    from dpmt.solvers import layout as L, sharding as S
    from dpmt.solvers.ssp import noisy_gramian, ssp_item_step
    from dpmt.solvers.user_step import solve_users

    assert len(jax.devices()) == 4, jax.devices()
    # 40 items nobody rated (they still get a noisy solve), several chunks per bucket
    r = make_synthetic(n_users=300, n_items=160, n_interactions=5000, seed=3)
    keep = r.item < 120
    r = Ratings(r.user[keep], r.item[keep], r.value[keep], r.user_ids, r.item_ids)
    d = 6
    # growth 4: few buckets (each bucket is one more kernel instance to compile per mesh)
    TL = L.task_layout(r, dim=d, max_chunk_bytes=20_000, growth=4.0)
    UL = L.user_layout(r, dim=d, max_chunk_bytes=20_000, growth=4.0)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.2, 1.0, r.nnz).astype(np.float32)
    y = rng.uniform(0.5, 1.5, r.nnz).astype(np.float32)

    def run(steps):
        V = 0.3 * jax.random.normal(jax.random.PRNGKey(0), (r.n_items, d))
        k = jax.random.PRNGKey(7)
        for t in range(2):                     # two alternating-minimisation iterations
            kg, ki = jax.random.split(jax.random.fold_in(k, t))
            U = steps["users"](V)
            extra = 0.1 * noisy_gramian(U, kg, 0.3)
            V = steps["items"](U, ki, extra)
        return np.asarray(U), np.asarray(V)

    out = {}
    ref = run({"users": lambda V: solve_users(UL, V, y, reg=1.0, alpha0=0.1, clip_norm=1.0),
               "items": lambda U, k, e: ssp_item_step(TL, U, w, y, k, 0.5, 0.4, 1.0,
                                                      extra=e)})
    for D in (1, 2, 4):
        mesh = S.make_mesh(D)
        st, su = S.shard_layout(TL, mesh), S.shard_layout(UL, mesh)
        got = run({"users": lambda V: S.sharded_solve_users(mesh, su, V, y, reg=1.0,
                                                           alpha0=0.1, clip_norm=1.0),
                   "items": lambda U, k, e: S.sharded_ssp_item_step(
                       mesh, st, U, w, y, k, 0.5, 0.4, 1.0, extra=e)})
        V_sh = S.sharded_ssp_item_step(mesh, st, ref[0], w, y, jax.random.PRNGKey(1), 0.5,
                                       0.4, 1.0, extra=jnp.eye(d))
        out[D] = {"U": float(np.abs(got[0] - ref[0]).max()),
                  "V": float(np.abs(got[1] - ref[1]).max()),
                  "V_scale": float(np.abs(ref[1]).max()),
                  "replicated": bool(V_sh.sharding.is_fully_replicated
                                     and len(V_sh.sharding.device_set) == D),
                  "empty_items_nonzero": bool(np.all(np.abs(got[1][120:]).sum(1) > 0))}
    print("RESULT" + json.dumps(out))
""")


@pytest.mark.slow   # ~33 s; the default suite checks the fitted model on 1 vs 4 devices below
def test_sharded_user_and_ssp_item_steps_match_one_device_on_1_2_4_devices():
    res = run_on_devices(SCRIPT, 4)
    assert res[1]["U"] == 0.0 and res[1]["V"] == 0.0      # one device: the same program
    for D in (2, 4):
        assert res[D]["U"] <= 1e-5, res
        assert res[D]["V"] <= 1e-4 * max(1.0, res[D]["V_scale"]), res
    assert all(v["replicated"] and v["empty_items_nonzero"] for v in res.values())


@pytest.mark.slow   # `make test-slow` runs it with the multi-process `fit` test below
def test_two_processes_share_process_zeros_secret(tmp_path):
    """scripts/multihost.py without a noise seed: each process would draw its own OS-entropy
    secret; the run uses process 0's (broadcast), so both processes hold the same V — with
    per-process secrets JAX refuses the 'replicated' V, or the models differ."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "scripts", "multihost.py")
    p = subprocess.run([sys.executable, script, "launch", "--num-processes", "2",
                        "--out", str(tmp_path), "--iterations", "1", "--users", "300",
                        "--items", "100", "--interactions", "5000", "--timeout", "240"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
    res = json.loads([x for x in p.stdout.splitlines() if x.startswith("RESULT ")][-1][7:])
    assert [w["global_devices"] for w in res["workers"]] == [2, 2]
    assert sorted(w["process"] for w in res["workers"]) == [0, 1]
    assert res["max_abs_diff_between_processes"] == 0.0
    assert "max_abs_diff_vs_single_process" not in res   # unseeded: no reference to match


FIT_SCRIPT = textwrap.dedent("""
    import json, pathlib, tempfile
    import jax, numpy as np
    from dpmt.config import ExecutionConfig, GDConfig, TrainConfig, route
    from dpmt.data import make_synthetic, per_user_split
    from dpmt.solvers.layout import trace_count
    from dpmt.train.loop import fit
    from dpmt.train.methods import make_steps

    assert len(jax.devices()) == 4, jax.devices()

    def runs_segmented(train, cfg, D):
        steps = make_steps(cfg, train, np.ones(train.nnz, np.float32), devices=D)
        return getattr(steps.items, "layout", steps.items).segments is not None
    # a narrow spread of user activity: fewer layout buckets, so fewer kernels to compile
    r = make_synthetic(n_users=400, n_items=150, n_interactions=6000, user_activity_sigma=0.3,
                       seed=5)
    split = per_user_split(r, seed=0)
    feats = np.random.default_rng(0).normal(size=(r.n_items, 5)).astype(np.float32)
    out, resumed = {}, {}
    variants = {"ssp": dict(solver="ssp"), "gd": dict(solver="gd"),
                # warm-started CG item and user solves (the starting points replicated)
                "ssp-cg": dict(solver="ssp", item_solve="cg", user_solve="cg"),
                # the generic (vmap-grad, users-sharded) path and the Poisson-sampled variant
                # (learning rate 0.1: at 1.0 the second iteration amplified the first one's
                # float32 reduction-order difference, 4e-6 on every device count, to 0.05 on
                # 4 devices on an AVX-512 machine, by 1e4; at 0.1 all agree to 2e-6)
                "gd-mlp": dict(solver="gd",
                               gd=GDConfig(encoder="mlp", mlp_hidden=8, learning_rate=0.1)),
                "gd-poisson": dict(solver="gd", gd=GDConfig(sampling_rate=0.5))}
    for solver, kw in variants.items():
        if solver not in WANTED:
            continue
        # one noise seed: the same draws on every device count
        base = TrainConfig(**route(dict(dataset="synthetic", dim=6, iterations=2, epsilon=3.0,
                                        seed=11, noise_seed=11, **kw)))
        runs, traces = {}, {}
        for D in DEVICES:
            before = trace_count()
            runs[D] = fit(split.train, base, test=split.test, item_features=feats,
                          execution=ExecutionConfig(devices=D, progress=False))
            traces[D] = {k: v - before.get(k, 0) for k, v in trace_count().items()}
        if solver in RESUME:
            # stopped after iteration 1 of 2 on the largest mesh and resumed: the same
            # program as the runs above, so nothing compiles again
            D, tmp = max(DEVICES), pathlib.Path(tempfile.mkdtemp())
            ex = ExecutionConfig(devices=D, progress=False)
            kw = dict(test=split.test, item_features=feats, execution=ex)
            ref = fit(split.train, base, run_dir=tmp / "ref", **kw)

            class Crash(Exception):
                pass

            class StopAfter:
                def on_iteration(self, run):
                    if run.state.iteration == 1:
                        raise Crash

            try:
                fit(split.train, base, run_dir=tmp / "cut", callbacks=(StopAfter(),), **kw)
            except Crash:
                pass
            stopped = int(np.load(tmp / "cut" / "checkpoint.npz")["iteration"])
            back = fit(split.train, base, run_dir=tmp / "cut", resume=True, **kw)
            resumed[solver] = {
                "devices": D, "stopped_at": stopped,
                "equal": bool(np.array_equal(back.item_embeddings, ref.item_embeddings)),
                "eps": [back.epsilon, ref.epsilon]}
        V1 = runs[1].item_embeddings
        out[solver] = {str(D): {
            "dV": float(np.abs(res.item_embeddings - V1).max()),
            "scale": float(np.abs(V1).max()),
            "eps": res.epsilon, "eps1": runs[1].epsilon,
            "recall": res.metrics["overall"]["recall@20"],
            "recall1": runs[1].metrics["overall"]["recall@20"],
            "sharded_fast_gd": traces[D].get("sharded_fast_noisy_gradient", 0),
            "segmented": runs_segmented(split.train, base, D)} for D, res in runs.items()}
    print("RESULT" + json.dumps({"fits": out, "resumed": resumed}))
""")


ALL_VARIANTS = ("ssp", "ssp-cg", "gd", "gd-mlp", "gd-poisson")


DEFAULT_VARIANTS, DEFAULT_DEVICES = ("ssp", "ssp-cg", "gd"), (1, 4)
#: resumed on the largest mesh in the same process as the fits (test_resume_on_a_mesh_...)
RESUMED = ("gd", "ssp")


def _fits_on_devices(variants, devices, resume=()) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    # devices come from request_devices (jax_num_cpu_devices), as under `dpmt train --devices`
    code = ("from dpmt.solvers.sharding import request_devices; request_devices(4)\n"
            f"WANTED, DEVICES, RESUME = {variants!r}, {devices!r}, {resume!r}\n" + FIT_SCRIPT)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


@pytest.fixture(scope="module")
def default_fits():
    """One process for the default suite's fits and resumes: compiling the steps for each
    mesh is most of its time, and the resumed runs are the same programs."""
    return _fits_on_devices(DEFAULT_VARIANTS, DEFAULT_DEVICES, RESUMED)


@pytest.mark.parametrize("variants, devices", [
    # default suite: SSP (Cholesky and CG solves) and GD's embedding path (the cross-device
    # norm all-reduce), 1 vs 4
    (DEFAULT_VARIANTS, DEFAULT_DEVICES),
    # make test-slow: every path on 1, 2 and 4 devices
    pytest.param(ALL_VARIANTS, (1, 2, 4), marks=pytest.mark.slow)])
def test_fit_gives_the_same_model_on_1_2_4_devices(variants, devices, request):
    """fit(..., execution=ExecutionConfig(devices=N)) / `--devices N`: the user step and the
    item step (SSP; noisy GD by items, or by users with the MLP encoder; full batch and
    Poisson-sampled) sharded; same seed → same released V and same ε on 1, 2, 4 devices."""
    if (variants, devices) == (DEFAULT_VARIANTS, DEFAULT_DEVICES):
        res = request.getfixturevalue("default_fits")["fits"]
    else:
        res = _fits_on_devices(variants, devices)["fits"]
    assert set(res) == set(variants)
    for solver in res:
        assert sorted(int(D) for D in res[solver]) == sorted(devices)
        for D, v in res[solver].items():
            assert v["dV"] <= 1e-4 * max(1.0, v["scale"]), (solver, D, v)
            assert v["eps"] == v["eps1"] and v["eps"] <= 3.0 + 1e-3
            assert abs(v["recall"] - v["recall1"]) <= 1e-3, (solver, D, v)
            if solver in ("gd", "gd-poisson") and D != "1":
                # the embedding table on a mesh: each device's pre-gathered blocks
                # (dpmt.solvers.gd_blocks.sharded_fast_clipped_sum), long items in segments
                assert v["sharded_fast_gd"] >= 1, (solver, D, v)
                assert v["segmented"] == res[solver]["1"]["segmented"], (solver, D, v)
            if solver.startswith("ssp") and D != "1":
                assert not v["segmented"], (solver, D, v)    # the sharded SSP reads buckets
        assert res[solver]["1"]["scale"] > 0


def test_resume_on_a_mesh_is_bit_identical(default_fits):
    """The CG user step's warm start (the checkpoint's U) also on a mesh: a sharded run
    stopped after iteration 1 and resumed gives exactly the uninterrupted model (noisy GD on
    the pre-gathered blocks, and SSP) — `dpmt train` runs on every core by default. (Run on
    4 devices in the process of the 1-vs-4-device fits, whose kernels it reuses; it was a
    process of its own on 2 devices, ~35 s.)"""
    res = default_fits["resumed"]
    assert set(res) == set(RESUMED)
    for solver, v in res.items():
        assert v["devices"] == 4 and v["stopped_at"] == 1, (solver, v)
        assert v["equal"], (solver, v)
        assert v["eps"][0] == v["eps"][1]


def test_devices_beyond_what_jax_sees_is_a_clear_error():
    import jax

    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.train.loop import fit

    jax.devices()   # the backend has started: no more CPU devices can be created for fit
    r = make_synthetic(n_users=50, n_items=20, n_interactions=300, seed=0)
    with pytest.raises(ConfigError, match="devices"):
        fit(r, TrainConfig(dim=2, data=dict(dataset="synthetic"), privacy=NonPrivate()),
            execution=ExecutionConfig(devices=64, progress=False))
    with pytest.raises(ConfigError, match="devices"):
        ExecutionConfig(devices=0)
    # devices is how a run executes, not part of the model's config
    with pytest.raises(TypeError, match="devices"):
        TrainConfig(devices=2)


_DEVICES_DATA = "synthetic:users=200,items=60,interactions=3000,seed=4"


def _cli_env():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    return env


# two training runs, one in a new process (~20 s): slow; the refusal below and the 1/2/4-device
# fits above stay in the default suite
@pytest.mark.slow
def test_cli_train_devices_flag(tmp_path):
    """`dpmt train --devices 2` creates the CPU devices itself (no XLA_FLAGS) and gives the
    one-device run's embeddings; the setting reaches the steps but not config.json, which
    holds the model's config only (the same file for 1 and 2 devices)."""
    env = _cli_env()
    from tests._cli import cli

    data = _DEVICES_DATA
    outs, configs = {}, {}
    for D in (1, 2):
        out = tmp_path / f"d{D}"
        argv = ["train", "--dataset", data, "--dim", "4", "--iterations", "1", "--epsilon",
                "2", "--devices", str(D), "--out", str(out), "--quiet", "--noise-seed", "0"]
        if D == 1:      # one device needs no new process (the 2-device run must start one)
            assert cli(argv) == 0
        else:
            p = subprocess.run([sys.executable, "-m", "dpmt", *argv], env=env,
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stderr[-3000:]
        configs[D] = json.loads((out / "trainer" / "config.json").read_text())
        assert "devices" not in configs[D]
        outs[D] = np.load(out / "model" / "item_embeddings.npz")["V"]
    assert configs[2] == configs[1]
    np.testing.assert_allclose(outs[2], outs[1], rtol=0, atol=1e-5 * np.abs(outs[1]).max())


def test_cli_train_refuses_more_devices_than_can_exist(tmp_path):
    """beyond the CPU devices JAX can create (64): the steps refuse, nothing is trained"""
    env, data = _cli_env(), _DEVICES_DATA
    out = tmp_path / "d65"
    p = subprocess.run([sys.executable, "-m", "dpmt", "train", "--dataset", data,
                        "--dim", "4", "--iterations", "1", "--epsilon", "2",
                        "--devices", "65", "--out", str(out), "--quiet"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "65 devices" in p.stderr, p.stderr[-3000:]
    assert not (out / "model" / "item_embeddings.npz").exists()


@pytest.mark.slow   # three processes (~40 s); the 1/2/4-device tests above stay in the default suite
def test_fit_across_two_processes_matches_one_process(tmp_path):
    """`scripts/multihost.py launch --noise-seed 0`: fit itself under jax.distributed,
    ExecutionConfig(devices=2) spanning both processes (noisy GD: the per-user norms are
    all-reduced across the processes), same V, ε and Recall@20 as one process."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "scripts", "multihost.py")
    p = subprocess.run([sys.executable, script, "launch", "--num-processes", "2",
                        "--noise-seed", "0", "--solver", "gd", "--out", str(tmp_path), "--iterations", "2",
                        "--users", "300", "--items", "100", "--interactions", "5000",
                        "--timeout", "240"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
    res = json.loads([x for x in p.stdout.splitlines() if x.startswith("RESULT ")][-1][7:])
    assert [w["global_devices"] for w in res["workers"]] == [2, 2]
    assert res["max_abs_diff_between_processes"] == 0.0
    assert res["max_abs_diff_vs_single_process"] <= 1e-5 * max(1.0, res["scale"])
    for w in res["workers"]:
        assert w["epsilon"] == res["single_process"]["epsilon"] <= 2.0 + 1e-3
        assert abs(w["recall@20"] - res["single_process"]["recall@20"]) <= 1e-6


SHARDED_GD_SCRIPT = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from dpmt.data.ratings import Ratings
    from dpmt.solvers import gd_blocks
    from dpmt.solvers.layout import task_layout
    from dpmt.solvers.sharding import make_mesh, replicate, shard_layout

    rng = np.random.default_rng(0)
    n, m, d = 40, 12, 3
    pop = 1.0 / np.arange(1, m + 1) ** 1.5              # a few long items, a short tail
    key = np.unique(rng.integers(0, n, 300) * m + rng.choice(m, 300, p=pop / pop.sum()))
    R = Ratings(key // m, key % m, rng.normal(size=len(key)), np.arange(n), np.arange(m))
    # long items cut into segments of 6 slots, so that a long row's segments land on
    # different devices
    TL = task_layout(R, dim=d, segment_width=6, segment_min_saving=0.0, growth=16.0)
    assert TL.segments is not None
    X = rng.normal(size=(n, d)).astype(np.float32)
    W = rng.uniform(0.2, 1.0, R.nnz).astype(np.float32)
    Y = R.value.astype(np.float32)
    V = rng.normal(size=(m, d)).astype(np.float32)
    G = 1.5
    data1 = gd_blocks.prepare_steps(TL, None, jnp.asarray(X), jnp.asarray(W), jnp.asarray(Y))
    one = jax.jit(lambda mask: gd_blocks.fast_clipped_sum(jnp.asarray(V), TL, None,
                                                          jnp.asarray(X), data1,
                                                          jnp.float32(G), mask))
    out = {}
    for D in (1, 2, 4):
        mesh = make_mesh(D)
        sl = shard_layout(TL, mesh)
        Xr, Wr, Yr, Vr = (replicate(a, mesh) for a in (X, W, Y, V))
        data = gd_blocks.prepare_sharded_steps(mesh, sl, Xr, Wr, Yr, reuse=True)
        gd_blocks.keep_scratch(sl.layout, data)
        data = gd_blocks.prepare_sharded_steps(mesh, sl, Xr, Wr, Yr, reuse=True)  # over it
        f = jax.jit(lambda mask: gd_blocks.sharded_fast_clipped_sum(
            mesh, sl, Vr, Xr, data, jnp.float32(G), mask))
        ones = jnp.ones((n,), jnp.float32)
        rows, norms = f(ones)
        ref_rows, ref_norms = one(ones)
        # each user alone: the clipped sum is that user's whole clipped gradient, of norm
        # min(G, ||g_j||) (a per-device or per-segment clip would differ)
        alone = []
        for j in range(n):
            mask = np.zeros(n, np.float32); mask[j] = 1.0
            r, _ = f(jnp.asarray(mask))
            alone.append(float(np.linalg.norm(np.asarray(r, np.float64))))
        out[D] = {"rows": float(np.abs(np.asarray(rows) - np.asarray(ref_rows)).max()),
                  "norms": float(np.abs(np.asarray(norms) - np.asarray(ref_norms)).max()),
                  "scale": float(np.abs(np.asarray(ref_rows)).max()),
                  "alone": alone, "want": [min(G, float(x)) for x in np.asarray(ref_norms)],
                  "clipped": int(np.sum(np.asarray(ref_norms) > G)),
                  "segments_sharded": len(sl.layout.segments.bucket.cols.sharding.device_set)}
    print("RESULT" + json.dumps(out))
""")


def test_sharded_noisy_gd_blocks_match_one_device_and_clip_whole_users():
    """Noisy GD's pre-gathered blocks on a mesh of 1, 2, 4 devices, long items in segments
    spread over the devices: the same clipped sum and per-user norms as one device, and each
    user's contribution is their whole gradient clipped to G (the per-user squared norms are
    summed over the devices before the clip)."""
    res = run_on_devices(SHARDED_GD_SCRIPT, 4)
    for D, v in res.items():
        assert v["rows"] <= 1e-5 * max(1.0, v["scale"]), (D, v["rows"])
        assert v["norms"] <= 1e-5, (D, v["norms"])
        assert v["clipped"] >= 3 and v["segments_sharded"] == D
        np.testing.assert_allclose(v["alone"], v["want"], rtol=1e-4, atol=1e-6)
        assert max(v["alone"]) <= 1.5 * (1 + 1e-5)
