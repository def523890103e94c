"""The carveout sweeps (``--carveouts``): after the run's own sweeps, the private sweep again under
each carveout asked for, inside the window where that carveout's L1 should end
(detect_caches.carveout.window_for), refined as the run's L1 is (bisection and the cliff walk), and one
pointer chase inside the L1 for its latency. Every record carries its ``carveout_kib``; the
analysis (detector.carveouts) reads them apart from the run's own.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from detect_caches.carveout import LaunchShared, parse_carveouts, supported_carveouts
from detect_caches.carveout import array_bytes, window_for
from detect_caches.measure.chains import DENSE_SLOT_BYTES, ChainSpec
from detect_caches.errors import InputError
from detect_caches.measure.kernel_meta import GRANULE_BYTES, round_to_granule
from detect_caches.records import MeasurementLog
from detect_caches.measure.sweep import AdaptiveSweep, SweepPlan

BUDGET = 60              # measurements per carveout: the chase point, the edge scan's and the sweep's
POINTS_PER_OCTAVE = 8    # the window spans under two octaves: a point per analysis bin
CHASE_SHARE = 0.5        # the chase's chain: this share of the expected L1
EDGE_CHECKS = 3          # first sizes past the first fall read again, at most
PLATEAU_SHARE = 0.95     # sizes below this share of the expected L1: its plateau, for the noise
CROSSINGS = (0.5, 0.95)  # where the fall is bisected: its middle and its top (the L1's end); its foot
                         # (20% hits) says nothing of the capacity


def check_carveouts(device, text: str | None, sweeps: tuple[str, ...]) -> tuple[int, ...]:
    """The carveouts ``--carveouts`` asks for on this device, or one clear InputError."""
    if not text:
        return ()
    facts = device.facts
    if "private" not in sweeps:
        raise InputError("--carveouts measures the L1 again under each carveout: it needs the private sweep")
    steps = parse_carveouts(text, facts)
    profile = getattr(device, "profile", None)
    if profile is not None and getattr(profile, "default_carveout_kib", None) is None:
        raise InputError(f"the simulated {facts.name.removeprefix('simulated ')} models no unified L1/shared array "
                         f"(unified_bytes and default_carveout_kib in its profile): --carveouts does not apply")
    return steps


def launch_shared(device, config) -> LaunchShared | None:
    """What the run's private launch needed of the array: the compiled kernel's shared memory per
    block and its blocks per SM, under the driver's own choice (None off NVIDIA's carved L1)."""
    facts = device.facts
    if not supported_carveouts(facts) or config is None:
        return None
    probe = getattr(device, "kernel_shared_bytes", None)
    shared = probe(config) if probe is not None else None
    per_sm = config.programs // facts.compute_units if config.row_by_sm else -(-config.programs // facts.compute_units)
    pct = None
    if config.carveout_kib is not None:
        from detect_caches.carveout import preference_pct
        pct = preference_pct(config.carveout_kib, facts)
    return LaunchShared(shared, max(per_sm, 1), pct)


EDGE_FALLEN = math.log10(1 / 0.85)   # a size below 85% of the plateau, and the two after it: fallen
EDGE_FULL = math.log10(1 / 0.95)     # ... at 95% or more: still at full speed
EDGE_BELOW, EDGE_POINTS = 0.04, 6    # the edge scan: 6 sizes over the 4% below, 6 granules past
EDGE_BUDGET = 2 * EDGE_POINTS


class CarveoutSweep(AdaptiveSweep):
    """The run's adaptive sweep in a window around ``expected_bytes``, with the noise read where
    the L1 should still hold and the first size past the first fall read three times: the
    bisection and the cliff walk look for the L1's end only below that size, so one slow reading
    there (a launch that waited) would hide where the L1 really ends."""

    def __init__(self, meter, plan: SweepPlan, log: MeasurementLog, on_point=None, *, expected_bytes: int):
        super().__init__(meter, plan, log, on_point)
        self.expected_bytes = expected_bytes

    def run(self):
        start = len(self.log.records)
        super().run()
        self.plan = dataclasses.replace(self.plan, budget=self.used + EDGE_BUDGET)
        self.scan_edge()
        return self.log.records[start:]

    def scan_edge(self) -> None:
        """The L1's edge read densely: sizes just below its last full-speed size (a plateau that
        holds right up to the edge is what places the capacity there, not a few percent before)
        and every granule from it to the first size that stays fallen."""
        sizes = self.state.sizes()
        if len(sizes) < 4:
            return
        levels = np.array([self.state.level(s) for s in sizes])
        below = levels[np.asarray(sizes) < PLATEAU_SHARE * self.expected_bytes]
        top = float(np.median(below if below.size >= 3 else levels[:3]))
        low = [i for i in range(len(sizes)) if levels[i] < top - EDGE_FALLEN
               and all(v < top - EDGE_FALLEN for v in levels[i + 1:i + 3])]
        if not low:
            return
        full = [s for s, v in zip(sizes[:low[0]], levels[:low[0]]) if v >= top - EDGE_FULL]
        if not full:
            return
        last, first = full[-1], sizes[low[0]]
        todo = [round_to_granule(x) for x in np.geomspace(last * (1 - EDGE_BELOW), last, EDGE_POINTS)]
        todo += list(range(last + GRANULE_BYTES, first, GRANULE_BYTES))[:EDGE_POINTS]
        for size in sorted(set(todo)):
            if size not in self.state.values and self.measure_size(size, "refine") is None:
                return

    def coarse_sigma(self, sizes: list[int], levels: np.ndarray) -> float:
        """Half the window is the fall and its tail of partial hits, whose steady decline the
        whole pass's differences would count as noise (hiding the fall itself): the sizes below
        the expected L1 alone, where there are enough of them."""
        below = levels[np.asarray(sizes) < PLATEAU_SHARE * self.expected_bytes]
        return super().coarse_sigma(sizes, below if below.size >= 4 else levels)

    def recheck_outliers(self, sizes: list[int], levels: np.ndarray) -> None:
        """The run's recheck, then the first size past the first fall read twice more; where
        that reading was slow by chance, the first fall moves on and its first size is read
        again too (at most EDGE_CHECKS sizes)."""
        super().recheck_outliers(sizes, levels)
        step = self.flag_step()
        confirmed: set[int] = set()
        for _ in range(EDGE_CHECKS):
            levels = np.array([self.state.level(s) for s in sizes])
            edge = next((s for s, a, b in zip(sizes[1:], levels, levels[1:]) if a - b > step), None)
            if edge is None or edge in confirmed:
                return
            confirmed.add(edge)
            for _ in range(2):
                self.measure_size(edge, "check")

    def walk_first_fall(self, lo_size: int, hi_size: int, tr) -> None:
        """The cliff walk, then the last bracket of the 95% crossing scanned on the walk's grid
        (one reading a size, until two in a row read below 80% hits): near an L1's end set
        aliasing dips a few percent, the bisection stops undecided and the walk may not start
        (its first step looks no steeper than a dip)."""
        super().walk_first_fall(lo_size, hi_size, tr)
        hi_is_above = tr.hi_log > tr.lo_log
        at95 = tr.level_at(0.95)
        at80 = tr.level_at(0.8)
        bracket = self.bracket(lo_size, hi_size, at95, hi_is_above)
        if bracket is None:
            return
        left, right = bracket
        step = max(GRANULE_BYTES, round_to_granule(left * self.plan.scan_step))
        size, low_in_row = left, 0
        for _ in range(self.plan.scan_points):
            size += step
            if size >= right or low_in_row >= 2:
                return
            if size not in self.state.values and self.measure_size(size, "refine") is None:
                return
            if size in self.state.values:
                low_in_row = low_in_row + 1 if (self.state.level(size) < at80) == hi_is_above else 0


def carveout_plan(base: SweepPlan, carveout_kib: int, lo_bytes: int, hi_bytes: int) -> SweepPlan:
    """The run's private plan under ``carveout_kib``, narrowed to [lo_bytes, hi_bytes]."""
    return dataclasses.replace(base, config=dataclasses.replace(base.config, carveout_kib=carveout_kib),
                               min_stream_bytes=lo_bytes, max_stream_bytes=hi_bytes, budget=BUDGET - 1 - EDGE_BUDGET,
                               points_per_octave=POINTS_PER_OCTAVE, extend_stream_bytes=0, crossings=CROSSINGS)


