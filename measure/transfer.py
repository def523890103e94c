"""The transfer-unit probe: loads per second against the stride between the 4-byte words that
neighbouring lanes read, over a set the level holds, with loads that skip the L1.

Each load moves whole transfer units over the link into the SMs: a lane's 4 bytes cost
min(stride, unit) bytes of it, so loads per second halve with every doubling of the stride until
the stride reaches the unit and stay flat past it. On an H200 with `.cg` loads over 8 MiB
(benchmarks/explore_sector.py; tests/data/h200-runs.tar.xz: h200/2026-11-30/check/sector.json):
1196, 591, 291, 288 and 160 G loads/s at 8, 16, 32, 64 and 128 B: the L2 hands out 32-byte
sectors (past 128 B every lane needs a line of its own, which costs more again). The pointer
chase cannot see this unit: a chase that misses the L2 measures what one miss brings from memory
(64 B on that card; BENCHMARKS.md, 2026-11-30, fourth session).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from detect_caches.records import Measurement

STRIDES_BYTES = (8, 16, 32, 64, 128)   # below 8 B the load issue rate, not the link, sets the pace
BLOCK = 256
NUM_WARPS = 8
PROGRAMS_PER_CU = 8
ITERS = (256, 1024)                    # the load-iteration regression: launch overhead cancels
MAX_SPAN_BYTES = 8 << 20


@dataclass(frozen=True)
class StrideSpec:
    """One probe point: ``stride_bytes`` apart over ``span_bytes`` (``span_bytes // stride_bytes``
    words are read), by ``programs`` programs of BLOCK lanes."""

    stride_bytes: int
    span_bytes: int
    programs: int
    l2only: bool = True

    @property
    def n_slots(self) -> int:
        """Words read: a power of two (the kernel wraps with a mask)."""
        return max(BLOCK, self.span_bytes // self.stride_bytes)

    @property
    def slot_mask(self) -> int:
        return self.n_slots - 1

    @property
    def stride_elems(self) -> int:
        return self.stride_bytes // 4


def probe_specs(level_bytes: float, compute_units: int) -> list[StrideSpec]:
    """The strides over an eighth of the level, rounded down to a power of two (at most 8 MiB,
    at least 1 MiB: a set the level holds whole and that no L1 holds, were the loads cached)."""
    span = 1 << int(math.log2(min(MAX_SPAN_BYTES, max(1 << 20, level_bytes / 8))))
    return [StrideSpec(s, span, PROGRAMS_PER_CU * compute_units) for s in STRIDES_BYTES]


def measure_transfer(device, spec: StrideSpec, *, target: str, t0: float, repeats: int = 3) -> Measurement:
    """One stride: the load-iteration regression over CUDA events (ITERS sweeps of the set per
    program); ``bandwidth_gbs`` is the words read (4 bytes each) per second, not the bytes the
    link moved."""
    ms = np.asarray(device.time_strided(spec, ITERS, repeats), dtype=float)
    med = np.median(ms, axis=1)
    slope = (med[-1] - med[0]) / (ITERS[-1] - ITERS[0])
    ok = math.isfinite(slope) and slope > 0
    words = spec.programs * BLOCK
    return Measurement(
        sweep="shared", working_set_bytes=spec.span_bytes,
        bandwidth_gbs=words * 4 / (slope * 1e-3) / 1e9 if ok else math.nan, stream_bytes=spec.span_bytes,
        programs=spec.programs, rows=1, block_size=BLOCK, num_warps=NUM_WARPS,
        load_flavour="l2only" if spec.l2only else "cached", load_iters=ITERS[-1], slope_ms=float(slope),
        intercept_ms=float(med[0] - slope * ITERS[0]), phase="sector", timing="events",
        flags="" if ok else "poor_r2", sm_clock_mhz=device.sm_clock_mhz() or math.nan,
        t_s=time.perf_counter() - t0, stride_bytes=spec.stride_bytes, order="sequential", target=target)


def run_transfer_probes(device, targets: list[tuple[str, float]], log, budget: int, *, t0: float,
                        on_point: Callable[[Measurement], None] | None = None) -> int:
    """The strides for each (level, bytes it holds) target, within ``budget`` measurements."""
    used = 0
    for name, level_bytes in targets:
        for spec in probe_specs(level_bytes, device.facts.compute_units):
            if used >= budget:
                return used
            m = measure_transfer(device, spec, target=name, t0=t0)
            used += 1
            log.append(m)
            if on_point:
                on_point(m)
    return used
