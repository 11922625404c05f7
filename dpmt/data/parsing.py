"""Byte-level parsing of rating files: column layout, a fast vectorised parser, a slow one.

:func:`layout` reads a file's first line and decides where the user, item, rating and
timestamp fields are (fixed positions for ``u.data`` / ``ratings.dat``; located by header
name for CSV, TSV-with-header and RecBole ``.inter`` files, optionally through a
``columns=`` mapping). :func:`parse_body` then turns the bytes into columns.

Parsing strategy. Files are read as bytes and parsed by a vectorised numpy byte parser (a
20M-line, 540 MB ML-20M-sized ``ratings.csv`` loads in about 10 s on 2 cores, 6 s of it
parsing; peak memory about 1.8 GiB) that only accepts the plain shape of these files:
exactly the expected number of fields on every line and unsigned decimal numbers in the
columns used. Anything else (blank lines, signs, exponents, ``nan``, text ids,
a missing field) makes it give up, and a slow line-by-line reference parser takes over; its
job is to find the *first* bad line and raise ``DataError("<path>:<line>: ...")``, or, when
every line is in fact valid (e.g. blank lines, ``1e3``, RecBole text tokens), to return
the parsed values. Value checks (finite rating inside ``rating_range``, non-negative ids)
are the same on both paths and name the offending line too.
"""

from __future__ import annotations

import csv
import dataclasses
import decimal
import io
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from dpmt.errors import ConfigError, DataError

__all__ = ["FORMATS", "MOVIELENS_RATING_RANGE", "FIELDS", "Layout", "layout", "parse_body",
           "check_values", "where", "first_line", "token_problem", "canonical_int_ids"]

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

# Fast-path chunk size: small enough that the temporaries stay in cache (measured best).
_CHUNK_BYTES = 1 << 20
# Threads for the fast path.
_MAX_THREADS = 4
# Longest numeric field the fast path parses exactly (float64 holds integers < 2**53).
_MAX_DIGITS = 15


# ----------------------------------------------------------------------------------------
# Column layout
# ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Layout:
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
           ) -> Layout:
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
        return Layout("::", 4, fixed, 0, mlr)
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
            return Layout(sep, len(names), cols, 1, mlr, token=True, quoting=True)
        if fmt == "tsv":
            return Layout("\t", 4, fixed, 0, mlr)
        n = len(names)
        if n < 2:
            raise DataError(f"{path}:1: expected comma-separated user,item[,rating"
                            f"[,timestamp]] but found {first!r}")
        cols = dict(zip(FIELDS, range(min(n, 4))))
        return Layout(",", n, cols, 0, mlr, quoting=True)
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
        return Layout("\t", len(fields), cols, 1, rr, token=True,
                      float_time=ts_type != "token")
    raise ConfigError(f"unknown format {fmt!r}; use one of {sorted(set(FORMATS))}")


# ----------------------------------------------------------------------------------------
# Fast vectorised parser
# ----------------------------------------------------------------------------------------
class _GiveUp(Exception):
    """The fast path met something it does not handle; use the slow path."""


def _parse_column(buf: np.ndarray, start: np.ndarray, end: np.ndarray,
                  allow_dot: bool) -> np.ndarray:
    """Parse unsigned decimal fields ``buf[start:end]`` (one per row) to float64.

    Rows are grouped by field width (a handful of distinct widths); each group's fields are
    copied as one (m, width) byte matrix through a sliding-window view and their digits
    combined by a matrix-vector product with the powers of ten. No Python loop over rows.
    float64 is exact for integers below 2**53, hence at most 15 digits. Raises _GiveUp on
    an empty or too long field, a byte other than a digit or a dot, more than one dot, or a
    dot where none is allowed.
    """
    width = end - start
    n = len(width)
    out = np.empty(n, np.float64)
    if n == 0:
        return out
    if width.min() <= 0 or width.max() > _MAX_DIGITS:
        raise _GiveUp
    counts = np.bincount(width, minlength=_MAX_DIGITS + 1)
    for w in np.flatnonzero(counts).tolist():
        rows = slice(None) if counts[w] == n else np.flatnonzero(width == w)
        dig = np.lib.stride_tricks.sliding_window_view(buf, w)[start[rows]]  # (m, w) copy
        dig -= 48                                         # '0'..'9' -> 0..9, others > 9
        n_dots = None
        if allow_dot:
            is_dot = dig == (46 - 48) % 256
            n_dots = is_dot.sum(axis=1)
            if n_dots.any():
                if n_dots.max() > 1 or w == 1:            # "1.2.3", a lone "."
                    raise _GiveUp
                dig[is_dot] = 0
            else:
                n_dots = None
        if dig.max() > 9:
            raise _GiveUp
        full = dig.astype(np.float64) @ _POW10[w]
        if n_dots is not None:
            # With the dot read as a 0 digit, full = left * 10**(f+1) + right for f digits
            # after the dot; the value is left + right / 10**f.
            f = np.where(n_dots > 0, w - 1 - np.argmax(is_dot, axis=1), 0)
            scale = _POW10_SCALAR[f]
            left = np.floor(full / (scale * 10.0))
            right = full - left * scale * 10.0
            full = np.where(n_dots > 0, left + right / scale, full)
        out[rows] = full
    return out


