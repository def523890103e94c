"""The real device: torch for memory and events, Triton for the kernel, NVML/amdsmi for clocks."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from measure.device import DeviceFacts, xcds_for
from measure.errors import DeviceError
from measure.kernel_meta import ELEM_BYTES, flavour_code
from measure.launch import LaunchConfig
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
        driver=(torch.version.hip or "") if vendor == "amd" else "")
    if vendor == "amd":
        facts.xcds = xcds_for(arch, facts.compute_units)
    clocks.fill_facts(facts)
    return facts


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
        self._kernel = None

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

    def _launcher(self):
        if self._kernel is None:
            from measure.kernel import stream_load_kernel
            self._kernel = stream_load_kernel
        return self._kernel

    def time_launches(self, config: LaunchConfig, stream_elems: int,
                      load_iters: Sequence[int], repeats: int) -> np.ndarray:
        torch = self.torch
        rows = config.rows(self.facts.compute_units)
        need = rows * stream_elems
        self.reserve(need * ELEM_BYTES)
        y_elems = config.programs * config.block_size
        if self._y is None or self._y.numel() < y_elems:
            self._y = torch.empty(y_elems, dtype=torch.float32, device=f"cuda:{self.index}")
        kernel = self._launcher()[(config.programs,)]
        load = flavour_code(config.load_flavour, self.facts.vendor)

        def launch(iters: int) -> None:
            kernel(self._x, self._y, stream_elems, iters, rows, BLOCK_SIZE=config.block_size,
                   LOAD=load, ROW_BY_SM=config.row_by_sm, num_warps=config.num_warps,
                   num_stages=config.num_stages)

        try:
            launch(max(load_iters))  # warm-up: compile once, fill the caches
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
        except torch.OutOfMemoryError:
            raise DeviceError("the GPU ran out of memory during a launch") from None
        except RuntimeError as exc:
            raise DeviceError(f"a kernel launch failed: {str(exc).splitlines()[0]}") from None
        ms = np.array([s.elapsed_time(e) for s, e in events], dtype=float)
        return ms.reshape(repeats, len(load_iters)).T

    def sm_clock_mhz(self) -> float | None:
        return self._clock.sm_clock_mhz()

    def close(self) -> None:
        self._x = self._y = None
        self._clock.close()

