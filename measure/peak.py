"""Peak probes: a few launch configurations measured inside each level's plateau, after the
sweeps, so that each level's bandwidth is also reported under the launch that suits it best.

The sweeps keep one configuration each (the knees must come from one curve); a level's
fastest configuration differs (H200: L2 hits are faster when several SMs read each row, which
would move the L2 knee if the sweep did it). Sharing rows is only tried inside cache plateaus,
where the data fits either way, never for memory, where sharers would hit in L2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from detect_caches.device import DeviceFacts
from detect_caches.measure.kernel_meta import GRANULE_BYTES
from detect_caches.measure.launch import LaunchConfig
from detect_caches.measure.occupancy import NotOneWaveError
from detect_caches.measure.point import PointMeter
from detect_caches.records import Measurement, MeasurementLog


@dataclass(frozen=True)
class PeakTarget:
    """Where to probe: a level's plateau on its sweep's x axis (bytes per SM/CU or aggregate)."""

    level: str
    sweep: str
    plateau_lo_bytes: float
    plateau_hi_bytes: float
    memory: bool = False


def candidates(target: PeakTarget, facts: DeviceFacts, base: LaunchConfig) -> list[LaunchConfig]:
    """Launches to try for one level (programs per SM/CU, block, warps, layout, row sharing)."""
    cus = facts.compute_units
    if target.sweep == "private":
        shapes = [(4, 2048, 4), (4, 1024, 8), (8, 1024, 4), (2, 2048, 8), (8, 2048, 2)]
        by_sm = base.row_by_sm
        return [LaunchConfig("private", cus * (n if by_sm else 1), b, w, 1, base.load_flavour, by_sm)
                for n, b, w in shapes if by_sm or n == shapes[0][0]]
    if target.memory:
        # HBM wants bytes in flight: up to 64 warps per SM, and 2-8 loads per thread per chunk
        # (H200, 960 MiB: every shape of 2-8 programs x 8-32 warps x blocks 1024-8192 within
        # 4.47-4.59 TB/s; the best were block 8192 with 8-32 warps: BENCHMARKS.md, 2026-11-29 14:10)
        shapes = [(4, 2048, 16, False, 1), (4, 8192, 16, False, 1), (4, 8192, 8, False, 1),
                  (8, 8192, 8, False, 1), (2, 8192, 32, False, 1), (8, 4096, 8, False, 1),
                  (4, 4096, 16, True, 1)]
    else:
        shapes = [(4, 1024, 8, False, 1), (4, 1024, 8, False, 4), (8, 1024, 8, True, 8),
                  (4, 1024, 16, False, 4), (8, 1024, 8, False, 4), (16, 1024, 4, False, 16)]
    configs = [LaunchConfig("shared", cus * n, b, w, 1, base.load_flavour, False, inter, share)
               for n, b, w, inter, share in shapes]
    return configs


def all_candidates(facts: DeviceFacts, bases: dict[str, LaunchConfig]) -> list[LaunchConfig]:
    """Every launch the peak probes may try, whatever the levels turn out to be (to compile them
    ahead, while the sweeps measure)."""
    out = []
    for sweep, base in bases.items():
        kinds = (False,) if sweep == "private" else (False, True)
        for memory in kinds:
            out += candidates(PeakTarget("", sweep, 1.0, 2.0, memory), facts, base)
    return out


MEMORY_DEPTH = 4   # memory probes at 4x the start of its plateau: past every cache by far (an
                   # H200's gpu-l2-cache reads 4.725 TB/s from 107 to 534 MiB, with no L2 help), and
                   # short of the sizes where memory slows down (this kernel 4.73 at 256 MiB, 4.71
                   # at 512 MiB, 4.58 at 0.96-2 GiB): BENCHMARKS.md, 2026-11-30, third session, and
                   # 2026-11-29 14:10


def probe_size(target: PeakTarget) -> float:
    """Inside the plateau: its geometric middle for caches (clear of both edges); for memory
    MEMORY_DEPTH x where its plateau starts (its far end when shorter)."""
    if target.memory:
        return min(target.plateau_hi_bytes, MEMORY_DEPTH * target.plateau_lo_bytes)
    return (target.plateau_lo_bytes * target.plateau_hi_bytes) ** 0.5


def stream_bytes_for(target: PeakTarget, cfg: LaunchConfig, facts: DeviceFacts) -> int:
    x = probe_size(target)
    rows = 1 if target.sweep == "private" else cfg.rows(facts.compute_units)
    return max(GRANULE_BYTES, int(x / rows) // GRANULE_BYTES * GRANULE_BYTES)


def probe_peaks(meter: PointMeter, targets: list[PeakTarget], bases: dict[str, LaunchConfig],
                log: MeasurementLog, budget: int,
                on_point: Callable[[Measurement], None] | None = None) -> int:
    """Measure the candidates of every target (phase "peak"), within ``budget``; returns the count."""
    facts = meter.device.facts
    used = 0

    def measure(cfg: LaunchConfig, stream: int) -> Measurement | None:
        nonlocal used
        try:
            m = meter.measure(cfg, stream, phase="peak")
        except NotOneWaveError:
            return None   # not a candidate for in-kernel timing
        used += 1
        log.append(m)
        if on_point:
            on_point(m)
        return m

    for target in targets:
        base = bases.get(target.sweep)
        if base is None:
            continue
        tried = []
        for cfg in candidates(target, facts, base):
            if used >= budget:
                return used
            stream = stream_bytes_for(target, cfg, facts)
            m = measure(cfg, stream)
            if m is not None and m.bandwidth_gbs > 0:
                tried.append((m.bandwidth_gbs, cfg, stream))
        if tried and used < budget:
            # the winner of several noisy measurements is biased upwards: measure it again, and
            # detector.peaks reports that confirming reading (independent of the choice)
            _, cfg, stream = max(tried, key=lambda t: t[0])
            measure(cfg, stream)
    return used
