"""Loaders for MovieLens / RecBole rating files (and your own CSV/TSV/Parquet) and a TFDS
adapter.

Supported formats (``fmt``):

``"tsv"``   ML-100K ``u.data``: ``user<TAB>item<TAB>rating<TAB>timestamp``, no header. A
            tab-separated file whose first line names its columns (``userId``, ``movieId``,
            ... or the names given in ``columns=``) is read by those names, as a CSV.
``"dat"``   ML-1M / ML-10M ``ratings.dat``: ``user::item::rating::timestamp``, no header.
``"csv"``   ML-20M / ML-25M / ml-latest(-small) ``ratings.csv``: header
            ``userId,movieId,rating,timestamp`` (columns located by name; a file without a
            header is read as user,item[,rating[,timestamp]]).
``"inter"`` RecBole atomic ``.inter`` files: tab-separated with a typed header such as
            ``user_id:token<TAB>item_id:token<TAB>rating:float<TAB>timestamp:float``; columns
            are located by name, ``rating`` and ``timestamp`` are optional (implicit feedback
            gets value 1.0). Token ids may be non-numeric strings.
``"parquet"`` A Parquet file (``.parquet``/``.pq``, or the ``PAR1`` magic bytes), read with
            pyarrow (``pip install pyarrow``): columns located by name as in a CSV header;
            ids integers or strings, ratings numbers, timestamps integers (seconds) or
            Parquet timestamps; no rating scale under ``rating_range="auto"``. Messages
            name rows (``file, row 3``).

Ids and quoting in your own CSV/TSV (a file with a header row). Ids are exact text, such
as IMDb's ``tt0111161`` (``007`` and ``7`` are then two ids), and int64 when every one is a
canonical non-negative integer (every MovieLens file); fields may be quoted as in RFC 4180
(``"22"``, ``"a,b"``). ``u.data``/``ratings.dat`` (and a CSV without a header) keep integer
ids.

Your own file. ``columns={"user": "uid", "item": "iid", "rating": "stars", "timestamp":
"ts"}`` (any subset) names the header columns of a CSV, TSV or ``.inter`` file; fields not
named keep their usual names, and only user and item must exist (no rating: every value is
1.0; no timestamp: ``Ratings.timestamp`` is None). The CLI spells it ``--columns
user=uid,item=iid,...`` and :func:`parse_columns` reads that form. Ratings are checked
against ``rating_range`` (default ``"auto"``: the MovieLens scale 0.5..5 for tsv/dat/csv, no
check for RecBole); pass ``rating_range=(low, high)`` or None (CLI: ``--rating-range
LOW,HIGH`` or ``none``, read by :func:`parse_rating_range`) for another scale.

How the bytes are parsed (a fast vectorised parser, a slow one that names the first bad
line) is in :mod:`dpmt.data.parsing`; it was measured against ``pyarrow.csv`` on an
ML-20M-size file (``benchmarks/parser_bench.md``) and kept: faster and smaller from file to
Ratings.

The invariants the privacy analysis needs (one entry per (user, item) pair; indices in
range) are checked in :mod:`dpmt.data.ratings` (:func:`~dpmt.data.ratings.one_entry_per_pair`
and the :class:`~dpmt.data.ratings.Ratings` constructor), for files, tables and matrices
alike.

Duplicate (user, item) pairs. ``on_duplicate="error"`` (default) raises a DataError naming the
first duplicated pair, its line numbers and the total number of duplicates.
``on_duplicate="keep-last"`` (CLI: ``--on-duplicate keep-last``) keeps one rating per pair:
the one with the latest timestamp, and among equal (or absent) timestamps the one on the
last line.

Dense indices follow sorted raw ids (as :meth:`Ratings.from_raw`).

Public item catalogue. ``items=`` (CLI: ``--items FILE``) gives the list of item ids that
exists independently of who rated what: a file read by :func:`read_item_catalogue`, or an
array of raw ids. The item index space is then that catalogue, sorted, including items no
one rated, and ``Ratings.items_public`` is True; a rating of an item outside it is a
DataError naming the line. Without it the items are those rated and ``items_public`` is
False (training then selects items privately). :func:`dpmt.data.load` passes the
MovieLens releases' own item files (``u.item``, ``movies.dat``, ``movies.csv``).

ML-100K item genres (:func:`load_item_genres`) live in :mod:`dpmt.data.genres` and are
re-exported here.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import numpy as np

from dpmt.data.genres import ML100K_GENRES, load_item_genres
from dpmt.data.parquet import parquet_columns
from dpmt.data.layout import (
    _CSV_NAMES,
    _INTER_NAMES,
    FIELDS,
    FORMATS,
    MOVIELENS_RATING_RANGE,
    ColumnLayout,
    first_line,
    layout,
)
from dpmt.data.parsing import canonical_int_ids, check_values, parse_body, token_problem, where
from dpmt.data.ratings import (
    Ratings,
    catalogue_ids,
    catalogue_index,
    dense_ids,
    missing_items_message,
    one_entry_per_pair,
)
from dpmt.data.tfds import read_tfds_columns
from dpmt.errors import ConfigError, DataError

__all__ = [
    "FORMATS", "ML100K_GENRES", "MOVIELENS_RATING_RANGE",
    "load_file", "load_tsv", "load_dat", "load_csv", "load_inter", "detect_format",
    "from_tfds", "load_item_genres", "parse_columns", "parse_rating_range",
    "read_item_catalogue",
]

OnDuplicate = Literal["error", "keep-last"]
_AUTO = "auto"

_COLUMNS_FLAG = "--columns user=COL,item=COL,rating=COL,timestamp=COL"
_RANGE_FLAG = "--rating-range LOW,HIGH (or none)"
_DUP_FLAG = "--on-duplicate {error,keep-last}"


# ----------------------------------------------------------------------------------------
# Options: checks for the keyword arguments, parsers for their CLI spelling
# ----------------------------------------------------------------------------------------
def check_on_duplicate(on_duplicate) -> str:
    """``on_duplicate`` if it is "error" or "keep-last", else ConfigError."""
    if on_duplicate not in ("error", "keep-last"):
        raise ConfigError(f"on_duplicate must be 'error' or 'keep-last' (CLI: {_DUP_FLAG}); "
                          f"got {on_duplicate!r}")
    return on_duplicate


def check_rating_range(rating_range):
    """"auto", None, or (low, high) as floats with low <= high; else ConfigError."""
    if rating_range is None or (isinstance(rating_range, str) and rating_range == _AUTO):
        return rating_range
    hint = (f"rating_range must be (low, high), None or 'auto' (CLI: {_RANGE_FLAG} or "
            f"auto)")
    if isinstance(rating_range, (str, bytes)):
        raise ConfigError(f"{hint}; got the string {rating_range!r} (parse_rating_range "
                          f"reads the CLI form '1,10')")
    try:
        lo, hi = (float(x) for x in rating_range)
    except (TypeError, ValueError):
        raise ConfigError(f"{hint}; got {rating_range!r}") from None
    if math.isnan(lo) or math.isnan(hi):
        raise ConfigError(f"{hint}; got a NaN bound in {rating_range!r}")
    if not lo <= hi:
        raise ConfigError(f"rating_range low must be <= high (got {rating_range!r}; CLI: "
                          f"{_RANGE_FLAG})")
    return (lo, hi)


def check_columns(columns) -> dict | None:
    """``columns`` as a {field: header name} dict (None when empty), else ConfigError."""
    if columns is None:
        return None
    if not isinstance(columns, Mapping):
        extra = (" (parse_columns reads the CLI form 'user=uid,item=iid')"
                 if isinstance(columns, str) else "")
        raise ConfigError(f"columns must be a mapping such as {{'user': 'uid', 'item': "
                          f"'iid'}} (CLI: {_COLUMNS_FLAG}); got {columns!r}{extra}")
    out = {}
    for key, name in columns.items():
        if key not in FIELDS:
            raise ConfigError(f"columns: unknown field {key!r}; the fields are "
                              f"{', '.join(FIELDS)} (CLI: {_COLUMNS_FLAG})")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"columns[{key!r}] must be the name of a header column (a "
                              f"non-empty string); got {name!r} (CLI: --columns {key}=COL)")
        out[key] = name.strip()
    seen: dict[str, str] = {}
    for key, name in out.items():
        if name in seen:
            raise ConfigError(f"columns maps both {seen[name]!r} and {key!r} to column "
                              f"{name!r}; give each field its own column (CLI: "
                              f"{_COLUMNS_FLAG})")
        seen[name] = key
    return out or None


def parse_columns(spec: str) -> dict:
    """``"user=uid,item=mid"`` -> ``{"user": "uid", "item": "mid"}`` (the CLI ``--columns``).

    Keys are the fields user, item, rating, timestamp (any subset, each at most once);
    values are header column names (surrounding spaces dropped). Raises ConfigError.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"--columns / columns= expects field=COLUMN pairs separated by "
                          f"commas, e.g. {_COLUMNS_FLAG.split(' ', 1)[1]}; got {spec!r}")
    out: dict[str, str] = {}
    for part in spec.split(","):
        key, eq, name = part.partition("=")
        key, name = key.strip(), name.strip()
        if not eq or not key or not name:
            raise ConfigError(f"--columns {spec!r}: expected field=COLUMN, got {part.strip()!r}"
                              f" (e.g. {_COLUMNS_FLAG.split(' ', 1)[1]})")
        if key not in FIELDS:
            raise ConfigError(f"--columns {spec!r}: unknown field {key!r}; the fields are "
                              f"{', '.join(FIELDS)}")
        if key in out:
            raise ConfigError(f"--columns {spec!r}: field {key!r} is given twice")
        out[key] = name
    try:
        check_columns(out)
    except ConfigError as e:
        raise ConfigError(f"--columns {spec!r}: {e}") from None
    return out


