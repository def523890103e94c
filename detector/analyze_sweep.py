"""One sweep's curve to levels (long plateaus) and the falls between them, with capacities.

A plateau is a level when it is long enough (at least MIN_LEVEL_OCTAVES of working set) and
distinct in speed from its neighbours; the fastest and the slowest plateau of a sweep always
are. A shorter plateau between two levels is part of the fall between them (partial hits
after a cliff, the far half of a partitioned cache): it is kept in ``partials`` and described,
and the capacity comes from the whole fall.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from detect_caches.detector.above_tail import refit_under_tails, without_tail_above
from detect_caches.detector.capacity import BOOTSTRAP, estimate_capacity
from detect_caches.detector.curve import Curve, binned, local_level, point_sigma, robust_sigma
from detect_caches.detector.falling_below import (LOCAL_BINS, chain_plateaus, lower_speeds, own_window_span,
                                                 refit_over_falling)
from detect_caches.detector.levels import Step, SweepAnalysis
from detect_caches.detector.fall_levels import demote_fitted_through, promote_in_misfits
from detect_caches.detector.inside import inside_level
from detect_caches.detector.pairfit import refit_with_next
from detect_caches.detector.plateaus import MIN_LEVEL_STEP, Plateau, build_plateaus, merge_segments, stands_out
from detect_caches.detector.segment import segment
from detect_caches.detector.units import fmt_bytes

MIN_POINTS = 6
MIN_LEVEL_OCTAVES = 0.85   # a level's plateau spans at least this much working set
DISTINCT_SPREADS = 2.5     # two long plateaus closer than this many pooled spreads are one level
ALWAYS_DISTINCT = math.log10(1.5)   # ... unless 1.5x apart: never a drift, however noisy
NOISE_SPREADS = 3.0        # a long plateau's scatter counts up to this many point sigmas (_distinct)
KNOWN_SPEED = math.log10(1.15)   # a plateau this close to a level another sweep found is that level
FLAT_DRIFT = math.log10(1.03)   # ... and somewhere holds its speed within this over half an octave
FLAT_BINS = 4                   # ... over this many of its bins
EDGE_JUMP = 2.0                 # ... less an edge bin this many sigmas off its neighbour
SLOPE_T = 4.0                   # ... and a plateau under SLOPE_OCTAVES slopes no surer than this (t)
SLOPE_OCTAVES = 1.0             # (a longer one may slope and be a level: a random-replacement
                                # cache's hits leave 100% well before it is full)


def _distinct(a: Plateau, b: Plateau, point: float | None = None) -> bool:
    """``point``: the points' noise, past NOISE_SPREADS of which either plateau's scatter is a
    fall it took in, not noise that could hide a step: the sweep's last plateau's, the last
    cache's fall where the sweep reaches memory (physics GPU 132 seed 1: a 1.55x Infinity Cache
    merged into memory), and a middle plateau's, a broad fall's bins at its edge (physics GPU 130
    seed 2: a 1.34x L2 fall's bins in the L2's plateau, and L2 and memory one level)."""
    a_spread, b_spread = a.spread_log, b.spread_log
    if point is not None:
        a_spread, b_spread = min(a_spread, NOISE_SPREADS * point), min(b_spread, NOISE_SPREADS * point)
    step = abs(a.level_log - b.level_log)
    need = max(MIN_LEVEL_STEP, DISTINCT_SPREADS * math.hypot(a_spread, b_spread))
    return step >= min(need, ALWAYS_DISTINCT)


def thirds(p: Plateau, point_bin: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Masks of the points in the plateau's first and last third of bins (None: under 3 bins, or a
    third with no point)."""
    span = p.last_bin - p.first_bin + 1
    if span < 3:
        return None
    third = span // 3
    first = (point_bin >= p.first_bin) & (point_bin < p.first_bin + third)
    last = (point_bin > p.last_bin - third) & (point_bin <= p.last_bin)
    return (first, last) if first.any() and last.any() else None


def fallen(p: Plateau, y: np.ndarray, point_bin: np.ndarray) -> float:
    """How far the plateau's speed falls from its first third of bins to its last (log10 of the
    medians; negative where it rises): a tail of partial hits sags all along, a level holds."""
    t = thirds(p, point_bin)
    return float(np.median(y[t[0]]) - np.median(y[t[1]])) if t is not None else 0.0


