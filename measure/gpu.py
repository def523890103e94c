"""The real device: torch for memory and events, Triton for the kernel, NVML/amdsmi for clocks."""
from __future__ import annotations

import socket
import time
from typing import Sequence

import numpy as np

from measure.device import DeviceFacts, xcds_for
from measure.errors import DeviceError
from measure.kernel_meta import DEVICE_CLOCKS, ELEM_BYTES, flavour_code
from measure.launch import ClockTiming, LaunchConfig
from measure.occupancy import KernelResources, check_single_wave
from measure import clocks


def _torch():
    try:
        import torch
    except ImportError:
        raise DeviceError("torch is not installed; measure on a GPU machine, or use "
                          "--simulate h200 or `detect-caches analyze` here") from None
    return torch


def gpu_count() -> int:
    torch = _torch()
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def read_device_facts(index: int) -> DeviceFacts:
    torch = _torch()
    props = torch.cuda.get_device_properties(index)
    vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    if vendor == "amd":
        arch = getattr(props, "gcnArchName", "").split(":")[0]
    else:
        arch = f"sm_{props.major}{props.minor}"
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = ""
    facts = DeviceFacts(
        name=props.name, vendor=vendor, arch=arch, compute_units=props.multi_processor_count,
        l2_bytes_reported=int(getattr(props, "L2_cache_size", 0)) or None,
        total_memory_bytes=int(props.total_memory), torch=torch.__version__,
        triton=triton_version, index=index, uuid=str(getattr(props, "uuid", "") or ""),
        driver=(torch.version.hip or "") if vendor == "amd" else "",
        threads_per_cu=getattr(props, "max_threads_per_multi_processor", None),
        registers_per_cu=getattr(props, "regs_per_multiprocessor", None),
        shared_bytes_per_cu=getattr(props, "shared_memory_per_multiprocessor", None),
        warp_size=int(getattr(props, "warp_size", 64 if vendor == "amd" else 32)))
    if vendor == "amd":
        facts.xcds = xcds_for(arch, facts.compute_units)
    facts.host = socket.gethostname()
    clocks.fill_facts(facts)
    return facts


def _resources(compiled, num_warps: int) -> KernelResources:
    """Registers and shared memory of a compiled Triton kernel (loaded lazily by Triton)."""
    init = getattr(compiled, "_init_handles", None)
    if callable(init):
        init()
    regs = getattr(compiled, "n_regs", None)
    shared = getattr(getattr(compiled, "metadata", None), "shared", 0) or 0
    return KernelResources(num_warps, int(regs) if regs else None, int(shared))


MAX_SPINS = 1 << 20   # grid-barrier polls before a program gives up (about a second)


def kernel_one(x, y, t, sync, stream_elems: int, rows: int, config: LaunchConfig, load: int, clock: dict):
    """One program of the timed kernel, MAX_SPINS as in the real launches: compiles the same
    binary and returns it, without waiting on a barrier that other programs would have to reach."""
    from measure.kernel import stream_load_timed_kernel
    return stream_load_timed_kernel[(1,)](x, y, t, sync, stream_elems, 0, 1, rows, BLOCK_SIZE=config.block_size,
                                          LOAD=load, CLOCK=clock["code"], ROW_BY_SM=config.row_by_sm,
                                          INTERLEAVE=config.interleave, MAX_SPINS=MAX_SPINS,
                                          num_warps=config.num_warps, num_stages=config.num_stages)


