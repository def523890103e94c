"""Where more points tell the fall's models apart: the sizes at which the models that share a
fall's evidence draw the most different curves (a random tail and a split level's far half fit
the same points near C and part a factor past it), for the refining round (detector.analyze)."""
from __future__ import annotations

import numpy as np

from detect_caches.detector.fallfit import MAJOR
from detect_caches.detector.hitmodels import hit_curve
from detect_caches.detector.splitfit import SPLITS, split_hits

TELLING = MAJOR      # models with a share in the estimate are told apart ...
CAPACITIES_APART = 1.08   # ... when their capacities differ by more than this factor
TELLING_SIZES = 6    # sizes measured where they part most
CLEAR = 0.5          # ... where two of their curves part by at least this many point sigmas ...
HALF = 0.5           # ... each size where they part by at least this share of that most
GAP = 0.12           # ... at least this far apart (ln size)
RIVAL_APART = 1.15   # a model whose capacity lies this factor from the leader's ...
RIVAL_SCORE = 16.0   # ... and whose score is within this of the leader's (weight ratio e^-8) is told
                     # apart from it however little evidence it has now ...
RIVAL_MEASURED = 4   # ... at sizes that hold fewer points than this within GAP / 2 (the rounds end
                     # where the data has been asked: a broad fall crowded with points reads as two)
CONTEST_WEIGHT = MAJOR   # the two leading models each count in the estimate ...
CONTEST_APART = 1.03   # ... and their capacities differ by this factor: the reading flips with the seed
CONTEST_MEASURED = 8   # ... at sizes holding fewer points than this: curves a few point sigmas apart
                       # need more than a rival's four (SIMULATED, physics GPUs 300 x 2 within 10%
                       # 98.9 -> 99.4%, beyond 20% 6 -> 3; formula spread within 2% 94.9 -> 95.2%)


def predicted_log(fit, sizes: np.ndarray) -> np.ndarray:
    """One model's fitted curve (log10 GB/s) at ``sizes``, the level below taken as flat."""
    r = np.asarray(sizes, dtype=float) / fit.capacity_bytes
    b_hi, b_lo = 10.0 ** -fit.hi_log, 10.0 ** -fit.lo_log
    if fit.model in SPLITS and fit.far_log is not None:
        near, whole = split_hits(r, fit.theta[0], fit.model)
        inv = near * b_hi + (whole - near) * 10.0 ** -fit.far_log + (1 - whole) * b_lo
    else:
        h = hit_curve(fit.model, r, fit.theta)
        inv = h * b_hi + (1 - h) * b_lo
    return -np.log10(inv)


def telling_sizes(fall_fit, *, low_bytes: float, high_bytes: float, point_sigma: float,
                  count: int = TELLING_SIZES) -> list[float]:
    """Up to ``count`` sizes between ``low_bytes`` and ``high_bytes`` where the fall's leading
    models (each with TELLING of the evidence, their capacities apart) draw curves furthest
    apart (GAP apart, each where they part by HALF of the most); none when one model leads
    alone or their curves part nowhere by CLEAR point sigmas."""
    fits = [f for f in getattr(fall_fit, "fits", ()) if f.weight >= TELLING]
    caps = [f.capacity_bytes for f in fits]
    if len(fits) < 2 or max(caps) < CAPACITIES_APART * min(caps) or not high_bytes > low_bytes > 0:
        return []
    x = np.geomspace(low_bytes, high_bytes, 200)
    w = np.array([f.weight for f in fits])
    ys = np.array([predicted_log(f, x) for f in fits])
    mean = w @ ys / w.sum()
    part = np.sqrt(w @ (ys - mean) ** 2 / w.sum())
    # worth measuring where the curves themselves part, however the evidence is shared now: a
    # model with 5% of it, 2 point sigmas off the leader past C, is told in a few points (physics
    # GPU 222 seed 2: LRU 8-way +37% against random replacement, whose tail went unmeasured)
    if not float(np.max(ys.max(axis=0) - ys.min(axis=0))) >= CLEAR * max(point_sigma, 1e-3):
        return []
    return _parting(x, part, count)


