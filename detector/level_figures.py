"""A level's figures from its sweep's analysis: bandwidth, its spread and repeatability from a
plateau; capacity, interval, fall shape and notes from a step; a confidence; the device levels
named and sized (per XCD where a chiplet has its own L2); each plateau against its ceiling."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from detect_caches.detector.capacity import CapacityEstimate
from detect_caches.detector.fallfit import LEVEL
from detect_caches.detector.labels import device_names, documented_bytes, per_cu_names
from detect_caches.detector.levels import Level, SweepAnalysis
from detect_caches.detector.plateau_speed import plateau_speed
from detect_caches.detector.shape_rules import capacity_rule
from detect_caches.detector.units import fmt_bytes, fmt_bytes_apart
from detect_caches.device import DeviceFacts

LOW_SHARE = 0.8          # a plateau below this share of its physical ceiling gets a warning
BANDWIDTH_FLOOR = 0.003  # run-to-run bandwidth spread a real card shows beyond its sampling noise
CAPACITY_FLOOR = 0.01    # ... and capacity spread, where the fall is not a resolved cliff
HASHED_FLOOR = 0.02      # ... and where it is a hashed-set fall: which sets a buffer's physical pages
                         # land in changes with each allocation (H100s' L2s, 23 cards of 3-4 runs, moved
                         # 2.35% rms between runs of a card, H200s' 1.4%; at 1.5% a narrow fall read
                         # 48.6 MiB in one run where the card's others read 52.1-52.3: a drift)
HASHED_WIDTH_SHARE = 0.1  # ... and at least this share of the fall's width (octaves): the broader
                         # the fall, the more its middle moves between allocations (an H100's L2,
                         # 0.2-0.5 octaves wide, read 49.4-54.7 MiB over four runs of one card: 3.6%
                         # seen against 1.7% said; H200s' L2s, 0.1-0.3 wide, 0.4-1.4% seen)
CLIFF_SHAPES = ("cliff", "cliff, then partial hits")   # falls whose size is held at a measured size
CLIFF_Z = NormalDist().inv_cdf((1 + LEVEL) / 2)   # sigmas either side of the interval (98%: 2.33)
POOLED_POINTS = 5        # a plateau's scatter weighs as if this many more points showed the sweep's
                         # pooled plateau scatter


def confidence(an: SweepAnalysis, step_index: int) -> float:
    """0..1 from the step's size against the noise, the interval's width, the fit and the
    segmentation's stability, less the share of noisy points near the boundary."""
    st = an.steps[step_index]
    hi, lo = an.plateaus[step_index], an.plateaus[step_index + 1]
    z = abs(hi.level_log - lo.level_log) / max(an.sigma, 1e-4)
    e = st.estimate
    rel_width = math.log2(max(e.high_bytes, 1) / max(e.low_bytes, 1))
    c = (1 - math.exp(-z / 8)) / (1 + 1.5 * rel_width) / (1 + 10 * max(e.fit_rms_log - 2 * an.sigma, 0))
    c /= 1 + 10 * e.noise_repeatability
    if not an.segmentation.cross_checked:
        c *= 0.8
    c *= 1 - 0.5 * _spoilt_share(an, e.low_bytes, e.high_bytes)
    return round(float(min(max(c, 0.0), 1.0)), 3)


def _spoilt_share(an: SweepAnalysis, lo_bytes: float, hi_bytes: float) -> float:
    """The share of the points between ``lo_bytes`` and ``hi_bytes`` that were noisy, or flagged
    (poor fit, remeasured) within half as much again either side: a busy GPU's doubt."""
    near = (an.curve.size_bytes >= lo_bytes) & (an.curve.size_bytes <= hi_bytes)
    flagged = np.count_nonzero((an.curve.flagged_bytes >= lo_bytes / 1.5) & (an.curve.flagged_bytes <= hi_bytes * 1.5))
    if not (near.any() or flagged):
        return 0.0
    return min(1.0, max(float(an.curve.noisy[near].mean()) if near.any() else 0.0,
                        flagged / max(flagged + int(near.sum()), 1)))


