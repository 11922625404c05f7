"""The TFDS adapter against the real tensorflow-datasets, without TensorFlow.

tensorflow-datasets is in the ``test`` extra. TensorFlow is not: TFDS reads (and writes)
ArrayRecord without it, so these tests build small ``movielens/*-ratings`` datasets in
ArrayRecord with the real movielens builder (features, config, version) fed tiny rows
instead of the GroupLens download, and read them through ``tfds.data_source``:
``from_tfds``, ``dpmt.data.load("tfds:...")`` and ``dpmt train --dataset tfds:...``.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets")
movielens = pytest.importorskip("tensorflow_datasets.structured.movielens")
pytest.importorskip("array_record")     # a dependency of tensorflow-datasets on Linux

from dpmt.apps.cli import main as cli  # noqa: E402
from dpmt.data import load  # noqa: E402
from dpmt.data import tfds as adapter  # noqa: E402
from dpmt.data.loaders import from_tfds  # noqa: E402
from dpmt.errors import DataError  # noqa: E402

NAME = "movielens/100k-ratings"


@pytest.fixture(autouse=True)
def _no_tensorflow(monkeypatch):
    """Every test runs as on a machine without TensorFlow (the tests that need the
    tfds.load fallback say so)."""
    monkeypatch.setattr(adapter, "has_tensorflow", lambda: False)
    tfds.disable_progress_bar()


def triples(r):
    """Sorted (raw user, raw item, value, timestamp) rows of a Ratings."""
    ts = r.timestamp if r.timestamp is not None else np.zeros(r.nnz, np.int64)
    return sorted(zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist(),
                      r.value.tolist(), ts.tolist()))


# ---------------------------------------------------------------------------------------
# tiny ArrayRecord datasets written by the real movielens builder
# ---------------------------------------------------------------------------------------
def _filler(feature):
    """A value for a feature the adapter ignores (genres, ages, zip codes...)."""
    if isinstance(feature, tfds.features.Sequence):
        return [0]
    if isinstance(feature, tfds.features.ClassLabel):
        return 0
    dtype = np.dtype(feature.np_dtype) if not feature.np_dtype == np.object_ else None
    if dtype is None or dtype.kind in "OSU":
        return "x"
    return dtype.type(1)


def build(data_dir, rows, config="100k-ratings", file_format="array_record"):
    """Prepare ``movielens/<config>`` in ``data_dir`` from rows (user_id, movie_id,
    user_rating, timestamp), every other feature filled in. No network, no TensorFlow."""

    class TinyMovielens(movielens.Movielens, skip_registration=True):
        name = "movielens"

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self, dir_path=None):
            feats = self.info.features
            for i, (u, m, r, t) in enumerate(rows):
                ex = {k: _filler(f) for k, f in feats.items()}
                ex.update(user_id=u, movie_id=m, user_rating=r, timestamp=t)
                yield i, ex

    b = TinyMovielens(config=config, data_dir=str(data_dir), file_format=file_format)
    b.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return b


def grid(n_users=30, n_items=20, per_user=12, seed=0):
    """MovieLens-like rows: numeric string ids, whole-star ratings, distinct pairs."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(1, n_users + 1):
        for m in rng.choice(np.arange(1, n_items + 1), per_user, replace=False):
            rows.append((str(u), str(100 + m), float(rng.integers(3, 6)),
                         880_000_000 + int(rng.integers(0, 10_000_000))))
    return rows


@pytest.fixture(scope="module")
def ml(tmp_path_factory):
    """A prepared movielens/100k-ratings (ArrayRecord) and its rows."""
    d = tmp_path_factory.mktemp("tfds")
    rows = grid()
    build(d, rows)
    return d, rows


def expected(rows):
    return sorted((int(u), int(m), float(r), t) for u, m, r, t in rows)


