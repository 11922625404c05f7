"""Reading TFDS ``movielens/*-ratings`` datasets: the I/O behind
:func:`dpmt.data.loaders.from_tfds` (which checks the values and builds the Ratings).

Two ways in, tried in this order:

1. ``tfds.data_source``: a dataset already prepared in a random-access format (ArrayRecord,
   or Parquet) is read with tensorflow-datasets alone; TensorFlow is not needed. Records
   are read as raw ``tf.train.Example`` bytes in chunks and only the four features below
   are parsed (about 20 times faster than decoding every feature of every example).
2. ``tfds.load(..., batch_size=-1)``, only where TensorFlow is installed: a dataset
   prepared as TFRecord (the movielens builders' default format), or one not prepared yet
   (``download=True`` downloads and prepares it, from GroupLens).

Without TensorFlow a dataset can be read but not prepared (TFDS needs TensorFlow to write
TFRecord and to run its ``tfds`` command line); the errors then say how to prepare it on
another machine and copy the folder.

Features used: ``user_id`` and ``movie_id`` (bytes strings in the movielens builders;
kept as int64 when every id is a canonical non-negative integer, else as exact text),
``user_rating`` (float32) and ``timestamp`` (int64, seconds); the last two are optional.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dpmt.data.parsing import canonical_int_ids, token_problem
from dpmt.errors import DataError

__all__ = ["FEATURES", "read_tfds_columns", "import_tfds", "has_tensorflow"]

#: TFDS feature -> Ratings column
FEATURES = {"user_id": "user", "movie_id": "item", "user_rating": "rating",
            "timestamp": "timestamp"}
_IDS = ("user_id", "movie_id")
_CHUNK = 1 << 16                                  # records per __getitems__ call
#: the GroupLens download that dpmt reads directly, for each TFDS config
_GROUPLENS = {"100k": "ml-100k", "1m": "ml-1m", "20m": "ml-20m", "25m": "ml-25m",
              "latest-small": "ml-latest-small"}


def import_tfds():
    """The ``tensorflow_datasets`` module with the movielens builders registered, or a
    DataError saying how to install it."""
    try:
        import tensorflow_datasets as tfds  # optional dependency
    except ImportError:
        raise DataError("from_tfds needs tensorflow-datasets, which is not installed; "
                        "run `pip install 'dpmt[tfds]'`, or load the GroupLens files "
                        "with dpmt.data.load('ml-100k')") from None
    try:
        import tensorflow_datasets.structured  # noqa: F401  registers "movielens"
    except ImportError:
        pass                                  # a stand-in module, or a trimmed install
    return tfds


def has_tensorflow() -> bool:
    """Whether TensorFlow is importable (what ``tfds.load`` and preparing data need)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):             # sys.modules["tensorflow"] is None
        return False


# ----------------------------------------------------------------------------------------
# Column building: ids deduplicated as they are read, values checked per example
# ----------------------------------------------------------------------------------------
class _Columns:
    def __init__(self, src: str, keys: tuple[str, ...]):
        self.src, self.keys = src, keys
        self.seen = {k: {} for k in _IDS}         # raw id -> code, in order of appearance
        self.first = {k: [] for k in _IDS}        # code -> first example number
        self.parts = {k: [] for k in keys}
        self.n = 0

    def add(self, rows: dict[str, list]) -> None:
        for k in self.keys:
            vals = rows[k]
            if k in _IDS:
                seen, first, codes = self.seen[k], self.first[k], []
                for j, v in enumerate(vals):
                    c = seen.get(v)
                    if c is None:
                        c = seen[v] = len(seen)
                        first.append(self.n + j + 1)
                    codes.append(c)
                self.parts[k].append(np.asarray(codes, np.int64))
            elif k == "user_rating":
                self.parts[k].append(np.asarray(vals, np.float64))
            else:
                self.parts[k].append(np.asarray(vals, np.int64))
        self.n += len(rows[self.keys[0]])

    def _ids(self, k: str) -> np.ndarray:
        what = "user id" if k == "user_id" else "item id"
        text = []
        for v, ex in zip(self.seen[k], self.first[k]):
            t = v.decode("utf-8", errors="surrogateescape") if isinstance(v, bytes) else v
            problem = token_problem(t) or ("is empty" if not t.strip() else None)
            if problem:
                raise DataError(f"{self.src}: example {ex}: {what} {problem}")
            text.append(t)
        if text and canonical_int_ids(text):
            uniq = np.array([int(t) for t in text], dtype=np.int64)
        else:
            uniq = np.array(text, dtype=str)
        codes = np.concatenate(self.parts[k]) if self.parts[k] else np.zeros(0, np.int64)
        return uniq[codes] if len(uniq) else uniq

    def columns(self) -> dict:
        out = {FEATURES[k]: self._ids(k) for k in _IDS}
        for k in self.keys:
            if k not in _IDS:
                out[FEATURES[k]] = np.concatenate(self.parts[k])
        return out


