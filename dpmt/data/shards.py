"""Ratings split by user into shard files, so that each process of a run reads only its own.

For training past one host (``ExecutionConfig(sharded_data=True)``, docs/scaling.md) every
process must hold *all* the ratings of its users and none of the others' — a user's
contribution then lives in one process, and each release is the sum of the processes'
partial sums (:mod:`dpmt.solvers.collectives`). The assignment is a keyed hash of the raw
user id alone:

    shard(j) = BLAKE2b-64_key(str(raw id of j)) mod K,

so it does not depend on the other users, the file order or the number of processes. A
folder holds K shard files (``part-00000-of-00016.csv`` …: CSV with the header
``user,item,rating[,timestamp]``), the public item catalogue (``items.txt``: every process
indexes the same items, the order of the catalogue) and ``manifest.json`` (K, the files,
the ratings and users of each shard). Process p of P reads the shards k with k mod P = p:
about 1/P of the ratings, and with K ≥ 8·P within a few per cent of it.

:func:`write_user_shards` makes such a folder from a :class:`~dpmt.data.Ratings` (or any
file :func:`~dpmt.data.loaders.load_file` reads, through the CLI-free Python API);
:func:`read_user_shard` is what each process calls. A shard folder is the training data
itself (raw ids, ratings): it stays with the trainer and is never published with a model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from dpmt.data.adapters import as_ratings
from dpmt.data.loaders import load_file, read_item_catalogue
from dpmt.data.ratings import Ratings
from dpmt.data.splits import _id_hashes
from dpmt.errors import ConfigError, DataError, check_range

MANIFEST = "manifest.json"
CATALOGUE = "items.txt"
FORMAT = "dpmt-user-shards"
_KEY = b"dpmt/user-shard"


def user_shards(user_ids: np.ndarray, shards: int) -> np.ndarray:
    """The shard (0..K−1) of each raw user id: a keyed hash of that id alone, int64."""
    check_range("shards", shards, low=1, integer=True)
    return (_id_hashes(np.asarray(user_ids), _KEY) % np.uint64(shards)).astype(np.int64)


def _part(k: int, shards: int) -> str:
    return f"part-{k:05d}-of-{shards:05d}.csv"


def write_user_shards(ratings, folder: str | os.PathLike, shards: int) -> dict:
    """Write ``ratings`` to ``folder`` as ``shards`` user-hashed CSV files, the item
    catalogue and the manifest (returned). ``ratings`` needs a public item catalogue
    (``items_public``): the shards' item index space. The folder must not exist or be
    empty; it is written in a temporary sibling and renamed, so a failure leaves nothing."""
    r = as_ratings(ratings)
    check_range("shards", shards, low=1, integer=True)
    if not getattr(r, "items_public", False):
        raise DataError("write_user_shards needs ratings with a public item catalogue "
                        "(Ratings.from_raw(..., items=...) or load_file(..., items=FILE)): "
                        "every process must index the same items")
    out = Path(folder)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out} exists and is not an empty folder: choose a new one")
    raw_user = np.asarray(r.user_ids)[r.user]
    raw_item = np.asarray(r.item_ids)[r.item]
    shard_of_user = user_shards(r.user_ids, shards)
    shard = shard_of_user[r.user]
    # the rows of every shard at once (one stable sort, file order kept within a shard)
    order = np.argsort(shard, kind="stable")
    bounds = np.searchsorted(shard[order], np.arange(shards + 1))
    header = "user,item,rating" + (",timestamp" if r.timestamp is not None else "") + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files = []
        for k in range(shards):
            rows = order[bounds[k]:bounds[k + 1]]
            parts = [raw_user[rows], raw_item[rows], np.asarray(r.value)[rows]]
            if r.timestamp is not None:
                parts.append(np.asarray(r.timestamp)[rows])
            name = _part(k, shards)
            with open(tmp / name, "w", newline="") as f:
                f.write(header)
                f.writelines(",".join(map(str, row)) + "\n"
                             for row in zip(*(p.tolist() for p in parts)))
            files.append(name)
        nnz = np.diff(bounds).tolist()
        users = np.bincount(shard_of_user, minlength=shards).tolist()
        with open(tmp / CATALOGUE, "w") as f:
            f.write("item\n" + "\n".join(map(str, np.asarray(r.item_ids).tolist())) + "\n")
        manifest = {"format": FORMAT, "version": 1, "name": str(r.name), "shards": int(shards),
                    "files": files, "ratings": nnz, "users": users,
                    "items": int(r.n_items), "catalogue": CATALOGUE}
        with open(tmp / MANIFEST, "w") as f:
            json.dump(manifest, f, indent=1)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def read_manifest(folder: str | os.PathLike) -> dict:
    """The manifest of a shard folder (checked)."""
    path = Path(folder) / MANIFEST
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{folder} has no {MANIFEST}: write it with "
                        "dpmt.data.shards.write_user_shards") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{path} is not a readable shard manifest ({e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or m.get("version") != 1:
        raise DataError(f"{path} is not a dpmt user-shard manifest (format {FORMAT!r}, "
                        "version 1)")
    return m


def shards_of_process(shards: int, process: int, processes: int) -> list[int]:
    """The shards process ``process`` of ``processes`` reads: k ≡ process (mod processes)."""
    check_range("processes", processes, low=1, integer=True)
    check_range("process", process, low=0, high=processes - 1, integer=True)
    if processes > shards:
        raise ConfigError(f"{processes} processes but only {shards} shards: write at least "
                          "as many shards as processes (8 per process keeps them balanced)")
    return list(range(process, shards, processes))


def read_user_shard(folder: str | os.PathLike, process: int, processes: int,
                    *, name: str | None = None):
    """The ratings of process ``process``'s users: its shard files only, on the folder's
    public item catalogue (``items_public=True``; the same item index on every process).

    Returns ``(ratings, info)`` with ``info``: the shards read, and ``fraction`` = the share
    of all the folder's ratings this process read (from the manifest)."""
    folder = Path(folder)
    m = read_manifest(folder)
    mine = shards_of_process(int(m["shards"]), process, processes)
    catalogue = read_item_catalogue(folder / m["catalogue"])
    users, items, values, times = [], [], [], []
    for k in mine:
        r = load_file(folder / m["files"][k], "csv", rating_range=None, items=catalogue)
        users.append(np.asarray(r.user_ids)[r.user])
        items.append(np.asarray(r.item_ids)[r.item])
        values.append(np.asarray(r.value))
        times.append(None if r.timestamp is None else np.asarray(r.timestamp))
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)
    ts = None if any(t is None for t in times) else cat(times)
    shard = Ratings.from_raw(cat(users), cat(items), cat(values), ts,
                             name=name or str(m["name"]), items=catalogue)
    total = max(1, sum(int(x) for x in m["ratings"]))
    info = {"shards": mine, "ratings": int(shard.nnz), "total_ratings": total,
            "fraction": shard.nnz / total}
    return shard, info
