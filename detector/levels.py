"""Plain data that the detector hands to the reports: levels, plateaus and transitions."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, asdict

import numpy as np

from detect_caches.detector.capacity import CapacityEstimate
from detect_caches.detector.plateaus import Plateau
from detect_caches.detector.curve import Curve, local_level
from detect_caches.detector.segment import Segmentation


@dataclass
class Level:
    """One cache level or main memory, as result.json carries it (units in the names)."""

    name: str
    scope: str                          # per_cu, per_xcd or device
    bandwidth_gbs: float
    capacity_bytes: int | None = None   # None for main memory or a level never filled
    capacity_low_bytes: int | None = None
    capacity_high_bytes: int | None = None
    onset_bytes: int | None = None      # last size at full plateau speed
    half_hit_bytes: int | None = None   # where half the data still hits (secondary figure)
    fall_shape: str = ""                # detector.shape.SHAPES: how the level's fall looked
    capacity_repeatability: float | None = None    # 1-sigma relative run-to-run spread
    bandwidth_repeatability: float | None = None   # 1-sigma relative run-to-run spread
    aggregate_capacity_bytes: int | None = None   # per_xcd levels: over all XCDs
    bandwidth_spread_gbs: float = 0.0
    transition_width_octaves: float | None = None
    confidence: float = 0.0
    sweep: str = "shared"
    api_bytes: int | None = None
    ceiling_gbs: float | None = None
    plateau_lo_bytes: float | None = None     # the plateau's extent on its sweep's x axis
    plateau_hi_bytes: float | None = None
    peak_bandwidth_gbs: float | None = None   # best tuned launch inside the plateau (measure.peak)
    peak_launch: str = ""
    latency_ns: float | None = None           # a dependent load's latency (one-SM pointer chase)
    latency_cycles: float | None = None       # ... in SM/CU cycles (in-kernel clock)
    latency_repeatability: float | None = None  # 1-sigma relative run-to-run spread of latency_ns
    latency_capacity_bytes: int | None = None  # where the latency knee puts the level's size
    latency_fall_shape: str = ""
    latency_steps: list[dict] = field(default_factory=list)   # a level seen in several latency steps
    line_bytes: int | None = None             # allocation unit (line probe); null where not measured
    line_candidates_bytes: list[int] = field(default_factory=list)   # every line size the probes fit
    sector_bytes: int | None = None           # what a miss brings in (sector probe)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["notes"] = "; ".join(self.notes)
        return d


@dataclass
class Step:
    """A transition between two plateaus of one sweep, with its capacity estimate."""

    upper: int                 # index of the faster plateau
    estimate: CapacityEstimate
    rise: bool = False         # bandwidth rises past it: not a cache boundary
    partials: list[Plateau] = field(default_factory=list)   # short plateaus inside the fall


NEXT_FALL_SIGMAS = 3.0    # a point this many point sigmas under the lower plateau's speed ...
NEXT_FALL_MIN = math.log10(1.02)   # ... and 2% is slower than that level: the next fall's
                                   # (over the upper plateau's speed, the previous fall's end)
KEEP_LOWER_OCTAVES = 0.3  # the lower plateau's first points stay in a fall's fit whatever they read
                          # (and the upper one's last points)
STEP_EDGE_OCTAVES = 1.5   # how far into each plateau a fall's fit reaches (its plateau speeds are
                          # fitted with the fall, from points inside the plateaus)


@dataclass
class SweepAnalysis:
    sweep: str
    curve: Curve
    plateaus: list[Plateau]
    steps: list[Step]
    segmentation: Segmentation
    sigma: float
    usable_until_bytes: float | None = None   # data past a rise is not used
    partials: list[Plateau] = field(default_factory=list)   # short plateaus inside falls
    point_bin: object = None                  # each raw point's bin (numpy array)
    point_sigma: float | None = None          # one raw point's noise (curve.point_sigma)
    window_ends: dict = field(default_factory=dict)   # a fall's window reaching past its usual end
    under_tail: set = field(default_factory=set)      # falls read less the tail of the fall above
                                                      # (detector.above_tail.refit_under_tails)

    def step_points(self, i: int, *, own: bool = False):
        """Boolean mask of the curve's points that go into step ``i``'s estimate: the upper
        plateau's last bins, the fall, the lower plateau's first bins (``own``: without a
        chained reach past them)."""
        hi, lo = self.plateaus[i], self.plateaus[i + 1]
        x = self.curve.size_bytes
        start = max(hi.size_lo_bytes, hi.size_hi_bytes / 2 ** STEP_EDGE_OCTAVES)
        end = min(lo.size_hi_bytes, lo.size_lo_bytes * 2 ** STEP_EDGE_OCTAVES)
        reach = None if own else self.window_ends.get(i)
        inside = (self.point_bin >= hi.first_bin) & (self.point_bin <= lo.last_bin)
        if reach is not None:
            return (self.point_bin >= hi.first_bin) & (x >= start * (1 - 1e-9)) & (x <= max(reach, end) * (1 + 1e-9))
        sel = inside & (x >= start * (1 - 1e-9)) & (x <= end * (1 + 1e-9))
        # the lower plateau's last points may already be in the next fall (segmentation puts the
        # boundary a point or two late): slower than the plateau, they would drag its fitted speed
        off = max(NEXT_FALL_SIGMAS * (self.point_sigma or self.sigma), NEXT_FALL_MIN)
        below = self.curve.y < lo.level_log - off
        # (none after the last plateau: a long random-replacement tail that its core still holds
        # would drag its speed up, and the memory floor under it would be left out as a "next fall")
        last = i + 1 == len(self.plateaus) - 1
        for k in np.nonzero(sel)[0][::-1]:
            if last or not below[k] or x[k] <= lo.size_lo_bytes * 2 ** KEEP_LOWER_OCTAVES:
                break
            sel[k] = False
        # ... and the upper plateau's first points may still be in the previous fall: faster than
        # it, they would make the fit put a cliff there (an 86 KiB L1 read 29 KiB after a 27 KiB L0)
        upper = local_level(self.curve.y, self.point_bin, hi.first_bin, hi.last_bin, hi.level_log)
        above = self.curve.y > upper + off
        for k in np.nonzero(sel)[0]:
            if not above[k] or x[k] >= hi.size_hi_bytes / 2 ** KEEP_LOWER_OCTAVES:
                break
            sel[k] = False
        return sel


@dataclass
class Detection:
    levels: list[Level]
    sweeps: dict[str, SweepAnalysis]
    warnings: list[str] = field(default_factory=list)
    carveouts: object = None     # detector.carveouts.CarveoutTable where records ran under asked carveouts
