"""The shape of a fall between two plateaus, read from hit rates.

Bandwidths mix harmonically with the hit rate h: 1/BW = h/B_hi + (1 - h)/B_lo, so each point of
a transition gives a hit rate. A non-increasing (isotonic) fit of h against the working set
keeps an isolated noisy point from ending the plateau early, and the sizes where it crosses
97%, 80%, 50% and 20% describe the fall:

- ``cliff``: the hit rate falls from ~100% to near 0 between two sizes a few percent apart
  (LRU with a cyclic sweep); ``cliff, then partial hits`` when a tail of partial hits follows
  (the H200's L1).
- ``hashed-set fall``: symmetric in log size and not broad (W95 to W20 within 0.55 in ln):
  an LRU cache whose sets are picked by an address hash loses some sets before it is full and
  keeps some after, around its capacity. Narrow falls (within 0.2 in ln) are read the same way.
- ``tail``: starts abruptly and keeps partial hits long after (random or pseudo-LRU replacement).
- ``decline, then collapse``: the hit rate sags slowly, then collapses (NVIDIA L1 tables).
- ``broad fall``: symmetric but too broad for hashed-set LRU with many ways.
- ``step``: at most one measured point inside the fall (a table too coarse to say more).

Which figure is the capacity follows from the shape (detector.capacity).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CLIFF_SPAN = 1.02     # neighbouring sizes at most 2% apart (the bisection resolves 1 KiB) ...
CLIFF_GRANULE_BYTES = 1024   # ... or one KiB apart, the private sweep's resolution
AFTER_CLIFF = 1.1     # a cliff is confirmed by a point within 10% of size past it
CLIFF_DROP = 0.15     # ... across which at least 15% of the log gap between plateaus falls, or
CLIFF_MIN_DROP = math.log10(1.10)   # 10% of the bandwidth where that gap is wide: an H200's L1
                      # falls 18% in 0.5 KiB onto partial hits, 8% of its gap to the L2's speed
                      # (BENCHMARKS.md, 2026-11-30, fourth session)
NARROW_SPAN = 0.2     # ln(W20 / W95) below this: a narrow fall
HASHED_SPAN = 0.55    # ... up to this, and symmetric: a hashed-set fall
SYMMETRIC = (0.5, 1.8)  # rho = ln(W10/W50) / ln(W50/W90): 1 for a symmetric fall, 2.2 for random
                        # replacement, below 0.3 for a slow decline that collapses

TOP_HEAVY = 1.5       # ln(W80/W95) / ln(W20/W80) above this (0.56 for a logistic): a decline that
                      # collapses, even when the collapse's own tail makes rho look symmetric
LONG_DECLINE = 0.2    # ... and the sag from 95% to 80% spans more than ln 1.22 (a pseudo-LRU L1 sags
                      # over ~1.4x; an H200-like split L2 sags ~1.15x before its hashed fall)
SHAPES = ("cliff", "cliff, then partial hits", "hashed-set fall", "tail", "decline, then collapse",
          "broad fall", "step")


@dataclass
class Fall:
    """What the hit rate does across one transition (sizes in bytes; None where not crossed)."""

    shape: str
    onset_bytes: float              # last measured size still served whole (within the noise)
    w97_bytes: float | None
    w95_bytes: float | None
    w80_bytes: float | None
    w50_bytes: float | None
    w20_bytes: float | None
    cliff_bytes: float | None = None   # first size past a resolved cliff
    span: float = math.nan             # ln(W20 / W95)
    rho: float = math.nan              # asymmetry, see SYMMETRIC
    w90_bytes: float | None = None
    w10_bytes: float | None = None
    top_ratio: float = math.nan        # ln(W80/W95) / ln(W20/W80), see TOP_HEAVY


def hit_rates(y: np.ndarray, hi_log: float, lo_log: float) -> np.ndarray:
    """Hit rate in the faster level for each log10 bandwidth ``y`` (harmonic mixing)."""
    inv_hi, inv_lo = 10.0 ** -hi_log, 10.0 ** -lo_log
    return (10.0 ** -np.asarray(y, dtype=float) - inv_lo) / (inv_hi - inv_lo)


def isotonic_decreasing(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Least-squares non-increasing fit (pool adjacent violators)."""
    values = np.asarray(values, dtype=float)
    weights = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)
    blocks: list[list[float]] = []   # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            (v1, w1, c1), (v2, w2, c2) = blocks[-2], blocks[-1]
            blocks[-2:] = [[(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2]]
    return np.concatenate([np.full(c, v) for v, _, c in blocks]) if blocks else values


def crossing(sizes: np.ndarray, h: np.ndarray, level: float) -> float | None:
    """First size where the non-increasing ``h`` drops below ``level``, interpolated in log size."""
    below = np.nonzero(h < level)[0]
    if below.size == 0:
        return None
    k = int(below[0])
    if k == 0:
        return float(sizes[0])
    a, b = h[k - 1], h[k]
    f = (a - level) / (a - b) if a > b else 0.5
    return float(math.exp(math.log(sizes[k - 1]) + f * (math.log(sizes[k]) - math.log(sizes[k - 1]))))


def local_crossing(sizes: np.ndarray, h: np.ndarray, iso: np.ndarray, level: float,
                   band: tuple[float, float] = (0.8, 0.995)) -> float | None:
    """Where the hit rate crosses ``level``, from a straight line of h against ln W through the
    raw points whose monotone fit lies in ``band`` (the bisection puts several there): steadier
    than interpolating between two noisy neighbours. Falls back to the interpolated crossing."""
    first_below = np.nonzero(iso < band[0])[0]
    end = int(first_below[0]) if first_below.size else len(iso)
    sel = np.zeros(len(iso), dtype=bool)
    sel[:end] = (iso[:end] <= band[1]) & (iso[:end] >= band[0])
    interp = crossing(sizes, iso, level)
    if np.count_nonzero(sel) < 3:
        return interp
    x = np.log(sizes[sel])
    slope, icept = np.polyfit(x, h[sel], 1)
    if not slope < 0 or interp is None:
        return interp
    expo = (level - icept) / slope
    if not abs(expo) < 700:
        return interp
    at = math.exp(expo)
    # the line must cross inside the points it was fitted to (or next to them); the two readings
    # err differently (the line on a curved fall, the interpolation on two noisy points): average
    lo, hi = float(sizes[sel].min()), float(sizes[sel].max())
    return math.sqrt(at * interp) if lo / 1.05 <= at <= hi * 1.05 else interp


def _close(a: float, b: float) -> bool:
    """Sizes within 2%, or one granule of the private sweep, of each other."""
    return b <= a * CLIFF_SPAN or b - a <= CLIFF_GRANULE_BYTES


def _cliff(sizes: np.ndarray, y: np.ndarray, k: int, hi_log: float, lo_log: float,
           noise_log: float) -> float | None:
    """The size just past the onset (index k) if the bandwidth falls there by at least
    CLIFF_DROP of the gap between the plateaus (and 4x the noise) within CLIFF_SPAN of size,
    and the next two points, the first within AFTER_CLIFF of size, stay down (one slow point,
    set aliasing or an outlier, that the curve recovers from is no cliff); else None."""
    if k + 2 >= len(sizes) or not _close(sizes[k], sizes[k + 1]) or sizes[k + 2] > AFTER_CLIFF * sizes[k + 1]:
        return None
    lo = float(lo_log[k]) if np.ndim(lo_log) else lo_log
    drop = max(min(CLIFF_DROP * (hi_log - lo), CLIFF_MIN_DROP), 4 * noise_log)
    stays_down = all(y[k] - v >= drop / 2 for v in y[k + 2:k + 4])
    return float(sizes[k + 1]) if y[k] - y[k + 1] >= drop and stays_down else None


def describe_fall(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float,
                  noise_log: float) -> Fall:
    """Classify the fall of raw points (``sizes`` ascending, ``y`` log10 GB/s) from the plateau at
    ``hi_log`` to the one at ``lo_log``."""
    h = hit_rates(y, hi_log, lo_log)
    iso = isotonic_decreasing(np.clip(h, -0.5, 1.5))
    # onset: the last size still within the noise of the upper plateau before the sustained fall
    tol = max(2.5 * noise_log, math.log10(1.03))
    half = np.nonzero(iso < 0.5)[0]
    first_lo = int(half[0]) if half.size else len(y) - 1
    k = first_lo
    while k > 0 and not y[k] >= hi_log - tol:
        k -= 1
    onset = float(sizes[k])
    w = {q: crossing(sizes, iso, q) for q in (0.9, 0.8, 0.5, 0.2, 0.1)}
    for q in (0.97, 0.95):   # where the fall begins: the capacity of most shapes
        w[q] = local_crossing(sizes, h, iso, q)
    fall = Fall("broad fall", onset, w[0.97], w[0.95], w[0.8], w[0.5], w[0.2], w90_bytes=w[0.9], w10_bytes=w[0.1])
    # a cliff right after the onset, or a few points on where the level was already dipping by a
    # few percent (set aliasing just under the size, as on an H200's L1); a shelf of partial
    # hits (as another H200's L1 shows just below its size) ends the search: the fall began
    for j in range(k, min(first_lo, len(sizes) - 1) + 1):
        cliff = _cliff(sizes, y, j, hi_log, lo_log, noise_log)
        if cliff is not None or not iso[j] > 0.97:
            break
    if cliff is not None:
        k = j
        fall.onset_bytes = float(sizes[k])
        fall.cliff_bytes = cliff
        after = iso[k + 1:k + 4]
        fall.shape = "cliff" if after.size and float(np.max(after)) < 0.15 else "cliff, then partial hits"
        return fall
    inside = (iso > 0.1) & (iso < 0.97)
    if np.count_nonzero(inside) < 2:   # one point or none inside: the shape cannot be told
        nxt = sizes[k + 1] if k + 1 < len(sizes) else math.inf
        # ... unless the sizes around it are a granule apart: then it is a cliff, resolved
        fall.shape = "cliff" if _close(sizes[k], nxt) and iso[k + 1] < 0.5 else "step"
        if fall.shape == "cliff":
            fall.cliff_bytes = float(nxt)
        return fall
    if None in (w[0.95], w[0.9], w[0.5], w[0.2], w[0.1]):
        fall.shape = "broad fall"   # the sweep ends inside the fall
        return fall
    fall.span = math.log(w[0.2] / w[0.95])
    top = math.log(w[0.5] / w[0.9])
    fall.rho = math.log(w[0.1] / w[0.5]) / top if top > 1e-9 else math.inf
    # how long the hit rate takes from 95% to 80% against 80% to 20%: 0.56 for a logistic
    # (hashed-set) fall; a pseudo-LRU cache sags for a while and then collapses (2 and more)
    fall.top_ratio = (math.log(w[0.8] / w[0.95]) / max(math.log(w[0.2] / w[0.8]), 1e-9)
                      if w[0.8] else math.nan)
    if fall.span < NARROW_SPAN:
        fall.shape = "hashed-set fall"
    elif fall.rho > SYMMETRIC[1]:
        fall.shape = "tail"
    elif fall.rho < SYMMETRIC[0] or (fall.top_ratio > TOP_HEAVY and fall.rho < 0.8
                                     and math.log(w[0.8] / w[0.95]) > LONG_DECLINE):
        fall.shape = "decline, then collapse"
    elif fall.span <= HASHED_SPAN:
        fall.shape = "hashed-set fall"
    else:
        fall.shape = "broad fall"
    return fall
