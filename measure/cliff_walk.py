"""Walking a cliff: a bisection stops at the first crossing it meets, so a dip the curve
recovers from (set aliasing just under a cliff: an H200 reads -10% at 219.75 KiB, full speed
again at 220-221 KiB; BENCHMARKS.md, 2026-11-30, fourth session) hides where the level really
ends. Where points are cheap (the private sweep's first fall) a fall that is a cliff is
therefore walked on a fixed grid from its last full-speed point until it has clearly fallen, as
MT4G scans its window in 256-byte steps, and its steepest step is resolved to one granule.
"""
from __future__ import annotations

import math
from typing import Protocol

from detect_caches.measure.kernel_meta import GRANULE_BYTES, round_to_granule


class Walkable(Protocol):
    """What a walk needs of the sweep it refines (measure.sweep.AdaptiveSweep): its plan, the
    levels measured so far, its noise, a bracket of a crossing, and one more point."""

    plan: object
    state: object
    sigma: float

    def bracket(self, lo_size: int, hi_size: int, threshold: float, hi_is_above: bool) -> tuple | None: ...

    def measure_size(self, size: int, phase: str) -> float | None: ...

CLIFF_SLOPE = 8.0     # ln bandwidth per ln size between neighbouring sizes ...
CLIFF_RANGE = 0.06    # ... within this much of the last full-speed point: a cliff to walk
LN10 = math.log(10.0)


def walk_cliff(sweep: Walkable, lo_size: int, hi_size: int, tr) -> None:   # tr: measure.sweep.Transition
    """Where the fall is a cliff, walk on from the last point served at 97% (harmonic mixing)
    in steps of scan_step until three steps in a row read below 80% (the fall is under way,
    not a dip), at most scan_points sizes and scan_window past the start; then measure every
    granule inside the steepest step walked. One reading per size: the analysis judges a dip
    against its neighbours."""
    hi_is_above = tr.hi_log > tr.lo_log
    at97 = tr.level_at(0.97)
    at80 = tr.level_at(0.8)
    bracket = sweep.bracket(lo_size, hi_size, at97, hi_is_above)
    if bracket is None:
        return
    start = size = bracket[0]
    if not cliff_near(sweep, start, start * (1 + CLIFF_RANGE)):
        return
    step = max(GRANULE_BYTES, round_to_granule(start * sweep.plan.scan_step))
    end = min(hi_size, start * (1 + sweep.plan.scan_window))
    low_in_row = 0
    for _ in range(sweep.plan.scan_points):
        size += step
        if size > end or low_in_row >= 3:
            break
        if size not in sweep.state.values and sweep.measure_size(size, "refine") is None:
            return
        if size in sweep.state.values:
            fell = (sweep.state.level(size) < at80) == hi_is_above
            low_in_row = low_in_row + 1 if fell else 0
    walked = [s for s in sweep.state.sizes() if start <= s <= size]
    if len(walked) < 2:
        return
    _, a, b = max((sweep.state.level(x) - sweep.state.level(y), x, y) for x, y in zip(walked, walked[1:]))
    for g in range(a + GRANULE_BYTES, b, GRANULE_BYTES):
        if g not in sweep.state.values and sweep.measure_size(g, "refine") is None:
            return


def cliff_near(sweep: Walkable, lo: float, hi: float) -> bool:
    """Whether two neighbouring sizes in [lo, hi] show a cliff: a fall of at least 5% (and 2
    sweep sigmas) at a slope of 8 or more (ln bandwidth per ln size; an H200's L1 is far steeper).
    A pseudo-LRU decline (about 1) or a hashed-set fall (2-3) is left as the bisection
    measured it: walking its top would crowd points where its estimate is read."""
    sizes = [s for s in sweep.state.sizes() if lo <= s <= hi]
    # medians of up to three readings each: twice the sweep's sigma is well clear of their noise
    # (four times held back an H200 whose coarse sigma the cache structure itself inflates)
    drop = max(2 * sweep.sigma, math.log10(1.05))
    for a, b in zip(sizes, sizes[1:]):
        fall = sweep.state.level(a) - sweep.state.level(b)
        if fall >= drop and fall * LN10 / math.log(b / a) >= CLIFF_SLOPE:
            return True
    return False
