"""Parquet ratings files (read with pyarrow, an optional dependency): the columns
:func:`dpmt.data.loaders.load_file` assembles into Ratings exactly as it does a CSV's, so
the same checks apply (the rating range, one entry per (user, item) pair, id ranges)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dpmt.data.layout import _CSV_NAMES, ColumnLayout, _header_columns
from dpmt.errors import ConfigError, DataError

__all__ = ["parquet_columns"]

_AUTO = "auto"


def parquet_columns(p: Path, columns: dict | None, rating_range) -> tuple[dict, ColumnLayout]:
    """The user, item, rating and timestamp columns of a Parquet file, as the text parser
    returns them (ids int64 or exact text, rating float64, timestamp int64 seconds), and
    its layout (rows numbered from 1 in messages). Columns are found by name as in a CSV
    header (or ``columns=``); a null, a fractional or negative id, a fractional timestamp
    or a column of another type is a DataError naming the row."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"{p}: reading Parquet needs pyarrow (pip install pyarrow), or "
                          f"write the ratings as CSV") from None
    if not p.is_file():
        raise DataError(f"ratings file {p} does not exist" if not p.exists()
                        else f"{p} is not a file")
    try:
        schema = pq.read_schema(p)
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"cannot read {p} as Parquet: {e}") from None
    names = list(schema.names)
    cols_at = _header_columns(names, columns, _CSV_NAMES, p, "Parquet schema",
                              ", ".join(names), at=f"{p}")
    try:
        table = pq.read_table(p, columns=[names[j] for j in cols_at.values()])
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"cannot read {p} as Parquet: {e}") from None
    if table.num_rows == 0:
        raise DataError(f"{p}: the Parquet file has no rows")
    lay = ColumnLayout("", len(names), cols_at, 0, None if rating_range == _AUTO else rating_range,
                 token=True, unit="rows")
    out = {}
    for key, j in cols_at.items():
        col, what = table.column(names[j]), f"{key} id" if key in ("user", "item") else key
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        if col.null_count:
            row = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False))) + 1
            raise DataError(f"{p}, row {row}: {what} is missing (null); give every row "
                            f"its {key}, or drop the rows without one")
        t = col.type
        if key in ("user", "item"):
            if pa.types.is_string(t) or pa.types.is_large_string(t):
                v = np.asarray(col.to_numpy(zero_copy_only=False).astype(str))
                bad = v == ""
                if bad.any():
                    raise DataError(f"{p}, row {int(np.argmax(bad)) + 1}: {what} is empty")
            elif pa.types.is_integer(t) or pa.types.is_floating(t):
                v = _integral_column(col.to_numpy(), p, what)
                if len(v) and v.min() < 0:
                    row = int(np.argmax(v < 0)) + 1
                    raise DataError(f"{p}, row {row}: negative {what} {int(v[row - 1])}; ids "
                                    f"must be non-negative integers or text")
            else:
                raise DataError(f"{p}: column {names[j]!r} ({what}) holds {t}; ids must be "
                                f"integers or strings")
        elif key == "rating":
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise DataError(f"{p}: column {names[j]!r} (rating) holds {t}; ratings must "
                                f"be numbers")
            v = col.to_numpy().astype(np.float64)
        else:
            if pa.types.is_timestamp(t) or pa.types.is_date(t):
                col = pc.cast(pc.cast(col, pa.timestamp("s")), pa.int64())
            elif not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise DataError(f"{p}: column {names[j]!r} (timestamp) holds {t}; timestamps "
                                f"must be integers (seconds) or a Parquet timestamp")
            v = _integral_column(col.to_numpy(), p, what)
        out[key] = v
    return out, lay


def _integral_column(v: np.ndarray, p: Path, what: str) -> np.ndarray:
    """A numeric column as int64 when every entry is an integer within int64, else a
    DataError naming the first row that is not."""
    if v.dtype.kind in "iu":
        if v.dtype == np.uint64 and len(v) and v.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(v > np.iinfo(np.int64).max)) + 1
            raise DataError(f"{p}, row {row}: {what} {v[row - 1]} is too large (below 2**63)")
        return v.astype(np.int64, copy=False)
    bad = ~np.isfinite(v) | (np.floor(v) != v) | (np.abs(v) >= 2.0**53)
    if bad.any():
        row = int(np.argmax(bad)) + 1
        x = float(v[row - 1])
        why = ("is beyond 2**53, where floats skip integers" if math.isfinite(x)
               and x == math.floor(x) else "is not an integer")
        raise DataError(f"{p}, row {row}: {what} {x:g} {why}; write the column as integers")
    return v.astype(np.int64)
