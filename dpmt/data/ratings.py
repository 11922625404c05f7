"""The ratings container: a sparse user × item matrix with dense integer indices.

Users are the privacy unit; items are the tasks. Indices are dense (0..n_users-1,
0..n_items-1) int32; ``user_ids`` / ``item_ids`` map them back to the raw ids of the source.
CSR views by user and by item are built once, lazily, and cached.

Public item space. The rows of a released item matrix are ``item_ids``; if they are read
off the ratings, an item that only one user rated appears exactly when that user is in the
data, which no noise elsewhere can hide. ``Ratings.items_public`` records whether
``item_ids`` is data-independent: True only where it comes from a public catalogue
(:meth:`Ratings.from_raw` with ``items=``, the MovieLens item files, a synthetic
universe). Where it is False, training must choose the items privately (partition
selection) before releasing anything indexed by them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import NamedTuple

import numpy as np

from dpmt.errors import ConfigError, DataError


class CSR(NamedTuple):
    """Compressed rows: row r owns ``indices[indptr[r]:indptr[r+1]]``.

    ``order`` maps CSR position -> position in the parent :class:`Ratings` arrays, so any
    per-rating array ``a`` is viewed in CSR order as ``a[order]``.
    """

    indptr: np.ndarray   # int64 (n_rows + 1,)
    indices: np.ndarray  # int32 (nnz,) column index (item for by_user, user for by_item)
    values: np.ndarray   # float32 (nnz,)
    order: np.ndarray    # int64 (nnz,)

    def row(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.indptr[r], self.indptr[r + 1]
        return self.indices[s:e], self.values[s:e]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)


def stable_argsort_int(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for integer keys, several times faster.

    Packs ``key << 32 | position`` into int64 and runs one ``np.sort`` (SIMD-accelerated),
    then reads the positions back (20M int32 keys: ~2.6 s instead of ~8 s). Falls back to
    ``argsort`` when keys are negative or >= 2**31, or there are >= 2**32 of them.
    Returns int64 (n,).
    """
    keys = np.asarray(keys)
    n = len(keys)
    if (keys.dtype.kind not in "iu" or n >= 2**32
            or (n and (int(keys.min()) < 0 or int(keys.max()) >= 2**31))):
        return np.argsort(keys, kind="stable").astype(np.int64)
    packed = keys.astype(np.int64) << 32
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    packed &= 0xFFFFFFFF
    return packed


def _csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_rows: int) -> CSR:
    order = stable_argsort_int(rows)
    counts = np.bincount(rows, minlength=n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return CSR(indptr, cols[order].astype(np.int32), vals[order].astype(np.float32), order)


# ----------------------------------------------------------------------------------------
# Input validation (the constructor is a public entry point: arrays may come from anywhere)
# ----------------------------------------------------------------------------------------
#: Dense indices are int32; they must stay below this bound.
INDEX_LIMIT = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _vector(a, name: str) -> np.ndarray:
    """``a`` as a 1-D numpy array, or DataError."""
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError) as e:                  # ragged nested lists, ...
        raise DataError(f"{name} must be a 1-D array ({e})") from None
    if arr.ndim != 1:
        raise DataError(f"{name} must be a 1-D array, got shape {arr.shape}")
    return arr


def _object_numbers(arr: np.ndarray, name: str, noun: str = "integers") -> np.ndarray:
    """An object array of Python numbers as int64 (exact) or float64 (else, incl. ints
    beyond int64, which the range checks then reject), or DataError."""
    vals = arr.tolist()
    if not all(isinstance(v, (int, float, np.integer, np.floating))
               and not isinstance(v, (bool, np.bool_)) for v in vals):
        kinds = sorted({type(v).__name__ for v in vals})
        raise DataError(f"{name} must be {noun} (got an object array holding "
                        f"{', '.join(kinds)})")
    try:
        if all(isinstance(v, (int, np.integer)) and _INT64_MIN <= v <= _INT64_MAX
               for v in vals):
            return np.array(vals, dtype=np.int64)
        return np.array(vals, dtype=np.float64)
    except OverflowError:
        raise DataError(f"{name} holds a number too large for any index or timestamp") \
            from None


