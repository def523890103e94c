"""The real device: torch for memory and events, Triton for the kernel, NVML/amdsmi for clocks.
Bandwidth launches are timed here; the chase (chase_timer) and in-kernel timing (in_kernel) are
mixins of their own, the device's facts come from facts."""
from __future__ import annotations

import os
import threading
import time
from typing import Sequence

import numpy as np

from detect_caches.errors import DeviceError
from detect_caches.measure.gpu import clocks
from detect_caches.measure.gpu.chase_timer import ChaseTimer
from detect_caches.measure.gpu.facts import _torch, kernel_resources, read_device_facts
from detect_caches.measure.gpu.in_kernel import InKernelTimer
from detect_caches.measure.kernel_meta import ELEM_BYTES, flavour_code
from detect_caches.measure.launch import LaunchConfig
from detect_caches.measure.occupancy import KernelResources


class TritonGPU(InKernelTimer, ChaseTimer):
    """Times the Triton kernel on one GPU. One buffer, allocated once, serves every point."""

    def __init__(self, index: int = 0):
        from detect_caches.measure.gpu.early import EarlyStart
        self._early = EarlyStart()          # Triton's cache key and NVML, beside torch's import
        t0 = time.perf_counter()
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
        self.startup_seconds = {"Triton's import (before torch's)": self._early.import_seconds,
                                "import torch": round(t1 - t0, 3), "CUDA context": round(t2 - t1, 3),
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
        from detect_caches.measure.gpu.carveout_setter import CarveoutSetter
        self._carveouts = CarveoutSetter()
        self._chase_kernels: dict[tuple, object] = {}   # compiled chase kernels, for their carveout
        self._launched: dict[tuple, object] = {}        # compiled kernels by variant, for their metadata

    def precompile(self, configs: list[LaunchConfig], *, chase: bool) -> None:
        """Compile every kernel variant the run will launch, in the background: Triton compiles a
        variant on its first launch, a run launches about 20 (what that costs on a cold cache:
        BENCHMARKS.md), and the compiler's work overlaps the measuring here, in a pool of
        threads (Triton's AsyncCompileMode where it has one). A failure only means the first
        launches compile as before. DETECT_CACHES_PRECOMPILE=0 turns it off."""
        if os.environ.get("DETECT_CACHES_PRECOMPILE", "1") == "0":
            return
        from detect_caches.measure.gpu.precompile import precompile_kernels
        threading.Thread(target=precompile_kernels, args=(self, list(configs), chase), daemon=True,
                         name="detect-caches-precompile").start()

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
        from detect_caches.measure.gpu.kernel import stream_load_kernel
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
        return None if compiled is None else kernel_resources(compiled, config.num_warps).shared_bytes

    def _carveout_pct(self, carveout_kib: int | None) -> int | None:
        if carveout_kib is None:
            return None
        from detect_caches.carveout import preference_pct
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
        from detect_caches.measure.gpu.kernel import strided_load_kernel
        from detect_caches.measure.transfer import BLOCK, NUM_WARPS
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

    def sm_clock_mhz(self) -> float | None:
        return self._clock.sm_clock_mhz()

    def other_processes(self) -> int | None:
        return self._clock.other_processes()

    def close(self) -> None:
        self._x = self._y = self._chain = self._chain_order = None
        self._clock.close()

