"""Fitting one hit-rate model to one fall (detector.fallfit combines them): each model's best
starts on a grid of capacities and shapes (the plateau speeds behind each candidate solved in
closed form: detector.fallwindow), each polished (variable projection: the plateau speeds
solved inside). The split level, a model of its own, is in detector.splitfit."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from detect_caches.detector.fallwindow import CAP, FallWindow
from detect_caches.detector.hitmodels import HitModel
from detect_caches.detector.polish import polish


@dataclass
class ModelFit:
    model: str
    theta: tuple
    capacity_bytes: float
    rss: float                      # Huber-capped residual sum of squares, log10 bandwidth
    hi_log: float                   # fitted plateau speeds, log10 GB/s
    lo_log: float
    weight: float = 0.0
    profile: tuple = ()             # (ln C candidates, best rss at each) for the posterior
    far_log: float | None = None    # a split level: its far half's speed, log10 GB/s
    inv00: float | None = None      # (J^T J)^-1 for ln C at the optimum: its sd is sigma sqrt(inv00)
    ways_spread: float = 0.0        # sd of ln C over the ways counts refine_ways tried, by their evidence


CLIFFS = ("cliff_tail", "cliff_shelf")   # models whose first shape parameter is the hits left at C
REFINE_STARTS = 3       # grid candidates polished per model
SMOOTH_GRID = 72        # candidate capacities of a smooth model across the window (ln size)
BETWEEN_STEP = 0.01      # ln C steps of an onset model's candidates inside a gap between measured sizes
WAYS_SPAN, WAYS_GRID = 0.06, 41   # refine_ways' fine grid of ln C about the grid's best (steps of 0.3%)
VECTORISED = {"modulo", "cliff_tail", "cliff_shelf", "plru", "hashed", "ways"}   # hit rates that broadcast over their parameters


def _candidates(win: FallWindow, model: HitModel, *, between: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """ln C candidates, and for each the index of the last measured size at or below it: each
    measured size but the last as the last one served whole (onset models; with ``between``,
    sizes inside each gap between them, at most BETWEEN_STEP apart), or a grid across the window
    (smooth ones)."""
    if model.onset and between:
        gaps = np.diff(win.x[:-1])
        parts = np.maximum(np.ceil(gaps / BETWEEN_STEP), 2).astype(int)
        at = np.repeat(np.arange(gaps.size), parts - 1)
        frac = np.concatenate([np.arange(1, k) / k for k in parts])
        return win.x[at] + gaps[at] * frac, at
    if model.onset:
        return win.x[:-1], np.arange(win.x.size - 1)
    lo, hi = win.c_span
    return np.linspace(lo - 0.15, hi + 0.15, SMOOTH_GRID), None


def fit_model(win: FallWindow, model: HitModel, *, between: bool = False) -> list[ModelFit]:
    """The grid's best starts of one model (capacities apart), not yet polished; ``between``: an
    onset model's C inside the gaps between measured sizes instead of at them."""
    lnc, at = _candidates(win, model, between=between)
    R = np.exp(win.x[None, :] - lnc[:, None])
    thetas = model.thetas()
    if model.name in VECTORISED and len(thetas) > 1:
        # every shape parameter at once: (thetas, candidates, points)
        grid = np.asarray(thetas, dtype=float)
        hits = model.hit(R[None], tuple(grid[:, j][:, None, None] for j in range(grid.shape[1])))
        rss, c1, c2 = win.rss(hits.reshape(-1, win.x.size), loose=True)
        rss, c1, c2 = (a.reshape(len(thetas), lnc.size) for a in (rss, c1, c2))
    else:
        hits = None
        parts = [win.rss(model.hit(R, theta), loose=True) for theta in thetas]
        rss, c1, c2 = (np.stack([p[j] for p in parts]) for j in range(3))
    if model.name in CLIFFS:
        # a cliff the data shows: its drop in bandwidth clear of the points' noise (a cliff of a
        # few percent would otherwise slide anywhere along the plateau before the real fall)
        rss = _visible(win, thetas, rss, c1, c2)
    if model.onset:
        # every size up to C served whole: never past a run of points clearly missing
        # (past a size, inside the gap to the next: the same sizes served whole as at it)
        rss = np.where(win.served_whole()[at][None, :], rss, np.inf)
    best_rss = rss.min(axis=0)
    # the grid's best few (at capacities apart) each polished: on a coarse shape grid with capped
    # residuals the right capacity can lose to a wrong one until its shape is fitted
    fits = []
    for flat in np.argsort(rss, axis=None)[:64]:
        t, i = np.unravel_index(int(flat), rss.shape)
        if not math.isfinite(rss[t, i]):
            break
        if any(abs(lnc[i] - math.log(f.capacity_bytes)) < 0.01 for f in fits):
            continue
        if model.onset and len(thetas) > 1:
            # the shape to start from at this C by the fit's own cap: the grid's wide cap ranks
            # capacities, but at one it lets bumps and dips past the cap pick the shape, and an
            # onset model's polish (C held at a measured size, or moved between two) stays near its
            # start (an H100's L1 past its partial hits: 75% hits falling as r^-4 stopped at rss
            # 0.158, where 93% falling as r^-0.45 gives 0.072)
            at_c = hits[:, i] if hits is not None else np.concatenate([model.hit(R[i:i + 1], th) for th in thetas])
            t = _tight_theta(win, thetas, at_c, t, cliff=model.name in CLIFFS)
        H = model.hit(np.exp(win.x - lnc[i])[None, :], thetas[t])
        tight, a1, a2 = win.rss(H)      # the start's own figure under the fit's cap
        if not math.isfinite(tight[0]):
            continue
        fits.append(ModelFit(model.name, thetas[t], math.exp(float(lnc[i])), float(tight[0]),
                             -math.log10(float(a1[0])), -math.log10(float(a2[0]) * win.u_mid),
                             profile=(lnc, best_rss)))
        if len(fits) >= (REFINE_STARTS if len(thetas) > 1 else 1):
            break
    return fits


