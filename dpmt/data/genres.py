"""ML-100K item genres: the public item metadata (``u.item`` or RecBole ``ml-100k.item``)
aligned to a dataset's item ids, for content-based item encoders."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpmt.data.parsing import _CANON_INT_RE, _INT64_MAX, _INT_RE
from dpmt.errors import DataError

__all__ = ["ML100K_GENRES", "load_item_genres"]

#: The 19 genre flags of ML-100K ``u.item``, in file order.
ML100K_GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
)


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
