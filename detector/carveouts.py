"""The L1 under each shared-memory carveout, read off the carveout sweeps' rows (records with a
``carveout_kib``): each carveout's curve, inside the window its sweep measured, through
`analyze_sweep`, its first fall being the L1; then the unified array as the L1 sees it (L1 +
carveout), the slope of L1 against carveout (about -1 where the L1 is the array's remainder) and
the reserve (documented array - carveout - L1).

The driver's default launch is read the same way from the main private sweep, so every row of
the table comes from one estimator; a carveout whose L1 equals the default's within 1% was not
granted (the driver kept its own carveout).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from detect_caches.detector.carveout_fall import falls_at, first_fall
from detect_caches.detector.units import fmt_bytes
from detect_caches.carveout import (MIN_BYTES, array_bytes, documented_array_kib, implied_carveout_kib,
                                    preference_pct, reserved_per_block, supported_carveouts, window_for)
from detect_caches.errors import InputError
from detect_caches.records import Measurement

KIB = 1024
SAME_AS_DEFAULT = 0.01     # an L1 this close to the default's: the carveout was not granted
SLOPE_TOL = 0.1            # L1 against carveout: -1 within this, or the array is not one array


def is_carveout(r: Measurement) -> bool:
    return not math.isnan(r.carveout_kib)


def main_records(records: list[Measurement]) -> list[Measurement]:
    """The run's own records: launches under the driver's choice of carveout."""
    return [r for r in records if not is_carveout(r)]


@dataclass
class CarveoutL1:
    """One row of the table: the L1 a launch saw when it asked for ``carveout_kib``."""

    carveout_kib: int | None          # the default row: the carveout its L1 implies (None: unknown)
    preference_pct: int | None        # what the launch asked; None: the driver's choice
    l1_capacity_bytes: int | None
    l1_low_bytes: int | None
    l1_high_bytes: int | None
    bandwidth_gbs: float | None
    latency_ns: float | None
    fall_shape: str
    reached: bool
    driver_default: bool = False
    measurements: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class UnifiedArray:
    seen_kib: float | None            # median of L1 + carveout over the granted carveouts
    documented_kib: int | None
    reserve_kib: dict[str, float]     # carveout (KiB, as text) -> documented - carveout - L1
    reserve_median_kib: float | None
    slope: float | None               # d L1 / d carveout over the granted carveouts
    carveouts_used: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CarveoutTable:
    rows: list[CarveoutL1]
    array: UnifiedArray
    warnings: list[str] = field(default_factory=list)

    @property
    def not_reached(self) -> list[int]:
        """Carveouts whose L1 was read and is the default's (those with no L1 read are not known)."""
        return [r.carveout_kib for r in self.rows if not r.reached and not r.driver_default and r.l1_capacity_bytes]


def _int(v) -> int | None:
    return None if v is None else int(round(v))


def _latency(chase: list[Measurement], capacity: float | None) -> float | None:
    """Median latency of the chase points inside the L1 (chains smaller than its capacity)."""
    if not capacity:
        return None
    ns = [r.latency_ns for r in chase if r.working_set_bytes < capacity and r.latency_ns > 0]
    return float(np.median(ns)) if ns else None


def _row(carveout_kib, pct, rows, chase, window, *, driver_default=False) -> CarveoutL1:
    est, bw = first_fall(rows, window)
    cap = est.capacity_bytes if est is not None else None
    return CarveoutL1(carveout_kib, pct, None if cap is None else int(round(cap)),
                      None if est is None else int(round(est.interval_bytes[0])),
                      None if est is None else int(round(est.interval_bytes[1])),
                      None if bw is None else round(float(bw), 1), _latency(chase, cap),
                      est.shape if est is not None else "", cap is not None, driver_default, len(rows))


def _pct(carveout_kib: int, facts) -> int | None:
    try:
        return preference_pct(carveout_kib, facts)
    except InputError:      # the facts name no arch that offers it (analyze without --device-json)
        return None