def _tight_theta(win: FallWindow, thetas, at_c: np.ndarray, t: int, *, cliff: bool) -> int:
    """Of the grid's shapes, their hit rates at one C in ``at_c`` (shapes x points), the one with
    the least rss under the fit's cap (``t``, the wide cap's choice, where none is less), among
    those a cliff model may take (drop visible)."""
    rss, c1, c2 = win.rss(at_c)
    if cliff:
        rss = _visible(win, thetas, rss[:, None], c1[:, None], c2[:, None])[:, 0]
    rss = np.where(np.isnan(rss), np.inf, rss)
    best = int(np.argmin(rss))
    return best if rss[best] < rss[t] else t


def _visible(win: FallWindow, thetas, rss: np.ndarray, c1: np.ndarray, c2: np.ndarray) -> np.ndarray:
    """``rss`` (shapes x capacities) where a cliff's drop at C is clear of the points' noise, inf
    elsewhere (its first shape parameter: the hits left at C)."""
    a = np.asarray([t[0] for t in thetas], dtype=float)[:, None]
    drop = np.log10(np.maximum(a * c1 + (1 - a) * c2 * win.u_mid, 1e-300)) - np.log10(np.maximum(c1, 1e-300))
    return np.where(drop >= win.visible, rss, np.inf)


def refine(win: FallWindow, model: HitModel, fit: ModelFit) -> ModelFit:
    """Polish the grid's best: shape parameters (and C, for smooth models) continuously, the
    plateau speeds solved inside (variable projection)."""
    n_theta = len(fit.theta)
    lo = [g[0] for g in model.grids]
    hi = [g[-1] for g in model.grids]
    lnc = math.log(fit.capacity_bytes)
    gap = win.x[win.x > lnc + 1e-9]
    c_free = not model.onset or (model.between_sizes and gap.size > 0)   # C among the parameters
    if model.onset and c_free:
        # hit rates that leave 100% continuously at C: the points past it place C between the
        # measured sizes around the grid's choice (a sparse grid would hold C at a measured size)
        before = win.x[win.x < lnc - 1e-9]
        p0 = [lnc, *fit.theta]
        lb = [before[-1] if before.size else lnc, *lo]
        ub = [gap[0] - 1e-6, *hi]
        unpack = lambda p: (p[0], tuple(p[1:]))  # noqa: E731
    elif model.onset:
        if not n_theta:
            return fit
        p0, lb, ub = list(fit.theta), lo, hi
        unpack = lambda p: (lnc, tuple(p))  # noqa: E731
    else:
        p0 = [math.log(fit.capacity_bytes), *fit.theta]
        lb = [win.x[0] - 0.15, *lo]
        ub = [win.x[-1] + 0.15, *hi]
        unpack = lambda p: (p[0], tuple(p[1:]))  # noqa: E731
    if model.name in ("ways", "random_ways"):
        return refine_ways(win, model, fit)

    def resid(p):
        c, th = unpack(p)
        return win.residuals(model.hit(np.exp(win.x - c), th))

    p0 = np.clip(np.asarray(p0, dtype=float), np.asarray(lb) + 1e-9, np.asarray(ub) - 1e-9)
    try:
        # tolerances of 1e-5: C to ten parts in a million is far below any run's repeatability
        res = polish(resid, p0, lb, ub, max_nfev=80, ftol=1e-5, xtol=1e-5)
    except ValueError:
        return fit
    rss = float(np.sum(res.fun ** 2))
    if not rss < fit.rss:
        return fit
    c, th = unpack(res.x)
    H = model.hit(np.exp(win.x - c)[None, :], th)
    tight, c1, c2 = win.rss(H)
    if not math.isfinite(tight[0]):
        return fit      # the polish ended where no fall is (from a resampling's start of no figure)
    if model.name in CLIFFS and math.log10(th[0] * c1[0] + (1 - th[0]) * c2[0] * win.u_mid) - math.log10(c1[0]) < win.visible:
        return fit
    inv00 = None
    if c_free:
        try:
            inv00 = float(np.linalg.pinv(res.jac.T @ res.jac)[0, 0])
        except (np.linalg.LinAlgError, ValueError):
            inv00 = None
    return ModelFit(model.name, tuple(float(t) for t in th), math.exp(c), rss, -math.log10(c1[0]),
                    -math.log10(c2[0] * float(np.median(win.u))), profile=fit.profile, inv00=inv00)