_POW10 = [np.power(10.0, np.arange(w - 1, -1, -1)) for w in range(_MAX_DIGITS + 1)]
_POW10_SCALAR = np.power(10.0, np.arange(_MAX_DIGITS + 1))


def _fast_parse(data: bytes, lay: Layout) -> dict[str, np.ndarray]:
    """Parse the body (header removed, ends with a newline) or raise _GiveUp.

    Works through the bytes in chunks of whole lines (small chunks keep the temporaries in
    cache and avoid fresh page faults), in a few threads. Structure check per chunk:
    ``ncols - 1`` separators per line, each between the line's start and its newline.
    """
    sep = lay.sep
    if sep == "::":
        # Map '::' to ':' so the separator is one byte; a lone ':' would then be taken for a
        # separator, so first make sure every ':' in the file belongs to a '::' pair.
        if data.count(b":") != 2 * data.count(b"::"):
            raise _GiveUp
        data = data.replace(b"::", b":")
        sep = ":"
    sep_byte = ord(sep)
    k = lay.ncols - 1                                     # separators per line
    # Chunks of whole lines, with the row where each starts.
    chunks = []
    pos, row, total = 0, 0, len(data)
    while pos < total:
        stop = data.rfind(b"\n", pos, min(pos + _CHUNK_BYTES, total)) + 1
        if stop <= pos:                                  # one line longer than a chunk
            stop = data.find(b"\n", pos) + 1
        chunks.append((pos, stop, row))
        row += data.count(b"\n", pos, stop)
        pos = stop
    out = {key: np.empty(row, np.float64 if key == "rating" else np.int64)
           for key in lay.cols}

    def parse_chunk(job):
        pos, stop, row = job
        buf = np.frombuffer(data, np.uint8, count=stop - pos, offset=pos)
        nl = np.flatnonzero(buf == 10)
        n = len(nl)
        seps = np.flatnonzero(buf == sep_byte)
        if len(seps) != k * n:
            raise _GiveUp
        line_start = np.empty(n, np.int64)
        line_start[0] = 0
        line_start[1:] = nl[:-1] + 1
        if k:
            seps = seps.reshape(n, k)
            # sorted positions + right counts: each line has its k separators inside it
            if np.any(seps[:, 0] < line_start) or np.any(seps[:, -1] > nl):
                raise _GiveUp
        quotes = lay.quoting and bool(np.any(buf == 34))  # '"'
        n_quoted = 0
        for key, c in lay.cols.items():
            start = line_start if c == 0 else seps[:, c - 1] + 1
            end = nl if c == k else seps[:, c]
            if quotes:
                # "22": drop the quotes of a field that opens and closes with one. Anything
                # else with a quote (a quote inside, a quoted separator, an unused quoted
                # column) leaves a quote uncounted below: the slow path reads it.
                q = (buf[start] == 34) & (end - start >= 2)
                if q.any():
                    if np.any(buf[end[q] - 1] != 34):
                        raise _GiveUp
                    n_quoted += int(q.sum())
                    start, end = start + q, end - q
            if lay.token and key in ("user", "item"):
                # RecBole tokens are strings: '007' and '7' are different ids, so only
                # canonical integers (no leading zero) may be read as numbers here.
                if np.any((buf[start] == 48) & (end - start > 1)):
                    raise _GiveUp
            allow_dot = key == "rating" or (key == "timestamp" and lay.float_time)
            vals = _parse_column(buf, start, end, allow_dot)
            out[key][row:row + n] = np.rint(vals) if out[key].dtype.kind == "i" else vals
        if quotes and 2 * n_quoted != int(np.count_nonzero(buf == 34)):
            raise _GiveUp

    # numpy releases the GIL in these kernels, so threads parse chunks in parallel.
    workers = min(_MAX_THREADS, os.cpu_count() or 1, len(chunks))
    if workers > 1:
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(parse_chunk, chunks))           # re-raises _GiveUp
    else:
        for job in chunks:
            parse_chunk(job)
    return out