def unified_array(rows: list[CarveoutL1], facts) -> UnifiedArray:
    granted = [r for r in rows if r.reached and not r.driver_default and r.l1_capacity_bytes]
    documented = documented_array_kib(facts)
    seen = [r.l1_capacity_bytes / KIB + r.carveout_kib for r in granted]
    reserve = {str(r.carveout_kib): round(documented - r.carveout_kib - r.l1_capacity_bytes / KIB, 2)
               for r in granted} if documented else {}
    slope = None
    if len({r.carveout_kib for r in granted}) >= 2:
        slope = round(float(np.polyfit([r.carveout_kib for r in granted],
                                       [r.l1_capacity_bytes / KIB for r in granted], 1)[0]), 3)
    return UnifiedArray(round(float(np.median(seen)), 2) if seen else None, documented, reserve,
                        round(float(np.median(list(reserve.values()))), 2) if reserve else None, slope, len(granted))


def analyze_carveouts(records: list[Measurement], facts, *, default_l1_bytes: float | None = None,
                      default_l1=None) -> CarveoutTable | None:
    """The carveout table, or None when no record ran under an asked-for carveout.
    ``default_l1_bytes``: the main analysis' L1 (the windows' array where none is documented);
    ``default_l1``: the main analysis' L1 level, which then is the default launch's row."""
    carved = [r for r in records if is_carveout(r) and r.sweep == "private" and r.metric == "bandwidth"]
    if not carved:
        return None
    warnings: list[str] = []
    array = array_bytes(facts, default_l1_bytes)
    main = [r for r in records if not is_carveout(r) and r.sweep == "private" and r.metric == "bandwidth"]
    chase = [r for r in records if not is_carveout(r) and r.sweep == "chase" and r.phase in ("coarse", "refine")]
    # the default launch carves at least nothing: its window reaches the whole array's L1, and it
    # starts where the run's own sweep started (the whole plateau: the fall is read in context)
    window = dataclasses.replace(window_for(0, array, facts), lo_bytes=MIN_BYTES) if array else None
    default = _row(None, None, main, chase, window, driver_default=True)
    if default_l1 is not None and default_l1.capacity_bytes:
        # the run's own L1, as its report states it: read twice, a launch's L1 could disagree
        # with itself, and the carveouts that were not granted are told apart by it
        default = dataclasses.replace(
            default, l1_capacity_bytes=int(round(default_l1.capacity_bytes)),
            l1_low_bytes=_int(default_l1.capacity_low_bytes), l1_high_bytes=_int(default_l1.capacity_high_bytes),
            fall_shape=default_l1.fall_shape or default.fall_shape,
            latency_ns=_latency(chase, default_l1.capacity_bytes))
    if default.l1_capacity_bytes:
        default.carveout_kib = implied_carveout_kib(default.l1_capacity_bytes, facts)
    rows = [default] if main else []
    for c in sorted({int(r.carveout_kib) for r in carved}):
        mine = [r for r in carved if r.carveout_kib == c]
        chase = [r for r in records if r.sweep == "chase" and r.carveout_kib == c]
        row = _row(c, _pct(c, facts), mine, chase, window_for(c, array, facts) if array else None)
        if c != default.carveout_kib and default.l1_capacity_bytes:
            d = default.l1_capacity_bytes
            if abs((row.l1_capacity_bytes or 0) / d - 1) > SAME_AS_DEFAULT and falls_at(mine, d):
                # read as the default's L1: the fit over this launch's whole window can be pulled
                # off it by a point that happens to run fast past it
                row = dataclasses.replace(row, l1_capacity_bytes=default.l1_capacity_bytes,
                                          l1_low_bytes=default.l1_low_bytes, l1_high_bytes=default.l1_high_bytes,
                                          fall_shape=default.fall_shape)
            if row.l1_capacity_bytes and abs(row.l1_capacity_bytes / d - 1) <= SAME_AS_DEFAULT:
                # the default launch's L1 read again: the table states the default's reading
                row = dataclasses.replace(row, l1_capacity_bytes=d, l1_low_bytes=default.l1_low_bytes,
                                          l1_high_bytes=default.l1_high_bytes, fall_shape=default.fall_shape,
                                          reached=False)
        if row.l1_capacity_bytes is None:
            warnings.append(f"the {c} KiB carveout's sweep shows no fall: its L1 is not known")
        rows.append(row)
    table = CarveoutTable(rows, unified_array(rows, facts), warnings)
    if table.not_reached:
        warnings.append(f"carveout(s) of {', '.join(map(str, table.not_reached))} KiB were not granted: the "
                        f"L1 stayed the default's (the driver keeps at least its own carveout for this launch)")
    slope = table.array.slope
    if slope is not None and abs(slope + 1) > SLOPE_TOL:
        warnings.append(f"the L1 changes by {slope:+.2f} KiB per KiB carved out, not -1: the L1 and shared "
                        f"memory do not look like one array here (or some carveouts' L1s are misread)")
    return table


