"""What one adaptive sweep is asked to do (measure.sweep runs it): its launch, range, budget and
how its falls are refined."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from detect_caches.measure.kernel_meta import COARSE_BYTES, round_to_granule
from detect_caches.measure.launch import LaunchConfig

# hit rates whose crossings are bisected, in this order: where half the data hits, where the
# fall begins (the capacity of most fall shapes, detector.capacity) and where it ends
CROSSINGS = (0.5, 0.95, 0.2)


@dataclass
class SweepPlan:
    """One sweep: its launch configuration, range (stream bytes per program) and budget."""

    config: LaunchConfig
    min_stream_bytes: int
    max_stream_bytes: int
    points_per_octave: int = 4
    budget: int = 150                 # measurements, coarse and refined together
    max_repeats: int = 3              # probes of one size while its side is undecided
    min_step: float = 0.03            # smallest relative change (log) treated as a transition
    resolution: float = 0.0025        # bisection stops at this relative bracket (or one granule)
    crossings: tuple[float, ...] = CROSSINGS   # hit rates whose crossings are bisected
    # transitions that start past large_bytes (costly points: the latency chase's long chains)
    # bisect only these crossings, to this resolution
    large_bytes: float = float("inf")
    large_crossings: tuple[float, ...] = CROSSINGS
    large_resolution: float = 0.0025
    large_points_per_octave: int = 4
    large_max_probes: int = 1 << 30   # bisection probes per crossing past large_bytes
    # speeds (log10 GB/s) of levels another sweep found: a transition that passes one is bisected
    # as two, above and below it (the private sweep's L1 fall running into the L2's)
    known_levels: tuple[float, ...] = ()
    # the first fall walked on from its last full-speed point in relative steps (0: not walked),
    # at most scan_points sizes: a dip just before a cliff does not end the search
    scan_step: float = 0.0
    scan_window: float = 0.06         # ... no further than this past it
    scan_points: int = 24
    # the sweep goes on past max_stream_bytes, two octaves at a time up to this, while its last
    # octave and a half still falls (a cache no document names, larger than the ones that are)
    extend_stream_bytes: int = 0
    # ... or while its last plateau is faster than memory can serve (log10 GB/s of
    # DeviceFacts.faster_than_memory_gbs): a last level that fast is a cache, with memory past it
    memory_ceiling_log: float | None = None

    def coarse_sizes(self) -> list[int]:
        """Log-spaced sizes, points_per_octave of them per octave (one per octave past
        large_bytes when large_points_per_octave says so)."""
        lo, hi = self.min_stream_bytes, self.max_stream_bytes
        mid = min(max(self.large_bytes, lo), hi)
        sizes = set()
        for a, b, ppo in ((lo, mid, self.points_per_octave), (mid, hi, self.large_points_per_octave)):
            if b > a:
                n = max(2, int(math.ceil(math.log2(b / a) * ppo)) + 1)
                sizes |= {round_to_granule(s, COARSE_BYTES) for s in np.geomspace(a, b, n)}
        return sorted(sizes or {round_to_granule(lo, COARSE_BYTES)})
