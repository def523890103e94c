"""The fleet report: many GPUs of one model side by side. Outliers first (each GPU against the
fleet median, by `compare`'s rule: beyond the tolerance and beyond what the repeatabilities
explain), then each level's distribution (median, spread, extremes), then the full table (in
fleet.md for small fleets; always in fleet.json and fleet.csv). GPUs are told apart by UUID where
known, else by host and index; a GPU measured twice counts with its newest result."""
from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field

from measure.errors import InputError
from reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, compare_results
from reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table

MEDIAN_FIELDS = ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes", "bandwidth_gbs",
                 "bandwidth_spread_gbs")
TABLE_IN_MARKDOWN = 64     # larger fleets: the full table is in fleet.csv and fleet.json only


def gpu_label(result: dict) -> str:
    """A GPU's identity: its UUID where known, else host and index."""
    dev = result["device"]
    if dev.get("uuid"):
        return str(dev["uuid"])
    return f"{dev.get('host') or '?'}:{dev.get('index', '?')}"


def gpu_place(result: dict) -> str:
    dev = result["device"]
    return f"{dev.get('host') or '?'}:{dev.get('index', '?')}"


def fleet_median(results: list[dict]) -> dict:
    """A result whose levels are the per-level medians over the fleet (levels most GPUs have); its
    repeatability is the GPUs' median over the square root of their number."""
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
        for name in ("capacity_repeatability", "bandwidth_repeatability"):
            values = [x[name] for x in found if isinstance(x.get(name), (int, float))]
            lv[name] = statistics.median(values) / math.sqrt(len(values)) if values else None
        levels.append(lv)
    return {"device": dict(results[0]["device"], host="fleet median", index="-", uuid="", environment={}),
            "levels": levels, "warnings": []}


def distribution(results: list[dict], key: str, field_name: str) -> dict | None:
    values = sorted(lv[field_name] for r in results for lv in r["levels"]
                    if level_key(lv) == key and isinstance(lv.get(field_name), (int, float)))
    if not values:
        return None
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return {"n": len(values), "median": med, "spread": 1.4826 * mad / med if med else 0.0,
            "min": values[0], "max": values[-1]}


