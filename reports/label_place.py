"""Labels that never overlap each other, the legend or the data, and never leave their panel:
each label tries its candidate places in turn and takes the first that is free (bounding boxes
from the renderer, so after the figure's layout is fixed). The checks the tests run on every
plot are here too."""
from __future__ import annotations

import numpy as np

PAD_PX = 2.0


def _box(artist, renderer):
    return artist.get_window_extent(renderer).padded(PAD_PX)


class Placer:
    """Places labels on one axes, avoiding what is placed already (on any axes of the figure)."""

    def __init__(self, ax, renderer, taken: list | None = None):
        self.ax, self.renderer = ax, renderer
        self.taken = taken if taken is not None else []
        self.points = np.empty((0, 2))

    def avoid_points(self, x, y) -> None:
        """Data points a label must not cover (data coordinates)."""
        xy = np.column_stack([np.asarray(x, float), np.asarray(y, float)])
        self.points = np.vstack([self.points, self.ax.transData.transform(xy)])

    def _cost(self, box) -> tuple[int, int, int]:
        frame = self.ax.get_window_extent(self.renderer)
        outside = int(not (box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1))
        overlaps = sum(1 for t in self.taken if box.overlaps(t))
        covered = int(np.count_nonzero((self.points[:, 0] >= box.x0) & (self.points[:, 0] <= box.x1)
                                       & (self.points[:, 1] >= box.y0) & (self.points[:, 1] <= box.y1)))
        return outside, overlaps, covered

    def place(self, text: str, candidates: list[dict], **style):
        """Put ``text`` at the first free candidate (each a dict of x, y and Text keywords such as
        ha, va, transform); the least bad one when none is free. Returns the Text."""
        best = None
        for cand in candidates:
            t = self.ax.text(s=text, **{**style, **cand})
            cost = self._cost(_box(t, self.renderer))
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, t)
            else:
                t.remove()
            if cost == (0, 0, 0):
                break
        self.taken.append(_box(best[1], self.renderer))
        return best[1]


def _ticks(axis) -> list:
    """Tick labels the axis draws: those of ticks inside its view."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
        if lo - 1e-12 * abs(hi) <= tick.get_loc() <= hi + 1e-12 * abs(hi):
            out += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    return out


def text_artists(fig) -> list:
    """Every visible, non-empty text the figure draws: titles, axis and tick labels, legends,
    labels on the panels."""
    texts = list(fig.texts) + [fig._suptitle] if getattr(fig, "_suptitle", None) else list(fig.texts)
    for legend in fig.legends:
        texts += legend.get_texts()
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        texts += list(ax.texts) + _ticks(ax.xaxis) + _ticks(ax.yaxis)
        texts += [ax.xaxis.get_offset_text(), ax.yaxis.get_offset_text()]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    unique = {id(t): t for t in texts if t is not None}
    return [t for t in unique.values() if t.get_visible() and t.get_text().strip()]


def overlapping_texts(fig) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes overlap (the figure drawn first)."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    texts = text_artists(fig)
    boxes = [t.get_window_extent(renderer) for t in texts]
    pairs = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if boxes[i].width and boxes[j].width and boxes[i].overlaps(boxes[j]):
                pairs.append((texts[i].get_text(), texts[j].get_text()))
    return pairs


def texts_outside(fig) -> list[str]:
    """Texts that leave the figure, and labels (axes texts) that leave their panel."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    page = fig.bbox
    out = []
    for t in text_artists(fig):
        box = t.get_window_extent(renderer)
        if box.x0 < page.x0 - 1 or box.x1 > page.x1 + 1 or box.y0 < page.y0 - 1 or box.y1 > page.y1 + 1:
            out.append(t.get_text())
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        for t in ax.texts:
            box = t.get_window_extent(renderer)
            if t.get_visible() and not (box.x0 >= frame.x0 - 1 and box.x1 <= frame.x1 + 1
                                        and box.y0 >= frame.y0 - 1 and box.y1 <= frame.y1 + 1):
                out.append(t.get_text())
    return out
