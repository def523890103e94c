"""A curve's noise averaged out where it is flat, its steps kept sharp: each point replaced by the
straight line fitted through its neighbours within REACH_LN_BYTES that lie within WITHIN_SIGMAS
point sigmas of it (a bilateral filter, local-linear so a gentle slope is not bent).

The L1's fall is fitted against the shared sweep read point by point (detector.analyze): raw, that
curve's noise entered every point's lower speed a second time, and on a noisy 1.5x fall it moved
which model won (generated GPU 61's random L1 read 27% large on one seed of two, SIMULATED)."""
from __future__ import annotations

import numpy as np

REACH_LN_BYTES = 0.35   # either side: five to seven points of a coarse sweep
WITHIN_SIGMAS = 3.0     # a neighbour further than this is across a step, not noise
ROWS = 256              # points handled at once (memory: ROWS x the points within reach)


def flattened(ln_bytes: np.ndarray, y: np.ndarray, sigma: float | None, *, reach: float = REACH_LN_BYTES,
              within: float = WITHIN_SIGMAS) -> np.ndarray:
    """``y`` (log10 GB/s at ``ln_bytes``) with each point on the line through its flat
    neighbourhood; a point with fewer than three such neighbours, or not finite, kept as it is.
    Twice: the second time neighbours are judged against the first pass's line, not the point's
    own noisy value (a point 2 sigmas high would otherwise keep the neighbours above it and stay
    high)."""
    x, v = np.asarray(ln_bytes, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or sigma is None or not sigma > 0:
        return v.copy()
    order = np.argsort(x, kind="stable")
    xs, vs = x[order], v[order]
    ref = vs
    for _ in range(2):
        ref = _lines(xs, vs, ref, reach, within * sigma)
    out = np.empty_like(v)
    out[order] = ref
    return out


def _lines(x: np.ndarray, v: np.ndarray, ref: np.ndarray, reach: float, band: float) -> np.ndarray:
    """At each point of sorted ``x``, the least-squares line through the finite points within
    ``reach`` of it whose values lie within ``band`` of ``ref`` there, read at the point (fewer
    than three: the point itself; all at one size: their mean)."""
    out = v.copy()
    finite = np.isfinite(v)
    vz = np.where(finite, v, 0.0)
    for start in range(0, x.size, ROWS):
        rows = slice(start, min(start + ROWS, x.size))
        # x is sorted: the columns any of these rows can reach
        c0 = int(np.searchsorted(x, x[rows.start] - reach, side="left"))
        c1 = int(np.searchsorted(x, x[rows.stop - 1] + reach, side="right"))
        dx = x[None, c0:c1] - x[rows, None]
        mask = (np.abs(dx) <= reach) & finite[None, c0:c1] & (np.abs(vz[None, c0:c1] - ref[rows, None]) <= band)
        w = mask.astype(float)
        n = w.sum(1)
        sx, sxx = (w * dx).sum(1), (w * dx * dx).sum(1)
        sy, sxy = (w * vz[None, c0:c1]).sum(1), (w * dx * vz[None, c0:c1]).sum(1)
        det = n * sxx - sx * sx
        with np.errstate(invalid="ignore", divide="ignore"):
            line = np.where(det > 1e-12 * np.maximum(n * n, 1), (sxx * sy - sx * sxy) / det, sy / np.maximum(n, 1))
        out[rows] = np.where((n >= 3) & finite[rows], line, v[rows])
    return out
