"""A rerun won by a model left out of a fall's estimate (detector.flips): how often fresh noise
puts that model ahead, and how far the estimate then moves."""
import math

import numpy as np

from detect_caches.detector.fallmodels import ModelFit
from detect_caches.detector.fallwindow import FallWindow
from detect_caches.detector.flips import _fitted_log, flip_spread
from detect_caches.detector.hitmodels import hit_curve

C = 4 * 2 ** 20


def _fall(sigma):
    """Points on a hashed-set fall at C (9 -> 4 TB/s, width 0.06) and a window over them for
    points of noise ``sigma`` (log10)."""
    sizes = np.geomspace(C / 2.5, C * 2.5, 40)
    h = hit_curve("hashed", sizes / C, (0.06,))
    y = -np.log10(h / 9000.0 + (1 - h) / 4000.0)
    return sizes, y, FallWindow(sizes, y, None, sigma)


def _fit(win, model, cap, theta):
    H = hit_curve(model, win.sizes / cap, theta)
    rss, c1, c2 = win.rss(H[None, :])
    return ModelFit(model, theta, cap, float(rss[0]), -math.log10(c1[0]), -math.log10(c2[0]))


def test_a_model_behind_wins_reruns_as_often_as_fresh_noise_puts_it_ahead():
    """The best curve and a narrower hashed fall at 0.98 C, both fixed, on 4000 draws of fresh
    noise: the share of draws where the other's (capped) misfit is the smaller is the probability
    flips counts."""
    sigma = 0.02
    sizes, y, win = _fall(sigma)
    best = _fit(win, "hashed", C, (0.06,))
    alt = _fit(win, "hashed", 0.98 * C, (0.05,))
    d = (alt.rss - best.rss) / sigma ** 2
    assert 3 < d < 40                                  # behind, but not out of reach of the noise
    flip = flip_spread(win, [best, alt], [best], math.log(C), sigma)
    p = (flip / abs(math.log(0.98))) ** 2
    y_best, y_alt = _fitted_log(win, best), _fitted_log(win, alt)
    rng = np.random.default_rng(1)
    noisy = y + rng.normal(0.0, sigma, (4000, y.size))
    capped = lambda f: np.minimum((noisy - f) ** 2, win.delta ** 2).sum(-1)
    won = float(np.mean(capped(y_alt) < capped(y_best)))
    assert 0.02 < won < 0.45 and abs(p - won) < 0.04, (p, won)


def test_a_model_far_behind_or_reading_the_same_size_moves_nothing():
    """A tail hundreds of point variances behind wins no rerun; a model reading the estimate's own
    size moves it nowhere when it does; a model that counts in the estimate is not counted again."""
    sigma = 0.004
    sizes, y, win = _fall(sigma)
    best = _fit(win, "hashed", C, (0.06,))
    far = _fit(win, "random", 0.6 * C, ())
    assert (far.rss - best.rss) / sigma ** 2 > 200
    assert flip_spread(win, [best, far], [best], math.log(C), sigma) < 1e-3
    same = _fit(win, "ways", C, (32.0,))
    assert flip_spread(win, [best, same], [best], math.log(C), sigma) == 0.0
    near = _fit(win, "random", 0.93 * C, ())
    assert flip_spread(win, [best, near], [best, near], math.log(C), sigma) == 0.0