# ---------------------------------------------------------------------------------------
# (1) tfds.testing.mock_data + tfds.data_source
# ---------------------------------------------------------------------------------------
def test_mock_data_source_maps_ids_ratings_timestamps():
    """Examples as TFDS decodes them (bytes ids, float32 ratings, int64 timestamps)."""
    exs = [{"user_id": b"196", "movie_id": b"242", "user_rating": np.float32(3.0),
            "timestamp": np.int64(881250949), "user_gender": True},
           {"user_id": b"186", "movie_id": b"302", "user_rating": np.float32(4.5),
            "timestamp": np.int64(891717742), "user_gender": False},
           {"user_id": b"196", "movie_id": b"51", "user_rating": np.float32(2.0),
            "timestamp": np.int64(880606923), "user_gender": True}]
    seen = {}

    def as_data_source(builder, split, decoders=None, deserialize_method=None):
        seen.update(name=builder.name, config=builder.builder_config.name, split=split)
        return exs

    with tfds.testing.mock_data(as_data_source_fn=as_data_source):
        r = from_tfds(NAME)
    assert seen == {"name": "movielens", "config": "100k-ratings", "split": "train"}
    assert triples(r) == [(186, 302, 4.5, 891717742), (196, 51, 2.0, 880606923),
                          (196, 242, 3.0, 881250949)]
    assert r.user_ids.dtype.kind == r.item_ids.dtype.kind == "i"
    assert r.timestamp.dtype == np.int64 and r.value.dtype == np.float32
    assert r.name == NAME and (r.n_users, r.n_items) == (2, 3)


def test_mock_data_source_text_ids_duplicates_and_bad_values():
    def with_examples(exs, **kw):
        with tfds.testing.mock_data(as_data_source_fn=lambda *a, **k: exs):
            return from_tfds(NAME, **kw)

    def ex(u, m, r=4.0, t=1):
        return {"user_id": u, "movie_id": m, "user_rating": np.float32(r),
                "timestamp": np.int64(t)}

    r = with_examples([ex(b"u1", b"007", t=5), ex(b"u2", b"7", t=6)])
    assert r.user_ids.tolist() == ["u1", "u2"] and r.item_ids.tolist() == ["007", "7"]
    dup = [ex(b"1", b"2", 3.0, 10), ex(b"1", b"2", 5.0, 20), ex(b"1", b"3", 1.0, 5)]
    with pytest.raises(DataError, match=r"\(user 1, item 2\) is rated 2 times .*keep-last"):
        with_examples(dup)
    assert triples(with_examples(dup, on_duplicate="keep-last")) == [(1, 2, 5.0, 20),
                                                                     (1, 3, 1.0, 5)]
    with pytest.raises(DataError, match=r"tfds:movielens/100k-ratings\[train\]:2: .*rating"):
        with_examples([ex(b"1", b"2"), ex(b"1", b"3", 7.0)])
    with pytest.raises(DataError, match=r"tfds:movielens/100k-ratings\[train\]:2: .*rating"):
        with_examples([ex(b"1", b"2"), ex(b"1", b"3", float("nan"))])
    assert with_examples([ex(b"1", b"3", 7.0)], rating_range=None).value.tolist() == [7.0]
    with pytest.raises(DataError, match=r"example 2: user id is empty"):
        with_examples([ex(b"1", b"2"), ex(b" ", b"3")])
    with pytest.raises(DataError, match=r"example 1: item id .*not valid UTF-8"):
        with_examples([ex(b"1", b"\xff")])
    with pytest.raises(DataError, match=r"example 2: feature timestamp is missing"):
        with_examples([ex(b"1", b"2"), {"user_id": b"1", "movie_id": b"3",
                                        "user_rating": np.float32(4)}])
    with pytest.raises(DataError, match=r"has no movie_id feature"):
        with_examples([{"user_id": b"1", "item": b"2"}])
    with pytest.raises(DataError, match=r"split 'train' is empty"):
        with_examples([])