class TritonGPU:
    """Times the Triton kernel on one GPU. One buffer, allocated once, serves every point."""

    def __init__(self, index: int = 0):
        torch = _torch()
        if not torch.cuda.is_available():
            raise DeviceError("no GPU is visible to torch; use --simulate h200 to try the tool, "
                              "or `detect-caches analyze` on recorded measurements")
        count = torch.cuda.device_count()
        if not 0 <= index < count:
            raise DeviceError(f"GPU {index} does not exist; this machine has {count} "
                              f"GPU(s), numbered 0 to {count - 1}")
        self.torch = torch
        self.index = index
        torch.cuda.set_device(index)
        self.facts = read_device_facts(index)
        self._clock = clocks.ClockReader(self.facts)
        self._x = None
        self._y = None
        self._compiled: set[tuple] = set()
        self._timed_resources: dict[tuple, KernelResources] = {}
        self.compile_seconds = 0.0   # first launches of each kernel variant (compile or cache load)

    def max_working_set_bytes(self) -> int:
        free, _total = self.torch.cuda.mem_get_info(self.index)
        # leave room for the output, the allocator and whatever else runs on the card
        return int(free * 0.6)

    def reserve(self, nbytes: int) -> None:
        """Allocate the input buffer once, at the largest size a sweep will need."""
        torch = self.torch
        elems = -(-nbytes // ELEM_BYTES)
        if self._x is not None and self._x.numel() >= elems:
            return
        self._x = None
        try:
            self._x = torch.rand(elems, dtype=torch.float32, device=f"cuda:{self.index}")
        except torch.OutOfMemoryError:
            raise DeviceError(f"could not allocate {nbytes / 2**30:.1f} GiB on GPU {self.index}; "
                              "free memory or lower --max-working-set") from None

    def _buffers(self, config: LaunchConfig, stream_elems: int):
        torch = self.torch
        self.reserve(config.buffer_elems(self.facts.compute_units, stream_elems) * ELEM_BYTES)
        y_elems = config.programs * config.block_size
        if self._y is None or self._y.numel() < y_elems:
            self._y = torch.empty(y_elems, dtype=torch.float32, device=f"cuda:{self.index}")
        return self._x, self._y

    def _timed_compile(self, key: tuple, first_launch):
        """Run ``first_launch``; the first time for a kernel variant, count its time as compiling
        (Triton compiles, or loads from its cache, on the first launch)."""
        if key in self._compiled:
            return first_launch()
        t = time.perf_counter()
        out = first_launch()
        self.torch.cuda.synchronize()
        self.compile_seconds += time.perf_counter() - t
        self._compiled.add(key)
        return out

    def _guarded(self, body):
        """Run launches, turning torch's failures into one-line DeviceErrors."""
        torch = self.torch
        try:
            return body()
        except torch.OutOfMemoryError:
            raise DeviceError("the GPU ran out of memory during a launch") from None
        except RuntimeError as exc:
            raise DeviceError(f"a kernel launch failed: {str(exc).splitlines()[0]}") from None

    def time_launches(self, config: LaunchConfig, stream_elems: int,
                      load_iters: Sequence[int], repeats: int) -> np.ndarray:
        from measure.kernel import stream_load_kernel
        torch = self.torch
        x, y = self._buffers(config, stream_elems)
        kernel = stream_load_kernel[(config.programs,)]
        rows = config.rows(self.facts.compute_units)
        load = flavour_code(config.load_flavour, self.facts.vendor)

        def launch(iters: int) -> None:
            kernel(x, y, stream_elems, iters, rows, BLOCK_SIZE=config.block_size, LOAD=load,
                   ROW_BY_SM=config.row_by_sm, INTERLEAVE=config.interleave,
                   num_warps=config.num_warps, num_stages=config.num_stages)

        def run() -> list:
            self._timed_compile(("events", config.block_size, config.num_warps, config.num_stages, load,
                                 config.row_by_sm, config.interleave), lambda: launch(max(load_iters)))
            launch(max(load_iters))  # warm-up: fill the caches
            events = []
            for _ in range(repeats):
                for iters in load_iters:
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    launch(iters)
                    end.record()
                    events.append((start, end))
            torch.cuda.synchronize()
            return events

        events = self._guarded(run)
        ms = np.array([s.elapsed_time(e) for s, e in events], dtype=float)
        return ms.reshape(repeats, len(load_iters)).T

    def time_in_kernel(self, config: LaunchConfig, stream_elems: int, warm_iters: int,
                       load_iters: int, repeats: int) -> ClockTiming:
        from measure.kernel import stream_load_timed_kernel
        torch = self.torch
        x, y = self._buffers(config, stream_elems)
        clock = DEVICE_CLOCKS[self.facts.vendor]
        dev = f"cuda:{self.index}"
        t = torch.zeros(3 * config.programs, dtype=torch.int64, device=dev)
        sync = torch.zeros(1, dtype=torch.int32, device=dev)
        kernel = stream_load_timed_kernel[(config.programs,)]
        rows = config.rows(self.facts.compute_units)
        load = flavour_code(config.load_flavour, self.facts.vendor)

        def launch() -> None:
            sync.zero_()
            kernel(x, y, t, sync, stream_elems, warm_iters, load_iters, rows, BLOCK_SIZE=config.block_size,
                   LOAD=load, CLOCK=clock["code"], ROW_BY_SM=config.row_by_sm, INTERLEAVE=config.interleave,
                   MAX_SPINS=MAX_SPINS, num_warps=config.num_warps, num_stages=config.num_stages)

        # once per kernel variant: compile with one program (its barrier cannot wait) and read
        # the registers and shared memory it needs; then check that this grid fits in one wave
        key = ("device", config.block_size, config.num_warps, config.num_stages, load, config.row_by_sm,
               config.interleave)
        if key not in self._timed_resources:
            compiled = self._guarded(lambda: self._timed_compile(
                key, lambda: kernel_one(x, y, t, sync, stream_elems, rows, config, load, clock)))
            self._timed_resources[key] = _resources(compiled, config.num_warps)
        per_cu = check_single_wave(self.facts, config.programs, self._timed_resources[key])

        def run() -> list:
            readings = []
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

    def sm_clock_mhz(self) -> float | None:
        return self._clock.sm_clock_mhz()

    def other_processes(self) -> int | None:
        return self._clock.other_processes()

    def close(self) -> None:
        self._x = self._y = None
        self._clock.close()

