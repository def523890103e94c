"""A device fall weighed with the fall below it, where its leading models part.

A random-replacement L2's long tail runs over a close L3's plateau and into its fall: alone, the
L2's points fit an 8-way LRU fall 40% larger about as well (the lower speed then a little faster,
where the tail has ended), and the estimate lands between the two or on the wrong one. The L3's
plateau and fall are one speed under both readings: fitted together (1/BW = h2/B2 + (1 - h2)
(h3/B3 + (1 - h3) u/B4), the three speeds solved in closed form), each L2 model has to leave the
L3's own points a fall they fit. What those points (past the L2's own window) then say of each L2
model enters the L2's own fit as that model's prior score, so its estimate, interval and
repeatability are read as before, with that evidence added (physics GPU 46's random L2 at 1.24x:
+37.6% and +34.6% with the latency sweep, within 2% since; SIMULATED, BENCHMARKS.md 2026-12-07).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.optimize import minimize

from detect_caches.detector.above_tail import without_tail_above
from detect_caches.detector.fallfit import MINOR
from detect_caches.detector.falling_below import lower_speeds
from detect_caches.detector.hitmodels import BY_NAME, MODELS, hit_curve
from detect_caches.detector.levels import SweepAnalysis
from detect_caches.detector.splitfit import SPLITS

APART = 1.10         # the upper fall's leading models' capacities at least this far apart
TOP = 3              # models of each fall tried (by their own evidence, at least MINOR)
SPAN_UPPER = 0.45    # ln C of the upper fall's model scanned this far each side of its own fit
SPAN_LOWER = 0.15    # ... and of the lower fall's
PRIOR_CAP = 200.0    # a model this far behind has no weight left (the cap keeps scores finite)


def _fit_of(step):
    return getattr(step.estimate, "fit", None) if step is not None else None


def _residuals(hits2: np.ndarray, hits3: np.ndarray, inv: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Weighted least squares of the three inverse speeds for each candidate row (relative errors);
    the residuals in log10 bandwidth."""
    cols = np.broadcast_arrays(hits2, (1 - hits2) * hits3, (1 - hits2) * (1 - hits3) * u)
    a = np.stack(cols, axis=-1) / inv[:, None]
    ata = np.einsum("...pi,...pj->...ij", a, a)
    # a ridge at the matrix's own scale: columns in proportion (hit rates flat over the window)
    # leave it singular, and one singular candidate would stop the whole batch
    ata = ata + 1e-12 * np.trace(ata, axis1=-2, axis2=-1)[..., None, None] * np.eye(3)
    atb = a.sum(axis=-2)
    b = np.linalg.solve(ata, atb[..., None])[..., 0]
    pred = np.einsum("...pi,...i->...p", a, b)
    return np.log10(np.maximum(pred, 1e-9))


def _speeds_rss(hits2, hits3, inv, u) -> np.ndarray:
    r = _residuals(hits2, hits3, inv, u)
    return np.sum(r * r, axis=-1)


def _joint_rss(x, inv, u, m2, c2, m3, c3, outside) -> tuple[float, float]:
    """The best joint fit of upper model ``m2`` and lower model ``m3`` (fits, their shapes held)
    near their own capacities ``c2``, ``c3``: its rss, and the part of it on the points
    ``outside`` the upper fall's own window."""
    g2 = math.log(c2) + np.linspace(-SPAN_UPPER, SPAN_UPPER, 37)
    g3 = math.log(c3) + np.linspace(-SPAN_LOWER, SPAN_LOWER, 7)
    h2 = hit_curve(m2.model, x[None, :] / np.exp(g2)[:, None], m2.theta)
    h3 = hit_curve(m3.model, x[None, :] / np.exp(g3)[:, None], m3.theta)
    rss = _speeds_rss(h2[:, None, :], h3[None, :, :], inv, u)
    i, j = np.unravel_index(int(np.argmin(rss)), rss.shape)

    def f(p):
        return float(_speeds_rss(hit_curve(m2.model, x / math.exp(p[0]), m2.theta),
                                 hit_curve(m3.model, x / math.exp(p[1]), m3.theta), inv, u))
    res = minimize(f, (g2[i], g3[j]), method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-10})
    best = min((float(rss[i, j]), (g2[i], g3[j])), (float(res.fun), tuple(res.x)))
    r = _residuals(hit_curve(m2.model, x / math.exp(best[1][0]), m2.theta),
                   hit_curve(m3.model, x / math.exp(best[1][1]), m3.theta), inv, u)
    return best[0], float(np.sum(r[outside] ** 2))


