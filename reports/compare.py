"""Baseline comparison: which levels drifted between two results of one GPU model.

A change is drift when it exceeds the tolerance (default 3% for capacities and bandwidths) and
is more than the two runs' repeatabilities explain: |change| > REPEAT_SIGMAS x the combined
1-sigma run-to-run spread each result measured for that figure. The capacity interval (where
the physical size may lie) is not used: that uncertainty is the same in both runs of one card.
A level that appears or vanishes is drift. A noisy or busy run widens its repeatability and
says so; it never produces a drift verdict of its own. Results of schema 1 carry no
repeatability: DEFAULT_REPEATABILITY stands in for it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from measure.errors import InputError
from reports.carveout_cause import carveout_cause
from reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table

DEFAULT_CAPACITY_TOL = 0.03
DEFAULT_BANDWIDTH_TOL = 0.03
REPEAT_SIGMAS = 3.0
DEFAULT_REPEATABILITY = 0.01     # when a result does not say (schema 1)
ENV_LABELS = {"driver": "driver", "cuda_runtime": "CUDA runtime", "hip_runtime": "HIP runtime",
              "vbios": "VBIOS", "ecc_mode": "ECC", "mig_mode": "MIG mode", "power_limit_w": "power limit (W)",
              "app_sm_clock_mhz": "application SM clock", "app_mem_clock_mhz": "application memory clock",
              "max_sm_clock_mhz": "max SM clock", "max_mem_clock_mhz": "max memory clock",
              "persistence_mode": "persistence mode", "compute_mode": "compute mode", "torch": "torch",
              "triton": "triton"}
NOISY_WORDS = ("noisy", "busy", "other process")


@dataclass
class Comparison:
    rows: list[list[str]]
    drift: bool
    environment: list[str] = field(default_factory=list)   # what changed around the card
    notes: list[str] = field(default_factory=list)
    drifted: list[str] = field(default_factory=list)       # "L1 capacity 221 KiB -> 205 KiB"
    explained: list[str] = field(default_factory=list)     # changes with a named cause, not drift

    def markdown(self) -> str:
        table = markdown_table(["level", "quantity", "baseline", "current", "change", "detectable", "verdict"],
                               self.rows)
        lines = [table, ""]
        if self.environment:
            lines += ["Changed around the card: " + "; ".join(self.environment) + ".", ""]
        lines += [f"- {n}" for n in self.notes]
        lines += [f"- Not drift: {e} (the driver carved another share of the L1/shared array for the launch; "
                  f"the cache did not change)" for e in self.explained]
        if self.notes or self.explained:
            lines.append("")
        if self.drift:
            summary = "; ".join(self.environment + [d + ": drift" for d in self.drifted])
            lines.append(f"Result: **drift found** ({summary}).")
        else:
            lines.append("Result: no drift.")
        return "\n".join(lines) + "\n"


def check_comparable(base: dict, cur: dict, *, force: bool = False) -> None:
    if force:
        return
    b, c = base["device"].get("name"), cur["device"].get("name")
    if b != c:
        raise InputError(f"the baseline is from {b!r} and the current result from {c!r}; comparing "
                         f"different device models says nothing about drift (use --force to compare anyway)")


def environment_changes(base: dict, cur: dict) -> list[str]:
    """What a driver or firmware update changed, as recorded in each result's device."""
    def env(res):
        dev = res.get("device", {})
        out = dict(dev.get("environment") or {})
        for key in ("driver", "torch", "triton"):
            if dev.get(key):
                out.setdefault(key, dev[key])
        return out
    b, c = env(base), env(cur)
    changes = []
    for key, label in ENV_LABELS.items():
        if key in b and key in c and str(b[key]) != str(c[key]) and b[key] not in (None, "") and c[key] not in (None, ""):
            changes.append(f"{label} {b[key]} -> {c[key]}")
    return changes


def _noisy(res: dict) -> bool:
    return any(any(w in text for w in NOISY_WORDS) for text in res.get("warnings", []))


