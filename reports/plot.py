"""bandwidth.png: log-log bandwidth against working set for each sweep, plateaus shaded,
capacities and their intervals marked. Mid-grey text on a white card reads in dark and light viewers."""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from detector.levels import Detection  # noqa: E402
from reports.atomic import write_bytes_atomic  # noqa: E402
from reports.fmt import fmt_bytes  # noqa: E402

SWEEP_TITLES = {"private": "private sweep: one program per SM/CU (x = bytes per SM/CU)",
                "shared": "shared sweep: whole device (x = aggregate bytes)"}
COLORS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#d62728", "#8c564b"]


def _bytes_formatter(v, _pos):
    return fmt_bytes(v).replace(".0 ", " ")


def build_figure(detection: Detection, title: str):
    """The matplotlib figure: one log-log panel per sweep."""
    sweeps = [s for s in ("private", "shared") if s in detection.sweeps]
    fig, axes = plt.subplots(len(sweeps), 1, figsize=(10, 4.2 * len(sweeps)), squeeze=False)
    fig.patch.set_facecolor("white")
    for ax, sweep in zip(axes[:, 0], sweeps):
        an = detection.sweeps[sweep]
        c = an.curve
        ax.set_facecolor("white")
        ax.loglog(c.size_bytes, c.bandwidth_gbs, ".", color="#444444", ms=4, label="measured (median per size)")
        if c.noisy.any():
            ax.loglog(c.size_bytes[c.noisy], c.bandwidth_gbs[c.noisy], "x", color="#d62728", ms=6, label="noisy point")
        for i, p in enumerate(an.plateaus):
            col = COLORS[i % len(COLORS)]
            ax.axvspan(p.size_lo_bytes, p.size_hi_bytes, color=col, alpha=0.10)
            ax.hlines(p.bandwidth_gbs, p.size_lo_bytes, p.size_hi_bytes, colors=col, lw=2)
            ax.text(np.sqrt(p.size_lo_bytes * p.size_hi_bytes), p.bandwidth_gbs * 1.08,
                    f"{p.bandwidth_gbs / 1000:.2f} TB/s", ha="center", fontsize=8, color=col)
        for st in an.steps:
            e = st.estimate
            ax.axvspan(e.low_bytes, e.high_bytes, color="#888888", alpha=0.18)
            ax.axvline(e.capacity_bytes, color="#333333", ls="--", lw=1)
            ax.axvline(e.onset_bytes, color="#333333", ls=":", lw=1)
            ax.text(e.capacity_bytes, c.bandwidth_gbs.min() * 0.8,
                    f" {fmt_bytes(e.capacity_bytes)}", rotation=90, va="bottom", fontsize=8, color="#333333")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_bytes_formatter))
        ax.set_xlabel("working set")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_title(SWEEP_TITLES[sweep], fontsize=10, color="#222222")
        ax.grid(True, which="both", color="#dddddd", lw=0.5)
        ax.set_ylim(c.bandwidth_gbs.min() * 0.6, c.bandwidth_gbs.max() * 1.35)
        ax.plot([], [], ls="--", color="#333333", label="capacity (half-hit point)")
        ax.plot([], [], ls=":", color="#333333", label="onset (last size at plateau speed)")
        ax.fill_between([], [], color="#888888", alpha=0.18, label="capacity interval")
        ax.legend(loc="lower left", fontsize=8, framealpha=0.9)
    fig.suptitle(title, fontsize=12, color="#222222")
    fig.tight_layout()
    return fig


def render_plot(detection: Detection, title: str) -> bytes:
    fig = build_figure(detection, title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, facecolor="white")
    plt.close(fig)
    return buf.getvalue()


def write_plot(path: Path, detection: Detection, title: str) -> None:
    write_bytes_atomic(path, render_plot(detection, title))