def run_carveouts(session, device, log: MeasurementLog, carveouts: tuple[int, ...], *, default_l1_bytes,
                  latency: bool, on_point=None) -> dict:
    """Measure each carveout but the default's (``default_l1_bytes`` implies it); returns what
    goes into the method record."""
    from detect_caches.carveout import implied_carveout_kib
    facts = device.facts
    base = session.plans.get("private")
    if base is None:
        return {}
    array = array_bytes(facts, default_l1_bytes)
    default = implied_carveout_kib(default_l1_bytes, facts)
    if array is None:
        session.warnings.append("no L1 and no documented unified array to place the carveout sweeps: skipped")
        return {}
    meter = session.latency_meter
    if latency and meter is None:
        from detect_caches.measure.latency import LatencyMeter
        meter = LatencyMeter(device, t0=session.meter.t0)
    runs = []
    for c in carveouts:
        if c == default:
            continue
        t, before = time.perf_counter(), len(log.records)
        window = window_for(c, array, facts)
        CarveoutSweep(session.meter, carveout_plan(base, c, window.lo_bytes, window.hi_bytes), log, on_point,
                      expected_bytes=window.expected_bytes).run()
        if latency:
            size = max(int(CHASE_SHARE * window.expected_bytes), 4096)
            m = meter.measure_chain(ChainSpec(max(2, size // DENSE_SLOT_BYTES), carveout_kib=c), phase="coarse",
                                    target="L1")
            log.append(m)
            if on_point is not None:
                on_point(m)
        runs.append({"carveout_kib": c, "measurements": len(log.records) - before,
                     "seconds": round(time.perf_counter() - t, 3), "window_bytes": [window.lo_bytes, window.hi_bytes]})
    session.records = log.records
    return {"asked": list(carveouts), "skipped_default_kib": default, "array_bytes_assumed": array,
            "measurements": sum(r["measurements"] for r in runs),
            "seconds": round(sum(r["seconds"] for r in runs), 3), "sweeps": runs}
