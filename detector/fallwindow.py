"""A fall's points prepared once for every hit-rate model (detector.fallmodels fits them): the
closed-form solve of the two plateau speeds behind each row of hit rates, and the capped
residuals the grid ranks by and the polish minimises."""
from __future__ import annotations

import math

import numpy as np

from detect_caches.detector.curve import median
from detect_caches.detector.shape import hit_rates

LN10 = math.log(10.0)
LOOSE, LOOSE_FLOOR = 4.0, 0.05   # the grid's cap: four times the fit's, and at least 12% in bandwidth
VISIBLE = 4.0           # a cliff model's drop at C must be this many point sigmas
SERVED_RUN = 3          # an onset model's C lies before any run of this many points clearly missing ...
SERVED_SIGMAS = 2.0     # ... each this many sigmas under the speed of the points before it at speed ...
SERVED_REF = 5          # ... (the median of the last this many) ...
SERVED_MISSES = 0.02    # ... and missing this share of its hits (the lower plateau's own speed below) ...
SERVED_BACK = 2         # ... unless this many points back at speed, within SERVED_AT sigmas, follow them
SERVED_AT = 1.0
CAP = 4.0               # residuals beyond this many point sigmas count as that much (an outlier, an
                        # aliasing dip: the same for every model, so it sways no weight)


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
        self._wu, self._wv = self.w * self.u, self.w * self.v     # speeds' weighted sums, as it forms them
        self._wuu, self._wvu = self._wu * self.u, self._wv * self.u
        # the cap from the larger of the two noise readings: one point's (from near pairs, which
        # repeated probes can make look quiet) and the curve's
        self.delta = CAP * max(sigma_point, sigma_curve or 0.0, 1e-3)
        self.u_mid = float(np.median(self.u))
        self.visible = VISIBLE * max(sigma_point, 1e-3)
        self._served = None
        self.prior = None
        self.c_span = (float(self.x[0]), float(self.x[-1]))   # where the smooth models' C candidates lie
        if plateaus is not None:
            # each plateau's speed from its own points (log10 GB/s and its 1-sigma) as a ridge on
            # 1/GB/s, weighed as that many points of this noise would weigh in the fit
            (hi, s_hi), (lo, s_lo) = plateaus
            p1, p2 = 10.0 ** -hi, 10.0 ** -lo / self.u_mid
            point = max(sigma_point, 1e-3)
            self.prior = (p1, p2, (point / (max(s_hi, 1e-4) * p1)) ** 2, (point / (max(s_lo, 1e-4) * p2)) ** 2)

    def speed_states(self) -> np.ndarray:
        """Each point against the upper level's speed: -1 clearly missing (SERVED_SIGMAS under
        the median of the last SERVED_REF points at speed, and SERVED_MISSES of its hits gone
        against the lower plateau's own speed), 1 at speed (within SERVED_AT sigmas of it, or
        faster; the window's first three always), 0 between (partial hits that neither start nor
        end a run, nor move the reference). All at speed without the plateaus' speeds."""
        out = np.ones(self.x.size, dtype=int)
        if self.prior is None:
            return out
        p2, sigma, at = self.prior[1], self.delta / CAP, []
        for i, (y, u) in enumerate(zip(self.y.tolist(), self.u.tolist())):
            if len(at) >= 3:
                ref = at[-SERVED_REF:]
                hi = median(ref)
                spread = sigma * math.hypot(1.0, 1.2533 / math.sqrt(len(ref)))
                inv_lo = p2 * u
                gone = 1.0 - float(hit_rates(y, hi, -math.log10(inv_lo))) if inv_lo > 10.0 ** -hi else 0.0
                out[i] = (-1 if hi - y >= SERVED_SIGMAS * spread and gone >= SERVED_MISSES
                          else 1 if hi - y <= SERVED_AT * spread else 0)
            if out[i] == 1:
                at.append(y)
        return out

    def served_whole(self) -> np.ndarray:
        """For each point as an onset model's C (the last size served whole): whether no run of
        SERVED_RUN points clearly missing ends at or before it (points between speeds neither
        break nor extend a run), unless SERVED_BACK points at speed follow the run (a dip). A
        cliff placed past such a run reads a later bump as its edge (three H100s' L1s: partial
        hits at 221-241 KiB, 6-20% slow, read 230.5-252 KiB with the upper speed taken 4-8% under
        its plateau's)."""
        if self._served is None:
            out, fallen, missing, back = np.ones(self.x.size, dtype=bool), False, 0, 0
            for i, state in enumerate(self.speed_states().tolist()):
                if state:
                    missing, back = (missing + 1, 0) if state < 0 else (0, back + 1)
                fallen = (fallen or missing >= SERVED_RUN) and back < SERVED_BACK
                out[i] = not fallen
            self._served = out
        return self._served

    def rss(self, H: np.ndarray, *, loose: bool = False):
        """Capped residual sum of squares; ``loose``: capped far wider, for ranking a coarse grid
        (a tight cap makes every point that a grid step misses cost the same as an outlier)."""
        delta = max(self.delta * LOOSE, LOOSE_FLOOR) if loose else self.delta
        return solve(H, self.v, self.w, self.u, self.y, delta, self.u_mid, self.prior)

    def residuals(self, h: np.ndarray) -> np.ndarray:
        """One row of hit rates' capped residuals and the plateaus' ridge as two more: what
        the polish minimises is then ``rss``'s figure, to rounding (the polish's inner loop:
        speeds' solve in Python floats, the window's weighted sums kept as speeds forms them)."""
        g = 1.0 - h
        a11, a12, a22 = float((h * h) @ self.w), float((h * g) @ self._wu), float((g * g) @ self._wuu)
        b1, b2 = float(h @ self._wv), float(g @ self._wvu)
        prior = self.prior
        if prior is not None:
            p1, p2, l1, l2 = prior
            a11, b1 = a11 + l1, b1 + l1 * p1
            a22, b2 = a22 + l2, b2 + l2 * p2
        det = a11 * a22 - a12 * a12
        if not det > 1e-12 * max(a11 * a22, 1e-300):
            return np.full(h.size + 2, 1.0)
        c1, c2 = (a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det
        g *= self.u
        vhat = c1 * h
        vhat += c2 * g
        if not (c1 > 0 and c2 * self.u_mid > 1.02 * c1 and (vhat > 0).all()):
            return np.full(h.size + 2, 1.0)
        n = h.size
        out = np.empty(n + 2)
        e = out[:n]
        np.log10(vhat, out=e)
        e += self.y
        np.maximum(e, -self.delta, out=e)
        np.minimum(e, self.delta, out=e)
        if prior is None:
            out[n:] = 0.0
        else:
            out[n], out[n + 1] = ridge(c1, c2, prior)
        return out
