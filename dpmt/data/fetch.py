"""Download MovieLens from GroupLens (with an offline fallback for ML-100K) and load datasets.

``fetch(name)`` makes ``data/<name>/<ratings file>`` exist and returns its path:

1. If the ratings file is already there, nothing else happens (no network).
2. If ``data/<name>.zip`` is there, it is verified and unpacked.
3. Else the zip is downloaded from GroupLens (``urllib``, short timeout, tqdm progress bar)
   into a temporary ``data/.<name>.zip.*.part`` file, hashed while it streams, verified and
   only then renamed to ``data/<name>.zip``: an interrupted or corrupt download never
   leaves a file that looks complete. Unpacking goes to a temporary folder first, then is
   renamed into ``data/<name>/`` (the ratings file is moved last).
4. If GroupLens cannot be reached (or ``DPMT_OFFLINE=1``): ML-100K is taken from the copy
   inside the ``recbole==1.2.1`` wheel on PyPI (``pip download``), whose ``ml-100k.inter`` is,
   minus its header line, byte-identical to GroupLens ``u.data`` (SHA-256 checked); the
   wheel's ``ml-100k.item`` is kept too (genres). Other datasets: a DataError with the URL
   and the exact path where to put the zip.

Integrity: SHA-256 of the GroupLens zips are pinned where a public record exists (the
TFDS url_checksums for ml-100k, ml-1m, ml-20m, ml-25m). For the others (ml-10m; and
ml-latest-small, which GroupLens may update) the first verified-complete download is
trusted: its SHA-256 is recorded in a ``<zip>.sha256`` sidecar and later copies of that zip
are checked against it (trust on first use).

``load(spec)`` turns a dataset name, a file path or a ``synthetic:...`` spec into Ratings.
Item space: a registry dataset's items are its own public item file (``u.item`` /
``ml-100k.item``, ``movies.dat``, ``movies.csv``: every catalogued movie, rated or not;
``items_public=True``); a synthetic dataset's are ``range(n_items)``; a file's or a TFDS
dataset's are the rated ones (``items_public=False``) unless ``items=`` names a catalogue.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import warnings
import zipfile
from pathlib import Path

import numpy as np

from dpmt._io import atomic_write_bytes
from dpmt.data.loaders import (check_columns, check_on_duplicate, check_rating_range, from_tfds,
                               load_file, load_item_genres)
from dpmt.data.ratings import Ratings
from dpmt.data.synthetic import (like_sizes, make_synthetic, make_synthetic_like,
                                 parse_synthetic_spec, synthetic_item_topics)
from dpmt.data.synthetic_logistic import is_logistic_spec, load_logistic_spec
from dpmt.data.synthetic_ratings import is_explicit_spec, load_explicit_spec
from dpmt.errors import ConfigError, DataError

__all__ = ["DatasetInfo", "REGISTRY", "fetch", "load", "dataset_path", "parse_synthetic_spec",
           "item_features_for", "dataset_items",
           "GROUPLENS_TIMEOUT", "RECBOLE_REQUIREMENT", "ML100K_UDATA_SHA256"]

_GL = "https://files.grouplens.org/datasets/movielens"
#: Seconds to wait for GroupLens before falling back (kept short: the fallback is quick).
GROUPLENS_TIMEOUT = 5.0
#: The PyPI wheel that carries a copy of ML-100K.
RECBOLE_REQUIREMENT = "recbole==1.2.1"
_RECBOLE_DIR = "recbole/dataset_example/ml-100k/"
#: SHA-256 of GroupLens ml-100k ``u.data`` (= recbole's ml-100k.inter without its header).
ML100K_UDATA_SHA256 = "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490"
_PIP_TIMEOUT = 180.0
_BLOCK = 1 << 20


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A downloadable dataset.

    Attributes
    ----------
    name : registry key, also the folder ``data/<name>/`` and zip ``data/<name>.zip``.
    url : GroupLens zip URL.
    archive_root : top-level folder inside the zip (unpacked as ``data/<name>/``).
    ratings : ratings file name inside that folder.
    fmt : loader format (see :mod:`dpmt.data.loaders`).
    sha256 : pinned SHA-256 of the zip, or None (trust on first use, sidecar file).
    size : zip size in bytes where known (progress bar, truncation check).
    items : the release's public item file(s) in that folder, first found is used: the
        item catalogue (:func:`~dpmt.data.loaders.read_item_catalogue`).
    """

    name: str
    url: str
    archive_root: str
    ratings: str
    fmt: str
    sha256: str | None = None
    size: int | None = None
    items: tuple[str, ...] = ("movies.csv",)