def _bad(src, ex, key, why):
    return DataError(f"{src}: example {ex}: feature {key} {why}")


def _id_value(v, src, ex, key):
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise _bad(src, ex, key, f"has {v.size} values, expected one")
        v = v.reshape(()).item()
    elif isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (bytes, str)):
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    raise _bad(src, ex, key, f"is {type(v).__name__} {v!r}, expected a string id")


def _number(v, src, ex, key, integer):
    a = np.asarray(v)
    if a.size != 1:
        raise _bad(src, ex, key, f"has {a.size} values, expected one")
    x = a.reshape(()).item()
    if isinstance(x, bool) or not isinstance(x, (int, float)) or (integer and
                                                                 not isinstance(x, int)):
        raise _bad(src, ex, key, f"is {x!r}, expected {'an integer' if integer else 'a number'}")
    if integer and not -2**63 <= x < 2**63:
        raise _bad(src, ex, key, f"is {x}, outside int64")
    return x


def _from_mapping(rec, src, ex, keys):
    out = []
    for k in keys:
        if k not in rec:
            raise _bad(src, ex, k, "is missing")
        v = rec[k]
        out.append(_id_value(v, src, ex, k) if k in _IDS else
                   _number(v, src, ex, k, integer=(k == "timestamp")))
    return out


_KIND = {"user_id": ("bytes_list", "int64_list"), "movie_id": ("bytes_list", "int64_list"),
         "user_rating": ("float_list", "int64_list"), "timestamp": ("int64_list",)}


def _from_example(feature_map, src, ex, keys):
    out = []
    for k in keys:
        if k not in feature_map:
            raise _bad(src, ex, k, "is missing")
        f = feature_map[k]
        kind = f.WhichOneof("kind")
        if kind not in _KIND[k]:
            raise _bad(src, ex, k, f"is a {kind or 'empty feature'}, expected "
                                   f"{' or '.join(_KIND[k])}")
        vals = getattr(f, kind).value
        if len(vals) != 1:
            raise _bad(src, ex, k, f"has {len(vals)} values, expected one")
        v = vals[0]
        out.append(str(v) if kind == "int64_list" and k in _IDS else v)
    return out


_FAST = {"user_id": "bytes_list", "movie_id": "bytes_list", "user_rating": "float_list",
         "timestamp": "int64_list"}


def _example_values(record, parser, src, ex, keys):
    """The values of ``keys`` in serialized Example ``record``: the common case (one value
    of the usual kind each) directly, anything else through :func:`_from_example`."""
    try:
        fm = parser(record)
    except Exception as e:                        # a DecodeError: not an Example proto
        raise DataError(f"{src}: example {ex} is not a tf.train.Example "
                        f"({type(e).__name__}: {e})") from None
    out = []
    for k in keys:
        if k in fm:
            v = getattr(fm[k], _FAST[k]).value
            if len(v) == 1:
                out.append(v[0])
                continue
        return _from_example(parser(record), src, ex, keys)   # fresh: name the problem
    return out


def _example_parser():
    """``bytes -> feature map`` for serialized ``tf.train.Example``s (TFDS's own copy of
    the proto, so no TensorFlow), or None where this TFDS lacks it."""
    try:
        from tensorflow_datasets.proto import tf_example_pb2
    except ImportError:
        return None
    parse = tf_example_pb2.Example.FromString
    return lambda b: parse(bytes(b) if not isinstance(b, bytes) else b).features.feature