def _integral(arr: np.ndarray, name: str, what: str, dtype, low: int, high: int,
              hint: str = "") -> np.ndarray:
    """``arr`` (1-D) as ``dtype`` if every entry is an integer in ``[low, high)``.

    Accepts integer arrays and float arrays whose entries are exactly integral (e.g. the
    result of numpy arithmetic); rejects bool, text, complex, fractions, NaN, inf and values
    out of range (checked before the cast, so nothing wraps around).
    """
    if arr.dtype.kind == "O":
        arr = _object_numbers(arr, name)
    kind = arr.dtype.kind
    if kind not in "iuf":
        raise DataError(f"{name} must be integers (got dtype {arr.dtype})")
    if len(arr) == 0:
        return arr.astype(dtype)
    if kind == "f":
        bad = ~(np.isfinite(arr) & (np.floor(arr) == arr))
        if bad.any():
            j = int(np.argmax(bad))
            raise DataError(f"{what} {arr[j]:g} at position {j} is not an integer")
    lo, hi = arr.min(), arr.max()
    if lo < low or hi >= high:
        j = int(np.argmax((arr < low) | (arr >= high)))
        v = int(arr[j]) if kind in "iu" else f"{arr[j]:g}"
        raise DataError(f"{what} {v} at position {j} is out of range: must be >= {low} "
                        f"and < {high}{hint}")
    return arr.astype(dtype, copy=False)


def _index(arr: np.ndarray, side: str, n: int) -> np.ndarray:
    """Dense user/item indices: integers in ``[0, min(n, 2**31 - 1))``, as int32."""
    if n <= INDEX_LIMIT:
        high, hint = n, f" (n_{side}s = {n}, the length of {side}_ids)"
    else:
        high, hint = INDEX_LIMIT, " (2**31 - 1: indices are int32)"
    if arr.dtype.kind == "O":
        arr = _object_numbers(arr, side)
    if arr.dtype.kind in "iuf" and len(arr) and arr.max() >= INDEX_LIMIT:
        hint += (f"; indices must be below 2**31 - 1 (int32). Is that a raw id? Dense "
                 f"indices run 0..n_{side}s-1; Ratings.from_raw maps raw ids to them")
    return _integral(arr, side, f"{side} index", np.int32, 0, high, hint)


def _values(arr: np.ndarray) -> np.ndarray:
    """Ratings as finite float32."""
    if arr.dtype.kind == "O":
        arr = _object_numbers(arr, "value", "numbers")
    if arr.dtype.kind not in "biuf":
        raise DataError(f"value must be numbers (got dtype {arr.dtype})")
    with np.errstate(over="ignore"):                      # too large -> inf, reported
        out = arr.astype(np.float32, copy=False)
    bad = ~np.isfinite(out)
    if bad.any():
        j = int(np.argmax(bad))
        orig = arr[j].item()
        raise DataError(f"value at position {j} is {orig}"
                        + ("" if not math.isfinite(orig) else " (inf as float32)")
                        + "; ratings must be finite numbers")
    return out


_ON_DUPLICATE = ("error", "keep-last")


def _timestamps(timestamp, n: int) -> np.ndarray | None:
    """Timestamps as int64 (n,), one per rating, or None."""
    if timestamp is None:
        return None
    timestamp = _vector(timestamp, "timestamp")
    if len(timestamp) != n:
        raise DataError(f"timestamp must have one entry per rating (got {len(timestamp)} for "
                        f"{n} ratings)")
    return _integral(timestamp, "timestamp", "timestamp", np.int64, _INT64_MIN, _INT64_MAX)


