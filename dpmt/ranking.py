"""The top k of a score matrix with a deterministic tie rule (lower index first), for
:mod:`dpmt.scoring` and :mod:`dpmt.implicit_api`."""

from __future__ import annotations

import numpy as np

from dpmt.errors import ConfigError


def check_count(value, name: str = "k") -> int:
    """``value`` as an int if it is an integer >= 1 (k, N, a batch size), else a
    ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1 (got {value!r})")
    return int(value)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices (n, k) of the k largest scores per row, best first (ties: lower index)."""
    n, m = scores.shape
    k = min(k, m)
    if k == m:
        part = np.tile(np.arange(m), (n, 1))
    else:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        # argpartition breaks a tie at the k-th value arbitrarily; redo the rows where an
        # item left out ties with one kept (the released counts are integers: ties are common)
        thr = np.take_along_axis(scores, part, axis=1).min(axis=1, keepdims=True)
        tied = (scores == thr).sum(axis=1) > (np.take_along_axis(scores, part, axis=1)
                                              == thr).sum(axis=1)
        for r in np.flatnonzero(tied):
            part[r] = np.argsort(-scores[r], kind="stable")[:k]
    sub = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -sub), axis=1) if n else np.zeros((0, k), np.int64)
    return np.take_along_axis(part, order, axis=1)
