"""The ratings container: a sparse user × item matrix with dense integer indices.

Users are the privacy unit; items are the tasks. Indices are dense (0..n_users-1,
0..n_items-1) int32; ``user_ids`` / ``item_ids`` map them back to the raw ids of the source.
CSR views by user and by item are built once, lazily, and cached.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np

from dpmt.errors import DataError


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

    ``n_users``/``n_items`` are the lengths of the id maps, so a split keeps the full index
    space even where some users or items have no entries in it.
    """

    user: np.ndarray
    item: np.ndarray
    value: np.ndarray
    user_ids: np.ndarray
    item_ids: np.ndarray
    timestamp: np.ndarray | None = None
    name: str = "ratings"

    def __post_init__(self):
        nnz = len(self.user)
        if len(self.item) != nnz or len(self.value) != nnz:
            raise DataError("user, item and value arrays must have the same length")
        if self.timestamp is not None and len(self.timestamp) != nnz:
            raise DataError("timestamp must have one entry per rating")
        object.__setattr__(self, "user", np.asarray(self.user, dtype=np.int32))
        object.__setattr__(self, "item", np.asarray(self.item, dtype=np.int32))
        object.__setattr__(self, "value", np.asarray(self.value, dtype=np.float32))
        if nnz:
            if self.user.min() < 0 or self.user.max() >= len(self.user_ids):
                raise DataError("user index out of range of user_ids")
            if self.item.min() < 0 or self.item.max() >= len(self.item_ids):
                raise DataError("item index out of range of item_ids")

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
                f"nnz={self.nnz})")

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

    def compact(self, name: str | None = None) -> "Ratings":
        """Re-index to drop users and items with no ratings."""
        # == np.unique(self.user), without its (slow, hashing) implementation
        u_keep = np.flatnonzero(np.bincount(self.user, minlength=self.n_users))
        i_keep = np.flatnonzero(np.bincount(self.item, minlength=self.n_items))
        u_map = np.full(self.n_users, -1, np.int64); u_map[u_keep] = np.arange(len(u_keep))
        i_map = np.full(self.n_items, -1, np.int64); i_map[i_keep] = np.arange(len(i_keep))
        return Ratings(user=u_map[self.user], item=i_map[self.item], value=self.value,
                       user_ids=self.user_ids[u_keep], item_ids=self.item_ids[i_keep],
                       timestamp=self.timestamp, name=name or self.name)

    @classmethod
    def from_raw(cls, raw_user: np.ndarray, raw_item: np.ndarray, value: np.ndarray,
                 timestamp: np.ndarray | None = None, name: str = "ratings") -> "Ratings":
        """Build from raw ids (any sortable dtype); dense indices follow sorted raw ids."""
        user_ids, user = np.unique(np.asarray(raw_user), return_inverse=True)
        item_ids, item = np.unique(np.asarray(raw_item), return_inverse=True)
        return cls(user=user.astype(np.int32), item=item.astype(np.int32),
                   value=np.asarray(value, np.float32), user_ids=user_ids, item_ids=item_ids,
                   timestamp=None if timestamp is None else np.asarray(timestamp, np.int64),
                   name=name)