# SHA-256 and sizes: tensorflow/datasets tensorflow_datasets/url_checksums/movielens.txt.
REGISTRY: dict[str, DatasetInfo] = {d.name: d for d in [
    DatasetInfo("ml-100k", f"{_GL}/ml-100k.zip", "ml-100k", "u.data", "tsv",
                "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229", 4924029,
                ("u.item", "ml-100k.item")),
    DatasetInfo("ml-1m", f"{_GL}/ml-1m.zip", "ml-1m", "ratings.dat", "dat",
                "a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20", 5917549,
                ("movies.dat",)),
    DatasetInfo("ml-10m", f"{_GL}/ml-10m.zip", "ml-10M100K", "ratings.dat", "dat",
                items=("movies.dat",)),
    DatasetInfo("ml-20m", f"{_GL}/ml-20m.zip", "ml-20m", "ratings.csv", "csv",
                "96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3", 198702078),
    DatasetInfo("ml-25m", f"{_GL}/ml-25m.zip", "ml-25m", "ratings.csv", "csv",
                "8b21cfb7eb1706b4ec0aac894368d90acf26ebdfb6aced3ebd4ad5bd1eb9c6aa", 261978986),
    DatasetInfo("ml-latest-small", f"{_GL}/ml-latest-small.zip", "ml-latest-small",
                "ratings.csv", "csv"),
]}


class _NetworkError(Exception):
    """GroupLens (or PyPI) could not be reached / the transfer broke off."""


