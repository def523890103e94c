"""The level below a fall, where it has begun its own fall inside the fall's window: its speed at
each point from its own fitted fall, not one figure. A short lower plateau that already falls
(a page-coloured Infinity Cache's early misses) otherwise reads as partial hits of the level
above, a random-replacement tail where that level is LRU. And the plateau between two falls read
through both: each fall refitted over the whole plateau below it, up to the next fall's onset,
where its own tail has ended (chain_plateaus: device sweeps; physics GPUs 93 and 162, +34% and
-31% on one seed, SIMULATED)."""
from __future__ import annotations

import numpy as np

from detect_caches.detector.curve import local_level
from detect_caches.detector.levels import Step, SweepAnalysis
from detect_caches.detector.telling import predicted_log

LOCAL_BINS = 8        # the lower plateau's level next to a fall: its first octave
CHAIN_OCTAVES = 2.5   # a chained refit reaches this far into the plateau below at most
CHAIN_FALLEN = 2.0    # ... and ends where the next fall's fitted curve has fallen this many point sigmas
                      # (1.0: physics GPU 236 seed 1's L2 +20.5%, SIMULATED)
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


def refit_over_falling(an: SweepAnalysis, fit) -> None:
    """Refit, from the bottom up, each fall whose level below has begun its own fall inside the
    fall's window, against that fall's fitted curve."""
    curve, ps = an.curve, an.point_sigma or an.sigma
    for i in reversed(range(len(an.steps) - 1)):
        lo = an.plateaus[i + 1]
        lo_log = local_level(curve.y, an.point_bin, lo.first_bin, lo.first_bin + LOCAL_BINS - 1, lo.level_log)
        if np.ndim(lower_speeds(an.steps[i + 1], curve.size_bytes[an.step_points(i)], ps, lo_log)):
            an.steps[i] = fit(i, below=an.steps[i + 1])


def chain_plateaus(an: SweepAnalysis, fit) -> None:
    """Refit, from the bottom up, each fall whose level below falls again over the whole of that
    level, to the next fall's onset, the lower level's speed along it the next fall's fitted
    curve: that speed is then read where this fall's tail has ended, not from points inside the
    plateau that still carry it (a random tail then fits as an LRU fall's end, its C 1.4x off)."""
    for i in reversed(range(len(an.steps) - 1)):
        nxt = an.steps[i + 1].estimate
        if getattr(nxt, "fit", None) is None or an.steps[i].rise or an.steps[i + 1].rise:
            continue
        # ... at most CHAIN_OCTAVES into the plateau: a long one's drift would weigh more than the
        # tail (generated GPU 55's hashed L2 over 3 octaves of its L3's: a modulo fall, -5%)
        lo = an.plateaus[i + 1]
        end = min(float(nxt.onset_bytes), lo.size_lo_bytes * 2 ** CHAIN_OCTAVES)
        # ... and before the next fall has begun: a window into its onset reads that fall as this
        # one's tail (physics GPU 46 seed 1's random-replacement L2 +36%, SIMULATED)
        x = an.curve.size_bytes
        x = np.unique(x[(x >= lo.size_lo_bytes) & (x <= end)])
        if x.size:
            best = nxt.fit.best
            held = best.hi_log - predicted_log(best, x) <= CHAIN_FALLEN * (an.point_sigma or an.sigma)
            end = float(x[held].max()) if held.any() else float(x.min())
        an.window_ends[i] = end
        an.steps[i] = fit(i, below=an.steps[i + 1])


def own_window_span(an: SweepAnalysis, i: int, sel: np.ndarray):
    """A chained window's C candidates over the fall's own window: the reach past it holds the
    lower level's speed, not C (generated GPU 55's narrow L2 between candidates 4.6% apart)."""
    if i not in an.window_ends:
        return None
    x = an.curve.size_bytes[an.step_points(i, own=True) & sel]
    return (float(x.min()), float(x.max())) if x.size else None
