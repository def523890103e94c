"""history.png: a panel per level and figure (size, bandwidth, latency) in readable units, each
GPU's runs against their dates, its reference dashed and the band the check tolerates around it
shaded, every drift marked on the figure that drifted and labelled with its change."""
from __future__ import annotations

from pathlib import Path

from detect_caches.reports.atomic import write_bytes_atomic
from detect_caches.reports.figure import RENDER_LOCK, new_figure, png_bytes
from detect_caches.reports.gpu_names import short_names
from detect_caches.reports.history import History
from detect_caches.reports.history_series import FIGURES, all_runs, dated, panels
from detect_caches.reports.label_place import Placer
from detect_caches.reports.plot_header import fix_layout, header
from detect_caches.reports.summary import scope_words

GPU_COLORS = ["#0072B2", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#8c564b", "#7f7f7f"]
FAIL, CHANGED = "#D55E00", "#777777"
MAX_NAMED = 10        # GPUs named in the legend; more are drawn alike
DEFAULT_BAND = 0.03


def _unit(quantity: str, values: list[float]) -> tuple[float, str]:
    mid = sorted(values)[len(values) // 2]
    if quantity == "capacity":
        div, unit = next(((d, u) for d, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")) if mid >= d), (1, "B"))
        return div, f"size ({unit})"
    if quantity == "bandwidth":
        return (1000.0, "bandwidth (TB/s)") if mid >= 1000 else (1.0, "bandwidth (GB/s)")
    return 1.0, "latency (ns)"


def _level_words(key: str, vendor: str | None) -> str:
    name, _, scope = key.partition(" (")
    words = scope_words(scope.rstrip(")"), vendor)
    return name if words == "device" else f"{name} {words}"


def _draw(ax, quantity: str, found, colors: dict, names: dict, drifts: list) -> None:
    values = [p.value for s in found for p in s.points]
    div, ylabel = _unit(quantity, values)
    lo, hi = [], []
    for s in found:
        col = colors[s.gpu]
        xs = [p.when for p in s.points]
        dets = [p.detectable for p in s.points]
        first = next((d for d in dets if d is not None), DEFAULT_BAND)
        dets = [first if d is None else d for d in dets]
        refs = [p.reference / div for p in s.points]
        ax.fill_between(xs, [r * (1 - d) for r, d in zip(refs, dets)], [r * (1 + d) for r, d in zip(refs, dets)],
                        color=col, alpha=0.12, lw=0, step="mid" if len(xs) > 1 else None)
        ax.plot(xs, refs, ls="--", color=col, lw=1.0)
        ax.plot(xs, [p.value / div for p in s.points], "o-", color=col, ms=4, lw=1.3, label=names[s.gpu])
        for p in s.points:
            if p.drift:
                ax.plot([p.when], [p.value / div], "X" if p.fails else "o", ms=11, mfc=FAIL if p.fails else "none",
                        mec=FAIL if p.fails else CHANGED, mew=1.5, zorder=5)
                drifts.append((ax, p, div, FAIL if p.fails else CHANGED, s.gpu))
        lo += [r * (1 - d) for r, d in zip(refs, dets)] + [p.value / div for p in s.points]
        hi += [r * (1 + d) for r, d in zip(refs, dets)] + [p.value / div for p in s.points]
    span = max(hi) - min(lo)
    ax.set_ylim(min(lo) - 0.35 * span, max(hi) + 0.35 * span)
    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_formatter(__import__("matplotlib.ticker").ticker.FuncFormatter(lambda v, _p: f"{v:.4g}"))


def _label_drifts(fig, drifts: list) -> None:
    """Each drift's change beside its marker, where the label covers nothing."""
    renderer = fig.canvas.get_renderer()
    taken: list = []
    placers: dict = {}
    for ax, p, div, col, _gpu in drifts:
        if ax not in placers:
            placers[ax] = Placer(ax, renderer, taken)
            for line in ax.lines:
                xy = line.get_xydata()
                placers[ax].avoid_points(xy[:, 0], xy[:, 1])
        text = (f"{p.change:+.1%} {p.direction}" if p.change is not None else p.direction).strip()
        spots = [dict(x=p.when, y=p.value / div, ha=ha, va=va) for va in ("bottom", "top")
                 for ha in ("right", "left", "center")]
        placers[ax].place(f" {text} ", spots, color=col, fontsize=9, fontweight="bold",
                          bbox=dict(boxstyle="round,pad=0.2", fc="white", ec=col, lw=0.8), zorder=7)


def _drift_line(history: History, drifts: list, names: dict) -> tuple[str, str]:
    """The check's verdict (history.drift: the newest runs), and earlier runs' failing drifts apart."""
    def said(newest: bool) -> list[str]:
        return [f"{ax.get_title()} of {names[gpu]} " + (f"{p.change:+.1%}" if p.change is not None else p.direction)
                for ax, p, _d, _c, gpu in drifts if p.fails and p.newest == newest]
    now, before = said(True), said(False)
    if history.drift:       # a figure the newest run lacks (a level gone) has no point: name its run
        now = now or [f"{names.get(label, label)}: {'; '.join(runs[-1].comparison.drifted)}"
                      for gpus in history.models.values() for label, runs in gpus.items() if runs[-1].failed]
        return "Drift that fails the check: " + "; ".join(now[:4]) + (" ..." if len(now) > 4 else ""), FAIL
    if before:
        return ("No drift in the newest runs; earlier runs drifted: " + "; ".join(before[:3])
                + (" ..." if len(before) > 3 else "")), "#222222"
    return "No drift that fails the check", "#222222"


def build_history_figure(history: History):
    found = panels(history)
    runs = all_runs(history)
    vendor = runs[0].result["device"].get("vendor") if runs else None
    keys = list(dict.fromkeys(key for key, *_ in found))
    cols = [q for q, _ in FIGURES if any(q == quantity for _, quantity, _, _ in found)]
    fig = new_figure((4.6 * len(cols) + 0.6, 2.5 * len(keys) + 1.9))
    fig.set_layout_engine("constrained")
    grid = fig.add_gridspec(max(len(keys), 1), max(len(cols), 1))
    gpus = list(dict.fromkeys(s.gpu for *_, ss in found for s in ss))
    colors = {g: GPU_COLORS[i % len(GPU_COLORS)] for i, g in enumerate(gpus)}
    names = short_names([(r.result, r.path) for r in runs])
    names = {g: names.get(g, g) for g in gpus}
    drifts: list = []
    for key, quantity, _field, ss in found:
        ax = fig.add_subplot(grid[keys.index(key), cols.index(quantity)])
        _draw(ax, quantity, ss, colors, names, drifts)
        ax.set_title(f"{_level_words(key, vendor)}: {'size' if quantity == 'capacity' else quantity}", fontsize=10)
        ax.grid(True, color="#dddddd", lw=0.5)
        if dated(history):
            import matplotlib.dates as mdates
            locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        else:
            ax.set_xlabel("run (time order; some runs carry no date)")
    _legend(fig, gpus, colors, names, drifts)
    header(fig, f"History: {', '.join(history.models)}",
           f"{len(runs)} run(s) of {len(gpus)} GPU(s), each against its reference ({history.reference.text}); "
           f"shaded: the change the check tolerates", _drift_line(history, drifts, names))
    fix_layout(fig)
    _label_drifts(fig, drifts)
    return fig


def _legend(fig, gpus, colors, names, drifts) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Line2D([], [], color=colors[g], marker="o", ms=4, label=names[g]) for g in gpus[:MAX_NAMED]]
    if len(gpus) > MAX_NAMED:
        handles.append(Line2D([], [], color="#999999", marker="o", ms=4, label=f"{len(gpus) - MAX_NAMED} more GPUs"))
    handles += [Line2D([], [], color="#555555", ls="--", lw=1, label="reference"),
                Patch(color="#555555", alpha=0.2, lw=0, label="tolerated band")]
    if any(p.fails for _, p, *_ in drifts):
        handles.append(Line2D([], [], ls="", marker="X", ms=9, mfc=FAIL, mec=FAIL, label="drift (fails the check)"))
    if any(not p.fails for _, p, *_ in drifts):
        handles.append(Line2D([], [], ls="", marker="o", ms=9, mfc="none", mec=CHANGED, label="change (passes)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=9, frameon=False)


def render_history_plot(history: History) -> bytes:
    return png_bytes(build_history_figure(history), dpi=100, facecolor="white")


def write_history_plot(path: Path, history: History) -> None:
    with RENDER_LOCK:
        png = render_history_plot(history)
    write_bytes_atomic(path, png)
