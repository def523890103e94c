"""The level above a fall, where its own fall's tail still serves part of the data inside this
fall's window: a random-replacement L0's hits at 3-4x its size slope the L1's plateau, and the
L1's fall read that slope as a pseudo-LRU sag, its capacity 61% small (physics GPU 2 seed 3,
SIMULATED). Each point's time, less what the level above serves at its fitted speed, is the
time of the rest: 1/BW' = (1/BW - h0/B0) / (1 - h0), exact where speeds mix harmonically.
Used for the last per-SM/CU level's fall (detector.analyze) and, within a sweep, for every fall
below another (refit_under_tails)."""
from __future__ import annotations

import dataclasses

import numpy as np

from detect_caches.detector.curve import Curve
from detect_caches.detector.hitmodels import hit_curve
from detect_caches.detector.inside import INSIDE_OCTAVES
from detect_caches.detector.levels import Step, SweepAnalysis
from detect_caches.detector.splitfit import SPLITS

ABOVE_VISIBLE = 2.0    # point sigmas the fall above's fitted tail must lift a point of the plateau by
ABOVE_MAX_HITS = 0.5   # a plateau whose start the level above still serves this much of begins
                       # inside that fall: its points are the fall's, not a tail to take out
FLATTER = 9.0          # squared point sigmas the plateau's scatter must lose ...
RISING = 3.0           # ... without its speed then rising by this many standard errors: no level runs
                       # faster on a larger working set, so more tail was taken out than was there
                       # (a fall above fitted 20% large: tests/test_tail_above.py)


def without_tail_above(curve: Curve, above: Step | None, start_bytes: float, end_bytes: float,
                       sigma: float) -> Curve:
    """``curve`` from ``start_bytes`` on (the upper plateau's start) with the share of each
    point's time that the fall above's fitted tail serves taken out. ``curve`` itself where the
    fall above has no fit, is a split level's, or does not end before ``start_bytes`` (or still
    serves ABOVE_MAX_HITS there); where its tail lifts no point by ABOVE_VISIBLE ``sigma``
    (log10); or where taking it out leaves the plateau (its first octave and a half, short of
    ``end_bytes``, its end) no flatter by FLATTER squared sigmas: a tail that slopes the plateau
    is seen, one that would only shift it is a fit's guess (a cliff's fitted shelf of partial hits
    over a whole plateau is as well that level's own speed: the built-in rx6900xt's L1, +3.6% on
    seed 6)."""
    fit = getattr(above.estimate, "fit", None) if above is not None else None
    if fit is None:
        return curve
    best = fit.best
    if best.model in SPLITS or not best.capacity_bytes < start_bytes:
        return curve
    sigma = max(sigma, 1e-3)     # the floor the fits' noise has (detector.fallwindow)
    x = curve.size_bytes
    h = hit_curve(best.model, x / best.capacity_bytes, best.theta)
    use = x >= start_bytes
    if np.any(h[use] >= ABOVE_MAX_HITS):
        return curve
    b0, b1 = 10.0 ** -best.hi_log, 10.0 ** -best.lo_log     # inverse speeds above and of this level
    lift = np.log10(b1 / (h * b0 + (1.0 - h) * b1))
    if not np.any(lift[use] > ABOVE_VISIBLE * sigma):
        return curve
    inv = 1.0 / curve.bandwidth_gbs
    rest = inv - h * b0
    if np.any(rest[use] <= 0):
        return curve             # the fit's tail serves more than a point's whole time: not this curve's
    corrected = np.where(use, rest / np.where(use, 1.0 - h, 1.0), inv)
    near, far = INSIDE_OCTAVES     # the plateau's own stretch, as its speed is read (detector.inside)
    plateau = use & (x <= min(end_bytes / 2 ** near, start_bytes * 2 ** far))
    if _scatter(-np.log10(inv[plateau])) - _scatter(-np.log10(corrected[plateau])) < FLATTER * sigma ** 2:
        return curve
    if _rise(np.log2(x[plateau]), -np.log10(corrected[plateau]), sigma) > RISING:
        return curve
    return dataclasses.replace(curve, bandwidth_gbs=1.0 / corrected)


def _rise(lx: np.ndarray, y: np.ndarray, sigma: float) -> float:
    """How many standard errors the points' speed rises per octave (least squares)."""
    spread = float(np.sum((lx - lx.mean()) ** 2))
    if lx.size < 3 or spread <= 0:
        return 0.0
    slope = float(np.sum((lx - lx.mean()) * (y - y.mean()))) / spread
    return slope / (sigma / np.sqrt(spread))


def _scatter(y: np.ndarray) -> float:
    """Squared deviations from the mean."""
    return float(np.sum((y - y.mean()) ** 2)) if y.size else 0.0


def refit_under_tails(an: SweepAnalysis, fit) -> None:
    """Top down, each fall whose upper plateau the fall above's fitted tail still slopes, fitted
    again on its points less that tail (``fit(i)`` then takes it out: detector.analyze_sweep). A
    random L2's tail over a close L3's plateau read the L3's speed 1.3-1.6% fast; that L3's fall,
    the lower level's speed under the L2, then read the L2 as an 8-way LRU fall, +40% (physics GPU
    46 seed 2, SIMULATED)."""
    for i in range(1, len(an.steps)):
        hi = an.plateaus[i]
        if without_tail_above(an.curve, an.steps[i - 1], hi.size_lo_bytes, hi.size_hi_bytes,
                              an.point_sigma or an.sigma) is not an.curve:
            an.under_tail.add(i)
            an.steps[i] = fit(i)
