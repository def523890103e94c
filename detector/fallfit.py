"""Fit every hit-rate model (detector.hitmodels) to the points of one fall and combine them.

For a model, a capacity C and shape parameters, the inverse bandwidth of each point is linear in
the two plateau speeds (1/BW = h/B_hi + (1 - h) u/B_lo, u the lower level's shape along the
fall, 1 for a plateau): they are solved in closed form (weighted least squares, relative
errors), so every (C, shape) on a grid costs one vectorised solve and the best of each model is
a global one, then refined. Plateau speeds come from the points, never from a median that the
refinement crowded into the fall.

Models are weighed by their evidence (Akaike weights from each fit's residuals against the
points' noise), so a fall between two shapes gets a capacity between their readings. The
interval and the repeatability come from the models' profile likelihoods in C, mixed by the
same weights; the repeatability also counts each model by how likely it is to win a rerun
(detector.flips: generated GPU 24's random L2, a hashed-set fall 20% larger on one seed of eight).
"""
from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from detect_caches.detector.fallmodels import ModelFit, fit_model, ways_around
from detect_caches.detector.fallwindow import FallWindow
from detect_caches.detector.fitmap import polish_each, polish_models
from detect_caches.detector.flips import flip_spread
from detect_caches.detector.hitmodels import MODELS, SPLIT_HALVES, crossing_ratio, hit_curve
from detect_caches.detector.splitfit import SPLITS, fit_split

RESAMPLE_ABOVE = 0.03   # a model whose curvature says more than this (ln C) is resampled instead ...
RESAMPLES = 12          # ... this many times
HOPELESS = 100.0        # a model's best start this many squared point sigmas behind is not polished
COMMON_GRID = 480       # the grid the models' profile likelihoods are mixed on
MAJOR = 0.05            # models below this evidence share leave the point estimate (and count in the
                        # repeatability only as likely to win a rerun: detector.flips)
MINOR = 0.02            # ... and below this, the interval
LEVEL = 0.98            # two-sided interval of the capacity
FLOOR = 0.005           # ... at least this wide each side: where the models put C in a hashed
                        # fall differs by about this much (the ways model's C and the logistic's
                        # middle are 1/(3 ways) apart)


