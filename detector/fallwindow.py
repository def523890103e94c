"""One fall's points, prepared once for every hit-rate model, and the closed-form solve of the
two plateau speeds behind each candidate (detector.fallfit says how the fits are combined)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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


def solve(H: np.ndarray, v: np.ndarray, w: np.ndarray, u: np.ndarray, y: np.ndarray, delta: float,
           u_mid: float = 1.0, prior=None):
    """Closed-form plateau speeds for each row of hit rates ``H`` (candidates x points): returns
    (rss, 1/B_hi, 1/B_lo); rss is inf where the fit is not a fall (the lower level as fast).
    ``prior``: (1/B_hi, 1/B_lo, weight of each) from the plateaus' own points, which hold the
    speeds there (a ridge on each: the fit moves them only as far as the fall's points insist)."""
    X1, X2 = H, (1.0 - H) * u
    a11 = (w * X1 * X1).sum(-1)
    a12 = (w * X1 * X2).sum(-1)
    a22 = (w * X2 * X2).sum(-1)
    b1 = (w * X1 * v).sum(-1)
    b2 = (w * X2 * v).sum(-1)
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
    vhat = c1[..., None] * X1 + c2[..., None] * X2
    ok &= np.all(vhat > 0, axis=-1)
    e = y + np.log10(np.where(vhat > 0, vhat, 1.0))
    rss = huber(e, delta).sum(-1)
    if prior is not None:   # the plateaus' own points count as they would in the fit (log10 units)
        rss = rss + (l1 * (c1 - p1) ** 2 + l2 * (c2 - p2) ** 2) / LN10 ** 2
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
