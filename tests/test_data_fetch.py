"""fetch / load: registry, atomic downloads, hash checks, the ML-100K PyPI fallback."""

from __future__ import annotations

import hashlib
import importlib
import io
import urllib.error
import zipfile

import numpy as np
import pytest

from dpmt.data import load
from dpmt.errors import ConfigError, DataError

# The package re-exports the function ``fetch``, which shadows the submodule attribute.
F = importlib.import_module("dpmt.data.fetch")

UDATA = b"196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n"
ITEM = (b"item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"
        b"242\tKolya\t1996\tComedy\n302\tL.A. Confidential\t1997\tCrime Film-Noir\n"
        b"377\tHeavyweights\t1994\tChildren's Comedy\n")


def leftovers(d):
    """Temporary files or folders left behind in a data dir."""
    return sorted(p.name for p in d.rglob("*") if p.name.startswith(".") or
                  p.name.endswith(".part"))


def make_zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def no_network(*a, **k):
    raise AssertionError("network used")


class FakeResponse(io.BytesIO):
    def __init__(self, data, length=None, fail_after=None):
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data) if length is None else length)}
        self.fail_after = fail_after

    def read(self, n=-1):
        if self.fail_after is not None and self.tell() >= self.fail_after:
            raise ConnectionResetError("connection reset by peer")
        return super().read(min(n, 1000) if n and n > 0 else n)


@pytest.fixture
def offline(monkeypatch):
    """GroupLens unreachable."""
    def refuse(url, timeout):
        raise urllib.error.URLError("Name or service not known")
    monkeypatch.setattr(F, "_open_url", refuse)
    monkeypatch.delenv("DPMT_OFFLINE", raising=False)


def fake_pip(monkeypatch, inter: bytes, calls=None):
    """Make `pip download` drop a fake recbole wheel holding ``inter``."""
    def pip(requirement, dest, timeout):
        if calls is not None:
            calls.append(requirement)
        wheel = make_zip({F._RECBOLE_DIR + "ml-100k.inter": inter,
                          F._RECBOLE_DIR + "ml-100k.item": ITEM})
        (F.Path(dest) / "recbole-1.2.1-py3-none-any.whl").write_bytes(wheel)
    monkeypatch.setattr(F, "_pip_download", pip)


# ---------------------------------------------------------------------------------------
# registry / names
# ---------------------------------------------------------------------------------------
def test_registry_contents():
    assert set(F.REGISTRY) == {"ml-100k", "ml-1m", "ml-10m", "ml-20m", "ml-25m",
                               "ml-latest-small"}
    assert F.REGISTRY["ml-10m"].url.endswith("/ml-10m.zip")
    assert F.REGISTRY["ml-10m"].archive_root == "ml-10M100K"
    for info in F.REGISTRY.values():
        assert info.url == f"https://files.grouplens.org/datasets/movielens/{info.name}.zip"
        assert info.sha256 is None or len(info.sha256) == 64


def test_unknown_dataset_lists_known_names(tmp_path):
    with pytest.raises(DataError, match="unknown dataset 'ml-5m'.*ml-100k, ml-1m"):
        F.fetch("ml-5m", tmp_path)
    with pytest.raises(DataError, match="not a known name .*ml-20m.*synthetic"):
        load("ml-5m", data_dir=tmp_path)


# ---------------------------------------------------------------------------------------
# ML-100K fallback (mocked network and pip)
# ---------------------------------------------------------------------------------------
def test_ml100k_fallback_writes_verified_udata(tmp_path, monkeypatch, offline):
    monkeypatch.setattr(F, "ML100K_UDATA_SHA256", hashlib.sha256(UDATA).hexdigest())
    calls = []
    fake_pip(monkeypatch, b"user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
             + UDATA, calls)
    path = F.fetch("ml-100k", tmp_path, progress=False)
    assert path == tmp_path / "ml-100k" / "u.data"
    assert path.read_bytes() == UDATA
    assert (tmp_path / "ml-100k" / "ml-100k.item").read_bytes() == ITEM
    assert calls == ["recbole==1.2.1"]
    assert leftovers(tmp_path) == []
    r = load("ml-100k", data_dir=tmp_path, progress=False)
    assert r.name == "ml-100k" and r.nnz == 3


def test_ml100k_fallback_rejects_corrupt_copy_and_leaves_nothing(tmp_path, monkeypatch,
                                                                  offline):
    monkeypatch.setattr(F, "ML100K_UDATA_SHA256", hashlib.sha256(UDATA).hexdigest())
    corrupt = UDATA.replace(b"881250949", b"881250948")
    fake_pip(monkeypatch, b"user_id:token\titem_id:token\n" + corrupt)
    with pytest.raises(DataError, match="expected .* refusing to use them"):
        F.fetch("ml-100k", tmp_path, progress=False)
    assert not (tmp_path / "ml-100k" / "u.data").exists()
    assert leftovers(tmp_path) == []