def keep_last_rows(key: np.ndarray, timestamp: np.ndarray | None) -> np.ndarray:
    """Sorted row indices that keep one row per distinct ``key``: the row with the latest
    timestamp, and among equal (or absent) timestamps the last row."""
    rowpos = np.arange(len(key))
    keys = (rowpos, key) if timestamp is None else (rowpos, timestamp, key)
    o = np.lexsort(keys)
    last = np.r_[key[o][1:] != key[o][:-1], True]
    return np.sort(o[last])


# ----------------------------------------------------------------------------------------
# The invariants the privacy analysis needs, checked here for every input
# ----------------------------------------------------------------------------------------
def dense_ids(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique raw ids, int32 dense index of each entry) = ``np.unique(raw,
    return_inverse=True)``, in O(n) through a lookup table for compact non-negative integer
    ids (every MovieLens file), else by sorting. Byte-string ids (``S``, the parser's text
    ids) come back as text."""
    raw = np.asarray(raw)
    if raw.dtype.kind == "S":                             # exact UTF-8 bytes (the parser's)
        ids, inv = _unique_bytes(raw)                     # byte order = code point order
        try:
            text = [x.decode("utf-8") for x in ids.tolist()]
        except UnicodeDecodeError as e:
            raise DataError(f"an id is not valid UTF-8 ({e}); re-encode the data as "
                            f"UTF-8") from None
        return np.array(text, dtype=str), inv.reshape(-1).astype(np.int32)
    if raw.dtype.kind in "iu" and len(raw):
        lo, hi = int(raw.min()), int(raw.max())
        if lo >= 0 and hi < max(4 * len(raw), 1 << 20):
            present = np.zeros(hi + 1, bool)
            present[raw] = True
            ids = np.flatnonzero(present)
            remap = np.cumsum(present, dtype=np.int32) - 1
            return ids.astype(raw.dtype if raw.dtype.kind == "i" else np.int64), remap[raw]
    if raw.dtype.kind == "f" and len(raw):
        bad = ~np.isfinite(raw) | (np.abs(raw) >= 2.0**53)
        if bad.any():
            j = int(np.argmax(bad))
            what = ("missing (NaN)" if np.isnan(raw[j]) else f"{raw[j]:g}, too large for a "
                    f"float to tell neighbouring ids apart")
            raise DataError(f"id at position {j} is {what}; every rating needs its user's "
                            f"and item's id (as integers or strings: float ids are exact "
                            f"only below 2**53)")
    try:
        ids, inv = np.unique(raw, return_inverse=True)
    except TypeError as e:                                # e.g. mixed str/int objects
        raise DataError(f"raw ids must be sortable values of one kind ({e})") from None
    return ids, inv.reshape(-1).astype(np.int32)


def _unique_bytes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(raw, return_inverse=True)`` for a byte-string array, sorting ids of up to
    16 bytes as two big-endian integers (their order is the strings' order: the padding
    bytes are zeros), several times faster than numpy's string sort."""
    n, width = len(raw), raw.dtype.itemsize
    if width > 16 or n == 0 or width == 0:
        return np.unique(raw, return_inverse=True)
    b = np.zeros((n, 16), np.uint8)
    b[:, :width] = raw.view(np.uint8).reshape(n, width)
    k = b.view(">u8").astype(np.uint64)
    del b
    hi, lo = k[:, 0], k[:, 1]
    order = np.argsort(hi, kind="stable") if width <= 8 else np.lexsort((lo, hi))
    hs = hi[order]
    new = np.empty(n, bool)
    new[0] = True
    new[1:] = hs[1:] != hs[:-1]
    if width > 8:
        ls = lo[order]
        new[1:] |= ls[1:] != ls[:-1]
    inv = np.empty(n, np.int64)
    inv[order] = np.cumsum(new) - 1
    return raw[order[new]], inv


