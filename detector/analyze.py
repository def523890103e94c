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
from functools import partial

import numpy as np

from detect_caches.detector.above_tail import without_tail_above
from detect_caches.detector.analyze_sweep import KNOWN_SPEED, analyze_sweep, fallen, thirds
from detect_caches.detector.inside import INSIDE_OCTAVES, inside_level
from detect_caches.detector.capacity import estimate_capacity
from detect_caches.detector.carveouts import carveout_table, main_records
from detect_caches.detector.curve import build_curve
from detect_caches.detector.flatten import flattened
from detect_caches.detector.hitmodels import DEVICE_MODELS
from detect_caches.detector.joint import share_capacities
from detect_caches.detector.latency import analyze_latency, attach_latency, attach_lines
from detect_caches.detector.level_figures import check_ceilings, device_levels, per_cu_levels
from detect_caches.detector.levels import Detection, Level, SweepAnalysis
from detect_caches.detector.memo import Memo, analyze
from detect_caches.detector.plateau_speed import plateau_speed
from detect_caches.detector.peaks import attach_peaks
from detect_caches.detector.telling import contest_sizes, rival_sizes, telling_sizes
from detect_caches.detector.units import fmt_bytes
from detect_caches.device import DeviceFacts, is_rdna
from detect_caches.errors import InputError
from detect_caches.records import Measurement

# a device cache's fall: LRU or random replacement over hashed or address-bit sets (a split L2 has
# a model of its own); pseudo-LRU declines and cliffs onto partial hits are per-SM/CU behaviours
# (the L1 tables), which on a device cache's slow start would read its first misses as its size
FASTER = 1.15           # a private level this much faster than every device level is per-SM/CU: the
                         # private launch reaches a device level no faster than the shared one does
SEEN_AGAIN = 1.25        # a private plateau this close in speed to a device level is that level seen again
INSIDE_SPAN = 2 ** (INSIDE_OCTAVES[1] + 0.5)   # how far past its start inside_level reads a lower plateau
SAME_FALL = 1.3          # a private fall this close (device-wide bytes) to one of the shared sweep's is
                         # the same device level's


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
    """Is private plateau ``n`` a device level seen again: at a shared plateau's speed (its
    points', or theirs less the fall above's lift) over overlapping device-wide sizes, or falling
    where a shared level falls?"""
    p = priv.plateaus[n]
    lo, hi = p.size_lo_bytes * scale, p.size_hi_bytes * scale
    # its speed, and the same less the lift of the fall above: a per-SM/CU level's random tail
    # still hits in its first sizes (physics GPU 142's L1: 1.16x the L2 over the plateau); its
    # own fall's first misses are left out too, so a level that sags into its fall stays one
    speeds = (p.level_log, plateau_speed(priv, n)[0])
    for q in shared.plateaus:
        if any(abs(v - q.level_log) <= KNOWN_SPEED for v in speeds) and lo <= q.size_hi_bytes * 1.5 \
                and hi >= q.size_lo_bytes / 1.5:
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


def _still_falling(an: SweepAnalysis, i: int):
    """The points of the last third of plateau ``i`` when it is the sweep's last and its speed
    still falls from its first third to its last by more than 3 point sigmas; else None."""
    p = an.plateaus[i]
    if i != len(an.plateaus) - 1 or fallen(p, an.curve.y, an.point_bin) <= 3 * (an.point_sigma or an.sigma):
        return None
    return thirds(p, an.point_bin)[1]