def _pooled_spread(plateaus) -> float:
    """The scatter of a sweep's plateau points around their plateaus' medians (RMS over points)."""
    n = sum(p.n_core or p.n_points for p in plateaus)
    return math.sqrt(sum((p.n_core or p.n_points) * p.spread_log ** 2 for p in plateaus) / n) if n else 0.0


# 1.4826 MAD reads a normal sample's sigma short when the sample is small (Croux and Rousseeuw
# 1992, their consistency factors b_n for n = 2..9; n / (n - 0.8) beyond); squared, the corrected
# sigma overstates the variance a little (12% at six points): a repeatability on the safe side
MAD_SMALL_N = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}


def mad_small_sample(n: int) -> float:
    """The factor that makes 1.4826 MAD of ``n`` normal points a sigma right on average."""
    return MAD_SMALL_N.get(n, n / (n - 0.8) if n > 9 else 1.0)


def plateau_level(name: str, scope: str, an: SweepAnalysis, i: int, simulated: bool) -> Level:
    p = an.plateaus[i]
    level_log, spread_log, n = plateau_speed(an, i)
    spread = 10 ** level_log * (10 ** spread_log - 1)
    # the median's noise: its points' scatter, drawn toward the sweep's pooled plateau scatter as
    # if POOLED_POINTS more points had shown that (a MAD of a few points reads small by chance: two
    # seeds of one simulated GPU then differed by ten times the repeatability they said)
    n = max(n, 1)
    spread_log *= mad_small_sample(n)
    noise = math.sqrt((n * spread_log ** 2 + POOLED_POINTS * _pooled_spread(an.plateaus) ** 2) / (n + POOLED_POINTS))
    sampling = 1.2533 * noise * math.log(10) / math.sqrt(n)
    floor = 0.0 if simulated else BANDWIDTH_FLOOR
    return Level(name=name, scope=scope, bandwidth_gbs=round(10 ** level_log, 1),
                 bandwidth_spread_gbs=round(spread, 1), sweep=an.sweep,
                 confidence=round(float(min(1.0, p.n_points / 6) / (1 + 20 * p.spread_log)
                                        * (1 - 0.5 * _spoilt_share(an, p.size_lo_bytes, p.size_hi_bytes))), 3),
                 plateau_lo_bytes=float(p.size_lo_bytes), plateau_hi_bytes=float(p.size_hi_bytes),
                 bandwidth_repeatability=round(math.hypot(sampling, floor), 5))


def with_capacity(level: Level, an: SweepAnalysis, k: int, scale: float, simulated: bool = False) -> Level:
    """Capacity and fall of step ``k`` of ``an`` (x scaled by ``scale`` to the level's units)."""
    est: CapacityEstimate = an.steps[k].estimate
    # a cliff's or a step's C is on the sweep's size grid: no point inside the fall says where in the
    # gap to the next size it lies (a latency knee joined to it pulls it there, which tells nothing);
    # any other fall's C is the fit's own: on the grid it took up to half a step more error (the
    # mi300x's L1, seed 2: +2.97% read +3.13%). The interval reaches out to the grid.
    held = est.shape in CLIFF_SHAPES and est.high_bytes > est.low_bytes > 0
    grid = max(size_grid(an) * scale, 1.0)
    low, high = est.interval_bytes
    level.capacity_low_bytes = int(math.floor(low * scale / grid) * grid)
    level.capacity_high_bytes = int(math.ceil(high * scale / grid) * grid)
    unit = grid if held or est.shape == "step" else 1.0
    c = int(round(est.capacity_bytes * scale / unit) * unit)
    level.capacity_bytes = min(max(c, level.capacity_low_bytes), level.capacity_high_bytes)
    level.onset_bytes = int(round(est.onset_bytes * scale))
    level.half_hit_bytes = int(round(est.half_hit_bytes * scale)) if est.half_hit_bytes else None
    level.transition_width_octaves = round(est.width_octaves, 3)
    level.fall_shape = est.shape
    # a fall that is not a resolved cliff moves between runs of a real card more than its
    # sampling noise says (where the points of the fall land, shapes no model fits exactly)
    # ... and the fit's noise holds a cliff's edge at one measured size, while which sizes a rerun
    # measures moves it within its interval, on a simulated curve as on a card (an H200's L1 read
    # 217.5 and 224.5 KiB in two runs of one card, each saying 0.1-0.6%, both intervals reaching
    # 215-229 KiB: a drift by the repeatabilities alone)
    floor = (math.log(est.high_bytes / est.low_bytes) / (2 * CLIFF_Z) if held else
             0.0 if simulated or est.shape.startswith("cliff") else
             max(HASHED_FLOOR, HASHED_WIDTH_SHARE * est.width_octaves) if est.shape == "hashed-set fall" else
             CAPACITY_FLOOR)
    level.capacity_repeatability = round(math.hypot(est.repeatability, floor), 5)
    level.confidence = confidence(an, k)
    if est.shape.startswith("cliff"):
        below, above = fmt_bytes_apart(est.low_bytes * scale, est.high_bytes * scale)
        level.notes.append(f"a cliff between {below} (all hits) and {above}: the capacity is the last "
                           f"size before it")
    elif est.shape == "hashed-set fall":
        level.notes.append("a hashed-set fall (symmetric around the size, as an LRU cache with hashed "
                           "sets misses on some sets before it is full): the capacity is its middle")
    elif est.shape == "step":
        level.notes.append(f"the data has no size inside the fall: the capacity is the last size served "
                           f"whole, {fmt_bytes(est.onset_bytes * scale)}; the next measured size is "
                           f"{fmt_bytes(est.high_bytes * scale)}")
    else:
        level.notes.append(f"a {est.shape}: {capacity_rule(est.shape)}"
                           + (f"; half the data still hits at {fmt_bytes(est.half_hit_bytes * scale)}"
                              if est.half_hit_bytes else ""))
    for p in an.steps[k].partials:
        level.notes.append(f"partial hits at {p.bandwidth_gbs:,.0f} GB/s from {fmt_bytes(p.size_lo_bytes * scale)} "
                           f"to {fmt_bytes(p.size_hi_bytes * scale)}, inside the fall (too short to be a level)")
    return level


