"""The one atomic writer of the package.

Every file dpmt writes (run directories, models, ledgers, reports, downloads, benchmark JSON)
goes through :func:`atomic_write_bytes`: a temporary file in the same folder, ``fsync``, then
``os.replace``. A crash, a full disk or Ctrl-C therefore never leaves a partial file under the
final name, and a reader sees either the old file or the new one.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from dpmt.errors import ConfigError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "atomic_save_npz",
           "check_output_path"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder + rename).

    ``mode``: the permission bits of the final file (``mkstemp`` creates 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int = 2) -> None:
    """``obj`` as JSON (NaN → null, ±inf → "inf"/"-inf", numpy scalars as numbers)."""
    atomic_write_text(path, json.dumps(jsonable(obj), indent=indent) + "\n")


def atomic_save_npz(path: str | os.PathLike, **arrays) -> None:
    """``np.savez`` of ``arrays`` to ``path`` atomically (built in memory, then written)."""

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def jsonable(x: Any):
    """``x`` with numpy scalars/arrays made JSON-native; NaN → None, ±inf → "inf"/"-inf"."""

    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = float(x)
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    return x


def check_output_path(path: str | os.PathLike, flag: str, *, folder: bool) -> None:
    """Refuse, before any work, an output that cannot be written: ``path`` is a file where
    a folder is wanted (or the reverse), sits below a file, or its nearest existing parent is
    not writable. Raises :class:`~dpmt.errors.ConfigError` naming ``flag``."""

    p = Path(path)
    if folder and p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {p} is a file; give a folder")
    if not folder and p.is_dir():
        raise ConfigError(f"{flag} {p} is a folder; give a file name")
    if not folder and not p.parent.is_dir():
        raise ConfigError(f"cannot write {flag} {p}: the folder {p.parent} does not exist")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {p}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag} {p}: {parent} is not writable")
