"""Ratings files as people hold them (issue 26): text ids (IMDb's ``tt0111161``) and quoted
fields in a CSV/TSV with a header, and Parquet files, through the path ``dpmt train
--dataset FILE [--columns ...]`` loads them by (``prepare_data`` -> ``dpmt.data.load`` ->
``load_file``), with clear DataErrors for bad files; the one check of one entry per
(user, item) pair behind every input."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
from _cli import cli

from dpmt.data.layout import layout as layout_of
from dpmt.config import TrainConfig
from dpmt.data import as_ratings, load, load_file
from dpmt.data.adapters import from_sparse
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError
from dpmt.train.rundir import prepare_data

#: 12 users x 6 items, text ids, every field of the id columns quoted, one quoted rating
USERS = [f"u{k:02d}" for k in range(12)]
ITEMS = ["tt0111161", "tt0068646", "tt0071562", "tt0468569", "tt0050083", "tt0108052"]


def _rows():
    rng = np.random.default_rng(0)
    out = []
    for k, u in enumerate(USERS):
        for j in rng.choice(len(ITEMS), 4, replace=False):
            out.append((u, ITEMS[j], float(rng.integers(1, 11)), 1_000 + len(out)))
    return out


def _csv(tmp_path, sep=",", name="mine.csv"):
    lines = [sep.join(['"uid"', "iid", "stars", "ts"])]
    for n, (u, i, r, t) in enumerate(_rows()):
        rating = f'"{r:g}"' if n == 0 else f"{r:g}"
        lines.append(sep.join([f'"{u}"', f'"{i}"', rating, str(t)]))
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


COLUMNS = "user=uid,item=iid,rating=stars,timestamp=ts"


def _check(r):
    want = sorted((u, i, r_, t) for u, i, r_, t in _rows())
    got = sorted(zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist(),
                     r.value.tolist(), r.timestamp.tolist()))
    assert got == want
    assert r.user_ids.dtype.kind == "U" and r.item_ids.dtype.kind == "U"
    assert sorted(r.item_ids.tolist()) == sorted(ITEMS)


@pytest.mark.parametrize("sep,name", [(",", "mine.csv"), ("\t", "mine.tsv")])
def test_text_ids_and_quoted_fields_load_through_the_train_path(tmp_path, sep, name):
    p = _csv(tmp_path, sep, name)
    _check(load_file(p, columns={"user": "uid", "item": "iid", "rating": "stars",
                                 "timestamp": "ts"}, rating_range=(1, 10)))
    cfg = TrainConfig(data=dict(dataset=str(p), columns=COLUMNS, rating_range="1,10",
                                positive_threshold=5.0, split="per-user"))
    split = prepare_data(cfg)                       # what `dpmt train --dataset FILE` runs
    assert 0 < split.train.nnz < len(_rows())      # the positives (> 5), minus the held out
    assert set(split.train.item_ids.tolist()) <= set(ITEMS)
    assert set(split.train.user_ids.tolist()) <= set(USERS)


def test_dpmt_info_reads_text_ids_quoted_fields_and_parquet(tmp_path, capsys):
    p = tmp_path / "ratings.csv"
    p.write_text('userId,movieId,rating\n"a","tt0111161","4"\n"b","tt0068646",3.5\n'
                 '"a","tt0068646",5\n')
    assert cli(["info", p]) == 0
    assert "users" in capsys.readouterr().out
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    q = tmp_path / "r.parquet"
    pq.write_table(pa.table({"userId": ["a", "b", "a"], "movieId": [1, 2, 2],
                             "rating": [4.0, 3.5, 5.0]}), q)
    assert cli(["info", q]) == 0
    assert "users" in capsys.readouterr().out


def test_quoted_numeric_fields_stay_on_the_fast_path(tmp_path, monkeypatch):
    from dpmt.data import parsing

    rng = np.random.default_rng(1)
    n = 5000
    u, i = rng.integers(1, 900, n), rng.integers(1, 400, n)
    key = np.unique(u * 1000 + i)
    u, i = key // 1000, key % 1000
    plain = "userId,movieId,rating,timestamp\n" + "".join(
        f"{a},{b},{1 + (a + b) % 5},{a * b}\n" for a, b in zip(u, i))
    quoted = "userId,movieId,rating,timestamp\n" + "".join(
        f'"{a}","{b}",{1 + (a + b) % 5},"{a * b}"\n' for a, b in zip(u, i))
    (tmp_path / "plain.csv").write_text(plain)
    (tmp_path / "quoted.csv").write_text(quoted)
    a = load_file(tmp_path / "plain.csv")

    def no_slow_path(*args, **kw):
        raise AssertionError("the slow parser ran")

    monkeypatch.setattr(parsing, "_slow_parse", no_slow_path)
    b = load_file(tmp_path / "quoted.csv")
    for f in ("user", "item", "value", "timestamp", "user_ids", "item_ids"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.user_ids.dtype == np.int64


def test_quoting_rules(tmp_path):
    h = "user,item,rating\n"
    p = tmp_path / "q.csv"
    p.write_text(h + '"a,b",x,4\n"say ""hi""",y,3\n')            # RFC 4180
    r = load_file(p)
    assert sorted(r.user_ids.tolist()) == ["a,b", 'say "hi"']
    p.write_text(h + '"a,4,3\n')
    with pytest.raises(DataError, match=r"q.csv:2: badly quoted field"):
        load_file(p)
    p.write_text(h + "007,1,4\n7,1,3\n")                          # text ids: two users
    assert load_file(p).user_ids.tolist() == ["007", "7"]
    p.write_text(h + "-1,1,4\n")
    with pytest.raises(DataError, match=r"q.csv:2: negative user id -1"):
        load_file(p)
    p.write_text(h + ",1,4\n")
    with pytest.raises(DataError, match=r"q.csv:2: user id is empty"):
        load_file(p)
    u = tmp_path / "u.data"                                       # MovieLens: integer ids
    u.write_text("1\t2\t3\t4\nx\t2\t3\t4\n")
    with pytest.raises(DataError, match=r"u.data:2: user id 'x' is not a non-negative"):
        load_file(u)


