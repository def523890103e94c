"""Fitting one hit-rate model to one fall (detector.fallfit combines them): the fall's points
prepared once for every model, the closed-form solve of the two plateau speeds behind each
candidate, each model's best starts on a grid of capacities and shapes, each polished (variable
projection: the plateau speeds solved inside). The split level, a model of its own, is in
detector.splitfit."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from detect_caches.detector.hitmodels import HitModel
from detect_caches.detector.polish import polish

LN10 = math.log(10.0)
LOOSE, LOOSE_FLOOR = 4.0, 0.05   # the grid's cap: four times the fit's, and at least 12% in bandwidth
VISIBLE = 4.0           # a cliff model's drop at C must be this many point sigmas
CAP = 4.0               # residuals beyond this many point sigmas count as that much (an outlier, an
                        # aliasing dip: the same for every model, so it sways no weight)


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


def huber(e: np.ndarray, delta: float) -> np.ndarray:
    """Squared residuals, capped at ``delta`` squared."""
    return np.minimum(e * e, delta * delta)


def speeds(H: np.ndarray, v: np.ndarray, w: np.ndarray, u: np.ndarray, u_mid: float = 1.0, prior=None):
    """Closed-form plateau speeds for each row of hit rates ``H`` (candidates x points, or one
    row): (1/B_hi, 1/B_lo, the lower level's share of each point, ok); not ok where the normal
    equations are singular or the fit is not a fall (the lower level as fast). ``prior``: (1/B_hi,
    1/B_lo, weight of each) from the plateaus' own points, which hold the speeds there (a ridge on
    each: the fit moves them only as far as the fall's points insist)."""
    # the weighted sums as products with the weights (one pass over the grid each, no temporaries)
    G = 1.0 - H
    wu, wv = w * u, w * v
    a11 = (H * H) @ w
    a12 = (H * G) @ wu
    a22 = (G * G) @ (wu * u)
    b1 = H @ wv
    b2 = G @ (wv * u)
    X2 = G * u
    if prior is not None:
        p1, p2, l1, l2 = prior
        a11, b1 = a11 + l1, b1 + l1 * p1
        a22, b2 = a22 + l2, b2 + l2 * p2
    det = a11 * a22 - a12 * a12
    ok = det > 1e-12 * np.maximum(a11 * a22, 1e-300)
    det = np.where(ok, det, 1.0)
    c1 = (a22 * b1 - a12 * b2) / det
    c2 = (a11 * b2 - a12 * b1) / det
    ok &= (c1 > 0) & (c2 * u_mid > 1.02 * c1)
    return c1, c2, X2, ok


def ridge(c1, c2, prior):
    """The plateaus' own points as they would count in the fit (log10 units): the two ridge terms
    as residuals."""
    p1, p2, l1, l2 = prior
    return np.sqrt(l1) * (c1 - p1) / LN10, np.sqrt(l2) * (c2 - p2) / LN10


def solve(H: np.ndarray, v: np.ndarray, w: np.ndarray, u: np.ndarray, y: np.ndarray, delta: float,
          u_mid: float = 1.0, prior=None):
    """(rss, 1/B_hi, 1/B_lo) for each row of hit rates ``H``: the capped residual sum of squares
    at the closed-form plateau speeds (inf where the fit is not a fall)."""
    c1, c2, X2, ok = speeds(H, v, w, u, u_mid, prior)
    e = c1[..., None] * H
    e += c2[..., None] * X2                  # the fitted inverse bandwidths, then their residuals
    positive = e > 0
    ok &= np.all(positive, axis=-1)
    np.copyto(e, 1.0, where=~positive)
    np.log10(e, out=e)
    e += y
    np.square(e, out=e)
    rss = np.minimum(e, delta * delta, out=e).sum(-1)   # huber: capped squares
    if prior is not None:
        r1, r2 = ridge(c1, c2, prior)
        rss = rss + r1 * r1 + r2 * r2
    rss = np.where(ok, rss, np.inf)
    return rss, c1, c2


class FallWindow:
    """The points of one fall, prepared once for every model."""

    def __init__(self, sizes, y, u, sigma_point: float, sigma_curve: float | None = None, plateaus=None):
        order = np.argsort(sizes, kind="stable")
        self.sizes = np.asarray(sizes, dtype=float)[order]
        self.y = np.asarray(y, dtype=float)[order]
        self.u = np.ones_like(self.y) if u is None else np.asarray(u, dtype=float)[order]
        self.x = np.log(self.sizes)
        self.v = 10.0 ** -self.y
        self.w = 1.0 / self.v ** 2
        # the cap from the larger of the two noise readings: one point's (from near pairs, which
        # repeated probes can make look quiet) and the curve's
        self.delta = CAP * max(sigma_point, sigma_curve or 0.0, 1e-3)
        self.u_mid = float(np.median(self.u))
        self.visible = VISIBLE * max(sigma_point, 1e-3)
        self.prior = None
        if plateaus is not None:
            # each plateau's speed from its own points (log10 GB/s and its 1-sigma) as a ridge on
            # 1/GB/s, weighed as that many points of this noise would weigh in the fit
            (hi, s_hi), (lo, s_lo) = plateaus
            p1, p2 = 10.0 ** -hi, 10.0 ** -lo / self.u_mid
            point = max(sigma_point, 1e-3)
            self.prior = (p1, p2, (point / (max(s_hi, 1e-4) * p1)) ** 2, (point / (max(s_lo, 1e-4) * p2)) ** 2)

    def rss(self, H: np.ndarray, *, loose: bool = False):
        """Capped residual sum of squares; ``loose``: capped far wider, for ranking a coarse grid
        (a tight cap makes every point that a grid step misses cost the same as an outlier)."""
        delta = max(self.delta * LOOSE, LOOSE_FLOOR) if loose else self.delta
        return solve(H, self.v, self.w, self.u, self.y, delta, self.u_mid, self.prior)

    def residuals(self, h: np.ndarray) -> np.ndarray:
        """One row of hit rates' capped residuals and the plateaus' ridge as two more: what
        the polish minimises is then ``rss``'s figure (the polish's inner loop)."""
        c1, c2, x2, ok = speeds(h, self.v, self.w, self.u, self.u_mid, self.prior)
        vhat = c1 * h + c2 * x2
        if not (ok and np.all(vhat > 0)):
            return np.full(h.size + 2, 1.0)
        out = np.zeros(h.size + 2)
        np.clip(self.y + np.log10(vhat), -self.delta, self.delta, out=out[:-2])
        if self.prior is not None:
            out[-2:] = ridge(c1, c2, self.prior)
        return out


CLIFFS = ("cliff_tail", "cliff_shelf")   # models whose first shape parameter is the hits left at C
CONTINUOUS_ONSET = ("random",)   # onset models whose hit rate leaves 100% continuously at C (modulo
                                # does too, but its linear fall then passes for a narrow hashed one: the H200 L2)
REFINE_STARTS = 3       # grid candidates polished per model
SMOOTH_GRID = 72        # candidate capacities of a smooth model across the window (ln size)
VECTORISED = {"modulo", "cliff_tail", "cliff_shelf", "plru", "hashed", "ways"}   # hit rates that broadcast over their parameters


def _candidates(win: FallWindow, model: HitModel) -> np.ndarray:
    """ln C candidates: each measured size as the last one served whole (onset models), or a
    grid across the window (smooth ones)."""
    if model.onset:
        return win.x[:-1]
    return np.linspace(win.x[0] - 0.15, win.x[-1] + 0.15, SMOOTH_GRID)


def fit_model(win: FallWindow, model: HitModel) -> list[ModelFit]:
    """The grid's best starts of one model (capacities apart), not yet polished."""
    lnc = _candidates(win, model)
    R = np.exp(win.x[None, :] - lnc[:, None])
    thetas = model.thetas()
    if model.name in VECTORISED and len(thetas) > 1:
        # every shape parameter at once: (thetas, candidates, points)
        grid = np.asarray(thetas, dtype=float)
        H = model.hit(R[None], tuple(grid[:, j][:, None, None] for j in range(grid.shape[1])))
        rss, c1, c2 = win.rss(H.reshape(-1, win.x.size), loose=True)
        rss, c1, c2 = (a.reshape(len(thetas), lnc.size) for a in (rss, c1, c2))
    else:
        parts = [win.rss(model.hit(R, theta), loose=True) for theta in thetas]
        rss, c1, c2 = (np.stack([p[j] for p in parts]) for j in range(3))
    if model.name in CLIFFS:
        # a cliff the data shows: its drop in bandwidth clear of the points' noise (a cliff of a
        # few percent would otherwise slide anywhere along the plateau before the real fall)
        a = np.asarray([t[0] for t in thetas], dtype=float)[:, None]
        drop = np.log10(np.maximum(a * c1 + (1 - a) * c2 * win.u_mid, 1e-300)) - np.log10(np.maximum(c1, 1e-300))
        rss = np.where(drop >= win.visible, rss, np.inf)
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


def refine_best(win: FallWindow, model: HitModel, starts: list[ModelFit]) -> ModelFit:
    return min((refine(win, model, f) for f in starts), key=lambda f: f.rss)


def refine(win: FallWindow, model: HitModel, fit: ModelFit) -> ModelFit:
    """Polish the grid's best: shape parameters (and C, for smooth models) continuously, the
    plateau speeds solved inside (variable projection)."""
    n_theta = len(fit.theta)
    lo = [g[0] for g in model.grids]
    hi = [g[-1] for g in model.grids]
    lnc = math.log(fit.capacity_bytes)
    gap = win.x[win.x > lnc + 1e-9]
    c_free = not model.onset or (model.name in CONTINUOUS_ONSET and gap.size > 0)   # C among the parameters
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
    _, c1, c2 = win.rss(H)
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
    bend = (rss[j - 1] - 2 * rss[j] + rss[j + 1]) / (lnc[1] - lnc[0]) ** 2 / 2
    return 1.0 / bend if np.isfinite(bend) and bend > 0 else None


def ways_around(a0: float) -> tuple[float, float, float]:
    """The ways counts refine_ways tries: the grid's and half a grid step either side."""
    return a0 / 2 ** 0.5, a0, a0 * 2 ** 0.5


def refine_ways(win: FallWindow, model: HitModel, fit: ModelFit) -> ModelFit:
    """Ways are whole numbers: a fine grid of C around the best, at the best ways and its
    neighbours on the grid."""
    best = fit
    for a in ways_around(fit.theta[0]):
        lnc = math.log(fit.capacity_bytes) + np.linspace(-0.06, 0.06, 41)
        H = model.hit(np.exp(win.x[None, :] - lnc[:, None]), (a,))
        rss, c1, c2 = win.rss(H)
        i = int(np.argmin(rss))
        if rss[i] < best.rss:
            best = ModelFit(model.name, (float(a),), math.exp(lnc[i]), float(rss[i]), -math.log10(c1[i]),
                            -math.log10(c2[i] * float(np.median(win.u))), profile=fit.profile,
                            inv00=profile_inv00(lnc, rss, i))
    return best
