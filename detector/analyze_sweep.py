"""One sweep's curve to plateaus and transitions with capacities."""
from __future__ import annotations

import numpy as np

from detector.capacity import estimate_capacity
from detector.curve import Curve, binned, robust_sigma
from detector.levels import Step, SweepAnalysis
from detector.plateaus import MIN_LEVEL_STEP, build_plateaus, merge_segments
from detector.segment import segment

MIN_POINTS = 6


def analyze_sweep(curve: Curve, warnings: list[str]) -> SweepAnalysis | None:
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
    steps: list[Step] = []
    usable_until = None
    for i in range(len(plateaus) - 1):
        hi, lo = plateaus[i], plateaus[i + 1]
        first = max(hi.first_bin, hi.last_bin - max(2, (hi.last_bin - hi.first_bin) // 2))
        last = min(lo.last_bin, lo.first_bin + 2)
        sel = (point_bin >= first) & (point_bin <= last)
        est = estimate_capacity(curve.size_bytes[sel], curve.y[sel], hi.level_log, lo.level_log,
                                sigma, seed=i)
        rise = lo.level_log > hi.level_log + MIN_LEVEL_STEP / 2
        steps.append(Step(upper=i, estimate=est, rise=rise))
        if rise and usable_until is None:
            usable_until = est.onset_bytes
            warnings.append(
                f"the {curve.sweep} sweep's bandwidth rises again past {fmt_bytes(est.onset_bytes)} "
                f"({hi.bandwidth_gbs:,.0f} -> {lo.bandwidth_gbs:,.0f} GB/s); no cache makes a larger "
                f"working set faster, so the points past it are not used for levels")
    if usable_until is not None:
        keep = next(i for i, s in enumerate(steps) if s.rise)
        plateaus, steps = plateaus[:keep + 1], steps[:keep]
    if not seg.cross_checked:
        warnings.append(f"the {curve.sweep} sweep's segmentation differs between Pelt and the exact "
                        f"Dynp search; its boundaries carry lower confidence")
    return SweepAnalysis(curve.sweep, curve, plateaus, steps, seg, sigma, usable_until)


def fmt_bytes(n: float | None) -> str:
    """Binary units (22 KiB, 60.0 MiB); "-" for unknown."""
    if n is None:
        return "-"
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            v = n / div
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"