def size_grid(an: SweepAnalysis) -> float:
    """The step every measured size of the sweep is a multiple of (bytes on its x axis)."""
    sizes = np.asarray(np.round(an.curve.size_bytes), dtype=np.int64)
    return float(np.gcd.reduce(sizes)) if sizes.size else 1.0


def per_cu_levels(priv: SweepAnalysis, count: int, simulated: bool) -> list[Level]:
    levels = []
    for k, name in enumerate(per_cu_names(count)):
        lv = plateau_level(name, "per_cu", priv, k, simulated)
        if k < len(priv.steps):
            with_capacity(lv, priv, k, 1.0, simulated)
        else:
            lv.notes.append(f"no boundary within the private sweep: at least "
                            f"{fmt_bytes(priv.plateaus[k].size_hi_bytes)} per SM/CU")
        levels.append(lv)
    return levels


def memory_reached(plats, max_size: float, documented: list[float], is_private: bool,
                    llc_bytes: int | None, cache_speed_gbs: float | None = None) -> bool:
    """Is the last plateau main memory? It must be clearly past every documented cache, or, with
    nothing documented, be a plateau the shared sweep followed for at least an octave, or one no
    faster than memory can be (``cache_speed_gbs``: DeviceFacts.faster_than_memory_gbs; the
    shared sweep goes on past a faster one, measure.sweep)."""
    if len(plats) < 2:
        return not is_private and max_size >= max(1.5 * max(documented, default=0.0), 512 * 2**20)
    if documented:
        if is_private:
            # one buffer read by every SM fills a split L2 at half its size: past it is memory
            return max_size >= max(max(documented), 1.5 * (llc_bytes or 0))
        return max_size >= 1.5 * max(documented)
    last = plats[-1]
    slow = bool(cache_speed_gbs) and 10 ** last.level_log <= cache_speed_gbs
    return not is_private and (math.log2(last.size_hi_bytes / last.size_lo_bytes) >= 1.0 or slow)


