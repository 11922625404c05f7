"""The labels of the rating task."""

from __future__ import annotations

import numpy as np


def rating_labels(values, offset, clip: float) -> np.ndarray:
    """y = clip(r − offset, −c, c) float32, ``offset`` = μ̂ (+ b̂_i per rating): the labels
    the rating task trains on. |y| ≤ c is the bound the b-statistics' sensitivity √β·C·c
    assumes."""
    return np.clip(np.asarray(values, np.float64) - offset, -clip, clip).astype(np.float32)
