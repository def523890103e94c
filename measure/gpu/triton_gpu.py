"""The real device: torch for memory and events, Triton for the kernel, NVML/amdsmi for clocks."""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Sequence

import numpy as np

from measure.device import DeviceFacts, xcds_for
from measure.errors import DeviceError
from measure.kernel_meta import DEVICE_CLOCKS, ELEM_BYTES, flavour_code
from measure.launch import ChaseTiming, ClockTiming, LaunchConfig
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
    """GPUs this process may use: NVML's count where CUDA_VISIBLE_DEVICES does not narrow them
    (no torch import), else torch's."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        n = clocks.nvidia_gpu_count()
        if n:
            return n
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
    facts.environment = {"torch": torch.__version__, "triton": triton_version}
    runtime = torch.version.hip if vendor == "amd" else torch.version.cuda
    if runtime:
        facts.environment["hip_runtime" if vendor == "amd" else "cuda_runtime"] = str(runtime)
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
        from measure.early import EarlyStart
        t0 = time.perf_counter()
        self._early = EarlyStart()          # Triton's cache key and NVML, beside torch's import
        torch = _torch()
        t1 = time.perf_counter()
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
        torch.cuda.init()
        torch.empty(1, device=f"cuda:{index}")     # the context now, so that it is timed here
        t2 = time.perf_counter()
        self.facts = read_device_facts(index)
        # where a cold start goes (the benchmark reports it): seconds
        self.startup_seconds = {"import torch": round(t1 - t0, 3), "CUDA context": round(t2 - t1, 3),
                                "device facts (NVML)": round(time.perf_counter() - t2, 3)}
        self.precompile_seconds: float | None = None
        self.precompile_error = ""
        self._clock = clocks.ClockReader(self.facts)
        self._x = None
        self._y = None
        self._compiled: set[tuple] = set()
        self._timed_resources: dict[tuple, KernelResources] = {}
        self._chain = None          # int64 buffer holding the latency chase's chain
        self._chain_spec = None     # the chain it holds now, and its visiting order
        self._chain_order = None
        self._chain_pos = 0         # partial walks: where along the cycle the next one starts
        self.compile_seconds = 0.0   # first launches of each kernel variant (compile or cache load)
        from measure.carveout import CarveoutSetter
        self._carveouts = CarveoutSetter()
        self._chase_kernels: dict[tuple, object] = {}   # compiled chase kernels, for their carveout
        self._launched: dict[tuple, object] = {}        # compiled kernels by variant, for their metadata

    def precompile(self, configs: list[LaunchConfig], *, chase: bool) -> None:
        """Compile every kernel variant the run will launch, in the background: Triton compiles a
        variant on its first launch (0.1-0.2 s each on an H200 host when its cache is cold, and
        a run launches about 20), and the compiler's work overlaps the measuring here, in a pool
        of threads (Triton's AsyncCompileMode where it has one). A failure only means the first
        launches compile as before. DETECT_CACHES_PRECOMPILE=0 turns it off."""
        if os.environ.get("DETECT_CACHES_PRECOMPILE", "1") == "0":
            return
        threading.Thread(target=self._precompile, args=(list(configs), chase), daemon=True,
                         name="detect-caches-precompile").start()

    def _precompile(self, configs: list[LaunchConfig], chase: bool) -> None:
        from concurrent.futures import ThreadPoolExecutor
        t = time.perf_counter()
        self._early.wait()
        try:
            from measure.chase import chase_kernel
            from measure.kernel import stream_load_kernel
            torch = self.torch
            torch.cuda.set_device(self.index)      # the current device is per thread
            dev = f"cuda:{self.index}"
            x = torch.empty(4096, dtype=torch.float32, device=dev)
            y = torch.empty(4096, dtype=torch.float32, device=dev)
            out = torch.zeros(3, dtype=torch.int64, device=dev)
            cus = self.facts.compute_units
            jobs, seen = [], set()
            for cfg in configs:   # arguments of the same types and divisibility as the launches
                load = flavour_code(cfg.load_flavour, self.facts.vendor)
                key = (cfg.block_size, cfg.num_warps, cfg.num_stages, load, cfg.row_by_sm, cfg.interleave,
                       cfg.rows(cus) % 16 == 0)
                if key in seen:
                    continue
                seen.add(key)
                jobs.append(lambda cfg=cfg, load=load: stream_load_kernel.warmup(
                    x, y, 4096, 1, cfg.rows(cus), BLOCK_SIZE=cfg.block_size, LOAD=load, ROW_BY_SM=cfg.row_by_sm,
                    INTERLEAVE=cfg.interleave, num_warps=cfg.num_warps, num_stages=cfg.num_stages, grid=(1,)))
            if chase:   # the transfer-unit probe runs with the latency probes, last
                from measure.kernel import strided_load_kernel
                from measure.transfer import BLOCK, NUM_WARPS
                l2 = flavour_code("l2only", self.facts.vendor)
                jobs.append(lambda: strided_load_kernel.warmup(x, y, 4095, 1, 2, BLOCK=BLOCK, LOAD=l2,
                                                               num_warps=NUM_WARPS, grid=(1,)))
            if chase:   # the latency sweep comes before the peak probes
                clock = DEVICE_CLOCKS[self.facts.vendor]["code"]
                asm = 1 if self.facts.vendor == "nvidia" else 0
                jobs[1:1] = [lambda l2=l2: chase_kernel.warmup(1 << 40, out, 16, 16, L2ONLY=l2, CLOCK=clock,
                                                               ASM=asm, num_warps=1, grid=(1,)) for l2 in (False, True)]
            try:
                from triton.runtime._async_compile import AsyncCompileMode
            except ImportError:
                AsyncCompileMode = None
            with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) // 2))) as pool:
                if AsyncCompileMode is not None:
                    with AsyncCompileMode(pool):
                        for job in jobs:
                            job()
                else:
                    list(pool.map(lambda job: job(), jobs))
        except Exception as exc:      # the launches compile what is missing, as without this
            self.precompile_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.precompile_seconds = round(time.perf_counter() - t, 3)

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
        self._wait_early()
        t = time.perf_counter()
        out = first_launch()
        self.torch.cuda.synchronize()
        self.compile_seconds += time.perf_counter() - t
        self._compiled.add(key)
        return out

    def _wait_early(self) -> None:
        """Let the early thread finish Triton's cache key before a launch needs it (measure.early)."""
        if self._early.wait() and "Triton cache key, NVML (in a thread)" not in self.startup_seconds:
            self.startup_seconds["Triton cache key, NVML (in a thread)"] = self._early.seconds

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
        x, y = self._buffers(config, stream_elems)
        kernel = stream_load_kernel[(config.programs,)]
        rows = config.rows(self.facts.compute_units)
        load = flavour_code(config.load_flavour, self.facts.vendor)

        def launch(iters: int):
            return kernel(x, y, stream_elems, iters, rows, BLOCK_SIZE=config.block_size, LOAD=load,
                          ROW_BY_SM=config.row_by_sm, INTERLEAVE=config.interleave,
                          num_warps=config.num_warps, num_stages=config.num_stages)

        return self._event_times(self._events_key(config), launch, load_iters, repeats,
                                 self._carveout_pct(config.carveout_kib))

    def _events_key(self, config: LaunchConfig) -> tuple:
        load = flavour_code(config.load_flavour, self.facts.vendor)
        return ("events", config.block_size, config.num_warps, config.num_stages, load, config.row_by_sm,
                config.interleave)

    def kernel_shared_bytes(self, config: LaunchConfig) -> int | None:
        """Shared memory per block of the kernel ``config`` launched (its compiled metadata), or
        None before its first launch."""
        load = flavour_code(config.load_flavour, self.facts.vendor)
        timed = self._timed_resources.get(("device", config.block_size, config.num_warps, config.num_stages, load,
                                           config.row_by_sm, config.interleave))
        if timed is not None:
            return timed.shared_bytes
        compiled = self._launched.get(self._events_key(config))
        return None if compiled is None else _resources(compiled, config.num_warps).shared_bytes

    def _carveout_pct(self, carveout_kib: int | None) -> int | None:
        if carveout_kib is None:
            return None
        from measure.carveout import preference_pct
        return preference_pct(carveout_kib, self.facts)

    def _event_times(self, key: tuple, launch, load_iters: Sequence[int], repeats: int,
                     carveout_pct: int | None = None) -> np.ndarray:
        """ms per launch of ``launch(iters)`` by CUDA events, shape (len(load_iters), repeats),
        after the first launch of the variant ``key`` (timed as compiling) and one warm-up
        launch that fills the caches under the carveout asked (None: the driver's choice)."""
        torch = self.torch

        def run() -> list:
            compiled = self._timed_compile(key, lambda: launch(max(load_iters)))
            self._launched.setdefault(key, compiled)
            if self.facts.vendor == "nvidia":
                self._carveouts.apply(compiled, carveout_pct)
            launch(max(load_iters))
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

    def time_strided(self, spec, load_iters: Sequence[int], repeats: int) -> np.ndarray:
        """The transfer-unit probe (measure.transfer): ms per launch, shape (len(load_iters),
        repeats), after one warm-up launch that loads the set into the level."""
        from measure.kernel import strided_load_kernel
        from measure.transfer import BLOCK, NUM_WARPS
        torch = self.torch
        self.reserve(spec.n_slots * spec.stride_bytes)
        x = self._x
        if self._y is None or self._y.numel() < spec.programs * BLOCK:
            self._y = torch.empty(spec.programs * BLOCK, dtype=torch.float32, device=f"cuda:{self.index}")
        y = self._y
        load = flavour_code("l2only" if spec.l2only else "cached", self.facts.vendor)
        kernel = strided_load_kernel[(spec.programs,)]

        def launch(iters: int):
            return kernel(x, y, spec.slot_mask, iters, spec.stride_elems, BLOCK=BLOCK, LOAD=load,
                          num_warps=NUM_WARPS)
        return self._event_times(("strided", load), launch, load_iters, repeats)

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
            self._timed_resources[key] = _resources(compiled, config.num_warps)
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

    def _build_chain(self, spec) -> None:
        """Write ``spec``'s chain into the chain buffer (on the GPU: a random cycle from torch's
        seeded generator, or address order), unless it holds it already."""
        from measure.chains import ELEMENT_BYTES
        torch = self.torch
        if self._chain_spec == spec:
            return
        words = spec.span_bytes // ELEMENT_BYTES
        if self._chain is None or self._chain.numel() < words:
            self._chain = None
            try:
                self._chain = torch.zeros(words, dtype=torch.int64, device=f"cuda:{self.index}")
            except torch.OutOfMemoryError:
                raise DeviceError(f"could not allocate {spec.span_bytes / 2**20:.0f} MiB for the latency "
                                  f"chain on GPU {self.index}; free memory or use --no-latency") from None
        dev = self._chain.device
        if spec.sequential:
            order = torch.arange(spec.elements, device=dev, dtype=torch.int64)
        else:
            gen = torch.Generator(device=dev)
            gen.manual_seed(spec.seed)
            order = torch.randperm(spec.elements, generator=gen, device=dev, dtype=torch.int64)
        base = self._chain.data_ptr()
        stride = spec.slot_bytes // ELEMENT_BYTES
        self._chain[order * stride] = base + torch.roll(order, -1) * spec.slot_bytes
        self._chain_spec, self._chain_order, self._chain_pos = spec, order, 0

    def _flush_l2(self) -> None:
        """Read a buffer of 4x the largest cache, so no chain line written before stays cached."""
        torch = self.torch
        largest = max(self.facts.l2_bytes_reported or 64 << 20, self.facts.llc_bytes_reported or 0)
        words = min(4 * largest, 1 << 30) // 4
        if self._x is None or self._x.numel() < words:
            self.reserve(words * 4)
        float(self._x[:words].sum())

    def time_chase(self, spec, warm_hops: int, hops: Sequence[int], repeats: int) -> ChaseTiming:
        from measure.chase import chase_kernel
        torch = self.torch
        clock = DEVICE_CLOCKS[self.facts.vendor]["code"]
        dev = f"cuda:{self.index}"
        out = torch.zeros(3, dtype=torch.int64, device=dev)

        def launch(start: int, n_hops: int):
            return chase_kernel[(1,)](start, out, warm_hops, n_hops, L2ONLY=spec.l2only, CLOCK=clock,
                                      ASM=1 if self.facts.vendor == "nvidia" else 0, num_warps=1)

        def start_address(n_hops: int) -> int:
            if not spec.partial:
                return self._chain.data_ptr() + int(self._chain_order[0]) * spec.slot_bytes
            # a partial walk starts where no earlier walk of this chain has been: fresh lines
            pos = self._chain_pos % spec.elements
            self._chain_pos += warm_hops + n_hops
            return self._chain.data_ptr() + int(self._chain_order[pos]) * spec.slot_bytes

        def run():
            self._build_chain(spec)
            if spec.partial:
                self._flush_l2()
            key = ("chase", spec.l2only)
            if key not in self._chase_kernels:
                self._chase_kernels[key] = self._timed_compile(key, lambda: launch(start_address(16), 16))
            if self.facts.vendor == "nvidia":
                self._carveouts.apply(self._chase_kernels[key], self._carveout_pct(spec.carveout_kib))
            events = []
            for _ in range(repeats):
                for n_hops in hops:
                    start = start_address(n_hops)
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    launch(start, n_hops)
                    b.record()
                    events.append((a, b))
            torch.cuda.synchronize()
            return events, out.cpu().numpy()

        events, reading = self._guarded(run)
        ms = np.array([a.elapsed_time(b) for a, b in events], dtype=float).reshape(repeats, len(hops)).T
        tick = DEVICE_CLOCKS[self.facts.vendor]["ns_per_tick"]
        return ChaseTiming(tuple(hops), ms, float(reading[0]), float(reading[1]) * tick)

    def check_single_wave(self, config: LaunchConfig) -> int:
        """Compile the timed kernel for ``config`` (one program) and check that its grid fits in
        one wave; raises NotOneWaveError before any measurement if it does not."""
        from measure.kernel_meta import stream_elems_for
        from measure.kernel import stream_load_timed_kernel  # noqa: F401  (compiled below)
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
            self._timed_resources[key] = _resources(compiled, config.num_warps)
        return check_single_wave(self.facts, config.programs, self._timed_resources[key])

    def sm_clock_mhz(self) -> float | None:
        return self._clock.sm_clock_mhz()

    def other_processes(self) -> int | None:
        return self._clock.other_processes()

    def close(self) -> None:
        self._x = self._y = self._chain = self._chain_order = None
        self._clock.close()

