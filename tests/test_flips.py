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


def _random_ways_fall(ways, sigma, seed=5):
    """A random-replacement fall in sets of ``ways`` ways at C (9 -> 7.2 TB/s), noise ``sigma``."""
    sizes = np.geomspace(C / 2, C * 3, 60)
    h = hit_curve("random_ways", sizes / C, (ways,))
    y = -np.log10(h / 9000.0 + (1 - h) / 7200.0) + np.random.default_rng(seed).normal(0.0, sigma, sizes.size)
    return sizes, y


def test_a_ways_count_between_the_grid_s_counts_says_so_in_the_repeatability():
    """Ways are a shape parameter on a coarse grid: where a neighbouring count fits about as well
    (a cache of 19 ways read at 16 or 22.6), how far C moves between them is counted in the
    repeatability as a rerun won by the neighbour, not in what more points would shrink (the
    noise repeatability that steers the refining); where the count fits and its neighbours do
    not (16 ways under 0.2% noise), it adds next to nothing."""
    from detect_caches.detector.fallfit import fit_fall
    from detect_caches.detector.hitmodels import BY_NAME
    between = fit_fall(*_random_ways_fall(16 * 2 ** 0.25, 0.004), sigma_point=0.004, models=[BY_NAME["random_ways"]], resamples=0)
    assert between.best.ways_spread > 0.004
    assert between.flip_spread >= 0.9 * between.best.ways_spread
    noise = math.sqrt(between.repeatability ** 2 - between.flip_spread ** 2)   # CapacityEstimate's
    assert noise < between.repeatability - 0.0005
    on_grid = fit_fall(*_random_ways_fall(16.0, 0.001), sigma_point=0.001, models=[BY_NAME["random_ways"]], resamples=0)
    assert on_grid.best.theta == (16.0,) and on_grid.best.ways_spread < 0.1 * between.best.ways_spread


def test_a_generated_gpu_s_l3_does_not_flag_itself_across_ways_counts():
    """Generated GPU 173's L3 (random replacement, 32 ways, hashed; SIMULATED, physics): read at
    32 ways on seed 1 (428 MiB) and 22.6 on seed 2 (441 MiB), each saying 0.4-0.7% before the
    ways' spread counted, so compare flagged the GPU against itself; both within 3% of the truth."""
    import physics_generator
    from sim_runs import result_of
    from detect_caches.reports.compare import compare_results
    runs = [result_of(dict(physics_generator.draw_gpu(173), seed=s)) for s in (1, 2)]
    truth = dict(physics_generator.expected_levels(dict(physics_generator.draw_gpu(173), seed=1)))
    for r in runs:
        l3 = next(lv for lv in r["levels"] if lv["name"] == "L3")
        assert abs(l3["capacity_bytes"] / truth["L3"] - 1) < 0.03
    assert compare_results(*runs).drifted == []