def _edge_cut(med: list[float], jump: float) -> list[float]:
    """``med`` less its first bin where it is ``jump`` beyond (above; below where ``jump`` is
    negative) the next, or less its first two where both are beyond a level run of three bins
    right after them (within 2 |jump|)."""
    step, sign = abs(jump), math.copysign(1.0, jump)
    if len(med) > 4 and np.ptp(med[2:5]) < 2 * step:
        level = float(np.median(med[2:5]))
        if all((m - level) * sign > step for m in med[:2]):
            return med[2:]
    if len(med) > 2 and (med[0] - med[1]) * sign > step:
        return med[1:]
    return med


def _flattest(p: Plateau, y: np.ndarray, point_bin: np.ndarray, sigma: float) -> float:
    """The least the plateau's speed moves over FLAT_BINS of its bins (log10): a level holds its
    speed somewhere; a tail of partial hits slopes all along. Edge bins a step off the bins after
    them (faster at the start, slower at the end) hold the fall beside the plateau (segmentation
    puts a boundary a refined point or two off): one or two at each end are left out."""
    bins = range(p.first_bin, p.last_bin + 1)
    med = [float(np.median(y[point_bin == b])) for b in bins if np.any(point_bin == b)]
    jump = EDGE_JUMP * sigma
    # ... or two where a level run follows (refined points in the fall above moved built-in
    # mi210 seed 4's L3 plateau two bins into it, and it was lost); one that slopes all along has none
    med = _edge_cut(med, jump)
    med = _edge_cut(med[::-1], -jump)[::-1]
    n = min(FLAT_BINS, len(med))
    return min((abs(med[i] - med[i + n - 1]) for i in range(len(med) - n + 1)), default=0.0) if n >= 2 else 0.0


def _sloped(p: Plateau, x: np.ndarray, y: np.ndarray, point_bin: np.ndarray, sigma: float) -> bool:
    """Do the plateau's points, its edge bins left out, fall along it surely (SLOPE_T) and by more
    than a level's drift (FLAT_DRIFT, 3 sigmas) end to end? A pseudo-LRU sag under a short collapse
    has a flattest stretch that noise can make look level (built-in mi300x seed 2: its L1's sag,
    42-76 KiB, a level, and the L1 read -7.8%)."""
    sel = (point_bin > p.first_bin) & (point_bin < p.last_bin)
    if p.octaves >= SLOPE_OCTAVES or np.count_nonzero(sel) < 6:
        return False
    xs, ys = x[sel], y[sel]
    slope, icept = np.polyfit(xs, ys, 1)
    resid = ys - (slope * xs + icept)
    se = math.sqrt(float(np.sum(resid ** 2)) / (xs.size - 2) / float(np.sum((xs - xs.mean()) ** 2)))
    drift = -slope * float(np.ptp(xs))
    return drift > max(FLAT_DRIFT, 3 * sigma) and -slope > SLOPE_T * se


def _merge_plateaus(a: Plateau, b: Plateau, x: np.ndarray, y: np.ndarray, point_bin: np.ndarray) -> Plateau:
    """One plateau over both bin ranges (a slow drift, not a new level)."""
    return build_plateaus([[a.first_bin, b.last_bin]], x, y, point_bin)[0]


