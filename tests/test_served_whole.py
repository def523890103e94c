"""An onset model's C, the last size served whole, never lies past a run of points clearly
missing in the upper level (detector.fallwindow.served_whole): a cliff onto partial hits whose
later bump reads near the upper speed, not a lone dip or a slow start. The fits on real runs
this mends are in tests/test_h200_example.py (three H100s' L1s)."""
import math

import numpy as np

from detect_caches.detector.fallwindow import FallWindow

HI, LO = 33000.0, 8000.0     # GB/s: an L1 over an L2
PLATEAUS = ((math.log10(HI), 0.004), (math.log10(LO), 0.004))


def _window(sizes, gbs, sigma=0.004):
    return FallWindow(np.asarray(sizes, float), np.log10(np.asarray(gbs, float)), None, sigma,
                      plateaus=PLATEAUS)


def test_a_run_of_slow_points_ends_what_an_onset_may_serve():
    sizes = [100, 120, 140, 160, 180, 200, 221, 222, 224, 226, 230, 241, 252]
    gbs = [HI] * 7 + [28500, 28000, 28700, 28400, 31500, 23000]
    served = _window(sizes, gbs).served_whole()
    assert served[:10].tolist() == [True] * 9 + [False]   # the third slow point in a row ends it
    assert not served[10:].any()                           # ... and a bump back, alone, does not reopen it


def test_a_lone_dip_and_a_slow_start_do_not():
    sizes = [100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 210]
    dip = [HI] * 5 + [28000, 28000] + [HI] * 5             # two slow points: a dip, not a fall
    assert _window(sizes, dip).served_whole().all()
    start = [24000, 25000, 26000] + [HI] * 9               # a slow start is the reference, not a miss
    assert _window(sizes, start).served_whole().all()
    back = [HI] * 3 + [27000] * 3 + [HI] * 2 + [HI] * 4    # a run, then two points back: served again
    served = _window(sizes, back).served_whole()
    assert not served[5] and served[7:].all()

