"""A saved model's file format: file names, the run directory's two parts, the checks a
loader makes, and the fingerprint over every file.

A model is a directory of ``model.json`` (format, version, dimensions, ε, where the noise
came from, the public config, one fingerprint), ``item_embeddings.npz`` (V, item ids, the
released counts and offsets) and ``ledger.json``. ``model.json``'s fingerprint covers all
three, so files mixed from two models (an ε = 1 ledger beside ε = 20 embeddings) are refused.
A run directory holds the model in ``model/`` (shareable) and the trainer's private state in
``trainer/`` (never shared).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dpmt.errors import DataError

MODEL_FORMAT = "dpmt-model"
MODEL_VERSION = 2     # 2: fingerprint over every file, no metrics, noise note (issue 24)
MODEL_FILE = "model.json"
ARRAYS_FILE = "item_embeddings.npz"
LEDGER_FILE = "ledger.json"

#: a run directory's shareable part (the model) and the trainer's private part
SHARED_DIR = "model"
TRAINER_DIR = "trainer"

_META_TYPES = {"n_items": int, "dim": int, "private": bool, "noise": dict, "config": dict,
               "label_offset": (float, int, type(None)), "seconds": (float, int),
               "compile_seconds": (float, int), "history": list,
               "epsilon": (float, int, str), "delta": (float, int)}


def check_meta_types(meta: dict, path: Path) -> None:
    for key, types in _META_TYPES.items():
        if key not in meta:
            raise DataError(f"{path} has no {key!r}: the model file is incomplete or from an "
                            "older dpmt; train it again")
        v = meta[key]
        if isinstance(v, bool) and types is not bool:
            ok = False
        else:
            ok = isinstance(v, types)
        if not ok:
            raise DataError(f"{path}: {key!r} must be {_describe(types)} (got {v!r}); the "
                            "file was edited or corrupted")


_TYPE_WORDS = {bool: "true/false", int: "a number", float: "a number", str: "a string",
               list: "a list", dict: "an object", type(None): "null"}


def _describe(types) -> str:
    """``(float, int, NoneType)`` → "a number or null", for people."""
    types = types if isinstance(types, tuple) else (types,)
    words = list(dict.fromkeys(_TYPE_WORDS.get(t, t.__name__) for t in types))
    return " or ".join(words)


def require_regular(path: Path, why: str) -> None:
    """Read only regular files: a directory, a FIFO or a symlink loop is refused, not hung
    on."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DataError(f"{path} is missing: {why}") from None
    except OSError as e:
        raise DataError(f"{path} cannot be read ({e.strerror}): {why}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{path} is not a regular file: {why}")


def read_json(path: Path, why: str):
    require_regular(path, why)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is not valid JSON ({e}); {why}") from None


def files_fingerprint(arrays_fp: str, ledger_text: str | None, meta: dict) -> str:
    """SHA-256 (16 hex) over every file of a model: the arrays' fingerprint, the ledger's
    canonical JSON and ``model.json`` without its fingerprint field."""
    h = hashlib.sha256(arrays_fp.encode())
    if ledger_text is not None:
        try:
            ledger = json.dumps(json.loads(ledger_text), sort_keys=True)
        except json.JSONDecodeError:
            ledger = ledger_text
        h.update(b"\x00ledger\x00" + ledger.encode())
    body = {k: v for k, v in meta.items() if k != "fingerprint"}
    h.update(b"\x00meta\x00" + json.dumps(body, sort_keys=True).encode())
    return h.hexdigest()[:16]