# ----------------------------------------------------------------------------------------
# Slow reference parser (first bad line, or the values when every line is fine)
# ----------------------------------------------------------------------------------------
_INT_RE = re.compile(r"^[0-9]+$")
# A non-negative integer written the one way str(int) writes it (no sign, no leading zero).
_CANON_INT_RE = re.compile(r"^(?:0|[1-9][0-9]*)$")
_INT64_MAX = (1 << 63) - 1
_ASCII_WS = " \t\n\r\x0b\x0c"


def canonical_int_ids(vals) -> bool:
    """True when every text id is a canonical non-negative integer below 2**63, i.e. when
    converting them to int64 keeps distinct ids distinct and loses nothing."""
    return all(_CANON_INT_RE.match(v) and (len(v) < 19 or int(v) <= _INT64_MAX)
               for v in vals)


def token_problem(t: str) -> str | None:
    """Why text id ``t`` cannot be kept exactly, or None."""
    try:
        t.encode("utf-8")
    except UnicodeEncodeError:                            # surrogate-escaped raw bytes
        return (f"{t!r} is not valid UTF-8; re-encode the file as UTF-8 (invalid bytes "
                f"would make distinct ids indistinguishable)")
    if "\x00" in t:
        return f"{t!r} contains a NUL character"
    return None


def _parse_timestamp(f: str, lay: Layout, where: str) -> int:
    """Exact int64 timestamp from field ``f`` or DataError ``where: ...``.

    Integers are read exactly (no float rounding above 2**53); other numbers (``1e9``,
    ``1.5`` in a RecBole ``timestamp:float`` column) are read as exact decimals and rounded
    half to even. Values outside int64 are rejected.
    """
    if _INT_RE.match(f):
        v = int(f)
    else:
        try:
            d = decimal.Decimal(f)
        except (decimal.InvalidOperation, ValueError, TypeError):
            try:
                float(f)
            except ValueError:
                raise DataError(f"{where}: timestamp {f!r} is not a number") from None
            raise DataError(f"{where}: timestamp {f!r} has an exponent too large to be "
                            f"a timestamp") from None             # e.g. 1e99999999999999999999
        if not d.is_finite():
            raise DataError(f"{where}: timestamp {f!r} is not a finite number")
        try:
            # copy_abs/compare are exact (no context); check size before int(1e999999999)
            if d.copy_abs() >= (1 << 64):
                v = None
            else:
                r = d.to_integral_value(rounding=decimal.ROUND_HALF_EVEN)
                if not lay.float_time and r != d:
                    raise DataError(f"{where}: timestamp {f!r} is not an integer")
                v = int(r)
        except decimal.DecimalException:                  # e.g. exponent beyond the context
            v = None
    if v is None or not -(1 << 63) <= v <= _INT64_MAX:
        raise DataError(f"{where}: timestamp {f!r} is outside the representable range "
                        f"(-2**63 <= t < 2**63); fix the value")
    return v
_FIELD_NAMES = {"user": "user id", "item": "item id", "rating": "rating",
                "timestamp": "timestamp"}