# ----------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------
def _source_keys(source, first_record, src, parser) -> tuple[str, ...]:
    info = getattr(source, "dataset_info", None)
    names = None
    try:
        names = set(info.features.keys())
    except Exception:                             # a list, a stand-in: use the first record
        pass
    if names is None:
        if isinstance(first_record, Mapping):
            names = set(first_record)
        elif parser is not None:
            names = set(parser(first_record))
        else:
            names = set()
    missing = [k for k in _IDS if k not in names]
    if missing:
        raise DataError(f"{src} has no {', '.join(missing)} feature (it has "
                        f"{', '.join(sorted(names)) or 'none'}); from_tfds reads the "
                        f"movielens/*-ratings datasets")
    return tuple(k for k in FEATURES if k in names)


def _chunks(source, n):
    """Records in chunks: ``__getitems__`` where it works, else one by one."""
    getitems = getattr(source, "__getitems__", None)
    for lo in range(0, n, _CHUNK):
        keys = list(range(lo, min(n, lo + _CHUNK)))
        if getitems is not None:
            try:
                yield lo, getitems(keys)
                continue
            except TypeError:        # tfds.testing.mock_data's source (TFDS 4.9) has a
                getitems = None      # __getitems__ that cannot be called; read one by one
        yield lo, [source[i] for i in keys]


def _read_source(source, src: str) -> dict:
    n = len(source)
    if n == 0:
        return {}
    parser = _example_parser()
    cols = None
    for lo, records in _chunks(source, n):
        if cols is None:
            cols = _Columns(src, _source_keys(source, records[0], src, parser))
        rows = {k: [] for k in cols.keys}
        for j, rec in enumerate(records):
            ex = lo + j + 1
            if isinstance(rec, Mapping):
                vals = _from_mapping(rec, src, ex, cols.keys)
            elif isinstance(rec, (bytes, bytearray, memoryview)) and parser is not None:
                vals = _example_values(rec, parser, src, ex, cols.keys)
            else:
                raise DataError(f"{src}: example {ex} is a {type(rec).__name__}, "
                                f"expected a feature dict or serialized tf.train.Example")
            for k, v in zip(cols.keys, vals):
                rows[k].append(v)
        cols.add(rows)
    return cols.columns()


def _read_batch(d, src: str) -> dict:
    """Columns from ``tfds.as_numpy(tfds.load(..., batch_size=-1))``."""
    if not isinstance(d, Mapping):
        raise DataError(f"{src}: tfds.load returned {type(d).__name__}, expected a dict of "
                        f"features")
    missing = [k for k in _IDS if k not in d]
    if missing:
        raise DataError(f"{src} has no {', '.join(missing)} feature (it has "
                        f"{', '.join(sorted(map(str, d))) or 'none'}); from_tfds reads the "
                        f"movielens/*-ratings datasets")
    keys = tuple(k for k in FEATURES if k in d)
    arrays = {k: np.asarray(d[k]) for k in keys}
    n = len(arrays["user_id"])
    for k, a in arrays.items():
        if a.ndim != 1 or len(a) != n:
            raise DataError(f"{src}: feature {k} has shape {a.shape}, expected ({n},): one "
                            f"value per example")
    if n == 0:
        return {}
    cols = _Columns(src, keys)
    rows = {}
    for k, a in arrays.items():
        if k in _IDS:
            rows[k] = [_id_value(v, src, j + 1, k) for j, v in enumerate(a.tolist())]
        else:
            if a.dtype.kind not in ("iu" if k == "timestamp" else "iuf"):
                raise _bad(src, 1, k, f"has dtype {a.dtype}, expected "
                                      f"{'integers' if k == 'timestamp' else 'numbers'}")
            rows[k] = a
    cols.add(rows)
    return cols.columns()


def _how_to_prepare(name: str, where: str) -> str:
    version = name.split("/", 1)[1].removesuffix("-ratings")
    alt = _GROUPLENS.get(version)
    return (f"Preparing a TFDS dataset needs TensorFlow (not installed here) and the "
            f"GroupLens network; reading a prepared ArrayRecord copy needs only "
            f"tensorflow-datasets. On a machine with both: `pip install tensorflow "
            f"tensorflow-datasets`, `tfds build {name} --file_format=array_record "
            f"--data_dir DIR`, then copy DIR/{name} here to {where}, or point at the "
            f"folder holding {name.split('/')[0]}/ (dpmt train --data-dir DIR, used when "
            f"DIR/{name} exists; Python data_dir=DIR). Or install "
            f"TensorFlow here (pip install 'dpmt[tfds]') so that tfds.load prepares it"
            + (f", or read the GroupLens files directly: --dataset {alt} (dpmt fetch "
               f"{alt})" if alt else ""))


