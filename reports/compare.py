"""Baseline comparison: which levels drifted between two results, with tolerances and intervals.

A capacity or bandwidth drifts when its relative change exceeds the tolerance *and* the two
intervals (capacity low-high; bandwidth +- its plateau spread) do not overlap. A level that
appears or vanishes is drift.
"""
from __future__ import annotations

from dataclasses import dataclass

from measure.errors import InputError
from reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table

DEFAULT_CAPACITY_TOL = 0.05    # 5%
DEFAULT_BANDWIDTH_TOL = 0.10   # 10%


@dataclass
class Comparison:
    rows: list[list[str]]
    drift: bool

    def markdown(self) -> str:
        table = markdown_table(["level", "quantity", "baseline", "current", "change", "verdict"], self.rows)
        verdict = "**drift found**" if self.drift else "no drift"
        return f"{table}\n\nResult: {verdict}.\n"


def check_comparable(base: dict, cur: dict, *, force: bool = False) -> None:
    if force:
        return
    b, c = base["device"].get("name"), cur["device"].get("name")
    if b != c:
        raise InputError(f"the baseline is from {b!r} and the current result from {c!r}; comparing "
                         f"different device models says nothing about drift (use --force to compare anyway)")


def _overlap(a_lo, a_hi, b_lo, b_hi) -> bool:
    return a_lo <= b_hi and b_lo <= a_hi


def compare_results(base: dict, cur: dict, *, capacity_tol: float = DEFAULT_CAPACITY_TOL,
                    bandwidth_tol: float = DEFAULT_BANDWIDTH_TOL) -> Comparison:
    if capacity_tol < 0 or bandwidth_tol < 0:
        raise InputError("tolerances must be >= 0")
    bl = {level_key(lv): lv for lv in base["levels"]}
    cl = {level_key(lv): lv for lv in cur["levels"]}
    rows, drift = [], False
    for key in list(bl) + [k for k in cl if k not in bl]:
        b, c = bl.get(key), cl.get(key)
        if b is None or c is None:
            drift = True
            rows.append([key, "level", "present" if b else "absent", "present" if c else "absent",
                         "-", "DRIFT (level " + ("vanished" if c is None else "appeared") + ")"])
            continue
        bcap, ccap = b.get("capacity_bytes"), c.get("capacity_bytes")
        if bcap is not None or ccap is not None:
            if bcap is None or ccap is None:
                drift = True
                rows.append([key, "capacity", fmt_bytes(bcap), fmt_bytes(ccap), "-", "DRIFT (capacity lost or gained)"])
            else:
                change = ccap / bcap - 1
                overlap = _overlap(b.get("capacity_low_bytes") or bcap, b.get("capacity_high_bytes") or bcap,
                                   c.get("capacity_low_bytes") or ccap, c.get("capacity_high_bytes") or ccap)
                bad = abs(change) > capacity_tol and not overlap
                drift |= bad
                why = "DRIFT" if bad else ("ok (intervals overlap)" if abs(change) > capacity_tol else "ok")
                rows.append([key, "capacity", fmt_bytes(bcap), fmt_bytes(ccap), f"{change:+.1%}", why])
        bbw, cbw = b["bandwidth_gbs"], c["bandwidth_gbs"]
        change = cbw / bbw - 1
        bs, cs = b.get("bandwidth_spread_gbs") or 0.0, c.get("bandwidth_spread_gbs") or 0.0
        overlap = _overlap(bbw - bs, bbw + bs, cbw - cs, cbw + cs)
        bad = abs(change) > bandwidth_tol and not overlap
        drift |= bad
        why = "DRIFT" if bad else ("ok (spreads overlap)" if abs(change) > bandwidth_tol else "ok")
        rows.append([key, "bandwidth", fmt_gbs(bbw), fmt_gbs(cbw), f"{change:+.1%}", why])
    return Comparison(rows, drift)
