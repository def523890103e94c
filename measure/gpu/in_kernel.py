"""Timing inside the kernel (``--timing device``): a warm-up, then a timed phase read from the
device's clock by every program, the grid held to one wave (programs meet at a barrier)."""
from __future__ import annotations

import numpy as np

from detect_caches.measure.gpu.facts import kernel_resources
from detect_caches.measure.kernel_meta import DEVICE_CLOCKS, flavour_code
from detect_caches.measure.launch import ClockTiming, LaunchConfig
from detect_caches.measure.occupancy import check_single_wave

MAX_SPINS = 1 << 20   # grid-barrier polls before a program gives up (about a second)


def kernel_one(x, y, t, sync, stream_elems: int, rows: int, config: LaunchConfig, load: int, clock: dict):
    """One program of the timed kernel, MAX_SPINS as in the real launches: compiles the same
    binary and returns it, without waiting on a barrier that other programs would have to reach."""
    from detect_caches.measure.gpu.kernel import stream_load_timed_kernel
    return stream_load_timed_kernel[(1,)](x, y, t, sync, stream_elems, 0, 1, rows, BLOCK_SIZE=config.block_size,
                                          LOAD=load, CLOCK=clock["code"], ROW_BY_SM=config.row_by_sm,
                                          INTERLEAVE=config.interleave, MAX_SPINS=MAX_SPINS,
                                          num_warps=config.num_warps, num_stages=config.num_stages)


class InKernelTimer:
    """TritonGPU's in-kernel timing (a mixin: it uses the GPU's buffers and guards)."""

    def time_in_kernel(self, config: LaunchConfig, stream_elems: int, warm_iters: int,
                       load_iters: int, repeats: int) -> ClockTiming:
        from detect_caches.measure.gpu.kernel import stream_load_timed_kernel
        torch = self.torch
        x, y = self._buffers(config, stream_elems)
        clock = DEVICE_CLOCKS[self.facts.vendor]
        dev = f"cuda:{self.index}"
        t = torch.zeros(3 * config.programs, dtype=torch.int64, device=dev)
        sync = torch.zeros(1, dtype=torch.int32, device=dev)
        kernel = stream_load_timed_kernel[(config.programs,)]
        rows = config.rows(self.facts.compute_units)
        load = flavour_code(config.load_flavour, self.facts.vendor)

        def launch():
            sync.zero_()
            return kernel(x, y, t, sync, stream_elems, warm_iters, load_iters, rows, BLOCK_SIZE=config.block_size,
                          LOAD=load, CLOCK=clock["code"], ROW_BY_SM=config.row_by_sm, INTERLEAVE=config.interleave,
                          MAX_SPINS=MAX_SPINS, num_warps=config.num_warps, num_stages=config.num_stages)

        # once per kernel variant: compile with one program (its barrier cannot wait) and read
        # the registers and shared memory it needs; then check that this grid fits in one wave
        key = ("device", config.block_size, config.num_warps, config.num_stages, load, config.row_by_sm,
               config.interleave)
        if key not in self._timed_resources:
            compiled = self._guarded(lambda: self._timed_compile(
                key, lambda: kernel_one(x, y, t, sync, stream_elems, rows, config, load, clock)))
            self._timed_resources[key] = kernel_resources(compiled, config.num_warps)
        per_cu = check_single_wave(self.facts, config.programs, self._timed_resources[key])

        def run() -> list:
            readings = []
            if self.facts.vendor == "nvidia" and (config.carveout_kib is not None or self._carveouts.held_any()):
                # an untimed launch names the function this launch runs, so that its carveout is
                # the one asked for (or the driver's again) before the timed ones
                self._carveouts.apply(launch(), self._carveout_pct(config.carveout_kib))
            for _ in range(repeats):
                launch()
                readings.append(t.view(config.programs, 3).cpu().numpy().astype(np.float64))
            return readings

        readings = self._guarded(run)
        tick = clock["ns_per_tick"]
        longest = np.array([(r[:, 1] - r[:, 0]).max() * tick for r in readings])
        spread = np.array([np.ptp(r[:, 0]) * tick for r in readings])
        gave_up = int(sum((r[:, 2] >= MAX_SPINS).sum() for r in readings))
        return ClockTiming(longest, spread, per_cu, clock["name"], gave_up)

    def check_single_wave(self, config: LaunchConfig) -> int:
        """Compile the timed kernel for ``config`` (one program) and check that its grid fits in
        one wave; raises NotOneWaveError before any measurement if it does not."""
        from detect_caches.measure.kernel_meta import stream_elems_for
        from detect_caches.measure.gpu.kernel import stream_load_timed_kernel  # noqa: F401  (compiled below)
        torch = self.torch
        elems = stream_elems_for(4096)
        x, y = self._buffers(config, elems)
        clock = DEVICE_CLOCKS[self.facts.vendor]
        dev = f"cuda:{self.index}"
        t = torch.zeros(3 * config.programs, dtype=torch.int64, device=dev)
        sync = torch.zeros(1, dtype=torch.int32, device=dev)
        load = flavour_code(config.load_flavour, self.facts.vendor)
        key = ("device", config.block_size, config.num_warps, config.num_stages, load, config.row_by_sm,
               config.interleave)
        if key not in self._timed_resources:
            rows = config.rows(self.facts.compute_units)
            compiled = self._guarded(lambda: self._timed_compile(
                key, lambda: kernel_one(x, y, t, sync, elems, rows, config, load, clock)))
            self._timed_resources[key] = kernel_resources(compiled, config.num_warps)
        return check_single_wave(self.facts, config.programs, self._timed_resources[key])
