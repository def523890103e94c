"""fleet.png: each level's capacity and bandwidth on every GPU, as a ratio to the fleet median
(one strip per figure), outliers in red. Reads the FleetReport only."""
from __future__ import annotations

from pathlib import Path

from detect_caches.reports.fleet import FleetReport
from detect_caches.reports.fmt import level_key
from detect_caches.reports.identity import gpu_label


def _points(report: FleetReport, key: str, field_name: str) -> tuple[list[float], list[float], float | None]:
    """(ratios of ordinary GPUs, ratios of outliers, the median) for one level's figure."""
    med = next((lv.get(field_name) for lv in report.median["levels"] if level_key(lv) == key), None)
    ok, bad = [], []
    if not med:
        return ok, bad, None
    for res in report.results:
        lv = next((x for x in res["levels"] if level_key(x) == key), None)
        if lv is None or not isinstance(lv.get(field_name), (int, float)):
            continue
        (bad if gpu_label(res, res.get("source_path")) in report.outliers else ok).append(lv[field_name] / med)
    return ok, bad, med


def render_fleet_plot(report: FleetReport) -> bytes:
    import numpy as np
    from detect_caches.reports.figure import new_figure, png_bytes
    from detect_caches.reports.fmt import fmt_bytes, fmt_gbs
    strips = []
    for key in report._keys():
        for field_name, fmt in (("capacity_bytes", fmt_bytes), ("bandwidth_gbs", fmt_gbs)):
            ok, bad, med = _points(report, key, field_name)
            if med:
                strips.append((f"{key} {field_name.split('_')[0]}\n(median {fmt(med)})", ok, bad))
    fig = new_figure((9, 0.7 + 0.55 * max(1, len(strips))))
    ax = fig.subplots()
    rng = np.random.default_rng(0)          # jitter only spreads the dots; the same picture each time
    labelled = set()
    for row, (_, ok, bad) in enumerate(strips):
        for values, style, name in ((ok, dict(s=6, color="#1f77b4", alpha=0.5, lw=0), "GPU"),
                                    (bad, dict(s=22, color="#d62728", marker="x"), "outlier")):
            if values:
                ax.scatter(values, row + rng.uniform(-0.18, 0.18, len(values)),
                           label=None if name in labelled else name, **style)
                labelled.add(name)
    ax.axvline(1.0, color="#555555", lw=0.8)
    ax.set_yticks(range(len(strips)), [s[0] for s in strips], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("figure / fleet median")
    ax.set_title(f"Fleet: {len(report.results)} GPU(s), {len(report.outliers)} outlier(s)", fontsize=10)
    ax.grid(True, axis="x", color="#dddddd", lw=0.5)
    if labelled:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return png_bytes(fig, dpi=90)


def write_fleet_plot(path: Path, report: FleetReport) -> None:
    from detect_caches.reports.atomic import write_bytes_atomic
    from detect_caches.reports.figure import RENDER_LOCK
    with RENDER_LOCK:
        png = render_fleet_plot(report)
    write_bytes_atomic(path, png)
