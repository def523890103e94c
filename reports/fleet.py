"""The fleet report: many GPUs of one model side by side. Outliers first (each GPU against the
fleet median, by `compare`'s rule: beyond the tolerance and beyond what the repeatabilities
explain, in a direction the check fails on), and against its own baseline where one is given;
then each level's distribution (median, spread, extremes), then the full table (in fleet.md for
small fleets; always in fleet.json and fleet.csv). GPUs are told apart by reports.identity; a GPU
measured twice counts with its newest result. Two GPUs have no median to stand out from: when
they disagree the report says so, and which one its baseline or the documented figures side with
(reports.fleet_pair)."""
from __future__ import annotations

import math
import statistics
from collections import Counter

from detect_caches.errors import InputError
from detect_caches.reports.compare import (DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, DEFAULT_LATENCY_TOL, Comparison, compare_results)
from detect_caches.reports.fleet_report import FleetReport, gpu_place  # noqa: F401  (re-exported)
from detect_caches.reports.fmt import level_key
from detect_caches.reports.identity import gpu_label, identified, run_time

MEDIAN_FIELDS = ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes", "bandwidth_gbs",
                 "bandwidth_spread_gbs", "latency_ns", "latency_cycles")
MODE_FIELDS = ("line_bytes", "sector_bytes")     # powers of two: the most common, never a mean
REPEAT_FIELDS = ("capacity_repeatability", "bandwidth_repeatability", "latency_repeatability")


def fleet_median(results: list[dict]) -> dict:
    """A result whose levels are the per-level medians over ``results`` (levels most of them have);
    its repeatability is their median over the square root of their number."""
    by_key: dict[str, list[dict]] = {}
    for res in results:
        for lv in res["levels"]:
            by_key.setdefault(level_key(lv), []).append(lv)
    levels = []
    for key, found in by_key.items():
        if 2 * len(found) < len(results):
            continue   # a level most GPUs lack is not part of the fleet's hierarchy
        lv = dict(found[0])
        for name in MEDIAN_FIELDS:
            values = [x[name] for x in found if x.get(name) is not None]
            lv[name] = statistics.median(values) if values and 2 * len(values) >= len(found) else None
        for name in MODE_FIELDS:
            values = Counter(x[name] for x in found if x.get(name) is not None)
            lv[name] = values.most_common(1)[0][0] if values and 2 * sum(values.values()) >= len(found) else None
        for name in REPEAT_FIELDS:
            values = [x[name] for x in found if isinstance(x.get(name), (int, float))]
            lv[name] = statistics.median(values) / math.sqrt(len(values)) if values else None
        levels.append(lv)
    return {"device": dict(results[0]["device"], host="fleet median", index="-", uuid="", environment={}),
            "levels": levels, "warnings": []}


def created_epoch(res: dict) -> float:
    """When a result was made, seconds since the epoch; 0 when it does not say."""
    return run_time(res) or 0.0


def newest_per_gpu(results: list[dict]) -> tuple[list[dict], int]:
    """One result per GPU identity: the newest (by the time it was made, else the later given)."""
    keep: dict[str, dict] = {}
    for res in results:
        label = gpu_label(res, res.get("source_path"))
        if label not in keep or created_epoch(res) >= created_epoch(keep[label]):
            keep[label] = res
    return list(keep.values()), len(results) - len(keep)


def _lines(cmp: Comparison, what: str, failing: bool) -> list[str]:
    return [f"{v.level} {v.quantity} {v.current_text} vs {what} {v.baseline_text} "
            f"({'' if v.change is None else f'{v.change:+.1%}, '}{v.direction})"
            for v in cmp.verdicts if v.drift and v.fails(cmp.fail_on) == failing]


def build_fleet_report(results: list[dict], *, capacity_tol: float = DEFAULT_CAPACITY_TOL,
                       bandwidth_tol: float = DEFAULT_BANDWIDTH_TOL, latency_tol: float | None = None,
                       failed: list[str] = (), context: str = "", baseline: dict | None = None,
                       baselines: dict | None = None, fail_on: str = "worse", force: bool = False) -> FleetReport:
    """The fleet report. A GPU fails against the fleet median (three or more GPUs), against
    ``baseline`` (one result for all) or its own entry of ``baselines`` (label -> reports.baseline
    Pick), by ``fail_on``."""
    from detect_caches.reports.compare import check_comparable
    from detect_caches.reports.fleet_pair import judge_pair
    if not results:
        raise InputError("no results to build a fleet report from")
    names = {r["device"].get("name") for r in results}
    if len(names) > 1 and not force:
        raise InputError(f"the results come from different device models ({', '.join(sorted(map(str, names)))}); "
                         f"a fleet report compares GPUs of one model (--force compares them anyway)")
    if baseline is not None:
        check_comparable(baseline, results[0], force=force)
    results, set_aside = newest_per_gpu(results)
    tols = dict(capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol, latency_tol=latency_tol, fail_on=fail_on)
    median = fleet_median(results)
    report = FleetReport(results, median, failed=list(failed), context=context, set_aside=set_aside, fail_on=fail_on,
                         tolerances=dict(capacity=capacity_tol, bandwidth=bandwidth_tol,
                                         latency=DEFAULT_LATENCY_TOL if latency_tol is None else latency_tol))
    if len(names) > 1:
        report.notes.append(f"the GPUs are of {len(names)} models ({', '.join(sorted(map(str, names)))}), compared "
                            f"anyway (--force): a difference between models is not drift")
    strangers = [r for r in results if not identified(r)]
    if strangers:
        report.notes.append(f"{len(strangers)} result(s) name neither a UUID nor a host: each counts as a GPU "
                            f"of its own (told apart by its path)")
    for res in results:
        label = gpu_label(res, res.get("source_path"))
        against = []
        if len(results) > 2:
            against.append(("median", compare_results(median, res, **tols)))
        pick = (baselines or {}).get(label)
        if pick is not None:
            report.baselines[label] = pick.how
            against.append(("baseline", compare_results(pick.result, res, **tols)))
        elif baseline is not None:
            report.baselines[label] = "the baseline given"
            against.append(("baseline", compare_results(baseline, res, **tols)))
        for what, cmp in against:
            report.verdicts.setdefault(label, []).extend(dict(v.to_dict(fail_on), against=what) for v in cmp.verdicts)
            if _lines(cmp, what, True):
                report.outliers.setdefault(label, []).extend(_lines(cmp, what, True))
            if _lines(cmp, what, False):
                report.changed.setdefault(label, []).extend(_lines(cmp, what, False))
    if len(results) == 2:
        judge_pair(report, compare_results(results[0], results[1], **dict(tols, fail_on="any")))
    return report


SAME_TIME_CONTEXT = ("Measured at the same time, one process per GPU. The GPUs share the host's CPUs "
                     "and PCIe links, not their caches or memory, and the kernel moves no data between "
                     "GPUs or to the host while it is timed; what they share can only delay launches, "
                     "which the load-iteration regression (and the in-kernel clock's timed phase) leaves "
                     "out of the bandwidth.")