def carveout_table(records: list[Measurement], facts, levels) -> CarveoutTable | None:
    """The table for a detection's ``levels`` (their first per-SM level is the default's L1)."""
    l1 = next((lv for lv in levels if lv.scope == "per_cu"), None)
    return analyze_carveouts(records, facts, default_l1_bytes=l1.capacity_bytes if l1 else None, default_l1=l1)


def recorded_launch(records: list[Measurement], facts) -> dict | None:
    """What recorded rows say of the default private launch: its blocks (programs) per SM; the
    kernel's shared memory is not in the rows (None)."""
    rows = [r for r in main_records(records) if r.sweep == "private" and r.programs and r.rows]
    if not rows or not supported_carveouts(facts):
        return None
    per_sm = max(1, rows[0].programs // rows[0].rows)
    return {"preference_pct": None, "shared_bytes_per_block": None, "blocks_per_sm": per_sm,
            "reserved_bytes_per_block": reserved_per_block(facts), "least_carveout_kib": None}


def launch_carveout(launch: dict | None, l1_bytes: float | None, facts) -> dict | None:
    """result.json's ``device.carveout``: what the run's launches ran under (``launch``: from
    measure.carveout.LaunchShared.to_dict, or recorded_launch), with the carveout the measured
    L1 implies of the documented array. None where no L1 is carved (AMD, before sm_70)."""
    if not supported_carveouts(facts):
        return None
    out = dict(launch or {"preference_pct": None, "shared_bytes_per_block": None, "blocks_per_sm": None,
                          "reserved_bytes_per_block": reserved_per_block(facts), "least_carveout_kib": None})
    out["implied_carveout_kib"] = implied_carveout_kib(l1_bytes, facts)
    out["documented_array_kib"] = documented_array_kib(facts)
    return out


def launch_note(carveout: dict | None, l1_bytes: float | None) -> str:
    """The L1's line: how much shared memory its launch had carved out, and who chose it."""
    if not carveout or not l1_bytes or carveout.get("implied_carveout_kib") is None:
        return ""
    pct = carveout.get("preference_pct")
    who = "the driver's choice for this launch" if pct is None else f"asked for by a carveout preference of {pct}%"
    text = (f"L1 {fmt_bytes(l1_bytes)} with {carveout['implied_carveout_kib']} KiB of shared memory carved out "
            f"({who}; of a documented {carveout['documented_array_kib']} KiB L1/shared array)")
    if carveout.get("blocks_per_sm"):
        shared = carveout.get("shared_bytes_per_block")
        text += (f"; the launch ran {carveout['blocks_per_sm']} blocks per SM of {'?' if shared is None else shared} B "
                 f"shared memory and {carveout.get('reserved_bytes_per_block', 0)} B reserved each")
        if carveout.get("least_carveout_kib") is not None:
            text += f", so at least {carveout['least_carveout_kib']} KiB had to be carved out"
    return text
