"""A curve's noise averaged out where it is flat, its steps kept sharp: each point replaced by the
straight line fitted through its neighbours within REACH (ln bytes) that lie within WITHIN of its
point sigmas of it (a bilateral filter, local-linear so a gentle slope is not bent).

The L1's fall is fitted against the shared sweep read point by point (detector.analyze): raw, that
curve's noise entered every point's lower speed a second time, and on a noisy 1.5x fall it moved
which model won (generated GPU 61's random L1 read 27% large on one seed of two, SIMULATED)."""
from __future__ import annotations

import numpy as np

REACH = 0.35     # ln bytes either side: five to seven points of a coarse sweep
WITHIN = 3.0     # a neighbour further than this many point sigmas is across a step, not noise


def flattened(ln_bytes: np.ndarray, y: np.ndarray, sigma: float, *, reach: float = REACH,
              within: float = WITHIN) -> np.ndarray:
    """``y`` (log10 GB/s at ``ln_bytes``) with each point on the line through its flat
    neighbourhood; a point with fewer than three such neighbours (itself included) kept as it is.
    Twice: the second time neighbours are judged against the first pass's line, not the point's
    own noisy value (a point 2 sigmas high would otherwise keep the neighbours above it and
    stay high)."""
    x, v = np.asarray(ln_bytes, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or not sigma > 0:
        return v.copy()
    near = np.abs(x[None, :] - x[:, None]) <= reach
    ref = v
    for _ in range(2):
        ref = _lines(x, v, near & (np.abs(v[None, :] - ref[:, None]) <= within * sigma))
    return ref


def _lines(x: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """At each point, the least-squares line through the points ``mask`` picks, read at the point
    (fewer than three: the point itself; all at one size: their mean)."""
    w = mask.astype(float)
    dx = x[None, :] - x[:, None]
    n = w.sum(1)
    sx, sxx = (w * dx).sum(1), (w * dx * dx).sum(1)
    sy, sxy = (w * v[None, :]).sum(1), (w * dx * v[None, :]).sum(1)
    det = n * sxx - sx * sx
    with np.errstate(invalid="ignore", divide="ignore"):
        line = np.where(det > 1e-12 * np.maximum(n * n, 1), (sxx * sy - sx * sxy) / det, sy / np.maximum(n, 1))
    return np.where(n >= 3, line, v)
