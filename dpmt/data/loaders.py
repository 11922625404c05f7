"""Loaders for MovieLens / RecBole rating files, a TFDS adapter and ML-100K item genres.

Supported formats (``fmt``):

``"tsv"``   ML-100K ``u.data``: ``user<TAB>item<TAB>rating<TAB>timestamp``, no header.
``"dat"``   ML-1M / ML-10M ``ratings.dat``: ``user::item::rating::timestamp``, no header.
``"csv"``   ML-20M / ML-25M / ml-latest(-small) ``ratings.csv``: header
            ``userId,movieId,rating,timestamp`` (columns located by name; a file without a
            header is read as user,item[,rating[,timestamp]]).
``"inter"`` RecBole atomic ``.inter`` files: tab-separated with a typed header such as
            ``user_id:token<TAB>item_id:token<TAB>rating:float<TAB>timestamp:float``; columns
            are located by name, ``rating`` and ``timestamp`` are optional (implicit feedback
            gets value 1.0). Token ids may be non-numeric strings.

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

Duplicate (user, item) pairs. ``on_duplicate="error"`` (default) raises a DataError naming the
first duplicated pair, its line numbers and the total number of duplicates.
``on_duplicate="keep-last"`` keeps one rating per pair: the one with the latest timestamp,
and among equal (or absent) timestamps the one on the last line.

Dense indices follow sorted raw ids (as :meth:`Ratings.from_raw`).
"""

from __future__ import annotations

import dataclasses
import decimal
import io
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np

from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError

__all__ = [
    "FORMATS", "ML100K_GENRES", "MOVIELENS_RATING_RANGE",
    "load_file", "load_tsv", "load_dat", "load_csv", "load_inter", "detect_format",
    "from_tfds", "load_item_genres",
]

#: Canonical format names and their aliases.
FORMATS = {
    "tsv": "tsv", "udata": "tsv", "u.data": "tsv", "ml-100k": "tsv",
    "dat": "dat", "ml-1m": "dat", "ml-10m": "dat",
    "csv": "csv", "ml-20m": "csv", "ml-25m": "csv", "ml-latest": "csv",
    "ml-latest-small": "csv",
    "inter": "inter", "recbole": "inter",
}

#: Rating scale of every MovieLens release (ML-100K/1M use whole stars 1..5, later ones
#: half stars 0.5..5); the default range check for the MovieLens formats.
MOVIELENS_RATING_RANGE = (0.5, 5.0)

#: The 19 genre flags of ML-100K ``u.item``, in file order.
ML100K_GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
)

OnDuplicate = Literal["error", "keep-last"]
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
class _Layout:
    """Where the fields live in a file, and how to read them.

    ``cols`` maps field name (``user``, ``item``, ``rating``, ``timestamp``) to column index;
    ``token`` is True where user/item ids may be arbitrary text (RecBole ``:token``);
    ``float_time`` allows fractional timestamps (RecBole ``timestamp:float``), rounded.
    """

    sep: str
    ncols: int
    cols: dict
    header_lines: int
    rating_range: tuple | None
    token: bool = False
    float_time: bool = False


_CSV_NAMES = {
    "user": ("userid", "user_id", "user"),
    "item": ("movieid", "itemid", "item_id", "movie_id", "item"),
    "rating": ("rating", "user_rating"),
    "timestamp": ("timestamp", "time"),
}


def _first_line(data: bytes) -> str:
    end = data.find(b"\n")
    line = data if end < 0 else data[:end]
    return line.decode("utf-8", errors="replace").rstrip("\r").lstrip("\ufeff")


