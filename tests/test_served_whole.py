"""An onset model's C, the last size served whole, never lies past a run of points clearly
missing in the upper level (detector.fallwindow.served_whole): a cliff onto partial hits whose
later bump reads near the upper speed, not a lone dip, a slow start or a fast first point. The
fits on real runs this mends are in tests/test_h200_example.py (three H100s' L1s)."""
import math

import numpy as np

from detect_caches.detector.fallwindow import FallWindow

HI, LO = 33000.0, 8000.0     # GB/s: an L1 over an L2
PLATEAUS = ((math.log10(HI), 0.004), (math.log10(LO), 0.004))


def _window(gbs, sigma=0.004):
    sizes = 100.0 + 10.0 * np.arange(len(gbs))
    return FallWindow(sizes, np.log10(np.asarray(gbs, float)), None, sigma, plateaus=PLATEAUS)


def test_a_run_of_slow_points_ends_what_an_onset_may_serve():
    gbs = [HI] * 7 + [28500, 28000, 28700, 28400, 31500, 23000]
    served = _window(gbs).served_whole()
    assert served[:10].tolist() == [True] * 9 + [False]   # the third slow point in a row ends it
    assert not served[10:].any()                           # ... and a bump back, alone, does not reopen it


def test_partial_hits_between_speeds_neither_end_a_run_nor_reopen_it():
    """Under 0.01 noise: 15% slow is missing, 1% at speed, 4% between."""
    states = _window([HI] * 5 + [28000, HI * 0.96, 28000, 28000], sigma=0.01).speed_states()
    assert states.tolist() == [1] * 5 + [-1, 0, -1, -1]
    served = _window([HI] * 5 + [28000, HI * 0.96, 28000, 28000] + [HI * 0.96] * 3, sigma=0.01).served_whole()
    assert served[:7].all() and not served[8:].any()       # the run counts across the partial hit, and
                                                           # partial hits after it are not "back"


def test_a_lone_dip_a_slow_start_and_a_fast_first_point_do_not():
    dip = [HI] * 5 + [28000, 28000] + [HI] * 5             # two slow points: a dip, not a fall
    assert _window(dip).served_whole().all()
    start = [24000, 25000, 26000] + [HI] * 9               # a slow start is the reference, not a miss
    assert _window(start).served_whole().all()
    fast = [HI * 1.1] + [HI] * 11                          # one fast point is no reference of its own
    assert _window(fast).served_whole().all()
    back = [HI] * 3 + [27000] * 3 + [HI] * 6               # a run, then two points back: served again
    served = _window(back).served_whole()
    assert not served[5] and served[7:].all()


def test_misses_are_judged_in_hits_not_bandwidth():
    """3% slow at a 4x ratio is 1% of the hits gone: under SERVED_MISSES, however many sigmas."""
    slow = [HI] * 5 + [HI * 0.97] * 4
    assert (_window(slow, sigma=0.002).speed_states()[5:] == 0).all()
    assert _window(slow, sigma=0.002).served_whole().all()
