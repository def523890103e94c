"""One measured point: choose load_iters from a target duration, time, fit, check, re-measure."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from detect_caches.measure.kernel_meta import stream_elems_for
from detect_caches.measure.launch import LaunchConfig, TimingDevice
from detect_caches.records import Measurement
from detect_caches.measure.regression import fit_load_iterations

ITER_STEPS = (1, 2, 3, 4)  # load_iters = k * step: four launches of growing length


@dataclass
class PointPolicy:
    """How hard to try on one point."""

    target_ms: float = 0.4      # duration of the longest launch of the regression
    repeats: int = 5            # timed launches per load_iters value (median taken)
    min_r2: float = 0.999       # below this the point is re-measured once, then flagged
    ceiling_slack: float = 1.03  # tolerated excess over a physical ceiling (clock readings)
    timing: str = "events"      # "events": load-iteration regression; "device": in-kernel clock
    warm_iters: int = 2         # device timing: untimed passes before the timed phase
    max_spread: float = 0.03    # device timing: (max - min) / median of the repeats above this is noisy


class PointMeter:
    """Measures points for one device, remembering the last bandwidth to size the next launch."""

    def __init__(self, device: TimingDevice, policy: PointPolicy | None = None,
                 t0: float | None = None):
        self.device = device
        self.policy = policy or PointPolicy()
        self.t0 = time.perf_counter() if t0 is None else t0
        self.ceiling_gbs = device.facts.max_plausible_gbs()
        self._guess_gbs: dict[str, float] = {}
        self.count = 0

    def _iters(self, bytes_per_pass: int, guess_gbs: float, target_ms: float) -> list[int]:
        pass_ms = bytes_per_pass / (guess_gbs * 1e9) * 1e3
        k = max(1, math.ceil(target_ms / ITER_STEPS[-1] / pass_ms))
        return [k * s for s in ITER_STEPS]

    def _fit(self, config: LaunchConfig, stream_bytes: int, iters: list[int], repeats: int):
        ms = self.device.time_launches(config, stream_elems_for(stream_bytes), iters, repeats)
        med = np.median(np.asarray(ms, dtype=float), axis=1)
        return fit_load_iterations(iters, med), float(med[-1])

    def measure(self, config: LaunchConfig, stream_bytes: int, *, phase: str) -> Measurement:
        if self.policy.timing == "device":
            return self._measure_in_kernel(config, stream_bytes, phase)
        pol = self.policy
        bytes_per_pass = config.programs * stream_bytes   # every program streams a whole row
        guess = self._guess_gbs.get(config.sweep, 2000.0)
        flags: set[str] = set()
        iters = self._iters(bytes_per_pass, guess, pol.target_ms)
        fit, longest_ms = self._fit(config, stream_bytes, iters, pol.repeats)
        bw = fit.bandwidth_gbs(bytes_per_pass)
        if not (longest_ms > pol.target_ms / 3 and math.isfinite(bw) and bw > 0):
            # the guess was far off (a cache level was reached or left): size the launch again
            if math.isfinite(bw) and bw > 0:
                guess = self._plausible(bw)
            else:
                guess = guess * pol.target_ms / max(longest_ms, 1e-3)
            iters = self._iters(bytes_per_pass, guess, pol.target_ms)
            fit, longest_ms = self._fit(config, stream_bytes, iters, pol.repeats)
            bw = fit.bandwidth_gbs(bytes_per_pass)
        if not fit.r2 >= pol.min_r2:
            flags.add("remeasured")
            # first the same launches once more: what spoils most fits is a burst that hits one
            # measurement (a thread holding the interpreter while a launch waits, a clock step),
            # gone in a repeat that costs a quarter of the longer re-measurement below
            again, _ = self._fit(config, stream_bytes, iters, pol.repeats)
            if again.r2 >= pol.min_r2:
                return self._record(config, stream_bytes, phase, again.bandwidth_gbs(bytes_per_pass), flags,
                                    iters[-1], again.slope_ms, again.intercept_ms, again.r2, "events")
            # sized by what the longest launch took, not by the poor fit's slope alone: a fit
            # whose slope a noise burst flattened read 10 PB/s once on an H200 and sized the
            # re-measurement at 2 million load iterations (32 s for one point: BENCHMARKS.md,
            # 2026-11-30, fifth session)
            whole_gbs = bytes_per_pass * iters[-1] / (longest_ms * 1e6) if longest_ms > 0 else guess
            guess = min(bw, whole_gbs) if math.isfinite(bw) and bw > 0 else whole_gbs
            iters = self._iters(bytes_per_pass, self._plausible(guess), pol.target_ms * 2)
            fit, longest_ms = self._fit(config, stream_bytes, iters, pol.repeats * 2)
            bw = fit.bandwidth_gbs(bytes_per_pass)
            if not fit.r2 >= pol.min_r2:
                flags.add("poor_r2")
        return self._record(config, stream_bytes, phase, bw, flags, iters[-1], fit.slope_ms,
                            fit.intercept_ms, fit.r2, "events")

    def _plausible(self, gbs: float) -> float:
        """A bandwidth to size launches by, never above the device's physical ceiling."""
        return min(gbs, self.ceiling_gbs * self.policy.ceiling_slack) if self.ceiling_gbs else gbs

    def _clock_run(self, config: LaunchConfig, stream_bytes: int, iters: int, repeats: int):
        ct = self.device.time_in_kernel(config, stream_elems_for(stream_bytes), self.policy.warm_iters,
                                        iters, repeats)
        ns = float(np.median(ct.longest_ns))
        spread = float(np.ptp(ct.longest_ns) / ns) if ns > 0 else math.inf
        return ct, ns, spread

    def _measure_in_kernel(self, config: LaunchConfig, stream_bytes: int, phase: str) -> Measurement:
        """The seed article's timing: bandwidth = bytes of the timed passes / longest program."""
        pol = self.policy
        bytes_per_pass = config.programs * stream_bytes
        guess = self._guess_gbs.get(config.sweep, 2000.0)
        flags: set[str] = set()
        iters = self._iters(bytes_per_pass, guess, pol.target_ms)[-1]
        ct, ns, spread = self._clock_run(config, stream_bytes, iters, pol.repeats)
        if not ns > 1e6 * pol.target_ms / 3:      # the guess was far off: size the phase again
            guess = self._plausible(bytes_per_pass * iters / ns) if ns > 0 else guess * 10
            iters = self._iters(bytes_per_pass, guess, pol.target_ms)[-1]
            ct, ns, spread = self._clock_run(config, stream_bytes, iters, pol.repeats)
        if spread > pol.max_spread:
            flags.add("remeasured")
            ct, ns, spread = self._clock_run(config, stream_bytes, iters, pol.repeats * 2)
            if spread > pol.max_spread:
                flags.add("noisy")
        if ct.barrier_gave_up:
            flags.add("not_one_wave")
        bw = bytes_per_pass * iters / ns if ns > 0 else math.nan
        return self._record(config, stream_bytes, phase, bw, flags, iters, ns / iters / 1e6, 0.0,
                            math.nan, "device")

    def _record(self, config: LaunchConfig, stream_bytes: int, phase: str, bw: float, flags: set[str],
                load_iters: int, slope_ms: float, intercept_ms: float, r2: float, timing: str) -> Measurement:
        if self.ceiling_gbs and bw > self.ceiling_gbs * self.policy.ceiling_slack:
            flags.add("above_ceiling")
        if math.isfinite(bw) and bw > 0 and "above_ceiling" not in flags:
            self._guess_gbs[config.sweep] = bw
        self.count += 1
        # x axis: bytes per SM for the private sweep, distinct bytes over the device for the shared
        rows = (min(config.programs, self.device.facts.compute_units) if config.row_by_sm
                else config.rows(self.device.facts.compute_units))
        working_set = stream_bytes if config.sweep == "private" else rows * stream_bytes
        return Measurement(
            sweep=config.sweep, working_set_bytes=working_set, rows=rows,
            bandwidth_gbs=float(bw) if math.isfinite(bw) and bw > 0 else float("nan"),
            stream_bytes=stream_bytes, programs=config.programs, block_size=config.block_size,
            num_warps=config.num_warps, load_flavour=config.load_flavour, load_iters=load_iters,
            slope_ms=slope_ms, intercept_ms=intercept_ms, r2=r2, phase=phase, timing=timing,
            flags=";".join(sorted(flags)), sm_clock_mhz=self.device.sm_clock_mhz() or math.nan,
            t_s=time.perf_counter() - self.t0,
            carveout_kib=math.nan if config.carveout_kib is None else float(config.carveout_kib))
