"""The attacker reads every file dpmt writes (issue 24): each attack of the review, as a test.

1. a public noise seed regenerates the noise; two runs sharing noise are de-noised by a
   linear combination;
5. the shareable model folder holds private state (checkpoint, data fingerprint, exact
   metrics);
8. a model's files mixed from two models (the ledger swapped) load without complaint; a
   non-private model reports ε = 0.

Floating-point structure (2) is tested in test_discrete_gaussian.py, the item universe (3) in
test_item_universe.py, the stream (4) and the splits (6) in test_neighbour_stable.py, the
audits (7) in test_audit.py.
"""

import json
import math
import shutil

import numpy as np
import pytest

import dpmt
from dpmt.data import load, per_user_split
from dpmt.errors import DataError
from dpmt.privacy import private_counts
from dpmt.privacy.randomness import SEEDED_WARNING, NoiseSource
from dpmt.train.rundir import run
from dpmt.config import route

DATA = "synthetic:users=400,items=60,interactions=6000,seed=5"


def _cfg(**kw):
    base = dict(dataset=DATA, dim=4, iterations=2, epsilon=2.0, heldout_users=40,
                weights="adaptive", solver="ssp")
    base.update(kw)
    return dpmt.TrainConfig(**route(base))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    run(_cfg(), out, execution=dpmt.ExecutionConfig(progress=False))
    return out


def _all_bytes(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_model_folder_holds_only_releases_and_public_metadata(run_dir):
    files = _all_bytes(run_dir / "model")
    assert set(files) == {"model.json", "item_embeddings.npz", "ledger.json"}
    private = _all_bytes(run_dir / "trainer")
    assert {"checkpoint.npz", "config.json", "metrics.json", "PRIVATE.txt"} <= set(private)
    with np.load(run_dir / "trainer" / "checkpoint.npz") as z:
        secret = json.loads(str(z["noise"]))["secret_hex"]
        data_fp = str(z["data_fingerprint"])
    for name, blob in files.items():
        text = blob.decode("latin-1")
        assert secret not in text and secret.upper() not in text, name
        assert bytes.fromhex(secret) not in blob, name
        assert data_fp not in text, name
    meta = json.loads(files["model.json"])
    assert meta["config"]["privacy"]["noise_seed"] is None
    assert meta["noise"]["source"] == "secret key from OS entropy"
    assert "metrics" not in meta
    # the model is usable from the shared folder alone
    m = dpmt.Model.load(run_dir / "model")
    assert m.metrics is None and m.private and math.isfinite(m.epsilon)
    ids, _ = m.recommend([int(m.item_ids[0])], k=3)
    assert len(ids) == 3
    # ... and from the run directory, where the trainer's metrics come along
    assert dpmt.Model.load(run_dir).metrics is not None


def test_two_default_runs_share_no_noise():
    """Without a seed two runs on the same data draw independent noise: the review's
    de-noising h = (σ₁n̂₂ − σ₂n̂₁)/(σ₁ − σ₂) of two count releases recovers nothing."""
    r = load(DATA)
    h = np.bincount(r.item, minlength=r.n_items)
    k = int(r.user_counts().max())            # no user capped: the histogram is exact counts
    s1, s2 = 3.0, 9.0
    n1 = private_counts(r.user, r.item, r.n_items, k=k, noise_std=s1,
                        cap_rng=NoiseSource.fresh().numpy_rng("cap"),
                        noise_rng=NoiseSource.fresh().random("noise"))[0]
    n2 = private_counts(r.user, r.item, r.n_items, k=k, noise_std=s2,
                        cap_rng=NoiseSource.fresh().numpy_rng("cap"),
                        noise_rng=NoiseSource.fresh().random("noise"))[0]
    est = (s1 * np.asarray(n2, float) - s2 * np.asarray(n1, float)) / (s1 - s2)
    exact = np.mean(np.rint(est) == h)
    # the estimate's noise has std ≈ √(s1² s2² (1+1))/(s2−s1) ≈ 6.4: P(exact) ≈ 0.06
    assert exact < 0.2, exact
    # the attack is real: with *shared* continuous normals it recovers every count
    z = np.random.default_rng(0).standard_normal(r.n_items)
    shared = (s1 * (h + s2 * z) - s2 * (h + s1 * z)) / (s1 - s2)
    assert np.mean(np.rint(shared) == h) == 1.0


def test_seeded_noise_is_reproducible_and_says_it_is_not_private(tmp_path):
    train = per_user_split(load(DATA), seed=0).train
    a = dpmt.fit(train, _cfg(noise_seed=7))
    b = dpmt.fit(train, _cfg(noise_seed=7))
    c = dpmt.fit(train, _cfg())
    d = dpmt.fit(train, _cfg())
    np.testing.assert_array_equal(a.item_embeddings, b.item_embeddings)
    np.testing.assert_array_equal(a.item_counts, b.item_counts)
    assert not np.array_equal(c.item_counts, d.item_counts)
    assert SEEDED_WARNING in a.report() and SEEDED_WARNING not in c.report()
    a.save(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "model.json").read_text())
    assert meta["noise"]["source"] == "user-given seed"
    # the seed's value is not published
    assert meta["config"]["privacy"]["noise_seed"] is None
    assert "7" not in json.dumps(meta["noise"])
    assert dpmt.Model.load(tmp_path / "a").noise_reproducible


def test_mixed_model_files_are_refused(tmp_path):
    train = per_user_split(load(DATA), seed=0).train
    low = dpmt.fit(train, _cfg(epsilon=1.0))
    high = dpmt.fit(train, _cfg(epsilon=20.0))
    low.save(tmp_path / "low")
    high.save(tmp_path / "high")
    mixed = tmp_path / "mixed"
    shutil.copytree(tmp_path / "high", mixed)
    shutil.copy(tmp_path / "low" / "ledger.json", mixed / "ledger.json")
    with pytest.raises(DataError, match="fingerprint"):
        dpmt.Model.load(mixed)
    # editing the stated ε in model.json is refused too
    meta = json.loads((tmp_path / "high" / "model.json").read_text())
    meta["epsilon"] = 1.0
    (mixed / "model.json").write_text(json.dumps(meta))
    shutil.copy(tmp_path / "high" / "ledger.json", mixed / "ledger.json")
    with pytest.raises(DataError, match="fingerprint"):
        dpmt.Model.load(mixed)
    assert dpmt.Model.load(tmp_path / "low").epsilon <= 1.0 + 1e-9


def test_non_private_model_has_infinite_epsilon(tmp_path):
    train = per_user_split(load(DATA), seed=0).train
    m = dpmt.fit(train, _cfg(private=False))
    assert m.epsilon == math.inf
    m.save(tmp_path / "np")
    back = dpmt.Model.load(tmp_path / "np")
    assert back.epsilon == math.inf and not back.private
    assert json.loads((tmp_path / "np" / "model.json").read_text())["epsilon"] == "inf"
    assert "ε = ∞" in back.report()


def test_model_files_must_be_regular(tmp_path):
    import os

    train = per_user_split(load(DATA), seed=0).train
    dpmt.fit(train, _cfg()).save(tmp_path / "m")
    (tmp_path / "m" / "ledger.json").unlink()
    os.mkfifo(tmp_path / "m" / "ledger.json")           # would hang a plain read
    with pytest.raises(DataError, match="not a regular file"):
        dpmt.Model.load(tmp_path / "m")
