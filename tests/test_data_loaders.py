"""Loaders: every format on small files, the fast/slow parser agreement, every bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data.layout import layout as layout_of
from dpmt.data import parsing
from dpmt.data.loaders import (
    ML100K_GENRES,
    detect_format,
    from_tfds,
    load_file,
    load_item_genres,
)
from dpmt.errors import ConfigError, DataError


def write(tmp_path, name, text, encoding="utf-8"):
    p = tmp_path / name
    p.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return p


UDATA = ("196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n"
         "196\t51\t2\t880606923\n")


def triples(r):
    """Sorted (raw user, raw item, value, timestamp) rows of a Ratings."""
    ts = r.timestamp if r.timestamp is not None else np.zeros(r.nnz, np.int64)
    return sorted(zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist(),
                      r.value.tolist(), ts.tolist()))


# ---------------------------------------------------------------------------------------
# formats
# ---------------------------------------------------------------------------------------
def test_udata(tmp_path):
    r = load_file(write(tmp_path, "u.data", UDATA))
    assert r.nnz == 4 and r.n_users == 3 and r.n_items == 4
    assert r.user_ids.tolist() == [22, 186, 196]              # dense index = sorted raw id
    assert r.item_ids.tolist() == [51, 242, 302, 377]
    assert triples(r) == [(22, 377, 1.0, 878887116), (186, 302, 3.0, 891717742),
                          (196, 51, 2.0, 880606923), (196, 242, 3.0, 881250949)]
    assert r.user.dtype == np.int32 and r.value.dtype == np.float32
    assert r.timestamp.dtype == np.int64
    assert r.name == "u.data"


def test_dat(tmp_path):
    r = load_file(write(tmp_path, "ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n"
                        "2::1193::4.5::978298413\n"))
    assert triples(r) == [(1, 661, 3.0, 978302109), (1, 1193, 5.0, 978300760),
                          (2, 1193, 4.5, 978298413)]


def test_csv_header_by_name_and_order(tmp_path):
    p = write(tmp_path, "ratings.csv", "timestamp,rating,movieId,userId\n"
              "1112486027,3.5,2,1\n1112484676,0.5,29,1\n1112484819,4.0,32,7\n")
    r = load_file(p)
    assert triples(r) == [(1, 2, 3.5, 1112486027), (1, 29, 0.5, 1112484676),
                          (7, 32, 4.0, 1112484819)]


def test_csv_without_header_and_without_timestamp(tmp_path):
    r = load_file(write(tmp_path, "x.csv", "5,10,4\n6,10,2.5\n"))
    assert r.timestamp is None
    assert triples(r) == [(5, 10, 4.0, 0), (6, 10, 2.5, 0)]


def test_inter_numeric_tokens(tmp_path):
    p = write(tmp_path, "ml.inter", "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
              + UDATA)
    r = load_file(p)
    assert triples(r) == triples(load_file(write(tmp_path, "u.data", UDATA)))
    assert r.user_ids.dtype.kind == "i"


def test_inter_text_tokens_extra_columns_and_no_rating(tmp_path):
    p = write(tmp_path, "x.inter",
              "item_id:token\treview:token_seq\tuser_id:token\n"
              "i9\tgreat film, really\tu1\ni3\tmeh\tu1\ni9\t\tu2\n")
    r = load_file(p)
    assert r.user_ids.tolist() == ["u1", "u2"] and r.item_ids.tolist() == ["i3", "i9"]
    assert np.all(r.value == 1.0) and r.timestamp is None and r.nnz == 3


def test_inter_rating_range_not_checked_by_default(tmp_path):
    p = write(tmp_path, "x.inter", "user_id:token\titem_id:token\trating:float\n1\t2\t10\n")
    assert load_file(p).value.tolist() == [10.0]
    with pytest.raises(DataError, match=r"x.inter:2: rating 10 is outside"):
        load_file(p, rating_range=(1, 5))


def test_crlf_bom_and_no_trailing_newline(tmp_path):
    p = write(tmp_path, "ratings.csv",
              b"\xef\xbb\xbfuserId,movieId,rating,timestamp\r\n1,2,3.5,10\r\n3,4,5,20")
    assert triples(load_file(p)) == [(1, 2, 3.5, 10), (3, 4, 5.0, 20)]


def test_blank_lines_take_slow_path_with_same_result(tmp_path):
    fast = load_file(write(tmp_path, "a.data", UDATA))
    slow = load_file(write(tmp_path, "b.data", UDATA.replace("\n", "\n\n", 2)))
    assert triples(fast) == triples(slow)


def test_fast_and_slow_parsers_agree_on_random_file(tmp_path):
    rng = np.random.default_rng(0)
    n = 3000
    u = rng.integers(0, 10**rng.integers(1, 7, n))
    i = np.arange(n) * 7 + 3                                 # distinct pairs
    r = rng.integers(1, 11, n) / 2
    t = rng.integers(0, 2 * 10**9, n)
    fmt_r = np.where(rng.random(n) < 0.5, [f"{x:g}" for x in r], [f"{x:.1f}" for x in r])
    body = "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in zip(u, i, fmt_r, t))
    p = write(tmp_path, "r.csv", "userId,movieId,rating,timestamp\n" + body)
    lay = layout_of("csv", p.read_bytes(), p, "auto")
    data = body.encode()
    fast = parsing._fast_parse(data, lay)
    slow, lines = parsing._slow_parse(data, lay, p)
    assert lines.tolist() == list(range(2, n + 2))
    for key in ("user", "item", "rating", "timestamp"):
        np.testing.assert_array_equal(fast[key], slow[key])
    np.testing.assert_array_equal(fast["rating"], r)
    np.testing.assert_array_equal(fast["timestamp"], t)


def test_small_chunks_and_threads_give_same_result(tmp_path, monkeypatch):
    rows = "".join(f"{k % 97}\t{k}\t{1 + k % 5}\t{k * 13}\n" for k in range(2000))
    p = write(tmp_path, "u.data", rows)
    whole = load_file(p)
    monkeypatch.setattr(parsing, "_CHUNK_BYTES", 64)
    monkeypatch.setattr(parsing, "_MAX_THREADS", 3)
    chunked = load_file(p)
    np.testing.assert_array_equal(whole.user, chunked.user)
    np.testing.assert_array_equal(whole.timestamp, chunked.timestamp)
    assert whole.nnz == 2000


@pytest.mark.parametrize("name,text,fmt", [
    ("u.data", UDATA, "tsv"), ("ratings.dat", "1::2::3::4\n", "dat"),
    ("ratings.csv", "userId,movieId\n1,2\n", "csv"), ("a.inter", "user_id:token\n", "inter"),
    ("noext", "1::2::3::4\n", "dat"), ("noext2", "user_id:token\titem_id:token\n1\t2\n", "inter"),
    ("noext3", "1,2,3\n", "csv"), ("noext4", "1\t2\t3\n", "tsv"),
])
def test_detect_format(tmp_path, name, text, fmt):
    assert detect_format(write(tmp_path, name, text)) == fmt


def test_detect_format_rejects_unknown_and_zip(tmp_path):
    with pytest.raises(DataError, match="pass fmt="):
        detect_format(write(tmp_path, "mystery", "hello world\n"))
    with pytest.raises(DataError, match="unpack it first"):
        detect_format(write(tmp_path, "ml-100k.zip", b"PK"))


def test_explicit_fmt_alias(tmp_path):
    p = write(tmp_path, "whatever.txt", "1::2::3::4\n")
    assert load_file(p, fmt="ml-1m").nnz == 1
    with pytest.raises(ConfigError, match="unknown format"):
        load_file(p, fmt="xlsx")


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,text,line,what", [
    ("u.data", "1\t2\t3\t4\n5\t6\t7\n", 2, "expected 4 fields separated by tabs, found 3"),
    ("u.data", "1\t2\t3\t4\n5\t6\tx\t9\n", 2, "rating 'x' is not a number"),
    ("u.data", "1\t2\t3\t4\n1\t3\tnan\t9\n", 2, "rating is nan"),
    ("u.data", "1\t2\t3\t4\n1\t3\tinf\t9\n", 2, "rating is inf"),
    ("u.data", "1\t2\t3\t4\n1\t3\t6\t9\n", 2, "rating 6 is outside the allowed range"),
    ("u.data", "1\t2\t3\t4\n1\t3\t0\t9\n", 2, "rating 0 is outside"),
    ("u.data", "1\t2\t3\t4\n-1\t3\t4\t9\n", 2, "negative user id -1"),
    ("u.data", "1\t2\t3\t4\n1\t-3\t4\t9\n", 2, "negative item id -3"),
    ("u.data", "1\t2\t3\t4\n1.5\t3\t4\t9\n", 2, "user id '1.5' is not a non-negative integer"),
    ("u.data", "1\t2\t3\t4\n2\t3\t4\t9.5\n", 2, "timestamp '9.5' is not an integer"),
    ("ratings.dat", "1::2::3::4\n1:2::3::4\n", 2, "expected 4 fields separated by '::'"),
    ("ratings.dat", "1::2::3::4\n\n5::6::1::9::9\n", 3, "found 5"),
    ("ratings.csv", "userId,movieId,rating,timestamp\n1,2,3,4\n3,4,,5\n", 3,
     "rating '' is not a number"),
    ("ratings.csv", "userId,movieId,rating,timestamp\n1,2,3,4\n1,2,3\n", 3, "found 3"),
])
def test_bad_line_is_named(tmp_path, name, text, line, what):
    p = write(tmp_path, name, text)
    with pytest.raises(DataError) as e:
        load_file(p)
    assert f"{p}:{line}: " in str(e.value)
    assert what in str(e.value)


def test_bad_value_found_by_fast_path_names_line(tmp_path):
    rows = "".join(f"{k}\t{k}\t3\t{k}\n" for k in range(1, 500))
    p = write(tmp_path, "u.data", rows + "7\t8\t9\t10\n")      # parses fine, out of range
    with pytest.raises(DataError, match=rf"{p}:500: rating 9 is outside .*rating_range"):
        load_file(p)
    assert load_file(p, rating_range=None).nnz == 500
    assert load_file(p, rating_range=(1, 9)).value.max() == 9


def test_bad_rating_range_argument(tmp_path):
    p = write(tmp_path, "u.data", UDATA)
    with pytest.raises(ConfigError, match="rating_range"):
        load_file(p, rating_range=(5, 1))
    with pytest.raises(ConfigError, match="rating_range"):
        load_file(p, rating_range="wide")


@pytest.mark.parametrize("text,msg", [("", "file is empty"), ("\n \n", "file is empty")])
def test_empty_file(tmp_path, text, msg):
    with pytest.raises(DataError, match=msg):
        load_file(write(tmp_path, "u.data", text))


def test_header_only(tmp_path):
    with pytest.raises(DataError, match="header but no ratings"):
        load_file(write(tmp_path, "ratings.csv", "userId,movieId,rating,timestamp\n"))


def test_csv_header_without_user_column(tmp_path):
    with pytest.raises(DataError, match=r":1: CSV header .* no user column"):
        load_file(write(tmp_path, "ratings.csv", "uid,movieId,rating\n1,2,3\n"))


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_file(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="does not exist"):
        load_file(tmp_path / "nope.csv", fmt="csv")


# ---------------------------------------------------------------------------------------
# duplicates
# ---------------------------------------------------------------------------------------
DUPS = ("1\t10\t3\t100\n2\t10\t4\t100\n1\t10\t5\t50\n1\t10\t2\t300\n2\t20\t1\t1\n"
        "2\t10\t1\t100\n")


def test_duplicates_error_names_pair_count_and_policy(tmp_path):
    p = write(tmp_path, "u.data", DUPS)
    with pytest.raises(DataError) as e:
        load_file(p)
    msg = str(e.value)
    assert "(user 1, item 10) is rated 3 times (lines 1, 3, 4)" in msg
    assert "2 (user, item) pairs are duplicated" in msg and "3 surplus lines" in msg
    assert "on_duplicate='keep-last'" in msg


def test_duplicates_keep_last(tmp_path):
    r = load_file(write(tmp_path, "u.data", DUPS), on_duplicate="keep-last")
    # (1,10): latest timestamp 300 -> 2.0; (2,10): timestamps tie at 100 -> last line -> 1.0
    assert triples(r) == [(1, 10, 2.0, 300), (2, 10, 1.0, 100), (2, 20, 1.0, 1)]


def test_duplicates_keep_last_without_timestamps(tmp_path):
    r = load_file(write(tmp_path, "r.csv", "1,2,3\n1,2,4\n"), on_duplicate="keep-last")
    assert triples(r) == [(1, 2, 4.0, 0)]
    with pytest.raises(ConfigError, match="on_duplicate"):
        load_file(write(tmp_path, "s.csv", "1,2,3\n"), on_duplicate="sum")


# ---------------------------------------------------------------------------------------
# item genres
# ---------------------------------------------------------------------------------------
UITEM = ("1|Toy Story (1995)|01-Jan-1995||http://x|0|0|0|1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0\n"
         "2|GoldenEye (1995)|01-Jan-1995||http://x|0|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0|1|0|0\n"
         "5|Caf\xe9 (1995)|01-Jan-1995||http://x|1|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0\n")
RBITEM = ("item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"
          "1\tToy Story\t1995\tAnimation Children's Comedy\n"
          "2\tGoldenEye\t1995\tAction Adventure Thriller\n5\tCafe\t1995\tunknown\n")


@pytest.mark.parametrize("name,text", [("u.item", UITEM), ("ml-100k.item", RBITEM)])
def test_item_genres_aligned(tmp_path, name, text):
    write(tmp_path, name, text, encoding="latin-1")
    g = load_item_genres(tmp_path, np.array([5, 1, 2]))        # folder lookup
    assert g.shape == (3, 19) and g.dtype == np.float32
    col = {n: j for j, n in enumerate(ML100K_GENRES)}
    assert np.flatnonzero(g[0]).tolist() == [col["unknown"]]
    assert sorted(np.flatnonzero(g[1])) == sorted(col[c] for c in
                                                  ("Animation", "Children's", "Comedy"))
    assert sorted(np.flatnonzero(g[2])) == sorted(col[c] for c in
                                                  ("Action", "Adventure", "Thriller"))


def test_item_genres_missing_items(tmp_path):
    p = write(tmp_path, "u.item", UITEM, encoding="latin-1")
    with pytest.raises(DataError, match="1 of 2 items have no entry"):
        load_item_genres(p, np.array([1, 99]))
    g = load_item_genres(p, np.array([1, 99]), allow_missing=True)
    assert g[1].sum() == 0 and g[0].sum() == 3


def test_item_genres_errors(tmp_path):
    with pytest.raises(DataError, match="no item metadata"):
        load_item_genres(tmp_path, np.array([1]))
    p = write(tmp_path, "u.item", "1|x|y|z\n")
    with pytest.raises(DataError, match=r"u.item:1: expected 24"):
        load_item_genres(p, np.array([1]))
    p = write(tmp_path, "b.item", RBITEM.replace("Thriller", "Thrillr"))
    with pytest.raises(DataError, match=r"b.item:3: unknown genre 'Thrillr'"):
        load_item_genres(p, np.array([1]))


# ---------------------------------------------------------------------------------------
# TFDS
# ---------------------------------------------------------------------------------------
def test_from_tfds_without_tfds_says_how_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", None)
    with pytest.raises(DataError, match=r"pip install 'dpmt\[tfds\]'"):
        from_tfds()
    from dpmt.data import load
    with pytest.raises(DataError, match=r"pip install 'dpmt\[tfds\]'"):
        load("tfds:movielens/1m-ratings")


def test_from_tfds_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=50):
        r = from_tfds("movielens/100k-ratings", split="train", rating_range=None,
                      on_duplicate="keep-last")
    assert 0 < r.nnz <= 50
    assert r.name == "movielens/100k-ratings"
    assert r.user.max() < r.n_users and r.item.max() < r.n_items


def test_from_tfds_adapter_with_fake_module(monkeypatch):
    """The adapter's conversion logic, with a stand-in for tensorflow_datasets."""
    import types
    calls = {}

    def fake_load(name, split, data_dir, batch_size, download):
        calls.update(name=name, split=split, data_dir=data_dir, batch_size=batch_size)
        return {"user_id": np.array([b"196", b"186", b"196"]),
                "movie_id": np.array([b"242", b"302", b"51"]),
                "user_rating": np.array([3.0, 4.5, 2.0], np.float32),
                "timestamp": np.array([881250949, 891717742, 880606923]),
                "user_gender": np.array([True, False, True])}

    fake = types.SimpleNamespace(load=fake_load, as_numpy=lambda d: d)
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", fake)
    r = from_tfds("movielens/100k-ratings", data_dir="/x")
    assert calls == {"name": "movielens/100k-ratings", "split": "train", "data_dir": "/x",
                     "batch_size": -1}
    assert triples(r) == [(186, 302, 4.5, 891717742), (196, 51, 2.0, 880606923),
                          (196, 242, 3.0, 881250949)]
    assert r.user_ids.dtype.kind == "i"
    with pytest.raises(DataError, match="movielens/\\*-ratings"):
        from_tfds("mnist")

    def broken_load(*a, **k):
        raise RuntimeError("no such dataset")
    monkeypatch.setattr(fake, "load", broken_load)
    with pytest.raises(DataError, match="could not load TFDS dataset .*no such dataset"):
        from_tfds("movielens/1m-ratings")


# ---------------------------------------------------------------------------------------
# module layout: the split into parsing / genres keeps every public name where it was
# ---------------------------------------------------------------------------------------
def test_public_names_stay_importable():
    import dpmt.data
    from dpmt.data import genres
    from dpmt.data import layout as layout_mod
    from dpmt.data import loaders as L

    for nm in ("FORMATS", "ML100K_GENRES", "MOVIELENS_RATING_RANGE", "load_file", "load_tsv",
               "load_dat", "load_csv", "load_inter", "detect_format", "from_tfds",
               "load_item_genres", "parse_columns", "parse_rating_range"):
        assert nm in L.__all__ and hasattr(L, nm)
    assert L.FORMATS is layout_mod.FORMATS and L.load_item_genres is genres.load_item_genres
    for nm in ("load_file", "load_tsv", "load_dat", "load_csv", "load_inter", "detect_format",
               "from_tfds", "load_item_genres", "ML100K_GENRES", "parse_columns",
               "parse_rating_range"):
        assert getattr(dpmt.data, nm) is getattr(L, nm) and nm in dpmt.data.__all__
