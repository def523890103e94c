"""Measurement records to named cache levels: the detector's one entry point."""
from __future__ import annotations

import math

import numpy as np

from detector.analyze_sweep import analyze_sweep, fmt_bytes
from detector.capacity import CapacityEstimate
from detector.peaks import attach_peaks

LOW_SHARE = 0.8   # a plateau below this share of its physical ceiling gets a warning
from detector.curve import build_curve
from detector.labels import PARTITION_NOTE, choose_boundaries, expected_device_bytes, hierarchy
from detector.levels import Detection, Level, SweepAnalysis
from measure.device import DeviceFacts
from measure.errors import InputError
from measure.records import Measurement


def _confidence(an: SweepAnalysis, step_index: int) -> float:
    """0..1 from the step's size against the noise, the interval's width, the fit and the
    segmentation's stability, less the share of noisy points near the boundary."""
    st = an.steps[step_index]
    hi, lo = an.plateaus[step_index], an.plateaus[step_index + 1]
    z = abs(hi.level_log - lo.level_log) / max(an.sigma, 1e-4)
    e = st.estimate
    rel_width = math.log2(max(e.high_bytes, 1) / max(e.low_bytes, 1))
    c = (1 - math.exp(-z / 8)) / (1 + 1.5 * rel_width) / (1 + 10 * max(e.fit_rms_log - an.sigma, 0))
    if not an.segmentation.cross_checked:
        c *= 0.8
    near = (an.curve.size_bytes >= e.low_bytes) & (an.curve.size_bytes <= e.high_bytes)
    if near.any():
        c *= 1 - 0.5 * float(an.curve.noisy[near].mean())
    return round(float(min(max(c, 0.0), 1.0)), 3)


def _plateau_conf(an: SweepAnalysis, i: int) -> float:
    p = an.plateaus[i]
    return round(float(min(1.0, p.n_points / 6) / (1 + 20 * p.spread_log)), 3)


def _with_capacity(level: Level, est: CapacityEstimate, scale: float) -> Level:
    level.capacity_bytes = int(round(est.capacity_bytes * scale))
    level.capacity_low_bytes = int(round(est.low_bytes * scale))
    level.capacity_high_bytes = int(round(est.high_bytes * scale))
    level.onset_bytes = int(round(est.onset_bytes * scale))
    level.transition_width_octaves = round(est.width_octaves, 3)
    if est.cliff:
        level.notes.append(f"capacity is the cliff between {fmt_bytes(est.low_bytes * scale)} (all hits) and "
                           f"{fmt_bytes(est.high_bytes * scale)}, resolved by bisection; what follows is a tail "
                           f"of partial hits, not more capacity")
    if est.retained_bytes > est.onset_bytes * 1.05:
        level.notes.append(f"past the onset the cache still served {fmt_bytes(est.retained_bytes * scale)} "
                           f"of the working set at once (hit rate x size): it holds at least that much")
    return level


def _plateau_level(name: str, scope: str, an: SweepAnalysis, i: int) -> Level:
    p = an.plateaus[i]
    spread = p.bandwidth_gbs * (10 ** p.spread_log - 1)
    return Level(name=name, scope=scope, bandwidth_gbs=round(p.bandwidth_gbs, 1),
                 bandwidth_spread_gbs=round(spread, 1), sweep=an.sweep,
                 confidence=_plateau_conf(an, i), plateau_lo_bytes=float(p.size_lo_bytes),
                 plateau_hi_bytes=float(p.size_hi_bytes))


def _footprint_scale(an: SweepAnalysis) -> float:
    """Device-wide distinct bytes per unit of the sweep's x axis."""
    c = an.curve
    return float(np.median(c.footprint_bytes / c.size_bytes))


def _per_cu_levels(an: SweepAnalysis, names: list[str],
                   device_gbs: float | None) -> tuple[list[Level], int]:
    """Per-SM/CU levels from the private sweep's first plateaus; returns them and the index of
    the first plateau left over (device levels seen again from the private sweep).

    With the shared sweep's fastest device plateau known (``device_gbs``), a private plateau
    still well above it is part of the last per-CU level's fall (a partial-hit state), not a
    device level: the per-CU capacity comes from the step into device-level speed.
    """
    levels = []
    n = min(len(names), len(an.plateaus))
    i = 0
    for k in range(n):
        end = i
        if k == n - 1 and device_gbs:
            while end + 1 < len(an.plateaus) and an.plateaus[end + 1].bandwidth_gbs > 1.3 * device_gbs:
                end += 1
        lv = _plateau_level(names[k], "per_cu", an, i)
        for j in range(i, end):
            e = an.steps[j].estimate
            lv.notes.append(f"a partial step at {fmt_bytes(e.capacity_bytes)} ({an.plateaus[j].bandwidth_gbs:,.0f} -> "
                            f"{an.plateaus[j + 1].bandwidth_gbs:,.0f} GB/s), still far above device-level "
                            f"speed: part of the working set keeps hitting in {names[k]}")
        if end < len(an.steps):
            est = an.steps[end].estimate
            if end > i and an.steps[i].estimate.cliff:
                est = an.steps[i].estimate   # a cliff, then a tail of partial hits: the cliff is the size
            elif end > i:   # the fall starts at the first step: keep its onset
                est = type(est)(**{**est.__dict__, "onset_bytes": an.steps[i].estimate.onset_bytes,
                                   "low_bytes": min(est.low_bytes, an.steps[i].estimate.onset_bytes)})
            _with_capacity(lv, est, 1.0)
            lv.confidence = _confidence(an, end)
        else:
            lv.notes.append(f"no boundary within the private sweep: at least "
                            f"{fmt_bytes(an.plateaus[end].size_hi_bytes)} per SM/CU")
        levels.append(lv)
        i = end + 1
    return levels, i


