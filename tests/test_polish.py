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
