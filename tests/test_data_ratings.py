"""The Ratings container: hostile arrays at the constructor, duplicates in from_raw."""

from __future__ import annotations

import numpy as np
import pytest

from dpmt.data import Ratings
from dpmt.errors import ConfigError, DataError


def mk(user=(0, 1), item=(1, 0), value=(1.0, 2.0), n_users=2, n_items=2, **kw):
    return Ratings(user=user, item=item, value=value, user_ids=np.arange(n_users),
                   item_ids=np.arange(n_items), **kw)


# ---------------------------------------------------------------------------------------
# legitimate inputs keep working
# ---------------------------------------------------------------------------------------
def test_lists_ints_and_integral_floats_are_accepted():
    r = mk(user=[0, 1], item=np.array([1.0, 0.0]), value=[3, 4])
    assert r.user.dtype == np.int32 and r.item.dtype == np.int32
    assert r.item.tolist() == [1, 0] and r.value.dtype == np.float32
    r = mk(user=np.array([0, 1], np.uint64), item=np.array([1, 0], np.int64))
    assert r.user.tolist() == [0, 1]


def test_empty_arrays_of_any_numeric_dtype():
    r = Ratings(user=np.zeros(0), item=[], value=np.zeros(0), user_ids=np.arange(3),
                item_ids=np.arange(2), timestamp=np.zeros(0))
    assert r.nnz == 0 and r.user.dtype == np.int32 and r.timestamp.dtype == np.int64


def test_select_and_compact_still_work():
    r = mk(user=[0, 1, 1], item=[1, 0, 1], value=[1.0, 2.0, 3.0], timestamp=[5, 6, 7])
    s = r.select(r.user == 1)
    assert s.nnz == 2 and s.timestamp.tolist() == [6, 7]
    c = s.compact()
    assert c.n_users == 1 and c.user.tolist() == [0, 0]


# ---------------------------------------------------------------------------------------
# hostile ids
# ---------------------------------------------------------------------------------------
def test_id_beyond_int32_is_rejected_not_wrapped():
    # 2**32 used to wrap to 0 in the int32 cast (and then pass the range check)
    with pytest.raises(DataError, match=r"user index 4294967296 at position 0 .*2\*\*31"):
        mk(user=[2**32, 1])
    with pytest.raises(DataError, match="item index"):
        mk(item=np.array([0, 2**31 - 1], np.int64), n_items=3)


def test_fractional_id_is_rejected_not_truncated():
    with pytest.raises(DataError, match=r"user index 0.7 at position 0 is not an integer"):
        mk(user=[0.7, 1.0])
    with pytest.raises(DataError, match="not an integer"):
        mk(item=[1.0, np.nan])
    with pytest.raises(DataError, match="not an integer"):
        mk(item=[1.0, np.inf])


@pytest.mark.parametrize("bad,what", [
    (np.array(["0", "1"]), "must be integers"),
    (np.array([True, False]), "must be integers"),
    (np.array([0, 1], dtype=complex), "must be integers"),
    (np.array([object(), 1], dtype=object), "must be integers"),
])
def test_non_numeric_ids_are_rejected(bad, what):
    with pytest.raises(DataError, match=f"user .*{what}"):
        mk(user=bad)


def test_negative_and_out_of_range_ids():
    with pytest.raises(DataError, match=r"user index -1 at position 1 .*>= 0"):
        mk(user=[0, -1])
    with pytest.raises(DataError, match=r"item index 2 at position 0 .*n_items = 2"):
        mk(item=[2, 0])


def test_two_dimensional_arrays_are_rejected():
    with pytest.raises(DataError, match=r"user must be a 1-D array.*shape \(2, 1\)"):
        mk(user=np.array([[0], [1]]))
    with pytest.raises(DataError, match=r"value must be a 1-D array"):
        mk(value=np.ones((2, 1)))
    with pytest.raises(DataError, match=r"user_ids must be a 1-D array"):
        Ratings(user=[0], item=[0], value=[1.0], user_ids=np.zeros((1, 1)),
                item_ids=np.arange(1))
    with pytest.raises(DataError, match=r"timestamp must be a 1-D array"):
        mk(timestamp=np.zeros((2, 1)))
    with pytest.raises(DataError, match="1-D"):
        mk(user=5)                                               # a scalar


def test_lengths_must_match():
    with pytest.raises(DataError, match=r"same length .*user 3, item 2, value 2"):
        mk(user=[0, 1, 1])
    with pytest.raises(DataError, match="timestamp"):
        mk(timestamp=[1])


def test_bad_values_and_timestamps():
    with pytest.raises(DataError, match=r"value at position 1 is nan"):
        mk(value=[1.0, np.nan])
    with pytest.raises(DataError, match="value must be numbers"):
        mk(value=np.array(["a", "b"]))
    with pytest.raises(DataError, match=r"timestamp 1.5 at position 0 is not an integer"):
        mk(timestamp=[1.5, 2.0])
    assert mk(timestamp=np.array([1.0, 2.0])).timestamp.dtype == np.int64


# ---------------------------------------------------------------------------------------
# from_raw
# ---------------------------------------------------------------------------------------
def test_from_raw_rejects_duplicate_pairs():
    with pytest.raises(DataError) as e:
        Ratings.from_raw([7, 8, 7, 7], [1, 1, 1, 2], [1.0, 2.0, 3.0, 4.0])
    msg = str(e.value)
    assert "(user 7, item 1) appears 2 times (positions 0, 2)" in msg
    assert "on_duplicate='keep-last'" in msg


def test_from_raw_keep_last():
    r = Ratings.from_raw([7, 8, 7, 7], [1, 1, 1, 2], [1.0, 2.0, 3.0, 4.0],
                         on_duplicate="keep-last")
    got = sorted(zip(r.user_ids[r.user].tolist(), r.item_ids[r.item].tolist(),
                     r.value.tolist()))
    assert got == [(7, 1, 3.0), (7, 2, 4.0), (8, 1, 2.0)]
    # with timestamps the latest one wins, then the last position
    r = Ratings.from_raw([1, 1, 1], [2, 2, 2], [1.0, 2.0, 3.0], timestamp=[10, 30, 30],
                         on_duplicate="keep-last")
    assert r.value.tolist() == [3.0] and r.timestamp.tolist() == [30]
    r = Ratings.from_raw([1, 1], [2, 2], [1.0, 2.0], timestamp=[30, 10],
                         on_duplicate="keep-last")
    assert r.value.tolist() == [1.0]
    with pytest.raises(ConfigError, match="on_duplicate"):
        Ratings.from_raw([1], [2], [1.0], on_duplicate="sum")


def test_from_raw_shapes():
    with pytest.raises(DataError, match=r"raw_user must be a 1-D array"):
        Ratings.from_raw(np.zeros((2, 2)), np.arange(4), np.ones(4))
    with pytest.raises(DataError, match="same length"):
        Ratings.from_raw([1, 2], [1], [1.0, 1.0])
    r = Ratings.from_raw(np.array(["b", "a"]), [5, 5], [1.0, 2.0], name="t")
    assert r.user_ids.tolist() == ["a", "b"] and r.user.tolist() == [1, 0] and r.name == "t"