def one_entry_per_pair(user: np.ndarray, item: np.ndarray, n_items: int,
                       timestamp: np.ndarray | None = None, *, on_duplicate: str = "error",
                       user_ids=None, item_ids=None, source: str = "",
                       where=None, unit: str = "positions", hint: str = "",
                       ) -> np.ndarray | None:
    """The one check of "one entry per (user, item) pair", which the privacy analysis
    needs (a user's contribution to an item is one rating): every loader, adapter and
    :meth:`Ratings.from_raw` calls it.

    ``user``/``item``: dense indices. Returns None when every pair is distinct; else, under
    ``on_duplicate="keep-last"``, the sorted rows to keep (:func:`keep_last_rows`); under
    ``"error"`` a DataError naming the first duplicated pair (by raw id), where it occurs
    (``where(rows)`` -> the rows' numbers as the source counts them, e.g. file lines;
    default their positions), and how many pairs are duplicated. ``source`` prefixes the
    message (a file name); ``unit`` names what ``where`` counts; ``hint`` replaces the
    default advice.
    """
    if on_duplicate not in _ON_DUPLICATE:
        raise ConfigError(f"on_duplicate must be 'error' or 'keep-last' "
                          f"(got {on_duplicate!r})")
    key = np.asarray(user).astype(np.int64) * max(int(n_items), 1) + item
    ks = np.sort(key)                                     # np.sort is ~4x faster than argsort
    if len(ks) < 2 or not np.any(ks[1:] == ks[:-1]):
        return None                                       # the common case: all distinct
    if on_duplicate == "keep-last":
        return keep_last_rows(key, timestamp)
    order = np.argsort(key, kind="stable")                # stable: ties stay in row order
    ks = key[order]
    dup_next = ks[1:] == ks[:-1]
    rows = order[ks == ks[int(np.argmax(dup_next))]]      # in row order
    n_pairs = int(np.count_nonzero(dup_next & ~np.r_[False, dup_next[:-1]]))
    u, i = int(user[rows[0]]), int(item[rows[0]])
    u = u if user_ids is None else user_ids[u]
    i = i if item_ids is None else item_ids[i]
    shown = where(rows[:5]) if where is not None else [int(r) for r in rows[:5]]
    more = ", ..." if len(rows) > 5 else ""
    surplus = {"positions": "entries"}.get(unit, unit)
    advice = hint or (
        f"Pass on_duplicate='keep-last'{' (CLI: --on-duplicate keep-last)' if source else ''}"
        f" to keep the latest rating of each pair (latest timestamp, then last "
        f"{unit[:-1]}), or de-duplicate the "
        f"{'file' if source else 'input'}")
    raise DataError(
        f"{source + ': ' if source else ''}(user {u}, item {i}) "
        f"{'is rated' if source else 'appears'} {len(rows)} times ({unit} "
        f"{', '.join(map(str, shown))}{more}); {n_pairs} (user, item) pairs are duplicated "
        f"in total ({int(dup_next.sum())} surplus {surplus}). {advice}")


# ----------------------------------------------------------------------------------------
# Public item catalogues
# ----------------------------------------------------------------------------------------
_CATALOGUE_HINT = ("every rated item must be in the public item catalogue: add the id to "
                   "the catalogue, or drop the ratings of items outside it before loading")