def test_tfds_item_space_is_not_public_without_a_catalogue():
    """The ratings datasets carry no item list: the rated items, items_public False; a
    catalogue (items=) makes the item space that list, rated or not."""
    exs = [{"user_id": b"1", "movie_id": b"242", "user_rating": np.float32(3.0),
            "timestamp": np.int64(1)},
           {"user_id": b"2", "movie_id": b"302", "user_rating": np.float32(4.0),
            "timestamp": np.int64(2)}]
    with tfds.testing.mock_data(as_data_source_fn=lambda *a, **k: exs):
        r = from_tfds(NAME)
        c = from_tfds(NAME, items=[302, 242, 999])
        with pytest.raises(DataError, match=r"\[train\]:2: item 302 is not in the item "
                                            r"catalogue \(items=, 2 items\)"):
            from_tfds(NAME, items=[242, 7])
    assert not r.items_public and r.item_ids.tolist() == [242, 302]
    assert c.items_public and c.item_ids.tolist() == [242, 302, 999]
    assert triples(c) == triples(r)


def test_mock_data_random_examples():
    """TFDS's own random movielens examples (text ids, ratings in [0, 1))."""
    with tfds.testing.mock_data(num_examples=40):
        r = from_tfds(NAME, rating_range=None, on_duplicate="keep-last")
    assert 0 < r.nnz <= 40 and r.timestamp is not None
    assert r.user.max() < r.n_users and r.item.max() < r.n_items


# ---------------------------------------------------------------------------------------
# (2) a real ArrayRecord dataset, end to end
# ---------------------------------------------------------------------------------------
def test_array_record_is_what_the_builder_wrote(ml):
    d, rows = ml
    files = sorted(p.name for p in (d / NAME / "0.1.1").iterdir())
    assert "movielens-train.array_record-00000-of-00001" in files
    info = json.loads((d / NAME / "0.1.1" / "dataset_info.json").read_text())
    assert info["fileFormat"] == "array_record"


def test_from_tfds_reads_array_record(ml):
    d, rows = ml
    r = from_tfds(NAME, data_dir=str(d))
    assert triples(r) == expected(rows)
    assert r.nnz == len(rows) and r.user_ids.dtype.kind == "i"
    assert r.user_ids.tolist() == list(range(1, 31))       # dense indices follow raw ids
    assert r.name == NAME
    assert from_tfds(NAME, split="train[:50%]", data_dir=str(d)).nnz == len(rows) // 2


def test_load_spec_finds_the_tfds_folder(ml, tmp_path):
    d, rows = ml
    a = load(f"tfds:{NAME}", data_dir=d)                   # data_dir holds movielens/
    b = load(f"tfds:{NAME}", data_dir=tmp_path, tfds_data_dir=str(d), name="ml")
    assert triples(a) == triples(b) == expected(rows) and b.name == "ml"


