"""Byte-level parsing of rating files: a fast vectorised parser and a slow one, for the
column layout :func:`~dpmt.data.layout.layout` decided (:mod:`dpmt.data.layout`, whose
names are re-exported here). :func:`parse_body` turns the bytes into columns.

Parsing strategy. Files are read as bytes and parsed by a vectorised numpy byte parser (a
20M-line, 466 MB ML-20M-sized ``ratings.csv`` loads in about 9 s on 2 shared cores with a
peak of 1.2 GiB, as fast as pyarrow.csv and smaller: ``benchmarks/parser_bench.md``) that
only accepts the plain shape of these files: exactly the expected number of fields on every
line, unsigned decimal numbers in the value columns, fields quoted whole (``"22"``) where
the layout allows quoting, and ids that are decimal numbers or (in a layout of text ids)
plain text tokens. Anything else (blank lines, signs, exponents, ``nan``, a quote inside a
field, a missing field) makes it give up, and a slow line-by-line reference parser takes
over; its job is to find the *first* bad line and raise ``DataError("<path>:<line>:
...")``, or, when every line is in fact valid (e.g. blank lines, ``1e3``, ``"a,b"``), to
return the parsed values. Value checks (finite rating inside ``rating_range``,
non-negative ids) are the same on both paths and name the offending line too.
"""

from __future__ import annotations

import csv
import decimal
import io
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from dpmt.data.layout import (
    ColumnLayout,
)
from dpmt.errors import DataError

__all__ = ["parse_body", "check_values", "where", "token_problem", "canonical_int_ids"]


# Fast-path chunk size: small enough that the temporaries stay in cache (measured best).
_CHUNK_BYTES = 1 << 20
# Threads for the fast path.
_MAX_THREADS = 4
# Longest numeric field the fast path parses exactly (float64 holds integers < 2**53).
_MAX_DIGITS = 15


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


#: bytes a text id may not begin or end with on the fast path (the line parser strips them)
_EDGE_BYTES = np.array([9, 10, 11, 12, 13, 32], np.uint8)
#: longest text id the fast path reads (longer: the line parser)
_MAX_TOKEN = 256


