"""Adaptive sweeps: a coarse log-spaced pass, then noisy bisection where the bandwidth changes.

Every measured point, coarse or refined, is appended to the measurement log as it is taken.
Refinement bisects, for each transition, on three crossings between the plateaus on its two
sides: where 50%, 95% and 20% of the loads still hit the faster level (bandwidths mix
harmonically with the hit rate), down to 1 KiB of stream bytes per program. A probe too close to a crossing for its noise is repeated; two undecided probes in a
row end that bisection (the noise floor). Nothing assumes the curve is monotonic: the bracket
is always "last point on the high side before the first point on the low side", re-derived
from every point measured so far.

A bisection stops at the first crossing it meets; where a dip the curve recovers from can hide
the end of a level, the private sweep's first fall is also walked (measure.cliff_walk).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from detect_caches.measure.cliff_walk import walk_cliff
from detect_caches.measure.kernel_meta import COARSE_BYTES, GRANULE_BYTES, round_to_granule
from detect_caches.measure.point import PointMeter
from detect_caches.measure.sweep_plan import CROSSINGS, SweepPlan  # noqa: F401  (the sweep's plan, as imported from here)
from detect_caches.noise import robust_sigma
from detect_caches.records import REJECTED_FLAGS, Measurement, MeasurementLog

FALL_FLAG = math.log10(1.25)   # a step this large between coarse sizes is flagged (a fall, an outlier),
                                # whatever the noise read (the walk and the bisection go by the noise)
QUARTILE_STEP = 0.4506   # the lower quartile of |a - b| for two readings of noise sigma, in sigmas


@dataclass
class Transition:
    """A run of coarse intervals where the bandwidth changes: indices into the coarse sizes."""

    left: int
    right: int
    hi_log: float     # plateau level on the small-size side (log10 GB/s)
    lo_log: float     # plateau level on the large-size side

    def level_at(self, hits: float) -> float:
        """The bandwidth (log10) at which a share ``hits`` of the loads hits the faster level
        (harmonic mixing of the two plateaus)."""
        return -math.log10(hits * 10 ** -self.hi_log + (1 - hits) * 10 ** -self.lo_log)


@dataclass
class SweepState:
    values: dict[int, list[float]] = field(default_factory=dict)   # stream bytes -> log10 bw

    def add(self, size: int, bw: float) -> None:
        if bw > 0 and math.isfinite(bw):
            self.values.setdefault(size, []).append(math.log10(bw))

    def level(self, size: int) -> float:
        """Median over the repeats of a size: one outlier among them does not move it."""
        return float(np.median(self.values[size]))

    def sizes(self) -> list[int]:
        return sorted(self.values)


KNOWN_MARGIN = math.log10(1.15)


class AdaptiveSweep:
    def __init__(self, meter: PointMeter, plan: SweepPlan, log: MeasurementLog,
                 on_point: Callable[[Measurement], None] | None = None):
        self.meter = meter
        self.plan = plan
        self.log = log
        self.on_point = on_point or (lambda m: None)
        self.state = SweepState()
        self.used = 0
        self.sigma = 0.01

    # -- measuring -------------------------------------------------------------------
    def measure_size(self, size: int, phase: str) -> float | None:
        if self.used >= self.plan.budget:
            return None
        m = self.meter.measure(self.plan.config, size, phase=phase)
        self.used += 1
        self.log.append(m)
        self.on_point(m)
        if not m.flag_set & REJECTED_FLAGS:
            self.state.add(size, m.bandwidth_gbs)
        return m.bandwidth_gbs

    # -- the two passes --------------------------------------------------------------
    def run(self) -> list[Measurement]:
        start = len(self.log.records)
        coarse = self.plan.coarse_sizes()
        for size in coarse:
            self.measure_size(size, "coarse")
        coarse = [s for s in coarse if s in self.state.values]
        coarse = self.extend(coarse)
        if len(coarse) >= 3:
            levels = np.array([self.state.level(s) for s in coarse])
            self.sigma = self.coarse_sigma(coarse, levels)
            self.recheck_outliers(coarse, levels)
            levels = np.array([self.state.level(s) for s in coarse])
            transitions = self.find_transitions(coarse, levels)
            extra = [q for q in self.plan.large_crossings if q not in self.plan.crossings]
            for q in (*self.plan.crossings, *extra):
                for tr in sorted(transitions, key=lambda t: -abs(t.hi_log - t.lo_log)):
                    large = coarse[tr.left] >= self.plan.large_bytes
                    if q not in (self.plan.large_crossings if large else self.plan.crossings):
                        continue
                    self.bisect(coarse[tr.left], coarse[tr.right], tr, q,
                                self.plan.large_resolution if large else self.plan.resolution,
                                self.plan.large_max_probes if large else 1 << 30)
            # the first real fall (20% or more: a few percent at the smallest sizes is overhead)
            falls = [t for t in transitions if t.hi_log - t.lo_log >= max(math.log10(1.2), 10 * self.sigma)]
            first = min(falls, key=lambda t: t.left, default=None)
            if self.plan.scan_step > 0 and first is not None and coarse[first.left] < self.plan.large_bytes:
                self.walk_first_fall(coarse[first.left], coarse[first.right], first)
        return self.log.records[start:]

    def walk_first_fall(self, lo_size: int, hi_size: int, tr: Transition) -> None:
        """Walk the first fall where it is a cliff (measure.cliff_walk)."""
        walk_cliff(self, lo_size, hi_size, tr)

    def coarse_sigma(self, sizes: list[int], levels: np.ndarray) -> float:
        """The noise of one reading (log10), from the coarse pass: the lesser of the MAD of the
        steps and their lower quartile (which holds while up to three steps in four are falls: a
        short sweep across three levels has that many, and the MAD then reads the falls as noise
        and hides them)."""
        sigma = robust_sigma(levels, default=0.01)
        steps = np.abs(np.diff(levels))
        if steps.size >= 8:
            sigma = min(sigma, float(np.quantile(steps, 0.25)) / QUARTILE_STEP)
        return max(sigma, 0.002)

    def extend(self, coarse: list[int]) -> list[int]:
        """Coarse sizes past the planned end, two octaves at a time up to extend_stream_bytes,
        while the last octave and a half is not flat (within 3 sigmas and 2%), or is faster than
        memory can be (the plan's memory_ceiling_log)."""
        ppo = self.plan.points_per_octave
        while len(coarse) >= 2 * ppo and coarse[-1] * 2 <= self.plan.extend_stream_bytes:
            levels = np.array([self.state.level(s) for s in coarse])
            sigma = max(robust_sigma(levels, default=0.01), 0.002)
            k = max(2, ppo * 3 // 4)
            last = float(np.median(levels[-k:]))
            drop = float(np.median(levels[-2 * k:-k])) - last
            ceiling = self.plan.memory_ceiling_log
            if drop < max(3 * sigma, math.log10(1.02)) and not (ceiling is not None and last > ceiling):
                break
            top = min(coarse[-1] * 4, self.plan.extend_stream_bytes)
            n = max(2, int(math.ceil(math.log2(top / coarse[-1]) * ppo)))
            for size in sorted({round_to_granule(x, COARSE_BYTES) for x in np.geomspace(coarse[-1], top, n + 1)[1:]}):
                if self.measure_size(size, "coarse") is None:
                    return sorted(s for s in self.state.values)   # the budget is spent
            reached = coarse[-1]
            coarse = sorted(s for s in self.state.values)
            if coarse[-1] <= reached:
                break       # nothing past the end was kept (every reading rejected)
        return coarse

    def first_level(self) -> tuple[float, ...]:
        """The speed (log10 GB/s) of the sweep's first plateau: the median of its first three
        coarse sizes; none if it measured fewer."""
        sizes = self.state.sizes()[:3]
        return (float(np.median([self.state.level(s) for s in sizes])),) if len(sizes) == 3 else ()

    def flag_step(self) -> float:
        """The step (log10) between coarse sizes that is flagged: 5 sigmas of the noise read, but
        never more than FALL_FLAG (a noise read from steps that are mostly slopes runs high)."""
        return max(min(5 * self.sigma, FALL_FLAG), self.plan.min_step / math.log(10))

    def recheck_outliers(self, sizes: list[int], levels: np.ndarray) -> None:
        """Re-measure a coarse point that leaves and returns to its neighbours' level.

        Two more readings make its median robust; a real feature (an aliasing dip) survives.
        """
        step = self.flag_step()
        for i in range(1, len(sizes) - 1):
            d_left, d_right = levels[i] - levels[i - 1], levels[i] - levels[i + 1]
            if (abs(d_left) > step and abs(d_right) > step and d_left * d_right > 0
                    and abs(levels[i - 1] - levels[i + 1]) < step):
                for _ in range(2):
                    self.measure_size(sizes[i], "check")

    def find_transitions(self, sizes: list[int], levels: np.ndarray) -> list[Transition]:
        step = self.flag_step()
        flagged = np.abs(np.diff(levels)) > step
        transitions: list[Transition] = []
        i = 0
        while i < len(flagged):
            if not flagged[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(flagged) and flagged[j + 1]:
                j += 1
            left, right = i, j + 1
            hi = float(np.median(levels[max(0, left - 2):left + 1]))
            lo = float(np.median(levels[right:right + 3]))
            if hi > lo:   # a rise is overhead at small sizes or a fault, never a cache: not refined
                cuts = sorted((k for k in self.plan.known_levels if lo + KNOWN_MARGIN < k < hi - KNOWN_MARGIN),
                              reverse=True)
                edges = [hi, *cuts, lo]
                transitions += [Transition(left, right, a, b) for a, b in zip(edges, edges[1:])]
            i = j + 1
        return transitions

    def _side(self, size: int, threshold: float, hi_is_above: bool) -> int:
        """+1 on the high-bandwidth side of the threshold, -1 on the low side, 0 undecided."""
        vals = self.state.values[size]
        mean = self.state.level(size)
        margin = 2.5 * self.sigma / math.sqrt(len(vals))
        if abs(mean - threshold) <= margin:
            return 0
        above = mean > threshold
        return 1 if above == hi_is_above else -1

    def bracket(self, lo_size: int, hi_size: int, threshold: float, hi_is_above: bool):
        """Last size on the high side before the first size on the low side."""
        inside = [s for s in self.state.sizes() if lo_size <= s <= hi_size]
        left = inside[0]
        for s in inside:
            if (self.state.level(s) > threshold) != hi_is_above:
                return left, s
            left = s
        return None

    def _before_crossing(self, lo_size: int, hi_size: int, threshold: float, hi_is_above: bool) -> int:
        """Where a crossing's search starts: ``lo_size``, or the size measured before it when
        ``lo_size`` is already past the crossing (a fall whose first misses were a step under the
        coarse pass's flag: a modulo-indexed L1's sets overflowing one by one; its 95% crossing
        lies before the flagged step, where the search never looked)."""
        inside = [s for s in self.state.sizes() if lo_size <= s <= hi_size]
        earlier = [s for s in self.state.sizes() if s < lo_size]
        # the size before clear of the noise over the crossing: a plateau that sags (a faster
        # level's tail) would be bisected and read as a decline (physics GPU 2's L1: -32%)
        if inside and earlier and (self.state.level(inside[0]) > threshold) != hi_is_above \
                and self._side(earlier[-1], threshold, hi_is_above) > 0:
            return earlier[-1]
        return lo_size

    def bisect(self, lo_size: int, hi_size: int, tr: Transition, q: float, resolution: float,
               max_probes: int = 1 << 30) -> None:
        threshold = tr.level_at(q)
        hi_is_above = tr.hi_log > tr.lo_log
        lo_size = self._before_crossing(lo_size, hi_size, threshold, hi_is_above)
        undecided_in_row = 0
        probes = 0
        while self.used < self.plan.budget and probes < max_probes:
            probes += 1
            bracket = self.bracket(lo_size, hi_size, threshold, hi_is_above)
            if bracket is None:
                return
            left, right = bracket
            if right - left <= max(GRANULE_BYTES, resolution * left):
                return
            if right / left > 1.05:
                mid = round_to_granule(math.sqrt(left * right))
            else:
                mid = round_to_granule((left + right) / 2)
            if mid in (left, right):
                mid = left + GRANULE_BYTES
            self.measure_size(mid, "refine")
            if mid not in self.state.values:
                return
            tries = 1
            while self._side(mid, threshold, hi_is_above) == 0 and tries < self.plan.max_repeats:
                if self.measure_size(mid, "refine") is None:
                    return
                tries += 1
            if self._side(mid, threshold, hi_is_above) == 0:
                undecided_in_row += 1
                if undecided_in_row >= 2:
                    return
            else:
                undecided_in_row = 0