def _parting(x: np.ndarray, part: np.ndarray, count: int, held: np.ndarray | None = None,
             enough: int = RIVAL_MEASURED) -> list[float]:
    """Up to ``count`` of ``x`` where ``part`` is largest, each where it is HALF of the most or
    more, GAP apart; a size with ``enough`` of the ln sizes ``held`` within GAP / 2 is passed
    over (its neighbourhood still closed to the next)."""
    out: list[float] = []
    lnx, least = np.log(x), HALF * float(part.max())
    for _ in range(count):
        i = int(np.argmax(part))
        if not part[i] >= least:
            break
        if held is None or np.count_nonzero(np.abs(held - lnx[i]) < GAP / 2) < enough:
            out.append(float(x[i]))
        part = np.where(np.abs(lnx - lnx[i]) < GAP, 0.0, part)
    return sorted(out)


def rival_sizes(fall_fit, *, low_bytes: float, high_bytes: float, point_sigma: float,
                measured=(), count: int = TELLING_SIZES) -> list[float]:
    """Sizes where the fall's leading model and its rival part most: the best-scored model whose
    capacity lies RIVAL_APART from the leader's, within RIVAL_SCORE of its score. Weights alone
    hide it: an 8-way LRU L2 at 1.27x under 2% noise read as random replacement 30% smaller with
    0.996 of the evidence, its rival never measured where the two part (physics GPU 163 seed 2).
    None when no such rival is left, or the two curves part nowhere by CLEAR point sigmas;
    sizes where ``measured`` already holds RIVAL_MEASURED points are not asked again."""
    fits = list(getattr(fall_fit, "fits", ()))
    if len(fits) < 2 or not high_bytes > low_bytes > 0:
        return []
    lead = max(fits, key=lambda f: f.weight)
    floor = lead.weight * float(np.exp(-RIVAL_SCORE / 2))
    rivals = [f for f in fits if f is not lead and f.weight >= floor
              and abs(np.log(f.capacity_bytes / lead.capacity_bytes)) >= np.log(RIVAL_APART)]
    if not rivals:
        return []
    rival = max(rivals, key=lambda f: f.weight)
    return _between(lead, rival, low_bytes, high_bytes, point_sigma, measured, count)


def contest_sizes(fall_fit, *, low_bytes: float, high_bytes: float, point_sigma: float,
                  measured=(), count: int = TELLING_SIZES) -> list[float]:
    """Sizes where the fall's two leading models part most, when each holds CONTEST_WEIGHT of
    the evidence and their capacities lie CONTEST_APART: an estimate between them moves with
    the seed (a cliff onto partial hits read as random replacement 3-10% early, generated GPUs
    263 and 276) however narrow the interval they make together; until CONTEST_MEASURED points
    lie at each size."""
    fits = sorted(getattr(fall_fit, "fits", ()), key=lambda f: -f.weight)
    if len(fits) < 2 or not high_bytes > low_bytes > 0:
        return []
    lead, other = fits[0], fits[1]
    if other.weight < CONTEST_WEIGHT or abs(np.log(other.capacity_bytes / lead.capacity_bytes)) < np.log(CONTEST_APART):
        return []
    return _between(lead, other, low_bytes, high_bytes, point_sigma, measured, count, CONTEST_MEASURED)


def _between(a, b, low_bytes: float, high_bytes: float, point_sigma: float, measured, count: int,
             enough: int = RIVAL_MEASURED) -> list[float]:
    """Where models ``a`` and ``b`` part most (rival_sizes, contest_sizes)."""
    x = np.geomspace(low_bytes, high_bytes, 200)
    part = np.abs(predicted_log(a, x) - predicted_log(b, x))
    if not float(part.max()) >= CLEAR * max(point_sigma, 1e-3):
        return []
    return _parting(x, part, count, held=np.log(np.asarray(measured, dtype=float).reshape(-1)), enough=enough)