def _device_levels(an: SweepAnalysis, start: int, names: list[str], facts: DeviceFacts,
                   scale: float, is_private: bool, warnings: list[str]) -> list[Level]:
    """Device caches and memory from plateaus ``start..`` of ``an`` (x scaled to bytes)."""
    plats = an.plateaus[start:]
    steps = an.steps[start:]
    if not plats:
        return []
    max_size = float(an.curve.size_bytes.max()) * scale
    if an.usable_until_bytes:
        max_size = min(max_size, an.usable_until_bytes * scale)
    # one buffer read by every CU (reference tables): each XCD's L2 sees all of it
    spread = not (is_private and bool(np.all(an.curve.footprint_bytes == an.curve.size_bytes)))
    expected = [b for b in (expected_device_bytes(n, facts, spread) for n in names) if b]
    mem_reached = len(plats) >= 2 and (not expected or max_size >= 1.5 * max(expected))
    if not mem_reached and len(plats) >= 2 and not is_private and len(plats) > len(names):
        mem_reached = True
    # a shared sweep that stays on one plateau far past any documented cache saw only memory
    lone_memory = (len(plats) == 1 and not is_private
                   and max_size >= max(1.5 * max(expected, default=0.0), 512 * 2**20))
    if lone_memory:
        mem_reached = True
        warnings.append(f"the shared sweep shows one plateau up to {fmt_bytes(max_size)} and no device "
                        f"cache boundary; it is taken as {facts.memory_kind}")
    cache_plats = len(plats) - 1 if mem_reached else len(plats)
    caps = [s.estimate.capacity_bytes * scale for s in steps[:cache_plats]]
    jumps = [plats[i].level_log - plats[i + 1].level_log for i in range(len(caps))]
    chosen = choose_boundaries(caps, jumps, names, facts, spread=spread, max_size=max_size)
    levels: list[Level] = []
    begin = 0
    xcds = max(facts.xcds, 1)
    for name, end in zip(names, chosen):
        per_xcd = facts.vendor == "amd" and xcds > 1 and name == "L2"
        lv = _plateau_level(name, "per_xcd" if per_xcd else "device", an, start + begin)
        # a private sweep over one shared buffer (reference tables) shows each XCD the whole
        # buffer; distinct rows per program and the shared sweep spread it over the XCDs
        divisor = xcds if per_xcd and spread else 1
        _with_capacity(lv, steps[end].estimate, scale / divisor)
        if per_xcd:
            lv.aggregate_capacity_bytes = int(round(steps[end].estimate.capacity_bytes * scale / divisor * xcds))
            if spread:
                lv.notes.append(f"capacity per XCD; the {xcds} XCDs hold {fmt_bytes(lv.aggregate_capacity_bytes)} "
                                f"together (programs are spread over them round-robin)")
            else:
                lv.notes.append(f"capacity per XCD: every CU read one buffer, so each of the {xcds} "
                                f"XCDs' L2s held its own copy")
        lv.confidence = _confidence(an, start + end)
        api = expected_device_bytes(name, facts, spread)
        for k in range(begin, end):
            cap = steps[k].estimate.capacity_bytes * scale
            hi, lo = plats[k].bandwidth_gbs, plats[k + 1].bandwidth_gbs
            if name == "L2" and facts.vendor == "nvidia" and api and 0.3 < cap / api < 0.75:
                lv.notes.append(PARTITION_NOTE.format(cap=fmt_bytes(cap), hi=hi, lo=lo))
            else:
                lv.notes.append(f"an extra step at {fmt_bytes(cap)} ({hi:,.0f} -> {lo:,.0f} GB/s) that "
                                f"no documented cache explains; reported inside {name}")
        if api:
            lv.api_bytes = int(api / divisor)
            if not (lv.capacity_low_bytes <= lv.api_bytes <= lv.capacity_high_bytes):
                lv.notes.append(f"the API reports {fmt_bytes(lv.api_bytes)}; the data says "
                                f"{fmt_bytes(lv.capacity_bytes)} ({fmt_bytes(lv.capacity_low_bytes)}"
                                f" to {fmt_bytes(lv.capacity_high_bytes)})")
        levels.append(lv)
        begin = end + 1
    # names left without a boundary: a cache the sweep entered but never filled
    for name in names[len(chosen):]:
        if begin < cache_plats:
            lv = _plateau_level(name, "device", an, start + begin)
            lv.notes.append(f"not filled within the sweep: more than {fmt_bytes(max_size)}")
            api = expected_device_bytes(name, facts, spread)
            if api:
                lv.api_bytes = int(api)
                lv.notes.append(f"the API or vendor documents {fmt_bytes(api)}")
            for k in range(begin, cache_plats - 1):
                cap = steps[k].estimate.capacity_bytes * scale
                lv.notes.append(f"an extra step at {fmt_bytes(cap)} ({plats[k].bandwidth_gbs:,.0f} -> "
                                f"{plats[k + 1].bandwidth_gbs:,.0f} GB/s) inside its range")
            levels.append(lv)
            begin = cache_plats
    if mem_reached:
        mem = _plateau_level(facts.memory_kind, "device", an, start + len(plats) - 1)
        for k in range(begin, cache_plats):
            cap = steps[k].estimate.capacity_bytes * scale
            mem.notes.append(f"before memory's plateau the bandwidth steps down at {fmt_bytes(cap)} "
                             f"({plats[k].bandwidth_gbs:,.0f} -> {plats[k + 1].bandwidth_gbs:,.0f} GB/s), "
                             f"past every documented cache (TLB reach or a memory-side effect)")
        levels.append(mem)
    elif an.sweep == "shared":
        warnings.append(f"the shared sweep ended at {fmt_bytes(max_size)} without a clear memory "
                        f"plateau; run with a larger --max-working-set")
    return levels