def _offline() -> bool:
    return os.environ.get("DPMT_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


def _info(name: str) -> DatasetInfo:
    if name not in REGISTRY:
        raise DataError(f"unknown dataset {name!r}; known datasets: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def dataset_path(name: str, data_dir: str | Path = "data") -> Path:
    """Where ``fetch(name, data_dir)`` puts the ratings file."""
    return Path(data_dir) / name / _info(name).ratings


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"dpmt: {msg}", file=sys.stderr, flush=True)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def _sidecar(zpath: Path) -> Path:
    return zpath.with_name(zpath.name + ".sha256")


def _check_hash(zpath: Path, digest: str, info: DatasetInfo, fresh: bool) -> None:
    """Compare with the pinned hash, or the sidecar; record a sidecar on first use."""
    if info.sha256 is not None:
        if digest != info.sha256:
            raise DataError(
                f"{zpath} has SHA-256 {digest}, expected {info.sha256}: the file is corrupt "
                f"or incomplete" + ("" if fresh else f"; delete it and run again to "
                                    f"re-download from {info.url}"))
        return
    side = _sidecar(zpath)
    if side.is_file():
        recorded = side.read_text().split()[0] if side.read_text().split() else ""
        if digest != recorded:
            raise DataError(
                f"{zpath} has SHA-256 {digest}, but {side} recorded {recorded} when it was "
                f"first downloaded: the file changed or is corrupt. Delete both files to "
                f"download it again (or delete only {side.name} to trust the new file)")
    else:
        atomic_write_bytes(side, f"{digest}  {zpath.name}\n".encode())


# ----------------------------------------------------------------------------------------
# GroupLens download and unpacking
# ----------------------------------------------------------------------------------------
def _open_url(url: str, timeout: float):
    """``urllib.request.urlopen`` with ``timeout`` covering name resolution too.

    urlopen's own timeout applies to the socket, not to the DNS lookup, which can hang
    for much longer on a machine without network; so the call runs in a daemon thread
    and is abandoned after ``timeout`` seconds. (A seam for tests.)
    """
    result: dict = {}

    def work():
        try:
            result["resp"] = urllib.request.urlopen(url, timeout=timeout)
        except BaseException as e:  # handed to the caller below
            result["err"] = e

    t = threading.Thread(target=work, name="dpmt-urlopen", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise _NetworkError(f"no answer from {urllib.parse.urlsplit(url).netloc} within "
                            f"{timeout:g} s")
    if "err" in result:
        raise result["err"]
    return result["resp"]


def _download(info: DatasetInfo, zpath: Path, timeout: float, progress: bool) -> None:
    """Stream ``info.url`` into a temporary file, verify, then rename to ``zpath``."""
    from tqdm.auto import tqdm

    zpath.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=zpath.parent, prefix=f".{zpath.name}.",
                                    suffix=".part")
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    got = 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                resp = _open_url(info.url, timeout)
            except (urllib.error.URLError, OSError, ValueError) as e:
                raise _NetworkError(f"{type(e).__name__}: {getattr(e, 'reason', e)}") from None
            with resp:
                total = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
                total = int(total) if total and str(total).isdigit() else info.size
                with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                          desc=f"{info.name}.zip", disable=not progress,
                          file=sys.stderr) as bar:
                    while True:
                        try:
                            block = resp.read(_BLOCK)
                        except (urllib.error.URLError, OSError) as e:
                            raise _NetworkError(f"download of {info.url} broke off after "
                                                f"{got} bytes: {e}") from None
                        if not block:
                            break
                        out.write(block)
                        h.update(block)
                        got += len(block)
                        bar.update(len(block))
            if total is not None and got != total:
                raise _NetworkError(f"download of {info.url} is incomplete: got {got} of "
                                    f"{total} bytes")
            out.flush()
            os.fsync(out.fileno())
        _check_hash(zpath, h.hexdigest(), info, fresh=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, zpath)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _extract(zpath: Path, info: DatasetInfo, data_dir: Path) -> Path:
    """Unpack ``zpath`` into ``data_dir/<name>/`` via a temporary folder; returns the ratings."""
    member = f"{info.archive_root}/{info.ratings}"
    dest = data_dir / info.name
    try:
        zf = zipfile.ZipFile(zpath)
    except (zipfile.BadZipFile, OSError) as e:
        raise DataError(f"{zpath} is not a readable zip ({e}); delete it and run again to "
                        f"download it from {info.url}") from None
    tmp = Path(tempfile.mkdtemp(dir=data_dir, prefix=f".{info.name}.extract-"))
    try:
        with zf:
            if member not in zf.namelist():
                raise DataError(f"{zpath} does not contain {member}; is it the right file? "
                                f"Expected the GroupLens zip from {info.url}")
            zf.extractall(tmp)
        src = tmp / info.archive_root
        if not dest.exists():
            os.replace(src, dest)                        # one atomic rename
        else:
            # Merge into an existing folder file by file, the ratings file last, so it
            # only appears once everything else is in place.
            files = [p for p in src.rglob("*") if p.is_file()]
            files.sort(key=lambda p: p.relative_to(src).as_posix() == info.ratings)
            for p in files:
                target = dest / p.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(p, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest / info.ratings


# ----------------------------------------------------------------------------------------
# ML-100K from the recbole wheel on PyPI
# ----------------------------------------------------------------------------------------
def _pip_download(requirement: str, dest: str, timeout: float) -> None:
    """``pip download --no-deps requirement -d dest`` in this interpreter (a seam for tests)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--no-input", "-q", requirement, "-d", dest]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise _NetworkError(f"`pip download {requirement}` did not finish in "
                            f"{timeout:.0f} s") from None
    except OSError as e:
        raise _NetworkError(f"could not run pip: {e}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        raise _NetworkError(f"`pip download {requirement}` failed: {' | '.join(tail)}")


def _ml100k_from_recbole(dest_dir: Path, progress: bool, items_only: bool = False) -> Path:
    """Write ``dest_dir/u.data`` and ``ml-100k.item`` from the recbole wheel, verified.

    The item file has no published hash; the wheel's ratings are checked in both cases, as
    evidence that it is the genuine copy. ``items_only`` leaves ``u.data`` alone.
    """
    _say(progress, f"fetching ML-100K from the {RECBOLE_REQUIREMENT} wheel on PyPI")
    with tempfile.TemporaryDirectory(prefix="dpmt-recbole-") as tmp:
        _pip_download(RECBOLE_REQUIREMENT, tmp, _PIP_TIMEOUT)
        version = RECBOLE_REQUIREMENT.split("==")[1]
        wheels = sorted(Path(tmp).glob(f"recbole-{version}-*.whl"))
        if not wheels:
            raise _NetworkError(f"pip download of {RECBOLE_REQUIREMENT} produced no wheel")
        try:
            with zipfile.ZipFile(wheels[0]) as zf:
                inter = zf.read(_RECBOLE_DIR + "ml-100k.inter")
                item = zf.read(_RECBOLE_DIR + "ml-100k.item")
        except (zipfile.BadZipFile, KeyError, OSError) as e:
            raise DataError(f"the {RECBOLE_REQUIREMENT} wheel is unreadable or lacks the "
                            f"ML-100K files ({e})") from None
    header, sep, body = inter.partition(b"\n")
    digest = hashlib.sha256(body).hexdigest()
    if not sep or digest != ML100K_UDATA_SHA256:
        raise DataError(f"the ML-100K ratings in the {RECBOLE_REQUIREMENT} wheel have SHA-256 "
                        f"{digest}, expected {ML100K_UDATA_SHA256} (GroupLens u.data); "
                        f"refusing to use them. Download {REGISTRY['ml-100k'].url} by hand "
                        f"and place it at {dest_dir.parent / 'ml-100k.zip'}")
    atomic_write_bytes(dest_dir / "ml-100k.item", item)
    if items_only:
        return dest_dir / "ml-100k.item"
    atomic_write_bytes(dest_dir / "u.data", body)             # last: its presence means "done"
    return dest_dir / "u.data"


# ----------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------
def fetch(name: str, data_dir: str | Path = "data", progress: bool = True,
          timeout: float = GROUPLENS_TIMEOUT) -> Path:
    """Make the ratings file of dataset ``name`` available locally; return its path.

    Parameters
    ----------
    name : str
        One of :data:`REGISTRY` (ml-100k, ml-1m, ml-10m, ml-20m, ml-25m, ml-latest-small).
    data_dir : str or Path
        Downloads go to ``data_dir/<name>.zip``, files to ``data_dir/<name>/``.
    progress : bool
        Progress bar and status lines on stderr.
    timeout : float
        Seconds to wait for GroupLens to answer (short, so the ML-100K fallback is quick).
        The environment variable ``DPMT_OFFLINE=1`` skips GroupLens altogether.

    Returns
    -------
    Path of the ratings file, e.g. ``data/ml-20m/ratings.csv``.

    Raises
    ------
    DataError
        Unknown name; hash mismatch; unreachable source (the message gives the URL and the
        path where to put the zip by hand).
    """
    info = _info(name)
    d = Path(data_dir)
    target = d / name / info.ratings
    if target.is_file():
        return target
    _obtain(info, d, progress, timeout)
    return target


def _obtain(info: DatasetInfo, d: Path, progress: bool, timeout: float,
            items_only: bool = False) -> None:
    """Fill ``d/<name>/`` from a present zip, GroupLens or (ML-100K) the PyPI wheel."""
    name = info.name
    zpath = d / f"{name}.zip"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {d}: {e.strerror or e}") from None
    if zpath.is_file():
        _check_hash(zpath, _sha256_file(zpath), info, fresh=False)
        _extract(zpath, info, d)
        return
    problems = []
    if _offline():
        problems.append("GroupLens skipped (DPMT_OFFLINE is set)")
    else:
        try:
            _say(progress, f"downloading {info.url}")
            _download(info, zpath, timeout, progress)
            _extract(zpath, info, d)
            return
        except _NetworkError as e:
            problems.append(f"GroupLens unreachable ({e})")
    if name == "ml-100k":
        _say(progress, problems[-1])
        try:
            _ml100k_from_recbole(d / name, progress, items_only=items_only)
            return
        except _NetworkError as e:
            problems.append(f"PyPI fallback failed ({e})")
    target = d / name / info.ratings
    raise DataError(
        f"could not get {name}: {'; '.join(problems)}. Download {info.url} by hand and "
        f"place it at {zpath.resolve()} (it is verified and unpacked on the next run), or "
        f"unpack it so that {target.resolve()} exists")


def item_features_for(spec: str | Path, ratings: Ratings, data_dir: str | Path = "data",
                      progress: bool = False,
                      timeout: float = GROUPLENS_TIMEOUT) -> np.ndarray:
    """Public item features of a dataset, aligned to ``ratings.item_ids``.

    * ``ml-100k``: the 19 genre flags (:func:`~dpmt.data.loaders.load_item_genres`) from
      ``data_dir/ml-100k/u.item`` or ``ml-100k.item``, fetched if missing (GroupLens zip,
      else the recbole wheel).
    * a path to a ratings file / folder holding ``u.item`` or ``*.item``: those genres.
    * ``synthetic[:...]``: the planted item topic weights φ (``rank`` columns), the
      synthetic analogue of genres.

    Returns float32 (ratings.n_items, n_features). Other datasets: DataError.
    """

    s = str(spec).strip()
    if s == "synthetic" or s.startswith("synthetic:"):
        kw = parse_synthetic_spec(s)
        if "like" in kw:
            kw.update(like_sizes(kw.pop("like"), kw.pop("scale", 1.0)))
        phi = synthetic_item_topics(**kw)
        ids = np.asarray(ratings.item_ids)
        if ids.dtype.kind not in "iu" or (len(ids) and (ids.min() < 0 or
                                                       ids.max() >= len(phi))):
            raise DataError(f"item ids of {ratings.name!r} do not index the synthetic items "
                            f"of {s!r} (0..{len(phi) - 1})")
        return phi[ids]
    if s == "ml-100k":
        folder = Path(data_dir) / "ml-100k"
        if not any((folder / f).is_file() for f in ("u.item", "ml-100k.item")):
            _obtain(REGISTRY["ml-100k"], Path(data_dir), progress, timeout, items_only=True)
        return load_item_genres(folder, ratings.item_ids)
    p = Path(s).expanduser()
    folder = p if p.is_dir() else p.parent
    if p.exists() and (any(folder.glob("*.item")) or (folder / "u.item").is_file()):
        return load_item_genres(folder, ratings.item_ids)
    raise DataError(f"no public item features for {s!r}: they exist for ml-100k (genres), "
                    f"synthetic datasets (planted topics) and folders with a u.item / *.item "
                    f"file; use encoder='embedding' for this dataset")


def dataset_items(name: str, data_dir: str | Path = "data") -> Path | None:
    """The public item file of registry dataset ``name`` in ``data_dir``, or None."""
    folder = Path(data_dir) / name
    return next((folder / f for f in _info(name).items if (folder / f).is_file()), None)


def _generic_ratings(p: Path) -> Path:
    """The ratings file inside a dataset folder."""
    for cand in ("u.data", "ratings.dat", "ratings.csv", "ratings.parquet"):
        if (p / cand).is_file():
            return p / cand
    inter = sorted(p.glob("*.inter"))
    if len(inter) > 1:
        raise DataError(f"folder {p} holds {len(inter)} RecBole .inter files "
                        f"({', '.join(f.name for f in inter[:4])}): give the one to read "
                        f"(e.g. {inter[0]})")
    if inter:
        return inter[0]
    raise DataError(f"no ratings file in folder {p}: expected u.data, ratings.dat, "
                    f"ratings.csv, ratings.parquet or a RecBole *.inter file")


def load(spec: str | Path, data_dir: str | Path = "data", fetch_if_missing: bool = True,
         progress: bool = True, *, rating_range="auto", on_duplicate: str = "error",
         columns: dict | None = None, name: str | None = None,
         tfds_data_dir: str | None = None, items=None) -> Ratings:
    """Load a dataset by name, path or synthetic spec.

    Parameters
    ----------
    spec : str or Path
        * a registry name (``ml-100k``, ``ml-1m``, ``ml-10m``, ``ml-20m``, ``ml-25m``,
          ``ml-latest-small``): read from ``data_dir``, fetched first if missing;
        * a path to a ratings file (format detected) or to a folder holding one;
        * ``synthetic`` or ``synthetic:users=50000,items=5000,interactions=2000000,
          alpha=1.0,seed=0`` (see :func:`parse_synthetic_spec`); ``explicit-synthetic[:...]``
          for ML-10M-like ratings (:mod:`dpmt.data.synthetic_ratings`);
          ``logistic-synthetic[:...]`` for implicit feedback from a logistic link
          (:mod:`dpmt.data.synthetic_logistic`);
        * ``tfds:movielens/100k-ratings`` (split ``train``): a prepared ArrayRecord copy
          needs only tensorflow-datasets; TFRecord data, or preparing it, TensorFlow too
          (``dpmt[tfds]``). See :func:`~dpmt.data.loaders.from_tfds`.
    data_dir : str or Path
        Where datasets live (see :func:`fetch`).
    fetch_if_missing : bool
        Download a registry dataset that is not in ``data_dir``; else a DataError.
    progress : bool
        Progress output while fetching.
    rating_range, on_duplicate
        As in :func:`~dpmt.data.loaders.load_file`, for files, registry datasets and TFDS
        (CLI: ``--rating-range LOW,HIGH|none``, ``--on-duplicate {error,keep-last}``).
        Synthetic data has nothing for them to do (values 1.0, distinct pairs): they are
        checked and otherwise ignored, so one set of options can serve several datasets.
    columns : mapping, optional
        Header names of a file's fields (see :func:`~dpmt.data.loaders.load_file`; CLI:
        ``--columns user=COL,...``). Only for paths: registry, TFDS and synthetic datasets
        have a fixed layout, so a non-empty ``columns`` there is a ConfigError.
    name : str, optional
        ``Ratings.name`` (default: the dataset name, or the file's folder / stem).
    tfds_data_dir : str, optional
        TFDS ``data_dir`` for ``tfds:`` specs. Default: ``data_dir`` when it holds the
        dataset's folder (``data_dir/movielens/100k-ratings``, so the CLI's ``--data-dir``
        serves both), else TFDS's own (``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``).
        ``fetch_if_missing=False`` keeps ``tfds.load`` from downloading.
    items : str, Path or array-like, optional
        The public item catalogue (a file, see
        :func:`~dpmt.data.loaders.read_item_catalogue`, or raw ids; CLI ``--items FILE``):
        the item index space, ``items_public=True``. Default: the registry dataset's own
        item file (if it is missing, a warning, and the rated items with
        ``items_public=False``); none for files and TFDS (``items_public=False``).
        Synthetic data has its own public universe, so ``items`` there is a ConfigError.

    Returns
    -------
    Ratings with ``name`` set to the dataset name (or file name / synthetic spec).
    """
    s = str(spec).strip()
    opts = dict(rating_range=check_rating_range(rating_range),
                on_duplicate=check_on_duplicate(on_duplicate))
    columns = check_columns(columns)
    if is_explicit_spec(s):                  # explicit ratings (dpmt.data.synthetic_ratings)
        return load_explicit_spec(s, name=name, items=items, columns=columns)
    if is_logistic_spec(s):                  # the logistic-link generator
        return load_logistic_spec(s, name=name, items=items, columns=columns)
    builtin = s in REGISTRY or s.startswith("tfds:") or s == "synthetic" or \
        s.startswith("synthetic:")
    if columns and builtin:
        raise ConfigError(f"columns= (CLI: --columns) names the header columns of your own "
                          f"CSV/TSV file; dataset {s!r} has a fixed layout, so leave it out")
    if s == "synthetic" or s.startswith("synthetic:"):
        if items is not None:
            raise ConfigError(f"items= (CLI: --items) gives the item catalogue of a ratings "
                              f"file; synthetic data {s!r} has its own (items 0..n_items-1)")
        kw = parse_synthetic_spec(s)
        kw["name"] = name or s
        if "like" in kw:
            return make_synthetic_like(kw.pop("like"), **kw)
        if "scale" in kw:
            raise ConfigError(f"synthetic spec {s!r}: scale needs like=<dataset>")
        return make_synthetic(**kw)
    if s in REGISTRY:
        info = REGISTRY[s]
        path = Path(data_dir) / s / info.ratings
        if not path.is_file():
            if not fetch_if_missing:
                raise DataError(f"dataset {s} is not in {Path(data_dir).resolve()} (expected "
                                f"{path}); run `dpmt fetch {s}` or pass fetch_if_missing=True")
            path = fetch(s, data_dir=data_dir, progress=progress)
        if items is None:
            items = dataset_items(s, data_dir)
            if items is None:
                warnings.warn(f"{s}: no public item file ({' or '.join(info.items)}) in "
                              f"{path.parent}, so the items are those rated "
                              f"(items_public=False: training must select them privately). "
                              f"Unpack the full {info.name}.zip there", stacklevel=2)
        return load_file(path, info.fmt, name=name or s, items=items, **opts)
    if s.startswith("tfds:"):
        tname = s[len("tfds:"):]
        tdir = tfds_data_dir
        if tdir is None and (Path(data_dir).expanduser() / tname).is_dir():
            tdir = str(Path(data_dir).expanduser())   # a TFDS folder: --data-dir DIR
        r = from_tfds(tname, data_dir=tdir, download=fetch_if_missing, items=items, **opts)
        return r if name is None else dataclasses.replace(r, name=name)
    p = Path(s).expanduser()
    if p.is_dir():
        p = _generic_ratings(p)
    if p.is_file():
        generic = p.name in ("u.data", "ratings.dat", "ratings.csv", "ratings.parquet")
        nm = p.parent.name if generic and p.parent.name else p.stem
        return load_file(p, name=name or nm, columns=columns, items=items, **opts)
    raise DataError(f"unknown dataset {s!r}: not a known name ({', '.join(REGISTRY)}), not "
                    f"'synthetic[:key=value,...]', and no file or folder at {p}")