def joint_priors(an: SweepAnalysis, i: int) -> dict[str, float] | None:
    """Prior scores for fall ``i``'s leading models: what the points of fall ``i + 1`` past its own
    window say of each, fitted together (squared point sigmas behind the best; None: the models
    agree, or either fall is no fitted drop)."""
    steps = an.steps
    if i + 1 >= len(steps) or steps[i].rise or steps[i + 1].rise:
        return None
    upper, lower = _fit_of(steps[i]), _fit_of(steps[i + 1])
    if upper is None or lower is None:
        return None
    # the upper fall's leading models by their own evidence, where at least two have a share
    tried = sorted((f for f in upper.fits if f.model in BY_NAME and f.weight >= MINOR), key=lambda f: -f.weight)[:TOP]
    caps = [f.capacity_bytes for f in tried]
    if len(caps) < 2 or max(caps) / min(caps) < APART:
        return None
    below = sorted((f for f in lower.fits if f.weight >= MINOR and f.model in BY_NAME), key=lambda f: -f.weight)[:TOP]
    if not below:
        return None
    curve, ps = an.curve, an.point_sigma or an.sigma
    if i in an.under_tail:
        hi = an.plateaus[i]
        curve = without_tail_above(curve, steps[i - 1], hi.size_lo_bytes, hi.size_hi_bytes, ps)
    own = an.step_points(i)
    sel = own | an.step_points(i + 1)
    x = curve.size_bytes[sel]
    inv = 1.0 / curve.bandwidth_gbs[sel]
    # the level under the lower fall, where its own fall has begun inside the window
    slow = lower_speeds(steps[i + 2] if i + 2 < len(steps) else None, x, ps, 0.0)
    u = 10.0 ** -(np.asarray(slow) - np.max(slow)) if np.ndim(slow) else np.ones_like(x)
    outside = ~own[sel]
    if not outside.any():
        return None
    pen = {m: BY_NAME[m].penalty for m in BY_NAME}
    combos = [(f2.model, f3.model, *_joint_rss(x, inv, u, f2, f2.capacity_bytes, f3, f3.capacity_bytes, outside))
              for f2 in tried for f3 in below]
    sigma = max(math.sqrt(min(c[2] for c in combos) / max(x.size - 7, 1)), 0.7 * ps, 1e-3)
    # each upper model's best joint fit (its lower model the one that fits it best), and what
    # the points past the upper fall's own window say of it: the evidence its own fit lacks
    best: dict[str, tuple[float, float]] = {}
    for m2, m3, rss, extra in combos:
        total = rss / sigma ** 2 + pen[m3]
        if total < best.get(m2, (math.inf, 0.0))[0]:
            best[m2] = (total, extra / sigma ** 2 + pen[m3])
    if not best or not all(math.isfinite(v) for pair in best.values() for v in pair):
        return None     # no joint fit of a figure (every combination's speeds out of order)
    low = min(v[1] for v in best.values())
    raw = {m: min(v[1] - low, PRIOR_CAP) for m, v in best.items()}
    # a model the joint fit did not try (a split level's, one under MINOR) is taken as the worst
    # tried: evidence the tried ones lose must not pass to models nobody checked against the points
    worst = max(raw.values())
    return {m: raw.get(m, worst) for m in (*BY_NAME, *SPLITS)}


def refit_with_next(an: SweepAnalysis, fit, models) -> None:
    """From the bottom up, each fall whose leading models (MINOR of the evidence or more) part by APART,
    fitted again with the joint fit's evidence as their prior scores (``fit(i, below=, models=)``:
    detector.analyze_sweep)."""
    chosen = [BY_NAME[m] if isinstance(m, str) else m for m in (models or MODELS)]
    chosen += [m for m in SPLITS.values() if m.name not in {c.name for c in chosen}]
    for i in reversed(range(len(an.steps) - 1)):     # bottom up, as chain_plateaus: each fall
        priors = joint_priors(an, i)                   # against the fall below as it is finally read
        if priors is None:
            continue
        weighed = tuple(dataclasses.replace(m, prior_score=m.prior_score + priors.get(m.name, 0.0)) for m in chosen)
        an.steps[i] = fit(i, below=an.steps[i + 1], models=weighed)
