"""Measurement records to named cache levels: the detector's one entry point.

The two sweeps are read together. The shared sweep (many programs, distinct data, x = bytes over
the device) gives the device caches and memory. The private sweep (every program reads one
buffer, x = bytes per SM/CU) gives the per-SM/CU caches: its plateaus faster than the shared
sweep's first one; a private plateau at device-level speed is a device level seen again (not
partial hits, never listed twice). Without a shared sweep, the private sweep's far end stands in
for the device levels.
"""
from __future__ import annotations

import math

import numpy as np

from detector.analyze_sweep import KNOWN_SPEED, analyze_sweep, inside_level
from detector.capacity import CapacityEstimate, estimate_capacity
from detector.carveouts import carveout_table, main_records
from detector.curve import build_curve
from detector.labels import device_names, documented_bytes, per_cu_names
from detector.latency import analyze_latency, attach_latency, attach_lines
from detector.levels import Detection, Level, SweepAnalysis
from detector.shape_rules import capacity_rule
from detector.peaks import attach_peaks
from detector.units import fmt_bytes, fmt_bytes_apart
from measure.device import DeviceFacts, is_rdna
from measure.errors import InputError
from measure.records import Measurement

LOW_SHARE = 0.8          # a plateau below this share of its physical ceiling gets a warning
# a device cache's fall: LRU or random replacement over hashed or address-bit sets (a split L2 has
# a model of its own); pseudo-LRU declines and cliffs onto partial hits are per-SM/CU behaviours
# (the L1 tables), which on a device cache's slow start would read its first misses as its size
DEVICE_MODELS = ("lru", "modulo", "random", "hashed", "ways", "random_ways")
FASTER = 1.15           # a private level this much faster than every device level is per-SM/CU: the
                         # private launch reaches a device level no faster than the shared one does
SEEN_AGAIN = 1.25        # a private plateau this close in speed to a device level is that level seen again
SAME_FALL = 1.3          # a private fall this close (device-wide bytes) to one of the shared sweep's is
                         # the same device level's
BANDWIDTH_FLOOR = 0.003  # run-to-run bandwidth spread a real card shows beyond its sampling noise
CAPACITY_FLOOR = 0.01    # ... and capacity spread, where the fall is not a resolved cliff
HASHED_FLOOR = 0.015     # ... and where it is a hashed-set fall: which sets a buffer's physical pages
                         # land in changes with each allocation (H200 L2: 56.2-59.5 MiB over five runs,
                         # 1.2% sd, where each run's resampling said 0.1-0.5%)


def _confidence(an: SweepAnalysis, step_index: int) -> float:
    """0..1 from the step's size against the noise, the interval's width, the fit and the
    segmentation's stability, less the share of noisy points near the boundary."""
    st = an.steps[step_index]
    hi, lo = an.plateaus[step_index], an.plateaus[step_index + 1]
    z = abs(hi.level_log - lo.level_log) / max(an.sigma, 1e-4)
    e = st.estimate
    rel_width = math.log2(max(e.high_bytes, 1) / max(e.low_bytes, 1))
    c = (1 - math.exp(-z / 8)) / (1 + 1.5 * rel_width) / (1 + 10 * max(e.fit_rms_log - 2 * an.sigma, 0))
    c /= 1 + 10 * e.repeatability
    if not an.segmentation.cross_checked:
        c *= 0.8
    near = (an.curve.size_bytes >= e.low_bytes) & (an.curve.size_bytes <= e.high_bytes)
    flagged = np.count_nonzero((an.curve.flagged_bytes >= e.low_bytes / 1.5) & (an.curve.flagged_bytes <= e.high_bytes * 1.5))
    if near.any() or flagged:
        c *= 1 - 0.5 * min(1.0, max(float(an.curve.noisy[near].mean()) if near.any() else 0.0,
                                    flagged / max(flagged + int(near.sum()), 1)))
    return round(float(min(max(c, 0.0), 1.0)), 3)


def _plateau_level(name: str, scope: str, an: SweepAnalysis, i: int, simulated: bool) -> Level:
    p = an.plateaus[i]
    spread = p.bandwidth_gbs * (10 ** p.spread_log - 1)
    sampling = 1.2533 * p.spread_log * math.log(10) / math.sqrt(max(p.n_points, 1))
    floor = 0.0 if simulated else BANDWIDTH_FLOOR
    return Level(name=name, scope=scope, bandwidth_gbs=round(p.bandwidth_gbs, 1),
                 bandwidth_spread_gbs=round(spread, 1), sweep=an.sweep,
                 confidence=round(float(min(1.0, p.n_points / 6) / (1 + 20 * p.spread_log)), 3),
                 plateau_lo_bytes=float(p.size_lo_bytes), plateau_hi_bytes=float(p.size_hi_bytes),
                 bandwidth_repeatability=round(math.hypot(sampling, floor), 5))


