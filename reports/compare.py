"""Baseline comparison: which figures of which levels changed between two results of one GPU
model, and in which direction.

A change is drift when it exceeds the tolerance (default 3% for capacities, bandwidths and
latencies) and is more than the two runs' repeatabilities explain: |change| > REPEAT_SIGMAS x
the combined 1-sigma run-to-run spread each result measured for that figure. The capacity
interval (where the physical size may lie) is not used: that uncertainty is the same in both
runs of one card (a cliff's repeatability already counts its interval: detector.level_figures).
A latency in ns whose SM cycles did not change moved with the SM clock, not the cache: not
drift, and said so. Line and sector sizes are powers of two: any change is drift.
A level that appears or vanishes is drift. Each drift has a direction (reports.verdict); the
check fails on the worse ones by default (``fail_on="worse"``), on every one with "any". A noisy
or busy run widens its repeatability and says so; it never produces a drift verdict of its own.
Results without a repeatability (schema 1; latency before schema 3) get DEFAULT_REPEATABILITY.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from detect_caches.errors import InputError
from detect_caches.reports.carveout_cause import carveout_cause
from detect_caches.reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table
from detect_caches.reports.verdict import Verdict, check_fail_on, direction_of

DEFAULT_CAPACITY_TOL = 0.03
DEFAULT_BANDWIDTH_TOL = 0.03
DEFAULT_LATENCY_TOL = 0.03
REPEAT_SIGMAS = 3.0
DEFAULT_REPEATABILITY = 0.01     # when a result does not say (schema 1)
ENV_LABELS = {"driver": "driver", "cuda_runtime": "CUDA runtime", "hip_runtime": "HIP runtime",
              "vbios": "VBIOS", "ecc_mode": "ECC", "mig_mode": "MIG mode", "power_limit_w": "power limit (W)",
              "app_sm_clock_mhz": "application SM clock", "app_mem_clock_mhz": "application memory clock",
              "max_sm_clock_mhz": "max SM clock", "max_mem_clock_mhz": "max memory clock",
              "persistence_mode": "persistence mode", "compute_mode": "compute mode", "torch": "torch",
              "triton": "triton"}
NOISY_WORDS = ("noisy", "busy", "other process")
SIZES = ("line", "sector")
HEADER = ["level", "quantity", "baseline", "current", "change", "detectable", "verdict"]


@dataclass(repr=False)
class Comparison:
    verdicts: list[Verdict]
    environment: list[str] = field(default_factory=list)   # what changed around the card
    notes: list[str] = field(default_factory=list)
    fail_on: str = "worse"
    baseline_label: str = ""                               # which run the baseline is, when picked
    explained: list[str] = field(default_factory=list)     # changes with a named cause, not drift

    @property
    def drift(self) -> bool:
        """Some figure changed beyond what the runs can tell apart, in either direction."""
        return any(v.drift for v in self.verdicts)

    @property
    def failed(self) -> bool:
        """The check fails: some change counts under ``fail_on`` (exit 1 on the command line)."""
        return any(v.fails(self.fail_on) for v in self.verdicts)

    @property
    def drifted(self) -> list[str]:
        """Each drifting figure, e.g. "L1 capacity 221 KiB -> 205 KiB"."""
        return [_said(v) for v in self.verdicts if v.drift]

    @property
    def rows(self) -> list[list[str]]:
        """The table of measured figures (levels, capacities, bandwidths, latencies)."""
        return [[v.level, v.quantity, v.baseline_text, v.current_text,
                 "-" if v.change is None else f"{v.change:+.1%}",
                 "-" if v.detectable is None else f"{v.detectable:.1%}", v.cell(self.fail_on)]
                for v in self.verdicts if v.quantity not in SIZES]

    @property
    def size_rows(self) -> list[list[str]]:
        """Line and sector sizes, compared exactly (powers of two)."""
        return [[v.level, v.quantity, v.baseline_text, v.current_text, v.cell(self.fail_on)]
                for v in self.verdicts if v.quantity in SIZES]

    def summary(self) -> str:
        """The last line: the answer, with what changed around the card."""
        failing = [f"{_said(v)}: drift, {v.direction}" + _ratio(v) for v in self.verdicts if v.fails(self.fail_on)]
        other = [f"{_said(v)}: {v.direction}" + _ratio(v) for v in self.verdicts if v.drift and not v.fails(self.fail_on)]
        if failing:
            return f"Result: **drift found** ({'; '.join(self.environment + failing)})."
        if other:
            return (f"Result: no drift that fails the check (--fail-on {self.fail_on}); changed: "
                    f"{'; '.join(other)}.")
        return "Result: no drift."

    def markdown(self) -> str:
        lines = []
        if self.baseline_label:
            lines += [f"Baseline: {self.baseline_label}.", ""]
        lines += [markdown_table(HEADER, self.rows), ""]
        if self.size_rows:
            lines += [markdown_table(["level", "size", "baseline", "current", "verdict (exact)"], self.size_rows), ""]
        if self.environment:
            lines += ["Changed around the card: " + "; ".join(self.environment) + ".", ""]
        lines += [f"- {n}" for n in self.notes]
        lines += [f"- Not drift: {e} (the driver carved another share of the L1/shared array for the launch; "
                  f"the cache did not change)" for e in self.explained]
        if self.notes or self.explained:
            lines.append("")
        lines.append(self.summary())
        return "\n".join(lines) + "\n"

    @property
    def frame(self):
        """The judged figures as a pandas DataFrame: numbers (bytes, GB/s, ns, fractions), not text."""
        from detect_caches.reports.frames import comparison_frame
        return comparison_frame(self)

    def __repr__(self) -> str:
        return f"<Comparison of {len(self.verdicts)} figures: {self.summary().removeprefix('Result: ')}>"

    def _repr_html_(self) -> str:
        from detect_caches.reports.html import inline, table
        return table(HEADER, self.rows) + f"<p>{inline(self.summary())}</p>"

    def to_dict(self) -> dict:
        return {"fail_on": self.fail_on, "failed": self.failed, "drift": self.drift,
                "baseline": self.baseline_label, "environment": self.environment, "notes": self.notes,
                "explained": self.explained,
                "verdicts": [v.to_dict(self.fail_on) for v in self.verdicts]}


def _explain_carveout(cmp: Comparison, base: dict, cur: dict) -> None:
    """An L1 capacity change that a change of shared-memory carveout explains is named, not drift
    (reports.carveout_cause: "L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB")."""
    for v in cmp.verdicts:
        if v.quantity == "capacity" and v.drift and v.level.startswith("L1 (per_cu"):
            cause = carveout_cause(base, cur)
            if cause:
                v.drift, v.worse, v.note = False, False, cause.split(": ", 1)[-1]
                cmp.explained.append(cause)


def _said(v: Verdict) -> str:
    return f"{v.level.split(' (')[0]} {v.quantity} {v.baseline_text} -> {v.current_text}"


def _ratio(v: Verdict) -> str:
    return f" x{v.ratio:.3f}" if v.ratio is not None else ""


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
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        else DEFAULT_REPEATABILITY


def judge(base_value: float, cur_value: float, base_rep: float, cur_rep: float, tol: float) -> tuple[float, float, bool]:
    """(relative change, smallest detectable change, drift?) for one figure."""
    change = cur_value / base_value - 1
    detectable = max(tol, REPEAT_SIGMAS * math.hypot(base_rep, cur_rep))
    return change, detectable, abs(change) > detectable


def _figure(key: str, quantity: str, b: dict, c: dict, value: str, rep: str, tol: float, fmt) -> Verdict | None:
    """A measured figure of a level present in both, judged; None where either run lacks it."""
    bv, cv = b.get(value), c.get(value)
    if bv is None and cv is None:
        return None
    if bv is None or cv is None:
        if quantity != "capacity":
            return None      # not measured in one run (--no-latency): nothing to judge
        direction = "appeared" if bv is None else "vanished"
        return Verdict(key, quantity, bv, cv, fmt(bv), fmt(cv), drift=True, direction=direction, worse=True,
                       note="capacity lost or gained")
    change, detectable, bad = judge(bv, cv, _rep(b, rep), _rep(c, rep), tol)
    direction, worse = direction_of(quantity, change) if bad else ("", False)
    v = Verdict(key, quantity, bv, cv, fmt(bv), fmt(cv), change, detectable, bad, direction, worse)
    if quantity == "latency" and bad:
        bcyc, ccyc = b.get("latency_cycles"), c.get("latency_cycles")
        if bcyc and ccyc and abs(ccyc / bcyc - 1) <= detectable:
            v.drift, v.direction, v.worse = False, "", False
            v.note = f"SM cycles unchanged ({bcyc:.0f} -> {ccyc:.0f}): the SM clock differed, not the cache"
    return v


def _size(key: str, quantity: str, b: dict, c: dict) -> Verdict | None:
    """A line or sector size: a power of two measured in both runs. Its repeatability is the
    sizes each run's probes fit equally well (line_candidates_bytes): a change is drift only when
    neither run's size fits the other run's probes; a size without candidates counts alone."""
    bv, cv = b.get(f"{quantity}_bytes"), c.get(f"{quantity}_bytes")
    if bv is None or cv is None:
        return None
    change = cv / bv - 1
    fits_b = set(b.get(f"{quantity}_candidates_bytes") or []) | {bv}
    fits_c = set(c.get(f"{quantity}_candidates_bytes") or []) | {cv}
    bad = bool(change) and bv not in fits_c and cv not in fits_b
    direction, worse = direction_of(quantity, change) if bad else ("", False)
    v = Verdict(key, quantity, bv, cv, f"{bv:g} B", f"{cv:g} B", change, 0.0, bad, direction, worse)
    if change and not bad:
        v.note = (f"the probes fit {', '.join(f'{x} B' for x in sorted(fits_b | fits_c))} alike: a change "
                  f"between them is not drift")
    return v


def _ns(v) -> str:
    return "-" if v is None else f"{v:.1f} ns"


def compare_results(base: dict, cur: dict, *, capacity_tol: float = DEFAULT_CAPACITY_TOL,
                    bandwidth_tol: float = DEFAULT_BANDWIDTH_TOL, latency_tol: float | None = None,
                    fail_on: str = "worse") -> Comparison:
    latency_tol = DEFAULT_LATENCY_TOL if latency_tol is None else latency_tol
    if not all(isinstance(t, (int, float)) and 0 <= t <= 1 for t in (capacity_tol, bandwidth_tol, latency_tol)):
        raise InputError("tolerances must be fractions from 0 to 1 (0.03 = 3%)")
    bl = {level_key(lv): lv for lv in base["levels"]}
    cl = {level_key(lv): lv for lv in cur["levels"]}
    cmp = Comparison([], environment_changes(base, cur), fail_on=check_fail_on(fail_on))
    for key in list(bl) + [k for k in cl if k not in bl]:
        b, c = bl.get(key), cl.get(key)
        if b is None or c is None:
            what = "vanished" if c is None else "appeared"
            cmp.verdicts.append(Verdict(key, "level", None, None, "present" if b else "absent",
                                        "present" if c else "absent", drift=True, direction=what, worse=True))
            continue
        for v in (_figure(key, "capacity", b, c, "capacity_bytes", "capacity_repeatability", capacity_tol, fmt_bytes),
                  _figure(key, "bandwidth", b, c, "bandwidth_gbs", "bandwidth_repeatability", bandwidth_tol, fmt_gbs),
                  _figure(key, "latency", b, c, "latency_ns", "latency_repeatability", latency_tol, _ns),
                  _size(key, "line", b, c), _size(key, "sector", b, c)):
            if v is not None:
                cmp.verdicts.append(v)
    _explain_carveout(cmp, base, cur)
    for res, which in ((base, "baseline"), (cur, "current")):
        if _noisy(res):
            cmp.notes.append(f"the {which} run was noisy or shared its GPU: its repeatability is wider, so "
                             f"smaller changes go undetected; noise alone is never called drift")
        if res.get("migrated_from") == 1:
            cmp.notes.append(f"the {which} result is schema 1 (no repeatability recorded): "
                             f"{DEFAULT_REPEATABILITY:.0%} is assumed for its figures")
    cmp.notes += [f"{v.figure}: {v.note}" for v in cmp.verdicts if v.note and not v.drift]
    return cmp
