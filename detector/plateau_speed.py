"""A level's speed from the points of its plateau that the fall above it has left: partial hits
of a random-replacement tail run on for octaves into the next plateau and read it fast (an HBM
plateau after a random-replacement L4 read 0 to +12% off the simulated memory's speed on eight
seeds, its points past the tail -1.1 to +2.1%)."""
from __future__ import annotations

import numpy as np

from detect_caches.detector.hitmodels import hit_curve
from detect_caches.detector.levels import SweepAnalysis

SETTLED = 0.5     # a point whose fitted partial hits lift it by this many point sigmas is in the fall
MIN_SETTLED = 3   # fewer settled points than this: the fall's fitted lower speed


def _lift(an: SweepAnalysis, i: int, sizes: np.ndarray) -> np.ndarray | None:
    """log10 of how much the fall above plateau ``i`` lifts each size's speed (its best model's
    partial hits between the fitted plateau speeds); None where that fall has no fit."""
    if i == 0 or i - 1 >= len(an.steps):
        return None
    est = an.steps[i - 1].estimate
    if est.fit is None or not est.fit.fits or est.hi_log is None or est.lo_log is None:
        return None
    best = est.fit.best
    h = np.clip(hit_curve(best.model, sizes / best.capacity_bytes, best.theta), 0.0, 1.0)
    slower = 1.0 - 10 ** (float(np.median(est.lo_log)) - est.hi_log)
    return -np.log10(np.maximum(1.0 - h * slower, 1e-9))


def plateau_speed(an: SweepAnalysis, i: int) -> tuple[float, float, int]:
    """(log10 GB/s, 1.4826 MAD of the points, their number) of plateau ``i``: its core points
    past the fall above (all of them where no fitted partial hit lifts one)."""
    p = an.plateaus[i]
    n = p.n_core or p.n_points
    first, last = p.core_bins or (p.first_bin, p.last_bin)
    sel = (an.point_bin >= first) & (an.point_bin <= last)
    lift = _lift(an, i, an.curve.size_bytes[sel])
    if lift is None:
        return p.level_log, p.spread_log, n
    settled = lift < SETTLED * (an.point_sigma or an.sigma)
    if settled.all():
        return p.level_log, p.spread_log, n
    est = an.steps[i - 1].estimate
    if np.count_nonzero(settled) < MIN_SETTLED:
        return float(np.median(est.lo_log)), p.spread_log, n
    ys = an.curve.y[sel][settled]
    med = float(np.median(ys))
    return med, float(1.4826 * np.median(np.abs(ys - med))), int(ys.size)