def parse_rating_range(spec: str):
    """The CLI ``--rating-range``: ``"1,10"`` -> (1.0, 10.0), ``"none"`` -> None, ``"auto"``
    -> ``"auto"`` (case and spaces ignored). Raises ConfigError."""
    if not isinstance(spec, str):
        raise ConfigError(f"--rating-range / rating_range= expects LOW,HIGH, none or auto; "
                          f"got {spec!r}")
    s = spec.strip().lower()
    if s in ("auto", "none"):
        return _AUTO if s == "auto" else None
    parts = s.split(",")
    if len(parts) != 2:
        raise ConfigError(f"--rating-range {spec!r}: expected LOW,HIGH (e.g. 1,10), none (no "
                          f"check) or auto (the MovieLens scale 0.5,5 for MovieLens files)")
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--rating-range {spec!r}: LOW and HIGH must be numbers "
                          f"(e.g. 1,10)") from None
    if math.isnan(lo) or math.isnan(hi) or not lo <= hi:
        raise ConfigError(f"--rating-range {spec!r}: need numbers LOW <= HIGH (e.g. 1,10)")
    return (lo, hi)


# ----------------------------------------------------------------------------------------
# Assembly: dense indices, one entry per pair (both in dpmt.data.ratings)
# ----------------------------------------------------------------------------------------
def _assemble(cols: dict, lines: np.ndarray | None, lay: ColumnLayout, path: Path,
              on_duplicate: str, name: str, catalogue: tuple | None = None) -> Ratings:
    """Ratings from parsed columns; ``catalogue``: (sorted ids, description) or None."""
    user_ids, user = dense_ids(cols["user"])
    if catalogue is None:
        item_ids, item = dense_ids(cols["item"])
    else:
        raw = cols["item"]
        if raw.dtype.kind == "S":                         # text ids as bytes: decode once
            uniq, inv = dense_ids(raw)
            item_ids, at = catalogue_index(uniq, catalogue[0])
            raw, item = uniq[inv], at[inv]
        else:
            item_ids, item = catalogue_index(raw, catalogue[0])
        if len(item) and item.min() < 0:
            j = int(np.argmax(item < 0))
            ln = int(lines[j]) if lines is not None else lay.header_lines + j + 1
            raise DataError(missing_items_message(raw, item, where(path, lay, ln),
                                                  catalogue[1]))
        item = item.astype(np.int32)
    n = len(user)
    value = cols.get("rating")
    value = np.ones(n, np.float32) if value is None else value.astype(np.float32)
    ts = cols.get("timestamp")
    if ts is not None:
        ts = np.rint(ts).astype(np.int64) if ts.dtype.kind == "f" else \
            ts.astype(np.int64, copy=False)
    keep = one_entry_per_pair(
        user, item, len(item_ids), ts, on_duplicate=on_duplicate, user_ids=user_ids,
        item_ids=item_ids, source=str(path), unit=lay.unit,
        where=lambda rows: [int(lines[r]) if lines is not None
                            else lay.header_lines + int(r) + 1 for r in rows])
    if keep is not None:
        user, item, value = user[keep], item[keep], value[keep]
        ts = None if ts is None else ts[keep]
    return Ratings(user=user, item=item, value=value, user_ids=user_ids, item_ids=item_ids,
                   timestamp=ts, name=name, items_public=catalogue is not None,
                   implicit="rating" not in cols)     # no rating column: events, all positive


