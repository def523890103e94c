"""The pointer-chase signal beside bandwidth: latency per level, knees matched to the bandwidth
levels, and the sector and line probes.

The chase curve (one program, chains of growing size) is segmented like a bandwidth curve: its
rate (slot bytes per hop) mixes harmonically with the hit rate, so plateaus, knees and fall
shapes come from the same code. Each latency plateau is then matched to a level found by
bandwidth: a knee within a factor of 1.6 of a level's capacity is that level, seen twice (both
signals agree: higher confidence, and a per-SM/CU level's capacity is read from both curves,
detector.joint; sizes that differ are reported, never averaged); a knee well
inside a level is a step the bandwidth sweep could not show (the near half of a split L2, as one
SM sees it) and is reported with its size and latency; the last plateau is memory.
"""
from __future__ import annotations

import math

import numpy as np

from detect_caches.detector.analyze_sweep import analyze_sweep
from detect_caches.detector.curve import local_level
from detect_caches.detector.curve import NOISY_FLAGS, build_curve
from detect_caches.detector.memo import analyze
from detect_caches.detector.levels import Level, SweepAnalysis
from detect_caches.detector.units import fmt_bytes
from detect_caches.grid import DENSE_SLOT_BYTES
from detect_caches.records import REJECTED_FLAGS, Measurement

NEAR_OCTAVES = 1.0        # a latency plateau this long inside a level is a part of it (a near half)
MIN_OCTAVES = 0.5         # latency plateaus this long are kept apart (the H200's far L2 half is longer)
AGREE = (2048, 0.03)      # knees agree when within 2 KiB or 3%
LATENCY_FLOOR = 0.005     # run-to-run spread of a latency beyond its sampling noise (a clock's jitter)
SAME_LATENCY = 0.05       # a dropped chase point this close to a plateau's latency reads that plateau
UNKNOWN_KNEE = "unknown"  # latency_fall_shape of a knee the kept points cannot place
LINE_CANDIDATES = (32, 64, 128, 256)


def chase_curve(records: list[Measurement]):
    """The dense chase's points (random cycles at the dense slot size)."""
    rows = [r for r in records if r.sweep == "chase" and r.phase in ("coarse", "refine", "check")
            and r.order != "sequential" and r.stride_bytes in (0, DENSE_SLOT_BYTES)]
    return build_curve(rows, "chase") if rows else None


def analyze_latency(records: list[Measurement], warnings: list[str], *, memo=None) -> SweepAnalysis | None:
    curve = chase_curve(records)
    if curve is None:
        return None
    # the latency knees' capacities are notes beside the bandwidth's: no repeatability to resample
    return analyze(memo, analyze_sweep, curve, warnings, min_level_octaves=MIN_OCTAVES, resamples=0)


def _ns(bandwidth_gbs: float) -> float:
    return DENSE_SLOT_BYTES / bandwidth_gbs


def _cycles(an: SweepAnalysis, records: list[Measurement], i: int) -> float | None:
    p = an.plateaus[i]
    vals = [r.latency_cycles for r in records if r.sweep == "chase" and r.phase in ("coarse", "refine", "check")
            and p.size_lo_bytes <= r.working_set_bytes <= p.size_hi_bytes and math.isfinite(r.latency_cycles)]
    return round(float(np.median(vals)), 1) if vals else None