def _layout(fmt: str, data: bytes, path: Path, rating_range) -> _Layout:
    mlr = MOVIELENS_RATING_RANGE if rating_range == _AUTO else rating_range
    if fmt == "tsv":
        return _Layout("\t", 4, {"user": 0, "item": 1, "rating": 2, "timestamp": 3}, 0, mlr)
    if fmt == "dat":
        return _Layout("::", 4, {"user": 0, "item": 1, "rating": 2, "timestamp": 3}, 0, mlr)
    first = _first_line(data)
    if fmt == "csv":
        fields = [f.strip().strip('"').lower() for f in first.split(",")]
        if any(c.isalpha() for c in first):  # a header line
            cols = {}
            for key, names in _CSV_NAMES.items():
                for j, f in enumerate(fields):
                    if f in names:
                        cols[key] = j
                        break
            for key in ("user", "item"):
                if key not in cols:
                    raise DataError(
                        f"{path}:1: CSV header {first!r} has no {key} column (expected one "
                        f"of {', '.join(_CSV_NAMES[key])}); fix the header or the file")
            return _Layout(",", len(fields), cols, 1, mlr)
        n = len(fields)
        if n < 2:
            raise DataError(f"{path}:1: expected comma-separated user,item[,rating"
                            f"[,timestamp]] but found {first!r}")
        cols = dict(zip(("user", "item", "rating", "timestamp"), range(min(n, 4))))
        return _Layout(",", n, cols, 0, mlr)
    if fmt == "inter":
        fields = first.split("\t")
        cols, types = {}, {}
        for j, f in enumerate(fields):
            nm, _, typ = f.strip().partition(":")
            for key, names in (("user", ("user_id", "userid", "user")),
                               ("item", ("item_id", "itemid", "movie_id", "item")),
                               ("rating", ("rating",)), ("timestamp", ("timestamp",))):
                if nm.lower() in names and key not in cols:
                    cols[key], types[key] = j, typ
        if "user" not in cols or "item" not in cols:
            raise DataError(
                f"{path}:1: RecBole header {first!r} must name a user_id and an item_id "
                f"column (e.g. 'user_id:token<TAB>item_id:token<TAB>rating:float')")
        rr = None if rating_range == _AUTO else rating_range
        return _Layout("\t", len(fields), cols, 1, rr, token=True,
                       float_time=types.get("timestamp", "float") != "token")
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


def _fast_parse(data: bytes, lay: _Layout) -> dict[str, np.ndarray]:
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
        for key, c in lay.cols.items():
            start = line_start if c == 0 else seps[:, c - 1] + 1
            end = nl if c == k else seps[:, c]
            if lay.token and key in ("user", "item"):
                # RecBole tokens are strings: '007' and '7' are different ids, so only
                # canonical integers (no leading zero) may be read as numbers here.
                if np.any((buf[start] == 48) & (end - start > 1)):
                    raise _GiveUp
            allow_dot = key == "rating" or (key == "timestamp" and lay.float_time)
            vals = _parse_column(buf, start, end, allow_dot)
            out[key][row:row + n] = np.rint(vals) if out[key].dtype.kind == "i" else vals

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


def _canonical_int_ids(vals) -> bool:
    """True when every text id is a canonical non-negative integer below 2**63, i.e. when
    converting them to int64 keeps distinct ids distinct and loses nothing."""
    return all(_CANON_INT_RE.match(v) and (len(v) < 19 or int(v) <= _INT64_MAX)
               for v in vals)


def _token_problem(t: str) -> str | None:
    """Why text id ``t`` cannot be kept exactly, or None."""
    try:
        t.encode("utf-8")
    except UnicodeEncodeError:                            # surrogate-escaped raw bytes
        return (f"{t!r} is not valid UTF-8; re-encode the file as UTF-8 (invalid bytes "
                f"would make distinct ids indistinguishable)")
    if "\x00" in t:
        return f"{t!r} contains a NUL character"
    return None


def _parse_timestamp(f: str, lay: "_Layout", where: str) -> int:
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


def _slow_parse(data: bytes, lay: _Layout, path: Path):
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
                    problem = _token_problem(f)
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
            if lay.token and not _canonical_int_ids(vals):
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
                f"format; pass rating_range=(low, high), or None to skip the check, if the "
                f"file uses another scale")
    return None


def _check_values(cols: dict, lines: np.ndarray | None, lay: _Layout, path: Path) -> None:
    """Vectorised value checks for the fast path (the slow path checks inline)."""
    def lineno(i):
        return int(lines[i]) if lines is not None else lay.header_lines + int(i) + 1

    if "rating" in cols:
        r = cols["rating"]
        rr = lay.rating_range
        bad = ~np.isfinite(r)
        if rr is not None:
            bad |= (r < rr[0]) | (r > rr[1])
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(f"{path}:{lineno(i)}: {_rating_problem(float(r[i]), rr)}")


