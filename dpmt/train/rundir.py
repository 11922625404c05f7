"""Run directories: load and split the data, train, evaluate, save.

A run directory has two parts, kept apart because an attacker may read whatever is shared:

* ``model/`` — **the model, safe to share**: ``model.json``, ``item_embeddings.npz`` (V, the
  item ids, the released counts), ``ledger.json``. Everything in it is a DP release or public
  metadata; :meth:`dpmt.model.Model.load` reads it (given the run directory or ``model/``).
* ``trainer/`` — **the trainer's private state, never to be shared**: ``config.json`` (with
  the noise seed if one was given), ``checkpoint.npz`` (the noise secret, the fingerprint of
  the exact training data), ``metrics.json`` (exact evaluation statistics) and ``train.log``.

Each file is written atomically; ``model/model.json`` last, so the run is a model from then
on. While a process trains in a directory it holds ``.lock`` (its pid); a second process is
refused, a stale lock (dead pid) is taken over. A directory that holds a finished model is
not trained over unless ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np

from dpmt._io import atomic_write_json, atomic_write_text, check_output_path, jsonable
from dpmt.config import ExecutionConfig, TrainConfig
from dpmt.data import (binarize, heldout_users_split, item_features_for, load, per_user_split,
                       random_split)
from dpmt.data.loaders import parse_columns, parse_rating_range
from dpmt.data.splits import filter_min_counts
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.model_files import MODEL_FILE, SHARED_DIR, TRAINER_DIR
from dpmt.registry import TASKS
from dpmt.train.checkpoint import CHECKPOINT_FILE
from dpmt.train.evaluate import mean_rating_metrics, popularity_metrics, released_baselines
from dpmt.train.loop import fit
from dpmt.train.methods import method_of
from dpmt.train.plan import make_plan

CONFIG_FILE = "config.json"
LOCK_FILE = ".lock"
PRIVATE_NOTE = ("PRIVATE: this folder holds the trainer's state (the noise secret, the "
                "fingerprint of the exact training data, exact evaluation metrics). Never "
                "share it: whoever reads it can undo the noise. Share ../model/ only.\n")


def model_dir(out: Path) -> Path:
    """The shareable part of run directory ``out``."""
    return Path(out) / SHARED_DIR


def trainer_dir(out: Path) -> Path:
    """The private part of run directory ``out``."""
    return Path(out) / TRAINER_DIR


def prepare_data(cfg: TrainConfig, execution: ExecutionConfig | None = None):
    """Load, binarise and split ``cfg.dataset`` (deterministic given ``cfg.seed``, the public
    split seed; each user's part is decided by that user alone: neighbour-stable).

    Implicit or explicit is decided by the source, never by the values: ``synthetic:...``
    data and files without a rating column are implicit (every entry a positive,
    ``Ratings.implicit``); everything else holds ratings, and ratings above
    ``positive_threshold`` are the positives.
    """

    ex = execution or ExecutionConfig()

    kw = {}
    if cfg.data.columns is not None:
        kw["columns"] = parse_columns(cfg.data.columns)
    if cfg.data.rating_range != "auto":
        kw["rating_range"] = parse_rating_range(cfg.data.rating_range)
    if cfg.data.on_duplicate != "error":
        kw["on_duplicate"] = cfg.data.on_duplicate
    if cfg.data.items is not None:
        kw["items"] = cfg.data.items
    r = load(cfg.data.dataset, data_dir=ex.data_dir, progress=ex.progress, **kw)
    if TASKS[cfg.task].labelled:
        if r.implicit:      # decided by the source (synthetic, no rating column), not the name
            raise DataError(f"{cfg.data.dataset} is implicit feedback (every value 1): the rating "
                            "task needs ratings (e.g. ml-100k, explicit-synthetic, or a file "
                            "with a rating column)")
        return SPLITTERS[cfg.data.split](cfg, r)
    # synthetic data and files without a rating column are events: every entry a positive;
    # binarize refuses (with the threshold named) a file with no rating above it
    implicit = r.implicit or cfg.data.dataset.startswith("synthetic")
    pos = r if implicit else binarize(r, cfg.data.positive_threshold)
    split = SPLITTERS[cfg.data.split](cfg, pos)
    if split.train.n_users < 2 or split.train.n_items < 2:
        raise DataError(f"{cfg.data.dataset}: {split.train.n_users} users × {split.train.n_items} "
                        "items after the split is too small to train or to protect anyone")
    return split


def _per_user(cfg: TrainConfig, r):
    return per_user_split(r, fractions=cfg.data.split_fractions, seed=cfg.data.seed)


def _heldout_users(cfg: TrainConfig, r):
    r = filter_min_counts(r, min_user=5)
    if cfg.data.heldout_fraction is not None:       # exactly neighbour-stable
        return heldout_users_split(r, validation_fraction=cfg.data.heldout_fraction,
                                   test_fraction=cfg.data.heldout_fraction,
                                   seed=98765 + cfg.data.seed)
    return heldout_users_split(r, n_validation=cfg.data.heldout_users,
                               n_test=cfg.data.heldout_users,
                               seed=98765 + cfg.data.seed)


def _random(cfg: TrainConfig, r):
    return random_split(r, fractions=cfg.data.split_fractions, seed=1234 + cfg.data.seed)


#: ``TrainConfig.split`` → the split of the loaded ratings (which tasks take which is the
#: task's: :class:`dpmt.tasks.Task`.splits)
SPLITTERS = {"per-user": _per_user, "heldout-users": _heldout_users, "random": _random}


@contextlib.contextmanager
def run_lock(out: Path):
    """Hold ``out/.lock`` (this pid) for the block; refuse if a live process holds it. The
    folders it had to create are removed again if the block leaves them empty (a run that
    failed before writing anything leaves nothing behind)."""
    out = Path(out)
    created = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            if pid > 0 and _alive(pid) and pid != os.getpid():
                raise ConfigError(f"{out} is in use by another dpmt process (pid {pid}); wait "
                                  "for it or use another --out") from None
            lock.unlink(missing_ok=True)      # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    else:
        raise ConfigError(f"could not lock {out}; remove {lock} if no dpmt process uses it")
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        for p in created:                       # innermost first
            try:
                p.rmdir()                       # only if empty
            except OSError:
                break


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_output_dir(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse an ``--out`` that cannot take this run, before anything is computed."""
    check_output_path(out, "--out", folder=True)
    finished = (model_dir(out) / MODEL_FILE).exists()
    if not resume and finished and not overwrite:
        raise ConfigError(f"{out} already holds a trained model; use another --out, or "
                          "--overwrite to replace it")
    if not resume and (trainer_dir(out) / CHECKPOINT_FILE).exists() and not overwrite \
            and not finished:
        raise ConfigError(f"{out} holds an unfinished run; continue it with `dpmt train "
                          f"--resume {out}`, or pass --overwrite to start over")


def run(cfg: TrainConfig, out_dir: str | os.PathLike | None = None, *,
        execution: ExecutionConfig | None = None, resume: bool = False,
        overwrite: bool = False, eval_set: str = "test", baselines: bool = True) -> Model:
    """Load data, train, evaluate, and (with ``out_dir``) write the run directory.

    ``resume`` continues ``out_dir``'s checkpoint; the config saved there must equal ``cfg``
    (execution settings aside). Returns the trained :class:`~dpmt.model.Model`; with
    ``baselines`` its ``metrics["baselines"]`` holds exact and private popularity.
    """
    ex = execution or ExecutionConfig()
    if eval_set not in ("test", "validation"):
        raise ConfigError(f"eval_set must be 'test' or 'validation' (got {eval_set!r})")
    make_plan(cfg)            # refuse an unmeetable budget before any data is read or written
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        check_output_dir(out, resume=resume, overwrite=overwrite)
    with (run_lock(out) if out is not None else contextlib.nullcontext()):
        if out is not None and resume:
            saved = read_config(out)
            if saved != cfg:
                raise ConfigError(f"cannot resume {out} with a different configuration ("
                                  + "; ".join(saved.diff(cfg)) + "); resume with the same "
                                  "settings or start a new --out")
            if (model_dir(out) / MODEL_FILE).exists():   # finished: nothing to train or charge
                return Model.load(out)
        split = prepare_data(cfg, ex)
        features = None
        if method_of(cfg).needs_item_features(cfg):
            features = item_features_for(cfg.data.dataset, split.train, data_dir=ex.data_dir)
        es = split.test if eval_set == "test" else split.validation
        if out is not None:
            if overwrite and not resume:
                (model_dir(out) / MODEL_FILE).unlink(missing_ok=True)
                (trainer_dir(out) / CHECKPOINT_FILE).unlink(missing_ok=True)
            trainer_dir(out).mkdir(parents=True, exist_ok=True)
            atomic_write_text(trainer_dir(out) / "PRIVATE.txt", PRIVATE_NOTE)
            atomic_write_text(trainer_dir(out) / CONFIG_FILE, cfg.to_json())
        model = _fit(split.train, cfg, es, features, ex, out, resume)
        if model.metrics is not None:
            model.metrics["eval_set"] = eval_set
            if baselines:
                model.metrics["baselines"] = baseline_metrics(model, split.train, es)
        if out is not None:
            write_run(model, out)
    return model


def _fit(train, cfg, es, features, ex, out, resume):
    return fit(train, cfg, test=es, item_features=features, execution=ex,
               run_dir=None if out is None else trainer_dir(out), resume=resume)


def baseline_metrics(model: Model, train, eval_set) -> dict:
    """Popularity (exact; not private) and, when the run released counts, private popularity
    (its noisy counts: free post-processing), on the same evaluation users."""

    if TASKS[model.config.task].labelled:
        exact = float(np.mean(np.asarray(train.value, np.float64)))
        out = {"global mean": mean_rating_metrics(exact, train, eval_set,
                                                  {"epsilon": float("inf"), "private": False})}
    else:
        out = {"popularity": popularity_metrics(train, eval_set)}
    if model.private:
        out.update(released_baselines(model, train, eval_set))
    return out


def read_config(out: Path) -> TrainConfig:
    """The TrainConfig saved in run directory ``out`` (clear errors if missing/corrupt)."""
    path = trainer_dir(out) / CONFIG_FILE
    if not path.exists():
        raise ConfigError(f"cannot resume {out}: no {CONFIG_FILE} there (was it started with "
                          "`dpmt train --out`?)")
    if not path.is_file():
        raise ConfigError(f"cannot resume {out}: {path} is not a file")
    try:
        return TrainConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot resume {out}: {path} is not valid JSON ({e})") from None


def write_run(model: Model, out: Path) -> None:
    """The trainer's metrics and log (``trainer/``), then the shareable model (``model/``,
    :meth:`Model.save`; its ``model.json`` last: the directory is a model from here on)."""

    private = trainer_dir(out)
    private.mkdir(parents=True, exist_ok=True)
    if model.metrics is not None:
        atomic_write_json(private / "metrics.json", model.metrics)
    lines = [json.dumps(jsonable(h)) for h in model.history]
    lines.append(model.report())
    if model.ledger is not None:
        lines.append(model.ledger.summary())
    atomic_write_text(private / "train.log", "\n".join(lines) + "\n")
    model.save(model_dir(out))
