"""From breakpoints to plateaus: merge steps too small to be a level, treat short segments that
sit between their neighbours as ramps (part of a transition), and measure each plateau's level
robustly from the raw points."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_LEVEL_STEP = np.log10(1.10)   # a new level needs at least a 10% change in bandwidth
RAMP_BINS = 3                     # a segment this short between two levels is a ramp


@dataclass
class Plateau:
    first_bin: int
    last_bin: int          # inclusive
    level_log: float       # log10 GB/s, median of the core raw points
    spread_log: float      # 1.4826 MAD of the core raw points (log10)
    size_lo_bytes: float   # smallest and largest raw working set in the core
    size_hi_bytes: float
    n_points: int
    n_core: int = 0        # the raw points the level and spread are read from (0: n_points) ...
    core_bins: tuple[int, int] | None = None   # ... in these bins (None: first_bin..last_bin)

    @property
    def bandwidth_gbs(self) -> float:
        return float(10 ** self.level_log)

    @property
    def octaves(self) -> float:
        return math.log2(self.size_hi_bytes / self.size_lo_bytes)


FLAT_SPREADS = 3.0   # a level between two others steps by this many of its own spreads


def stands_out(p: Plateau, neighbour: Plateau) -> bool:
    """A plateau between two others is a level only if it is flat against its steps (a short,
    scattered run of points between two levels is part of the fall)."""
    return abs(p.level_log - neighbour.level_log) >= max(MIN_LEVEL_STEP, FLAT_SPREADS * p.spread_log)


def _segments(n_bins: int, bkps: list[int]) -> list[list[int]]:
    edges = [0, *bkps, n_bins]
    return [[a, b - 1] for a, b in zip(edges, edges[1:]) if b > a]


def _apart(a: list[int], b: list[int], sigma: float, floor: float = MIN_LEVEL_STEP) -> float:
    """How far apart two neighbouring segments' median levels must be to stay two: at least
    ``floor`` (10%); five sigmas between two single bins, and between longer ones 3.5 times the
    noise of their medians (1.25 sigma / sqrt(bins) each). One bin's five sigmas merged a 1.2x
    step under 3% noise between two plateaus of 20 bins each (generated GPU 26)."""
    n_a, n_b = a[1] - a[0] + 1, b[1] - b[0] + 1
    return max(floor, min(5 * sigma, 3.5 * 1.25 * sigma * math.sqrt(1 / n_a + 1 / n_b)))


def _between(segs: list[list[int]], i: int, level, sigma: float) -> bool:
    """Does segment ``i`` lie strictly between the levels of its neighbours, themselves apart? Then
    it is part of the fall between them (a ramp) or a level of its own, told from either by its
    noise alone: a bandwidth floor would merge a 1.2x fall into the level above it (physics GPU
    46 seed 2: a 1.24x L2 fall's five bins into the L2's plateau, which then held its fall)."""
    if not 0 < i < len(segs) - 1:
        return False
    a, b, c = level(segs[i - 1]), level(segs[i]), level(segs[i + 1])
    return min(a, c) < b < max(a, c) and abs(a - c) >= _apart(segs[i - 1], segs[i + 1], sigma)


EDGE_SIGMAS = 3.0   # a ramp's end bin this close to the level beside it (and nearer it) is that level's


def _edge_bins(segs: list[list[int]], by: np.ndarray, level, sigma: float) -> None:
    """Move a ramp's end bins that sit at the level beside it into that level: a breakpoint a bin
    off puts a plateau's last bin in the fall's first segment (the H100 PCIe table's L1: its
    plateau's 204 KiB bin with 236 KiB's, in the fall), which then ends the plateau a bin early."""
    for i in range(len(segs) - 1):
        a, b = segs[i], segs[i + 1]
        if _between(segs, i + 1, level, sigma):     # b a ramp: its first bins may be a's
            while b[1] > b[0] and abs(by[b[0]] - level(a)) <= EDGE_SIGMAS * sigma < abs(by[b[0]] - level(b)):
                a[1] += 1
                b[0] += 1
        if _between(segs, i, level, sigma):         # a a ramp: its last bins may be b's
            while a[1] > a[0] and abs(by[a[1]] - level(b)) <= EDGE_SIGMAS * sigma < abs(by[a[1]] - level(a)):
                a[1] -= 1
                b[0] -= 1


def merge_segments(by: np.ndarray, bkps: list[int], sigma: float) -> list[list[int]]:
    """Bin ranges [first, last] of the plateaus; bins between two plateaus are transitions."""
    step = max(5 * sigma, MIN_LEVEL_STEP)
    segs = _segments(by.size, bkps)
    level = lambda s: float(np.median(by[s[0]:s[1] + 1]))  # noqa: E731
    changed = True
    while changed and len(segs) > 1:
        changed = False
        # an excursion of a few bins that returns to the same level is an outlier, not a level
        for i in range(1, len(segs) - 1):
            a, b, c = level(segs[i - 1]), level(segs[i]), level(segs[i + 1])
            short = segs[i][1] - segs[i][0] + 1 <= 2
            if short and abs(a - c) < step and (b - a) * (b - c) > 0:
                segs[i - 1:i + 2] = [[segs[i - 1][0], segs[i + 1][1]]]
                changed = True
                break
        if changed:
            continue
        for i in range(len(segs) - 1):
            ramp = _between(segs, i, level, sigma) or _between(segs, i + 1, level, sigma)
            if abs(level(segs[i]) - level(segs[i + 1])) < _apart(segs[i], segs[i + 1], sigma, 0.0 if ramp else MIN_LEVEL_STEP):
                segs[i:i + 2] = [[segs[i][0], segs[i + 1][1]]]
                changed = True
                break
    _edge_bins(segs, by, level, sigma)
    # ramps: short segments strictly between their neighbours' levels
    plateaus = []
    for i, s in enumerate(segs):
        if 0 < i < len(segs) - 1 and s[1] - s[0] + 1 <= RAMP_BINS:
            a, b, c = level(segs[i - 1]), level(s), level(segs[i + 1])
            if min(a, c) < b < max(a, c):
                continue
        plateaus.append(s)
    # two plateaus left next to each other at nearly one level (a ramp removed between): merge
    merged: list[list[int]] = []
    for i, s in enumerate(plateaus):
        # the floor is off where either of the two lies between its neighbours, as in the loop above
        ramp = i > 0 and (_between(plateaus, i, level, sigma) or _between(plateaus, i - 1, level, sigma))
        floor = 0.0 if ramp else MIN_LEVEL_STEP
        if merged and s[0] == merged[-1][1] + 1 and abs(level(merged[-1]) - level(s)) < _apart(merged[-1], s, sigma, floor):
            merged[-1][1] = s[1]
        else:
            merged.append(list(s))
    return merged


def weighted_median(v: np.ndarray, w: np.ndarray) -> float:
    """The value with half the weight on either side (the mean of the two middle values at a tie)."""
    order = np.argsort(v, kind="stable")
    v, c = v[order], np.cumsum(w[order])
    half = c[-1] / 2
    i = int(np.searchsorted(c, half - 1e-12 * c[-1]))
    if abs(c[i] - half) <= 1e-12 * c[-1] and i + 1 < v.size:
        return float((v[i] + v[i + 1]) / 2)
    return float(v[i])


def bin_weights(point_bin: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """Each selected point's weight when every bin of sizes counts once: one over its bin's points."""
    return 1.0 / np.bincount(point_bin)[point_bin[sel]]


def build_plateaus(ranges: list[list[int]], x: np.ndarray, y: np.ndarray,
                   point_bin: np.ndarray) -> list[Plateau]:
    out = []
    for k, (first, last) in enumerate(ranges):
        core_first, core_last = first, last
        # keep the bins next to a transition out of the level when the plateau is long enough
        if k > 0 and last - first >= 3:
            core_first += 1
        if k < len(ranges) - 1 and last - first >= 3:
            core_last -= 1
        sel = (point_bin >= core_first) & (point_bin <= core_last)
        ys = y[sel]
        # each bin of sizes counts once, however many points refinement put in it: refined points
        # crowd the plateau's edge next to a fall, and a plain median reads the plateau low and its
        # spread wide (physics GPU 236 seed 2: a 1.25x random L2 fall merged into its L3)
        w = bin_weights(point_bin, sel)
        med = weighted_median(ys, w)
        spread = 1.4826 * weighted_median(np.abs(ys - med), w) if ys.size > 2 else 0.0
        inside = (point_bin >= first) & (point_bin <= last)
        out.append(Plateau(first, last, med, spread, float(2 ** x[inside].min()),
                           float(2 ** x[inside].max()), int(inside.sum()), int(ys.size), (core_first, core_last)))
    return out