def _against_device_curve(priv: SweepAnalysis, k: int, shared: SweepAnalysis, memo: Memo | None = None) -> None:
    """Estimate the fall of the last per-SM/CU level again, with the speed below it read point by
    point from the shared sweep at the same device-wide footprint (scaled to the private sweep's
    own speed for that level). On a part with many SMs the L2's share per SM sits just above the
    L1 and the two falls run into each other: against one constant plateau the L1's hit rates
    would include the L2's misses. The shared curve is read with its noise averaged out where it
    is flat (detector.flatten)."""
    sel = priv.step_points(k)
    foot = priv.curve.footprint_bytes[sel]
    sx = np.log(shared.curve.size_bytes)
    sy = flattened(sx, shared.curve.y, shared.point_sigma or shared.sigma)

    def shared_at(ln_bytes):
        """The shared sweep's log10 speed at these device-wide footprints (ln bytes)."""
        return np.interp(ln_bytes, sx, sy, left=shared.plateaus[0].level_log, right=sy[-1])
    below = shared_at(np.log(foot))
    nxt = priv.plateaus[k + 1]
    scale = float(np.median(priv.curve.footprint_bytes / priv.curve.size_bytes))
    mid = math.sqrt(nxt.size_lo_bytes * nxt.size_hi_bytes) * scale
    offset = nxt.level_log - float(shared_at(math.log(mid)))
    settling = _still_falling(priv, k + 1)
    if settling is not None:
        # the sweep's last plateau still falls (a random tail the sweep ended inside): the
        # private speed for that level is read where it has fallen furthest, its last third
        offset = float(np.median(priv.curve.y[settling] - shared_at(np.log(priv.curve.footprint_bytes[settling]))))
    seen_again = abs(offset) <= math.log10(1.3)
    if not seen_again:
        offset = 0.0   # the next private plateau is not the shared sweep's level seen again
    old = priv.steps[k]
    sigma = priv.point_sigma or priv.sigma
    curve = without_tail_above(priv.curve, priv.steps[k - 1] if k > 0 else None, priv.plateaus[k].size_lo_bytes,
                               priv.plateaus[k].size_hi_bytes, sigma)
    lower = inside_level(curve, nxt, upper=False, sigma=sigma)
    if seen_again and settling is not None:
        lower = (float(np.median(below + offset)), lower[1])
    elif seen_again:
        # the fit's lower speed is the curve below's at its median point (detector.capacity scales
        # the shape to it): the next plateau's speed moved along that curve from where it was read
        # (a level further down when the L1 and the L2 fall together, as on an MI300X)
        read_at = math.log(math.sqrt(nxt.size_lo_bytes * min(nxt.size_hi_bytes, nxt.size_lo_bytes * INSIDE_SPAN)) * scale)
        there = float(shared_at(read_at)) + offset
        lower = (lower[0] - there + float(np.median(below + offset)), lower[1])
    # through the memo: the pass after the latency sweep meets the fit made beside it (pipeline.sweep_detect)
    fit = estimate_capacity if memo is None else partial(memo.call, estimate_capacity)
    est = fit(curve.size_bytes[sel], curve.y[sel], priv.plateaus[k].level_log,
              below + offset, priv.sigma, seed=k, resample_sigma=priv.point_sigma,
              plateaus=(inside_level(curve, priv.plateaus[k], upper=True, sigma=sigma, first=k == 0),
                        lower))
    priv.steps[k] = type(old)(upper=old.upper, estimate=est, rise=old.rise, partials=old.partials)


def detect_levels(records: list[Measurement], facts: DeviceFacts, *, memo: Memo | None = None) -> Detection:
    """Find, name and size the cache levels in ``records``; records of the carveout sweeps (an
    asked-for carveout) go to their own table (detector.carveouts), not into the levels.
    ``memo``: a run's analyses kept between its passes (detector.memo)."""
    everything, records = records, main_records(records)
    warnings: list[str] = []
    sweeps: dict[str, SweepAnalysis] = {}
    # the shared sweep first: its device levels' speeds tell the private sweep which of its
    # plateaus are those levels seen again (not partial hits), however short
    for name in ("shared", "private"):
        if any(r.sweep == name for r in records):
            known = tuple((p.level_log, p.size_lo_bytes, p.size_hi_bytes)
                          for p in sweeps["shared"].plateaus) if "shared" in sweeps else ()
            an = analyze(memo, analyze_sweep, build_curve(records, name), warnings, known=known,
                         split_first=name == "shared" and facts.vendor == "nvidia",
                         models=DEVICE_MODELS if name == "shared" else None)
            if an is not None:
                sweeps[name] = an
    if not sweeps:
        raise InputError("no bandwidth sweep has enough distinct sizes to analyze (at least 6 are "
                         "needed; a live run needs a --budget of about 60 or more)")
    chase = analyze_latency(records, warnings, memo=memo)
    if chase is not None:
        sweeps["chase"] = chase
    levels: list[Level] = []
    priv, shared = sweeps.get("private"), sweeps.get("shared")
    n_cu = 0
    if priv is not None:
        n_cu = _per_cu_count(priv, shared, facts)
        if shared is not None and 0 < n_cu <= len(priv.steps):
            _against_device_curve(priv, n_cu - 1, shared, memo)
        levels += per_cu_levels(priv, n_cu, facts.simulated)
    if shared is not None:
        device = device_levels(shared, 0, facts, 1.0, False, warnings)
        levels += device
        if priv is not None and n_cu < len(priv.plateaus):
            _note_private_far_end(priv, n_cu, device)
    elif priv is not None and n_cu < len(priv.plateaus):
        levels += device_levels(priv, n_cu, facts, _footprint_scale(priv), True, warnings)
    attach_peaks(levels, records)
    if chase is not None:
        attach_latency(levels, chase, records)
        share_capacities(levels, n_cu, priv, chase, facts.simulated)
        attach_lines(levels, records)
    check_ceilings(levels, facts, warnings)
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
STILL_UNCERTAIN = 1.10   # ... and again (pipeline.sweep_detect.ROUNDS) where it still spans this much ...
STILL_NOISY = 0.04       # ... and a rerun would move it this much: noise limits it (a noisy, low-ratio
                         # fall), not the fall's shape (an H200's L1: an aliasing dip under its cliff)
