"""A plateau's speed from points inside it only, for a fall's fit (detector.fallwindow's prior):
refinement crowds points at a plateau's edge, and they belong to the fall."""
from __future__ import annotations

import math

import numpy as np

from detect_caches.detector.curve import Curve
from detect_caches.detector.plateaus import Plateau

INSIDE_OCTAVES = (0.3, 1.5)   # a plateau's own points: at least this far from the fall, within this
LAST_OCTAVES = 1.0   # the sweep's last plateau is read over its last octave
SLOW_START = 3.0    # standard errors a later window of the sweep's first plateau must run faster by
INSIDE_SIGMA = math.log10(1.03)   # ... and their level trusted to 3% at best: a segmented plateau
                                  # may already hold the start of a slow decline
FAR_OCTAVES = 2.0    # ... unless a per-SM/CU level's window ends this far before its plateau does
FAR_SIGMA = math.log10(1.01)   # ... then trusted to 1%
BUCKET_OCTAVES = 0.125   # the first plateau's windows count each eighth of an octave of sizes once


def inside_level(curve: Curve, p: Plateau, *, upper: bool, sigma: float, last: bool = False,
                 first: bool = False) -> tuple[float, float]:
    """A plateau's speed from points inside it only (log10 GB/s) and its 1-sigma: the upper one's
    from its first octave and a half (``first``: the sweep's first plateau, from a later one where
    its smallest sizes run clearly slow: _fastest_window), the lower one's from after the fall has
    ended (``last``: the sweep's last plateau, from its last octave, past a random tail's partial
    hits); refinement crowds points at the plateau's edge, and they belong to the fall. Its sigma:
    the points' noise over their number, and never under INSIDE_SIGMA (FAR_SIGMA for a per-SM/CU
    level's first window far before its plateau's end)."""
    x = curve.size_bytes
    near, far = INSIDE_OCTAVES
    if upper and first:
        return _fastest_window(curve, p, sigma)
    if upper:   # its first octave and a half: a slow decline may already hold the rest
        sel = (x >= p.size_lo_bytes) & (x <= min(p.size_hi_bytes / 2 ** near, p.size_lo_bytes * 2 ** far))
    elif last:  # the sweep's last plateau: its last octave, past a random tail's partial hits
        sel = (x >= max(p.size_lo_bytes * 2 ** near, p.size_hi_bytes / 2 ** LAST_OCTAVES)) & (x <= p.size_hi_bytes)
    else:       # past the fall's last partial hits, within two octaves
        sel = (x >= p.size_lo_bytes * 2 ** near) & (x <= min(p.size_hi_bytes, p.size_lo_bytes * 2 ** (far + 0.5)))
    ys = curve.y[sel]
    if ys.size < 3:
        return p.level_log, max(p.spread_log, sigma, 0.003) * 2
    return float(np.median(ys)), max(1.2533 * sigma / math.sqrt(ys.size), INSIDE_SIGMA)


def _fastest_window(curve: Curve, p: Plateau, sigma: float) -> tuple[float, float]:
    """The sweep's first plateau: its first octave and a half, unless a later window of it runs
    clearly faster (SLOW_START standard errors): the smallest working sets may run slow on launch
    and tiling overheads (an H200's private sweep 23-30 TB/s at 10-19 KiB against 32.5 past 40
    KiB: a prior 8% slow read its L1 228 KiB for 221), where the fastest of a level's own windows
    is only noise (SIMULATED, formula GPUs: the fastest window always, 98.3 -> 98.0% within 3%).
    Each eighth of an octave counts once (_spread_out)."""
    x, y = _spread_out(curve.size_bytes, curve.y)
    near, far = INSIDE_OCTAVES
    end = p.size_hi_bytes / 2 ** near
    first_end = min(end, p.size_lo_bytes * 2 ** far)
    first = y[(x >= p.size_lo_bytes) & (x <= first_end)]
    if first.size < 3:
        return inside_level(curve, p, upper=True, sigma=sigma)
    opening = (float(np.median(first)), first.size, first_end)
    best = opening
    for start in np.unique(x[(x > p.size_lo_bytes) & (x * 2 ** far <= end)]):
        ys = y[(x >= start) & (x <= start * 2 ** far)]
        if ys.size >= 3 and np.median(ys) > best[0]:
            best = (float(np.median(ys)), ys.size, start * 2 ** far)
    apart = SLOW_START * 1.2533 * sigma * math.sqrt(1 / first.size + 1 / best[1])
    level, n, until = best if best[0] - opening[0] > apart else opening   # the first window: inside_level's own
    # a per-SM/CU level's window ending FAR_OCTAVES before its plateau does holds no decline's
    # start (a pseudo-LRU decline collapses by 3.2x its start at most): trusted to FAR_SIGMA (a
    # device level's slow random or hashed fall may still be inside its plateau there)
    clear = curve.sweep == "private" and until <= p.size_hi_bytes / 2 ** FAR_OCTAVES
    floor = FAR_SIGMA if clear else INSIDE_SIGMA
    return level, max(1.2533 * sigma / math.sqrt(n), floor)


def _spread_out(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One point per BUCKET_OCTAVES of sizes (the median of the points there, at their median
    size): refinement crowds a fall's start, and a window's median then reads the fall (generated
    GPU 96 keyed seed 7: eleven of fifteen points inside the L1's decline read it 8% slow and the
    L1 +15%, SIMULATED)."""
    b = np.floor(np.log2(x) / BUCKET_OCTAVES)
    keys = np.unique(b)
    return (np.array([np.median(x[b == k]) for k in keys]), np.array([np.median(y[b == k]) for k in keys]))
