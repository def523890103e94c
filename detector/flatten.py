"""A curve's noise averaged out where it is flat, its steps kept sharp: each point replaced by the
straight line fitted through its neighbours within REACH_LN_BYTES that lie within WITHIN_SIGMAS
point sigmas of it (a bilateral filter, local-linear so a gentle slope is not bent), once each
lone point beyond both its neighbours by SPIKE_SIGMAS is put on the line between them (and a
first point that far under the next two, at the next one's speed).

The L1's fall is fitted against the shared sweep read point by point (detector.analyze): raw, that
curve's noise entered every point's lower speed a second time, and on a noisy 1.5x fall it moved
which model won (generated GPU 61's random L1 read 27% large on one seed of two, SIMULATED)."""
from __future__ import annotations

import numpy as np

REACH_LN_BYTES = 0.35   # either side: five to seven points of a coarse sweep
WITHIN_SIGMAS = 3.0     # a neighbour further than this is across a step, not noise
SPIKE_SIGMAS = 8.0      # a point beyond both its neighbours by this many sigmas is a spike (a launch hiccup:
                        # 4 took noise for spikes where the point sigma reads small, generated GPU 11 keyed
                        # seed 1's random L1 then read +31%, SIMULATED)
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
    finite = np.isfinite(vs)
    vs = vs.copy()
    vs[finite] = _despiked(xs[finite], vs[finite], SPIKE_SIGMAS * sigma)
    ref = vs
    for _ in range(2):
        ref = _lines(xs, vs, ref, reach, within * sigma)
    out = np.empty_like(v)
    out[order] = ref
    return out


def _despiked(x: np.ndarray, v: np.ndarray, band: float) -> np.ndarray:
    """Sorted ``v`` with each point that lies beyond both its neighbours, on one side, by more than
    ``band`` replaced by the line between them: a launch's hiccup (or one size's own aliasing dip)
    is not the level's speed at the sizes between, where the L1's fall reads this curve, and inside
    a fall no flat neighbours outvote it in the lines (built-in mi300x keyed seed 1: one shared
    point 38% slow inside the L2's fall read the L1 +136%, SIMULATED); the first point, with one
    neighbour, at the next one's speed where it is that far under both of the next two."""
    out = v.copy()
    # one at a time, the furthest first: a spike's neighbour judged against it is not one
    for _ in range(v.size // 3):
        a, b, c = out[:-2], out[1:-1], out[2:]
        excess = np.where((b - a) * (b - c) > 0, np.minimum(np.abs(b - a), np.abs(b - c)), 0.0)
        excess = np.where(x[2:] > x[:-2], excess, 0.0)
        k = int(np.argmax(excess))      # the loop runs only where there are three points
        if excess[k] <= band:
            break
        t = (x[k + 1] - x[k]) / (x[k + 2] - x[k])
        out[k + 1] = out[k] + t * (out[k + 2] - out[k])
    # ... and the first point, slower than both the next two by as much while they agree (to half
    # that): the smallest size's launch (generated GPU 41 keyed seed 6: the shared sweep's first
    # point 38% slow, read between it and the next as the L2's speed under the L1's fall, put the
    # L1 +10%, SIMULATED); a faster one may be a level's last hits, a rise its start
    if v.size >= 3 and min(out[1], out[2]) - out[0] > band and abs(out[2] - out[1]) <= band / 2:
        out[0] = out[1]
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