def _rep(lv: dict, key: str) -> float:
    v = lv.get(key)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else DEFAULT_REPEATABILITY


def judge(base_value: float, cur_value: float, base_rep: float, cur_rep: float, tol: float) -> tuple[float, float, bool]:
    """(relative change, smallest detectable change, drift?) for one figure."""
    change = cur_value / base_value - 1
    detectable = max(tol, REPEAT_SIGMAS * math.hypot(base_rep, cur_rep))
    return change, detectable, abs(change) > detectable


def compare_results(base: dict, cur: dict, *, capacity_tol: float = DEFAULT_CAPACITY_TOL,
                    bandwidth_tol: float = DEFAULT_BANDWIDTH_TOL) -> Comparison:
    if not (capacity_tol >= 0 and bandwidth_tol >= 0):
        raise InputError("tolerances must be >= 0")
    bl = {level_key(lv): lv for lv in base["levels"]}
    cl = {level_key(lv): lv for lv in cur["levels"]}
    rows: list[list[str]] = []
    cmp = Comparison(rows, False, environment_changes(base, cur))
    for key in list(bl) + [k for k in cl if k not in bl]:
        b, c = bl.get(key), cl.get(key)
        if b is None or c is None:
            cmp.drift = True
            what = "vanished" if c is None else "appeared"
            cmp.drifted.append(f"{key} {what}")
            rows.append([key, "level", "present" if b else "absent", "present" if c else "absent", "-", "-",
                         f"DRIFT (level {what})"])
            continue
        bcap, ccap = b.get("capacity_bytes"), c.get("capacity_bytes")
        if bcap is not None or ccap is not None:
            if bcap is None or ccap is None:
                cmp.drift = True
                cmp.drifted.append(f"{key} capacity {fmt_bytes(bcap)} -> {fmt_bytes(ccap)}")
                rows.append([key, "capacity", fmt_bytes(bcap), fmt_bytes(ccap), "-", "-", "DRIFT (capacity lost or gained)"])
            else:
                change, detectable, bad = judge(bcap, ccap, _rep(b, "capacity_repeatability"),
                                                _rep(c, "capacity_repeatability"), capacity_tol)
                cause = carveout_cause(base, cur) if bad and (b["name"], b.get("scope")) == ("L1", "per_cu") else None
                _row(cmp, key, "capacity", fmt_bytes(bcap), fmt_bytes(ccap), change, detectable, bad, cause)
        change, detectable, bad = judge(b["bandwidth_gbs"], c["bandwidth_gbs"], _rep(b, "bandwidth_repeatability"),
                                        _rep(c, "bandwidth_repeatability"), bandwidth_tol)
        _row(cmp, key, "bandwidth", fmt_gbs(b["bandwidth_gbs"]), fmt_gbs(c["bandwidth_gbs"]), change, detectable, bad)
    for res, which in ((base, "baseline"), (cur, "current")):
        if _noisy(res):
            cmp.notes.append(f"the {which} run was noisy or shared its GPU: its repeatability is wider, so "
                             f"smaller changes go undetected; noise alone is never called drift")
        if res.get("migrated_from") == 1:
            cmp.notes.append(f"the {which} result is schema 1 (no repeatability recorded): "
                             f"{DEFAULT_REPEATABILITY:.0%} is assumed for its figures")
    return cmp


def _row(cmp: Comparison, key: str, what: str, before: str, after: str, change: float, detectable: float,
         bad: bool, cause: str | None = None) -> None:
    """One figure's row; a change with a ``cause`` (reports.carveout_cause) is named, not drift."""
    if cause:
        cmp.explained.append(cause)
        bad = False
    cmp.drift |= bad
    if bad:
        cmp.drifted.append(f"{key.split(' (')[0]} {what} {before} -> {after}")
    verdict = "DRIFT" if bad else (f"ok: {cause.split(': ')[-1]}" if cause else "ok")
    cmp.rows.append([key, what, before, after, f"{change:+.1%}", f"{detectable:.1%}", verdict])
