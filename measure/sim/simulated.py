"""A simulated GPU that answers the same timing calls as `measure.gpu.TritonGPU`.

It exists so that the sweep and the analyzer can be tested on a CPU against a known truth. It
never stands in for a hardware claim: every result it produces is marked ``simulated``. The
physics (fall shapes, partitions, mixing) is in `measure.sim_model`, the profiles in
`measure.sim_profile`; this module adds the launch geometry, timing noise and faults.
"""
from __future__ import annotations

import hashlib
import math
import time
from typing import Sequence

import numpy as np

from detect_caches.errors import DeviceError
from detect_caches.measure.kernel_meta import ELEM_BYTES
from detect_caches.measure.launch import ChaseTiming, ClockTiming, LaunchConfig
from detect_caches.measure.occupancy import KernelResources, check_single_wave
from detect_caches.measure.sim.model import Footprints, SimLevel, chase_latency_ns, mixed_bandwidth  # noqa: F401
from detect_caches.measure.sim.profile import BUILTIN_PROFILES, SimProfile, load_profile, parse_profile  # noqa: F401


def footprints(config: LaunchConfig, compute_units: int, xcds: int, stream_bytes: int) -> Footprints:
    """What one launch makes each kind of cache hold. Program ``pid`` streams row
    ``pid % rows`` and runs on SM/CU ``pid % compute_units`` (round-robin placement); rows
    are spread over the XCDs round-robin."""
    if config.row_by_sm:
        rows = min(config.programs, compute_units)
        return Footprints(stream_bytes, stream_bytes * -(-rows // max(xcds, 1)), rows * stream_bytes, False)
    rows = config.rows(compute_units)
    per_cu_programs = -(-config.programs // compute_units)
    rows_per_cu = len({(k * compute_units) % rows for k in range(per_cu_programs)}) if rows > 1 else 1
    shared = config.programs // rows >= 2
    return Footprints(float(stream_bytes * rows_per_cu), float(stream_bytes * -(-rows // max(xcds, 1))),
                      float(stream_bytes * rows), shared)


class SimulatedGPU:
    """Same calls as the real device; timings come from the profile's model plus noise."""

    INTERCEPT_MS = 0.006   # launch overhead and the final store

    def __init__(self, profile: SimProfile):
        self.profile = profile
        self.facts = profile.facts
        self._rng = np.random.default_rng(profile.seed)
        self._measured: dict[bytes, int] = {}   # noise_keyed: how often each launch was timed
        self.calls = 0
        self.modeled_gpu_seconds = 0.0   # what the launches would take on the card the profile models

    def max_working_set_bytes(self) -> int:
        return int(self.facts.total_memory_bytes * 0.6)

    def sm_clock_mhz(self) -> float | None:
        return self.facts.sm_clock_max_mhz

    def bandwidth_gbs(self, config: LaunchConfig, stream_bytes: int) -> float:
        """The noiseless model bandwidth for one launch configuration and size."""
        f = self.facts
        fp = footprints(config, f.compute_units, f.xcds, stream_bytes)
        skip_l1 = config.load_flavour == "l2only" or (config.load_flavour == "volatile" and f.vendor == "nvidia")
        return mixed_bandwidth(self.profile.levels_under(config.carveout_kib), fp, stream_bytes, self.profile.seed,
                               skip_l1)

    def other_processes(self) -> int | None:
        return self.profile.faults.get("other_processes", 0)

    def _inject_faults(self) -> None:
        """Faults a profile asks for, to test what a live run does with them."""
        faults = self.profile.faults
        if self.calls >= faults.get("fail_after_calls", 1 << 62):
            raise DeviceError("a kernel launch failed: simulated fault (fail_after_calls)")
        if self.calls >= faults.get("interrupt_after_calls", 1 << 62):
            raise KeyboardInterrupt
        if faults.get("launch_sleep_ms"):       # a slow GPU, in wall time (signals, progress)
            time.sleep(faults["launch_sleep_ms"] / 1000)

    def _noise_now(self) -> float:
        self._inject_faults()
        noise = self.profile.noise
        for burst in self.profile.noise_bursts:
            start = int(burst.get("after_calls", 0))
            if start <= self.calls < start + int(burst.get("calls", 0)):
                noise = max(noise, float(burst.get("noise", 0.2)))
        return noise

    def _stream(self, config: LaunchConfig, stream_elems: int) -> np.random.Generator:
        """Where this call's noise comes from: the profile's one stream, or (``noise_keyed``) a
        stream of its own for the launch configuration, the size and how often that launch was
        timed before. Keyed, a run that measures one more size elsewhere draws the same noise
        for the other points (common random numbers: two analyses compared on the simulator
        differ by what they do, not by which points a shifted stream made noisy), but for a point
        whose launch was re-sized (timed twice, its kept timing the second draw) after another
        size than before. Every LaunchConfig field is in the key: a field added to it gives every
        keyed realization anew (an A/B across that change shares no noise)."""
        if not self.profile.noise_keyed:
            return self._rng
        key = hashlib.blake2b(repr((sorted(vars(config).items()), int(stream_elems))).encode(), digest_size=8).digest()
        n = self._measured.get(key, 0)
        self._measured[key] = n + 1
        return np.random.default_rng([self.profile.seed, int.from_bytes(key, "little"), n])

    def _pass_ns(self, config: LaunchConfig, stream_elems: int) -> tuple[float, float, np.random.Generator]:
        """One pass over every row (ns), with this call's point error, the noise level now, and
        the stream the rest of the call's noise comes from."""
        stream_bytes = stream_elems * ELEM_BYTES
        bw = self.bandwidth_gbs(config, stream_bytes)
        noise = self._noise_now()
        self.calls += 1
        rng = self._stream(config, stream_elems)
        point_factor = math.exp(rng.normal(0.0, noise))
        if rng.random() < self.profile.outlier_rate:
            point_factor *= 1.6
        return config.programs * stream_bytes / bw * point_factor, noise, rng

    def time_launches(self, config: LaunchConfig, stream_elems: int,
                      load_iters: Sequence[int], repeats: int) -> np.ndarray:
        pass_ns, noise, rng = self._pass_ns(config, stream_elems)
        pass_ms = pass_ns / 1e6
        iters = np.asarray(load_iters, dtype=float)[:, None]
        jitter = rng.normal(0.0, 0.0004, size=(len(load_iters), repeats))
        per_launch = 1.0 + rng.normal(0.0, noise / 4, size=(len(load_iters), repeats))
        ms = self.INTERCEPT_MS + iters * pass_ms * per_launch + np.abs(jitter)
        self.modeled_gpu_seconds += float(ms.sum()) / 1e3 + float(iters.max()) * pass_ms / 1e3   # + warm-up
        if noise > self.profile.noise:
            # a busy GPU time-slices: some launches wait behind another process's kernels
            waits = rng.random(ms.shape) < 0.5
            ms = ms + waits * rng.uniform(0.0, 0.6, ms.shape) * ms.max()
        return ms

    def time_in_kernel(self, config: LaunchConfig, stream_elems: int, warm_iters: int,
                       load_iters: int, repeats: int) -> ClockTiming:
        per_cu = check_single_wave(self.facts, config.programs, self.kernel_resources(config.num_warps))
        pass_ns, noise, rng = self._pass_ns(config, stream_elems)
        phase_ns = load_iters * pass_ns
        per_launch = 1.0 + np.abs(rng.normal(0.0, noise / 4, size=repeats))
        # the clock ticks every 32 ns; programs of one wave start within about a microsecond
        longest = np.round(phase_ns * per_launch / 32.0) * 32.0
        spread = np.abs(rng.normal(800.0, 200.0, size=repeats))
        return ClockTiming(longest, spread, per_cu, "simulated 32 ns clock")

    def check_single_wave(self, config: LaunchConfig) -> int:
        return check_single_wave(self.facts, config.programs, self.kernel_resources(config.num_warps))

    def chase_ns(self, spec) -> float:
        """The noiseless model latency of one hop of ``spec``'s chase."""
        return chase_latency_ns(self.profile.levels_under(spec.carveout_kib), spec.elements, spec.slot_bytes, spec.sequential,
                                spec.l2only, spec.partial)

    def time_chase(self, spec, warm_hops: int, hops: Sequence[int], repeats: int) -> ChaseTiming:
        noise = self._noise_now()
        self.calls += 1
        hop_ns = self.chase_ns(spec) * math.exp(self._rng.normal(0.0, noise))
        hops_arr = np.asarray(hops, dtype=float)[:, None]
        per_launch = 1.0 + self._rng.normal(0.0, noise / 4, size=(len(hops), repeats))
        ms = self.INTERCEPT_MS + (warm_hops + hops_arr) * hop_ns * per_launch / 1e6
        self.modeled_gpu_seconds += float(ms.sum()) / 1e3
        clock_ghz = (self.facts.sm_clock_max_mhz or 1500.0) / 1000.0
        timed = float(hops[-1]) * hop_ns
        return ChaseTiming(tuple(hops), ms, timed * clock_ghz, np.round(timed / 32.0) * 32.0)

    def time_strided(self, spec, load_iters: Sequence[int], repeats: int) -> np.ndarray:
        """The transfer-unit probe: the level holding the set hands out units of its profile's
        sector_bytes (32 when not given) at its bandwidth; a lane's word costs min(stride, unit)
        bytes of it, and no fewer than 8 (the load issue rate)."""
        noise = self._noise_now()
        self.calls += 1
        level = next((lv for lv in self.profile.levels if lv.scope != "per_cu"
                      and (lv.capacity_bytes is None or lv.capacity_bytes > 2 * spec.span_bytes)), None)
        bw = level.bandwidth_gbs if level is not None else 1000.0
        unit = getattr(level, "sector_bytes", None) or 32
        words = spec.programs * 256
        iter_ms = words * max(min(spec.stride_bytes, unit), 8) / bw / 1e6 * math.exp(self._rng.normal(0.0, noise))
        iters = np.asarray(load_iters, dtype=float)[:, None]
        per_launch = 1.0 + self._rng.normal(0.0, noise / 4, size=(len(load_iters), repeats))
        ms = self.INTERCEPT_MS + iters * iter_ms * per_launch
        self.modeled_gpu_seconds += float(ms.sum()) / 1e3
        return ms

    def kernel_shared_bytes(self, config: LaunchConfig) -> int | None:
        """Shared memory per block of the kernel ``config`` launches (the simulated kernel has none)."""
        return 0

    @staticmethod
    def kernel_resources(num_warps: int) -> KernelResources:
        """What the simulated kernel needs per program (40 registers/thread, as on sm_90)."""
        return KernelResources(num_warps, registers_per_thread=40, shared_bytes=0)