def detect_levels(records: list[Measurement], facts: DeviceFacts) -> Detection:
    """Find, name and size the cache levels in ``records``."""
    warnings: list[str] = []
    sweeps: dict[str, SweepAnalysis] = {}
    for name in ("private", "shared"):
        if any(r.sweep == name for r in records):
            an = analyze_sweep(build_curve(records, name), warnings)
            if an is not None:
                sweeps[name] = an
    if not sweeps:
        raise InputError("no sweep has enough distinct sizes to analyze (at least 6 are needed; "
                         "a live run needs a --budget of about 60 or more)")
    per_cu_names, device_names = hierarchy(facts)
    levels: list[Level] = []
    priv, shared = sweeps.get("private"), sweeps.get("shared")
    rest = 0
    if priv is not None:
        device_gbs = shared.plateaus[0].bandwidth_gbs if shared is not None and shared.plateaus else None
        per_cu, rest = _per_cu_levels(priv, per_cu_names, device_gbs)
        levels += per_cu
    if shared is not None:
        levels += _device_levels(shared, 0, device_names, facts, 1.0, False, warnings)
        if priv is not None and rest < len(priv.plateaus):
            _note_private_far_end(priv, rest, levels, facts)
    elif priv is not None and rest < len(priv.plateaus):
        levels += _device_levels(priv, rest, device_names, facts, _footprint_scale(priv), True, warnings)
    attach_peaks(levels, records)
    for lv in levels:
        lv.ceiling_gbs = facts.ceiling_for(lv.name)
        if lv.ceiling_gbs:
            lv.ceiling_gbs = round(lv.ceiling_gbs, 1)
            if lv.bandwidth_gbs > 1.03 * lv.ceiling_gbs:
                warnings.append(f"the {lv.name} plateau ({lv.bandwidth_gbs:,.0f} GB/s) is above its physical "
                                f"ceiling ({lv.ceiling_gbs:,.0f} GB/s): the device facts or the measurement are wrong")
            elif lv.bandwidth_gbs < LOW_SHARE * lv.ceiling_gbs and not facts.simulated:
                warnings.append(f"the {lv.name} plateau reaches only {lv.bandwidth_gbs / lv.ceiling_gbs:.0%} of its "
                                f"physical ceiling ({lv.ceiling_gbs:,.0f} GB/s): another workload, throttling or a "
                                f"fault; a healthy card reaches 90% or more with this kernel")
    if facts.simulated:
        warnings.append("simulated device: these figures come from a model, not from hardware")
    return Detection(levels, sweeps, warnings)


def _note_private_far_end(priv: SweepAnalysis, rest: int, levels: list[Level], facts: DeviceFacts) -> None:
    """The private sweep's far end shows device levels again: say so on them, never list twice."""
    scale = _footprint_scale(priv)
    device = [lv for lv in levels if lv.scope != "per_cu"]
    for k, plat_i in enumerate(range(rest, len(priv.plateaus))):
        if k >= len(device):
            break
        lv = device[k]
        p = priv.plateaus[plat_i]
        text = f"the private sweep shows this level again at {p.bandwidth_gbs:,.0f} GB/s"
        if plat_i < len(priv.steps):
            cap = priv.steps[plat_i].estimate.capacity_bytes * scale
            text += f", filling at a device-wide footprint of {fmt_bytes(cap)}"
            agg = lv.aggregate_capacity_bytes or lv.capacity_bytes
            if agg and lv.name == "L2" and facts.vendor == "nvidia" and 0.3 < cap / agg < 0.7:
                text += (" (about half the shared sweep's figure: with every SM reading, each L2 "
                         "partition holds its own copy of the data)")
        lv.notes.append(text + "; not listed twice")
