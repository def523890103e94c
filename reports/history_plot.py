"""history.png: one panel per level, each GPU's capacity (bandwidth for memory) over its runs,
the runs that fail against their reference crossed."""
from __future__ import annotations

from pathlib import Path

from detect_caches.reports.atomic import write_bytes_atomic
from detect_caches.reports.figure import RENDER_LOCK, new_figure, png_bytes
from detect_caches.reports.history import History, level_keys
from detect_caches.reports.identity import gpu_label


def render_history_plot(history: History) -> bytes:
    runs_all = [r for by_gpu in history.models.values() for rs in by_gpu.values() for r in rs]
    keys = level_keys(runs_all)
    fig = new_figure((9, 2.6 * len(keys)))
    axes = fig.subplots(len(keys), 1, squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for by_gpu in history.models.values():
            for runs in by_gpu.values():
                pts = []
                for i, run in enumerate(runs):
                    lv = next((x for x in run.result["levels"] if f"{x['name']} ({x.get('scope', 'device')})" == key), None)
                    if lv is not None:
                        pts.append((i, lv.get("capacity_bytes") or lv["bandwidth_gbs"], run.failed))
                if not pts:
                    continue
                label = gpu_label(runs[0].result, runs[0].path)[:16]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, lw=1, label=label)
                ax.plot([p[0] for p in pts if p[2]], [p[1] for p in pts if p[2]], "x", color="#d62728", ms=8)
        ax.set_title(key, fontsize=9)
        ax.set_ylabel("capacity (B)" if "HBM" not in key and "DRAM" not in key else "bandwidth (GB/s)", fontsize=8)
        ax.grid(True, color="#dddddd", lw=0.5)
    axes[-1, 0].set_xlabel("run of the GPU (time order)")
    fig.tight_layout()
    return png_bytes(fig, dpi=90)


def write_history_plot(path: Path, history: History) -> None:
    with RENDER_LOCK:
        png = render_history_plot(history)
    write_bytes_atomic(path, png)