def test_cli_train_on_a_tfds_dataset(ml, tmp_path, capsys):
    d, _ = ml
    out = tmp_path / "run"
    # TFDS ratings bring no item catalogue: a private run needs the public one (--items),
    # else it would select its items privately (too few ratings here to keep any)
    catalogue = tmp_path / "items.txt"
    catalogue.write_text("".join(f"{100 + m}\n" for m in range(1, 21)))
    rc = cli(["train", "--dataset", f"tfds:{NAME}", "--data-dir", str(d), "--dim", "2",
              "--iterations", "1", "--quiet", "--out", str(out), "--items", str(catalogue)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    config = out / "trainer" / "config.json"
    assert config.is_file()
    assert json.loads(config.read_text())["data"]["dataset"] == f"tfds:{NAME}"


def test_array_record_validation(tmp_path):
    """Bad values in a real dataset are named by example number; duplicates follow
    on_duplicate (TFDS shuffles examples, so timestamps decide the kept rating)."""
    build(tmp_path / "a", [("1", "2", 3.0, 10), ("1", "2", 5.0, 20), ("2", "2", 4.0, 1)])
    with pytest.raises(DataError, match=r"\(user 1, item 2\) is rated 2 times"):
        from_tfds(NAME, data_dir=str(tmp_path / "a"))
    r = from_tfds(NAME, data_dir=str(tmp_path / "a"), on_duplicate="keep-last")
    assert triples(r) == [(1, 2, 5.0, 20), (2, 2, 4.0, 1)]
    build(tmp_path / "b", [("1", "2", 3.0, 10), ("1", "3", 9.0, 20)])
    with pytest.raises(DataError, match=r"tfds:movielens/100k-ratings\[train\]:\d: rating 9"):
        from_tfds(NAME, data_dir=str(tmp_path / "b"))
    build(tmp_path / "c", [("a1", "m 1", 0.5, 0), ("a2", "m 1", 5.0, -3)],
          config="latest-small-ratings")               # other config: fewer features
    r = from_tfds("movielens/latest-small-ratings", data_dir=str(tmp_path / "c"))
    assert triples(r) == [("a1", "m 1", 0.5, 0), ("a2", "m 1", 5.0, -3)]


# ---------------------------------------------------------------------------------------
# without TensorFlow: what is missing, and how to prepare the data elsewhere
# ---------------------------------------------------------------------------------------
def test_not_prepared_says_how_to_prepare_elsewhere(tmp_path):
    with pytest.raises(DataError) as e:
        from_tfds(NAME, data_dir=str(tmp_path))
    msg = str(e.value)
    assert f"is not prepared at {tmp_path}/{NAME}/0.1.1" in msg
    assert "needs TensorFlow (not installed here)" in msg
    assert f"tfds build {NAME} --file_format=array_record --data_dir DIR" in msg
    assert f"copy DIR/{NAME} here to {tmp_path}/{NAME}" in msg
    assert "--dataset ml-100k" in msg
    with pytest.raises(DataError, match="not prepared"):       # data dir not there at all
        load(f"tfds:{NAME}", data_dir=tmp_path / "nope", tfds_data_dir=str(tmp_path / "x"))


def test_tfrecord_copy_says_tensorflow_is_needed(ml, tmp_path):
    """A copy prepared with TFDS's default format (TFRecord, which only TensorFlow reads);
    simulated by relabelling the ArrayRecord copy, since writing TFRecord needs TF."""
    d, _ = ml
    shutil.copytree(d / "movielens", tmp_path / "movielens")
    p = tmp_path / NAME / "0.1.1" / "dataset_info.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "fileFormat": "tfrecord"}))
    with pytest.raises(DataError) as e:
        from_tfds(NAME, data_dir=str(tmp_path))
    msg = str(e.value)
    assert "is stored as tfrecord, which only TensorFlow reads" in msg
    assert "tfds convert_format --dataset_version_dir" in msg
    assert "pip install 'dpmt[tfds]'" in msg


def test_unknown_split_lists_the_splits(ml):
    d, _ = ml
    with pytest.raises(DataError, match=r"could not read split 'test' .*\(splits: train\)"):
        from_tfds(NAME, split="test", data_dir=str(d))


def test_not_movielens_ratings():
    with pytest.raises(DataError, match=r"movielens/\*-ratings"):
        from_tfds("mnist")
    with pytest.raises(DataError, match=r"movielens/\*-ratings"):
        from_tfds("movielens/100k-movies")


# ---------------------------------------------------------------------------------------
# with TensorFlow: tfds.load is the fallback (stood in for here)
# ---------------------------------------------------------------------------------------
def test_tfds_load_fallback_where_tensorflow_is_installed(monkeypatch, tmp_path):
    monkeypatch.setattr(adapter, "has_tensorflow", lambda: True)
    calls = []

    def fake_load(name, split, data_dir, batch_size, download):
        calls.append((name, split, data_dir, batch_size, download))
        return {"user_id": np.array([b"196", b"186"]), "movie_id": np.array([b"242", b"302"]),
                "user_rating": np.array([3.0, 4.5], np.float32),
                "timestamp": np.array([881250949, 891717742])}

    monkeypatch.setattr(tfds, "load", fake_load)
    monkeypatch.setattr(tfds, "as_numpy", lambda d: d)
    r = from_tfds(NAME, data_dir=str(tmp_path), download=False)
    assert calls == [(NAME, "train", str(tmp_path), -1, False)]
    assert triples(r) == [(186, 302, 4.5, 891717742), (196, 242, 3.0, 881250949)]

    def failing_load(*a, **k):
        raise RuntimeError("no network")
    monkeypatch.setattr(tfds, "load", failing_load)
    with pytest.raises(DataError, match=r"is not prepared at .*; then tfds.load: "
                                        r"RuntimeError: no network"):
        from_tfds(NAME, data_dir=str(tmp_path))
