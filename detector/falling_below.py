"""The level below a fall, where it has begun its own fall inside the fall's window: its speed at
each point from its own fitted fall, not one figure. A short lower plateau that already falls
(a page-coloured Infinity Cache's early misses) otherwise reads as partial hits of the level
above, a random-replacement tail where that level is LRU."""
from __future__ import annotations

import numpy as np

from detect_caches.detector.levels import Step
from detect_caches.detector.telling import predicted_log

LOWER_FALLING = 2.0   # point sigmas the next fall's fitted curve must have fallen inside a window
                      # to be its lower level's speed there: a short lower plateau that already falls
                      # is a random tail to a flat one (physics GPU 217 seed 1's 32-way LRU L2, -22%)


def lower_speeds(below: Step | None, sizes: np.ndarray, sigma: float, lo_log: float):
    """The level below's speed at each of ``sizes`` (log10 GB/s, one per size) where its own
    fall, fitted, has fallen LOWER_FALLING point sigmas by the window's end; else ``lo_log``."""
    fit = getattr(below.estimate, "fit", None) if below is not None else None
    if fit is None:
        return lo_log
    best = fit.best
    pred = predicted_log(best, np.asarray(sizes, dtype=float))
    if not best.hi_log - float(np.min(pred)) > LOWER_FALLING * sigma:
        return lo_log
    return pred - best.hi_log + lo_log