def test_ml100k_real_hash_rejects_fake_content(tmp_path, monkeypatch, offline):
    fake_pip(monkeypatch, b"header\n" + UDATA)                # the pinned GroupLens hash
    with pytest.raises(DataError, match=F.ML100K_UDATA_SHA256):
        F.fetch("ml-100k", tmp_path, progress=False)
    assert not (tmp_path / "ml-100k" / "u.data").exists()


def test_ml100k_both_sources_fail(tmp_path, monkeypatch, offline):
    def pip_fails(requirement, dest, timeout):
        raise F._NetworkError("pip: no route to host")
    monkeypatch.setattr(F, "_pip_download", pip_fails)
    with pytest.raises(DataError) as e:
        F.fetch("ml-100k", tmp_path, progress=False)
    msg = str(e.value)
    assert "GroupLens unreachable" in msg and "PyPI fallback failed" in msg
    assert str((tmp_path / "ml-100k.zip").resolve()) in msg


def test_offline_env_skips_grouplens(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMT_OFFLINE", "1")
    monkeypatch.setattr(F, "_open_url", no_network)
    monkeypatch.setattr(F, "ML100K_UDATA_SHA256", hashlib.sha256(UDATA).hexdigest())
    fake_pip(monkeypatch, b"h\n" + UDATA)
    assert F.fetch("ml-100k", tmp_path, progress=False).read_bytes() == UDATA


def test_present_udata_means_no_network(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    monkeypatch.setattr(F, "_pip_download", no_network)
    (tmp_path / "ml-100k").mkdir()
    (tmp_path / "ml-100k" / "u.data").write_bytes(UDATA)
    assert load("ml-100k", data_dir=tmp_path).nnz == 3


# ---------------------------------------------------------------------------------------
# present zips, hashes, trust on first use
# ---------------------------------------------------------------------------------------
def test_present_zip_with_pinned_hash_mismatch(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    (tmp_path / "ml-100k.zip").write_bytes(make_zip({"ml-100k/u.data": UDATA}))
    with pytest.raises(DataError, match="ml-100k.zip has SHA-256 .* delete it"):
        F.fetch("ml-100k", tmp_path, progress=False)
    assert not (tmp_path / "ml-100k").exists()


def test_present_zip_pinned_hash_ok_is_unpacked(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    z = make_zip({"ml-100k/u.data": UDATA, "ml-100k/u.item": b"x"})
    info = F.DatasetInfo("ml-100k", F.REGISTRY["ml-100k"].url, "ml-100k", "u.data", "tsv",
                         hashlib.sha256(z).hexdigest())
    monkeypatch.setitem(F.REGISTRY, "ml-100k", info)
    (tmp_path / "ml-100k.zip").write_bytes(z)
    path = F.fetch("ml-100k", tmp_path, progress=False)
    assert path.read_bytes() == UDATA and (tmp_path / "ml-100k" / "u.item").exists()
    assert leftovers(tmp_path) == []


def test_unknown_hash_trust_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    dat = b"1::10::4::100\n2::10::5::200\n"
    movies = b"10::Ten (1995)::Drama\n11::Eleven (1996)::Comedy|Drama\n"
    z = make_zip({"ml-10M100K/ratings.dat": dat, "ml-10M100K/movies.dat": movies})
    zpath = tmp_path / "ml-10m.zip"
    zpath.write_bytes(z)
    path = F.fetch("ml-10m", tmp_path, progress=False)
    assert path == tmp_path / "ml-10m" / "ratings.dat" and path.read_bytes() == dat
    side = tmp_path / "ml-10m.zip.sha256"
    assert side.read_text().split()[0] == hashlib.sha256(z).hexdigest()
    r = load("ml-10m", data_dir=tmp_path)
    assert r.name == "ml-10m" and r.nnz == 2
    assert r.items_public and r.item_ids.tolist() == [10, 11]      # movies.dat: public
    # a different zip later, with the unpacked folder gone: rejected against the sidecar
    import shutil
    shutil.rmtree(tmp_path / "ml-10m")
    zpath.write_bytes(make_zip({"ml-10M100K/ratings.dat": b"1::10::1::1\n"}))
    with pytest.raises(DataError, match="recorded .* when it was first downloaded"):
        F.fetch("ml-10m", tmp_path, progress=False)


def test_zip_without_ratings_file(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    (tmp_path / "ml-10m.zip").write_bytes(make_zip({"other/file.txt": b"x"}))
    with pytest.raises(DataError, match="does not contain ml-10M100K/ratings.dat"):
        F.fetch("ml-10m", tmp_path, progress=False)
    assert leftovers(tmp_path) == [] and not (tmp_path / "ml-10m").exists()


def test_not_a_zip(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    (tmp_path / "ml-10m.zip").write_bytes(b"<html>not found</html>")
    with pytest.raises(DataError, match="not a readable zip"):
        F.fetch("ml-10m", tmp_path, progress=False)


def test_extract_merges_into_existing_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    (tmp_path / "ml-10m").mkdir()
    (tmp_path / "ml-10m" / "notes.txt").write_text("mine")
    (tmp_path / "ml-10m.zip").write_bytes(make_zip({"ml-10M100K/ratings.dat": b"1::2::3::4\n"}))
    assert F.fetch("ml-10m", tmp_path, progress=False).exists()
    assert (tmp_path / "ml-10m" / "notes.txt").read_text() == "mine"


# ---------------------------------------------------------------------------------------
# downloads (mocked urlopen)
# ---------------------------------------------------------------------------------------
def test_download_unknown_hash_records_sidecar(tmp_path, monkeypatch):
    z = make_zip({"ml-10M100K/ratings.dat": b"1::2::3::4\n"})
    monkeypatch.setattr(F, "_open_url", lambda url, timeout: FakeResponse(z))
    path = F.fetch("ml-10m", tmp_path, progress=False)
    assert path.read_bytes() == b"1::2::3::4\n"
    assert (tmp_path / "ml-10m.zip").read_bytes() == z
    assert (tmp_path / "ml-10m.zip.sha256").read_text().startswith(hashlib.sha256(z).hexdigest())
    assert leftovers(tmp_path) == []


def test_download_with_wrong_hash_leaves_no_file(tmp_path, monkeypatch):
    z = make_zip({"ml-1m/ratings.dat": b"1::2::3::4\n"})
    monkeypatch.setattr(F, "_open_url", lambda url, timeout: FakeResponse(z))
    with pytest.raises(DataError, match="ml-1m.zip has SHA-256 .* corrupt or incomplete"):
        F.fetch("ml-1m", tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("resp", [
    lambda z: FakeResponse(z, fail_after=3000),               # connection reset mid-way
    lambda z: FakeResponse(z[:3000], length=len(z)),          # server closed early
])
def test_interrupted_download_leaves_no_file(tmp_path, monkeypatch, resp):
    z = make_zip({"ml-1m/ratings.dat": bytes(np.random.default_rng(0).integers(0, 255, 9000,
                                                                              np.uint8))})
    monkeypatch.setattr(F, "_open_url", lambda url, timeout: resp(z))
    with pytest.raises(DataError) as e:
        F.fetch("ml-1m", tmp_path, progress=False)
    msg = str(e.value)
    assert "https://files.grouplens.org/datasets/movielens/ml-1m.zip" in msg
    assert str((tmp_path / "ml-1m.zip").resolve()) in msg
    assert list(tmp_path.iterdir()) == []


def test_offline_other_dataset_says_where_to_put_zip(tmp_path, offline):
    with pytest.raises(DataError) as e:
        F.fetch("ml-20m", tmp_path, progress=False)
    msg = str(e.value)
    assert "https://files.grouplens.org/datasets/movielens/ml-20m.zip" in msg
    assert f"place it at {(tmp_path / 'ml-20m.zip').resolve()}" in msg


def test_load_without_fetch(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "_open_url", no_network)
    with pytest.raises(DataError, match="dpmt fetch ml-1m"):
        load("ml-1m", data_dir=tmp_path, fetch_if_missing=False)


# ---------------------------------------------------------------------------------------
# load(): paths and synthetic specs
# ---------------------------------------------------------------------------------------
def test_load_path_and_folder(tmp_path):
    d = tmp_path / "mydata"
    d.mkdir()
    (d / "u.data").write_bytes(UDATA)
    assert load(str(d / "u.data")).name == "mydata"
    assert load(d).nnz == 3
    (tmp_path / "x.inter").write_bytes(b"user_id:token\titem_id:token\n1\t2\n")
    r = load(tmp_path / "x.inter")
    assert r.name == "x" and r.nnz == 1
    assert load(tmp_path).name == "x"                         # folder with a .inter file
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no ratings file in folder"):
        load(tmp_path / "empty")


def test_load_passes_loader_options(tmp_path):
    (tmp_path / "u.data").write_bytes(UDATA + b"196\t242\t5\t999999999\n")
    with pytest.raises(DataError, match="duplicated"):
        load(tmp_path / "u.data")
    r = load(tmp_path / "u.data", on_duplicate="keep-last")
    assert r.nnz == 3 and r.value.max() == 5


def test_synthetic_spec():
    assert F.parse_synthetic_spec("synthetic:users=50,items=20,interactions=400,alpha=1.5,"
                                  "seed=3") == {"n_users": 50, "n_items": 20,
                                                "n_interactions": 400, "alpha": 1.5, "seed": 3}
    r = load("synthetic:users=50,items=20,interactions=400,seed=3")
    assert (r.n_users, r.n_items, r.nnz) == (50, 20, 400)
    assert r.name == "synthetic:users=50,items=20,interactions=400,seed=3"
    small = load("synthetic:like=ml-100k,scale=0.1")
    assert small.n_items == 1682 and small.n_users == 94
    with pytest.raises(ConfigError, match="unknown key 'colour'.*users, items"):
        load("synthetic:colour=3")
    with pytest.raises(ConfigError, match="users must be an integer"):
        F.parse_synthetic_spec("synthetic:users=1.5")
    with pytest.raises(ConfigError, match="expected key=value"):
        F.parse_synthetic_spec("synthetic:users")


def test_default_synthetic_loads():
    r = load("synthetic")
    assert r.nnz > 0 and r.name == "synthetic"


# ---------------------------------------------------------------------------------------
# the real PyPI fallback
# ---------------------------------------------------------------------------------------
@pytest.mark.network
def test_ml100k_from_pypi_for_real(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMT_OFFLINE", "1")                    # straight to the fallback
    path = F.fetch("ml-100k", tmp_path, progress=False)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == F.ML100K_UDATA_SHA256
    r = load("ml-100k", data_dir=tmp_path)
    assert (r.n_users, r.n_items, r.nnz) == (943, 1682, 100_000)
    assert r.value.min() == 1 and r.value.max() == 5
    from dpmt.data import load_item_genres
    g = load_item_genres(tmp_path / "ml-100k", r.item_ids)
    assert g.shape == (1682, 19) and g.sum(axis=1).min() >= 1
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------
# item features
# ---------------------------------------------------------------------------------------
def test_item_features_ml100k_fetches_metadata_only(tmp_path, monkeypatch, offline):
    monkeypatch.setattr(F, "ML100K_UDATA_SHA256", hashlib.sha256(UDATA).hexdigest())
    fake_pip(monkeypatch, b"h\n" + UDATA)
    (tmp_path / "ml-100k").mkdir()
    mine = UDATA + b"1\t242\t5\t1\n"                            # a local u.data: untouched
    (tmp_path / "ml-100k" / "u.data").write_bytes(mine)
    r = load("ml-100k", data_dir=tmp_path)
    g = F.item_features_for("ml-100k", r, data_dir=tmp_path)
    assert (tmp_path / "ml-100k" / "u.data").read_bytes() == mine
    assert g.shape == (3, 19) and g.dtype == np.float32
    # items 242 (Comedy), 302 (Crime, Film-Noir), 377 (Children's, Comedy)
    assert g.sum(axis=1).tolist() == [1, 2, 2]


def test_item_features_from_folder_and_unknown(tmp_path):
    (tmp_path / "u.data").write_bytes(UDATA)
    (tmp_path / "ml-100k.item").write_bytes(ITEM)
    r = load(tmp_path)
    assert F.item_features_for(tmp_path / "u.data", r).shape == (3, 19)
    with pytest.raises(DataError, match="no public item features for 'ml-20m'"):
        F.item_features_for("ml-20m", r, data_dir=tmp_path)


def test_item_features_synthetic_match_planted_topics():
    from dpmt.data import heldout_users_split, make_synthetic
    spec = "synthetic:users=300,items=80,interactions=6000,seed=4"
    r, t = make_synthetic(n_users=300, n_items=80, n_interactions=6000, seed=4,
                          return_truth=True)
    split = heldout_users_split(load(spec), 30, 30)             # compacted item ids
    f = F.item_features_for(spec, split.train)
    assert f.shape == (split.train.n_items, 16)
    np.testing.assert_allclose(f.sum(axis=1), 1, rtol=1e-5)
    ids = split.train.item_ids
    # φ̃ = φ / Z_c: rows are proportional, column by column, to the truth
    ratio = t.item_factors[ids] / np.maximum(f, 1e-12)
    big = f > 1e-3
    np.testing.assert_allclose(np.where(big, ratio, 0).max(axis=0),
                               np.where(big, ratio, np.inf).min(axis=0), rtol=1e-3)


def test_open_url_timeout_covers_hanging_lookup(monkeypatch):
    import threading
    release = threading.Event()

    def hang(url, timeout):
        release.wait(5)
        raise OSError("late")
    monkeypatch.setattr(F.urllib.request, "urlopen", hang)
    try:
        with pytest.raises(F._NetworkError, match="no answer from files.grouplens.org "
                                                  "within 0.2 s"):
            F._open_url(F.REGISTRY["ml-100k"].url, 0.2)
    finally:
        release.set()