# ----------------------------------------------------------------------------------------
# Assembly: duplicates, dense indices
# ----------------------------------------------------------------------------------------
def _dense(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique ids, int32 dense index of each entry); O(n) for compact int ids."""
    if raw.dtype.kind in "iu" and len(raw):
        lo, hi = int(raw.min()), int(raw.max())
        if lo >= 0 and hi < max(4 * len(raw), 1 << 20):
            present = np.zeros(hi + 1, bool)
            present[raw] = True
            ids = np.flatnonzero(present)
            remap = np.cumsum(present, dtype=np.int64) - 1
            return ids.astype(np.int64), remap[raw].astype(np.int32)
    ids, inv = np.unique(raw, return_inverse=True)
    return ids, inv.astype(np.int32)


def _assemble(cols: dict, lines: np.ndarray | None, lay: _Layout, path: Path,
              on_duplicate: str, name: str) -> Ratings:
    user_ids, user = _dense(cols["user"])
    item_ids, item = _dense(cols["item"])
    n = len(user)
    value = cols.get("rating")
    value = np.ones(n, np.float32) if value is None else value.astype(np.float32)
    ts = cols.get("timestamp")
    if ts is not None:
        ts = np.rint(ts).astype(np.int64) if ts.dtype.kind == "f" else ts.astype(np.int64)
    keep = _resolve_duplicates(user, item, ts, len(item_ids), on_duplicate, path, lines,
                               lay, user_ids, item_ids)
    if keep is not None:
        user, item, value = user[keep], item[keep], value[keep]
        ts = None if ts is None else ts[keep]
    return Ratings(user=user, item=item, value=value, user_ids=user_ids, item_ids=item_ids,
                   timestamp=ts, name=name)


def _resolve_duplicates(user, item, ts, n_items, on_duplicate, path, lines, lay,
                        user_ids, item_ids) -> np.ndarray | None:
    """None when all pairs are distinct, else the sorted row indices to keep."""
    key = user.astype(np.int64) * n_items + item
    ks = np.sort(key)                                     # np.sort is ~4x faster than argsort
    if not np.any(ks[1:] == ks[:-1]):
        return None                                       # the common case: all distinct
    order = np.argsort(key, kind="stable")                # stable: ties stay in line order
    ks = key[order]
    dup_next = ks[1:] == ks[:-1]
    if on_duplicate == "error":
        first = int(np.argmax(dup_next))
        k = ks[first]
        rows = order[ks == k]                             # file order (stable sort)
        ln = [int(lines[r]) if lines is not None else lay.header_lines + int(r) + 1
              for r in rows[:5]]
        n_pairs = int(np.count_nonzero(dup_next & ~np.r_[False, dup_next[:-1]]))
        n_extra = int(dup_next.sum())
        u, i = user_ids[user[rows[0]]], item_ids[item[rows[0]]]
        raise DataError(
            f"{path}: (user {u}, item {i}) is rated {len(rows)} times (lines "
            f"{', '.join(map(str, ln))}{', ...' if len(rows) > 5 else ''}); {n_pairs} "
            f"(user, item) pairs are duplicated in total ({n_extra} surplus lines). Pass "
            f"on_duplicate='keep-last' to keep the latest rating of each pair (latest "
            f"timestamp, then last line), or de-duplicate the file")
    if on_duplicate != "keep-last":
        raise ConfigError(f"on_duplicate must be 'error' or 'keep-last' (got {on_duplicate!r})")
    rowpos = np.arange(len(key))
    # Sort by (pair, timestamp, line) and keep the last entry of each pair.
    keys = (rowpos, key) if ts is None else (rowpos, ts, key)
    o = np.lexsort(keys)
    last = np.r_[key[o][1:] != key[o][:-1], True]
    return np.sort(o[last])


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------
def detect_format(path: str | Path) -> str:
    """The format of a ratings file from its name, else from its first line.

    Returns one of ``"tsv"``, ``"dat"``, ``"csv"``, ``"inter"``.
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
    try:
        with open(p, "rb") as fh:
            head = _first_line(fh.read(1 << 16))
    except OSError as e:
        raise DataError(f"cannot read {p}: {e.strerror or e}") from None
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
                    f"(ratings.csv), 'inter' (RecBole)")