REPEAT_REACH = 2.0   # ... or where this many repeatabilities (ln C) reach past that factor
REFINE_SIZES = 6     # sizes measured again inside each uncertain capacity's interval (two more past
                     # it where it is wide, and up to detector.telling.TELLING_SIZES where models part)


def uncertain_falls(detection: Detection, *, wider_than: float = UNCERTAIN,
                    noisier_than: float = 0.0, rivals: bool = False) -> list[tuple[str, list[float]]]:
    """(sweep, sizes in that sweep's x units) for each level fall whose capacity interval is still
    wider than ``wider_than`` either way (or REPEAT_REACH of its repeatabilities are) and whose
    repeatability is at least ``noisier_than``:
    sizes spread over the interval, and where the fall's leading models part, for
    measure.session.refine_intervals; ``rivals``: also where a device fall's leader and its rival
    part (detector.telling.rival_sizes), and where any fall's two leading models part when they
    read it apart (detector.telling.contest_sizes), after the first round."""
    out = []
    for name in ("private", "shared"):
        an = detection.sweeps.get(name)
        if an is None:
            continue
        point_sigma, largest = an.point_sigma or an.sigma, float(np.max(an.curve.size_bytes))
        for st in an.steps:
            e = st.estimate.alone or st.estimate     # the fall's own doubt, not a knee's (detector.joint)
            reach = min(3 * e.high_bytes, largest)    # where models may still part: 3x the interval's top
            wide = e.high_bytes > e.capacity_bytes * wider_than or e.low_bytes < e.capacity_bytes / wider_than
            # ... or narrower than its own repeatability says it should be: a pseudo-LRU decline's
            # grid profile is jagged along its slope-vs-start valley (generated GPU 62 seed 5's L1:
            # +9.9%, an interval of 176-183 KB, a repeatability of 2.6%); its sizes still inside the
            # interval (spread over the repeatability's reach instead, formula GPUs 300 x 2 read
            # 98.3 -> 97.7% within 3%, SIMULATED)
            wide = wide or REPEAT_REACH * e.noise_repeatability > math.log(wider_than)
            # noise within the models, not a model left out winning a rerun (refined for that too,
            # physics GPU 46 seed 1's random L2 read +9.5%, within 3% without)
            if wide and e.noise_repeatability >= noisier_than:
                # most where the fall begins (what places a decline's or a tail's start), two past it
                top = min(e.high_bytes, e.capacity_bytes * 1.3)
                xs = list(np.geomspace(e.low_bytes, top, REFINE_SIZES + 2)[1:-1])
                if e.high_bytes > top * 1.1:
                    xs += list(np.geomspace(top, e.high_bytes, 4)[1:-1])
                # and where the fall's leading models part most (a tail against a far half), up to
                # 3x the interval's top: past the fit's window such points still place the level
                # below (cut at the window's end, 100 physics GPUs x 4 seeds read 84.9 -> 83.6% within 3%)
                xs += telling_sizes(e.fit, low_bytes=e.low_bytes, high_bytes=reach, point_sigma=point_sigma)
            else:
                xs = []
            # a device fall's rival with a capacity well apart, left out of the estimate by the
            # evidence so far, measured where the two part (every later round: until the evidence
            # settles it; in the first, generated GPU 26 seed 3's L2, 1.2x over memory under 3%
            # noise, merged into memory); per-SM/CU falls not (their rivals part in a decline's
            # tail: SIMULATED physics L1s read worse, the built-in mi300x L1 13% on one seed of 8)
            if rivals and name == "shared":
                xs += rival_sizes(e.fit, low_bytes=e.low_bytes / 2, high_bytes=reach, point_sigma=point_sigma,
                                  measured=an.curve.size_bytes)
            # ... and any fall's two leading models, both in the estimate, 3% or more apart (SIMULATED,
            # spread within 2% on formula GPUs 300 x 2 94.4 -> 95.2%, held-out seeds 96.0 -> 96.3%)
            if rivals:
                xs += contest_sizes(e.fit, low_bytes=e.low_bytes / 2, high_bytes=reach, point_sigma=point_sigma,
                                    measured=an.curve.size_bytes)
            if xs:
                out.append((name, [float(x) for x in xs]))
    return out