# -- Parquet ------------------------------------------------------------------------------
@pytest.fixture
def pq():
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(path, **cols):
        pq.write_table(pa.table(cols), path)
        return path

    write.pa = pa
    return write


def test_parquet_through_the_train_path(tmp_path, pq):
    rows = _rows()
    p = pq(tmp_path / "mine.parquet", uid=[r[0] for r in rows], iid=[r[1] for r in rows],
           stars=[r[2] for r in rows],
           ts=pq.pa.array([r[3] * 1000 for r in rows], pq.pa.timestamp("ms")))
    r = load_file(p, columns={"user": "uid", "item": "iid", "rating": "stars",
                              "timestamp": "ts"})
    _check(r)                                     # timestamps in seconds
    assert load(str(p), columns={"user": "uid", "item": "iid", "rating": "stars",
                                 "timestamp": "ts"}).nnz == len(rows)
    cfg = TrainConfig(data=dict(dataset=str(p), columns=COLUMNS, positive_threshold=5.0,
                                split="per-user"))
    assert prepare_data(cfg).train.nnz > 0
    q = pq(tmp_path / "ratings.parquet", userId=[1, 2, 2], movieId=[10, 10, 20])
    r = load(str(tmp_path))                       # a folder holding ratings.parquet
    assert r.implicit and r.user_ids.tolist() == [1, 2] and r.name == tmp_path.name
    (tmp_path / "noext").write_bytes(q.read_bytes())
    assert load_file(tmp_path / "noext").nnz == 3   # found by its magic bytes


