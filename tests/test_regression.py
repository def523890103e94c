import numpy as np
import pytest

from detect_caches.measure.regression import fit_load_iterations


def test_exact_line():
    fit = fit_load_iterations([1, 2, 3, 4], [0.01 + 0.1 * k for k in (1, 2, 3, 4)])
    assert fit.slope_ms == pytest.approx(0.1) and fit.intercept_ms == pytest.approx(0.01)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.bandwidth_gbs(10**9) == pytest.approx(10**9 / 1e-4 / 1e9)


def test_noisy_line_has_lower_r2():
    rng = np.random.default_rng(0)
    ms = 0.1 * np.arange(1, 5) + rng.normal(0, 0.05, 4)
    assert fit_load_iterations([1, 2, 3, 4], ms).r2 < 0.999


def test_needs_two_distinct_iteration_counts():
    with pytest.raises(ValueError):
        fit_load_iterations([2, 2], [1.0, 1.1])
    with pytest.raises(ValueError):
        fit_load_iterations([1, 2], [1.0, float("nan")])