@dataclass
class FallFit:
    capacity_bytes: float
    low_bytes: float
    high_bytes: float
    repeatability: float            # 1-sigma relative spread of the capacity
    shape: str
    fits: list[ModelFit] = field(default_factory=list)
    sigma: float = 0.0              # the residual noise the weights were judged against
    flip_spread: float = 0.0        # of the repeatability, a rerun won by a model left out of the estimate
    posterior: tuple | None = field(default=None, repr=False)   # (ln C grid, its weights summing to 1)

    @property
    def best(self) -> ModelFit:
        return max(self.fits, key=lambda f: f.weight)

    def shape_weights(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for f in self.fits:
            shape = MODEL_SHAPES[f.model]
            out[shape] = out.get(shape, 0.0) + f.weight
        return out


MODEL_SHAPES = {m.name: m.shape for m in MODELS}
ONSET = {m.name for m in MODELS if m.onset}
BY_MODEL = {m.name: m for m in MODELS}
MODEL_SHAPES.update({m.name: m.shape for m in SPLITS.values()})


def _rerun_spread(win: FallWindow, majors: list[ModelFit], lncap: float, sigma: float,
                  resamples: int = RESAMPLES, models: dict | None = None) -> float:
    """How far a rerun moves the estimate (1 sigma, ln C): each major model's own spread (the
    curvature of its fit at the optimum; for an onset model held at a measured size, where in the
    gap to the next measured size C may lie) and the spread between the models' readings, by
    their weights."""
    total = sum(f.weight for f in majors)
    var = 0.0
    for f in majors:
        if f.model in ONSET and f.inv00 is None:
            above = win.sizes[win.sizes > f.capacity_bytes * (1 + 1e-9)]
            own = math.log(above[0] / f.capacity_bytes) / math.sqrt(12) if above.size else 0.0
        elif f.inv00 is not None and f.inv00 > 0:
            own = sigma * math.sqrt(f.inv00)
            if own > RESAMPLE_ABOVE and resamples and f.model in BY_MODEL:
                # a curvature this shallow is a valley of traded parameters (a decline's slope
                # against its start): what reruns do is read by refitting on fresh noise (not
                # the split level's: its curvature is its fine profile's, detector.splitfit)
                own = min(own, _resampled(win, f, sigma, resamples, (models or BY_MODEL)[f.model]))
        else:
            own = 0.0
        var += f.weight * (min(own, 1.0) ** 2 + (math.log(f.capacity_bytes) - lncap) ** 2)
    return math.sqrt(var / total) if total > 0 else 0.0


def _resampled(win: FallWindow, fit: ModelFit, sigma: float, resamples: int, model=None) -> float:
    """The spread of ln C over refits of ``fit``'s model from its optimum on points with fresh
    noise of the fit's size (a parametric bootstrap; a few, seeded: reruns of the same analysis
    agree)."""
    model = model or BY_MODEL[fit.model]
    rng = np.random.default_rng(RESAMPLES)
    H = model.hit(np.exp(win.x - math.log(fit.capacity_bytes))[None, :], fit.theta)
    _, c1, c2 = win.rss(H)
    clean = -np.log10(c1[0] * H[0] + c2[0] * (1 - H[0]) * win.u)
    items = []
    for _ in range(resamples):
        noisy = FallWindow(win.sizes, clean + rng.normal(0.0, sigma, clean.size), win.u, sigma)
        noisy.delta, noisy.prior = win.delta, win.prior
        items.append((noisy, model, ModelFit(fit.model, fit.theta, fit.capacity_bytes, math.inf, fit.hi_log, fit.lo_log)))
    logs = [math.log(f.capacity_bytes) for f in polish_each(items)]
    return float(np.std(logs)) if logs else 0.0


THREADED = 2000         # a window's points squared (about points x candidate sizes) from which the
                        # models' grids run in threads: their large arrays' numpy work runs outside
                        # the GIL (a wide fall's grids in half the time)


def _grids(win: FallWindow, models) -> list[list[ModelFit]]:
    """Each model's best starts on its grid (fallmodels.fit_model), the same figures in any order."""
    if win.x.size * win.x.size < THREADED or len(models) < 2:
        return [fit_model(win, m) for m in models]
    return list(_pool().map(lambda m: fit_model(win, m), models))


_POOL: dict = {}
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """One pool per process: a child forked after a fit starts its own (the parent's workers are
    not in it, and an inherited pool would wait on them for ever)."""
    with _POOL_LOCK:
        pool = _POOL.get(os.getpid())
        if pool is None:
            _POOL.clear()
            pool = _POOL[os.getpid()] = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)),
                                                           thread_name_prefix="detect-caches-fit")
        return pool


def _hopeful(win: FallWindow, model, starts: list[ModelFit], bar: float) -> list[ModelFit]:
    """A model's starts to polish (none: it is left out): its grid's, where the best is within
    ``bar``; else, for a model whose C the points past it place, its starts inside the gaps
    between measured sizes, where one is within ``bar`` (its polish moves C there, its grid
    cannot: a 16-way modulo L1 of 86016 B between sizes 85248 and 87040 scored 5x the hashed
    reading of 88641 B and was left out, physics node 81; so was a random L1 of 147456 B 17%
    past the last size measured whole, physics GPU 208)."""
    if min(f.rss for f in starts) <= bar:
        return starts
    if not model.between_sizes:
        return []
    inside = fit_model(win, model, between=True)
    return inside if any(f.rss <= bar for f in inside) else []