@pytest.mark.parametrize("cols,fragment", [
    ({"user": [1, 1], "item": [2, 2], "rating": [1.0, 2.0]},
     r"x.parquet: \(user 1, item 2\) is rated 2 times \(rows 1, 2\)"),
    ({"user": [1, None], "item": [2, 3]}, r"x.parquet, row 2: user id is missing \(null\)"),
    ({"user": [1, -4], "item": [2, 3]}, r"x.parquet, row 2: negative user id -4"),
    ({"user": [1.0, 2.5], "item": [2, 3]}, r"x.parquet, row 2: user id 2.5 is not an int"),
    ({"user": ["a", ""], "item": [2, 3]}, r"x.parquet, row 2: user id is empty"),
    ({"user": [1, 2], "item": [2, 3], "rating": ["a", "b"]}, r"holds string; ratings must"),
    ({"user": [1, 2], "item": [2, 3], "timestamp": [1.5, 2.0]},
     r"row 1: timestamp 1.5 is not an integer"),
    ({"uid": [1, 2], "item": [2, 3]}, r"x.parquet: Parquet schema .* has no user column"),
    ({"user": [], "item": []}, r"x.parquet: the Parquet file has no rows"),
])
def test_bad_parquet_files_are_named(tmp_path, pq, cols, fragment):
    p = tmp_path / "x.parquet"
    if cols.get("user") == []:
        pq(p, user=pq.pa.array([], pq.pa.int64()), item=pq.pa.array([], pq.pa.int64()))
    else:
        pq(p, **cols)
    with pytest.raises(DataError, match=fragment):
        load_file(p)


def test_parquet_rating_range_and_not_parquet(tmp_path, pq):
    p = pq(tmp_path / "x.parquet", user=[1, 2], item=[2, 3], rating=[1.0, 9.0])
    assert load_file(p).value.tolist() == [1.0, 9.0]          # no scale under "auto"
    with pytest.raises(DataError, match=r"x.parquet, row 2: rating 9 is outside"):
        load_file(p, rating_range=(1, 5))
    bad = tmp_path / "bad.parquet"
    bad.write_text("user,item\n1,2\n")
    with pytest.raises(DataError, match=r"cannot read .*bad.parquet as Parquet"):
        load_file(bad)


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    p = tmp_path / "x.parquet"
    p.write_bytes(b"PAR1")
    real = builtins.__import__

    def no_arrow(name, *a, **kw):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_arrow)
    with pytest.raises(ConfigError, match=r"pip install pyarrow"):
        load_file(p)