@dataclass
class FleetReport:
    results: list[dict]
    median: dict
    outliers: dict[str, list[str]] = field(default_factory=dict)   # gpu label -> what stands out
    failed: list[str] = field(default_factory=list)               # GPUs without a result
    context: str = ""                                              # how the GPUs were measured
    set_aside: int = 0                                             # older results of GPUs seen twice

    @property
    def drift(self) -> bool:
        return bool(self.outliers)

    def _keys(self) -> list[str]:
        return [level_key(lv) for lv in self.median["levels"]]

    def _cells(self, res: dict, verdict: str) -> list[str]:
        dev = res["device"]
        lv = {level_key(x): x for x in res["levels"]}
        row = [gpu_place(res), str(dev.get("uuid") or "-")[:20]]
        for k in self._keys():
            x = lv.get(k)
            row.append("absent" if x is None else f"{fmt_bytes(x.get('capacity_bytes'))} / {fmt_gbs(x['bandwidth_gbs'])}")
        return row + [verdict]

    def markdown(self) -> str:
        names = sorted({r["device"].get("name", "?") for r in self.results})
        lines = [f"# Fleet report: {len(self.results)} GPU(s) ({', '.join(names)})", ""]
        if self.context:
            lines += [self.context, ""]
        verdict = f"**{len(self.outliers)} outlier(s)**" if self.outliers else "no outliers"
        lines += [f"Result: {verdict}. A GPU is an outlier when a level's capacity or bandwidth differs "
                  f"from the fleet median by more than the tolerance and by more than the repeatabilities "
                  f"explain, or a level is missing or extra (as in `compare`).", ""]
        by_label = {gpu_label(r): r for r in self.results}
        if self.outliers:
            lines += ["## Outliers", ""]
            lines += [f"- {gpu_place(by_label[g])} ({g}): " + "; ".join(w) for g, w in self.outliers.items()]
            lines.append("")
        if self.failed:
            lines += ["GPUs without a result: " + "; ".join(self.failed), ""]
        if self.set_aside:
            lines += [f"{self.set_aside} older result(s) of GPUs measured more than once were set aside "
                      f"(the newest counts).", ""]
        lines += ["## Levels across the fleet", ""]
        rows = []
        for key in self._keys():
            for name, unit in (("capacity_bytes", fmt_bytes), ("bandwidth_gbs", fmt_gbs)):
                d = distribution(self.results, key, name)
                if d:
                    rows.append([key, name.split("_")[0], str(d["n"]), unit(d["median"]), f"{d['spread']:.2%}",
                                 unit(d["min"]), unit(d["max"])])
        lines += [markdown_table(["level", "figure", "GPUs", "median", "spread (1.48 MAD)", "min", "max"], rows), ""]
        if len(self.results) <= TABLE_IN_MARKDOWN:
            ordered = sorted(self.results, key=lambda r: (gpu_label(r) not in self.outliers, gpu_place(r)))
            trows = [self._cells(r, "OUTLIER: " + "; ".join(self.outliers[gpu_label(r)])
                                 if gpu_label(r) in self.outliers else "ok") for r in ordered]
            trows.append(self._cells(self.median, "fleet median"))
            lines += ["## Every GPU", "", markdown_table(["GPU", "UUID"] + [f"{k} capacity / bandwidth" for k in
                                                                           self._keys()] + ["verdict"], trows), ""]
        else:
            lines += [f"The table of all {len(self.results)} GPUs is in fleet.csv and fleet.json.", ""]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        ordered = sorted(self.results, key=lambda r: (gpu_label(r) not in self.outliers, gpu_place(r)))
        return {"schema_version": 2, "context": self.context,
                "outliers": self.outliers, "failed": self.failed, "set_aside": self.set_aside,
                "distribution": {k: {n: distribution(self.results, k, n) for n in ("capacity_bytes", "bandwidth_gbs")}
                                 for k in self._keys()},
                "median": self.median["levels"],
                "gpus": [{"label": gpu_label(r), "place": gpu_place(r), "device": r["device"], "levels": r["levels"],
                          "outlier": gpu_label(r) in self.outliers} for r in ordered]}

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        keys = self._keys()
        w.writerow(["gpu", "uuid", "host", "index", "outlier"] + [f"{k} {f}" for k in keys
                                                                 for f in ("capacity_bytes", "bandwidth_gbs")])
        for r in sorted(self.results, key=lambda r: (gpu_label(r) not in self.outliers, gpu_place(r))):
            lv = {level_key(x): x for x in r["levels"]}
            dev = r["device"]
            row = [gpu_label(r), dev.get("uuid") or "", dev.get("host") or "", dev.get("index", ""),
                   "yes" if gpu_label(r) in self.outliers else "no"]
            for k in keys:
                x = lv.get(k) or {}
                row += [x.get("capacity_bytes") if x.get("capacity_bytes") is not None else "", x.get("bandwidth_gbs", "")]
            w.writerow(row)
        return buf.getvalue()


def _drifts(reference: dict, res: dict, what: str, capacity_tol: float, bandwidth_tol: float) -> list[str]:
    """What drifts in ``res`` against ``reference`` (the fleet median or a baseline), by `compare`'s rule."""
    cmp = compare_results(reference, res, capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol)
    return [f"{row[0]} {row[1]} {row[3]} vs {what} {row[2]} ({row[4]})" for row in cmp.rows
            if row[6].startswith("DRIFT")]


def created_epoch(res: dict) -> float:
    """When a result was made, as seconds since the epoch (its ``created`` stamp carries the
    offset from UTC; results from machines in other time zones order correctly); 0 if unknown."""
    from datetime import datetime
    try:
        return datetime.strptime(str(res.get("created") or ""), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return 0.0


def newest_per_gpu(results: list[dict]) -> tuple[list[dict], int]:
    """One result per GPU identity: the newest (by the time it was made, else the later given)."""
    keep: dict[str, dict] = {}
    for res in results:
        label = gpu_label(res)
        if label not in keep or created_epoch(res) >= created_epoch(keep[label]):
            keep[label] = res
    return list(keep.values()), len(results) - len(keep)


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
    results, set_aside = newest_per_gpu(results)
    median = fleet_median(results)
    report = FleetReport(results, median, failed=list(failed), context=context, set_aside=set_aside)
    for res in results:
        bad = _drifts(median, res, "median", capacity_tol, bandwidth_tol) if len(results) > 1 else []
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
