"""bandwidth.png: bandwidth (TB/s) against working set for each sweep, the latency chase beside
them. Each plateau is labelled with its level and figure, each capacity marked in its level's
colour (one colour per level in every panel, reports.plot_levels), the interval where the size
can lie shaded; labels are placed where they cover nothing (reports.label_place)."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

from detect_caches.detector.levels import Detection
from detect_caches.reports.atomic import write_bytes_atomic
from detect_caches.reports.figure import RENDER_LOCK, new_figure, png_bytes
from detect_caches.reports.fmt import fmt_bytes
from detect_caches.reports.plot_axes import bandwidth_axis, binary_ticks, latency_axis, size_axis, tick_label  # noqa: F401
from detect_caches.reports.plot_header import fix_layout, header
from detect_caches.reports.plot_levels import bandwidth_plateaus, latency_figures, latency_plateaus, level_color
from detect_caches.reports.label_place import Placer
from detect_caches.reports.summary import answer_line, fmt_bw, unit_word
from detect_caches.grid import DENSE_SLOT_BYTES

WRAP = 118      # the subtitle (the answer line) wraps at a level boundary past this many characters


def _titles(vendor: str | None) -> dict[str, tuple[str, str]]:
    unit = unit_word(vendor)
    units = "SMs/CUs" if unit == "SM/CU" else f"{unit}s"
    return {"private": (f"Each {unit} reads its own rows (private sweep)", f"working set per {unit}"),
            "shared": (f"All {units} read one array (shared sweep)", "working set, whole device")}


def _draw_sweep(ax, detection: Detection, sweep: str, vendor: str | None) -> list:
    """Points, plateaus and falls of one bandwidth sweep; returns the labels to place."""
    an, levels = detection.sweeps[sweep], detection.levels
    c = an.curve
    tb = c.bandwidth_gbs / 1000
    ax.plot(c.size_bytes, tb, ".", color="#333333", ms=4, zorder=3)
    if c.noisy.any():
        ax.plot(c.size_bytes[c.noisy], tb[c.noisy], "x", color="#000000", ms=6, zorder=3)
    owners = bandwidth_plateaus(detection, sweep)
    labels = []
    for p, owner in zip(an.plateaus, owners):
        col = level_color(owner)
        ax.axvspan(p.size_lo_bytes, p.size_hi_bytes, color=col, alpha=0.07, lw=0)
        ax.hlines(p.bandwidth_gbs / 1000, p.size_lo_bytes, p.size_hi_bytes, colors=col, lw=2.5, zorder=4)
        name = levels[owner].name if owner is not None else ""
        labels.append(("plateau", f"{name} {fmt_bw(p.bandwidth_gbs)}".strip(), col, p))
    for p in an.partials:
        ax.hlines(p.bandwidth_gbs / 1000, p.size_lo_bytes, p.size_hi_bytes, colors="#777777", lw=1.5, ls=":")
    for k, st in enumerate(an.steps):
        owner = owners[k] if k < len(owners) else None
        e, col = st.estimate, level_color(owner)
        lv = levels[owner] if owner is not None else None
        if lv is not None and lv.sweep == sweep and lv.capacity_bytes:
            ax.axvspan(*e.interval_bytes, color=col, alpha=0.22, lw=0)
            ax.axvline(e.capacity_bytes, color=col, ls="--", lw=1.6, zorder=2)
            scope = {"per_cu": f" per {unit_word(vendor)}", "per_xcd": " per XCD"}.get(lv.scope, "")
            labels.append(("capacity", f"{lv.name} {fmt_bytes(lv.capacity_bytes)}{scope}", col, e.capacity_bytes))
        else:       # a level measured on the other sweep, passed again here
            ax.axvline(e.capacity_bytes, color=col, ls=":", lw=1.0, zorder=2)
    title, xlabel = _titles(vendor)[sweep]
    size_axis(ax, c.size_bytes)
    bandwidth_axis(ax, tb.min() * 0.55, tb.max() * 1.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bandwidth (TB/s)")
    ax.set_title(title, fontsize=11)
    return labels


def _draw_chase(ax, detection: Detection, vendor: str | None) -> list:
    an, levels = detection.sweeps["chase"], detection.levels
    c = an.curve
    ns = DENSE_SLOT_BYTES / c.bandwidth_gbs
    ax.plot(c.size_bytes, ns, ".", color="#333333", ms=4, zorder=3)
    owners = latency_plateaus(detection)
    figures = latency_figures(an.plateaus, owners, levels)
    labels = []
    for p, (owner, part), figure in zip(an.plateaus, owners, figures):
        col = level_color(owner)
        lat = figure or DENSE_SLOT_BYTES / p.bandwidth_gbs
        ax.hlines(lat, p.size_lo_bytes, p.size_hi_bytes, colors=col, lw=2.5, zorder=4)
        name = f"{levels[owner].name} {part}".strip() if owner is not None else ""
        labels.append(("plateau", f"{name} {lat:.0f} ns".strip(), col, p, lat))
    for k, st in enumerate(an.steps):
        owner = owners[k][0] if k < len(owners) else None
        ax.axvline(st.estimate.capacity_bytes, color=level_color(owner), ls="--", lw=1.2, zorder=2)
    # a far part too short to be a plateau of its own (a split L2's far half): its step
    for i, lv in enumerate(levels):
        steps = lv.latency_steps or []
        if len(steps) > 1 and not any(o == i and part == "far" for o, part in owners):
            for before, step in zip(steps, steps[1:]):
                ax.hlines(step["latency_ns"], before["up_to_bytes"], step["up_to_bytes"], colors=level_color(i),
                          lw=2.5, ls=(0, (4, 2)), zorder=4)
                span = SimpleNamespace(size_lo_bytes=before["up_to_bytes"], size_hi_bytes=step["up_to_bytes"])
                labels.append(("plateau", f"{lv.name} far {step['latency_ns']:.0f} ns", level_color(i), span,
                               step["latency_ns"]))
    size_axis(ax, c.size_bytes)
    latency_axis(ax, ns.min() * 0.6, ns.max() * 1.8)
    ax.set_xlabel("pointer chain (working set)")
    ax.set_ylabel("latency (ns)")
    ax.set_title(f"Latency: one {unit_word(vendor)} follows a pointer chain", fontsize=11)
    return labels


def _plateau_spots(p, y: float, mul: float) -> list[dict]:
    lo, hi = p.size_lo_bytes, p.size_hi_bytes
    mid = math.sqrt(lo * hi)
    spots = []
    for x, ha in ((mid, "center"), (lo * (hi / lo) ** 0.2, "left"), (hi / (hi / lo) ** 0.2, "right"),
                  (lo, "left"), (hi, "right")):
        spots += [dict(x=x, y=y * mul, ha=ha, va="bottom"), dict(x=x, y=y / mul, ha=ha, va="top")]
    return spots


def _capacity_spots(ax, x: float) -> list[dict]:
    tr = ax.get_xaxis_transform()
    return [dict(x=x * f, y=yf, ha=ha, va="top", transform=tr)
            for yf in (0.97, 0.82, 0.67, 0.5, 0.33, 0.18) for f, ha in ((1.04, "left"), (1 / 1.04, "right"))]


def _place_labels(placer: Placer, labels: list) -> None:
    box = dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85)
    for kind, text, col, *where in labels:      # plateaus first: they belong where they are
        if kind == "plateau":
            p = where[0]
            y = where[1] if len(where) > 1 else p.bandwidth_gbs / 1000
            placer.place(text, _plateau_spots(p, y, 1.1), color=col, fontsize=9, fontweight="bold", bbox=box, zorder=6)
    for kind, text, col, *where in labels:
        if kind == "capacity":
            placer.place(text, _capacity_spots(placer.ax, where[0]), color=col, fontsize=9, bbox=box, zorder=6)


def _legend(fig, any_noisy: bool, any_partial: bool, any_again: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    grey = "#555555"
    handles = [Line2D([], [], ls="", marker=".", color="#333333", label="measured"),
               Line2D([], [], color=grey, lw=2.5, label="plateau: level and figure"),
               Line2D([], [], color=grey, ls="--", lw=1.6, label="size (fall or latency knee)"),
               Patch(color=grey, alpha=0.3, lw=0, label="where the size can lie")]
    if any_again:
        handles.append(Line2D([], [], color=grey, ls=":", lw=1.0, label="a level of the other sweep"))
    if any_partial:
        handles.append(Line2D([], [], color="#777777", ls=":", lw=1.5, label="partial hits inside a fall"))
    if any_noisy:
        handles.append(Line2D([], [], ls="", marker="x", color="#000000", label="noisy point (left out)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9, frameon=False)


def _subtitle(levels, vendor: str | None) -> str:
    line = answer_line({"levels": [lv.to_dict() for lv in levels], "device": {"vendor": vendor}}, tuned=False)
    parts, rows = line.split(" | "), [""]
    for part in parts:
        rows[-1] = f"{rows[-1]} | {part}" if rows[-1] else part
        if len(rows[-1]) > WRAP:
            rows[-1] = rows[-1][: -len(part) - 3]
            rows.append(part)
    return "\n".join(r for r in rows if r)


def build_figure(detection: Detection, title: str, *, vendor: str | None = None):
    """The figure: a bandwidth panel per sweep on the left, the latency chase on the right."""
    sweeps = [s for s in ("private", "shared") if s in detection.sweeps]
    chase = "chase" in detection.sweeps
    rows, cols = max(len(sweeps), 1), 2 if chase and sweeps else 1
    fig = new_figure((14.0 if cols == 2 else 10.0, 3.7 * rows + 1.6))
    fig.set_layout_engine("constrained")
    grid = fig.add_gridspec(rows, cols, width_ratios=[1.45, 1] if cols == 2 else None)
    panels, labels = [], []
    for i, sweep in enumerate(sweeps):
        ax = fig.add_subplot(grid[i, 0])
        labels.append(_draw_sweep(ax, detection, sweep, vendor))
        panels.append(ax)
    if chase:
        ax = fig.add_subplot(grid[:, 1] if sweeps else grid[0, 0])
        labels.append(_draw_chase(ax, detection, vendor))
        panels.append(ax)
    for ax in panels:
        ax.grid(True, which="major", color="#dddddd", lw=0.6)
    an = [detection.sweeps[s] for s in sweeps]
    _legend(fig, any(a.curve.noisy.any() for a in an), any(a.partials for a in an),
            any(len(a.steps) > len([lv for lv in detection.levels if lv.sweep == s and lv.capacity_bytes])
                for a, s in zip(an, sweeps)))
    header(fig, title, _subtitle(detection.levels, vendor))
    fix_layout(fig)
    renderer = fig.canvas.get_renderer()
    taken: list = []
    for ax, found in zip(panels, labels):
        placer = Placer(ax, renderer, taken)
        for line in ax.lines:
            placer.avoid_points(*line.get_data())
        _place_labels(placer, found)
    return fig


def warm_fonts() -> None:
    """Load matplotlib's font cache and lay out some text once (the first layout of a process costs
    most of a plot's time), so that the plot at the end of a run finds it ready."""
    with RENDER_LOCK:
        fig = new_figure((2, 1))
        fig.text(0.5, 0.5, "32.5 TB/s 221 KiB", fontsize=8)
        fig.canvas.draw()


def render_plot(detection: Detection, title: str, *, vendor: str | None = None) -> bytes:
    with RENDER_LOCK:
        return png_bytes(build_figure(detection, title, vendor=vendor), dpi=110, facecolor="white")


def write_plot(path: Path, detection: Detection, title: str, *, vendor: str | None = None) -> None:
    write_bytes_atomic(path, render_plot(detection, title, vendor=vendor))
