"""Axes that read in plain units: working sets at binary sizes (16 KiB, 4 MiB), bandwidth in
TB/s and latency in ns as plain numbers on log scales (5, 10, 20; never 3x10^4)."""
from __future__ import annotations

import math

import matplotlib.ticker
import numpy as np

from detect_caches.reports.fmt import fmt_bytes


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


def size_axis(ax, size_bytes, max_ticks: int = 7) -> None:
    """The working-set axis (log) over the sizes measured, ticked at binary sizes."""
    lo, hi = float(np.min(size_bytes)) / 1.15, float(np.max(size_bytes)) * 1.15
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ticks = binary_ticks(lo, hi, max_ticks)
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([tick_label(t) for t in ticks]))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _plain(v: float, _pos=None) -> str:
    return f"{v:g}"


def plain_log_axis(axis, lo: float, hi: float, subs=(1.0, 2.0, 3.0, 5.0)) -> None:
    """A log axis from ``lo`` to ``hi`` ticked at 1, 2, 3, 5 x powers of ten, labelled as plain
    numbers; sparser (1, 2, 5 or 1 alone) when the range is wide."""
    decades = math.log10(hi / lo)
    if decades > 2.5:
        subs = (1.0,)
    elif decades > 1.5:
        subs = (1.0, 2.0, 5.0)
    axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
    axis.set_minor_locator(matplotlib.ticker.NullLocator())
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def bandwidth_axis(ax, lo_tb: float, hi_tb: float) -> None:
    ax.set_yscale("log")
    ax.set_ylim(lo_tb, hi_tb)
    plain_log_axis(ax.yaxis, lo_tb, hi_tb)


def latency_axis(ax, lo_ns: float, hi_ns: float) -> None:
    ax.set_yscale("log")
    ax.set_ylim(lo_ns, hi_ns)
    plain_log_axis(ax.yaxis, lo_ns, hi_ns)