def _comparable(ids: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` and ``raw`` in one comparable kind: as they are when both are numbers or
    both text, else both as text (``7`` and ``"7"`` match, ``"007"`` does not)."""
    num_ids, num_raw = ids.dtype.kind in "biuf", raw.dtype.kind in "biuf"
    if num_ids == num_raw:
        return ids, raw
    return ids.astype(str), raw.astype(str)


def catalogue_ids(items, what: str = "the item catalogue (items=)") -> np.ndarray:
    """A public item catalogue as its sorted raw ids, or DataError.

    ``items``: 1-D array-like of raw ids of one sortable kind (ints or strings), no id
    twice, at least one. The dense index of an item is its position in the sorted
    catalogue (as :meth:`Ratings.from_raw` orders ids read from the ratings).
    """
    if isinstance(items, (str, bytes, os.PathLike)):
        raise DataError(f"{what} must be raw item ids, not {items!r}; read a catalogue file "
                        f"with dpmt.data.read_item_catalogue(path)")
    arr = _vector(items, "items")
    if len(arr) == 0:
        raise DataError(f"{what} is empty; give the public list of item ids (at least one)")
    try:
        ids, counts = np.unique(arr, return_counts=True)
    except TypeError as e:                                # mixed str/int objects, ...
        raise DataError(f"{what}: ids must be sortable values of one kind ({e})") from None
    if len(ids) != len(arr):
        dup = ids[counts > 1]
        pos = np.flatnonzero(arr == dup[0])[:5].tolist()
        raise DataError(f"{what} lists item {dup[0]!s} {int(counts[counts > 1][0])} times "
                        f"(positions {', '.join(map(str, pos))}); {len(dup)} ids are "
                        f"repeated. Give each item once")
    if ids.dtype.kind == "O":
        kinds = {type(v).__name__ for v in ids.tolist()}
        if len(kinds) > 1:
            raise DataError(f"{what}: ids must be of one kind (got {', '.join(sorted(kinds))})")
    return ids


def catalogue_index(raw_item: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense indices of raw item ids in a catalogue (sorted, as :func:`catalogue_ids`).

    Returns ``(item_ids, index)``: ``item_ids`` the catalogue (as text where one side is
    text and the other numbers, see :func:`_comparable`), ``index`` int64 (n,) with -1
    where a raw id is not in the catalogue. O(n) through a lookup table for compact
    non-negative integer ids, else a binary search.
    """
    ids, raw = _comparable(ids, np.asarray(raw_item))
    n = len(raw)
    if ids.dtype.kind in "iu" and raw.dtype.kind in "iu" and len(ids) and n:
        lo = min(int(ids.min()), int(raw.min()))
        hi = max(int(ids.max()), int(raw.max()))
        if lo >= 0 and hi < max(4 * (n + len(ids)), 1 << 20):
            table = np.full(hi + 1, -1, np.int64)
            table[ids] = np.arange(len(ids))
            return ids, table[raw]
    if not n:
        return ids, np.zeros(0, np.int64)
    try:
        pos = np.minimum(np.searchsorted(ids, raw), len(ids) - 1)
        found = ids[pos] == raw
    except TypeError as e:
        raise DataError(f"raw item ids and the item catalogue cannot be compared ({e})") \
            from None
    return ids, np.where(found, pos, -1).astype(np.int64)


def missing_items_message(raw_item: np.ndarray, index: np.ndarray, where: str,
                          catalogue: str = "the public item catalogue (items=)") -> str:
    """``<where>: item X is not in <catalogue>; ...`` for the first rating with index -1;
    ``where`` names the rating (e.g. ``rating 12`` or ``file:line``)."""
    bad = index < 0
    first = np.asarray(raw_item)[int(np.argmax(bad))]
    n_items = len(np.unique(np.asarray(raw_item)[bad]))
    return (f"{where}: item {first!s} is not in {catalogue}; {int(bad.sum())} ratings of "
            f"{n_items} distinct items are outside it. {_CATALOGUE_HINT}")


@dataclasses.dataclass(frozen=True, eq=False)
class Ratings:
    """Ratings as coordinate arrays (one entry per (user, item) pair).

    Attributes:
      user: int32 (nnz,) dense user index.
      item: int32 (nnz,) dense item index.
      value: float32 (nnz,) rating (or 1.0 for implicit feedback).
      timestamp: optional int64 (nnz,) seconds since the epoch.
      user_ids: (n_users,) raw user id of each dense index.
      item_ids: (n_items,) raw item id of each dense index.
      name: a label for reports.
      items_public: True when the item index space (``item_ids``, hence ``n_items``) is
        public: a function of public information alone (a catalogue, a synthetic universe),
        the same whichever users are in the data. False (the default) when it was, or may
        have been, read off the ratings; training must then select items privately. Every
        derived container keeps it (select, with_values, ``dataclasses.replace``) except
        :meth:`compact`, which drops unrated items and so sets it False.
      implicit: True when the source holds no ratings, only (user, item) events (a file
        without a rating column, synthetic data): every entry is a positive, and training
        does not binarise at a rating threshold. Kept by every derived container.

    ``n_users``/``n_items`` are the lengths of the id maps, so a split keeps the full index
    space even where some users or items have no entries in it.

    The constructor checks its input and raises DataError naming the problem: every array
    1-D; user, item, value (and timestamp) of equal length; user/item integers (or floats
    that are exactly integral) with ``0 <= index < n_users`` / ``n_items`` (and < 2**31 - 1,
    checked before the int32 cast so nothing wraps); values finite numbers; timestamps
    integral and within int64. Repeated (user, item) pairs are allowed here (a stream may
    re-rate); :meth:`from_raw` rejects them by default.
    """

    user: np.ndarray
    item: np.ndarray
    value: np.ndarray
    user_ids: np.ndarray
    item_ids: np.ndarray
    timestamp: np.ndarray | None = None
    name: str = "ratings"
    items_public: bool = False
    implicit: bool = False

    def __post_init__(self):
        if not isinstance(self.items_public, (bool, np.bool_)):
            raise DataError(f"items_public must be True or False (got "
                            f"{self.items_public!r})")
        object.__setattr__(self, "items_public", bool(self.items_public))
        if not isinstance(self.implicit, (bool, np.bool_)):
            raise DataError(f"implicit must be True or False (got {self.implicit!r})")
        object.__setattr__(self, "implicit", bool(self.implicit))
        user_ids = _vector(self.user_ids, "user_ids")
        item_ids = _vector(self.item_ids, "item_ids")
        value = _vector(self.value, "value")
        user = _vector(self.user, "user")
        item = _vector(self.item, "item")
        nnz = len(user)
        if len(item) != nnz or len(value) != nnz:
            raise DataError(f"user, item and value arrays must have the same length (got "
                            f"user {nnz}, item {len(item)}, value {len(value)})")
        timestamp = _timestamps(self.timestamp, nnz)
        object.__setattr__(self, "user_ids", user_ids)
        object.__setattr__(self, "item_ids", item_ids)
        object.__setattr__(self, "user", _index(user, "user", len(user_ids)))
        object.__setattr__(self, "item", _index(item, "item", len(item_ids)))
        object.__setattr__(self, "value", _values(value))
        object.__setattr__(self, "timestamp", timestamp)

    # -- sizes ------------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def nnz(self) -> int:
        return len(self.user)

    def __len__(self) -> int:
        return self.nnz

    def __repr__(self) -> str:
        return (f"Ratings(name={self.name!r}, users={self.n_users}, items={self.n_items}, "
                f"nnz={self.nnz}, items_public={self.items_public})")

    # -- views --------------------------------------------------------------------------
    @functools.cached_property
    def by_user(self) -> CSR:
        """CSR with one row per user; ``indices`` are items."""
        return _csr(self.user, self.item, self.value, self.n_users)

    @functools.cached_property
    def by_item(self) -> CSR:
        """CSR with one row per item; ``indices`` are users."""
        return _csr(self.item, self.user, self.value, self.n_items)

    def item_counts(self) -> np.ndarray:
        """n_i: number of ratings of each item, int64 (n_items,). Exact: not private."""
        return np.bincount(self.item, minlength=self.n_items)

    def user_counts(self) -> np.ndarray:
        """Number of ratings of each user, int64 (n_users,)."""
        return np.bincount(self.user, minlength=self.n_users)

    # -- derived containers ---------------------------------------------------------------
    def select(self, mask_or_index: np.ndarray, name: str | None = None) -> "Ratings":
        """The ratings at ``mask_or_index``, keeping the same index space."""
        ix = np.asarray(mask_or_index)
        return dataclasses.replace(
            self,
            user=self.user[ix], item=self.item[ix], value=self.value[ix],
            timestamp=None if self.timestamp is None else self.timestamp[ix],
            name=name or self.name,
        )

    def with_values(self, value: np.ndarray, name: str | None = None) -> "Ratings":
        return dataclasses.replace(self, value=np.asarray(value, np.float32),
                                   name=name or self.name)

    def compact(self, name: str | None = None, *, keep_items: bool = False) -> "Ratings":
        """Re-index to drop users and items with no ratings.

        Dropping unrated items makes the item space depend on the data, so the result has
        ``items_public=False``. ``keep_items=True`` drops only users without ratings and
        keeps the item index space (and ``items_public``) as it is.
        """
        # == np.unique(self.user), without its (slow, hashing) implementation
        u_keep = np.flatnonzero(np.bincount(self.user, minlength=self.n_users))
        u_map = np.full(self.n_users, -1, np.int64); u_map[u_keep] = np.arange(len(u_keep))
        if keep_items:
            item, item_ids, public = self.item, self.item_ids, self.items_public
        else:
            i_keep = np.flatnonzero(np.bincount(self.item, minlength=self.n_items))
            i_map = np.full(self.n_items, -1, np.int64)
            i_map[i_keep] = np.arange(len(i_keep))
            item, item_ids, public = i_map[self.item], self.item_ids[i_keep], False
        return Ratings(user=u_map[self.user], item=item, value=self.value,
                       user_ids=self.user_ids[u_keep], item_ids=item_ids,
                       timestamp=self.timestamp, name=name or self.name, items_public=public,
                       implicit=self.implicit)

    @classmethod
    def from_raw(cls, raw_user: np.ndarray, raw_item: np.ndarray, value: np.ndarray,
                 timestamp: np.ndarray | None = None, name: str = "ratings", *,
                 on_duplicate: str = "error", items=None) -> "Ratings":
        """Build from raw ids (any sortable dtype); dense indices follow sorted raw ids.

        ``items``: the public item catalogue, raw item ids (1-D, each once, e.g. from
        :func:`~dpmt.data.loaders.read_item_catalogue`). Given, the item index space is
        exactly the catalogue, sorted (items nobody rated included), and
        ``items_public=True``; a rating of an id outside it is a DataError naming the id.
        Ids compare as numbers when both sides are numbers, else as text. Without it the
        items are those rated, sorted, and ``items_public=False``.

        ``on_duplicate``: a (user, item) pair given more than once is a DataError
        (``"error"``, default), or ``"keep-last"`` keeps one rating per pair, the one with the
        latest timestamp and among equal (or absent) timestamps the last one (as the file
        loaders do).
        """
        if on_duplicate not in _ON_DUPLICATE:
            raise ConfigError(f"on_duplicate must be 'error' or 'keep-last' "
                              f"(got {on_duplicate!r})")
        raw_user = _vector(raw_user, "raw_user")
        raw_item = _vector(raw_item, "raw_item")
        value = _vector(value, "value")
        n = len(raw_user)
        if len(raw_item) != n or len(value) != n:
            raise DataError(f"raw_user, raw_item and value must have the same length (got "
                            f"{n}, {len(raw_item)}, {len(value)})")
        timestamp = _timestamps(timestamp, n)
        user_ids, user = dense_ids(raw_user)
        if items is None:
            item_ids, item = dense_ids(raw_item)
        else:
            item_ids, item = catalogue_index(raw_item, catalogue_ids(items))
            if n and item.min() < 0:
                j = int(np.argmax(item < 0))
                raise DataError(missing_items_message(raw_item, item, f"rating {j}"))
        keep = one_entry_per_pair(user, item, len(item_ids), timestamp,
                                  on_duplicate=on_duplicate, user_ids=user_ids,
                                  item_ids=item_ids)
        if keep is not None:
            user, item, value = user[keep], item[keep], value[keep]
            timestamp = None if timestamp is None else timestamp[keep]
        return cls(user=user.astype(np.int32), item=item.astype(np.int32), value=value,
                   user_ids=user_ids, item_ids=item_ids, timestamp=timestamp, name=name,
                   items_public=items is not None)
