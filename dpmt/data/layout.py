"""The column layout of a ratings file: where the user, item, rating and timestamp fields
are (fixed positions for ``u.data`` / ``ratings.dat``; located by header name for CSV,
TSV-with-header and RecBole ``.inter`` files, optionally through a ``columns=`` mapping),
and how to read them (:class:`ColumnLayout`). :mod:`dpmt.data.parsing` turns the bytes into
columns with it."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from dpmt.errors import ConfigError, DataError

__all__ = ["FIELDS", "FORMATS", "MOVIELENS_RATING_RANGE", "ColumnLayout", "first_line", "layout"]

#: Canonical format names and their aliases.
FORMATS = {
    "parquet": "parquet", "pq": "parquet",
    "tsv": "tsv", "udata": "tsv", "u.data": "tsv", "ml-100k": "tsv",
    "dat": "dat", "ml-1m": "dat", "ml-10m": "dat",
    "csv": "csv", "ml-20m": "csv", "ml-25m": "csv", "ml-latest": "csv",
    "ml-latest-small": "csv",
    "inter": "inter", "recbole": "inter",
}

#: Rating scale of every MovieLens release (ML-100K/1M use whole stars 1..5, later ones
#: half stars 0.5..5); the default range check for the MovieLens formats.
MOVIELENS_RATING_RANGE = (0.5, 5.0)

#: The fields a ratings file can hold (the keys of ``columns=``); user and item are required.
FIELDS = ("user", "item", "rating", "timestamp")

_AUTO = "auto"


# ----------------------------------------------------------------------------------------
# Column layout
# ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ColumnLayout:
    """Where the fields live in a file, and how to read them.

    ``cols`` maps field name (``user``, ``item``, ``rating``, ``timestamp``) to column index;
    ``token`` is True where user/item ids may be arbitrary text (RecBole ``:token``, and
    the columns of a CSV/TSV file with a header, e.g. IMDb's ``tt0111161``): kept as exact
    text unless every id is a canonical integer; ``float_time`` allows fractional
    timestamps (RecBole ``timestamp:float``), rounded; ``quoting``: fields may be quoted as
    in RFC 4180 (``"22"``, ``"a,b"``, a quote inside written twice; CSV files, TSV files with
    a header);
    ``unit``: what a position in the source is called in messages (lines of a file).
    """

    sep: str
    ncols: int
    cols: dict
    header_lines: int
    rating_range: tuple | None
    token: bool = False
    float_time: bool = False
    quoting: bool = False
    unit: str = "lines"


_CSV_NAMES = {
    "user": ("userid", "user_id", "user"),
    "item": ("movieid", "itemid", "item_id", "movie_id", "item"),
    "rating": ("rating", "user_rating"),
    "timestamp": ("timestamp", "time"),
}


def first_line(data: bytes) -> str:
    """The first line of ``data`` as text (no line end, no byte-order mark)."""
    end = data.find(b"\n")
    line = data if end < 0 else data[:end]
    return line.decode("utf-8", errors="replace").rstrip("\r").lstrip("\ufeff")



_INTER_NAMES = {
    "user": ("user_id", "userid", "user"),
    "item": ("item_id", "itemid", "movie_id", "item"),
    "rating": ("rating",),
    "timestamp": ("timestamp",),
}

_FLAG = "--columns user=COL,item=COL,rating=COL,timestamp=COL"


def _header_columns(names: list[str], columns: dict | None, defaults: dict, path: Path,
                    what: str, first: str, at: str | None = None) -> dict:
    """Field -> column index from the header ``names``; ``at`` prefixes the messages
    (default ``path:1``, the header line).

    Fields named in ``columns`` are looked up by that name (exact, else the one
    case-insensitive match) and must exist; the others by their usual names in
    ``defaults`` (case-insensitive), and only user and item are required.
    """
    at = at or f"{path}:1"
    low = [n.lower() for n in names]
    shown = ", ".join(repr(n) for n in names[:40]) + (", ..." if len(names) > 40 else "")
    cols: dict[str, int] = {}
    for key, want in (columns or {}).items():
        hits = [j for j, n in enumerate(names) if n == want]
        if not hits:
            hits = [j for j, n in enumerate(low) if n == want.lower()]
        if len(hits) > 1:
            raise DataError(f"{at}: the {what} has {len(hits)} columns named {want!r} "
                            f"(columns {', '.join(str(j + 1) for j in hits)}), so the "
                            f"{key!r} entry of columns= is ambiguous; rename one of them in "
                            f"the file")
        if not hits:
            hint = ("" if any(c.isalpha() for c in first) else
                    "; the first line must be a header row naming the columns (a file "
                    "without a header is read without columns=, as user,item[,rating"
                    "[,timestamp]])")
            raise DataError(f"{at}: the {what} has no column {want!r}; its columns are "
                            f"{shown}. Fix the {key!r} entry of columns= (CLI: --columns "
                            f"{key}=COL){hint}")
        j = hits[0]
        other = [k for k, c in cols.items() if c == j]
        if other:
            raise DataError(f"{at}: columns= maps both {other[0]!r} and {key!r} to "
                            f"column {names[j]!r}; give each field its own column "
                            f"(CLI: {_FLAG})")
        cols[key] = j
    for key, known in defaults.items():
        if key in cols:
            continue
        for j, n in enumerate(low):
            if n in known and j not in cols.values():
                cols[key] = j
                break
    for key in ("user", "item"):
        if key not in cols:
            raise DataError(
                f"{at}: {what} {first!r} has no {key} column (expected one of "
                f"{', '.join(defaults[key])}); name it with columns={{{key!r}: COL}} "
                f"(CLI: --columns {key}=COL), or fix the header")
    return cols


def _header_names(first: str, sep: str) -> list[str]:
    if '"' in first:                                      # quoted names (RFC 4180)
        try:
            fields = next(csv.reader([first], delimiter=sep, strict=True))
        except csv.Error:
            fields = first.split(sep)
    else:
        fields = first.split(sep)
    return [f.strip().strip('"').strip() for f in fields]


def layout(fmt: str, data: bytes, path: Path, rating_range, columns: dict | None = None
           ) -> ColumnLayout:
    """The layout of canonical format ``fmt`` (see :data:`FORMATS`) for a file whose bytes
    start with ``data``. ``rating_range``: (low, high), None or "auto" (already checked);
    ``columns``: field -> header name (already checked), or None."""
    mlr = MOVIELENS_RATING_RANGE if rating_range == _AUTO else rating_range
    fixed = {"user": 0, "item": 1, "rating": 2, "timestamp": 3}
    if fmt == "dat":
        if columns:
            raise ConfigError(f"{path}: columns= names the columns of a header row, but "
                              f"ratings.dat files (format 'dat') have none; drop columns= "
                              f"(CLI: --columns)")
        return ColumnLayout("::", 4, fixed, 0, mlr)
    first = first_line(data)
    if fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        names = _header_names(first, sep)
        if fmt == "csv":
            header = columns is not None or any(c.isalpha() for c in first)
        else:                       # u.data has no header; a TSV with a known one is read
            low = [n.lower() for n in names]
            header = columns is not None or all(
                any(n in _CSV_NAMES[k] for n in low) for k in ("user", "item"))
        if header:
            what = "CSV header" if fmt == "csv" else "TSV header"
            cols = _header_columns(names, columns, _CSV_NAMES, path, what, first)
            # your own file: ids may be text (IMDb's tt0111161), fields may be quoted
            return ColumnLayout(sep, len(names), cols, 1, mlr, token=True, quoting=True)
        if fmt == "tsv":
            return ColumnLayout("\t", 4, fixed, 0, mlr)
        n = len(names)
        if n < 2:
            raise DataError(f"{path}:1: expected comma-separated user,item[,rating"
                            f"[,timestamp]] but found {first!r}")
        cols = dict(zip(FIELDS, range(min(n, 4))))
        return ColumnLayout(",", n, cols, 0, mlr, quoting=True)
    if fmt == "inter":
        fields = first.split("\t")
        names = [f.strip().partition(":")[0] for f in fields]
        types = [f.strip().partition(":")[2] for f in fields]
        if columns is None and not all(any(n.lower() in _INTER_NAMES[k] for n in names)
                                       for k in ("user", "item")):
            raise DataError(
                f"{path}:1: RecBole header {first!r} must name a user_id and an item_id "
                f"column (e.g. 'user_id:token<TAB>item_id:token<TAB>rating:float'), or "
                f"pass columns={{'user': NAME, 'item': NAME}} (CLI: {_FLAG})")
        cols = _header_columns(names, columns, _INTER_NAMES, path, "RecBole header", first)
        rr = None if rating_range == _AUTO else rating_range
        ts_type = types[cols["timestamp"]] if "timestamp" in cols else "float"
        return ColumnLayout("\t", len(fields), cols, 1, rr, token=True,
                      float_time=ts_type != "token")
    raise ConfigError(f"unknown format {fmt!r}; use one of {sorted(set(FORMATS))}")
