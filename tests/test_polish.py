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
    # rows that are no fall (every point served whole: no plateau speeds; hits rising with size:
    # the lower level as fast; one hit rate everywhere): a flat penalty in the polish and an
    # infinite figure in the grid; with the plateaus' prior holding the speeds, one finite figure
    for prior in (False, True):
        win = _window(1, prior=prior)
        for h in (np.ones(win.x.size), np.linspace(0.0, 1.0, win.x.size), np.full(win.x.size, 0.5)):
            rss, e = win.rss(h[None, :])[0][0], win.residuals(h)
            if prior:
                assert np.isclose(float(e @ e), rss, rtol=1e-12, atol=0)
            else:
                assert not np.isfinite(rss) and np.all(e == 1.0)


def test_the_models_grids_in_threads_give_the_serial_starts():
    from detect_caches.detector.fallfit import THREADED, _grids
    from detect_caches.detector.fallmodels import fit_model
    from detect_caches.detector.hitmodels import MODELS
    for seed in range(3):
        win = _window(seed)
        assert win.x.size ** 2 >= THREADED     # the threaded path is the one under test
        serial = [fit_model(win, m) for m in MODELS]
        threaded = _grids(win, MODELS)
        assert [len(a) for a in threaded] == [len(b) for b in serial]
        for a, b in zip((f for fits in threaded for f in fits), (f for fits in serial for f in fits)):
            assert (a.model, a.theta, a.capacity_bytes, a.rss, a.hi_log, a.lo_log) == \
                (b.model, b.theta, b.capacity_bytes, b.rss, b.hi_log, b.lo_log)
            assert all(np.array_equal(p, q) for p, q in zip(a.profile, b.profile))


def _wide_fit():
    from detect_caches.detector.fallfit import fit_fall
    win = _window(7)
    return fit_fall(win.sizes, win.y, sigma_point=0.01, resamples=0).capacity_bytes


def test_a_child_forked_after_a_fit_fits_too():
    """The grids' thread pool is the process's: a child forked after its parent fitted a wide fall
    inherits the pool without its workers, and waited on them for ever."""
    import multiprocessing
    parent = _wide_fit()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_wide_fit).get(timeout=120) == parent


def test_short_list_medians_are_numpys():
    from detect_caches.detector.curve import bin_medians, median
    rng = np.random.default_rng(5)
    for n in range(1, 12):
        v = rng.normal(size=n).tolist()
        assert median(v) == float(np.median(v))
    keys = rng.integers(0, 6, 40)
    vals = rng.normal(size=40)
    assert bin_medians(keys, vals) == [float(np.median(vals[keys == k])) for k in np.unique(keys)]
