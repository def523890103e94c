"""A level's speed from the points of its plateau that the falls beside it have left: partial
hits of a random-replacement tail run on for octaves into the next plateau and read it fast (an
HBM plateau after a random-replacement L4 read 0 to +12% off the simulated memory's speed on eight
seeds, its points past the tail -1.1 to +2.1%), and a pseudo-LRU decline or a hashed fall begins
inside the plateau before its capacity and reads it slow, most where refinement crowded points
(generated GPU 25 seed 1: an L1 read -4.9%, against -1.2% on seed 2, and the pair drifted)."""
from __future__ import annotations

import numpy as np

from detect_caches.detector.hitmodels import hit_curve
from detect_caches.detector.levels import SweepAnalysis
from detect_caches.detector.plateaus import bin_weights, weighted_median

SETTLED = 0.5     # a point whose fitted partial hits move it by this many point sigmas is in a fall
MIN_SETTLED = 3   # fewer settled points than this: the fall's fitted lower speed


def _moved(an: SweepAnalysis, step: int, sizes: np.ndarray, *, below: bool) -> np.ndarray | None:
    """log10 of how far fall ``step``'s best model moves each size's speed off the plateau's:
    ``below`` the plateau under the fall, its partial hits lift it (positive); above it, its first
    misses slow it (positive too). None where that fall has no fit."""
    if not 0 <= step < len(an.steps):
        return None
    est = an.steps[step].estimate
    if est.fit is None or not est.fit.fits or est.hi_log is None or est.lo_log is None:
        return None
    best = est.fit.best
    h = np.clip(hit_curve(best.model, sizes / best.capacity_bytes, best.theta), 0.0, 1.0)
    ratio = 10 ** (est.hi_log - float(np.median(est.lo_log)))     # how much faster the level above is
    if below:
        return -np.log10(np.maximum(1.0 - h * (1.0 - 1.0 / ratio), 1e-9))
    return np.log10(np.maximum(h + (1.0 - h) * ratio, 1e-9))


def plateau_speed(an: SweepAnalysis, i: int) -> tuple[float, float, int]:
    """(log10 GB/s, 1.4826 MAD of the points, as many points as their weights are worth) of
    plateau ``i``: its core points past the fall above and before the fall below (all of them
    where no fitted fall moves one), each bin of sizes counted once, each point less what the
    fall above still lifts it."""
    p = an.plateaus[i]
    first, last = p.core_bins or (p.first_bin, p.last_bin)
    sel = (an.point_bin >= first) & (an.point_bin <= last)
    sizes = an.curve.size_bytes[sel]
    sigma = an.point_sigma or an.sigma
    lift = _moved(an, i - 1, sizes, below=True)
    sag = _moved(an, i, sizes, below=False)
    lift = np.zeros(sizes.size) if lift is None else lift
    sag = np.zeros(sizes.size) if sag is None else sag
    settled = (lift < SETTLED * sigma) & (sag < SETTLED * sigma)
    if np.count_nonzero(settled) < MIN_SETTLED:
        if np.any(lift >= SETTLED * sigma):
            return float(np.median(an.steps[i - 1].estimate.lo_log)), p.spread_log, p.n_core or p.n_points
        return p.level_log, p.spread_log, p.n_core or p.n_points
    # ... less the lift the fit still gives them: settled points just past the tail read the
    # level fast by up to SETTLED point sigmas each (generated GPU 26 seed 7's memory +2.9%)
    ys = an.curve.y[sel][settled] - lift[settled]
    w = bin_weights(an.point_bin, sel)[settled]
    med = weighted_median(ys, w)
    # as many points as the weights are worth: the points of a crowded bin count as fewer
    effective = float(w.sum() ** 2 / np.sum(w * w))
    return med, 1.4826 * weighted_median(np.abs(ys - med), w), max(int(round(effective)), 1)
