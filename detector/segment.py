"""Changepoint segmentation of log bandwidth with ruptures, the penalty chosen from the data.

The penalty is swept on a log grid from 20 sigma^2 ln n (sigma: the robust noise of the curve)
to the total sum of squares (above which no breakpoint can pay for itself); the chosen penalty is
the middle of the widest range of penalties that all give the same number of breakpoints
(methods.md: 200 of 200 synthetic curves right, where sigma^2 ln n alone fails). The counts over
the grid come from one exact dynamic programme over k; ruptures' Dynp places the breakpoints at
the chosen count and its Pelt, at the chosen penalty, cross-checks them.
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


def best_costs(y: np.ndarray, max_bkps: int) -> np.ndarray:
    """The least L2 cost of a segmentation of ``y`` with k breakpoints, k = 0..max_bkps (segments
    of at least MIN_SIZE; inf where none fits): exact dynamic programming over all segment
    pairs at once, what Dynp does one k at a time."""
    n = y.size
    s1 = np.concatenate([[0.0], np.cumsum(y)])
    s2 = np.concatenate([[0.0], np.cumsum(y * y)])
    length = np.arange(n + 1)[None, :] - np.arange(n + 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        seg = s2[None, :] - s2[:, None] - (s1[None, :] - s1[:, None]) ** 2 / length
    seg = np.where(length >= MIN_SIZE, np.maximum(seg, 0.0), np.inf)   # seg[i, j]: cost of y[i:j]
    out = np.full(max_bkps + 1, np.inf)
    f = seg[0]                       # f[j]: the least cost of y[:j] in k + 1 segments
    out[0] = f[n]
    for k in range(1, max_bkps + 1):
        f = np.min(f[:, None] + seg, axis=0)
        out[k] = f[n]
        if not np.isfinite(f[n]):
            break
    return out


def _counts(y: np.ndarray, pens: np.ndarray) -> list[int]:
    """Breakpoint counts over the penalty grid: the optimal penalized segmentation at penalty p
    has the k that minimises cost_k + p k, so one exact pass over k gives every penalty's count
    (Pelt at each penalty took about ten runs of Python per curve, and prunes some short signals
    to a costlier answer)."""
    total = float(((y - y.mean()) ** 2).sum())
    # k breakpoints cost at least k times the smallest penalty: more never pays
    kmax = int(min(y.size // MIN_SIZE - 1, total / pens[0] + 1))
    costs = best_costs(y, max(kmax, 0))
    ks = np.arange(costs.size)
    return [int(ks[np.argmin(costs + p * ks)]) for p in pens]


def segment_once(y: np.ndarray, *, sigma: float) -> Segmentation:
    """One penalty choice over ``y`` and the segmentation at it."""
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
    if counts[best[0]]:
        # the exact segmentation with the chosen count (Dynp); Pelt at the chosen penalty cross-checks
        # it (ruptures' Pelt prunes a few short signals to a costlier answer)
        try:
            exact = rpt.Dynp(custom_cost=CumsumL2(), min_size=MIN_SIZE, jump=1).fit(y.reshape(-1, 1))
            alt, bkps = bkps, exact.predict(n_bkps=counts[best[0]])[:-1]
            checked = len(alt) == len(bkps) and all(abs(a - b) <= 1 for a, b in zip(sorted(alt), sorted(bkps)))
        except Exception:  # Dynp refuses some short signals; Pelt's answer stands
            checked = True
    else:
        checked = not bkps
        bkps = []
    return Segmentation(bkps, pen, sig, (float(lo), float(hi)), checked)
