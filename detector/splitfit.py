"""The split level as a model of its own: a level in two partitions whose far half serves slower
(an NVIDIA L2), fitted to one fall's points beside the hit-rate models (detector.fallmodels)."""
from __future__ import annotations

import math

import numpy as np

from detect_caches.detector.fallmodels import SMOOTH_GRID, ModelFit, profile_inv00
from detect_caches.detector.fallwindow import FallWindow, huber, ridge
from detect_caches.detector.hitmodels import BY_NAME, DEVICE_MIN_WAYS, SPLIT_HALVES, HitModel

# each half of a split level falls as the hashed model's fall may, up to about its widest (0.12 on
# the grid, 0.14 in the fine step: an LRU cache of some 16-24 ways; held to 0.08, split L2s of
# tree-PLRU or page-coloured halves read 40-53% small): a broader two-step "split" would stand
# for a smooth tail of partial hits, which other models describe
SPLIT = HitModel("split", "split level (near and far half)", False,
                 (tuple(np.round(np.geomspace(0.006, 0.12, 10), 5)),), speeds=3)
# ... or as a device cache of 8 ways or more: LRU over hashed sets, or random replacement over
# them (physics GPUs 88, 149, 161: split L2s of random or 8-way LRU halves read 13-45% small as one
# random fall). Halves this broad fit a random tail in one piece as well (the near half its fall,
# the far half its tail, C 1.5-2.5x the size: physics GPUs 26, 68, 89, 147 read +35% to +155%), so
# they must fit better by SPLIT_CHOICE in score (rss / sigma^2) than every model of one fall
SPLIT_CHOICE = 20.0
_WAYS = tuple(float(DEVICE_MIN_WAYS * 2 ** (k / 2)) for k in range(9))   # half a doubling apart: a
                                # random fall's ways move its C as much as its C does
SPLIT_WAYS = HitModel("split_ways", SPLIT.shape, False, (_WAYS[:7],), speeds=3, prior_score=SPLIT_CHOICE)
SPLIT_RANDOM = HitModel("split_random", SPLIT.shape, False, (_WAYS,), speeds=3, prior_score=SPLIT_CHOICE)
SPLITS = {m.name: m for m in (SPLIT, SPLIT_WAYS, SPLIT_RANDOM)}
SPLIT_APART = 1.1       # the far half's speed at least this far from both neighbours
FINE = 41               # C candidates across two grid steps around the grid's best
WIDTH_STEP = 1.18       # ... at its width and this factor either side (half the width grid's step)
STEP = {"split": WIDTH_STEP, "split_ways": 2 ** 0.25, "split_random": 2 ** 0.25}   # ... or ways
STARTS = {"split": 1, "split_ways": 3, "split_random": 3}   # the grid's best shapes refined (a random
                                # fall's ways and C trade: 8 ways at 1.2 C against 12 at 1.05 C)


