"""Checkpoints of the training loop: its state after each completed iteration.

The state is a pytree — :class:`LoopState` (V, the next iteration, the item step's
:class:`~dpmt.solvers.steps.ItemState`) — plus what was released and charged so far (the
ledger, the noisy counts, the private rating mean) and the fingerprints of the config and of the training data it
belongs to. One ``.npz`` holds all of it, written atomically: a crash never separates a
charged release from its output, and a checkpoint is never applied to another run's config
or data (resume checks both fingerprints and refuses with the field that differs).

A checkpoint is the trainer's **private state**: it holds the run's noise secret
(:class:`~dpmt.privacy.randomness.NoiseSource`, so a resumed run draws the same noise and is
bit-identical) and the fingerprint of the exact training data (a membership test). It lives
in the run directory's ``trainer/`` folder and must never be shared.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from flax import serialization

from dpmt._io import atomic_save_npz
from dpmt.errors import DataError
from dpmt.privacy.ledger import PrivacyLedger
from dpmt.privacy.randomness import NoiseSource
from dpmt.solvers.steps import ItemState

CHECKPOINT_FILE = "checkpoint.npz"
CHECKPOINT_VERSION = 3     # 3: the run's noise secret (private state)


class LoopState(NamedTuple):
    """The loop's state between iterations (a pytree)."""

    V: Any                 # float32 (m, d) item embeddings after ``iteration`` iterations
    iteration: int         # iterations completed
    item_state: ItemState  # the item step's state (GD encoder parameters)


def data_fingerprint(train) -> str:
    """SHA-256 (16 hex chars) of the training ratings' indices and sizes: what a checkpoint
    was computed on."""
    h = hashlib.sha256()
    h.update(np.array([train.n_users, train.n_items, train.nnz], np.int64).tobytes())
    h.update(np.ascontiguousarray(train.user, np.int32).tobytes())
    h.update(np.ascontiguousarray(train.item, np.int32).tobytes())
    return h.hexdigest()[:16]


class Checkpoint:
    """``run_dir/checkpoint.npz``: save after each iteration, load to resume."""

    def __init__(self, run_dir: str | os.PathLike):
        self.path = Path(run_dir) / CHECKPOINT_FILE

    def save(self, state: LoopState, ledger: PrivacyLedger | None, noisy_counts, noisy_n,
             history: list[dict], *, config_fingerprint: str, data_fingerprint: str,
             noise: NoiseSource, label_offset: float | None = None, item_offsets=None,
             selected_items=None, users=None) -> None:
        arrays = {"version": np.array(CHECKPOINT_VERSION),
                  "noise": np.array(json.dumps(noise.to_private_state())),
                  "V": np.asarray(state.V), "iteration": np.array(state.iteration),
                  "ledger": np.array("" if ledger is None else ledger.to_json()),
                  "history": np.array(json.dumps(history)),
                  "config_fingerprint": np.array(config_fingerprint),
                  "data_fingerprint": np.array(data_fingerprint)}
        if state.item_state.params is not None:
            blob = serialization.to_bytes(state.item_state.params)
            arrays["item_state"] = np.frombuffer(blob, dtype=np.uint8)
        if noisy_counts is not None:
            arrays["noisy_counts"] = np.asarray(noisy_counts)
            arrays["noisy_n"] = np.array(noisy_n)
        if selected_items is not None:
            arrays["selected_items"] = np.asarray(selected_items, bool)
        if label_offset is not None:
            arrays["label_offset"] = np.array(float(label_offset))
        if item_offsets is not None:
            arrays["item_offsets"] = np.asarray(item_offsets, np.float64)
        if users is not None:
            # the last user step's U (private: trainer state only, never in the model): the
            # warm start of user_solve="cg", so that a resumed run is bit-identical
            arrays["U"] = np.asarray(users, np.float32)
        atomic_save_npz(self.path, **arrays)

    def exists(self) -> bool:
        return self.path.exists()

    def load(self, *, config_fingerprint: str, data_fingerprint: str,
             item_state_template: ItemState) -> dict | None:
        """The saved state, or None if there is no checkpoint. Refuses (DataError) a file
        that cannot be read, one of another config or data, or one of an older format."""

        if not self.path.exists():
            return None
        if not self.path.is_file():
            raise DataError(f"{self.path} is not a file; remove it or start a new run")
        try:
            with np.load(self.path, allow_pickle=False) as z:
                files = set(z.files)
                raw = {k: z[k] for k in files}
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
            raise DataError(f"{self.path} cannot be read ({type(e).__name__}); it is truncated "
                            "or not a dpmt checkpoint: delete it to start the run again "
                            "(nothing it charged can be recovered)") from None
        try:
            version = int(raw["version"]) if "version" in raw else 1
            if version != CHECKPOINT_VERSION:
                raise DataError(f"{self.path} has checkpoint format {version}; this dpmt "
                                f"resumes format {CHECKPOINT_VERSION}: start a new run")
            if str(raw["config_fingerprint"]) != config_fingerprint:
                raise DataError(f"{self.path} belongs to another configuration (fingerprint "
                                f"{raw['config_fingerprint']} ≠ {config_fingerprint}): it was "
                                "copied from another run; resume that run, or start a new one")
            if str(raw["data_fingerprint"]) != data_fingerprint:
                raise DataError(f"{self.path} was computed on other training data: the "
                                "dataset changed since the run started (or the checkpoint "
                                "was copied from another run); start a new run")
            led = str(raw["ledger"])
            item_state = ItemState()
            if "item_state" in raw:
                template = item_state_template.params
                if template is None:
                    raise DataError(f"{self.path} holds an item-step state this run does not "
                                    "have")
                item_state = ItemState(serialization.from_bytes(
                    template, raw["item_state"].tobytes()))
            state = {"V": raw["V"], "iteration": int(raw["iteration"]),
                     "noise": NoiseSource.from_private_state(json.loads(str(raw["noise"]))),
                     "item_state": item_state,
                     "ledger": PrivacyLedger.from_dict(json.loads(led)) if led else None,
                     "history": json.loads(str(raw["history"]))}
            if "noisy_counts" in raw:
                state["noisy_counts"] = raw["noisy_counts"]
                state["noisy_n"] = float(raw["noisy_n"])
            if "selected_items" in raw:
                state["selected_items"] = raw["selected_items"].astype(bool)
            if "label_offset" in raw:
                state["label_offset"] = float(raw["label_offset"])
            if "item_offsets" in raw:
                state["item_offsets"] = raw["item_offsets"]
            if "U" in raw:
                state["U"] = raw["U"]
        except DataError:
            raise
        except (KeyError, ValueError, TypeError, json.JSONDecodeError) as e:
            raise DataError(f"{self.path} is incomplete or corrupted ({type(e).__name__}: "
                            f"{e}); delete it to start the run again") from None
        return state
