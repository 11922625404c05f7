"""A killed training run resumes to the same model, charging nothing twice."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

# a narrow spread of user activity (sigma=0.3: 8 to 44 ratings a user): few layout buckets,
# so each run's compiles (most of its time) are fewer
DATASET = "synthetic:users=300,items=100,interactions=6000,seed=3,sigma=0.3"
ARGS = ["train", "--dataset", DATASET, "--dim", "4", "--iterations", "6", "--budget", "10",
        "--epsilon", "3", "--quiet", "--noise-seed", "0"]


def _dpmt(args, **kw):
    return subprocess.run([sys.executable, "-m", "dpmt.apps.cli", *args], capture_output=True,
                          text=True, timeout=600, **kw)


@pytest.mark.timeout(900)
def test_kill_mid_run_then_resume_matches_uninterrupted(tmp_path):
    ref = tmp_path / "ref"
    r = _dpmt([*ARGS, "--out", str(ref)])
    assert r.returncode == 0, r.stderr

    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "dpmt.apps.cli", *ARGS, "--out", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ckpt = run / "trainer" / "checkpoint.npz"
    deadline = time.time() + 500
    killed_at = None
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists():
            it = int(np.load(ckpt)["iteration"])
            if 1 <= it < 6:
                proc.send_signal(signal.SIGKILL)
                killed_at = it
                break
        time.sleep(0.05)
    proc.wait()
    if killed_at is None:
        pytest.skip("the run finished before it could be killed mid-way (machine too fast)")
    # a killed run leaves no complete-looking outputs and no partial files
    assert not (run / "trainer" / "metrics.json").exists()
    assert not (run / "model" / "item_embeddings.npz").exists()
    assert not [p for p in run.rglob("*") if ".tmp" in p.name]

    r = _dpmt(["train", "--resume", str(run), "--quiet"])
    assert r.returncode == 0, r.stderr
    a = np.load(ref / "model" / "item_embeddings.npz")["V"]
    b = np.load(run / "model" / "item_embeddings.npz")["V"]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    led_a = json.loads((ref / "model" / "ledger.json").read_text())
    led_b = json.loads((run / "model" / "ledger.json").read_text())
    assert [x["name"] for x in led_b["releases"]] == [x["name"] for x in led_a["releases"]]
    assert led_b["epsilon"] == pytest.approx(led_a["epsilon"])
    assert led_b["epsilon"] <= 3.0 * (1 + 1e-6)


def test_resume_without_run_dir_is_a_clear_error(tmp_path, capsys):
    from dpmt.apps.cli import main

    assert main(["train", "--resume", str(tmp_path / "nothing")]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_resume_with_the_cg_user_step_is_bit_identical(tmp_path):
    """user_solve="cg" warm-starts each user solve from the previous U; the checkpoint keeps
    that U (trainer state, never in the model), so a run stopped after any iteration and
    resumed gives exactly the uninterrupted model (before: the first iteration after a resume
    was solved exactly, and V differed)."""
    import dpmt
    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.data import make_synthetic

    quiet = ExecutionConfig(progress=False)
    r = make_synthetic(n_users=300, n_items=100, n_interactions=6000, user_activity_sigma=0.3,
                       seed=3)
    cfg = TrainConfig(dim=4, iterations=4, budget=10.0, user_solve="cg", cg_steps=2,
                      privacy=dict(epsilon=3.0, noise_seed=0))
    ref = dpmt.fit(r, cfg, execution=quiet, run_dir=tmp_path / "ref")

    class Crash(Exception):
        pass

    class StopAfter:
        def __init__(self, n):
            self.n = n

        def on_iteration(self, run):
            if run.state.iteration == self.n:
                raise Crash

    with pytest.raises(Crash):
        dpmt.fit(r, cfg, execution=quiet, run_dir=tmp_path / "cut", callbacks=(StopAfter(2),))
    ckpt = np.load(tmp_path / "cut" / "checkpoint.npz")
    assert int(ckpt["iteration"]) == 2 and ckpt["U"].shape == (r.n_users, 4)
    back = dpmt.fit(r, cfg, execution=quiet, run_dir=tmp_path / "cut", resume=True)
    np.testing.assert_array_equal(back.item_embeddings, ref.item_embeddings)
    assert back.epsilon == ref.epsilon
    # the model (what may be shared) holds no user embedding
    back.save(tmp_path / "model")
    with np.load(tmp_path / "model" / "item_embeddings.npz") as z:
        assert "U" not in z.files
