"""Noise of a piecewise-flat curve, shared by the sweep (measure) and the analyzer (detector)."""
from __future__ import annotations

import math

import numpy as np


def robust_sigma(values: np.ndarray, *, default: float) -> float:
    """1.4826 x MAD of the first differences / sqrt 2 (methods.md); ``default`` below 3 values."""
    values = np.asarray(values, dtype=float)
    if values.size < 3:
        return default
    d = np.diff(values)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))
