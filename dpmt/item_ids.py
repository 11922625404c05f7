"""Item ids as a :class:`dpmt.model.Model` is asked for them: coerced to the model's id
type, with a clear error for what cannot be an id."""

from __future__ import annotations

import numpy as np

from dpmt.errors import DataError


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
