"""A rerun won by a model left out of a fall's estimate (detector.flips): how often fresh noise
puts that model ahead, and how far the estimate then moves."""
import math

import numpy as np

from detect_caches.detector.fallmodels import ModelFit
from detect_caches.detector.fallwindow import FallWindow
from detect_caches.detector.flips import _residuals, flip_spread
from detect_caches.detector.hitmodels import hit_curve

C = 4 * 2 ** 20
PARAMS = {"hashed": 2, "random": 0, "ways": 2}   # score penalties: two a parameter (shape parameters)


def _fall(sigma, outliers=()):
    """Points on a hashed-set fall at C (9 -> 4 TB/s, width 0.06), some of them ``outliers``
    (index: log10 offset), and a window over them for points of noise ``sigma`` (log10)."""
    sizes = np.geomspace(C / 2.5, C * 2.5, 40)
    h = hit_curve("hashed", sizes / C, (0.06,))
    y = -np.log10(h / 9000.0 + (1 - h) / 4000.0)
    for i, off in outliers:
        y[i] += off
    return y, FallWindow(sizes, y, None, sigma)


def _fit(win, model, cap, theta):
    H = hit_curve(model, win.sizes / cap, theta)
    rss, c1, c2 = win.rss(H[None, :])
    return ModelFit(model, theta, cap, float(rss[0]), -math.log10(c1[0]), -math.log10(c2[0]))


def _won(win, y, best, alt, sigma, draws=4000):
    """The share of draws of fresh noise on ``y`` where ``alt``'s score (capped rss over sigma^2,
    two per parameter) beats ``best``'s, both curves held."""
    rng = np.random.default_rng(1)
    noisy = y + rng.normal(0.0, sigma, (draws, y.size))
    fitted = {f.model + str(f.capacity_bytes): y - _residuals(win, f) for f in (best, alt)}
    score = [np.minimum((noisy - fitted[f.model + str(f.capacity_bytes)]) ** 2, win.delta ** 2).sum(-1) / sigma ** 2
             + 2 * PARAMS[f.model] for f in (best, alt)]
    return float(np.mean(score[1] < score[0]))


def test_a_model_behind_wins_reruns_as_often_as_fresh_noise_puts_it_ahead():
    """The best curve and a narrower hashed fall at 0.98 C, both held, on 4000 draws of fresh
    noise: the share of draws where the other's score is the smaller is the probability flips
    counts (0.105 said, 0.107 seen)."""
    sigma = 0.02
    y, win = _fall(sigma)
    best, alt = _fit(win, "hashed", C, (0.06,)), _fit(win, "hashed", 0.98 * C, (0.05,))
    assert 3 < (alt.rss - best.rss) / sigma ** 2 < 40        # behind, but not out of reach of the noise
    flip = flip_spread(win, [best, alt], [best], math.log(C), sigma_fit=sigma, sigma_point=sigma, penalty=PARAMS)
    p, won = (flip / math.log(0.98)) ** 2, _won(win, y, best, alt, sigma)
    assert 0.02 < won < 0.45 and abs(p - won) < 0.03, (p, won)


def test_a_model_far_behind_or_reading_the_same_size_moves_nothing():
    """A tail hundreds of point variances behind wins no rerun; a model reading the estimate's own
    size moves it nowhere when it does; a model that counts in the estimate with more weight than
    its chance to win is not counted again, one with less counts the excess."""
    sigma = 0.004
    y, win = _fall(sigma)
    best = _fit(win, "hashed", C, (0.06,))
    far = _fit(win, "random", 0.6 * C, ())
    assert (far.rss - best.rss) / sigma ** 2 > 200
    kw = dict(sigma_fit=sigma, sigma_point=sigma, penalty=PARAMS)
    assert flip_spread(win, [best, far], [best], math.log(C), **kw) < 1e-3
    same = _fit(win, "ways", C, (32.0,))
    assert flip_spread(win, [best, same], [best], math.log(C), **kw) == 0.0
    y, win = _fall(0.02)
    kw = dict(sigma_fit=0.02, sigma_point=0.02, penalty=PARAMS)
    best, near = _fit(win, "hashed", C, (0.06,)), _fit(win, "hashed", 0.98 * C, (0.05,))
    alone = flip_spread(win, [best, near], [best], math.log(C), **kw)
    near.weight = 0.5
    assert flip_spread(win, [best, near], [best, near], math.log(C), **kw) == 0.0
    near.weight = 0.05
    assert 0 < flip_spread(win, [best, near], [best, near], math.log(C), **kw) < alone