def _why_no_source(tfds, name, split, data_dir, err) -> tuple[str, str]:
    """(what went wrong with tfds.data_source, what to do without TensorFlow)."""
    try:
        b = tfds.builder(name, data_dir=data_dir)
        prepared = b.is_prepared()
        where = str(b.data_dir)
        formats = {getattr(f, "value", str(f)) for f in b.info.available_file_formats()}
    except Exception:
        return (f"tfds.data_source failed: {type(err).__name__}: {err}", "")
    dest = str(Path(where).parent)                # <data_dir>/movielens/100k-ratings
    if data_dir is None:
        dest += " (TFDS's default folder; $TFDS_DATA_DIR moves it)"
    if not prepared:
        return (f"TFDS dataset {name!r} is not prepared at {where}",
                _how_to_prepare(name, dest))
    if not formats & {"array_record", "parquet"}:
        fmt = ", ".join(sorted(formats)) or "an unknown format"
        return (f"TFDS dataset {name!r} at {where} is stored as {fmt}, which only "
                f"TensorFlow reads (tfds.data_source reads array_record or parquet)",
                f"Install TensorFlow (pip install 'dpmt[tfds]'), or on a machine with it "
                f"convert this copy (`tfds convert_format --dataset_version_dir {where} "
                f"--out_file_format array_record`) or rebuild it (`tfds build {name} "
                f"--file_format=array_record --data_dir DIR`) and copy it to {dest}")
    splits = ", ".join(sorted(map(str, b.info.splits))) or "none"
    return (f"tfds.data_source could not read split {split!r} of {name!r} at {where} "
            f"(splits: {splits}): {type(err).__name__}: {err}", "")


def read_tfds_columns(name: str, split: str = "train", data_dir: str | None = None,
                      download: bool = True) -> tuple[dict, Path]:
    """The raw columns of TFDS dataset ``name`` (``user``, ``item`` and, where the dataset
    has them, ``rating``, ``timestamp``) and the source label ``tfds:NAME[SPLIT]`` for
    messages. ``{}`` for an empty split. Raises DataError.
    """
    tfds = import_tfds()
    name = str(name)
    if not name.startswith("movielens/") or not name.endswith("-ratings"):
        raise DataError(f"from_tfds reads the movielens/*-ratings datasets (e.g. "
                        f"'movielens/100k-ratings'), not {name!r}")
    src = Path(f"tfds:{name}[{split}]")
    reason = ""
    if hasattr(tfds, "data_source"):
        kw = {}
        try:
            from tensorflow_datasets.core.decode import DeserializeMethod
            kw["deserialize_method"] = DeserializeMethod.RAW_BYTES
        except ImportError:
            pass
        try:
            source = tfds.data_source(name, split=split, data_dir=data_dir, download=False,
                                      **kw)
        except Exception as e:  # TFDS raises many types; _why_no_source sorts them out
            reason, advice = _why_no_source(tfds, name, split, data_dir, e)
            if not has_tensorflow():
                advice = advice or ("TensorFlow is not installed, so tfds.load is no "
                                    "fallback")
                raise DataError(f"could not load TFDS dataset {name!r} split {split!r}: "
                                f"{reason.rstrip('.')}. {advice}") from None
        else:
            return _read_source(source, str(src)), src
    try:
        d = tfds.as_numpy(tfds.load(name, split=split, data_dir=data_dir, batch_size=-1,
                                    download=download))
    except Exception as e:  # TFDS raises many types; all mean "could not get the data"
        first = f"{reason}; then tfds.load: " if reason else ""
        raise DataError(f"could not load TFDS dataset {name!r} split {split!r}: {first}"
                        f"{type(e).__name__}: {e}") from None
    return _read_batch(d, str(src)), src
