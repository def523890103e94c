"""The shared-memory carveout: on NVIDIA sm_70 and later the L1 and shared memory are one array
per SM, and the driver carves shared memory out of it in a few fixed sizes, picking one per
launch from the kernel's shared memory, its blocks per SM and the function's preference. The
L1 a launch sees is what is left: array - carveout - a reserve. AMD's LDS is a separate array.

A preference is a percentage of the largest shared memory per SM; the driver takes the smallest
supported carveout at or above it (a hint: it never goes below what the resident blocks need).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from detect_caches.device import DeviceFacts
from detect_caches.errors import InputError
from detect_caches.grid import COARSE_BYTES

# Supported carveouts in KiB by compute capability (CUDA programming guide, per architecture).
SUPPORTED_KIB = {
    "sm_70": (0, 8, 16, 32, 64, 96), "sm_72": (0, 8, 16, 32, 64, 96), "sm_75": (32, 64),
    "sm_80": (0, 8, 16, 32, 64, 100, 132, 164), "sm_86": (0, 8, 16, 32, 64, 100),
    "sm_87": (0, 8, 16, 32, 64, 100, 132, 164), "sm_89": (0, 8, 16, 32, 64, 100),
    "sm_90": (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
}
# Newer parts follow Hopper's steps up to their own largest shared memory per SM.
STEPS_KIB = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
# The unified L1/shared-memory array per SM in KiB, as the CUDA programming guide documents it.
ARRAY_KIB = {"sm_70": 128, "sm_72": 128, "sm_75": 96, "sm_80": 192, "sm_86": 128, "sm_87": 192,
             "sm_89": 128, "sm_90": 256}
# An L1 read a little larger than array - carveout (no reserve, estimation error) still implies
# that carveout, not the step below it.
IMPLIED_SLACK = 0.01
RESERVED_PER_BLOCK = 1024          # shared memory the system keeps per resident block (sm_80 and later)


def supported_carveouts(facts: DeviceFacts) -> tuple[int, ...]:
    """The carveouts (KiB) the GPU offers; empty where shared memory is not carved from the L1
    (AMD, NVIDIA before sm_70, or a device whose largest shared memory is unknown)."""
    if facts.vendor != "nvidia" or not facts.arch.startswith("sm_"):
        return ()
    try:
        major = int(facts.arch[3:-1] or 0)
    except ValueError:
        return ()
    if major < 7:
        return ()
    known = SUPPORTED_KIB.get(facts.arch)
    if known:
        return known
    if not facts.shared_bytes_per_cu:
        return ()
    top = facts.shared_bytes_per_cu / 1024
    return tuple(c for c in STEPS_KIB if c <= top + 0.5)


def documented_array_kib(facts: DeviceFacts) -> int | None:
    """The unified L1/shared array per SM the CUDA guide documents (None: not documented or not
    carved: AMD, before sm_70)."""
    if not supported_carveouts(facts):
        return None
    return ARRAY_KIB.get(facts.arch)


def implied_carveout_kib(l1_bytes: float | None, facts: DeviceFacts) -> int | None:
    """The carveout a measured L1 implies: the largest supported carveout at or below the
    documented array less the L1 (the rest is the system's reserve)."""
    array = documented_array_kib(facts)
    if not array or not l1_bytes or l1_bytes <= 0:
        return None
    room = array * (1 + IMPLIED_SLACK) - l1_bytes / 1024
    fits = [c for c in supported_carveouts(facts) if c <= room]
    return max(fits) if fits else None


def reserved_per_block(facts: DeviceFacts) -> int:
    """Shared memory the system keeps per resident block (0 before sm_80)."""
    try:
        major = int(facts.arch[3:-1])
    except ValueError:
        return 0
    return RESERVED_PER_BLOCK if major >= 8 else 0


def preference_pct(carveout_kib: int, facts: DeviceFacts) -> int:
    """The preference (percent of the largest shared memory per SM) that asks for exactly
    ``carveout_kib``: the largest whole percentage still at or below it and above the next
    smaller supported carveout."""
    steps = supported_carveouts(facts)
    if carveout_kib not in steps:
        raise InputError(f"the GPU offers carveouts of {', '.join(map(str, steps))} KiB, not {carveout_kib}")
    top = max(steps)
    if carveout_kib == top:
        return 100
    if carveout_kib == 0:
        return 0
    pct = math.floor(100 * carveout_kib / top)
    below = max(c for c in steps if c < carveout_kib)
    if pct * top / 100 <= below:   # rounding down fell on the step below: one more percent
        pct += 1
    return pct


def least_carveout_kib(facts: DeviceFacts, shared_bytes_per_block: int, blocks_per_sm: int) -> int | None:
    """The smallest supported carveout that holds ``blocks_per_sm`` resident blocks of a kernel
    with this shared memory (what the driver must at least carve out for a launch)."""
    steps = supported_carveouts(facts)
    need = blocks_per_sm * (shared_bytes_per_block + reserved_per_block(facts)) / 1024
    fits = [c for c in steps if c >= need]
    return min(fits) if fits else None


def parse_carveouts(text: str, facts: DeviceFacts) -> tuple[int, ...]:
    """``all`` or a comma list of KiB (``0,32,100,228``), checked against what the GPU offers."""
    steps = supported_carveouts(facts)
    if not steps:
        raise InputError(f"{facts.name or 'this GPU'} carves no shared memory out of its L1 (AMD's LDS is a "
                         f"separate array; NVIDIA from sm_70): --carveouts does not apply")
    if text.strip().lower() == "all":
        return steps
    out = []
    for part in text.split(","):
        part = part.strip().lower().removesuffix("kib").strip()
        try:
            value = int(part)
        except ValueError:
            raise InputError(f"--carveouts takes all or KiB values such as 0,32,100,228, got {part!r}") from None
        if value not in steps:
            raise InputError(f"--carveouts: {facts.name or 'this GPU'} offers {', '.join(map(str, steps))} KiB, "
                             f"not {value}")
        if value not in out:
            out.append(value)
    if not out:
        raise InputError("--carveouts needs at least one value (or all)")
    return tuple(sorted(out))


@dataclass(frozen=True)
class LaunchShared:
    """What a launch's kernel needs of the array: shared memory per block, blocks per SM."""

    shared_bytes_per_block: int | None   # None: the compiled kernel did not say
    blocks_per_sm: int
    preference_pct: int | None      # None: the driver's own choice

    def to_dict(self, facts: DeviceFacts) -> dict:
        least = (None if self.shared_bytes_per_block is None else
                 least_carveout_kib(facts, self.shared_bytes_per_block, self.blocks_per_sm))
        return {"preference_pct": self.preference_pct, "shared_bytes_per_block": self.shared_bytes_per_block,
                "blocks_per_sm": self.blocks_per_sm, "reserved_bytes_per_block": reserved_per_block(facts),
                "least_carveout_kib": least}


# -- where to look for the L1 under a carveout ---------------------------------------------------
# The L1 a carveout should leave, and the window of working sets (bytes per SM) around it that the
# carveout's sweep measures (measure.carveout_sweep) and its analysis reads (detector.carveouts),
# so that `analyze` on recorded rows reads the window a live run measured. The expected L1 is the
# documented array less the carveout (the reserve is left to the data); where no array is
# documented, the default launch's L1.

KIB = 1024
BELOW, ABOVE = 0.5, 1.6        # the window: this share of the expected L1 below and above it
MIN_BYTES = 8 * KIB            # smaller working sets are loop-overhead bound
SURE_ABOVE = 1.25              # ... and at least this far past the expected L1, whatever caps it


@dataclass(frozen=True)
class Window:
    """Working sets per SM from ``lo_bytes`` to ``hi_bytes`` around ``expected_bytes``."""

    expected_bytes: int
    lo_bytes: int
    hi_bytes: int

    def holds(self, size_bytes: float) -> bool:
        return self.lo_bytes <= size_bytes <= self.hi_bytes


def array_bytes(facts: DeviceFacts, default_l1_bytes: float | None = None) -> int | None:
    """The unified array the windows assume: the documented one, else the default launch's L1
    (the windows are wide enough for the carveout it leaves out); None when neither is known."""
    documented = documented_array_kib(facts)
    if documented:
        return documented * KIB
    return int(default_l1_bytes) if default_l1_bytes else None


def next_fall_bytes(facts: DeviceFacts) -> float | None:
    """Where the private sweep's next fall begins (bytes per SM): every SM's rows together fill
    the near half of the L2 (NVIDIA's L2 is split in two partitions)."""
    if not (facts.l2_bytes_reported and facts.compute_units):
        return None
    return facts.l2_bytes_reported / facts.compute_units / 2


def window_for(carveout_kib: int, array: int, facts: DeviceFacts) -> Window:
    """The window for the L1 left by ``carveout_kib`` of an ``array``-byte array: from half the
    expected L1 (at least MIN_BYTES) to 1.6 times it, stopped short of the L2's fall where that
    comes first (but never closer than 1.25 times the expected L1: an L1 larger than expected
    because the driver kept its own carveout must still show its fall)."""
    expected = max(array - carveout_kib * KIB, MIN_BYTES)
    lo = max(MIN_BYTES, int(BELOW * expected))
    hi = ABOVE * expected
    fall = next_fall_bytes(facts)
    if fall:
        hi = min(hi, max(SURE_ABOVE * expected, fall))
    lo = lo // COARSE_BYTES * COARSE_BYTES
    hi = max(-(-int(hi) // COARSE_BYTES) * COARSE_BYTES, lo + 4 * COARSE_BYTES)
    return Window(int(expected), lo, hi)