def _token_bytes(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Text ids ``buf[start:end]`` (one per row) as exact byte strings (an ``S`` array).

    Raises _GiveUp where only the line parser can decide or name the line: an empty field,
    white space around it, a leading ``-`` (``-1`` is a negative id), a NUL byte, a field
    over :data:`_MAX_TOKEN` bytes, a canonical integer too long for the numeric path.
    """
    width = end - start
    if width.min() <= 0 or width.max() > _MAX_TOKEN:
        raise _GiveUp
    first, last = buf[start], buf[end - 1]
    if np.any(np.isin(first, _EDGE_BYTES) | np.isin(last, _EDGE_BYTES) | (first == 45)):
        raise _GiveUp
    wmax = int(width.max())
    out = np.zeros((len(width), wmax), np.uint8)
    counts = np.bincount(width)
    for w in np.flatnonzero(counts).tolist():
        rows = np.flatnonzero(width == w)
        out[rows, :w] = np.lib.stride_tricks.sliding_window_view(buf, w)[start[rows]]
    if np.count_nonzero(out == 0) != int(wmax * len(width) - width.sum()):
        raise _GiveUp                                     # a NUL inside an id
    digits = ((out >= 48) & (out <= 57)).sum(axis=1) == width
    canonical = digits & ((first != 48) | (width == 1))
    if np.any(canonical & (width > _MAX_DIGITS)):
        raise _GiveUp
    return out.view(f"S{wmax}").reshape(-1)


_POW10 = [np.power(10.0, np.arange(w - 1, -1, -1)) for w in range(_MAX_DIGITS + 1)]
_POW10_SCALAR = np.power(10.0, np.arange(_MAX_DIGITS + 1))


def _fast_parse(data: bytes, lay: ColumnLayout, offset: int = 0) -> dict[str, np.ndarray]:
    """Parse the body (from ``offset``, past the header; ends with a newline) or raise
    _GiveUp.

    Works through the bytes in chunks of whole lines (small chunks keep the temporaries in
    cache and avoid fresh page faults), in a few threads. Structure check per chunk:
    ``ncols - 1`` separators per line, each between the line's start and its newline.
    """
    sep = lay.sep
    if sep == "::":
        if offset:
            data, offset = data[offset:], 0
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
    pos, row, total = offset, 0, len(data)
    while pos < total:
        stop = data.rfind(b"\n", pos, min(pos + _CHUNK_BYTES, total)) + 1
        if stop <= pos:                                  # one line longer than a chunk
            stop = data.find(b"\n", pos) + 1
        chunks.append((pos, stop, row))
        row += data.count(b"\n", pos, stop)
        pos = stop
    out = {key: np.empty(row, np.float64 if key == "rating" else np.int64)
           for key in lay.cols}
    # text ids (layouts with token ids): {column: {first row of a chunk: S array}}
    text: dict[str, dict[int, np.ndarray]] = {key: {} for key in ("user", "item")}

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
                # Text ids: '007' and '7' are different ids, so only canonical integers
                # (no leading zero) are read as numbers; a chunk with any other id keeps
                # its ids as bytes (the column is then text, see below).
                vals = None
                if not np.any((buf[start] == 48) & (end - start > 1)):
                    try:
                        vals = _parse_column(buf, start, end, False)
                    except _GiveUp:
                        pass
                if vals is None:
                    ids = _token_bytes(buf, start, end)
                    if ids.dtype.itemsize and np.any(ids.view(np.uint8) >= 128):
                        try:
                            data[pos:stop].decode("utf-8")
                        except UnicodeDecodeError:
                            raise _GiveUp from None       # the line parser names the line
                    text[key][row] = ids
                    continue
                out[key][row:row + n] = vals
                continue
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
    ends = [c[2] for c in chunks[1:]] + [row]
    for key, parts in text.items():
        if parts:            # text ids: every id as its exact bytes, numbers as written
            numeric = [out[key][r0:r1] for (_p, _s, r0), r1 in zip(chunks, ends)
                       if r0 not in parts and r1 > r0]
            width = max([a.dtype.itemsize for a in parts.values()]
                        + [len(str(int(a.max()))) for a in numeric])
            col = np.empty(row, f"S{width}")
            for (_p, _s, r0), r1 in zip(chunks, ends):
                col[r0:r1] = parts[r0] if r0 in parts else out[key][r0:r1].astype(col.dtype)
            out[key] = col
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


def _parse_timestamp(f: str, lay: ColumnLayout, where: str) -> int:
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


def _slow_parse(data: bytes, lay: ColumnLayout, path: Path):
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


def where(path, lay: ColumnLayout, n: int) -> str:
    """``path:LINE`` for text files, ``path, row N`` for tables (Parquet)."""
    return f"{path}:{n}" if lay.unit == "lines" else f"{path}, row {n}"


def check_values(cols: dict, lines: np.ndarray | None, lay: ColumnLayout, path: Path) -> None:
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


def parse_body(body: bytes, lay: ColumnLayout, path: Path, offset: int = 0
               ) -> tuple[dict, np.ndarray | None]:
    """Parse a file body (from byte ``offset``, past the header; ends with a newline) with
    layout ``lay``.

    Returns (columns, line numbers or None). Columns: ``user``/``item`` int64 (or str for
    RecBole text tokens), ``rating`` float64, ``timestamp`` int64, each present where the
    layout has it; line numbers are None when row k is line ``header_lines + k + 1``
    (no blank lines). Raises DataError naming the first bad line.
    """
    try:
        cols = _fast_parse(body, lay, offset)
        check_values(cols, None, lay, path)
        return cols, None
    except _GiveUp:
        return _slow_parse(body[offset:] if offset else body, lay, path)
