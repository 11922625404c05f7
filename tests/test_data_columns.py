"""Your own CSV/TSV: the columns= mapping, the option parsers for the CLI, load() pass-through."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import load, load_file, parse_columns, parse_rating_range
from dpmt.errors import ConfigError, DataError

OWN = "uid,iid,stars,ts\n10,100,4.5,1000\n11,100,2,1001\n10,200,5,1002\n"
OWN_COLUMNS = {"user": "uid", "item": "iid", "rating": "stars", "timestamp": "ts"}


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def rows(r):
    ts = r.timestamp if r.timestamp is not None else np.zeros(r.nnz, np.int64)
    return sorted(zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist(),
                      r.value.tolist(), ts.tolist()))


EXPECT = [(10, 100, 4.5, 1000), (10, 200, 5.0, 1002), (11, 100, 2.0, 1001)]


# ---------------------------------------------------------------------------------------
# columns=
# ---------------------------------------------------------------------------------------
def test_own_csv_loads_with_columns(tmp_path):
    p = write(tmp_path, "mine.csv", OWN)
    with pytest.raises(DataError, match="no user column"):       # the usual names: no
        load_file(p)
    r = load_file(p, columns=OWN_COLUMNS)
    assert rows(r) == EXPECT and r.timestamp.dtype == np.int64 and r.name == "mine.csv"


def test_own_tsv_and_column_order_and_case(tmp_path):
    p = write(tmp_path, "mine.tsv", "TS\tStars\tIID\tUID\n1000\t4.5\t100\t10\n"
                                    "1001\t2\t100\t11\n1002\t5\t200\t10\n")
    assert rows(load_file(p, columns=OWN_COLUMNS)) == EXPECT      # names match any case


def test_subset_of_columns_keeps_default_names(tmp_path):
    p = write(tmp_path, "m.csv", "uid,movieId,rating,timestamp\n1,2,3,4\n")
    r = load_file(p, columns={"user": "uid"})
    assert rows(r) == [(1, 2, 3.0, 4)]


def test_rating_and_timestamp_may_be_absent(tmp_path):
    p = write(tmp_path, "m.csv", "who,what,note\n1,2,x\n1,3,y\n")
    r = load_file(p, columns={"user": "who", "item": "what"})
    assert r.timestamp is None and r.value.tolist() == [1.0, 1.0] and r.nnz == 2


def test_tsv_with_a_known_header_is_read_by_name(tmp_path):
    p = write(tmp_path, "r.tsv", "movieId\tuserId\trating\n2\t1\t3\n")
    assert rows(load_file(p)) == [(1, 2, 3.0, 0)]


def test_wrong_column_name_lists_the_header(tmp_path):
    p = write(tmp_path, "mine.csv", OWN)
    with pytest.raises(DataError) as e:
        load_file(p, columns={**OWN_COLUMNS, "rating": "score"})
    msg = str(e.value)
    assert f"{p}:1:" in msg and "no column 'score'" in msg
    assert "'uid', 'iid', 'stars', 'ts'" in msg                  # the header's columns
    assert "'rating' entry of columns=" in msg and "--columns rating=COL" in msg


def test_columns_on_a_file_without_header(tmp_path):
    p = write(tmp_path, "n.csv", "1,2,3\n")
    with pytest.raises(DataError, match="must be a header row"):
        load_file(p, columns={"user": "uid"})
    with pytest.raises(ConfigError, match="ratings.dat .* have none"):
        load_file(write(tmp_path, "r.dat", "1::2::3::4\n"), columns={"user": "uid"})


def test_columns_on_recbole_inter(tmp_path):
    p = write(tmp_path, "x.inter", "who:token\twhat:token\tscore:float\n"
                                   "u1\ti1\t3\nu2\ti1\t4\n")
    r = load_file(p, columns={"user": "who", "item": "what", "rating": "score"})
    assert r.user_ids.tolist() == ["u1", "u2"] and r.value.tolist() == [3.0, 4.0]


def test_ambiguous_and_clashing_columns(tmp_path):
    p = write(tmp_path, "d.csv", "a,b,a\n1,2,3\n")
    with pytest.raises(DataError, match="2 columns named 'a'"):
        load_file(p, columns={"user": "a", "item": "b"})
    p = write(tmp_path, "e.csv", "a,A,b\n1,2,3\n")
    assert load_file(p, columns={"user": "A", "item": "b"}).user_ids.tolist() == [2]
    p = write(tmp_path, "f.csv", "a,b\n1,2\n")
    with pytest.raises(DataError, match="maps both 'user' and 'item' to column 'a'"):
        load_file(p, columns={"user": "a", "item": "A"})         # same column, any case


@pytest.mark.parametrize("bad,match", [
    ({"usr": "uid"}, "unknown field 'usr'.*user, item, rating, timestamp"),
    ({"user": ""}, r"columns\['user'\] must be the name"),
    ({"user": 3}, r"columns\['user'\] must be the name"),
    ({"user": "x", "item": "x"}, "maps both 'user' and 'item'"),
    ("user=uid", "must be a mapping.*parse_columns"),
    (["user"], "must be a mapping"),
])
def test_bad_columns_argument(tmp_path, bad, match):
    p = write(tmp_path, "mine.csv", OWN)
    with pytest.raises(ConfigError, match=match) as e:
        load_file(p, columns=bad)
    assert "--columns" in str(e.value)


def test_option_errors_name_python_keyword_and_cli_flag(tmp_path):
    p = write(tmp_path, "mine.csv", OWN.replace("4.5", "9"))
    with pytest.raises(DataError) as e:
        load_file(p, columns=OWN_COLUMNS)
    assert "rating_range=(low, high) (CLI: --rating-range LOW,HIGH)" in str(e.value)
    assert "--rating-range none" in str(e.value)
    assert load_file(p, columns=OWN_COLUMNS, rating_range=(1, 10)).value.max() == 9
    dup = write(tmp_path, "dup.csv", OWN + "10,100,1,999\n")
    with pytest.raises(DataError) as e:
        load_file(dup, columns=OWN_COLUMNS)
    assert "on_duplicate='keep-last' (CLI: --on-duplicate keep-last)" in str(e.value)
    with pytest.raises(ConfigError, match=r"on_duplicate .*--on-duplicate \{error,keep-last\}"):
        load_file(dup, on_duplicate="first")
    with pytest.raises(ConfigError, match=r"rating_range .*--rating-range LOW,HIGH"):
        load_file(dup, rating_range="1,10")                       # strings: parse_rating_range


# ---------------------------------------------------------------------------------------
# CLI spellings
# ---------------------------------------------------------------------------------------
def test_parse_columns():
    assert parse_columns("user=uid,item=mid") == {"user": "uid", "item": "mid"}
    assert parse_columns(" user = my id , timestamp=t=0 ") == {"user": "my id",
                                                               "timestamp": "t=0"}


@pytest.mark.parametrize("spec,match", [
    ("", "field=COLUMN"), ("   ", "field=COLUMN"), (None, "field=COLUMN"),
    ("user", "expected field=COLUMN, got 'user'"), ("user=", "expected field=COLUMN"),
    ("=uid", "expected field=COLUMN"), ("user=a,,item=b", "expected field=COLUMN"),
    ("person=uid", "unknown field 'person'; the fields are user, item, rating, timestamp"),
    ("user=a,user=b", "field 'user' is given twice"),
    ("user=a,item=a", "maps both 'user' and 'item'"),
])
def test_parse_columns_errors(spec, match):
    with pytest.raises(ConfigError, match=match):
        parse_columns(spec)


def test_parse_rating_range():
    assert parse_rating_range("1,10") == (1.0, 10.0)
    assert parse_rating_range(" 0.5 , 5 ") == (0.5, 5.0)
    assert parse_rating_range("-1,1") == (-1.0, 1.0)
    assert parse_rating_range("none") is None and parse_rating_range("None") is None
    assert parse_rating_range("auto") == "auto" and parse_rating_range(" AUTO ") == "auto"


@pytest.mark.parametrize("spec,match", [
    ("", "expected LOW,HIGH"), ("5", "expected LOW,HIGH"), ("1,2,3", "expected LOW,HIGH"),
    ("a,b", "must be numbers"), ("1,", "must be numbers"), ("10,1", "LOW <= HIGH"),
    ("nan,1", "LOW <= HIGH"), ((1, 5), "expects LOW,HIGH"),
])
def test_parse_rating_range_errors(spec, match):
    with pytest.raises(ConfigError, match=match):
        parse_rating_range(spec)


def test_parsed_options_feed_load_file(tmp_path):
    p = write(tmp_path, "mine.csv", OWN.replace("4.5", "9"))
    r = load_file(p, columns=parse_columns("user=uid,item=iid,rating=stars,timestamp=ts"),
                  rating_range=parse_rating_range("1,10"))
    assert r.value.max() == 9
    assert load_file(p, columns=OWN_COLUMNS, rating_range=parse_rating_range("none")).nnz == 3


# ---------------------------------------------------------------------------------------
# dpmt.data.load
# ---------------------------------------------------------------------------------------
def test_load_passes_columns_and_options_for_files(tmp_path):
    p = write(tmp_path, "mine.csv", OWN + "10,100,1,999\n")
    with pytest.raises(DataError, match="duplicated"):
        load(p, columns=OWN_COLUMNS)
    r = load(p, columns=OWN_COLUMNS, on_duplicate="keep-last", rating_range=(1, 5))
    assert rows(r) == EXPECT and r.name == "mine"
    assert load(str(p), columns=OWN_COLUMNS, on_duplicate="keep-last", name="x").name == "x"


def test_load_columns_for_builtin_datasets_is_a_config_error(tmp_path):
    for spec in ("ml-100k", "synthetic", "synthetic:users=5,items=5,interactions=10",
                 "tfds:movielens/100k-ratings"):
        with pytest.raises(ConfigError, match="columns= .*--columns.*fixed layout"):
            load(spec, data_dir=tmp_path, columns={"user": "uid"})
    # the empty mapping is the default
    assert load("synthetic:users=5,items=5,interactions=10", columns={}).nnz == 10


def test_load_checks_options_before_fetching(tmp_path):
    with pytest.raises(ConfigError, match="on_duplicate"):
        load("ml-20m", data_dir=tmp_path, on_duplicate="sum")
    with pytest.raises(ConfigError, match="rating_range"):
        load("ml-20m", data_dir=tmp_path, rating_range=(5, 1))
    assert not any(tmp_path.iterdir())                          # nothing was downloaded


def test_load_registry_dataset_passes_rating_range(tmp_path):
    d = tmp_path / "ml-100k"
    d.mkdir()
    (d / "u.data").write_text("1\t2\t7\t10\n2\t2\t3\t11\n")
    with pytest.raises(DataError, match="rating 7 is outside"):
        load("ml-100k", data_dir=tmp_path)
    r = load("ml-100k", data_dir=tmp_path, rating_range=None)
    assert r.value.max() == 7 and r.name == "ml-100k"


def test_load_synthetic_accepts_the_default_policies():
    r = load("synthetic:users=5,items=5,interactions=10", on_duplicate="keep-last",
             rating_range=(0.5, 5))
    assert r.nnz == 10
