"""Launch parameters of one sweep and the timing interface every device (real or simulated) offers."""
from __future__ import annotations

from dataclasses import dataclass, asdict
from typing import Protocol, Sequence

import numpy as np

from detect_caches.device import DeviceFacts
from detect_caches.measure.kernel_meta import FLAVOURS, check_block_size


@dataclass(frozen=True)
class LaunchConfig:
    """How the kernel is launched for one sweep. ``programs`` is the 1-D grid size."""

    sweep: str
    programs: int
    block_size: int = 1024
    num_warps: int = 4
    num_stages: int = 1
    load_flavour: str = "cached"
    row_by_sm: bool = False   # programs of one SM share its row (NVIDIA private sweep)
    interleave: bool = False  # rows interleaved chunk by chunk (all programs read neighbouring addresses)
    row_share: int = 1        # programs per row in the shared sweep (row = program % rows)
    carveout_kib: int | None = None   # shared memory carved out of the L1 (NVIDIA); None: the driver's choice

    def __post_init__(self) -> None:
        check_block_size(self.block_size, internal=True)
        if self.programs <= 0:
            raise ValueError(f"the grid needs at least one program, got {self.programs}")
        if self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"num_warps must be a power of two from 1 to 32, got {self.num_warps}")
        if self.num_stages < 1:
            raise ValueError(f"num_stages must be at least 1, got {self.num_stages}")
        if self.row_share < 1 or self.programs % self.row_share:
            raise ValueError(f"row_share must divide the {self.programs} programs, got {self.row_share}")
        if self.load_flavour not in FLAVOURS:
            raise ValueError(f"load flavour must be one of {', '.join(FLAVOURS)}, got {self.load_flavour!r}")

    def rows(self, compute_units: int) -> int:
        """Rows of the input buffer: one per row_share programs, or two per SM id (ids may skip
        numbers)."""
        return 2 * compute_units if self.row_by_sm else self.programs // self.row_share

    def buffer_elems(self, compute_units: int, stream_elems: int) -> int:
        """float32 elements the input buffer needs (an interleaved tail chunk takes a whole slot)."""
        if self.interleave:
            return self.rows(compute_units) * -(-stream_elems // self.block_size) * self.block_size
        return self.rows(compute_units) * stream_elems

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ClockTiming:
    """One in-kernel-timed launch series: per launch, the longest program's timed phase and how
    far apart the programs started (ns). Programs that started a whole phase apart did not run
    in one wave."""

    longest_ns: np.ndarray        # shape (repeats,)
    start_spread_ns: np.ndarray   # shape (repeats,): max - min of the programs' start readings
    programs_per_cu: int          # resident programs per SM/CU the single-wave check allowed
    clock: str                    # what was read, and its tick
    barrier_gave_up: int = 0      # programs whose grid barrier timed out (not one wave after all)


@dataclass(frozen=True)
class ChaseTiming:
    """One pointer-chase measurement: launch times per hop count (ms, shape (len(hops), repeats),
    for the load-iteration regression), and the in-kernel readings of the last launch's timed
    hops (SM cycles, and ns from a device timer)."""

    hops: tuple[int, ...]
    event_ms: np.ndarray
    cycles: float
    clock_ns: float


class TimingDevice(Protocol):
    """What a sweep needs from a device. `measure.gpu.TritonGPU` and
    `measure.simulated.SimulatedGPU` both implement it."""

    facts: DeviceFacts

    def max_working_set_bytes(self) -> int:
        """The largest buffer the device can stream from (bytes)."""

    def time_launches(self, config: LaunchConfig, stream_elems: int,
                      load_iters: Sequence[int], repeats: int) -> np.ndarray:
        """Kernel times in ms, shape (len(load_iters), repeats), after one warm-up launch."""

    def time_in_kernel(self, config: LaunchConfig, stream_elems: int, warm_iters: int,
                       load_iters: int, repeats: int) -> ClockTiming:
        """In-kernel timing: warm-up passes, then ``load_iters`` passes timed by a device clock."""

    def time_chase(self, spec, warm_hops: int, hops: Sequence[int], repeats: int) -> ChaseTiming:
        """Pointer chase over the chain ``spec`` (measure.chains.ChainSpec): per launch, ``warm_hops``
        untimed hops and then each count of ``hops`` timed ones."""

    def time_strided(self, spec, load_iters: Sequence[int], repeats: int) -> np.ndarray:
        """The transfer-unit probe over ``spec`` (measure.transfer.StrideSpec): ms per launch,
        shape (len(load_iters), repeats), after one warm-up launch."""

    def sm_clock_mhz(self) -> float | None:
        """The SM/CU clock now, where it can be read."""

    def other_processes(self) -> int | None:
        """Other processes using the device now, where it can be read."""