def _with_capacity(level: Level, an: SweepAnalysis, k: int, scale: float, simulated: bool = False) -> Level:
    """Capacity and fall of step ``k`` of ``an`` (x scaled by ``scale`` to the level's units)."""
    est: CapacityEstimate = an.steps[k].estimate
    # on the grid the sweep measured on: no finer than a size step it could take
    grid = max(_size_grid(an) * scale, 1.0)
    level.capacity_bytes = int(round(est.capacity_bytes * scale / grid) * grid)
    level.capacity_low_bytes = int(math.floor(est.low_bytes * scale / grid) * grid)
    level.capacity_high_bytes = int(math.ceil(est.high_bytes * scale / grid) * grid)
    level.onset_bytes = int(round(est.onset_bytes * scale))
    level.half_hit_bytes = int(round(est.half_hit_bytes * scale)) if est.half_hit_bytes else None
    level.transition_width_octaves = round(est.width_octaves, 3)
    level.fall_shape = est.shape
    # a fall that is not a resolved cliff moves between runs of a real card more than its
    # sampling noise says (where the points of the fall land, shapes no model fits exactly)
    floor = (0.0 if simulated or est.shape.startswith("cliff") else
             HASHED_FLOOR if est.shape == "hashed-set fall" else CAPACITY_FLOOR)
    level.capacity_repeatability = round(math.hypot(est.repeatability, floor), 5)
    level.confidence = _confidence(an, k)
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


def _size_grid(an: SweepAnalysis) -> float:
    """The step every measured size of the sweep is a multiple of (bytes on its x axis)."""
    sizes = np.asarray(np.round(an.curve.size_bytes), dtype=np.int64)
    return float(np.gcd.reduce(sizes)) if sizes.size else 1.0


def _footprint_scale(an: SweepAnalysis) -> float:
    """Device-wide distinct bytes per unit of the sweep's x axis."""
    c = an.curve
    return float(np.median(c.footprint_bytes / c.size_bytes))


def _device_falls(shared: SweepAnalysis) -> list[float]:
    """Where the shared sweep's levels end (device-wide bytes): each level's capacity, and where
    each shelf inside its fall begins (a split L2's near half)."""
    return [st.estimate.capacity_bytes for st in shared.steps] + \
        [p.size_lo_bytes for st in shared.steps for p in st.partials]


def _seen_in_shared(priv: SweepAnalysis, n: int, shared: SweepAnalysis, scale: float) -> bool:
    """Is private plateau ``n`` a device level seen again: at a shared plateau's speed over
    overlapping device-wide sizes, or falling where a shared level falls?"""
    p = priv.plateaus[n]
    lo, hi = p.size_lo_bytes * scale, p.size_hi_bytes * scale
    for q in shared.plateaus:
        if abs(p.level_log - q.level_log) <= KNOWN_SPEED and lo <= q.size_hi_bytes * 1.5 and hi >= q.size_lo_bytes / 1.5:
            return True
    if n < len(priv.steps):
        at = max(priv.steps[n].estimate.capacity_bytes, p.size_hi_bytes) * scale
        # one buffer read by every SM (the reference tables): each L2 partition holds its own copy,
        # so a split L2 fills at half its size there
        shares = (1.0, 0.5) if bool(np.all(priv.curve.footprint_bytes == priv.curve.size_bytes)) else (1.0,)
        return any(at / SAME_FALL <= f * k <= at * SAME_FALL for f in _device_falls(shared) for k in shares)
    return False


def _per_cu_count(priv: SweepAnalysis, shared: SweepAnalysis | None, facts: DeviceFacts) -> int:
    """How many of the private sweep's levels are per-SM/CU caches. The shared sweep's loads skip
    the L1, so a device level shows in both sweeps (at the same speed, falling at the same
    device-wide footprint) and a per-SM/CU cache only in the private one; a private level well
    faster than every device level is per-SM/CU however it falls (an L1 only 1.2x faster than
    the L2 is still an L1: no speed cut-off decides alone)."""
    if shared is not None and shared.plateaus:
        device_gbs = shared.plateaus[0].bandwidth_gbs
        scale = _footprint_scale(priv)
        n = 0
        while n < len(priv.steps):
            faster = priv.plateaus[n].bandwidth_gbs > FASTER * device_gbs
            if (not faster or n > 0) and _seen_in_shared(priv, n, shared, scale):
                break
            n += 1
        return n
    # no device-level speed to compare with: the vendor's convention (two on RDNA, else one)
    want = 2 if is_rdna(facts) else 1
    return min(want, max(len(priv.plateaus) - 1, 1))


