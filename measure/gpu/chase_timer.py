"""The latency chase on a real GPU: the chain written into a device buffer, the L2 flushed before
a cold walk, and each walk timed by CUDA events and the in-kernel clock."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from detect_caches.errors import DeviceError
from detect_caches.measure.kernel_meta import DEVICE_CLOCKS
from detect_caches.measure.launch import ChaseTiming


class ChaseTimer:
    """TritonGPU's pointer-chase timing (a mixin: it uses the GPU's buffers and guards)."""

    def _build_chain(self, spec) -> None:
        """Write ``spec``'s chain into the chain buffer (on the GPU: a random cycle from torch's
        seeded generator, or address order), unless it holds it already."""
        from detect_caches.measure.chains import ELEMENT_BYTES
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
        from detect_caches.measure.gpu.chase import chase_kernel
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
