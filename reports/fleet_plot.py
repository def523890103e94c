"""fleet.png: a strip per level and figure (size, bandwidth, latency), each GPU's difference from
the fleet median in percent, the band the check tolerates shaded around it. Outliers are red and
named on the figure they stand out on; changes the check passes are named in grey. A GPU far
off the scale (+66%) sits at the panel's edge with its figure written, so that the others keep
their spread. Reads the FleetReport only."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

from detect_caches.reports.fleet import FleetReport
from detect_caches.reports.fmt import fmt_bytes, level_key
from detect_caches.reports.identity import gpu_label
from detect_caches.reports.label_place import Placer
from detect_caches.reports.plot_header import fix_layout, header
from detect_caches.reports.summary import fmt_bw

FIGURES = (("capacity", "capacity_bytes", fmt_bytes), ("bandwidth", "bandwidth_gbs", fmt_bw),
           ("latency", "latency_ns", lambda v: f"{v:.0f} ns"))
FAIL, CHANGED, GPU = "#D55E00", "#666666", "#0072B2"
LABELS_PER_STRIP = 8   # GPUs named per strip; a fleet with more odd ones lists them in fleet.md
FAR = 4.0         # the scale reaches out to this many bands for an odd GPU; one farther sits at the edge
EDGE = 0.92       # where a point past the scale is drawn, as a share of the half-width


def _strips(report: FleetReport) -> list[dict]:
    """One strip per level figure the median has: each GPU's relative difference and verdict."""
    strips = []
    for key in report._keys():
        for quantity, field_name, fmt in FIGURES:
            med = next((lv.get(field_name) for lv in report.median["levels"] if level_key(lv) == key), None)
            if not isinstance(med, (int, float)) or not med:
                continue
            figure = f"{key} {quantity}"
            points, bands = [], []
            for res in report.results:
                label = gpu_label(res, res.get("source_path"))
                lv = next((x for x in res["levels"] if level_key(x) == key), None)
                if lv is None or not isinstance(lv.get(field_name), (int, float)):
                    continue
                verdicts = [v for v in report.verdicts.get(label, []) if v["figure"] == figure]
                bands += [v["detectable"] for v in verdicts if v.get("against") == "median" and v.get("detectable")]
                state = ("fail" if any(v["fails"] for v in verdicts) else
                         "changed" if any(v["verdict"] == "changed" for v in verdicts) else "ok")
                points.append((label, lv[field_name] / med - 1, lv[field_name], state))
            band = statistics.median(bands) if bands else report.tolerances.get(quantity, 0.03)
            strips.append(dict(title=f"{report.heading(key)} {'size' if quantity == 'capacity' else quantity}",
                               median=fmt(med), points=points, band=band))
    return strips


def _half_width(strips: list[dict]) -> float:
    """The scale: wide enough for every band and the ordinary GPUs, not for one far-off GPU."""
    ordinary = [abs(d) for s in strips for _, d, _, state in s["points"] if state == "ok"]
    every = [abs(d) for s in strips for _, d, _, _ in s["points"]]
    band = max((s["band"] for s in strips), default=0.03)
    return max(1.6 * band, 1.3 * max(ordinary, default=0.0), min(1.15 * max(every, default=0.0), FAR * band), 0.01)


