"""What torch and NVML say about a GPU: how many there are, and each one's facts. The only
place torch is first imported, so that a missing torch is one sentence."""
from __future__ import annotations

import os
import socket

from detect_caches.device import DeviceFacts, xcds_for
from detect_caches.errors import DeviceError
from detect_caches.measure.gpu import clocks
from detect_caches.measure.occupancy import KernelResources


def _torch():
    try:
        import torch
    except ImportError:
        raise DeviceError("torch is not installed: measuring a GPU needs pip install 'detect-caches[gpu]' (ROCm: "
                          "torch from its own index first, see the README); --simulate and analyze run without "
                          "it") from None
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


def kernel_resources(compiled, num_warps: int) -> KernelResources:
    """Registers and shared memory of a compiled Triton kernel (loaded lazily by Triton)."""
    init = getattr(compiled, "_init_handles", None)
    if callable(init):
        init()
    regs = getattr(compiled, "n_regs", None)
    shared = getattr(getattr(compiled, "metadata", None), "shared", 0) or 0
    return KernelResources(num_warps, int(regs) if regs else None, int(shared))
