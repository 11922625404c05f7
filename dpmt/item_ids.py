"""The id index of a :class:`dpmt.model.Model`: raw item ids ↔ the dense rows of its
released item embeddings V.

Row i of V is the item ``ids[i]``. A lookup coerces the requested ids to the model's id
type (:func:`coerce_item_ids`: int64 for integer ids, str otherwise, with a clear error for
what cannot be an id) and finds each by binary search in the ids sorted once:
row(x) = order[searchsorted(ids[order], x)] with order = argsort(ids), O(log m) per id.
An id the model does not have is refused by name (``unknown='error'``) or left out
(``unknown='drop'``). The ids are public metadata of the model (its catalogue).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from dpmt.errors import ConfigError, DataError


def out_of_range_message(ids) -> str:
    """What a request for item ids outside int64 is told."""
    return (f"item id(s) {', '.join(str(int(x)) for x in ids)} are outside the 64-bit integer "
            "range of this model's item ids: no such item")


def coerce_item_ids(ids: np.ndarray, kind: str) -> np.ndarray:
    """Requested item ids as the model's id type (``kind``: its dtype kind): int64 for
    integer ids (True/False, non-integral floats and values outside int64 refused, named),
    str otherwise."""
    if kind in "iu":
        if ids.dtype.kind == "b":
            raise DataError("item ids are integers, not True/False")
        if ids.dtype.kind == "f":
            if not np.all(np.isfinite(ids)) or not np.all(ids == np.round(ids)):
                raise DataError(f"item ids must be integers (got {ids[:5].tolist()})")
            if np.any(np.abs(ids) >= 2.0 ** 63):
                raise DataError(out_of_range_message(ids[np.abs(ids) >= 2.0 ** 63][:3]))
            return ids.astype(np.int64)
        if ids.dtype.kind == "u" and ids.dtype.itemsize == 8 and np.any(ids >= 2 ** 63):
            raise DataError(out_of_range_message(ids[ids >= 2 ** 63][:3]))
        if ids.dtype.kind in "iu":
            return ids.astype(np.int64)
        out = []
        for x in ids.tolist():
            if isinstance(x, bool):
                raise DataError("item ids are integers, not True/False")
            try:
                v = int(x)
            except (TypeError, ValueError, OverflowError):
                raise DataError(f"item ids of this model are integers (got "
                                f"{ids[:5].tolist()})") from None
            if not -2 ** 63 <= v < 2 ** 63:
                raise DataError(out_of_range_message([v]))
            out.append(v)
        return np.array(out, np.int64)
    return ids.astype(str)


#: what a lookup does with ids the model does not have
UNKNOWN = ("error", "drop")


class ItemIndex:
    """Raw item ids ↔ rows: ``ids`` (m,) distinct raw ids, row i the item ``ids[i]``
    (``rows``: the number of rows of V the ids must name, if given)."""

    def __init__(self, ids, *, rows: int | None = None):
        ids = np.asarray(ids)
        if rows is not None and ids.shape != (rows,):
            raise DataError(f"item_ids must have one id per row of item_embeddings "
                            f"({rows}; got shape {ids.shape})")
        if ids.ndim != 1:
            raise DataError(f"item ids must be a 1-D array (got shape {ids.shape})")
        if len(np.unique(ids)) != len(ids):
            raise DataError("item_ids contain duplicates")
        self.ids = ids
        order = np.argsort(ids, kind="stable")
        self._sorted_ids, self._sorted_rows = ids[order], order

    def __len__(self) -> int:
        return len(self.ids)

    def coerce(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` as this index's id type (:func:`coerce_item_ids`)."""
        return coerce_item_ids(ids, self.ids.dtype.kind)

    def rows(self, item_ids, *, unknown: str = "error") -> np.ndarray:
        """Dense rows (int64) of raw ``item_ids``. ``unknown='error'`` raises a DataError
        naming the ids the index does not have; ``'drop'`` leaves them out."""
        if unknown not in UNKNOWN:
            raise ConfigError(f"unknown must be 'error' or 'drop' (got {unknown!r})")
        ids = np.asarray(item_ids)
        if ids.ndim != 1:
            raise DataError(f"item ids must be a 1-D sequence (got shape {ids.shape})")
        if ids.size == 0:
            return np.zeros(0, np.int64)
        ids = self.coerce(ids)
        pos = np.searchsorted(self._sorted_ids, ids)
        pos = np.minimum(pos, len(self._sorted_ids) - 1)
        found = self._sorted_ids[pos] == ids
        if not np.all(found):
            if unknown == "drop":
                return self._sorted_rows[pos[found]].astype(np.int64)
            missing = [str(x) for x in ids[~found][:5]]
            raise DataError(f"item id(s) {', '.join(missing)}"
                            f"{' …' if (~found).sum() > 5 else ''} are not in this model "
                            f"({len(self)} items, e.g. {self.ids[0]}); they were "
                            "never rated in the training data")
        return self._sorted_rows[pos].astype(np.int64)

    def histories(self, histories: Sequence, values: Sequence | None,
                  labels: Callable[[np.ndarray, np.ndarray | None], np.ndarray]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(rows, labels) of users' histories of raw ids: each history checked (1-D, known
        ids, no item twice) and its values (one finite number per item, or None) turned into
        labels by ``labels(rows, values)`` (the scorer's, :mod:`dpmt.scoring`)."""
        if isinstance(histories, (str, bytes)) or not hasattr(histories, "__len__"):
            raise DataError("histories must be a sequence of item-id sequences")
        if values is not None and (isinstance(values, (str, bytes))
                                   or not hasattr(values, "__len__")):
            raise DataError("values must be a sequence with one sequence of ratings per "
                            f"history (got {type(values).__name__})")
        if values is not None and len(values) != len(histories):
            raise DataError(f"values must have one entry per history ({len(histories)}; got "
                            f"{len(values)})")
        rows, vals = [], []
        for n, h in enumerate(histories):
            h = np.asarray(h)
            if h.ndim != 1:
                raise DataError(f"history {n} must be a 1-D sequence of item ids (got shape "
                                f"{h.shape})")
            r = self.rows(h)
            if len(np.unique(r)) != len(r):
                raise DataError(f"history {n} lists an item more than once")
            v = None
            if values is not None:
                v = np.asarray(values[n], np.float64)
                if v.shape != (len(r),) or not np.all(np.isfinite(v)):
                    raise DataError(f"values of history {n} must be {len(r)} finite numbers, "
                                    f"one per item (got {np.ravel(values[n]).tolist()[:5]})")
            rows.append(r)
            vals.append(labels(r, v))
        return rows, vals