def _slow_parse(data: bytes, lay: Layout, path: Path):
    """Line-by-line parse; raise DataError at the first bad line, else return the values.

    Returns (columns dict, line numbers int64 (n,)). Blank lines are skipped.
    """
    cols = {k: [] for k in lay.cols}
    linenos = []
    sep = lay.sep
    sep_name = {"\t": "tabs", ",": "commas", "::": "'::'"}[sep]
    rr = lay.rating_range
    lineno = lay.header_lines
    for raw in io.BytesIO(data):
        lineno += 1
        # surrogateescape keeps invalid bytes distinct (and visible in messages)
        line = raw.decode("utf-8", errors="surrogateescape").rstrip("\r\n")
        if not line.strip():
            continue
        if lay.quoting and '"' in line:
            try:
                fields = next(csv.reader([line], delimiter=sep, strict=True))
            except csv.Error as e:
                raise DataError(f"{path}:{lineno}: badly quoted field ({e}): {line[:80]!r}; "
                                f"a quoted field opens and closes on one line, and a quote "
                                f"inside it is written twice (\"\")") from None
        else:
            fields = line.split(sep)
        if len(fields) != lay.ncols:
            raise DataError(f"{path}:{lineno}: expected {lay.ncols} fields separated by "
                            f"{sep_name}, found {len(fields)}: {line[:80]!r}")
        for key, c in lay.cols.items():
            f = fields[c].strip()
            what = _FIELD_NAMES[key]
            if key in ("user", "item"):
                if lay.token:                            # exact text, decided at the end
                    f = fields[c].strip(_ASCII_WS)
                if f.startswith("-") and _INT_RE.match(f[1:]):
                    raise DataError(f"{path}:{lineno}: negative {what} {f}; ids must be "
                                    f"non-negative integers")
                if lay.token:
                    if not f:
                        raise DataError(f"{path}:{lineno}: {what} is empty")
                    problem = token_problem(f)
                    if problem:
                        raise DataError(f"{path}:{lineno}: {what} {problem}")
                    cols[key].append(f)
                    continue
                if _INT_RE.match(f):
                    v = int(f)
                    if v > _INT64_MAX:
                        raise DataError(f"{path}:{lineno}: {what} {f} is too large (ids must "
                                        f"be below 2**63 = 9223372036854775808)")
                    cols[key].append(v)
                    continue
                raise DataError(f"{path}:{lineno}: {what} {f!r} is not a non-negative "
                                f"integer")
            if key == "timestamp":
                cols[key].append(_parse_timestamp(f, lay, f"{path}:{lineno}"))
                continue
            try:
                v = float(f)
            except ValueError:
                raise DataError(f"{path}:{lineno}: {what} {f!r} is not a number") from None
            msg = _rating_problem(v, rr)
            if msg:
                raise DataError(f"{path}:{lineno}: {msg}")
            cols[key].append(v)
        linenos.append(lineno)
    out = {}
    for key, vals in cols.items():
        if key in ("user", "item"):
            if lay.token and not canonical_int_ids(vals):
                out[key] = np.array(vals, dtype=str)      # exact tokens: '007' != '7'
            else:
                out[key] = np.array([int(v) for v in vals] if lay.token else vals,
                                    dtype=np.int64)
        elif key == "timestamp":
            out[key] = np.array(vals, dtype=np.int64)     # exact, range-checked above
        else:
            out[key] = np.array(vals, dtype=np.float64)
    return out, np.array(linenos, dtype=np.int64)


def _rating_problem(v: float, rr) -> str | None:
    if not math.isfinite(v):
        return f"rating is {v} (must be a finite number)"
    if rr is not None and not (rr[0] <= v <= rr[1]):
        return (f"rating {v:g} is outside the allowed range [{rr[0]:g}, {rr[1]:g}] for this "
                f"format; if the file uses another scale, pass rating_range=(low, high) "
                f"(CLI: --rating-range LOW,HIGH), or rating_range=None (CLI: --rating-range "
                f"none) to skip the check")
    return None


def where(path, lay: Layout, n: int) -> str:
    """``path:LINE`` for text files, ``path, row N`` for tables (Parquet)."""
    return f"{path}:{n}" if lay.unit == "lines" else f"{path}, row {n}"


def check_values(cols: dict, lines: np.ndarray | None, lay: Layout, path: Path) -> None:
    """Vectorised value checks for the fast path (the slow path checks inline)."""
    def at(i):
        return where(path, lay, int(lines[i]) if lines is not None
                     else lay.header_lines + int(i) + 1)

    if "rating" in cols:
        r = cols["rating"]
        rr = lay.rating_range
        bad = ~np.isfinite(r)
        if rr is not None:
            bad |= (r < rr[0]) | (r > rr[1])
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(f"{at(i)}: {_rating_problem(float(r[i]), rr)}")


def parse_body(body: bytes, lay: Layout, path: Path) -> tuple[dict, np.ndarray | None]:
    """Parse a file body (header removed, ends with a newline) with layout ``lay``.

    Returns (columns, line numbers or None). Columns: ``user``/``item`` int64 (or str for
    RecBole text tokens), ``rating`` float64, ``timestamp`` int64, each present where the
    layout has it; line numbers are None when row k is line ``header_lines + k + 1``
    (no blank lines). Raises DataError naming the first bad line.
    """
    try:
        cols = _fast_parse(body, lay)
        check_values(cols, None, lay, path)
        return cols, None
    except _GiveUp:
        return _slow_parse(body, lay, path)