def _against_device_curve(priv: SweepAnalysis, k: int, shared: SweepAnalysis) -> None:
    """Estimate the fall of the last per-SM/CU level again, with the speed below it read point by
    point from the shared sweep at the same device-wide footprint (scaled to the private sweep's
    own speed for that level). On a part with many SMs the L2's share per SM sits just above the
    L1 and the two falls run into each other: against one constant plateau the L1's hit rates
    would include the L2's misses."""
    sel = priv.step_points(k)
    foot = priv.curve.footprint_bytes[sel]
    sx, sy = np.log(shared.curve.size_bytes), shared.curve.y
    below = np.interp(np.log(foot), sx, sy, left=shared.plateaus[0].level_log, right=sy[-1])
    nxt = priv.plateaus[k + 1]
    mid = math.sqrt(nxt.size_lo_bytes * nxt.size_hi_bytes) * float(np.median(
        priv.curve.footprint_bytes / priv.curve.size_bytes))
    offset = nxt.level_log - float(np.interp(math.log(mid), sx, sy, left=shared.plateaus[0].level_log,
                                             right=sy[-1]))
    if abs(offset) > math.log10(1.3):
        offset = 0.0   # the next private plateau is not the shared sweep's level seen again
    old = priv.steps[k]
    sigma = priv.point_sigma or priv.sigma
    est = estimate_capacity(priv.curve.size_bytes[sel], priv.curve.y[sel], priv.plateaus[k].level_log,
                            below + offset, priv.sigma, seed=k, resample_sigma=priv.point_sigma,
                            plateaus=(inside_level(priv.curve, priv.plateaus[k], upper=True, sigma=sigma),
                                      inside_level(priv.curve, nxt, upper=False, sigma=sigma)))
    priv.steps[k] = type(old)(upper=old.upper, estimate=est, rise=old.rise, partials=old.partials)


def _per_cu_levels(priv: SweepAnalysis, count: int, simulated: bool) -> list[Level]:
    levels = []
    for k, name in enumerate(per_cu_names(count)):
        lv = _plateau_level(name, "per_cu", priv, k, simulated)
        if k < len(priv.steps):
            _with_capacity(lv, priv, k, 1.0, simulated)
        else:
            lv.notes.append(f"no boundary within the private sweep: at least "
                            f"{fmt_bytes(priv.plateaus[k].size_hi_bytes)} per SM/CU")
        levels.append(lv)
    return levels


def _memory_reached(plats, max_size: float, documented: list[float], is_private: bool,
                    llc_bytes: int | None) -> bool:
    """Is the last plateau main memory? It must be clearly past every documented cache, or, with
    nothing documented, be a plateau the shared sweep followed for at least an octave."""
    if len(plats) < 2:
        return not is_private and max_size >= max(1.5 * max(documented, default=0.0), 512 * 2**20)
    if documented:
        if is_private:
            # one buffer read by every SM fills a split L2 at half its size: past it is memory
            return max_size >= max(max(documented), 1.5 * (llc_bytes or 0))
        return max_size >= 1.5 * max(documented)
    last = plats[-1]
    return not is_private and math.log2(last.size_hi_bytes / last.size_lo_bytes) >= 1.0