def _set_latency(lv: Level, an: SweepAnalysis, records, i: int) -> None:
    """The latency of a hit in the level: the median over the first half of its plateau (away
    from the fall, where a level that starts missing before it is full already sags)."""
    p = an.plateaus[i]
    half = p.first_bin + max((p.last_bin - p.first_bin) // 2, 0)
    # a median of bin medians: refined points crowd the knee at the plateau's start (the L1's
    # tail of partial hits on a real H200 curve) and must not outvote the plateau
    rate = 10 ** local_level(an.curve.y, an.point_bin, p.first_bin, half, p.level_log)
    lv.latency_ns = round(_ns(rate), 2)
    lv.latency_cycles = _cycles(an, records, i)
    lv.latency_repeatability = _repeatability(an, p.first_bin, half)


def _repeatability(an: SweepAnalysis, first: int, last: int) -> float | None:
    """The latency's 1-sigma relative spread between runs: the standard error of the median of
    the points it is read from (1.2533 x their robust spread / sqrt(n)), with a floor; None from
    fewer than three points. Cycles, not ns, where the SM clock moved: reports.compare."""
    sel = (an.point_bin >= first) & (an.point_bin <= last)
    y = an.curve.y[sel] * math.log(10)
    if y.size < 3:
        return None
    # from neighbours' differences: a plateau's slow slope is its shape, the same in every run
    spread = 1.4826 * float(np.median(np.abs(np.diff(y)))) / math.sqrt(2)
    return round(math.hypot(1.2533 * spread / math.sqrt(y.size), LATENCY_FLOOR), 5)


def _dropped_on_plateau(an: SweepAnalysis, records: list[Measurement], i: int, knee_bytes: float) -> list[int]:
    """Sizes of chase points past the knee of plateau ``i`` that read its latency but were
    flagged noisy and left out: the plateau went on past the knee, which the gap they left put
    too early."""
    p = an.plateaus[i]
    ns = _ns(p.bandwidth_gbs)
    return sorted(r.working_set_bytes for r in records
                  if r.sweep == "chase" and r.phase in ("coarse", "refine", "check") and r.flag_set & NOISY_FLAGS
                  and r.order != "sequential" and r.stride_bytes in (0, DENSE_SLOT_BYTES)
                  and r.working_set_bytes > max(p.size_hi_bytes, knee_bytes) and math.isfinite(r.latency_ns)
                  and abs(r.latency_ns / ns - 1) <= SAME_LATENCY)


def knee_groups(levels: list[Level], an: SweepAnalysis) -> list[tuple[Level, list[int], int | None]]:
    """For each cache level: the chase's knees nearest its capacity (in log size, between the
    geometric midpoints of neighbouring capacities) and, of those, its own (nearest it), or None."""
    caches = [lv for lv in levels if lv.capacity_bytes]
    if not caches:
        return []
    logs = [math.log(lv.capacity_bytes) for lv in caches]
    bounds = [(a + b) / 2 for a, b in zip(logs, logs[1:])] + [math.inf]
    groups: list[list[int]] = [[] for _ in caches]
    for i, st in enumerate(an.steps):
        x = math.log(st.estimate.capacity_bytes)
        groups[next(g for g, b in enumerate(bounds) if x <= b)].append(i)
    return [(lv, knees, min(knees, key=lambda i: abs(math.log(an.steps[i].estimate.capacity_bytes / lv.capacity_bytes)))
             if knees else None) for lv, knees in zip(caches, groups)]


def attach_latency(levels: list[Level], an: SweepAnalysis, records: list[Measurement]) -> None:
    """Latency per level, the knees matched to the bandwidth levels (see the module docstring).

    Each latency knee belongs to the cache level whose capacity it is nearest (knee_groups). Of a
    level's knees, the one nearest its capacity is the level's own; a knee before it that ends a
    long plateau (an octave or more) is a step inside the level (a near part); shorter plateaus,
    and partial plateaus inside the falls, are reported as what the chase saw on the way."""
    caches = [lv for lv in levels if lv.capacity_bytes]
    memory = levels[-1] if levels and levels[-1].capacity_bytes is None else None
    if memory is not None and an.plateaus:
        _set_latency(memory, an, records, len(an.plateaus) - 1)
    for lv, knees, own in knee_groups(levels, an):
        if not knees:
            lv.notes.append("the latency sweep shows no knee near this size")
            continue
        near = [i for i in knees if i < own and _octaves(an.plateaus[i]) >= NEAR_OCTAVES
                and (i > 0 or lv is not caches[0])]
        _set_latency(lv, an, records, min(knees))   # a hit: the fastest plateau of its group
        knee = an.steps[own].estimate
        dropped = _dropped_on_plateau(an, records, own, knee.capacity_bytes)
        if dropped:    # the knee lies in a gap that dropped points fill: it is not known
            lv.latency_fall_shape = UNKNOWN_KNEE
            lv.notes.append(f"the latency knee is unknown: {len(dropped)} chase point(s) up to "
                            f"{fmt_bytes(dropped[-1])} read this level's latency but were flagged noisy and "
                            f"left out, and the kept points cannot place the knee")
            continue
        lv.latency_capacity_bytes = int(round(knee.capacity_bytes))
        lv.latency_fall_shape = knee.shape
        parts = [(lv.latency_ns if i == min(knees) else _ns(an.plateaus[i].bandwidth_gbs),  # its hit: one figure
                  an.steps[i].estimate.capacity_bytes) for i in near + [own]]
        shelf = _shelf(an, own, 1.1 * lv.capacity_bytes)
        if shelf is not None:
            parts.append(shelf)
        if len(parts) > 1:
            lv.latency_steps = [{"latency_ns": round(ns, 2), "up_to_bytes": int(round(up))} for ns, up in parts]
            said = ", then ".join(f"{ns:.0f} ns up to {fmt_bytes(up)}" for ns, up in parts)
            halves = lv.name == "L2" and len(parts) == 2
            lv.notes.append(f"the latency sweep (one SM) sees it in {len(parts)} steps: {said}"
                            + (" (the near and far halves of a split L2)" if halves else ""))
        for p in an.steps[own].partials:
            lv.notes.append(f"past its latency knee the chase sees {_ns(p.bandwidth_gbs):.0f} ns from "
                            f"{fmt_bytes(p.size_lo_bytes)} to {fmt_bytes(p.size_hi_bytes)}, inside the fall")
        # with a shelf (a far part too short to be a plateau) the level's latency ends past it
        _judge_agreement(lv, shelf[1] if shelf is not None else knee.capacity_bytes)


SHELF_SPREAD = 0.07    # points within 7% of their median latency ...
SHELF_OCTAVES = 0.2    # ... over at least 0.2 octave (refined points crowd a cliff: not a shelf)


def _shelf(an: SweepAnalysis, own: int, limit_bytes: float) -> tuple[float, float] | None:
    """(latency ns, largest size) of a shelf in the fall after plateau ``own``: consecutive
    points at one latency, clearly between the plateaus on either side, too few to be a plateau
    of their own, inside the level (up to ``limit_bytes``: past the level's capacity a shelf is
    its partial hits, as the H200's L1 shows well past its size). An H200's far L2 half (230-260
    ns over 37-51 MiB, half an octave, where the chase has an octave between coarse sizes;
    BENCHMARKS.md, 2026-11-30, third and fourth sessions) shows as two or three such points."""
    if own + 1 >= len(an.plateaus):
        return None
    hi_p, lo_p = an.plateaus[own], an.plateaus[own + 1]
    x, lat = an.curve.size_bytes, DENSE_SLOT_BYTES / 10 ** an.curve.y
    inside = [(a, b) for a, b in zip(x, lat) if hi_p.size_hi_bytes < a < lo_p.size_lo_bytes and a <= limit_bytes]
    top, bottom = _ns(hi_p.bandwidth_gbs), _ns(lo_p.bandwidth_gbs)
    best = None
    for i in range(len(inside)):
        for j in range(i + 1, len(inside)):
            run = [b for _, b in inside[i:j + 1]]
            med = float(np.median(run))
            if max(abs(b / med - 1) for b in run) > SHELF_SPREAD:
                break
            if (math.log2(inside[j][0] / inside[i][0]) >= SHELF_OCTAVES and 1.25 * top <= med <= 0.9 * bottom
                    and (best is None or j - i > best[2])):
                best = (med, inside[j][0], j - i)
    return (best[0], best[1]) if best else None


def _octaves(p) -> float:
    return math.log2(p.size_hi_bytes / p.size_lo_bytes)


def _judge_agreement(lv: Level, knee_bytes: float) -> None:
    diff = abs(knee_bytes - lv.capacity_bytes)
    if diff <= max(AGREE[0], AGREE[1] * lv.capacity_bytes):
        lv.notes.append(f"the latency knee ({fmt_bytes(knee_bytes)}) agrees with the bandwidth capacity")
        lv.confidence = round(min(1.0, lv.confidence + 0.5 * (1 - lv.confidence)), 3)
    else:
        lv.notes.append(f"the latency knee ({fmt_bytes(knee_bytes)}) and the bandwidth capacity "
                        f"({fmt_bytes(lv.capacity_bytes)}) disagree by {diff / lv.capacity_bytes:.0%}; "
                        f"both are reported, neither is averaged")


def probe_targets(levels: list[Level]) -> list[tuple[str, float, bool, bool]]:
    """(level, chain bytes at its latency knee, skip L1, walk cold) for the sector and line probes."""
    out = []
    # a level whose knee is unknown is probed at its bandwidth capacity
    caches = [lv for lv in levels if lv.latency_capacity_bytes or lv.latency_fall_shape == UNKNOWN_KNEE]
    for j, lv in enumerate(caches):
        past_l1 = lv.scope != "per_cu"
        last = j == len(caches) - 1
        size = lv.latency_capacity_bytes or lv.capacity_bytes
        out.append((lv.name, float(size), past_l1, past_l1 and last))
    return out


def _dense_latency_at(curve, size: float) -> float | None:
    """The dense chase's latency at ``size`` bytes, interpolated in log size (``curve``: chase_curve's)."""
    if curve is None or not curve.size_bytes[0] <= size <= curve.size_bytes[-1]:
        return None
    lat = DENSE_SLOT_BYTES / curve.bandwidth_gbs
    return float(np.exp(np.interp(math.log(size), np.log(curve.size_bytes), np.log(lat))))


def attach_lines(levels: list[Level], records: list[Measurement]) -> None:
    """Sector and line size per level from the probes (null where not measured)."""
    usable = [r for r in records if r.sweep == "chase" and math.isfinite(r.latency_ns)
              and not r.flag_set & REJECTED_FLAGS]
    strided = [r for r in records if r.sweep != "chase" and r.phase == "sector" and r.bandwidth_gbs > 0
               and math.isfinite(r.bandwidth_gbs) and not r.flag_set & REJECTED_FLAGS]
    dense = chase_curve(records)   # once: the line probes read it at every candidate size
    for lv in levels:
        sector = {r.stride_bytes: r.latency_ns for r in usable if r.phase == "sector" and r.target == lv.name}
        miss = None
        if len(sector) >= 3:
            strides = sorted(sector)
            lo, hi = sector[strides[0]], sector[strides[-1]]
            if hi > 1.2 * lo:   # small strides clearly cheaper: some hops hit what a miss brought in
                miss = next(s for s in strides if sector[s] >= hi - 0.1 * (hi - lo))
        rates = {r.stride_bytes: r.bandwidth_gbs for r in strided if r.target == lv.name}
        unit = transfer_unit(rates)
        if unit is not None:
            lv.sector_bytes = unit
            seen = ", ".join(f"{s} B {rates[s] / 4:.0f}" for s in sorted(rates))
            lv.notes.append(f"sector {unit} B: the unit this level hands to the SMs (G loads/s skipping the L1, "
                            f"by stride: {seen}; they halve with each doubling up to the unit)"
                            + (f"; one miss brings {miss} B from the level below (a chase in address order)"
                               if miss and miss != unit else ""))
        elif miss is not None:
            lv.sector_bytes = miss
            lv.notes.append(f"sector {miss} B: what one miss in this level brings from the level below "
                            f"(sequential strides; the sector the level hands to the one above is the upper "
                            f"level's sector)")
        lines = [r for r in usable if r.phase == "line" and r.target == lv.name]
        if lines:
            _line_size(lv, lines, dense)


def transfer_unit(rates: dict[int, float]) -> int | None:
    """The stride at which the words read per second stop halving (measure.transfer): the first
    stride that cost at least 1.6x the one before it, followed by one that costs at most 1.25x
    it. None without three strides or such a knee."""
    strides = sorted(s for s, v in rates.items() if v > 0)
    if len(strides) < 3:
        return None
    ratio = [rates[a] / rates[b] for a, b in zip(strides, strides[1:])]   # cost(b) / cost(a)
    for k in range(len(ratio) - 1):
        if ratio[k] >= 1.6 and ratio[k + 1] <= 1.25:
            return strides[k + 1]
    return None


def _line_size(lv: Level, probes: list[Measurement], dense) -> None:
    """The line size whose footprints (elements x line) put the probes' latencies where the
    dense curve has them; none if no candidate explains every probe within 15%."""
    errors = {}
    for line in LINE_CANDIDATES:
        err = []
        for r in probes:
            pred = _dense_latency_at(dense, r.working_set_bytes // r.stride_bytes * line)
            if pred is None:
                break
            err.append(abs(math.log(r.latency_ns / pred)))
        else:
            errors[line] = max(err)
    if not errors:
        return
    best = min(errors, key=errors.get)
    # every size that fits too: a line two sizes explain equally well may read as either next run
    lv.line_candidates_bytes = sorted(c for c, e in errors.items() if e < math.log(1.15))
    if errors[best] < math.log(1.15):
        lv.line_bytes = best
    else:
        lv.notes.append(f"the line probes match no line size of {', '.join(map(str, LINE_CANDIDATES))} B "
                        f"on the dense chase curve (best {best} B, off by {math.exp(errors[best]) - 1:.0%})")