def profile_inv00(lnc: np.ndarray, rss: np.ndarray, i: int) -> float | None:
    """The curvature of a fine, evenly spaced profile of ln C at its least (index ``i``), as the
    polish's inv00: rss ~ least + (d ln C)^2 / inv00; None where it does not curve up."""
    j = min(max(i, 1), lnc.size - 2)
    if not np.all(np.isfinite(rss[j - 1:j + 2])):
        return None     # a neighbour that is no fall (the split model's speeds out of order)
    bend = (rss[j - 1] - 2 * rss[j] + rss[j + 1]) / (lnc[1] - lnc[0]) ** 2 / 2
    return 1.0 / bend if np.isfinite(bend) and bend > 0 else None


def ways_around(a0: float) -> tuple[float, float, float]:
    """The ways counts refine_ways tries: the grid's and half a grid step either side."""
    return a0 / 2 ** 0.5, a0, a0 * 2 ** 0.5


def refine_ways(win: FallWindow, model: HitModel, fit: ModelFit) -> ModelFit:
    """Ways are whole numbers: a fine grid of C around the best, at the best ways and its
    neighbours on the grid. How far C moves between the counts, by their evidence, is kept as
    ways_spread: a rerun may pick the neighbour (generated GPU 173's L3 read 428 MiB at 32 ways and
    441 at 22.6 on two seeds, each saying 0.4-0.7%: compare flagged the GPU against itself)."""
    tried = []
    for a in ways_around(fit.theta[0]):
        if a < model.grids[0][0]:
            continue    # fewer ways than the model allows (a device cache's: hitmodels.DEVICE_MIN_WAYS)
        lnc = math.log(fit.capacity_bytes) + np.linspace(-WAYS_SPAN, WAYS_SPAN, WAYS_GRID)
        H = model.hit(np.exp(win.x[None, :] - lnc[:, None]), (a,))
        rss, c1, c2 = win.rss(H)
        i = int(np.argmin(rss))
        if np.isfinite(rss[i]):
            tried.append((float(rss[i]), float(a), lnc, rss, i, float(c1[i]), float(c2[i])))
    if not tried or not min(t[0] for t in tried) < fit.rss:
        return fit
    best = min(tried, key=lambda t: t[0])
    rss, a, lnc, profile, i, c1, c2 = best
    w = np.exp(-(np.array([t[0] for t in tried]) - rss) / (2 * (win.delta / CAP) ** 2))
    logs = np.array([t[2][t[4]] for t in tried])
    spread = math.sqrt(float(np.sum(w * (logs - np.sum(w * logs) / np.sum(w)) ** 2) / np.sum(w)))
    return ModelFit(model.name, (a,), math.exp(lnc[i]), rss, -math.log10(c1),
                    -math.log10(c2 * float(np.median(win.u))), profile=fit.profile,
                    inv00=profile_inv00(lnc, profile, i), ways_spread=spread)
