"""From a transition between two plateaus to a capacity with an interval, and the onset.

Bandwidths mix harmonically with the hit rate h: 1/BW = h/B_hi + (1 - h)/B_lo. The hit rate
falls with the working set W as a logistic in ln W, h = 1 / (1 + exp((ln W - ln C) / s)), which
covers a cliff (s -> 0, LRU) and the gradual fall of hashed or scattered sets. The capacity C is
where half the data still hits (for 16-way hashed LRU that is within a few percent of the
nominal size; methods.md). The interval joins the residual-bootstrap spread of the fit with the
bracket of measured points around the half-hit crossing; the onset is the last size still at the
upper plateau's speed within the noise, the article's "22 KiB" figure. Where the bisection
resolved a cliff (a large share of the fall between two sizes a KiB or so apart, as the H200's
L1 shows at 221 KiB, followed by a slow tail of partial hits), the cliff is the capacity and its
interval is the two sizes around it: the half-hit point of such a curve lies in the tail, past
the physical size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

BOOTSTRAP = 40
CLIFF_SPAN = 1.02   # neighbouring sizes at most 2% apart (the bisection resolves 1 KiB)
CLIFF_DROP = 0.15   # ... across which at least 15% of the log gap between plateaus falls


@dataclass
class CapacityEstimate:
    capacity_bytes: float
    low_bytes: float
    high_bytes: float
    onset_bytes: float
    retained_bytes: float     # most bytes seen to hit at once: hit rate x working set, a floor
    width_octaves: float      # 10-90% width of the hit-rate fall, in octaves of working set
    fit_rms_log: float        # residual RMS of the model in log10 bandwidth
    n_points: int
    cliff: bool = False       # capacity is a resolved cliff (onset to next size), not the half-hit fit


def _model(lnw: np.ndarray, lnc: float, s: float, b_hi: float, b_lo: float) -> np.ndarray:
    z = np.clip((lnw - lnc) / max(s, 1e-6), -700, 700)
    h = 1.0 / (1.0 + np.exp(z))
    return np.log10(1.0 / (h / b_hi + (1.0 - h) / b_lo))


def _fit(lnw, y, b_hi, b_lo, lnc0, bounds, widths=(0.02, 0.1, 0.4)):
    best = None
    for s0 in widths:
        try:
            res = least_squares(lambda p: _model(lnw, p[0], p[1], b_hi, b_lo) - y,
                                x0=[min(max(lnc0, bounds[0] + 1e-9), bounds[1] - 1e-9), s0],
                                bounds=([bounds[0], 1e-3], [bounds[1], 3.0]))
        except ValueError:
            continue
        if best is None or res.cost < best.cost:
            best = res
    return best


def estimate_capacity(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float,
                      noise_log: float, *, seed: int = 0) -> CapacityEstimate:
    """``sizes``/``y``: raw points (bytes, log10 GB/s) spanning the transition, plateau ends included."""
    order = np.argsort(sizes)
    sizes, y = sizes[order], y[order]
    lnw = np.log(sizes)
    b_hi, b_lo = 10 ** hi_log, 10 ** lo_log
    half = math.log10(2.0 / (1.0 / b_hi + 1.0 / b_lo))
    falling = hi_log > lo_log
    on_hi = (y > half) if falling else (y < half)
    # the half-hit crossing: last point on the high side before the first on the low side
    first_lo = int(np.argmax(~on_hi)) if (~on_hi).any() else len(y) - 1
    a = max(first_lo - 1, 0)
    bracket = (sizes[a], sizes[first_lo])
    lnc0 = 0.5 * (math.log(bracket[0]) + math.log(bracket[1]))
    bounds = (lnw.min(), lnw.max())
    fit = _fit(lnw, y, b_hi, b_lo, lnc0, bounds)
    lnc, s = (fit.x if fit is not None else (lnc0, 0.05))
    resid = _model(lnw, lnc, s, b_hi, b_lo) - y
    rms = float(np.sqrt(np.mean(resid ** 2)))
    # residual bootstrap of the fit
    rng = np.random.default_rng(seed)
    boots = []
    model_y = y + resid
    for _ in range(BOOTSTRAP if len(y) >= 5 else 0):
        yb = model_y - rng.choice(resid, size=resid.size, replace=True)
        fb = _fit(lnw, yb, b_hi, b_lo, lnc, bounds, widths=(max(s, 2e-3),))
        if fb is not None:
            boots.append(fb.x[0])
    cap = math.exp(lnc)
    # onset: the last size still within the noise of the upper plateau
    tol = max(2.5 * noise_log, math.log10(1.03))
    on = (y >= hi_log - tol) if falling else (y <= hi_log + tol)
    # scan back from the half-hit crossing: an isolated dip far inside the plateau (set
    # aliasing) does not end it, only the sustained fall does
    k = first_lo
    while k > 0 and not on[k]:
        k -= 1
    onset = float(sizes[k])
    # The capacity cannot be below the onset (everything up to it still hits) and, for LRU,
    # hashed-LRU and random replacement alike, not above the size where 10% still hits
    # (C * 9**s on the fitted logistic). Within that, the fit and its bootstrap decide.
    lo_b, hi_b = bracket
    if boots:
        lo_b = min(lo_b, math.exp(np.percentile(boots, 5)))
        hi_b = max(hi_b, math.exp(np.percentile(boots, 95)))
    hi_b = max(hi_b, cap * 9.0 ** min(s, 1.0))
    lo_b = min(lo_b, onset)
    # Whatever the replacement policy, a cache of C bytes cannot serve more than C of a cyclic
    # W-byte sweep: h(W) W <= C. The largest h W measured is reported beside the interval (not
    # inside it: on several reference cards it exceeds the documented size, so the harmonic
    # model's plateau speeds are not exact enough to make it a hard floor).
    h = (1 / 10 ** y - 1 / b_lo) / (1 / b_hi - 1 / b_lo) if falling else np.zeros_like(y)
    retained = float(np.max(np.clip(h, 0, 1) * sizes)) if h.size else 0.0
    retained = retained if retained > onset else onset
    cap = min(max(cap, lo_b), hi_b)
    cliff = _cliff_after(sizes, y, k, hi_log, lo_log, noise_log) if falling else None
    if cliff is not None:
        # a cliff resolved to a few KiB: everything up to it hits, and what follows is a tail of
        # partial hits (non-LRU replacement), not capacity. The cliff is the capacity.
        cap, lo_b, hi_b = math.sqrt(onset * cliff), onset, cliff
    return CapacityEstimate(capacity_bytes=cap, low_bytes=float(lo_b), high_bytes=float(hi_b),
                            onset_bytes=float(onset), retained_bytes=retained, width_octaves=float(4.39 * s / math.log(2)),
                            fit_rms_log=rms, n_points=int(len(y)), cliff=cliff is not None)


def _cliff_after(sizes: np.ndarray, y: np.ndarray, k: int, hi_log: float, lo_log: float,
                 noise_log: float) -> float | None:
    """The size just past the onset (index k) if the bandwidth falls there by at least
    CLIFF_DROP of the gap between the plateaus (and 4x the noise) within CLIFF_SPAN of size,
    and the next points, measured close by, stay down; else None."""
    # resolved: the bisection measured right past the cliff again (a repeat or a size next to
    # it), so one slow point (set aliasing, an outlier) does not make a cliff
    if k + 2 >= len(sizes) or sizes[k + 1] > sizes[k] * CLIFF_SPAN or sizes[k + 2] > sizes[k + 1] * CLIFF_SPAN:
        return None
    drop = max(CLIFF_DROP * (hi_log - lo_log), 4 * noise_log)
    stays_down = all(y[k] - v >= drop / 2 for v in y[k + 2:k + 4])
    return float(sizes[k + 1]) if y[k] - y[k + 1] >= drop and stays_down else None