def load_file(path: str | Path, fmt: str | None = None, *, rating_range="auto",
              on_duplicate: OnDuplicate = "error", name: str | None = None) -> Ratings:
    """Load a ratings file into :class:`Ratings`.

    Parameters
    ----------
    path : str or Path
        ``u.data``, ``ratings.dat``, ``ratings.csv`` or a RecBole ``.inter`` file.
    fmt : str, optional
        ``"tsv"``, ``"dat"``, ``"csv"``, ``"inter"`` or an alias (``"ml-100k"``, ``"ml-1m"``,
        ``"ml-20m"``, ``"recbole"``, ...); detected from the name/content when None.
    rating_range : (float, float) or None or "auto"
        Inclusive allowed rating range; "auto" is (0.5, 5) for MovieLens formats and no check
        for RecBole; None disables the check (NaN/inf are always rejected).
    on_duplicate : {"error", "keep-last"}
        Policy for repeated (user, item) pairs, see the module docstring.
    name : str, optional
        ``Ratings.name``; defaults to the file name.

    Returns
    -------
    Ratings
        ``user``/``item`` int32 (nnz,), ``value`` float32 (nnz,), ``timestamp`` int64 (nnz,)
        or None, ``user_ids``/``item_ids`` sorted raw ids (int64, or str for text tokens).
        Rows keep file order (minus dropped duplicates).

    Raises
    ------
    DataError
        Missing/empty file, a malformed line (``path:line: what is wrong``), a bad value,
        duplicates under ``on_duplicate="error"``.
    """
    p = Path(path)
    if on_duplicate not in ("error", "keep-last"):
        raise ConfigError(f"on_duplicate must be 'error' or 'keep-last' (got {on_duplicate!r})")
    if rating_range not in (None, _AUTO):
        try:
            lo, hi = (float(x) for x in rating_range)
        except (TypeError, ValueError):
            raise ConfigError(f"rating_range must be (low, high), None or 'auto' "
                              f"(got {rating_range!r})") from None
        if not lo <= hi:
            raise ConfigError(f"rating_range low must be <= high (got {rating_range!r})")
        rating_range = (lo, hi)
    if fmt is None:
        if not p.is_file():
            raise DataError(f"ratings file {p} does not exist" if not p.exists()
                            else f"{p} is not a file")
        fmt = detect_format(p)
    canon = FORMATS.get(str(fmt).lower())
    if canon is None:
        raise ConfigError(f"unknown format {fmt!r}; use one of "
                          f"{', '.join(sorted(set(FORMATS.values())))} (or a dataset alias)")
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
    lay = _layout(canon, data, p, rating_range)
    body = data
    for _ in range(lay.header_lines):
        cut = body.find(b"\n")
        body = b"" if cut < 0 else body[cut + 1:]
    del data
    if not body or body.isspace():
        raise DataError(f"{p}: file has a header but no ratings")
    if not body.endswith(b"\n"):
        body += b"\n"
    lines = None
    try:
        cols = _fast_parse(body, lay)
        _check_values(cols, None, lay, p)
    except _GiveUp:
        cols, lines = _slow_parse(body, lay, p)
    if len(cols["user"]) == 0:
        raise DataError(f"{p}: no ratings found (only blank lines)")
    return _assemble(cols, lines, lay, p, on_duplicate, name or p.name)


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
def _ids_from_strings(a: np.ndarray, src: Path, what: str) -> np.ndarray:
    """bytes/str ids -> int64 when all are canonical non-negative integers below 2**63
    (so no two distinct ids merge, e.g. '007' and '7'), else the exact str ids."""
    vals = []
    for j, x in enumerate(a.tolist()):
        if isinstance(x, bytes):
            x = x.decode("utf-8", errors="surrogateescape")
        else:
            x = str(x)
        problem = _token_problem(x)
        if problem:
            raise DataError(f"{src}: example {j + 1}: {what} {problem}")
        vals.append(x)
    if vals and _canonical_int_ids(vals):
        return np.array([int(x) for x in vals], dtype=np.int64)
    return np.array(vals, dtype=str)


