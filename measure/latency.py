"""The latency sweep: a one-program pointer chase over growing chains, refined at the knees,
then probes for what a miss brings in (sector) and what a line holds (line), per level.

Each point is timed two ways: the in-kernel clocks (SM cycles and a device timer around the
timed hops: the figure reported) for every point, and, for chains up to REGRESSION_MAX_HOPS, the
load-iteration regression over CUDA events (launches of T and 2T timed hops after the same
warm-up: the slope is ns per hop; kept in ``slope_ms`` as the cross-check). A point's ``bandwidth_gbs`` is slot bytes over the hop time: a rate that mixes
harmonically with the hit rate as bandwidth does, so the adaptive sweep and the analyzer read the
chase like a bandwidth curve.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from detect_caches.measure.chains import DENSE_SLOT_BYTES, ChainSpec
from detect_caches.measure.kernel_meta import GRANULE_BYTES
from detect_caches.measure.launch import LaunchConfig, TimingDevice
from detect_caches.records import Measurement, MeasurementLog
from detect_caches.measure.sweep import AdaptiveSweep, SweepPlan

REGRESSION_MAX_HOPS = 1 << 13     # chains up to 512 KiB: the regression too (their warm-up is cheap)
LONG_TIMED_HOPS = 1 << 16         # longer chains: this many timed hops after a full warm-up walk
FULL_WALK_BYTES = 128 << 20       # longer chains are walked cold
SECTOR_STRIDES = (8, 16, 32, 64, 128, 256)
LINE_SLOT_BYTES = 512              # each element in a line of its own, whatever the line size
LINE_PROBE_SHARES = (0.75, 1.25)   # line probes: elements x 128 B as a share of the level's size
CHASE_CONFIG = LaunchConfig("chase", 1, 64, 1, 1, "cached")
AGREE = 0.1                        # the regression and the device timer within this share ...
RECHECK_REPEATS = 5                # ... or the point is measured again, with this many repeats


class LatencyMeter:
    """Measures chase points for one device."""

    def __init__(self, device: TimingDevice, t0: float | None = None, repeats: int = 2):
        self.device = device
        self.t0 = time.perf_counter() if t0 is None else t0
        self.repeats = repeats
        self.count = 0
        self.largest_cache_bytes = largest_cache(device.facts)

    def measure(self, config: LaunchConfig, size: int, *, phase: str) -> Measurement:
        """The dense chase (the adaptive sweep's interface): a random cycle over ``size`` bytes;
        past twice the largest cache (or FULL_WALK_BYTES: a warm-up walk that long is slow),
        walked cold a part at a time (memory, or the slowest level a chain that long reaches)."""
        spec = ChainSpec(max(2, size // DENSE_SLOT_BYTES), l2only=config.load_flavour == "l2only",
                         cold=size > min(2 * self.largest_cache_bytes, FULL_WALK_BYTES))
        return self.measure_chain(spec, phase=phase)

    def _timed(self, spec: ChainSpec, warm: int, counts: list[int], repeats: int, regression: bool):
        """One timing of the chain: the launches' median per hop count, the device timer's ns per
        hop (NaN without one) and the regression's (NaN without a regression)."""
        ct = self.device.time_chase(spec, warm, counts, repeats)
        med = np.median(ct.event_ms, axis=1)
        clock_ns = ct.clock_ns / counts[-1] if ct.clock_ns > 0 else math.nan
        events_ns = (med[1] - med[0]) * 1e6 / counts[0] if regression else math.nan
        return ct, med, clock_ns, events_ns

    def measure_chain(self, spec: ChainSpec, *, phase: str, target: str = "") -> Measurement:
        warm, hops = spec.walk()
        regression = not spec.partial and spec.elements <= REGRESSION_MAX_HOPS
        if regression:
            counts, repeats = [hops, 2 * hops], self.repeats
        else:
            # one launch: the warm-up walk loads the whole chain, then a part of it is timed
            counts, repeats = [min(hops, LONG_TIMED_HOPS)], 1
        flags = set()
        ct, med, clock_ns, events_ns = self._timed(spec, warm, counts, repeats, regression)
        # the device timer brackets the timed hops alone; the regression is the cross-check (on an
        # H200 it read a few percent under the timer and the cycle counter in L1: event timestamps of
        # back-to-back launches of a few hundred microseconds). A host that delays launches moves
        # the regression alone (an H100 host: 10 of 65 points 12-50% off, some far more): the point
        # is measured again, timer and launches, before it is called noisy and left out of the curve
        if regression and math.isfinite(clock_ns) and not abs(events_ns / clock_ns - 1) <= AGREE:
            ct, med, clock_ns, events_ns = self._timed(spec, warm, counts, RECHECK_REPEATS, regression)
            flags.add("rechecked")
        if math.isfinite(clock_ns):
            ns, timing = clock_ns, "device"
            if regression and not abs(events_ns / clock_ns - 1) <= AGREE:
                flags.add("noisy")   # the two timings disagree: the launches were disturbed
        elif regression:
            ns, timing = events_ns, "events"
        else:
            ns, timing = med[0] * 1e6 / (warm + counts[0]), "events"
        cycles = ct.cycles / counts[-1] if ct.cycles > 0 else math.nan
        self.count += 1
        ok = math.isfinite(ns) and ns > 0
        return Measurement(
            sweep="chase", metric="latency", working_set_bytes=spec.span_bytes if not spec.sequential
            else spec.span_bytes, bandwidth_gbs=spec.slot_bytes / ns if ok else math.nan,
            stream_bytes=spec.span_bytes, programs=1, rows=1, block_size=1, num_warps=1,
            load_flavour="l2only" if spec.l2only else "cached", load_iters=counts[-1],
            slope_ms=events_ns / 1e6, intercept_ms=float(med[0]) if len(med) else math.nan,
            phase=phase, timing=timing, flags=";".join(sorted(flags)),
            sm_clock_mhz=self.device.sm_clock_mhz() or math.nan, t_s=time.perf_counter() - self.t0,
            latency_ns=float(ns) if ok else math.nan, latency_cycles=float(cycles), stride_bytes=spec.slot_bytes,
            order="sequential" if spec.sequential else "random", target=target,
            carveout_kib=math.nan if spec.carveout_kib is None else float(spec.carveout_kib))


@dataclass
class LatencyPlan:
    min_bytes: int = 4096
    max_bytes: int = 256 << 20
    points_per_octave: int = 2
    budget: int = 70


def largest_cache(facts) -> int:
    """The largest device cache the facts document (an L2 of 64 MiB when they say nothing)."""
    return max((facts.l2_bytes_reported or 64 << 20) * (facts.xcds if facts.vendor == "amd" else 1),
               facts.llc_bytes_reported or 0)


def plan_latency(facts, memory_cap: int, budget: int) -> LatencyPlan:
    """From 4 KiB to 4x the largest cache (memory latency past it), within the free memory."""
    hi = min(4 * largest_cache(facts), 512 << 20, memory_cap // 2)
    return LatencyPlan(max_bytes=max(hi // GRANULE_BYTES * GRANULE_BYTES, 1 << 20), budget=budget)


def run_latency_sweep(meter: LatencyMeter, plan: LatencyPlan, log: MeasurementLog,
                      on_point: Callable[[Measurement], None] | None = None) -> list[Measurement]:
    """The dense chase over growing chains, refined where half the hops change level."""
    # the L1 knee to 0.5% (it must agree with the bandwidth cliff within 2 KiB); past 4 MiB every
    # point walks a long chain (costly on an H200), so the sizes there are an octave apart and
    # their knees bisected where 80%, 50% and 20% of the hops hit, two probes each, to 5%: on an
    # H200 the far half of the L2 (230-240 ns from 37 to 51 MiB, half an octave: BENCHMARKS.md,
    # 2026-11-30, third session) sits at the 50% crossing of the near-to-memory fall, and 80%/20%
    # alone never measured inside it (a chase repeats within half a percent: a point is not
    # measured twice)
    sweep_plan = SweepPlan(CHASE_CONFIG, plan.min_bytes, plan.max_bytes, plan.points_per_octave, plan.budget,
                           max_repeats=1, crossings=(0.95, 0.5, 0.2), resolution=0.005, large_bytes=4 << 20,
                           large_crossings=(0.8, 0.5, 0.2), large_resolution=0.05, large_points_per_octave=1,
                           large_max_probes=2)
    return AdaptiveSweep(meter, sweep_plan, log, on_point).run()


@dataclass(frozen=True)
class ProbeTarget:
    """A level to probe, in plain data from the detector: its name, the chain bytes at which half
    its hops still hit (the middle of its latency knee), whether L1 must be skipped (a level past
    it) and whether its sector probe must walk cold (the level after it is memory)."""

    level: str
    half_hit_bytes: float
    l2only: bool = False
    cold: bool = False


def probe_chains(target: ProbeTarget) -> list[tuple[str, ChainSpec]]:
    """Sector probes: chains in address order at strides 8-256 B over 4x the level's size (the
    level misses each fetch unit once and serves the rest of it from what that miss brought in);
    two line probes: random chains of one element per 512 B slot, as many elements as 128-byte
    lines would fill to 0.75x and 1.25x the level's size: against the dense curve their
    latencies say how many bytes each element really takes (with 128-byte lines the first fits
    and the second does not; with 64 both fit, with 256 neither)."""
    region = int(4 * target.half_hit_bytes)
    chains = [("sector", ChainSpec(max(2, region // s), s, sequential=True, l2only=target.l2only,
                                   cold=target.cold)) for s in SECTOR_STRIDES]
    for share in LINE_PROBE_SHARES:
        n = max(2, int(share * target.half_hit_bytes / 128))
        chains.append(("line", ChainSpec(n, LINE_SLOT_BYTES, l2only=target.l2only, seed=7)))
    return chains


def run_probes(meter: LatencyMeter, targets: list[ProbeTarget], log: MeasurementLog, budget: int,
               on_point: Callable[[Measurement], None] | None = None) -> int:
    used = 0
    for target in targets:
        for phase, spec in probe_chains(target):
            if used >= budget:
                return used
            m = meter.measure_chain(spec, phase=phase, target=target.level)
            used += 1
            log.append(m)
            if on_point:
                on_point(m)
    return used
