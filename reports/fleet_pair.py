"""Two GPUs: no median to stand out from (the median of two is their mean, and both would stand
out from it). When they disagree beyond what their repeatabilities explain, the report says so,
and which of the two is the odd one where something can tell: each GPU's own baseline (the one
that moved from it), else the documented figures (the size the API or vendor gives a cache, the
physical ceiling of a bandwidth). With nothing to tell them apart the check fails without
naming either."""
from __future__ import annotations

import math

from detect_caches.reports.compare import Comparison
from detect_caches.reports.fleet_report import FleetReport, gpu_place
from detect_caches.reports.fmt import fmt_bytes, fmt_gbs, level_key
from detect_caches.reports.identity import gpu_label
from detect_caches.reports.verdict import Verdict

DOCUMENTED = {"capacity": ("api_bytes", fmt_bytes, "documented size"),
              "bandwidth": ("ceiling_gbs", fmt_gbs, "physical ceiling")}


def _documented(res: dict, v: Verdict) -> float | None:
    lv = next((x for x in res["levels"] if level_key(x) == v.level), None)
    key = DOCUMENTED.get(v.quantity, (None,))[0]
    value = lv.get(key) if lv is not None and key else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _closer(a: dict, b: dict, v: Verdict) -> tuple[int, str] | None:
    """(index of the GPU closer to the documented figure, what it is) for one disagreement."""
    doc = _documented(a, v) or _documented(b, v)
    if doc is None or not v.baseline or not v.current:
        return None
    da, db = abs(math.log(v.baseline / doc)), abs(math.log(v.current / doc))
    if abs(da - db) < 1e-9:
        return None
    _, fmt, what = DOCUMENTED[v.quantity]
    return (0 if da < db else 1), f"the {what} {fmt(doc)}"


def judge_pair(report: FleetReport, cmp: Comparison) -> None:
    """Add the two GPUs' disagreements (``cmp``: the second against the first) to ``report``."""
    a, b = report.results
    labels = [gpu_label(r, r.get("source_path")) for r in (a, b)]
    places = [gpu_place(a), gpu_place(b)]
    for v in cmp.verdicts:
        if not v.drift:
            continue
        change = "" if v.change is None else f" ({v.change:+.1%})"
        said = (f"the two GPUs disagree on {v.level} {v.quantity}: {v.baseline_text} on {places[0]}, "
                f"{v.current_text} on {places[1]}{change}")
        moved = [i for i, label in enumerate(labels) if label in report.outliers]
        if report.baselines and len(moved) == 1:
            said += f"; {places[moved[0]]} is the one that moved from its baseline"
        elif report.baselines and len(moved) == 2:
            said += "; both moved from their baselines"
        else:
            closer = _closer(a, b, v)
            if closer is None:
                said += "; nothing documented tells which is off (a third GPU or a baseline would)"
                report.unresolved = True
            else:
                i, what = closer
                said += f"; {places[i]} is closer to {what}"
                odd = 1 - i
                values = (v.baseline_text, v.current_text)
                report.outliers.setdefault(labels[odd], []).append(
                    f"{v.level} {v.quantity} {values[odd]} vs the other GPU's {values[i]}, farther from {what}")
        report.disagreements.append(said)
