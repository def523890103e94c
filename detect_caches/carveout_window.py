"""Where to look for the L1 under a carveout: the L1 a carveout should leave, and the window of
working sets (bytes per SM) around it that the carveout's sweep measures and its analysis reads.

Pure functions of the device facts, shared by the sweep (measure.carveout_sweep) and the analysis
(detector.carveouts), so that `analyze` on recorded rows reads the window a live run measured.
The expected L1 is the documented array less the carveout (the reserve is left to the data);
where no array is documented, the default launch's L1.
"""
from __future__ import annotations

from dataclasses import dataclass

from detect_caches.carveout import documented_array_kib
from detect_caches.device import DeviceFacts
from detect_caches.grid import COARSE_BYTES

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
