"""How many programs of one launch run at the same time: the single-wave check that in-kernel
timing needs. Torch-free; the limits come from DeviceFacts, the kernel's resources from the
compiled kernel (registers per thread, shared memory bytes)."""
from __future__ import annotations

from dataclasses import dataclass

from detect_caches.device import DeviceFacts
from detect_caches.errors import InputError

# Resident programs per SM/CU besides the thread, register and shared-memory limits: NVIDIA
# Volta..Hopper allow 32 blocks per SM (Turing 16); on AMD CDNA a CU holds at most 32 waves,
# so 32 work-groups is an upper bound. Where the bound is optimistic, the start-spread check
# on the recorded clocks (measure.device_timing) catches a second wave.
MAX_PROGRAMS_PER_CU = {"nvidia": 32, "amd": 32}
REGISTER_ALLOC_UNIT = {"nvidia": 256, "amd": 512}   # registers per warp/wave, allocation granule


class NotOneWaveError(InputError):
    """The grid does not fit in one wave, which in-kernel timing needs."""


@dataclass(frozen=True)
class KernelResources:
    """What one compiled kernel needs per program."""

    num_warps: int
    registers_per_thread: int | None = None
    shared_bytes: int = 0


def programs_per_cu(facts: DeviceFacts, res: KernelResources) -> int:
    """Programs that can be resident on one SM/CU at once (0 if not even one fits)."""
    limit = MAX_PROGRAMS_PER_CU.get(facts.vendor, 32)
    threads = res.num_warps * facts.warp_size
    if facts.threads_per_cu:
        limit = min(limit, facts.threads_per_cu // threads)
    if facts.registers_per_cu and res.registers_per_thread:
        unit = REGISTER_ALLOC_UNIT.get(facts.vendor, 256)
        per_warp = -(-res.registers_per_thread * facts.warp_size // unit) * unit
        limit = min(limit, facts.registers_per_cu // per_warp // res.num_warps)
    if facts.shared_bytes_per_cu and res.shared_bytes:
        limit = min(limit, facts.shared_bytes_per_cu // res.shared_bytes)
    return max(limit, 0)


def check_single_wave(facts: DeviceFacts, programs: int, res: KernelResources) -> int:
    """Raise InputError unless all ``programs`` are resident at once; return programs per CU."""
    per_cu = programs_per_cu(facts, res)
    fits = per_cu * facts.compute_units
    if programs > fits:
        regs = f", {res.registers_per_thread} registers/thread" if res.registers_per_thread else ""
        raise NotOneWaveError(
            f"device timing needs every program in one wave, but {programs} programs of "
            f"{res.num_warps} warps{regs} exceed the {fits} that fit at once on "
            f"{facts.compute_units} SMs/CUs ({per_cu} each); lower --grid-multiplier or use "
            f"--timing events")
    return per_cu