def from_tfds(name: str = "movielens/100k-ratings", split: str = "train",
              data_dir: str | None = None, *, rating_range=MOVIELENS_RATING_RANGE,
              on_duplicate: OnDuplicate = "error", download: bool = True) -> Ratings:
    """Load a TFDS ``movielens/*-ratings`` dataset.

    Needs the optional extra: ``pip install 'dpmt[tfds]'``. Uses the ``user_id``,
    ``movie_id``, ``user_rating`` and ``timestamp`` features; ids are converted to int64
    when numeric. Same checks and duplicate policy as :func:`load_file`.
    """
    try:
        import tensorflow_datasets as tfds  # optional dependency
    except ImportError:
        raise DataError("from_tfds needs tensorflow-datasets, which is not installed; "
                        "run `pip install 'dpmt[tfds]'`, or load the GroupLens files "
                        "with dpmt.data.load('ml-100k')") from None
    if not str(name).startswith("movielens/") or not str(name).endswith("-ratings"):
        raise DataError(f"from_tfds reads the movielens/*-ratings datasets (e.g. "
                        f"'movielens/100k-ratings'), not {name!r}")
    try:
        ds = tfds.load(name, split=split, data_dir=data_dir, batch_size=-1,
                       download=download)
        d = tfds.as_numpy(ds)
    except Exception as e:  # TFDS raises many types; all mean "could not get the data"
        raise DataError(f"could not load TFDS dataset {name!r} split {split!r}: "
                        f"{type(e).__name__}: {e}") from None
    missing = [k for k in ("user_id", "movie_id") if k not in d]
    if missing:
        raise DataError(f"TFDS dataset {name!r} has no {', '.join(missing)} feature")
    src = Path(f"tfds:{name}[{split}]")
    cols = {"user": _ids_from_strings(np.asarray(d["user_id"]), src, "user id"),
            "item": _ids_from_strings(np.asarray(d["movie_id"]), src, "item id")}
    if "user_rating" in d:
        cols["rating"] = np.asarray(d["user_rating"], np.float64)
    if "timestamp" in d:
        cols["timestamp"] = np.asarray(d["timestamp"], np.int64)
    if len(cols["user"]) == 0:
        raise DataError(f"TFDS dataset {name!r} split {split!r} is empty")
    lay = _Layout("\t", 4, {k: 0 for k in cols}, 0, rating_range)
    # "line" = example number (1-based) in the split
    _check_values(cols, np.arange(1, len(cols["user"]) + 1), lay, src)
    for key in ("user", "item"):
        a = cols[key]
        if a.dtype.kind == "i" and (a < 0).any():
            raise DataError(f"{src}: example {int(np.argmax(a < 0)) + 1}: negative {key} id")
    return _assemble(cols, np.arange(1, len(cols["user"]) + 1), lay, src, on_duplicate,
                     str(name))


# ----------------------------------------------------------------------------------------
# Item genres (ML-100K public item metadata)
# ----------------------------------------------------------------------------------------
def _genre_file(path_or_dir: Path) -> Path:
    if path_or_dir.is_dir():
        for cand in ("u.item", "ml-100k.item"):
            if (path_or_dir / cand).is_file():
                return path_or_dir / cand
        items = sorted(path_or_dir.glob("*.item"))
        if items:
            return items[0]
        raise DataError(f"no item metadata in {path_or_dir}: expected u.item (GroupLens "
                        f"ml-100k.zip) or ml-100k.item (RecBole); run dpmt.data.fetch"
                        f"('ml-100k') to get it")
    if not path_or_dir.is_file():
        raise DataError(f"item metadata file {path_or_dir} does not exist")
    return path_or_dir