# -- the one check of one entry per pair --------------------------------------------------
def test_every_input_refuses_a_repeated_pair_through_one_check(tmp_path, monkeypatch):
    import scipy.sparse as sp

    from dpmt.data import adapters, loaders, ratings

    calls = []
    real = ratings.one_entry_per_pair

    def spy(*a, **kw):
        calls.append(kw.get("unit", "positions"))
        return real(*a, **kw)

    for mod in (ratings, loaders, adapters):
        monkeypatch.setattr(mod, "one_entry_per_pair", spy)
    f = tmp_path / "d.csv"
    f.write_text("user,item,rating\na,x,1\na,x,2\n")
    with pytest.raises(DataError, match=r"\(user a, item x\) is rated 2 times \(lines 2, 3\)"):
        load_file(f)
    with pytest.raises(DataError, match=r"\(user a, item x\) appears 2 times"):
        as_ratings({"user": np.array(["a", "a"]), "item": np.array(["x", "x"]),
                    "rating": np.array([1.0, 2.0])})
    m = sp.coo_matrix((np.ones(2), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    with pytest.raises(DataError, match=r"more than once.*sum_duplicates"):
        from_sparse(m)
    assert calls == ["lines", "positions", "stored entries"]


def test_missing_or_inexact_float_ids_are_refused():
    with pytest.raises(DataError, match=r"position 1 is missing \(NaN\)"):
        Ratings.from_raw(np.array([1.0, np.nan]), np.array([1, 2]), np.ones(2))
    with pytest.raises(DataError, match=r"too large for a float"):
        Ratings.from_raw(np.array([1.0, 2.0**60]), np.array([1, 2]), np.ones(2))


def test_dpmt_train_on_a_csv_with_text_ids_and_quotes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    lines = ['"uid","iid","stars"']
    for u in range(200):
        for j in rng.choice(60, 12, replace=False):
            lines.append(f'"u{u}","tt{j:07d}",{rng.integers(1, 11)}')
    data = tmp_path / "imdb.csv"
    data.write_text("\n".join(lines) + "\n")
    items = tmp_path / "imdb.items"
    items.write_text("\n".join(f"tt{j:07d}" for j in range(60)) + "\n")
    out = tmp_path / "run"
    assert cli(["train", "--dataset", data, "--columns", "user=uid,item=iid,rating=stars",
                "--rating-range", "1,10", "--positive-threshold", "5", "--items", items,
                "--epsilon", "5", "--iterations", "1", "--dim", "4", "--out", out,
                "--quiet"]) == 0
    capsys.readouterr()
    assert cli(["recommend", "--model", out, "--items", "tt0000003,tt0000007", "-k", "3"]) == 0
    assert "tt00000" in capsys.readouterr().out


def test_text_ids_stay_on_the_fast_path_and_equal_the_line_parser(tmp_path, monkeypatch):
    """Chunks of numeric ids and chunks of text ids (the file is over 1 MiB, so several
    chunks): the fast path keeps every id as the line parser does (exact text, numbers as
    written), and never falls back to it."""
    from pathlib import Path

    from dpmt.data import parsing

    monkeypatch.setattr(parsing, "_CHUNK_BYTES", 1 << 16)     # several chunks, small file
    rng = np.random.default_rng(2)
    n = 40_000
    u = rng.integers(1, 5000, n)
    i = rng.integers(1, 3000, n)
    key = np.unique(u * 10_000 + i)
    u, i = key // 10_000, key % 10_000
    half = len(u) // 2
    items = [str(x) for x in i[:half]] + [f"tt{x:07d}" if x % 3 else f"é{x}"
                                          for x in i[half:]]
    users = [str(x) for x in u]
    text = "user,item,rating\n" + "".join(
        f"{a},{b},{1 + k % 5}\n" for k, (a, b) in enumerate(zip(users, items)))
    p = tmp_path / "mixed.csv"
    p.write_text(text, encoding="utf-8")
    assert p.stat().st_size > 4 * parsing._CHUNK_BYTES
    data = p.read_bytes()
    lay = layout_of("csv", data, p, "auto")
    body = data[data.index(b"\n") + 1:]
    slow, _ = parsing._slow_parse(body, lay, Path(p))
    fast = parsing._fast_parse(body, lay)
    assert fast["item"].dtype.kind == "S" and fast["user"].dtype == np.int64
    assert np.array_equal(np.char.decode(fast["item"], "utf-8"), slow["item"])
    assert np.array_equal(fast["user"], slow["user"])

    def no_slow_path(*args, **kw):
        raise AssertionError("the slow parser ran")

    monkeypatch.setattr(parsing, "_slow_parse", no_slow_path)
    r = load_file(p)
    assert r.item_ids.dtype.kind == "U" and "é3" in r.item_ids.tolist()
    assert sorted(r.item_ids.tolist()) == r.item_ids.tolist()
    got = r.item_ids[r.item].tolist()
    assert got == items                                      # file order, exact text
    cat = tmp_path / "items.txt"                             # a public catalogue of text ids
    cat.write_text("\n".join(sorted(set(items)) + ["unrated"]) + "\n", encoding="utf-8")
    rc = load_file(p, items=cat)
    assert rc.items_public and rc.item_ids[rc.item].tolist() == items
    assert "unrated" in rc.item_ids.tolist()


@pytest.mark.parametrize("row,fragment", [
    (b"u1,\xff\xfe,4\n", "not valid UTF-8"),
    (b"u1, tt1,4\nu1,tt1,3\n", "rated 2 times"),              # spaces are stripped
    (b"u1,-3,4\n", "negative item id -3"),
    (b"u1,tt\x001,4\n", "NUL"),
])
def test_what_the_fast_path_leaves_to_the_line_parser(tmp_path, row, fragment):
    p = tmp_path / "t.csv"
    p.write_bytes(b"user,item,rating\nu0,tt0,4\n" + row)
    with pytest.raises(DataError, match=fragment) as e:
        load_file(p)
    assert "t.csv:3" in str(e.value) or "rated 2 times" in fragment