def device_levels(an: SweepAnalysis, start: int, facts: DeviceFacts, scale: float, is_private: bool,
                   warnings: list[str]) -> list[Level]:
    """Device caches and memory from plateaus ``start..`` of ``an`` (x scaled to bytes)."""
    plats = an.plateaus[start:]
    if not plats:
        return []
    max_size = float(an.curve.size_bytes.max()) * scale
    if an.usable_until_bytes:
        max_size = min(max_size, an.usable_until_bytes * scale)
    # one buffer read by every CU (reference tables): each XCD's L2 sees all of it
    spread = not (is_private and bool(np.all(an.curve.footprint_bytes == an.curve.size_bytes)))
    documented = [b for b in (documented_bytes(n, facts, spread) for n in ("L2", "Infinity Cache")) if b]
    mem = memory_reached(plats, max_size, documented, is_private, facts.llc_bytes_reported,
                         facts.faster_than_memory_gbs())
    if mem and len(plats) == 1:
        warnings.append(f"the shared sweep shows one plateau up to {fmt_bytes(max_size)} and no device "
                        f"cache boundary; it is taken as {facts.memory_kind}")
    n_caches = len(plats) - 1 if mem else len(plats)
    xcds = max(facts.xcds, 1)
    steps = an.steps
    caps = [steps[start + i].estimate.capacity_bytes * scale if start + i < len(steps) else None
            for i in range(n_caches)]
    names, name_notes = device_names(facts, caps)
    levels: list[Level] = []
    for i, (name, note) in enumerate(zip(names, name_notes)):
        k = start + i
        per_xcd = facts.vendor == "amd" and xcds > 1 and name == "L2"
        lv = plateau_level(name, "per_xcd" if per_xcd else "device", an, k, facts.simulated)
        if note:
            lv.notes.append(note)
        # a private sweep over one shared buffer (reference tables) shows each XCD the whole
        # buffer; distinct rows per program and the shared sweep spread it over the XCDs
        divisor = xcds if per_xcd and spread else 1
        if k < len(steps):
            with_capacity(lv, an, k, scale / divisor, facts.simulated)
            if per_xcd:
                lv.aggregate_capacity_bytes = lv.capacity_bytes * xcds
                lv.notes.append(f"capacity per XCD; the {xcds} XCDs hold {fmt_bytes(lv.aggregate_capacity_bytes)} "
                                f"together" + (" (programs are spread over them round-robin)" if spread else
                                               " (every CU read one buffer: each XCD's L2 held its own copy)"))
        else:
            lv.notes.append(f"not filled within the sweep: more than {fmt_bytes(max_size / divisor)}")
        api = documented_bytes(name, facts, spread)
        if api:
            lv.api_bytes = int(api / divisor)
            if lv.capacity_bytes is not None and not (lv.capacity_low_bytes <= lv.api_bytes <= lv.capacity_high_bytes):
                lv.notes.append(f"the API or vendor documents {fmt_bytes(lv.api_bytes)}; the data says "
                                f"{fmt_bytes(lv.capacity_bytes)} ({fmt_bytes(lv.capacity_low_bytes)} to "
                                f"{fmt_bytes(lv.capacity_high_bytes)})")
        levels.append(lv)
    if mem:
        levels.append(plateau_level(facts.memory_kind, "device", an, start + len(plats) - 1, facts.simulated))
    elif an.sweep == "shared":
        warnings.append(f"the shared sweep ended at {fmt_bytes(max_size)} without a clear memory "
                        f"plateau; run with a larger --max-working-set")
    return levels


def check_ceilings(levels: list[Level], facts: DeviceFacts, warnings: list[str]) -> None:
    for lv in levels:
        lv.ceiling_gbs = facts.ceiling_for(lv.name)
        if not lv.ceiling_gbs:
            continue
        lv.ceiling_gbs = round(lv.ceiling_gbs, 1)
        if lv.bandwidth_gbs > 1.03 * lv.ceiling_gbs:
            warnings.append(f"the {lv.name} plateau ({lv.bandwidth_gbs:,.0f} GB/s) is above its physical "
                            f"ceiling ({lv.ceiling_gbs:,.0f} GB/s): the device facts or the measurement are wrong")
        elif lv.bandwidth_gbs < LOW_SHARE * lv.ceiling_gbs and not facts.simulated:
            warnings.append(f"the {lv.name} plateau reaches only {lv.bandwidth_gbs / lv.ceiling_gbs:.0%} of its "
                            f"physical ceiling ({lv.ceiling_gbs:,.0f} GB/s): another workload, throttling or a "
                            f"fault; a healthy card reaches 90% or more with this kernel")
