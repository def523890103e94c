"""A figure's header: the title and the lines under it (the answer, a drift), stacked at the top,
and the panels laid out below them; the layout is then frozen so that labels placed afterwards
(reports.label_place) land where their boxes were measured."""
from __future__ import annotations

from detect_caches.reports.search import show


def _plain(text: str) -> str:
    """Text a font can draw: bytes that are not UTF-8 (a host or model name) shown escaped, $ literal."""
    return show(text).replace("$", r"\$")


def header(fig, title: str, *lines: str | tuple[str, str]) -> None:
    """``lines``: text, or (text, colour)."""
    fig.text(0.5, 0.995, _plain(title), fontsize=13, fontweight="bold", ha="center", va="top")
    for line in lines:
        text, color = line if isinstance(line, tuple) else (line, "#222222")
        if text:
            fig.text(0.5, 0.995, _plain(text), fontsize=10, ha="center", va="top", color=color)


def fix_layout(fig) -> None:
    """Stack the header's lines, lay the panels out below them (constrained), then freeze. Only
    the layout runs here, not a drawing; what is drawn inside the panels (clipped to them) is
    left out of it."""
    for ax in fig.axes:
        for artist in ax.lines + ax.collections + ax.patches:
            artist.set_in_layout(False)
    renderer = fig.canvas.get_renderer()
    to_fig = fig.transFigure.inverted()
    top = 0.995
    for t in fig.texts:
        t.set_y(top)
        top = t.get_window_extent(renderer).transformed(to_fig).y0 - 0.004
    engine = fig.get_layout_engine()
    engine.set(rect=(0.0, 0.0, 1.0, top))
    engine.execute(fig)
    fig.set_layout_engine("none")