def select_levels(plateaus: list[Plateau], x: np.ndarray, y: np.ndarray, point_bin: np.ndarray,
                  min_octaves: float = MIN_LEVEL_OCTAVES, known: tuple = (),
                  scale: float = 1.0, sigma: float = 0.005) -> tuple[list[Plateau], list[Plateau]]:
    """(levels, partial plateaus inside falls). ``known``: (log10 GB/s, first and last device-wide
    bytes) of plateaus another sweep found; a plateau at one of those speeds and device footprints
    (this sweep's x times ``scale``) is that level, however short (the private sweep's L2, between
    the L1 and the L2's fill, is often under an octave). Speed alone is not enough: a tail of
    partial hits can run at the L2's speed by chance."""
    plats = list(plateaus)

    def known_as(p: Plateau):
        return next((j for j, (lv, lo, hi) in enumerate(known) if abs(p.level_log - lv) <= KNOWN_SPEED
                     and p.size_lo_bytes * scale <= hi * 1.5 and p.size_hi_bytes * scale >= lo / 1.5
                     and p.last_bin > p.first_bin), None)
    # neighbouring long plateaus that their own scatter cannot tell apart are one level (not a
    # level another sweep found and one faster than it: an L1 1.25x over the L2, its tail sloping
    # into the L2's plateau, read at the L2's share per SM, +520%, generated GPU 205 seed 2 keyed)
    i = 0
    while i < len(plats) - 1:
        a, b = plats[i], plats[i + 1]
        told = known_as(a) != known_as(b) and (a.level_log - b.level_log) > KNOWN_SPEED
        if min(a.octaves, b.octaves) >= min_octaves and not told and not _distinct(a, b, sigma):
            plats[i:i + 2] = [_merge_plateaus(a, b, x, y, point_bin)]
            continue
        i += 1
    seen, long = set(), []
    for k, p in enumerate(plats):
        if any(abs(p.level_log - lv) <= KNOWN_SPEED and p.size_lo_bytes * scale <= hi * 1.5
               and p.size_hi_bytes * scale >= lo / 1.5 for lv, lo, hi in known) and p.last_bin > p.first_bin:
            seen.add(k)
        # a level holds its speed; a tail of partial hits or a pseudo-LRU sag slopes all along
        flat = (_flattest(p, y, point_bin, sigma) < max(FLAT_DRIFT, 3 * sigma)
                and not _sloped(p, x, y, point_bin, sigma)) if 0 < k < len(plats) - 1 else True
        if k in (0, len(plats) - 1) or k in seen or (p.octaves >= min_octaves and flat):
            long.append(k)
    # a long plateau is a level when it stands out against the levels beside it (a short run of
    # partial hits between them, the shoulder of a random tail, says nothing about it)
    changed = True
    while changed:
        changed = False
        for j in range(1, len(long) - 1):
            k = long[j]
            if k not in seen and not (stands_out(plats[k], plats[long[j - 1]])
                                      and stands_out(plats[k], plats[long[j + 1]])):
                del long[j]
                changed = True
                break
    levels = [p for k, p in enumerate(plats) if k in long]
    partials = [p for k, p in enumerate(plats) if k not in long]
    return levels, partials


SPLIT_OCTAVES = (0.25, 1.3)   # a far half spans from half the level's size to all of it
SPLIT_ENDS = 0.6              # ... ending an octave past the near half, give or take this (falls' widths)
SPLIT_PAST = 0.5              # a split level ends before the level below begins, give or take this (octaves)


def _far_half(plateaus: list[Plateau]) -> bool:
    """Is the second plateau the far half of a split first level: short, between its neighbours'
    speeds, ending at about twice where it starts?"""
    if len(plateaus) < 3:
        return False
    a, mid, c = plateaus[:3]
    octaves = mid.octaves
    # ... and the near half fills at half the level's size: the two plateaus end an octave apart
    apart = math.log2(mid.size_hi_bytes / a.size_hi_bytes)
    return (SPLIT_OCTAVES[0] <= octaves <= SPLIT_OCTAVES[1] and abs(apart - 1.0) <= SPLIT_ENDS
            and c.level_log < mid.level_log < a.level_log)


def _fit_step(an: SweepAnalysis, i: int, *, resamples: int, split_first: bool, models,
              below: Step | None = None) -> Step:
    """The fall between plateaus ``i`` and ``i + 1`` of ``an``, fitted; ``below``: the next fall,
    whose fitted curve is the lower level's speed where it has begun inside this window."""
    curve, hi, lo = an.curve, an.plateaus[i], an.plateaus[i + 1]
    if i in an.under_tail:
        curve = without_tail_above(curve, an.steps[i - 1], hi.size_lo_bytes, hi.size_hi_bytes,
                                   an.point_sigma or an.sigma)
    sel = an.step_points(i)
    # hit rates against the lower plateau's level next to the fall (a long plateau may drift,
    # as memory does past a cache); the upper one's edge may already be inside the fall
    lo_log = local_level(curve.y, an.point_bin, lo.first_bin, lo.first_bin + LOCAL_BINS - 1, lo.level_log)
    ps = an.point_sigma or an.sigma
    lo_log = lower_speeds(below, curve.size_bytes[sel], ps, lo_log)
    est = estimate_capacity(curve.size_bytes[sel], curve.y[sel], hi.level_log, lo_log, an.sigma, seed=i,
                            resample_sigma=an.point_sigma, resamples=resamples, split=split_first and i == 0,
                            split_until_bytes=lo.size_lo_bytes * 2 ** SPLIT_PAST,
                            plateaus=(inside_level(curve, hi, upper=True, sigma=ps, first=i == 0),
                                      inside_level(curve, lo, upper=False, sigma=ps,
                                                   last=i + 2 == len(an.plateaus))),
                            models=models, capacity_span_bytes=own_window_span(an, i, sel))
    rise = lo.level_log > hi.level_log + MIN_LEVEL_STEP / 2
    inner = [p for p in an.partials if hi.last_bin < p.first_bin and p.last_bin < lo.first_bin]
    return Step(upper=i, estimate=est, rise=rise, partials=inner)


