"""benchmarks/spread_limit.py's bounds on a made fall: the three bounds in order, the loosest the
information limit's own (benchmarks/information_limit.py), halving the noise's reach as the points
quadruple, and none for a cliff (an onset at a measured size has no smooth bound)."""
import math
from types import SimpleNamespace

import numpy as np
import pytest


def _fit(model: str, theta: tuple, sigma: float = 0.004):
    best = SimpleNamespace(model=model, theta=theta, capacity_bytes=2.0 ** 20, hi_log=3.9, lo_log=3.6)
    return SimpleNamespace(best=best, sigma=sigma)


def test_the_three_bounds_are_ordered_and_the_loosest_is_the_information_limits():
    from information_limit import bound
    from spread_limit import _bounds
    sizes = np.geomspace(0.5, 3.0, 40) * 2.0 ** 20
    all_free, speeds_known, c_alone = _bounds(_fit("hashed", (0.06,)), sizes)
    assert all_free > speeds_known > c_alone > 0
    params = np.array([0.0, 3.9, 3.6, 0.06])
    assert all_free == pytest.approx(bound("hashed", params, sizes / 2.0 ** 20, 0.004), rel=1e-6)


def test_four_times_the_points_halve_every_bound():
    from spread_limit import _bounds
    sizes = np.geomspace(0.5, 3.0, 30) * 2.0 ** 20
    once = _bounds(_fit("ways", (16.0,)), sizes)
    four = _bounds(_fit("ways", (16.0,)), np.repeat(sizes, 4))
    assert all(math.isclose(a / b, 2.0, rel_tol=1e-6) for a, b in zip(once, four))


def test_a_cliff_has_no_smooth_bound():
    from spread_limit import _bounds
    assert _bounds(_fit("lru", ()), np.geomspace(0.5, 3.0, 30) * 2.0 ** 20) is None
