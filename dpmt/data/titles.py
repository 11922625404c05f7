"""Item titles, for printing recommendations (public metadata; no privacy cost).

ML-100K ships them: ``u.item`` (GroupLens, ``id|title|release date|…``, Latin-1) or the
RecBole copy ``ml-100k.item`` (tab-separated, header ``item_id:token movie_title:token_seq
…``). Other sources: a folder (or a ratings file's folder) holding one of those files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpmt.errors import DataError


def _title_file(dataset: str, data_dir: str | Path) -> Path | None:
    if dataset == "ml-100k":
        folder = Path(data_dir) / "ml-100k"
    else:
        p = Path(dataset).expanduser()
        if not p.exists():
            return None
        folder = p if p.is_dir() else p.parent
    for name in ("u.item", "ml-100k.item"):
        if (folder / name).is_file():
            return folder / name
    items = sorted(folder.glob("*.item")) if folder.is_dir() else []
    return items[0] if items else None


def read_titles(path: str | Path) -> dict:
    """Raw item id (int, or str where ids are not integers) → title, from ``path``."""
    path = Path(path)
    text = path.read_bytes().decode("latin-1")
    out: dict = {}
    lines = text.splitlines()
    if lines and "\t" in lines[0] and ":" in lines[0].split("\t")[0]:      # RecBole atomic file
        head = [h.split(":")[0] for h in lines[0].split("\t")]
        if "item_id" not in head:
            raise DataError(f"{path}: no item_id column in the header {lines[0]!r}")
        c_id = head.index("item_id")
        c_title = next((k for k, h in enumerate(head) if "title" in h), None)
        if c_title is None:
            raise DataError(f"{path}: no title column in the header {lines[0]!r}")
        rows = (ln.split("\t") for ln in lines[1:] if ln.strip())
        for f in rows:
            if len(f) > max(c_id, c_title):
                out[_id(f[c_id])] = f[c_title].strip()
        return out
    for ln in lines:                                                      # GroupLens u.item
        f = ln.split("|")
        if len(f) >= 2 and f[0].strip():
            out[_id(f[0])] = f[1].strip()
    return out


def _id(s: str):
    s = s.strip()
    try:
        return int(s)
    except ValueError:
        return s


def item_titles_for(dataset: str, item_ids: np.ndarray, data_dir: str | Path = "data"
                    ) -> dict | None:
    """Titles of ``item_ids`` (id → title) where ``dataset`` has a title file on disk, else
    None. Never downloads."""
    path = _title_file(str(dataset), data_dir)
    if path is None:
        return None
    titles = read_titles(path)
    return {(int(i) if isinstance(i, (np.integer, int)) else str(i)):
            titles.get(int(i) if isinstance(i, (np.integer, int)) else str(i))
            for i in np.asarray(item_ids).tolist()}