def _solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The speeds of each candidate; a candidate whose equations are singular (speeds of no fall:
    a row of points all at one level) gets none, so it fails the fall's checks."""
    try:
        return np.linalg.solve(A, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        out = np.full(b.shape, -1.0)
        for m in range(A.shape[0]):
            try:
                out[m] = np.linalg.solve(A[m], b[m])
            except np.linalg.LinAlgError:
                pass
        return out


def split_hits(r: np.ndarray, s: float, model: str = "split") -> tuple[np.ndarray, np.ndarray]:
    """(near half's hits, the whole level's) at ``r`` = size / C for the shape ``s`` (a width, or
    ways): ``model``'s half falls (hitmodels.SPLIT_HALVES) at C/2 and at C."""
    half = BY_NAME[SPLIT_HALVES[model]]
    return half.hit(2 * r, (s,)), half.hit(r, (s,))


def _rss(win: FallWindow, lnc: np.ndarray, s: float, model: str = "split"):
    """(rss, coefficients) of the split model at each ln C of ``lnc`` for the shape ``s``: the
    three speeds (near, far, below) solved in closed form at each."""
    hn, ht = split_hits(np.exp(win.x[None, :] - lnc[:, None]), s, model)
    X = np.stack([hn, ht - hn, (1 - ht) * win.u], axis=-1)          # (m, n, 3)
    A = np.einsum("mni,mnj,n->mij", X, X, win.w) + 1e-12 * np.eye(3)
    b = np.einsum("mni,n,n->mi", X, win.v, win.w)
    if win.prior is not None:
        # the near and the lower speed held by their plateaus' own points, as in every hit-rate
        # model's fit (fallwindow.speeds): free, they let the split bend its lower speed into a
        # next level's sag (physics GPU 21 seed 2: a tree-PLRU L2 read +91% as a split level)
        p1, p2, l1, l2 = win.prior
        A[:, 0, 0] += l1
        A[:, 2, 2] += l2
        b[:, 0] += l1 * p1
        b[:, 2] += l2 * p2
    c = _solve(A, b)
    # both steps apart and clear of the points' noise: a far half at the speed below hides its
    # end in the noise, and then any C fits (generated GPU 62: an L2 read twice its size)
    apart = max(SPLIT_APART, 10.0 ** win.visible)
    ok = (c[:, 0] > 0) & (c[:, 1] > apart * c[:, 0]) & (c[:, 2] > apart * c[:, 1])
    vhat = np.einsum("mni,mi->mn", X, c)
    ok &= np.all(vhat > 0, axis=-1)
    e = win.y + np.log10(np.where(vhat > 0, vhat, 1.0))
    rss = huber(e, win.delta).sum(-1)
    if win.prior is not None:
        r1, r2 = ridge(c[:, 0], c[:, 2], win.prior)
        rss = rss + r1 * r1 + r2 * r2
    return np.where(ok, rss, np.inf), c


def split_inverse(win: FallWindow, lnc: float, s: float, model: str = "split") -> np.ndarray:
    """The split model's fitted inverse speeds at the window's points for one C and shape, its
    three speeds solved as the fit solves them."""
    hn, ht = split_hits(np.exp(win.x - lnc), s, model)
    X = np.stack([hn, ht - hn, (1 - ht) * win.u], axis=-1)
    _, c = _rss(win, np.array([lnc]), s, model)
    return X @ c[0]


def fit_split(win: FallWindow, *, until_bytes: float = math.inf, model: str = "split") -> ModelFit | None:
    """A level in two partitions whose far half serves slower (an NVIDIA L2): the near half
    falls at C/2 onto the far half's speed, the whole level at C (``model``, one of SPLITS: both
    halves LRU over hashed sets as a logistic or of some ways, or random replacement over them), C by
    ``until_bytes``: a far half that ran on into the level below's plateau would be a tail of
    partial hits (a random one's fits as two broad steps), not a half of this level. The grid's
    best is refined on a fine grid of C (at its width and the two beside it), whose curvature at
    the least gives the repeatability."""
    if math.isnan(until_bytes) or until_bytes <= 0:
        raise ValueError(f"until_bytes must be a positive size or inf, not {until_bytes}")
    lnc = np.linspace(win.c_span[0] + math.log(2) - 0.15, win.c_span[1] + 0.15, SMOOTH_GRID)
    best_rss = np.full(lnc.size, np.inf)
    starts = []
    top = math.log(until_bytes)
    for (s,) in SPLITS[model].thetas():
        rss, c = _rss(win, lnc, s, model)
        rss[lnc > top] = np.inf
        best_rss = np.minimum(best_rss, rss)
        i = int(np.argmin(rss))
        if np.isfinite(rss[i]):
            starts.append((float(rss[i]), float(s), float(lnc[i]), c[i]))
    if not starts:
        return None
    starts.sort(key=lambda t: t[0])
    best, inv00 = starts[0], None
    step = lnc[1] - lnc[0]
    least = SPLITS[model].grids[0][0]
    for start in starts[:STARTS[model]]:
        fine = start[2] + np.linspace(-step, step, FINE)
        for s in (start[1] / STEP[model], start[1], start[1] * STEP[model]):
            if model != "split" and s < least:
                continue     # fewer ways than a device cache has
            rss, c = _rss(win, fine, s, model)
            rss[fine > top] = np.inf
            i = int(np.argmin(rss))
            if np.isfinite(rss[i]) and rss[i] <= best[0]:
                inv00 = profile_inv00(fine, rss, i)
                best = (float(rss[i]), float(s), float(fine[i]), c[i])
    rss, s, c, coef = best
    fit = ModelFit(model, (s,), math.exp(c), rss, -math.log10(coef[0]),
                   -math.log10(coef[2] * float(np.median(win.u))), profile=(lnc, best_rss), inv00=inv00)
    fit.far_log = -math.log10(coef[1])
    return fit