def _device_levels(an: SweepAnalysis, start: int, facts: DeviceFacts, scale: float, is_private: bool,
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
    mem = _memory_reached(plats, max_size, documented, is_private, facts.llc_bytes_reported)
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
        lv = _plateau_level(name, "per_xcd" if per_xcd else "device", an, k, facts.simulated)
        if note:
            lv.notes.append(note)
        # a private sweep over one shared buffer (reference tables) shows each XCD the whole
        # buffer; distinct rows per program and the shared sweep spread it over the XCDs
        divisor = xcds if per_xcd and spread else 1
        if k < len(steps):
            _with_capacity(lv, an, k, scale / divisor, facts.simulated)
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
        levels.append(_plateau_level(facts.memory_kind, "device", an, start + len(plats) - 1, facts.simulated))
    elif an.sweep == "shared":
        warnings.append(f"the shared sweep ended at {fmt_bytes(max_size)} without a clear memory "
                        f"plateau; run with a larger --max-working-set")
    return levels


def _check_ceilings(levels: list[Level], facts: DeviceFacts, warnings: list[str]) -> None:
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


def detect_levels(records: list[Measurement], facts: DeviceFacts) -> Detection:
    """Find, name and size the cache levels in ``records``; records of the carveout sweeps (an
    asked-for carveout) go to their own table (detector.carveouts), not into the levels."""
    everything, records = records, main_records(records)
    warnings: list[str] = []
    sweeps: dict[str, SweepAnalysis] = {}
    # the shared sweep first: its device levels' speeds tell the private sweep which of its
    # plateaus are those levels seen again (not partial hits), however short
    for name in ("shared", "private"):
        if any(r.sweep == name for r in records):
            known = tuple((p.level_log, p.size_lo_bytes, p.size_hi_bytes)
                          for p in sweeps["shared"].plateaus) if "shared" in sweeps else ()
            an = analyze_sweep(build_curve(records, name), warnings, known=known,
                               split_first=name == "shared" and facts.vendor == "nvidia",
                               models=DEVICE_MODELS if name == "shared" else None)
            if an is not None:
                sweeps[name] = an
    if not sweeps:
        raise InputError("no bandwidth sweep has enough distinct sizes to analyze (at least 6 are "
                         "needed; a live run needs a --budget of about 60 or more)")
    chase = analyze_latency(records, warnings)
    if chase is not None:
        sweeps["chase"] = chase
    levels: list[Level] = []
    priv, shared = sweeps.get("private"), sweeps.get("shared")
    n_cu = 0
    if priv is not None:
        n_cu = _per_cu_count(priv, shared, facts)
        if shared is not None and 0 < n_cu <= len(priv.steps):
            _against_device_curve(priv, n_cu - 1, shared)
        levels += _per_cu_levels(priv, n_cu, facts.simulated)
    if shared is not None:
        device = _device_levels(shared, 0, facts, 1.0, False, warnings)
        levels += device
        if priv is not None and n_cu < len(priv.plateaus):
            _note_private_far_end(priv, n_cu, device)
    elif priv is not None and n_cu < len(priv.plateaus):
        levels += _device_levels(priv, n_cu, facts, _footprint_scale(priv), True, warnings)
    attach_peaks(levels, records)
    if chase is not None:
        attach_latency(levels, chase, records)
        attach_lines(levels, records)
    _check_ceilings(levels, facts, warnings)
    if facts.simulated:
        warnings.append("simulated device: these figures come from a model, not from hardware")
    return Detection(levels, sweeps, warnings, carveouts=carveout_table(everything, facts, levels))


def _note_private_far_end(priv: SweepAnalysis, rest: int, device: list[Level]) -> None:
    """The private sweep's far end shows device levels again: say so on them, never list twice."""
    scale = _footprint_scale(priv)
    for plat_i in range(rest, len(priv.plateaus)):
        p = priv.plateaus[plat_i]
        # the device level of the nearest speed (not the next in order: a private sweep can pass
        # a level that its per-SM/CU fall hides, as an MI300X's L2 per XCD under its L1's)
        lv = min(device, key=lambda d: abs(math.log(d.bandwidth_gbs / p.bandwidth_gbs)), default=None)
        if lv is None or abs(math.log(lv.bandwidth_gbs / p.bandwidth_gbs)) > math.log(SEEN_AGAIN):
            continue
        text = f"the private sweep shows this level again at {p.bandwidth_gbs:,.0f} GB/s"
        if plat_i < len(priv.steps):
            cap = priv.steps[plat_i].estimate.capacity_bytes * scale
            text += f", filling at a device-wide footprint of {fmt_bytes(cap)}"
            agg = lv.aggregate_capacity_bytes or lv.capacity_bytes
            if agg and lv.name == "L2" and 0.3 < cap / agg < 0.7:
                text += (" (about half the shared sweep's figure: with every SM reading one buffer, each "
                         "L2 partition holds its own copy of the data)")
        lv.notes.append(text + "; not listed twice")


UNCERTAIN = 1.04     # a capacity whose interval spans more than this factor either way is measured again
REFINE_SIZES = 6     # sizes measured again per uncertain capacity


def uncertain_falls(detection: Detection) -> list[tuple[str, list[float]]]:
    """(sweep, sizes in that sweep's x units) for each level fall whose capacity interval is still
    wide: sizes spread over the interval, for measure.session.refine_intervals."""
    out = []
    for name in ("private", "shared"):
        an = detection.sweeps.get(name)
        if an is None:
            continue
        for st in an.steps:
            e = st.estimate
            wide = e.high_bytes > e.capacity_bytes * UNCERTAIN or e.low_bytes < e.capacity_bytes / UNCERTAIN
            if wide:
                # most where the fall begins (what places a decline's or a tail's start), two past it
                top = min(e.high_bytes, e.capacity_bytes * 1.3)
                xs = list(np.geomspace(e.low_bytes, top, REFINE_SIZES + 2)[1:-1])
                if e.high_bytes > top * 1.1:
                    xs += list(np.geomspace(top, e.high_bytes, 4)[1:-1])
                out.append((name, [float(x) for x in xs]))
    return out
