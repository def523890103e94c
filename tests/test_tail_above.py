"""A fall's points lose the tail of the fall above (detector.above_tail): a random-replacement
L0 whose hits at 3-4x its size slope the L1's plateau no longer reads as the L1's own decline.
The runs it mends are pinned at the end (SIMULATED)."""
import math
from types import SimpleNamespace

import numpy as np
import pytest

from accuracy import run_one   # benchmarks/, on the path from conftest
from detect_caches.detector.above_tail import without_tail_above
from detect_caches.detector.curve import Curve
from detect_caches.detector.fallmodels import ModelFit
from detect_caches.detector.hitmodels import hit_curve

B0, B1, B2 = 98000.0, 13000.0, 7400.0    # GB/s: an L0 over an L1 over an L2
C0, C1 = 24576.0, 180224.0


def _curve(model="random", sizes=None):
    sizes = np.geomspace(8192, 600000, 80) if sizes is None else sizes
    h0 = hit_curve(model, sizes / C0, ())
    h1 = (sizes <= C1).astype(float)
    inv = h0 / B0 + (1 - h0) * (h1 / B1 + (1 - h1) / B2)
    n = sizes.size
    return Curve("private", sizes, 1.0 / inv, np.ones(n), sizes, np.zeros(n, bool))


def _above(model="random", capacity=C0, theta=()):
    best = ModelFit(model, theta, capacity, 0.0, -math.log10(1 / B0), -math.log10(1 / B1), weight=1.0)
    return SimpleNamespace(estimate=SimpleNamespace(fit=SimpleNamespace(best=best)))


def test_the_tail_above_is_taken_out_exactly():
    curve = _curve()
    out = without_tail_above(curve, _above(), 2 * C0, C1, 0.004)
    x = curve.size_bytes
    plateau = (x >= 2 * C0) & (x <= C1)
    assert curve.bandwidth_gbs[plateau].max() > 1.08 * B1          # the tail lifted it 8% and more
    np.testing.assert_allclose(out.bandwidth_gbs[plateau], B1, rtol=1e-9)
    np.testing.assert_allclose(out.bandwidth_gbs[x > C1], B2, rtol=1e-9)
    np.testing.assert_array_equal(out.bandwidth_gbs[x < 2 * C0], curve.bandwidth_gbs[x < 2 * C0])


@pytest.mark.parametrize("case", ["no fit", "ends past the start", "tail under the noise", "a shelf that only shifts"])
def test_the_curve_is_left_alone(case):
    """... and a fitted shelf of partial hits that lies over the whole plateau: it would lower the
    plateau, not flatten it, and is as well that level's own speed."""
    curve = _curve("lru" if case == "a shelf that only shifts" else "random")
    above = {"no fit": SimpleNamespace(estimate=SimpleNamespace(fit=None)),
             "ends past the start": _above(capacity=3 * C0),
             "tail under the noise": _above(),
             "a shelf that only shifts": _above("cliff_shelf", theta=(0.25, 20.0))}[case]
    start = 2 * C0 if case != "tail under the noise" else 6 * C0    # 6x: the tail lifts under 1.3%
    sigma = 0.004 if case != "tail under the noise" else 0.01
    assert without_tail_above(curve, above, start, C1, sigma) is curve
    if case == "a shelf that only shifts":     # ... though it lifts every point of it by 10%
        h = hit_curve("cliff_shelf", np.array([2.0, 6.0]), (0.25, 20.0))
        assert np.all(np.log10(1 / (h * B1 / B0 + 1 - h)) > math.log10(1.1))


@pytest.mark.parametrize("case", ["starts inside the fall above", "a split level's fall"])
def test_a_fall_that_is_no_tail_is_left_alone(case):
    """A plateau that starts where the level above still serves half the data (taking out only
    the points past that share would leave a step), and a split level's fall above (its far
    half is a level's speed, not hits that fade): both would change the curve without their guard."""
    curve = _curve()
    if case == "starts inside the fall above":
        start, above = 1.15 * C0, _above()
        assert hit_curve("random", np.array([1.15]), ())[0] > 0.5
    else:
        start, above = 2 * C0, _above("split", theta=(0.35,))
        assert without_tail_above(curve, _above("hashed", theta=(0.35,)), start, C1, 0.004) is not curve
    assert without_tail_above(curve, above, start, C1, 0.004) is curve


def test_a_tail_under_two_sigmas_is_left_alone_however_many_points_show_it():
    """Dense points under a tail that lifts the first by 1.9 sigmas: the plateau would be flatter
    by more than FLATTER squared sigmas, but no single point shows the tail."""
    from detect_caches.detector.above_tail import FLATTER
    from detect_caches.detector.inside import INSIDE_OCTAVES
    sizes = np.geomspace(2.5 * C0, 0.8 * C1, 400)
    curve = _curve(sizes=sizes)
    h = hit_curve("random", sizes / C0, ())
    lift = np.log10(1 / (h * B1 / B0 + 1 - h))
    sigma = lift.max() / 1.9
    near, far = INSIDE_OCTAVES
    part = lift[sizes <= min(C1 / 2 ** near, sizes[0] * 2 ** far)]
    assert np.sum((part - part.mean()) ** 2) > FLATTER * sigma ** 2
    assert without_tail_above(curve, _above(), sizes[0], C1, sigma) is curve
    assert without_tail_above(curve, _above(), sizes[0], C1, lift.max() / 2.1) is not curve


def test_a_random_l0s_tail_is_not_the_l1s_decline():
    """Physics GPU 2 seed 3: a 64-way random L0 (24 KiB, 7.4x the L1's speed) whose hits slope
    the L1's plateau from 52 to 120 KiB; the L1 (174.25 KiB, 4-way LRU) read as a pseudo-LRU
    decline from 67.5 KiB, -61%."""
    r = run_one((2, 3, "physics_generator"))
    got, truth = next(f[1] for f in r["found"] if f[0] == "L1"), dict(r["truth"])["L1"]
    assert abs(got / truth - 1) <= 0.03, (got, truth)

