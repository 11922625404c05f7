"""A saved model's file format: file names, the run directory's two parts, the checks a
loader makes, and the fingerprint over every file.

A model is a directory of ``model.json`` (format, version, dimensions, ε, where the noise
came from, the public config, one fingerprint), ``item_embeddings.npz`` (V, item ids, the
released counts and offsets) and ``ledger.json``. ``model.json``'s fingerprint covers all
three, so files mixed from two models (an ε = 1 ledger beside ε = 20 embeddings) are refused.
A run directory holds the model in ``model/`` (shareable) and the trainer's private state in
``trainer/`` (never shared). :func:`save_model` and :func:`load_model` are the persistence
of :class:`dpmt.model.Model` (its ``save``/``load``).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path

import numpy as np

from dpmt._io import atomic_save_npz, atomic_write_json, atomic_write_text, jsonable
from dpmt.config import TrainConfig
from dpmt.errors import ConfigError, DataError
from dpmt.privacy.ledger import PRIVACY_UNIT, PrivacyLedger

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


def arrays_fingerprint(item_embeddings, item_ids, item_counts=None,
                       item_offsets=None) -> str:
    """SHA-256 (hex, 16 chars) of a model's released arrays: V, the item ids, the released
    counts and offsets (those present)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(item_embeddings).tobytes())
    h.update(np.asarray(item_ids).astype(str).astype("U").tobytes())
    for name, a in (("counts", item_counts), ("offsets", item_offsets)):
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(f"{name}:{a.dtype.str}:".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


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


# -- persistence -------------------------------------------------------------------------
def save_model(model, path: str | os.PathLike) -> Path:
    """Write the *shareable* model into directory ``path``: ``item_embeddings.npz``,
    ``ledger.json`` and ``model.json`` (written last, so a half-written directory is never
    a loadable model). Nothing private goes there: no metrics (they read exact held-out
    data), no checkpoint, no noise key or seed, no fingerprint of the training data.
    ``model.json``'s ``fingerprint`` covers every file, the ledger included."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"cannot save a model to {out}: it is a file; give a directory")
    arrays = {"V": model.item_embeddings, "item_ids": model.item_ids}
    if model.item_counts is not None:
        arrays["item_counts"] = np.asarray(model.item_counts)
    if model.item_offsets is not None:
        arrays["item_offsets"] = np.asarray(model.item_offsets, np.float64)
    atomic_save_npz(out / ARRAYS_FILE, **arrays)
    ledger_text = None
    if model.ledger is not None:
        ledger_text = model.ledger.to_json()
        atomic_write_text(out / LEDGER_FILE, ledger_text)
    meta = json.loads(json.dumps(jsonable(public_meta(model))))
    meta["fingerprint"] = files_fingerprint(model.fingerprint(), ledger_text, meta)
    atomic_write_json(out / MODEL_FILE, meta)
    return out


def public_meta(model) -> dict:
    """``model.json`` of ``model`` before its fingerprint: only public values."""
    return {"format": MODEL_FORMAT, "version": MODEL_VERSION,
            "privacy_unit": PRIVACY_UNIT, "n_items": model.n_items, "dim": model.dim,
            "private": model.private,
            "epsilon": model.epsilon, "delta": model.config.privacy.delta if model.private else 0.0,
            "noise": model.noise_note(),
            "config": model.config.stored(public=True), "label_offset": model.label_offset,
            "seconds": model.seconds, "compile_seconds": model.compile_seconds,
            "history": model.history}



def load_model(cls, path: str | os.PathLike):
    """``cls`` (:class:`dpmt.model.Model`) read from a model written by :func:`save_model`, or the ``model/`` folder of a
    ``dpmt train --out`` run directory (then the trainer's own metrics are attached too).

    Refuses, with a message that says what is wrong, a path that is not a model, a file
    of another format or a newer version, a file that is not a regular file, and files
    that do not match the fingerprint (truncated, edited, or mixed from two models:
    the ledger is covered too)."""
    root = Path(path)
    run_dir = None
    if root.is_file() and root.name == MODEL_FILE:
        root = root.parent
    if not (root / MODEL_FILE).exists() and (root / SHARED_DIR / MODEL_FILE).exists():
        run_dir, root = root, root / SHARED_DIR
    meta_path = root / MODEL_FILE
    if not root.is_dir() or not meta_path.exists():
        inner = sorted(p.parent for p in root.glob(f"*/{SHARED_DIR}/{MODEL_FILE}")) \
            if root.is_dir() else []
        hint = (" (a run directory becomes a model when its run finishes; resume it with "
                "`dpmt train --resume`)" if (root / "trainer").is_dir() else
                f" (it holds the run director{'ies' if len(inner) > 1 else 'y'} "
                f"{', '.join(str(p) for p in inner[:3])}: give one of them)" if inner
                else "")
        raise DataError(f"{root} is not a dpmt model: no {MODEL_FILE} there{hint}")
    meta = read_json(meta_path, "the model is corrupted: train it again")
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        raise DataError(f"{meta_path} is not a dpmt model file (format "
                        f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    version = meta.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DataError(f"{meta_path} has model format version {version!r}, which no dpmt "
                        "ever wrote: the file was edited or corrupted; train the model "
                        "again")
    if version > MODEL_VERSION:
        raise DataError(f"{meta_path} has model format version {version}; this dpmt reads "
                        f"version {MODEL_VERSION}: upgrade dpmt to read it")
    if version < MODEL_VERSION:
        raise DataError(f"{meta_path} is a model of format {version}, which published the "
                        "seed of its noise (so its ε does not hold against a reader of its "
                        "files): train it again with this dpmt")
    check_meta_types(meta, meta_path)
    if isinstance(meta["epsilon"], str) and (meta["private"] or meta["epsilon"] != "inf"):
        raise DataError(f"{meta_path}: 'epsilon' is {meta['epsilon']!r}; only a non-private "
                        "model has ε = inf")
    config = TrainConfig.from_dict(meta["config"])
    arrays_path = root / ARRAYS_FILE
    require_regular(arrays_path, "the model is incomplete")
    try:
        with np.load(arrays_path, allow_pickle=False) as z:
            V, ids = z["V"], z["item_ids"]
            counts = z["item_counts"] if "item_counts" in z.files else None
            offsets = z["item_offsets"] if "item_offsets" in z.files else None
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError) as e:
        raise DataError(f"{arrays_path} cannot be read ({type(e).__name__}: {e}); "
                        "the model is corrupted: train it again") from None
    ledger, ledger_text = None, None
    if config.private:
        lpath = root / LEDGER_FILE
        require_regular(lpath, "a private model without its ledger cannot state its ε")
        ledger_text = lpath.read_text(encoding="utf-8", errors="replace")
        try:
            ledger = PrivacyLedger.from_dict(json.loads(ledger_text))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise DataError(f"{lpath} cannot be read ({e})") from None
    noise = meta["noise"]
    model = cls(item_embeddings=V, item_ids=ids, config=config, ledger=ledger,
                item_counts=counts, history=list(meta["history"]),
                seconds=float(meta["seconds"]),
                compile_seconds=float(meta["compile_seconds"]),
                label_offset=None if meta["label_offset"] is None
                else float(meta["label_offset"]), item_offsets=offsets,
                noise_reproducible=noise.get("source") == "user-given seed")
    stated = meta.pop("fingerprint", None)
    if stated != files_fingerprint(model.fingerprint(), ledger_text, meta):
        raise DataError(f"the files of {root} do not match the fingerprint in {MODEL_FILE}: "
                        "they were changed, or mixed from two models (the ledger "
                        "included); use the model's own files")
    if run_dir is not None:
        metrics = run_dir / TRAINER_DIR / "metrics.json"
        if metrics.is_file():
            try:
                model.metrics = json.loads(metrics.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                model.metrics = None
    return model
