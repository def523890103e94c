"""bandwidth.png: log-log bandwidth against working set for each sweep, plateaus shaded,
capacities and their intervals marked. Mid-grey text on a white card reads in dark and light viewers."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib.ticker
import numpy as np

from detect_caches.detector.levels import Detection
from detect_caches.reports.atomic import write_bytes_atomic
from detect_caches.reports.figure import RENDER_LOCK, new_figure, png_bytes
from detect_caches.reports.fmt import fmt_bytes
from detect_caches.grid import DENSE_SLOT_BYTES

SWEEP_TITLES = {"chase": "latency: one-SM pointer chase (x = chain bytes)",
                "private": "private sweep: rows by SM/CU (x = bytes per SM/CU)",
                "shared": "shared sweep: whole device (x = aggregate bytes)"}
COLORS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#d62728", "#8c564b"]


def binary_ticks(lo: float, hi: float, max_ticks: int = 9) -> list[float]:
    """Powers of two between ``lo`` and ``hi``, every 1, 2 or 4 octaves (16 KiB, 64 KiB, ...)."""
    first, last = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
    for every in (1, 2, 4, 8):
        exps = [e for e in range(first, last + 1) if e % every == 0]
        if len(exps) <= max_ticks:
            return [2.0 ** e for e in exps]
    return [2.0 ** first, 2.0 ** last]


def tick_label(v: float) -> str:
    """A binary size without a useless decimal: 16 KiB, 256 KiB, 4 MiB, 1 GiB."""
    return fmt_bytes(v).replace(".0 ", " ")


def _mark_capacities(ax, an, ymin: float) -> None:
    for st in an.steps:
        e = st.estimate
        ax.axvspan(e.low_bytes, e.high_bytes, color="#888888", alpha=0.18)
        ax.axvline(e.capacity_bytes, color="#333333", ls="--", lw=1.2)
        if e.half_hit_bytes and abs(math.log(e.half_hit_bytes / e.capacity_bytes)) > 0.02:
            ax.axvline(e.half_hit_bytes, color="#999999", ls="-.", lw=0.8)
        ax.text(e.capacity_bytes, ymin, f" {fmt_bytes(e.capacity_bytes)} ({e.shape})", rotation=90,
                va="bottom", fontsize=8, color="#333333")


def _latency_panel(ax, an) -> None:
    """Latency against chain size: plateaus (ns), knees."""
    c = an.curve
    ns = DENSE_SLOT_BYTES / c.bandwidth_gbs
    ax.loglog(c.size_bytes, ns, ".", color="#444444", ms=4, label="measured (ns per hop)")
    for i, p in enumerate(an.plateaus):
        col = COLORS[i % len(COLORS)]
        ax.hlines(DENSE_SLOT_BYTES / p.bandwidth_gbs, p.size_lo_bytes, p.size_hi_bytes, colors=col, lw=2)
        ax.text(np.sqrt(p.size_lo_bytes * p.size_hi_bytes), DENSE_SLOT_BYTES / p.bandwidth_gbs * 1.12,
                f"{DENSE_SLOT_BYTES / p.bandwidth_gbs:.0f} ns", ha="center", fontsize=8, color=col)
    for st in an.steps:
        ax.axvline(st.estimate.capacity_bytes, color="#333333", ls="--", lw=1.0)
    _size_axis(ax, c.size_bytes)
    ax.set_ylim(ns.min() * 0.7, ns.max() * 1.6)
    ax.set_xlabel("chain (working set)")
    ax.set_ylabel("latency (ns)")
    ax.set_title(SWEEP_TITLES["chase"], fontsize=10, color="#222222")
    ax.grid(True, which="both", color="#dddddd", lw=0.5)
    ax.plot([], [], ls="--", color="#333333", label="latency knee")
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)


def _size_axis(ax, size_bytes) -> None:
    """The working-set axis over the sizes measured, ticked at binary sizes (16 KiB, 4 MiB)."""
    lo, hi = float(np.min(size_bytes)) / 1.15, float(np.max(size_bytes)) * 1.15
    ax.set_xlim(lo, hi)
    ticks = binary_ticks(lo, hi)
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([tick_label(t) for t in ticks]))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def build_figure(detection: Detection, title: str):
    """The matplotlib figure: one log-log panel per sweep."""
    sweeps = [s for s in ("private", "shared", "chase") if s in detection.sweeps]
    fig = new_figure((10, 4.2 * len(sweeps)))
    axes = fig.subplots(len(sweeps), 1, squeeze=False)
    fig.patch.set_facecolor("white")
    for ax, sweep in zip(axes[:, 0], sweeps):
        an = detection.sweeps[sweep]
        c = an.curve
        ax.set_facecolor("white")
        if sweep == "chase":
            _latency_panel(ax, an)
            continue
        ax.loglog(c.size_bytes, c.bandwidth_gbs, ".", color="#444444", ms=4, label="measured (median per size)")
        if c.noisy.any():
            ax.loglog(c.size_bytes[c.noisy], c.bandwidth_gbs[c.noisy], "x", color="#d62728", ms=6, label="noisy point")
        for i, p in enumerate(an.plateaus):
            col = COLORS[i % len(COLORS)]
            ax.axvspan(p.size_lo_bytes, p.size_hi_bytes, color=col, alpha=0.10)
            ax.hlines(p.bandwidth_gbs, p.size_lo_bytes, p.size_hi_bytes, colors=col, lw=2)
            ax.text(np.sqrt(p.size_lo_bytes * p.size_hi_bytes), p.bandwidth_gbs * 1.08,
                    f"{p.bandwidth_gbs / 1000:.2f} TB/s", ha="center", fontsize=8, color=col)
        for p in an.partials:
            ax.hlines(p.bandwidth_gbs, p.size_lo_bytes, p.size_hi_bytes, colors="#777777", lw=1.5, ls=":")
        ymin = c.bandwidth_gbs.min() * 0.8
        _mark_capacities(ax, an, ymin)
        _size_axis(ax, c.size_bytes)
        ax.set_xlabel("working set")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_title(SWEEP_TITLES[sweep], fontsize=10, color="#222222")
        ax.grid(True, which="both", color="#dddddd", lw=0.5)
        ax.set_ylim(c.bandwidth_gbs.min() * 0.6, c.bandwidth_gbs.max() * 1.35)
        ax.plot([], [], ls="--", color="#333333", label="capacity (the rule of its fall shape, see report)")
        if any(st.estimate.half_hit_bytes for st in an.steps):
            ax.plot([], [], ls="-.", color="#999999", label="half-hit point (secondary)")
        if an.partials:
            ax.plot([], [], ls=":", color="#777777", label="partial hits inside a fall")
        ax.fill_between([], [], color="#888888", alpha=0.18, label="where the size can lie")
        ax.legend(loc="lower left", fontsize=8, framealpha=0.9)
    fig.suptitle(title.replace("$", r"\$"), fontsize=12, color="#222222")
    fig.tight_layout()
    return fig


def warm_fonts() -> None:
    """Load matplotlib's font cache and lay out some text once (the first layout of a process costs
    most of a plot's time), so that the plot at the end of a run finds it ready."""
    with RENDER_LOCK:
        fig = new_figure((2, 1))
        fig.text(0.5, 0.5, "32.5 TB/s 221 KiB", fontsize=8)
        fig.canvas.draw()


def render_plot(detection: Detection, title: str) -> bytes:
    with RENDER_LOCK:
        return png_bytes(build_figure(detection, title), dpi=110, facecolor="white")


def write_plot(path: Path, detection: Detection, title: str) -> None:
    write_bytes_atomic(path, render_plot(detection, title))
