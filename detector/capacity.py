"""From a transition between two plateaus to a capacity: the number of bytes the level holds.

The seed article's "22 KiB" is the model: the largest working set the level still serves whole.
Which measured figure that is depends on the shape of the fall (detector.shape):

- a cliff: the last size before it (everything up to it hits; what follows is a tail of
  partial hits, not capacity);
- a hashed-set fall: the middle of the fall, where a logistic fit of harmonically mixed
  bandwidths puts half the data hitting; an LRU cache with hashed sets starts missing on some
  sets before it is full and keeps some after, symmetrically around its size;
- a slow decline then a collapse: the largest working set still served at 95% (W95);
- a tail (the fall starts abruptly and keeps partial hits long after: random or pseudo-LRU
  replacement): where it begins, from a fit of h = min(1, (C/W)^q) to its upper part;
- a broad fall of no clear shape: where it begins, the earlier of that fit and the largest
  working set still served at 97% (W97), but not before the last size measured at full speed.

Three figures are kept apart: the estimate; the interval where the physical size can lie given
the data (from what the cache must at least hold to the half-hit point); and the repeatability,
how much the estimate moves between runs of the same card, from re-estimating on the points
with fresh noise of the sweep's size (a parametric bootstrap) and the spacing of the sizes
measured around it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from detector.shape import Fall, describe_fall, hit_rates, isotonic_decreasing

BOOTSTRAP = 40


@dataclass
class CapacityEstimate:
    capacity_bytes: float
    low_bytes: float          # where the physical size can lie, given the data
    high_bytes: float
    onset_bytes: float        # last measured size at the upper plateau's speed
    half_hit_bytes: float | None   # secondary: where half the data still hits
    shape: str                # detector.shape.SHAPES
    repeatability: float      # 1-sigma relative spread of the estimate between runs
    retained_bytes: float     # most bytes seen to hit at once: hit rate x working set
    width_octaves: float      # the fall from 97% to 20% hits, in octaves
    fit_rms_log: float        # residual RMS of the monotone hit-rate fit, log10 bandwidth
    n_points: int

    @property
    def cliff(self) -> bool:
        return self.shape.startswith("cliff")


LN10 = math.log(10.0)


def _mix(h: np.ndarray, b_hi, b_lo) -> tuple[np.ndarray, np.ndarray]:
    """log10 of the harmonically mixed bandwidth for hit rate ``h``, and its derivative in h."""
    d = h / b_hi + (1.0 - h) / b_lo
    return -np.log10(d), -(1.0 / b_hi - 1.0 / b_lo) / (d * LN10)


def _logistic(lnw: np.ndarray, lnc: float, s: float, b_hi, b_lo) -> tuple[np.ndarray, np.ndarray]:
    """The hashed-set model (log10 bandwidth) and its Jacobian in (ln C, s): analytic, since
    the fit runs once per resample and numerical differences were half its time."""
    s = max(s, 1e-6)
    z = np.clip((lnw - lnc) / s, -700, 700)
    h = 1.0 / (1.0 + np.exp(z))
    f, dfdh = _mix(h, b_hi, b_lo)
    g = dfdh * h * (1.0 - h) / s
    return f, np.column_stack([g, g * z])


def fit_hashed(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float, guess: float,
               *, with_rms: bool = False, starts: tuple[float, ...] = (0.03, 0.1, 0.3)):
    """Centre of a logistic hit-rate fall (in ln W) fitted to the points: the hashed-set capacity
    (and the fit's RMS residual in log10 bandwidth, with ``with_rms``). ``starts``: initial
    widths (several: a narrow and a broad fall have different basins)."""
    lnw = np.log(sizes)
    b_hi, b_lo = 10 ** hi_log, 10 ** lo_log
    lo, hi = float(lnw.min()), float(lnw.max())
    x0 = min(max(math.log(guess), lo + 1e-9), hi - 1e-9)
    best = None
    for s0 in starts:
        try:
            res = least_squares(lambda p: _logistic(lnw, p[0], p[1], b_hi, b_lo)[0] - y, x0=[x0, s0],
                                jac=lambda p: _logistic(lnw, p[0], p[1], b_hi, b_lo)[1],
                                bounds=([lo, 2e-3], [hi, 2.0]))
        except ValueError:
            continue
        if best is None or res.cost < best.cost:
            best = res
    cap = math.exp(best.x[0]) if best is not None else guess
    if with_rms:
        return cap, (float(np.sqrt(2 * best.cost / len(y))) if best is not None else math.inf)
    return cap


def _kink(lnw: np.ndarray, lnc: float, q: float, b_hi, b_lo) -> tuple[np.ndarray, np.ndarray]:
    """h = min(1, (C/W)^q) as log10 bandwidth, and its Jacobian in (ln C, q)."""
    u = np.clip(lnw - lnc, 0, None)
    h = np.exp(-q * u)
    f, dfdh = _mix(h, b_hi, b_lo)
    return f, np.column_stack([dfdh * h * q * (u > 0), -dfdh * h * u])


def fit_kink(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float, guess: float) -> float:
    """Where a fall that starts abruptly begins: h = min(1, (C/W)^q) fitted to the points down to
    30% hits (random replacement is h = exp(-r (1 - h)), which this follows within a percent
    near its start; the far tail is left out)."""
    h = hit_rates(y, hi_log, lo_log)
    keep = h >= 0.3
    if np.count_nonzero(keep) < 4:
        return guess
    lnw, yk = np.log(sizes[keep]), y[keep]
    b_hi, b_lo = 10 ** hi_log, 10 ** (lo_log[keep] if np.ndim(lo_log) else lo_log)
    lo, hi = float(lnw.min()), float(lnw.max())
    x0 = min(max(math.log(guess), lo), hi)
    try:
        res = least_squares(lambda p: _kink(lnw, p[0], p[1], b_hi, b_lo)[0] - yk, x0=[x0, 2.0],
                            jac=lambda p: _kink(lnw, p[0], p[1], b_hi, b_lo)[1],
                            bounds=([lo, 0.2], [hi, 20.0]))
    except ValueError:
        return guess
    return math.exp(res.x[0])


def point_estimate(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float,
                   noise_log: float, *, starts: tuple[float, ...] = (0.03, 0.1, 0.3)) -> tuple[float, Fall]:
    """The capacity for the fall's shape (see the module docstring) and the fall itself."""
    fall = describe_fall(sizes, y, hi_log, lo_log, noise_log)
    if fall.shape.startswith("cliff") or fall.shape == "step":
        return fall.onset_bytes, fall
    if fall.shape == "hashed-set fall":
        return fit_hashed(sizes, y, hi_log, lo_log, fall.w50_bytes or fall.onset_bytes, starts=starts), fall
    if fall.shape == "decline, then collapse":
        return (fall.w95_bytes or fall.onset_bytes), fall
    # a tail: where it begins, from a fitted kink (steadier than one crossing or the last size
    # within the noise of full speed: it uses every point down to 30% hits); a broad fall: the
    # earlier of W97 and that kink (on a broad symmetric fall the kink lands inside it, and W97
    # is the size the data proves), but not before the last size measured at full speed
    w97 = fall.w97_bytes or fall.onset_bytes
    kink = fit_kink(sizes, y, hi_log, lo_log, w97)
    return (kink if fall.shape == "tail" else max(fall.onset_bytes, min(w97, kink))), fall


def _neighbours(sizes: np.ndarray, at: float) -> tuple[float, float]:
    """The measured sizes just below (or at) and just above ``at``."""
    below = sizes[sizes <= at * (1 + 1e-9)]
    above = sizes[sizes > at * (1 + 1e-9)]
    return (float(below.max()) if below.size else float(sizes[0]),
            float(above.min()) if above.size else float(sizes[-1]))


def estimate_capacity(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float | np.ndarray,
                      noise_log: float, *, seed: int = 0, resample_sigma: float | None = None,
                      resamples: int = BOOTSTRAP) -> CapacityEstimate:
    """``sizes``/``y``: raw points (bytes, log10 GB/s) spanning the transition, plateau ends included;
    ``lo_log``: the lower level's speed, one figure or one per point; ``noise_log``: the curve's
    noise (the shape's tolerances); ``resample_sigma``: one point's noise, for the repeatability
    (``noise_log`` when not given); ``resamples``: replicates for it (0: none, the grid term only).
    A cliff or a step is a measured size: only the size grid moves it, so it is not resampled."""
    order = np.argsort(sizes, kind="stable")
    sizes, y = np.asarray(sizes, dtype=float)[order], np.asarray(y, dtype=float)[order]
    if np.ndim(lo_log):   # the level below, point by point (a curve, not a plateau: detector.analyze)
        lo_log = np.asarray(lo_log, dtype=float)[order]
    cap, fall = point_estimate(sizes, y, hi_log, lo_log, noise_log)
    falling = hi_log > float(np.median(lo_log))
    h = np.clip(hit_rates(y, hi_log, lo_log), 0, 1) if falling else np.zeros_like(y)
    retained = max(float(np.max(h * sizes)) if h.size else 0.0, fall.onset_bytes)
    # the interval: what the data says the physical size can be
    below, above = _neighbours(sizes, cap)
    if fall.shape.startswith("cliff"):
        low, high = fall.onset_bytes, fall.cliff_bytes
    elif fall.shape == "step":
        low, high = fall.onset_bytes, above
    elif fall.shape == "hashed-set fall":
        low = min(fall.w80_bytes or cap, cap, fall.onset_bytes)
        high = max(fall.w20_bytes or cap, cap)
    else:
        # a cache of C bytes serves at most C of a cyclic sweep: it holds at least 97% of W97;
        # with hashed sets it could be as large as the half-hit point
        low = min(0.97 * cap, fall.onset_bytes)
        high = max(fall.w50_bytes or above, cap)
    # repeatability: re-estimate with fresh noise of the sweep's size, and the size grid's step
    rng = np.random.default_rng(seed)
    sigma = max(noise_log if resample_sigma is None else resample_sigma, 1e-3)
    measured = fall.shape.startswith("cliff") or fall.shape == "step"
    n_boot = resamples if sizes.size >= 4 and not measured else 0
    # one start width per replicate (the data's own fit chose among three): a third of the time
    boots = [point_estimate(sizes, y + rng.normal(0.0, sigma, y.size), hi_log, lo_log, noise_log, starts=(0.1,))[0]
             for _ in range(n_boot)]
    # a robust spread: a rare replicate whose fall reads as another shape (more likely with
    # noise added to noisy points than in a real rerun) does not set it
    logs = np.log(boots) if len(boots) > 2 else np.zeros(1)
    spread = float(1.4826 * np.median(np.abs(logs - np.median(logs))))
    # the size grid quantizes an estimate that is a measured size (a cliff's onset, a step): it can
    # be anywhere up to the next size. An interpolated or fitted one moves with the noise only,
    # which the replicates measure (the grid term made a slow decline's W95 read 5% where seeds
    # moved it 0.6%)
    on_grid = bool(np.any(np.abs(sizes / cap - 1) < 1e-9))
    grid = math.log(max(above, cap) / max(min(below, cap), 1.0)) / math.sqrt(12) if on_grid else 0.0
    repeat = math.sqrt(spread ** 2 + grid ** 2)
    low, high = min(low, cap), max(high, cap)
    # residual of the monotone fit of the points (log10 bandwidth), for the confidence
    iso = np.clip(isotonic_decreasing(np.clip(h, 0, 1)), 1e-6, 1) if falling else h
    model = -np.log10(iso / 10 ** hi_log + (1 - iso) / 10 ** lo_log) if falling else y
    rms = float(np.sqrt(np.mean((model - y) ** 2)))
    width = math.log2(fall.w20_bytes / fall.w97_bytes) if fall.w20_bytes and fall.w97_bytes else 0.0
    return CapacityEstimate(capacity_bytes=float(cap), low_bytes=float(low), high_bytes=float(high),
                            onset_bytes=fall.onset_bytes, half_hit_bytes=fall.w50_bytes, shape=fall.shape,
                            repeatability=float(repeat), retained_bytes=retained, width_octaves=float(width),
                            fit_rms_log=rms, n_points=int(y.size))
