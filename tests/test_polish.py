"""The fits' Levenberg-Marquardt (detector.polish) against known optima and scipy's least_squares."""
import numpy as np
from scipy.optimize import least_squares

from detect_caches.detector.polish import polish


def _logistic_problem(seed):
    rng = np.random.default_rng(seed)
    x = np.linspace(-1.0, 1.0, 40)
    truth = np.array([rng.uniform(-0.3, 0.3), rng.uniform(0.03, 0.2)])
    y = 1 / (1 + np.exp((x - truth[0]) / truth[1])) + rng.normal(0, 0.01, x.size)
    return lambda p: 1 / (1 + np.exp((x - p[0]) / p[1])) - y, truth


def test_reaches_the_optimum_least_squares_reaches():
    for seed in range(20):
        fun, truth = _logistic_problem(seed)
        lb, ub = [-1.0, 0.01], [1.0, 0.5]
        ours = polish(fun, [0.0, 0.1], lb, ub)
        ref = least_squares(fun, [0.0, 0.1], bounds=(lb, ub), method="trf", x_scale="jac", ftol=1e-10, xtol=1e-10)
        assert float(ours.fun @ ours.fun) <= float(ref.fun @ ref.fun) * (1 + 1e-4)
        assert np.all(np.abs(ours.x - truth) < [0.02, 0.02])
        # the Jacobian at the answer, as the repeatability's curvature reads it
        assert np.allclose(ours.jac, ref.jac, rtol=0.05, atol=1e-3)


def test_stops_at_a_bound_the_optimum_lies_past():
    for seed in range(10):
        fun, truth = _logistic_problem(seed)
        floor = truth[1] * 1.5          # the best width lies below what the bounds allow
        out = polish(fun, [0.0, 0.3], [-1.0, floor], [1.0, 0.5])
        assert abs(out.x[1] - floor) < 1e-6 * floor and -1.0 <= out.x[0] <= 1.0


def _window(seed, n=60, prior=True):
    from detect_caches.detector.fallwindow import FallWindow
    rng = np.random.default_rng(seed)
    sizes = np.geomspace(1e5, 1e6, n)
    h = 1 / (1 + (sizes / 3.3e5) ** 8)
    y = -np.log10(h / 9000 + (1 - h) / 3000) + rng.normal(0, 0.01, n)
    plateaus = ((np.log10(9000), 0.002), (np.log10(3000), 0.003)) if prior else None
    return FallWindow(sizes, y, None, 0.01, plateaus=plateaus)


def test_the_polish_inner_loop_gives_the_grids_figure():
    # the polish minimises residuals(); the grid ranks by rss(): one figure, two code paths
    from detect_caches.detector.hitmodels import BY_NAME
    for seed in range(12):
        win = _window(seed, prior=seed % 2 == 0)
        rng = np.random.default_rng(100 + seed)
        for name, theta in (("hashed", (rng.uniform(0.02, 0.2),)), ("plru", (0.4, 1.6)), ("cliff_tail", (0.5, 2.0))):
            h = BY_NAME[name].hit(np.exp(win.x - np.log(rng.uniform(2e5, 5e5))), theta)
            e = win.residuals(h)
            rss = win.rss(h[None, :])[0][0]
            assert e.size == win.x.size + 2
            assert np.isclose(float(e @ e), rss, rtol=1e-12, atol=0), (seed, name)
    # a row that is not a fall (every point served whole): no plateau speeds, a flat penalty
    win = _window(1, prior=False)
    assert not np.isfinite(win.rss(np.ones((1, win.x.size)))[0][0])
    assert np.all(win.residuals(np.ones(win.x.size)) == 1.0)


def test_the_models_grids_in_threads_give_the_serial_starts():
    from detect_caches.detector.fallfit import THREADED, _grids
    from detect_caches.detector.fallmodels import fit_model
    from detect_caches.detector.hitmodels import MODELS
    for seed in range(3):
        win = _window(seed)
        assert win.x.size ** 2 >= THREADED     # the threaded path is the one under test
        serial = [fit_model(win, m) for m in MODELS]
        assert repr(_grids(win, MODELS)) == repr(serial)


def test_short_list_medians_are_numpys():
    from detect_caches.detector.curve import bin_medians, median
    rng = np.random.default_rng(5)
    for n in range(1, 12):
        v = rng.normal(size=n).tolist()
        assert median(v) == float(np.median(v))
    keys = rng.integers(0, 6, 40)
    vals = rng.normal(size=40)
    assert bin_medians(keys, vals) == [float(np.median(vals[keys == k])) for k in np.unique(keys)]
