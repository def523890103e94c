"""How likely a model left out of a fall's estimate is to win a rerun, and how far the estimate
then moves: a part of the capacity's repeatability (detector.fallfit), the part that decides drift
in `compare` and `fleet` and nothing else (refining and the confidence read the rest).

Models under fallfit.MAJOR of the evidence move no estimate, yet a rerun's fresh noise can put
one of them ahead: generated GPU 24's random-replacement L2 (95.5 MiB, a 1.8x ratio) read as a
hashed-set fall 20% larger on one seed of eight, where both runs said 2%."""
from __future__ import annotations

import math

import numpy as np

from detect_caches.detector.fallmodels import ModelFit
from detect_caches.detector.fallwindow import FallWindow
from detect_caches.detector.hitmodels import BY_NAME
from detect_caches.detector.splitfit import SPLITS, split_inverse


def _residuals(win: FallWindow, f: ModelFit) -> np.ndarray:
    """The points less one model's fitted curve (log10 GB/s), its speeds solved as the fit solved
    them."""
    if f.model in SPLITS:
        inv = split_inverse(win, math.log(f.capacity_bytes), f.theta[0], f.model)
    else:
        H = BY_NAME[f.model].hit(np.exp(win.x - math.log(f.capacity_bytes))[None, :], f.theta)
        _, c1, c2 = win.rss(H)
        inv = c1[0] * H[0] + c2[0] * (1 - H[0]) * win.u
    return win.y + np.log10(np.maximum(inv, 1e-300))


def flip_spread(win: FallWindow, fits: list[ModelFit], major: list[ModelFit], lncap: float, *,
                sigma_fit: float, sigma_point: float, penalty: dict) -> float:
    """How far a rerun moves the estimate ``lncap`` (1 sigma, ln C) when another model wins it.
    Models are weighed by score = rss / sigma_fit^2 + ``penalty`` (two a parameter and a prior:
    detector.hitmodels.HitModel.penalty, by model name; detector.fallfit); one behind
    the leading model by D wins when fresh noise of ``sigma_point`` (log10) turns D, which moves
    by 2 sigma_point |g| / sigma_fit^2 (g: the two models' residuals' difference at the points
    neither one's cap holds: past the cap noise moves nothing), so with probability
    Phi(-D / that), and then reads its own C. A model in ``major`` already counts its weight in
    the estimate's spread: only a probability above that adds here."""
    def score(f: ModelFit) -> float:
        return f.rss / sigma_fit ** 2 + penalty[f.model]

    lead = min(fits, key=score)
    e_lead = _residuals(win, lead)
    g_lead = np.where(np.abs(e_lead) < win.delta, e_lead, 0.0)
    var = 0.0
    for f in fits:
        moved = math.log(f.capacity_bytes) - lncap
        if f is lead or not math.isfinite(f.rss) or abs(moved) < 1e-9:
            continue
        behind = score(f) - score(lead)
        e = _residuals(win, f)
        g = np.where(np.abs(e) < win.delta, e, 0.0) - g_lead
        moves = 2 * sigma_point * math.sqrt(float(g @ g)) / sigma_fit ** 2
        p = 0.5 * math.erfc(behind / moves / math.sqrt(2)) if moves > 0 else float(behind <= 0)
        counted = f.weight if any(f is m for m in major) else 0.0
        var += max(p - counted, 0.0) * moved * moved
    return math.sqrt(var)
