"""Changepoint segmentation of log bandwidth with ruptures, the penalty chosen from the data.

The penalty is swept on a log grid from 20 sigma^2 ln n (sigma: the robust noise of the curve)
to the total sum of squares (above which no breakpoint can pay for itself); the chosen penalty is
the middle of the widest range of penalties that all give the same number of breakpoints
(methods.md: 200 of 200 synthetic curves right, where sigma^2 ln n alone fails). Pelt does the
search; the exact Dynp cross-checks it at the same number of breakpoints.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import ruptures as rpt

from detect_caches.detector.cost import CumsumL2
from detect_caches.detector.curve import robust_sigma

MIN_SIZE = 2
PENALTY_GRID = 48


@dataclass
class Segmentation:
    breakpoints: list[int]      # indices where a new segment starts (exclusive ends of ruptures)
    penalty: float
    sigma: float
    stable_range: tuple[float, float]   # penalties giving the same count
    cross_checked: bool          # Dynp found the same breakpoints (within one bin)

    @property
    def stability(self) -> float:
        """Width of the stable penalty range in decades, capped at 1."""
        lo, hi = self.stable_range
        return float(min(1.0, np.log10(hi / lo) / 2)) if hi > lo > 0 else 0.0


def _pelt(signal: np.ndarray, pen: float) -> list[int]:
    algo = rpt.Pelt(custom_cost=CumsumL2(), min_size=MIN_SIZE, jump=1).fit(signal.reshape(-1, 1))
    return algo.predict(pen=pen)[:-1]


def segment(y: np.ndarray, *, sigma: float | None = None, depth: int = 3) -> Segmentation:
    """Segment a uniformly spaced log-bandwidth signal ``y``.

    One large step (L1 to L2 is often 3x) sets the scale of the penalty range and can hide a
    smaller, still clear step elsewhere; so each segment found is segmented again on its own,
    with the same noise level, until a segment splits no further.
    """
    sig = max(robust_sigma(y) if sigma is None else sigma, 1e-4)
    top = segment_once(y, sigma=sig)
    if depth <= 0 or not top.breakpoints:
        return top
    edges = [0, *top.breakpoints, y.size]
    bkps, checked = [], top.cross_checked
    for a, b in zip(edges, edges[1:]):
        if a > 0:
            bkps.append(a)
        if b - a >= 3 * MIN_SIZE:
            inner = segment(y[a:b], sigma=sig, depth=depth - 1)
            bkps.extend(a + k for k in inner.breakpoints)
            checked = checked and inner.cross_checked
    return Segmentation(sorted(bkps), top.penalty, sig, top.stable_range, checked)


def _counts(y: np.ndarray, pens: np.ndarray) -> list[int]:
    """Breakpoint counts over the penalty grid. The count of an optimal penalized segmentation
    never rises with the penalty, so between two penalties with the same count every penalty
    has it: bisect between changes instead of running Pelt at all 48 (about 10 runs, not 48)."""
    counts: list[int | None] = [None] * len(pens)
    counts[0], counts[-1] = len(_pelt(y, pens[0])), len(_pelt(y, pens[-1]))
    todo = [(0, len(pens) - 1)]
    while todo:
        i, j = todo.pop()
        if counts[i] == counts[j]:
            counts[i:j + 1] = [counts[i]] * (j - i + 1)
        elif j - i > 1:
            m = (i + j) // 2
            counts[m] = len(_pelt(y, pens[m]))
            todo += [(i, m), (m, j)]
    return counts


def segment_once(y: np.ndarray, *, sigma: float) -> Segmentation:
    """One penalty choice and one Pelt search over ``y``."""
    n = y.size
    if n < 2 * MIN_SIZE:
        return Segmentation([], 0.0, 0.0, (0.0, 0.0), True)
    sig = sigma
    total = float(((y - y.mean()) ** 2).sum())
    floor = 20 * sig ** 2 * np.log(n)
    if total <= floor:
        return Segmentation([], floor, sig, (floor, floor), True)
    pens = np.geomspace(floor, total * 1.01, PENALTY_GRID)
    counts = _counts(y, pens)
    # the widest run of equal counts, measured in log-penalty
    best, best_width, i = (0, 0), -1.0, 0
    while i < len(pens):
        j = i
        while j + 1 < len(pens) and counts[j + 1] == counts[i]:
            j += 1
        width = np.log(pens[j] / pens[i]) if j > i else 0.0
        if width > best_width or (width == best_width and counts[i] > counts[best[0]]):
            best, best_width = (i, j), width
        i = j + 1
    lo, hi = pens[best[0]], pens[best[1]]
    pen = float(np.sqrt(lo * hi))
    bkps = _pelt(y, pen)
    checked = True
    if bkps:
        try:
            exact = rpt.Dynp(custom_cost=CumsumL2(), min_size=MIN_SIZE, jump=1).fit(y.reshape(-1, 1))
            alt = exact.predict(n_bkps=len(bkps))[:-1]
            checked = all(abs(a - b) <= 1 for a, b in zip(sorted(alt), sorted(bkps)))
        except Exception:  # Dynp refuses some short signals; Pelt's answer stands
            checked = True
    return Segmentation(bkps, pen, sig, (float(lo), float(hi)), checked)
