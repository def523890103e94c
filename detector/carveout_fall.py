"""One carveout's L1 read off its curve: the first fall inside the window its sweep measured,
aliasing dips set aside and the size bounded below by the largest working set served whole; the
whole window fitted where segmentation found no step; and whether the launch still saw the
default's L1 (a carveout the driver did not grant)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from detect_caches.carveout import Window
from detect_caches.detector.analyze_sweep import analyze_sweep
from detect_caches.detector.capacity import estimate_capacity
from detect_caches.detector.curve import build_curve
from detect_caches.records import Measurement

NOT_GRANTED_REACH = 0.05   # a carveout's curve at full speed up to the default's L1 and read 5% past it ...
NOT_GRANTED_MISSES = 0.2   # ... has lost this share of its hits past it: the default's L1, not granted
WINDOW_FALL_LOG = math.log10(1.15)   # a window whose last third is 15% slower than its first holds a fall
EDGE_THIRD_MIN = 4         # points at each end of a window, at least
DIP_MISSES = 0.2           # a point missing this share of its data ...
FULL_MISSES = 0.06         # ... below a larger working set missing at most this share: an aliasing dip


def first_fall(rows: list[Measurement], window: Window | None):
    """(capacity estimate, plateau bandwidth) of the first fall of ``rows`` inside ``window``."""
    inside, held = _without_dips([r for r in rows if window is None or window.holds(r.working_set_bytes)])
    if not inside:
        return None, None
    curve = build_curve(inside, "private")
    an = analyze_sweep(curve, [])
    if an is None:
        return None, None
    est, bw = next(((st.estimate, an.plateaus[st.upper].bandwidth_gbs) for st in an.steps if not st.rise),
                   (None, None))
    if est is None:
        est, bw = _window_fall(curve)
    if est is not None and held and est.capacity_bytes < held:
        # a fit that puts the size below a working set served whole read a conflict as misses
        est = dataclasses.replace(est, capacity_bytes=float(held), low_bytes=min(est.low_bytes, float(held)),
                                  high_bytes=max(est.high_bytes, float(held)))
    return est, bw


def _without_dips(rows: list[Measurement]) -> tuple[list[Measurement], float | None]:
    """Rows less aliasing dips, and the largest working set served at full speed before the fall.
    A working set served whole holds every smaller one, so a smaller one read much slower lost its
    speed to a conflict, not to the L1's size (the 100 KiB carveout on the H200: 151.75 KiB at 83%
    between 150.5 and 153.0 KiB at full speed: tests/data/h200-carveouts/call5)."""
    if len(rows) < 2 * EDGE_THIRD_MIN:
        return rows, None
    size = np.array([r.working_set_bytes for r in rows], dtype=float)
    bw = np.array([r.bandwidth_gbs for r in rows], dtype=float)
    order = np.argsort(size, kind="stable")
    s, b = size[order], bw[order]
    third = max(EDGE_THIRD_MIN, len(b) // 3)
    top, bottom = float(np.median(b[:third])), float(np.median(b[-third:]))
    if bottom >= top:
        return rows, None
    # hit rates against the L1's speed and the window's far end (the L2's share per SM)
    missing = lambda v: (1 / v - 1 / top) / (1 / bottom - 1 / top)   # noqa: E731
    misses = missing(b)
    slow = misses >= DIP_MISSES
    # the fall: the first of three slow points in a row; a dip is slow before a full point before it
    fall = next((i for i in range(len(b) - 2) if slow[i:i + 3].all()), None)
    if fall is None:
        return rows, None
    full = s[:fall][misses[:fall] <= FULL_MISSES]
    if not full.size:
        return rows, None
    last_full = float(full.max())
    dip = (size < last_full) & (missing(bw) >= DIP_MISSES)
    return [r for r, d in zip(rows, dip) if not d], last_full


def _window_fall(curve):
    """The fall fitted across the whole window, where segmentation found no step: a carveout's
    window is measured to hold one L1 edge, but a short window whose far side dips and recovers
    (the 228 KiB carveout on the H200, tests/data/h200-carveouts) can read as one noisy plateau."""
    n = len(curve)
    if n < 2 * EDGE_THIRD_MIN + 1:
        return None, None
    y, third = curve.y, max(EDGE_THIRD_MIN, n // 3)
    top, bottom = float(np.median(y[:third])), float(np.median(y[-third:]))
    noise = float(np.median(np.abs(np.diff(y[:third])))) / 0.6745 / math.sqrt(2)
    if top - bottom < max(WINDOW_FALL_LOG, 6 * noise):
        return None, None
    est = estimate_capacity(curve.size_bytes, y, top, bottom, max(noise, 1e-3))
    return est, 10.0 ** top


def falls_at(rows: list[Measurement], default_bytes: float) -> bool:
    """Whether the launch still saw the default's L1 (a carveout the driver did not grant): its
    curve has lost a fifth of its hits or more just past the default's L1 (a granted larger L1
    still hits there; a smaller one has fallen long before, which the plateau below shows)."""
    curve = build_curve(rows, "private")
    bw, size = curve.bandwidth_gbs, curve.size_bytes
    near = (size >= default_bytes * (1 - 2 * NOT_GRANTED_REACH)) & (size <= default_bytes)
    past = bw[(size > default_bytes) & (size <= default_bytes * (1 + NOT_GRANTED_REACH))]
    if past.size < 2:      # a sweep that placed its edge points elsewhere: twice the reach
        past = bw[(size > default_bytes) & (size <= default_bytes * (1 + 2 * NOT_GRANTED_REACH))]
    far = bw[size > default_bytes * (1 + NOT_GRANTED_REACH)]
    if not near.any() or past.size < 2 or far.size < 2:
        return False
    fast, slow, mid = float(np.median(bw[size <= default_bytes])), float(np.median(far[-3:])), float(np.median(past))
    if slow >= fast or float(np.median(bw[near])) < fast * (1 - NOT_GRANTED_REACH):
        return False
    misses = (1 / mid - 1 / fast) / (1 / slow - 1 / fast)
    return misses >= NOT_GRANTED_MISSES