def build_fleet_figure(report: FleetReport):
    from detect_caches.reports.figure import new_figure
    strips = _strips(report)
    names = report.names
    half = _half_width(strips)
    fig = new_figure((11.0, 1.9 + 0.62 * max(len(strips), 1)))
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    marks = []
    for row, s in enumerate(strips):
        ax.fill_betweenx([row - 0.38, row + 0.38], -100 * s["band"], 100 * s["band"], color="#009E73", alpha=0.15, lw=0)
        n = len(s["points"])
        plain_x, plain_y = [], []
        for i, (label, d, value, state) in enumerate(sorted(s["points"], key=lambda p: p[1])):
            y = row + (0.25 * (2 * i / (n - 1) - 1) if n > 1 else 0.0)   # spread evenly: the same picture each time
            past = abs(d) > half
            x = 100 * math.copysign(EDGE * half, d) if past else 100 * d
            if state == "ok" and not past:
                plain_x.append(x)
                plain_y.append(y)
                continue
            color = {"fail": FAIL, "changed": CHANGED}.get(state, "#333333")
            marker = (">" if d > 0 else "<") if past else ("X" if state == "fail" else "o")
            ax.plot([x], [y], marker=marker, ms=9, color=color, ls="", zorder=4)
            if sum(1 for m in marks if m[4] == row) < LABELS_PER_STRIP:
                marks.append((x, y, f"{names.get(label, label)} {d:+.1%}", color, row))
        ax.plot(plain_x, plain_y, "o", ms=4, color=GPU, alpha=0.6, zorder=3)
    ax.axvline(0, color="#333333", lw=0.8)
    ax.set_xlim(-100 * half, 100 * half)
    ax.set_ylim(len(strips) - 0.5, -0.5)
    ax.set_yticks(range(len(strips)), [f"{s['title']} (median {s['median']})" for s in strips], fontsize=9)
    ax.set_xlabel("difference from the fleet median")
    ax.xaxis.set_major_formatter(__import__("matplotlib.ticker").ticker.FuncFormatter(lambda v, _p: f"{v:+.0f}%"
                                                                                     if v else "0"))
    ax.grid(True, axis="x", color="#dddddd", lw=0.5)
    _legend(fig, marks, strips, half)
    said: dict = {"fail": {}, "changed": {}}
    for s in strips:
        for label, d, _value, state in s["points"]:
            if state in said:
                said[state].setdefault(label, []).append(f"{s['title']} {d:+.1%}")
    outliers = [f"{names.get(g, g)} ({', '.join(said['fail'].get(g, [])) or 'see fleet.md'})" for g in report.outliers]
    changed = [f"{names.get(g, g)} ({', '.join(w)})" for g, w in said["changed"].items() if g not in report.outliers]
    line = (f"Outliers: {'; '.join(outliers[:4])}" + (" ..." if len(outliers) > 4 else "")) if outliers else "No outliers"
    if changed:
        line += f"; changed, passing the check: {'; '.join(changed[:3])}" + (" ..." if len(changed) > 3 else "")
    header(fig, f"Fleet: {len(report.results)} GPU(s) of {', '.join(sorted({r['device'].get('name', '?') for r in report.results}))}",
           "shaded: the change the check tolerates around the median; points past the scale sit at its edge",
           (line, FAIL if outliers else "#222222"))
    fix_layout(fig)
    placer = Placer(ax, fig.canvas.get_renderer())
    for line2d in ax.lines:
        xy = line2d.get_xydata()
        placer.avoid_points(xy[:, 0], xy[:, 1])
    for x, y, text, color, _row in marks:
        side = [dict(ha="right", x=x - 0.02 * 100 * half), dict(ha="left", x=x + 0.02 * 100 * half)]
        spots = [dict(y=y + dy, va="center", **h) for dy in (0.0, -0.3, 0.3) for h in (side if x > 0 else side[::-1])]
        placer.place(text, spots, color=color, fontsize=8.5, fontweight="bold",
                     bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85), zorder=6)
    return fig


def _legend(fig, marks, strips, half: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    states = {state for s in strips for *_, state in s["points"]}
    handles = [Line2D([], [], ls="", marker="o", ms=4, color=GPU, alpha=0.6, label="GPU"),
               Patch(color="#009E73", alpha=0.15, lw=0, label="tolerated")]
    if "fail" in states:
        handles.append(Line2D([], [], ls="", marker="X", ms=8, color=FAIL, label="outlier (fails the check)"))
    if "changed" in states:
        handles.append(Line2D([], [], ls="", marker="o", ms=8, color=CHANGED, label="change the check passes"))
    if any(abs(d) > half for s in strips for _, d, *_ in s["points"]):
        handles.append(Line2D([], [], ls="", marker=">", ms=8, color="#333333", label="past the scale"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9, frameon=False)


def render_fleet_plot(report: FleetReport) -> bytes:
    from detect_caches.reports.figure import png_bytes
    return png_bytes(build_fleet_figure(report), dpi=100, facecolor="white")


def write_fleet_plot(path: Path, report: FleetReport) -> None:
    from detect_caches.reports.atomic import write_bytes_atomic
    from detect_caches.reports.figure import RENDER_LOCK
    with RENDER_LOCK:
        png = render_fleet_plot(report)
    write_bytes_atomic(path, png)
