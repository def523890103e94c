"""From a transition between two plateaus to a capacity: the number of bytes the level holds.

The capacity is the C of hit-rate models fitted to the fall (detector.hitmodels,
detector.fallfit): the same C in every model (the onset of a cliff or of a random-replacement
tail, near the middle of an LRU fall with hashed sets, where a pseudo-LRU decline is still at
95%), the models combined by their evidence, so no shape label switches the number. The shape
of the best-supported model describes the fall.

Three figures are kept apart: the estimate; the interval where the size can lie given the data
(the models' profile likelihoods, mixed); and the repeatability, how much the estimate moves
between runs of the same card (the spread of that mixture, the size grid's step where the
estimate is a measured size, and a rerun won by a model the estimate leaves out).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from detect_caches.detector.fallfit import BY_MODEL, RESAMPLES, describe, fit_fall

BOOTSTRAP = RESAMPLES   # refits behind a shallow fit's repeatability (0 where nobody reads it)
MISFIT_SPAN = 0.04       # a logistic fall's reported interval reaches at least this share of its span
                         # (97% to 20% hits, ln size) either side, a fifth of its logistic width: physics
                         # GPUs' page-coloured, tree-PLRU falls of 0.7-1 octave read 0.5-1.8% small
MISFIT_SHAPES = ("hashed-set fall", "split level (near and far half)")


@dataclass
class CapacityEstimate:
    capacity_bytes: float
    low_bytes: float          # where the size can lie, given the data
    high_bytes: float
    onset_bytes: float        # last measured size still served whole (97%)
    half_hit_bytes: float | None   # secondary: where half the data still hits
    shape: str                # the best-supported model's description (detector.hitmodels)
    repeatability: float      # 1-sigma relative spread of the estimate between runs
    retained_bytes: float     # most bytes seen to hit at once: hit rate x working set
    width_octaves: float      # the fall from 97% to 20% hits, in octaves
    fit_rms_log: float        # residual RMS of the best model, log10 bandwidth
    n_points: int
    shape_weights: dict = field(default_factory=dict)   # evidence for each shape, summing to 1
    hi_log: float | None = None    # the plateau speeds the best model fitted (log10 GB/s)
    lo_log: float | None = None
    far_log: float | None = None   # a split level: its far half's speed
    fit: object = field(default=None, repr=False)   # detector.fallfit.FallFit, for refinement
    flip_spread: float = 0.0       # of the repeatability, a rerun won by a model left out of the estimate
    alone: object = field(default=None, repr=False)   # a joint estimate's bandwidth fall alone (detector.joint)

    @property
    def cliff(self) -> bool:
        return self.shape.startswith("cliff")

    @property
    def noise_repeatability(self) -> float:
        """The repeatability less a rerun won by a model left out of the estimate: what more points
        or a clearer fall would shrink (refining and the confidence read this)."""
        return math.sqrt(max(self.repeatability ** 2 - self.flip_spread ** 2, 0.0))

    @property
    def interval_bytes(self) -> tuple[float, float]:
        """The interval as reported: a hashed-set fall's or a split level's reaches at least
        MISFIT_SPAN of the fall's span either side (where in a broad logistic fall a real cache's
        bytes sit, no model of the family pins closer)."""
        if self.shape not in MISFIT_SHAPES:
            return self.low_bytes, self.high_bytes
        reach = math.exp(MISFIT_SPAN * self.width_octaves * math.log(2))
        return min(self.low_bytes, self.capacity_bytes / reach), max(self.high_bytes, self.capacity_bytes * reach)


def _step(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float) -> CapacityEstimate:
    """Too few points for a fit: the last size at the upper speed, and the next one."""
    mid = (hi_log + float(np.median(lo_log))) / 2
    up = sizes[y >= mid]
    below = float(up.max()) if up.size else float(sizes[0])
    above_all = sizes[sizes > below]
    above = float(above_all.min()) if above_all.size else below
    grid = math.log(above / below) / math.sqrt(12) if above > below else 0.0
    return CapacityEstimate(below, below, above, below, None, "step", grid, below, 0.0, 0.0, int(y.size))


def estimate_capacity(sizes: np.ndarray, y: np.ndarray, hi_log: float, lo_log: float | np.ndarray,
                      noise_log: float, *, seed: int = 0, resample_sigma: float | None = None,
                      resamples: int = BOOTSTRAP, split: bool = False, split_until_bytes: float = math.inf,
                      plateaus=None, models: tuple | None = None, capacity_span_bytes=None) -> CapacityEstimate:
    """``sizes``/``y``: raw points (bytes, log10 GB/s) spanning the transition, plateau ends included;
    ``hi_log``/``lo_log``: the plateaus' levels from segmentation (the lower one may be one figure
    per point: a level that is itself falling, whose shape then enters the fit); ``noise_log``:
    the curve's noise; ``resample_sigma``: one point's noise (``noise_log`` when not given);
    ``plateaus``: ((log10 GB/s, 1-sigma) of the upper plateau, of the lower one) from their own
    points, which hold the fit's plateau speeds near them; ``capacity_span_bytes``: the sizes the
    smooth models' candidate capacities span (None: the points')."""
    order = np.argsort(sizes, kind="stable")
    sizes = np.asarray(sizes, dtype=float)[order]
    y = np.asarray(y, dtype=float)[order]
    lower_shape = None
    if np.ndim(lo_log):
        lo = np.asarray(lo_log, dtype=float)[order]
        lower_shape = 10.0 ** -(lo - float(np.median(lo)))
    point = noise_log if resample_sigma is None else resample_sigma
    fit = fit_fall(sizes, y, sigma_point=max(point, 1e-3), lower_shape=lower_shape, split=split,
                   split_until_bytes=split_until_bytes,
                   sigma_curve=noise_log, plateaus=plateaus, resamples=resamples, capacity_span_bytes=capacity_span_bytes,
                   models=[BY_MODEL[m] if isinstance(m, str) else m for m in models] if models else None)
    if fit is None:
        return _step(sizes, y, hi_log, lo_log if not np.ndim(lo_log) else float(np.median(lo_log)))
    info = describe(fit, sizes)
    best = fit.best
    shape = fit.shape if info["points_inside"] else "step"
    repeat = fit.repeatability
    h = np.clip(_hits(best, sizes), 0, 1)
    retained = max(float(np.max(h * sizes)), info["onset_bytes"])
    rms = math.sqrt(best.rss / max(y.size, 1))
    return CapacityEstimate(capacity_bytes=fit.capacity_bytes, low_bytes=fit.low_bytes, high_bytes=fit.high_bytes,
                            onset_bytes=info["onset_bytes"], half_hit_bytes=info["half_hit_bytes"], shape=shape,
                            repeatability=float(repeat), retained_bytes=retained,
                            width_octaves=float(info["width_octaves"]), fit_rms_log=rms, n_points=int(y.size),
                            shape_weights={k: round(v, 3) for k, v in fit.shape_weights().items()},
                            hi_log=best.hi_log, lo_log=best.lo_log, far_log=best.far_log, fit=fit,
                            flip_spread=fit.flip_spread)


def _hits(best, sizes: np.ndarray) -> np.ndarray:
    from detect_caches.detector.hitmodels import hit_curve
    return hit_curve(best.model, sizes / best.capacity_bytes, best.theta)
