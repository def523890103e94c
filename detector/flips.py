"""How likely a model left out of a fall's estimate is to win a rerun, and how far the estimate
then moves: a part of the capacity's repeatability (detector.fallfit).

Models under fallfit.MAJOR of the evidence move no estimate, yet a rerun's fresh noise can put
one of them ahead: generated GPU 24's random-replacement L2 (95.5 MiB, a 1.8x ratio) read as a
hashed-set fall 20% larger on one seed of eight, where both runs said 2%."""
from __future__ import annotations

import math

import numpy as np

from detect_caches.detector.fallmodels import ModelFit
from detect_caches.detector.fallwindow import FallWindow
from detect_caches.detector.hitmodels import MODELS
from detect_caches.detector.splitfit import split_inverse

_BY_NAME = {m.name: m for m in MODELS}


def _fitted_log(win: FallWindow, f: ModelFit) -> np.ndarray:
    """One model's fitted curve at the window's points (log10 GB/s), its speeds solved as the fit
    solved them."""
    r = np.exp(win.x - math.log(f.capacity_bytes))
    if f.model == "split":
        inv = split_inverse(win, math.log(f.capacity_bytes), f.theta[0])
    else:
        H = _BY_NAME[f.model].hit(r[None, :], f.theta)
        _, c1, c2 = win.rss(H)
        inv = c1[0] * H[0] + c2[0] * (1 - H[0]) * win.u
    return -np.log10(np.maximum(inv, 1e-300))


def flip_spread(win: FallWindow, fits: list[ModelFit], major: list[ModelFit], lncap: float,
                sigma: float) -> float:
    """How far a rerun moves the estimate ``lncap`` (1 sigma, ln C) when a model of ``fits`` not
    in ``major`` wins it: its misfit behind the best, D point variances (``sigma``: one point's
    noise, log10), moves on fresh noise by twice the two fitted curves' distance in point sigmas,
    so it wins with probability Phi(-D / (2 distance)) and then reads its own C."""
    best = min(fits, key=lambda f: f.rss)
    y_best = _fitted_log(win, best)
    var = 0.0
    for f in fits:
        if f in major or abs(math.log(f.capacity_bytes) - lncap) < 1e-9:
            continue
        d = max(f.rss - best.rss, 0.0) / sigma ** 2
        gap = np.clip(_fitted_log(win, f) - y_best, -win.delta, win.delta)   # capped as the rss is
        apart = 2 * math.sqrt(float(np.sum(gap * gap))) / sigma
        p = 0.5 * math.erfc(d / max(apart, 1e-9) / math.sqrt(2))
        var += p * (math.log(f.capacity_bytes) - lncap) ** 2
    return math.sqrt(var)