# ----------------------------------------------------------------------------------------
# Public item catalogues
# ----------------------------------------------------------------------------------------
_ID_HEADERS = tuple(dict.fromkeys(_CSV_NAMES["item"] + _INTER_NAMES["item"] + ("id",)))


def _header_name(field: str) -> str:
    """A header field without quotes, spaces or a RecBole ``:type``, lower case."""
    return field.strip().strip('"').strip().partition(":")[0].lower()


def read_item_catalogue(path: str | Path) -> np.ndarray:
    """The public item catalogue in ``path``: its raw item ids, in file order.

    Accepted layouts (decided by the first non-blank line):

    * one item id per line (the plain form). The first line may be a header if it is
      ``item``, ``item_id``, ``itemId``, ``movieId``, ``movie_id`` or ``id`` (any case, a
      RecBole ``:token`` suffix allowed); blank lines are skipped; spaces around an id are
      dropped.
    * a CSV or tab-separated file whose header names the item column (one of the names
      above), e.g. MovieLens ``movies.csv`` or a RecBole ``.item`` file;
    * MovieLens ``movies.dat`` (``id::title::genres``) and ML-100K ``u.item``
      (``id|title|...``): the first field.

    Ids are int64 when every one is a canonical non-negative integer (no sign, no leading
    zero), else exact text (as RecBole tokens). Returns a 1-D array, each id once.

    Raises DataError: missing or unreadable file, no ids, an empty id, an id listed twice
    (both lines named), a delimited file without an item column.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise DataError(f"item catalogue {p} does not exist") from None
    except OSError as e:
        raise DataError(f"cannot read item catalogue {p}: {e.strerror or e}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = data.decode("utf-8", errors="surrogateescape")  # invalid bytes: reported below
    lines = text.splitlines()
    first_no = next((k for k, ln in enumerate(lines) if ln.strip()), None)
    if first_no is None:
        raise DataError(f"item catalogue {p} is empty; expected one item id per line")
    first = lines[first_no]
    rows: list[tuple[int, str]] = []                      # (line number, id)
    if "::" in first or "|" in first:                     # movies.dat, u.item
        sep = "::" if "::" in first else "|"
        rows = [(k + 1, ln.split(sep, 1)[0]) for k, ln in enumerate(lines) if ln.strip()]
    elif "," in first or "\t" in first:                   # CSV / TSV / RecBole, header
        sep = "\t" if "\t" in first else ","
        reader = csv.reader(io.StringIO(text), delimiter=sep,   # TSV: quotes are text
                            quoting=csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL)
        header = [_header_name(f) for f in next(reader)]
        col = next((header.index(n) for n in _ID_HEADERS if n in header), None)
        if col is None:
            raise DataError(f"{p}:{first_no + 1}: the item catalogue's header {first[:80]!r} "
                            f"names no item column (one of {', '.join(_ID_HEADERS)}); give "
                            f"a header, or one item id per line")
        for fields in reader:
            if fields and any(f.strip() for f in fields):
                if len(fields) <= col:
                    raise DataError(f"{p}:{reader.line_num}: expected at least {col + 1} "
                                    f"fields, found {len(fields)}")
                rows.append((reader.line_num, fields[col]))
    else:                                                 # one id per line
        rows = [(k + 1, ln) for k, ln in enumerate(lines) if ln.strip()]
        if _header_name(first) in _ID_HEADERS:
            rows = rows[1:]
    seen: dict[str, int] = {}
    for lineno, raw in rows:
        t = raw.strip().strip('"').strip()
        problem = token_problem(t) or ("is empty" if not t else None)
        if problem:
            raise DataError(f"{p}:{lineno}: item id {problem}")
        if t in seen:
            raise DataError(f"{p}:{lineno}: item {t} is listed again (first on line "
                            f"{seen[t]}); each item must appear once in the catalogue")
        seen[t] = lineno
    if not seen:
        raise DataError(f"item catalogue {p} has a header but no item ids")
    ids = list(seen)
    if canonical_int_ids(ids):
        return np.array([int(t) for t in ids], dtype=np.int64)
    return np.array(ids, dtype=str)


def _catalogue(items) -> tuple[np.ndarray, str] | None:
    """``items=`` (None, a file path, or raw ids) as (sorted ids, description) or None."""
    if items is None:
        return None
    if isinstance(items, (str, Path)):
        ids = read_item_catalogue(items)
        return catalogue_ids(ids, f"item catalogue {items}"), \
            f"the item catalogue {items} ({len(ids)} items)"
    ids = catalogue_ids(items)
    return ids, f"the item catalogue (items=, {len(ids)} items)"


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------
def detect_format(path: str | Path) -> str:
    """The format of a ratings file from its name, else from its first line.

    Returns one of ``"tsv"``, ``"dat"``, ``"csv"``, ``"inter"``, ``"parquet"``.
    """
    p = Path(path)
    nm = p.name.lower()
    for suffix in (".gz", ".bz2", ".xz", ".zip"):
        if nm.endswith(suffix):
            raise DataError(f"{p}: compressed files are not read directly; unpack it first "
                            f"(e.g. `unzip {p.name}`) and pass the ratings file inside")
    if nm == "u.data" or nm.endswith((".data", ".tsv")):
        return "tsv"
    if nm.endswith(".dat"):
        return "dat"
    if nm.endswith(".csv"):
        return "csv"
    if nm.endswith(".inter"):
        return "inter"
    if nm.endswith((".parquet", ".pq")):
        return "parquet"
    try:
        with open(p, "rb") as fh:
            raw = fh.read(1 << 16)
    except OSError as e:
        raise DataError(f"cannot read {p}: {e.strerror or e}") from None
    if raw.startswith(b"PAR1"):                           # Parquet's magic bytes
        return "parquet"
    head = first_line(raw)
    if "::" in head:
        return "dat"
    if re.search(r":(token|float)", head):
        return "inter"
    if "," in head:
        return "csv"
    if "\t" in head:
        return "tsv"
    raise DataError(f"cannot tell the format of {p} from its name or first line {head[:80]!r};"
                    f" pass fmt= one of 'tsv' (u.data), 'dat' (ratings.dat), 'csv' "
                    f"(ratings.csv), 'inter' (RecBole), 'parquet'")


def load_file(path: str | Path, fmt: str | None = None, *, rating_range="auto",
              on_duplicate: OnDuplicate = "error", columns: Mapping[str, str] | None = None,
              name: str | None = None, items=None) -> Ratings:
    """Load a ratings file into :class:`Ratings`.

    Parameters
    ----------
    path : str or Path
        ``u.data``, ``ratings.dat``, ``ratings.csv``, a RecBole ``.inter`` file, or your own
        CSV/TSV with a header row (text ids, quoted fields) or Parquet file.
    fmt : str, optional
        ``"tsv"``, ``"dat"``, ``"csv"``, ``"inter"``, ``"parquet"`` or an alias
        (``"ml-100k"``, ``"ml-1m"``, ``"ml-20m"``, ``"recbole"``, ...); detected from the
        name/content when None.
    rating_range : (float, float) or None or "auto"
        Inclusive allowed rating range; "auto" is (0.5, 5) for MovieLens formats and no check
        for RecBole; None disables the check (NaN/inf are always rejected). CLI:
        ``--rating-range LOW,HIGH`` / ``none`` (:func:`parse_rating_range`).
    on_duplicate : {"error", "keep-last"}
        Policy for repeated (user, item) pairs, see the module docstring. CLI:
        ``--on-duplicate``.
    columns : mapping, optional
        ``{"user": ..., "item": ..., "rating": ..., "timestamp": ...}`` (any subset): the
        header names of those fields in a CSV/TSV/``.inter`` file with a header row (the
        first line is then always read as the header). Fields not given are found by their
        usual names (``userId``, ``movieId``, ``rating``, ``timestamp``, ...); rating and
        timestamp may be absent. CLI: ``--columns user=COL,item=COL`` (:func:`parse_columns`).
    name : str, optional
        ``Ratings.name``; defaults to the file name.
    items : str, Path or array-like, optional
        The public item catalogue: a file (:func:`read_item_catalogue`) or raw item ids.
        The item index space is then the catalogue, sorted, and ``items_public`` True;
        without it, the rated items and False. CLI: ``--items FILE``.

    Returns
    -------
    Ratings
        ``user``/``item`` int32 (nnz,), ``value`` float32 (nnz,), ``timestamp`` int64 (nnz,)
        or None, ``user_ids``/``item_ids`` sorted raw ids (int64, or str for text tokens).
        Rows keep file order (minus dropped duplicates).

    Raises
    ------
    DataError
        Missing/empty file, a malformed line (``path:line: what is wrong``), a bad value, a
        ``columns=`` name not in the header (the message lists the header), duplicates
        under ``on_duplicate="error"``, a rated item not in ``items``, a bad catalogue.
    ConfigError
        An invalid option value.
    """
    p = Path(path)
    on_duplicate = check_on_duplicate(on_duplicate)
    rating_range = check_rating_range(rating_range)
    columns = check_columns(columns)
    catalogue = _catalogue(items)
    if fmt is None:
        if not p.is_file():
            raise DataError(f"ratings file {p} does not exist" if not p.exists()
                            else f"{p} is not a file")
        fmt = detect_format(p)
    canon = FORMATS.get(str(fmt).lower())
    if canon is None:
        raise ConfigError(f"unknown format {fmt!r}; use one of "
                          f"{', '.join(sorted(set(FORMATS.values())))} (or a dataset alias)")
    if canon == "parquet":
        cols, lay = parquet_columns(p, columns, rating_range)
        check_values(cols, None, lay, p)
        return _assemble(cols, None, lay, p, on_duplicate, name or p.name, catalogue)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise DataError(f"ratings file {p} does not exist") from None
    except OSError as e:
        raise DataError(f"cannot read {p}: {e.strerror or e}") from None
    if data.startswith(b"\xef\xbb\xbf"):                 # UTF-8 byte-order mark
        data = data[3:]
    if not data or data.isspace():                       # (no .strip(): it would copy)
        raise DataError(f"{p}: file is empty; expected {canon} ratings")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data and b"\n" not in data:
            raise DataError(f"{p}: its lines end with a lone carriage return (CR, the classic "
                            "Mac OS convention); convert it to LF or CRLF line endings, e.g. "
                            "with `tr '\\r' '\\n'`")
    lay = layout(canon, data, p, rating_range, columns)
    offset = 0                                           # the body starts after the header
    for _ in range(lay.header_lines):                    # (an offset: no copy of the body)
        cut = data.find(b"\n", offset)
        offset = len(data) if cut < 0 else cut + 1
    if offset >= len(data) or (len(data) - offset < 1 << 16 and data[offset:].isspace()):
        raise DataError(f"{p}: file has a header but no ratings")
    if not data.endswith(b"\n"):
        data += b"\n"
    cols, lines = parse_body(data, lay, p, offset=offset)
    del data                                             # the columns hold no reference
    if len(cols["user"]) == 0:
        raise DataError(f"{p}: no ratings found (only blank lines)")
    return _assemble(cols, lines, lay, p, on_duplicate, name or p.name, catalogue)


def load_tsv(path, **kw) -> Ratings:
    """ML-100K ``u.data``; see :func:`load_file`."""
    return load_file(path, "tsv", **kw)


def load_dat(path, **kw) -> Ratings:
    """ML-1M / ML-10M ``ratings.dat``; see :func:`load_file`."""
    return load_file(path, "dat", **kw)


def load_csv(path, **kw) -> Ratings:
    """ML-20M / ML-25M / ml-latest ``ratings.csv``; see :func:`load_file`."""
    return load_file(path, "csv", **kw)


def load_inter(path, **kw) -> Ratings:
    """RecBole atomic ``.inter`` file; see :func:`load_file`."""
    return load_file(path, "inter", **kw)

# ----------------------------------------------------------------------------------------
# TFDS
# ----------------------------------------------------------------------------------------
def from_tfds(name: str = "movielens/100k-ratings", split: str = "train",
              data_dir: str | None = None, *, rating_range=MOVIELENS_RATING_RANGE,
              on_duplicate: OnDuplicate = "error", download: bool = True,
              items=None) -> Ratings:
    """Load a TFDS ``movielens/*-ratings`` dataset (reading: :mod:`dpmt.data.tfds`).

    A dataset prepared as ArrayRecord (in ``data_dir``, default ``$TFDS_DATA_DIR`` or
    ``~/tensorflow_datasets``) is read through ``tfds.data_source`` with tensorflow-datasets
    alone (``pip install tensorflow-datasets``); otherwise ``tfds.load``, which needs
    TensorFlow (``pip install 'dpmt[tfds]'``), reads TFRecord data or, with ``download``,
    prepares the dataset. Without TensorFlow the DataError says how to prepare it elsewhere
    (``tfds build NAME --file_format=array_record``) and copy the folder.

    Uses the ``user_id``, ``movie_id`` (bytes ids: int64 when all are canonical integers,
    else exact text), ``user_rating`` and ``timestamp`` features. Same checks and
    duplicate policy as :func:`load_file` (a "line" is the example number in the split);
    ``rating_range`` "auto" is the MovieLens scale.

    The ratings datasets carry no item list, so the items are those rated and
    ``items_public`` is False, unless ``items=`` gives the public catalogue (as in
    :func:`load_file`; e.g. the GroupLens item file of the same release).
    """
    on_duplicate = check_on_duplicate(on_duplicate)
    rating_range = check_rating_range(rating_range)
    catalogue = _catalogue(items)
    if rating_range == _AUTO:
        rating_range = MOVIELENS_RATING_RANGE
    cols, src = read_tfds_columns(name, split, data_dir, download)
    if not cols or len(cols["user"]) == 0:
        raise DataError(f"TFDS dataset {name!r} split {split!r} is empty")
    lay = ColumnLayout("\t", 4, {k: 0 for k in cols}, 0, rating_range)
    lines = np.arange(1, len(cols["user"]) + 1)          # "line" = example number
    check_values(cols, lines, lay, src)
    return _assemble(cols, lines, lay, src, on_duplicate, str(name), catalogue)
