"""Kernels compiled ahead, beside the measuring (TritonGPU.precompile says why)."""
from __future__ import annotations

import os
import time

from detect_caches.measure.kernel_meta import DEVICE_CLOCKS, flavour_code
from detect_caches.measure.launch import LaunchConfig


def precompile_kernels(gpu, configs: list[LaunchConfig], chase: bool) -> None:
    """Compile (or load from Triton's cache) the kernel variants of ``configs`` and, with
    ``chase``, the latency and transfer-unit kernels, in a pool of threads; the time taken and
    any failure are left on ``gpu`` (a TritonGPU)."""
    from concurrent.futures import ThreadPoolExecutor
    t = time.perf_counter()
    gpu._early.wait()
    try:
        from detect_caches.measure.gpu.chase import chase_kernel
        from detect_caches.measure.gpu.kernel import stream_load_kernel
        torch = gpu.torch
        torch.cuda.set_device(gpu.index)      # the current device is per thread
        dev = f"cuda:{gpu.index}"
        x = torch.empty(4096, dtype=torch.float32, device=dev)
        y = torch.empty(4096, dtype=torch.float32, device=dev)
        out = torch.zeros(3, dtype=torch.int64, device=dev)
        cus = gpu.facts.compute_units
        jobs, seen = [], set()
        for cfg in configs:   # arguments of the same types and divisibility as the launches
            load = flavour_code(cfg.load_flavour, gpu.facts.vendor)
            key = (cfg.block_size, cfg.num_warps, cfg.num_stages, load, cfg.row_by_sm, cfg.interleave,
                   cfg.rows(cus) % 16 == 0)
            if key in seen:
                continue
            seen.add(key)
            jobs.append(lambda cfg=cfg, load=load: stream_load_kernel.warmup(
                x, y, 4096, 1, cfg.rows(cus), BLOCK_SIZE=cfg.block_size, LOAD=load, ROW_BY_SM=cfg.row_by_sm,
                INTERLEAVE=cfg.interleave, num_warps=cfg.num_warps, num_stages=cfg.num_stages, grid=(1,)))
        if chase:   # the transfer-unit probe runs with the latency probes, last
            from detect_caches.measure.gpu.kernel import strided_load_kernel
            from detect_caches.measure.transfer import BLOCK, NUM_WARPS
            l2 = flavour_code("l2only", gpu.facts.vendor)
            jobs.append(lambda: strided_load_kernel.warmup(x, y, 4095, 1, 2, BLOCK=BLOCK, LOAD=l2,
                                                           num_warps=NUM_WARPS, grid=(1,)))
        if chase:   # the latency sweep comes before the peak probes
            clock = DEVICE_CLOCKS[gpu.facts.vendor]["code"]
            asm = 1 if gpu.facts.vendor == "nvidia" else 0
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
        gpu.precompile_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    gpu.precompile_seconds = round(time.perf_counter() - t, 3)
