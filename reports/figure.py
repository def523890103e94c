"""Figures drawn without pyplot: a Figure on an explicit Agg canvas. pyplot's backend and its
list of open figures belong to the process; the Python API must leave a user's interactive
backend as it found it. Text layout (matplotlib's mathtext parser, the font cache) is not
thread-safe: concurrent runs of the API render one figure at a time (RENDER_LOCK)."""
from __future__ import annotations

import io
import threading

RENDER_LOCK = threading.RLock()


def new_figure(size: tuple[float, float]):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig, *, dpi: int, facecolor: str | None = None) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **({"facecolor": facecolor} if facecolor else {}))
    return buf.getvalue()