def load_item_genres(path_or_dir: str | Path, item_ids: np.ndarray, *,
                     allow_missing: bool = False) -> np.ndarray:
    """ML-100K genre flags aligned to ``item_ids``.

    Parameters
    ----------
    path_or_dir : str or Path
        GroupLens ``u.item`` (pipe-separated, 19 genre flags), RecBole ``ml-100k.item``
        (``class:token_seq`` column of space-separated genre names), or a directory holding
        one of them (e.g. ``data/ml-100k``).
    item_ids : array (n_items,)
        Raw item ids, e.g. ``Ratings.item_ids``.
    allow_missing : bool
        If True, items absent from the metadata get an all-zero row instead of an error.

    Returns
    -------
    np.ndarray float32 (n_items, 19)
        Row k holds the 0/1 genre flags of ``item_ids[k]``, columns in :data:`ML100K_GENRES`
        order.
    """
    f = _genre_file(Path(path_or_dir))
    text = f.read_bytes().decode("latin-1")             # u.item is Latin-1 encoded
    ids, rows = [], []
    genre_col = {g: j for j, g in enumerate(ML100K_GENRES)}
    lines = text.splitlines()
    recbole = bool(lines) and ":token" in lines[0]
    if recbole:
        header = lines[0].split("\t")
        names = [h.split(":")[0] for h in header]
        if "item_id" not in names or "class" not in names:
            raise DataError(f"{f}:1: RecBole item header must have item_id and class "
                            f"columns (got {lines[0]!r})")
        ic, gc = names.index("item_id"), names.index("class")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or (recbole and lineno == 1):
            continue
        flags = np.zeros(len(ML100K_GENRES), np.float32)
        if recbole:
            fields = line.split("\t")
            if len(fields) != len(header):
                raise DataError(f"{f}:{lineno}: expected {len(header)} tab-separated fields, "
                                f"found {len(fields)}")
            for g in fields[gc].split():
                if g not in genre_col:
                    raise DataError(f"{f}:{lineno}: unknown genre {g!r}; expected one of "
                                    f"{', '.join(ML100K_GENRES)}")
                flags[genre_col[g]] = 1.0
            raw_id = fields[ic].strip()
        else:
            fields = line.split("|")
            if len(fields) != 5 + len(ML100K_GENRES):
                raise DataError(f"{f}:{lineno}: expected {5 + len(ML100K_GENRES)} "
                                f"'|'-separated fields (ML-100K u.item), found {len(fields)}")
            try:
                flags[:] = [int(x) for x in fields[5:]]
            except ValueError:
                raise DataError(f"{f}:{lineno}: genre flags must be 0 or 1") from None
            if not np.isin(flags, (0.0, 1.0)).all():
                raise DataError(f"{f}:{lineno}: genre flags must be 0 or 1")
            raw_id = fields[0].strip()
        # RecBole ids are exact tokens ('007' != '7', as in load_inter); u.item ids are
        # numbers, like the u.data ids they are matched with
        if (_CANON_INT_RE if recbole else _INT_RE).match(raw_id) and int(raw_id) <= _INT64_MAX:
            ids.append(int(raw_id))
        else:
            ids.append(raw_id)
        rows.append(flags)
    if not rows:
        raise DataError(f"{f}: no items found")
    meta_ids = np.array(ids)
    table = np.stack(rows)
    item_ids = np.asarray(item_ids)
    if (meta_ids.dtype.kind in "iu") != (item_ids.dtype.kind in "iu"):
        meta_ids, item_ids = meta_ids.astype(str), item_ids.astype(str)
    order = np.argsort(meta_ids, kind="stable")
    sorted_ids = meta_ids[order]
    pos = np.clip(np.searchsorted(sorted_ids, item_ids), 0, len(sorted_ids) - 1)
    found = sorted_ids[pos] == item_ids
    if not found.all() and not allow_missing:
        miss = item_ids[~found]
        raise DataError(f"{(~found).sum()} of {len(item_ids)} items have no entry in {f} "
                        f"(e.g. {', '.join(map(str, miss[:5]))}); is this the metadata of "
                        f"the same dataset? Pass allow_missing=True to give them all-zero "
                        f"genres")
    out = np.where(found[:, None], table[order[pos]], 0.0).astype(np.float32)
    return out