def analyze_sweep(curve: Curve, warnings: list[str], *, min_level_octaves: float = MIN_LEVEL_OCTAVES,
                  known: tuple = (), resamples: int = BOOTSTRAP, split_first: bool = False,
                  models: tuple | None = None) -> SweepAnalysis | None:
    """Plateaus, levels and the capacity of each fall; ``resamples``: the replicates behind each
    capacity's repeatability (0 where nobody reads it); ``split_first``: the first level may be
    split in two partitions with a slower far half (NVIDIA's L2): one level, its capacity where
    the far half ends; ``models``: the hit-rate models to fit, names or detector.hitmodels.HitModel
    objects (all when None)."""
    if len(curve) < MIN_POINTS:
        warnings.append(f"the {curve.sweep} sweep has {len(curve)} distinct sizes; at least "
                        f"{MIN_POINTS} are needed to find plateaus, so it was not analyzed")
        return None
    bx, by, point_bin = binned(curve)
    sigma = max(robust_sigma(by), 0.002)
    seg = segment(by, sigma=sigma)
    ranges = merge_segments(by, seg.breakpoints, sigma)
    plateaus = build_plateaus(ranges, curve.x, curve.y, point_bin)
    # sizes below the fastest plateau that run slower are overhead-bound (too little work per
    # pass to reach the cache's speed), not a level: no cache makes a smaller working set slower
    fastest = int(np.argmax([p.level_log for p in plateaus]))
    if fastest > 0:
        dropped = plateaus[:fastest]
        plateaus = plateaus[fastest:]
        warnings.append(f"the {curve.sweep} sweep's sizes up to {fmt_bytes(dropped[-1].size_hi_bytes)} "
                        f"run slower than larger ones (loop and launch overhead dominate there); "
                        f"they are left out of the levels")
    scale = float(np.median(curve.footprint_bytes / curve.size_bytes))
    one_point = point_sigma(curve.size_bytes, curve.y, sigma)
    # a plateau's flatness against the points' own noise where that is the smaller: the binned
    # curve's noise counts the slopes between bins, and a pseudo-LRU sag that fell 20 point sigmas
    # passed for a level under it (generated GPU 96 seed 5: an L0 of 20 KiB and an L1 of 25 KiB
    # where one L1 of 16.25 KiB is, SIMULATED)
    plateaus, partials = select_levels(plateaus, curve.x, curve.y, point_bin, min_level_octaves, known, scale,
                                       min(sigma, one_point or sigma))
    if split_first and _far_half(plateaus):
        partials = sorted([*partials, plateaus.pop(1)], key=lambda p: p.first_bin)
    an = SweepAnalysis(curve.sweep, curve, plateaus, [], seg, sigma, None, partials=partials,
                       point_bin=point_bin, point_sigma=one_point)
    fit = functools.partial(_fit_step, an, resamples=resamples, split_first=split_first, models=models)
    an.steps = [fit(i) for i in range(len(plateaus) - 1)]
    promote_in_misfits(an, fit)
    demote_fitted_through(an, fit)
    refit_under_tails(an, fit)
    refit_over_falling(an, fit)
    if curve.sweep != "private":   # a per-SM fall chained into the L2's: physics GPU 142's L1 +111%
        chain_plateaus(an, fit)
        if curve.sweep == "shared":   # device falls, their speeds mixed harmonically (not the chase's)
            refit_with_next(an, fit, models)
    plateaus, steps = an.plateaus, an.steps
    usable_until = None
    for i, st in enumerate(steps):
        if st.rise:
            hi, lo = plateaus[i], plateaus[i + 1]
            usable_until = st.estimate.onset_bytes
            warnings.append(
                f"the {curve.sweep} sweep's bandwidth rises again past {fmt_bytes(usable_until)} "
                f"({hi.bandwidth_gbs:,.0f} -> {lo.bandwidth_gbs:,.0f} GB/s); no cache makes a larger "
                f"working set faster, so the points past it are not used for levels")
            break
    if usable_until is not None:
        keep = next(i for i, s in enumerate(steps) if s.rise)
        an.plateaus, an.steps = plateaus[:keep + 1], steps[:keep]
        an.usable_until_bytes = usable_until
    if not seg.cross_checked:
        warnings.append(f"the {curve.sweep} sweep's segmentation differs between Pelt and the exact "
                        f"Dynp search; its boundaries carry lower confidence")
    return an