def _posterior(win: FallWindow, fits: list[ModelFit], sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """The mixture of the models' profile likelihoods on a common ln C grid."""
    grid = np.linspace(win.x[0] - 0.15, win.x[-1] + 0.15, COMMON_GRID)
    total = np.zeros_like(grid)
    for f in fits:
        lnc, rss = f.profile
        if f.model in ONSET:
            # C anywhere from a measured size to the next: the same fit
            idx = np.searchsorted(lnc, grid, side="right") - 1
            prof = np.where((idx >= 0) & (grid < win.x[-1]), rss[np.clip(idx, 0, lnc.size - 1)], np.inf)
        else:
            finite = np.isfinite(rss)
            if np.count_nonzero(finite) < 2:
                continue
            prof = np.interp(grid, lnc[finite], rss[finite], left=np.inf, right=np.inf)
        m = np.min(prof)
        if not np.isfinite(m):
            continue
        p = np.exp(-(prof - m) / (2 * sigma * sigma))
        s = p.sum()
        if s > 0:
            total += f.weight * p / s
    return grid, total


def fit_fall(sizes, y, *, sigma_point: float, lower_shape=None, split: bool = False,
             split_until_bytes: float = math.inf,
             sigma_curve: float | None = None, plateaus=None, models=None,
             resamples: int = RESAMPLES, capacity_span_bytes=None) -> FallFit | None:
    """Fit and combine the models on one fall's points (``sizes`` in bytes, ``y`` log10 GB/s,
    from inside the upper plateau to inside the lower one); ``lower_shape``: the lower level's
    relative inverse speed at each point (a level that is itself falling), or None; ``split``:
    the level may be split in two partitions with a slower far half (a model of its own), ending
    by ``split_until_bytes``; ``resamples``: refits on fresh noise behind a shallow fit's
    repeatability (0: its curvature alone); ``capacity_span_bytes``: the sizes the smooth models'
    candidate capacities span (a window reaching past its fall: the fall's own; None: the points')."""
    if len(sizes) < 4:
        return None
    win = FallWindow(sizes, y, lower_shape, sigma_point, sigma_curve, plateaus)
    if capacity_span_bytes is not None:
        win.c_span = (math.log(capacity_span_bytes[0]), math.log(capacity_span_bytes[1]))
    given = {m.name: m for m in models or MODELS}      # a device level's: detector.hitmodels.DEVICE_MODELS
    chosen = {k: m for k, m in given.items() if k not in SPLITS}   # a split level's, given for its prior
    starts = dict(zip(chosen, _grids(win, list(chosen.values()))))  # score only, is fitted below
    starts = {k: v for k, v in starts.items() if v}
    if not starts:
        return None
    # polish only the models that can still matter: a start far behind the best one (in the
    # points' own noise) keeps no weight however it is polished
    lead = min(f.rss for v in starts.values() for f in v)
    scale = max(max(sigma_point, 1e-3) ** 2, lead / win.x.size)   # the points' noise, or the misfit all share
    kept = {k: _hopeful(win, chosen[k], v, lead + HOPELESS * scale) for k, v in starts.items()}
    fits = polish_models(win, [(chosen[k], v) for k, v in kept.items() if v])
    if split:
        fits += [f for f in (fit_split(win, until_bytes=split_until_bytes, model=m) for m in SPLITS) if f is not None]
    if not fits:
        return None
    by_name = {m.name: m for m in (*MODELS, *SPLITS.values())} | given   # the given ones' prior scores
    best = min(fits, key=lambda f: f.rss)
    dof = max(win.x.size - by_name[best.model].n_params, 1)
    sigma = max(math.sqrt(best.rss / dof), 0.7 * sigma_point, 1e-3)
    scores = np.array([f.rss / sigma ** 2 + by_name[f.model].penalty for f in fits])
    weights = np.exp(-(scores - scores.min()) / 2)
    weights /= weights.sum()
    for f, w in zip(fits, weights):
        f.weight = float(w)
    # the estimate: the models' capacities averaged by their evidence (in ln C), over the models
    # with a share worth the name: a 1% model whose C lies twice as far must not move it
    major = [f for f in fits if f.weight >= MAJOR] or [max(fits, key=lambda f: f.weight)]
    total = sum(f.weight for f in major)
    lncap = float(sum(f.weight * math.log(f.capacity_bytes) for f in major) / total)
    # the interval: the models with a few percent of the evidence, their profile likelihoods
    # mixed; the repeatability: how far a rerun moves the estimate (a 3% model far off widens
    # where the size may lie, and moves a rerun's reading as often as noise lets it win one)
    grid, post = _posterior(win, [f for f in fits if f.weight >= MINOR], sigma)
    low = high = math.exp(lncap)
    if post.sum() > 0:
        cdf = np.cumsum(post) / post.sum()
        tail = (1 - LEVEL) / 2
        low = math.exp(float(np.interp(tail, cdf, grid)))
        high = math.exp(float(np.interp(1 - tail, cdf, grid)))
    # ... and how far it moves when a model with too little evidence to count wins the rerun
    flip = flip_spread(win, fits, major, lncap, sigma_fit=sigma, sigma_point=max(sigma_point, 1e-3),
                       penalty={k: m.penalty for k, m in by_name.items()})
    # ... or a neighbouring ways count wins it (refine_ways): counted with the flips, as what more
    # points need not shrink
    flip = math.hypot(flip, math.sqrt(sum(f.weight * f.ways_spread ** 2 for f in major) / total))
    spread = math.hypot(_rerun_spread(win, major, lncap, sigma, resamples, chosen), flip)
    cap = math.exp(lncap)
    # an onset model's C can be anywhere from its last size served whole to the next size
    for f in fits:
        if f.weight >= 0.1 and f.model in ONSET:
            above = win.sizes[win.sizes > f.capacity_bytes * (1 + 1e-9)]
            if above.size:
                high = max(high, float(above[0]))
            below = win.sizes[win.sizes <= f.capacity_bytes * (1 + 1e-9)]
            low = min(low, float(below[-1]) if below.size else f.capacity_bytes)
    low, high = min(low, cap * (1 - FLOOR)), max(high, cap * (1 + FLOOR))
    top = max(fits, key=lambda f: f.weight)
    return FallFit(cap, low, high, spread, MODEL_SHAPES[top.model], fits, sigma, flip,
                   (grid, post / post.sum()) if post.sum() > 0 else None)


def describe(fit: FallFit, sizes: np.ndarray) -> dict:
    """Secondary figures of the best model: the last measured size served whole (97%), where
    half the data still hits, and the fall's width from 97% to 20% hits (octaves)."""
    top = fit.best
    if top.model in SPLITS:     # the whole level, read as its halves' fall at its end
        top = ModelFit(SPLIT_HALVES[top.model], top.theta, top.capacity_bytes, top.rss, top.hi_log, top.lo_log)
    cap = top.capacity_bytes
    h = hit_curve(top.model, np.asarray(sizes, dtype=float) / cap, top.theta)
    whole = np.asarray(sizes)[h >= 0.97]
    r50 = crossing_ratio(top.model, top.theta, 0.5)
    r97 = crossing_ratio(top.model, top.theta, 0.97)
    r20 = crossing_ratio(top.model, top.theta, 0.2)
    inside = np.count_nonzero((h > 0.1) & (h < 0.97))
    return {"onset_bytes": float(whole.max()) if whole.size else float(np.min(sizes)),
            "half_hit_bytes": fit.capacity_bytes * r50 if r50 else None,
            "width_octaves": math.log2(r20 / r97) if r20 and r97 else 0.0,
            "points_inside": int(inside)}


def warm() -> None:
    """Pay a process's first-fit costs ahead (run in a thread while the GPU measures): the random
    replacement tables for every ways count the fits use (the grid's and its neighbours that
    refine_ways tries), and one fit of a small synthetic fall through every model."""
    from detect_caches.detector.hitmodels import _random_ways_table
    for a0 in BY_MODEL["random_ways"].grids[0]:
        for a in ways_around(a0):
            _random_ways_table(float(a))
    # as many points as a refined fall has: the grids' thread pool starts, and the allocator has
    # seen arrays of their size (a first pass paid 50 ms more than the next without it)
    sizes = np.geomspace(1e6, 4e6, 64)
    y = -np.log10(np.where(sizes < 2e6, 1 / 9000.0, 1 / 4000.0))
    fit_fall(sizes, y, sigma_point=0.003, split=True, resamples=0)
