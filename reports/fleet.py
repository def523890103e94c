"""The fleet report: many GPUs' results side by side, the fleet median per level, and the GPUs
that stand out from it (the same tolerance-and-interval rule as `compare`)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from measure.errors import InputError
from reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, compare_results
from reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table

MEDIAN_FIELDS = ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes", "bandwidth_gbs",
                 "bandwidth_spread_gbs")


def gpu_label(result: dict) -> str:
    dev = result["device"]
    return f"{dev.get('host') or '?'}:{dev.get('index', '?')}"


def fleet_median(results: list[dict]) -> dict:
    """A result whose levels are the per-level medians over the fleet (levels most GPUs have)."""
    by_key: dict[str, list[dict]] = {}
    order: list[str] = []
    for res in results:
        for lv in res["levels"]:
            key = level_key(lv)
            if key not in by_key:
                order.append(key)
            by_key.setdefault(key, []).append(lv)
    levels = []
    for key in order:
        found = by_key[key]
        if 2 * len(found) < len(results):
            continue   # a level most GPUs lack is not part of the fleet's hierarchy
        lv = dict(found[0])
        for name in MEDIAN_FIELDS:
            values = [x[name] for x in found if x.get(name) is not None]
            lv[name] = statistics.median(values) if values and 2 * len(values) >= len(found) else None
        levels.append(lv)
    return {"device": dict(results[0]["device"], host="fleet median", index="-", uuid=""), "levels": levels}


@dataclass
class FleetReport:
    results: list[dict]
    median: dict
    outliers: dict[str, list[str]] = field(default_factory=dict)   # gpu label -> what stands out
    failed: list[str] = field(default_factory=list)               # GPUs without a result
    context: str = ""                                              # how the GPUs were measured

    @property
    def drift(self) -> bool:
        return bool(self.outliers)

    def markdown(self) -> str:
        keys = [level_key(lv) for lv in self.median["levels"]]
        header = ["host", "GPU", "UUID"] + [f"{k} capacity / bandwidth" for k in keys] + ["verdict"]

        def cells(res: dict, verdict: str) -> list[str]:
            dev = res["device"]
            lv = {level_key(x): x for x in res["levels"]}
            row = [str(dev.get("host") or "-"), str(dev.get("index", "-")), str(dev.get("uuid") or "-")[:16]]
            for k in keys:
                x = lv.get(k)
                row.append("absent" if x is None else
                           f"{fmt_bytes(x.get('capacity_bytes'))} / {fmt_gbs(x['bandwidth_gbs'])}")
            return row + [verdict]

        rows = [cells(r, "OUTLIER: " + "; ".join(self.outliers[gpu_label(r)]) if gpu_label(r) in self.outliers
                      else "ok") for r in self.results]
        rows.append(cells(self.median, "fleet median"))
        names = sorted({r["device"].get("name", "?") for r in self.results})
        lines = [f"# Fleet report: {len(self.results)} GPU(s) ({', '.join(names)})", "",
                 markdown_table(header, rows), ""]
        if self.context:
            lines += [self.context, ""]
        if self.failed:
            lines += ["GPUs without a result: " + "; ".join(self.failed), ""]
        verdict = (f"**{len(self.outliers)} outlier(s)**: " + ", ".join(sorted(self.outliers))
                   if self.outliers else "no outliers")
        lines += [f"Result: {verdict}. A GPU is an outlier when a level's capacity or bandwidth "
                  f"differs from the fleet median by more than the tolerance and the intervals do "
                  f"not overlap, or a level is missing or extra (as in `compare`).", ""]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"schema_version": 1, "context": self.context, "gpus": [{"label": gpu_label(r), "device": r["device"],
                                               "levels": r["levels"]} for r in self.results],
                "median": self.median["levels"], "outliers": self.outliers, "failed": self.failed}


def _drifts(reference: dict, res: dict, what: str, capacity_tol: float, bandwidth_tol: float) -> list[str]:
    """What drifts in ``res`` against ``reference`` (the fleet median or a baseline), by `compare`'s rule."""
    cmp = compare_results(reference, res, capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol)
    return [f"{row[0]} {row[1]} {row[3]} vs {what} {row[2]} ({row[4]})" for row in cmp.rows
            if row[5].startswith("DRIFT")]


def build_fleet_report(results: list[dict], *, capacity_tol: float = DEFAULT_CAPACITY_TOL,
                       bandwidth_tol: float = DEFAULT_BANDWIDTH_TOL, failed: list[str] = (),
                       context: str = "", baseline: dict | None = None) -> FleetReport:
    """The fleet report; a GPU is an outlier against the fleet median, and against ``baseline``
    when one is given."""
    if not results:
        raise InputError("no results to build a fleet report from")
    names = {r["device"].get("name") for r in results}
    if len(names) > 1:
        raise InputError(f"the results come from different device models ({', '.join(sorted(map(str, names)))}); "
                         f"a fleet report compares GPUs of one model")
    labels = [gpu_label(r) for r in results]
    if len(set(labels)) < len(labels):
        raise InputError("two results name the same host and GPU index; pass each GPU's result once")
    median = fleet_median(results)
    report = FleetReport(results, median, failed=list(failed), context=context)
    for res in results:
        bad = _drifts(median, res, "median", capacity_tol, bandwidth_tol)
        if baseline is not None:
            bad += _drifts(baseline, res, "baseline", capacity_tol, bandwidth_tol)
        if bad:
            report.outliers[gpu_label(res)] = bad
    return report


SAME_TIME_CONTEXT = ("Measured at the same time, one process per GPU. The GPUs share the host's CPUs "
                     "and PCIe links, not their caches or memory, and the kernel moves no data between "
                     "GPUs or to the host while it is timed; what they share can only delay launches, "
                     "which the load-iteration regression (and the in-kernel clock's timed phase) leaves "
                     "out of the bandwidth.")
