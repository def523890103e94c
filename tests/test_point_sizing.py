"""A point's launches are sized by plausible bandwidths: a fit that a noise burst flattened (10 PB/s
once on an H200) must not size the re-measurement at millions of load iterations."""
from __future__ import annotations

import numpy as np

from detect_caches.device import DeviceFacts
from detect_caches.measure.launch import LaunchConfig
from detect_caches.measure.point import PointMeter, PointPolicy

H200 = DeviceFacts(name="H200", compute_units=132, sm_clock_max_mhz=1980)
CONFIG = LaunchConfig("shared", 528, 1024, 8, 1, "l2only")


class BurstStub:
    """True speed ``gbs`` plus 4 us per launch; the first ``bursts`` timings are flat (every
    load_iters the same time): a slope near zero, a bandwidth far past any ceiling, a poor fit."""

    def __init__(self, gbs: float, bursts: int = 1):
        self.facts = H200
        self.gbs, self.bursts = gbs, bursts
        self.calls: list[list[int]] = []

    def sm_clock_mhz(self):
        return 1980.0

    def time_launches(self, config, stream_elems, load_iters, repeats):
        self.calls.append(list(load_iters))
        bytes_per_pass = config.programs * stream_elems * 4
        ms = np.array([0.004 + it * bytes_per_pass / (self.gbs * 1e6) for it in load_iters])
        if len(self.calls) <= self.bursts:
            ms = np.full(len(load_iters), ms[-1]) + np.array([0.0, 3e-5, 1e-5, 4e-5])[:len(load_iters)]
        return np.repeat(ms[:, None], repeats, axis=1)


def test_a_flattened_fit_does_not_size_a_huge_remeasurement():
    stub = BurstStub(7300.0, bursts=2)                 # the first timing and its repeat
    meter = PointMeter(stub, PointPolicy())
    meter._guess_gbs["shared"] = 7300.0
    m = meter.measure(CONFIG, 8192, phase="check")      # 4.125 MiB over the device, as on the H200
    assert "remeasured" in m.flag_set
    longest = max(max(c) for c in stub.calls)
    bytes_per_pass = CONFIG.programs * 8192
    # at the true speed the longest launch lasts at most a few times the 0.8 ms re-measure target
    assert longest * bytes_per_pass / (7300.0 * 1e6) < 4.0, longest
    assert abs(m.bandwidth_gbs / 7300.0 - 1) < 0.01


def test_sizing_never_assumes_more_than_the_ceiling():
    meter = PointMeter(BurstStub(7300.0, bursts=0), PointPolicy())
    ceiling = H200.max_plausible_gbs()
    assert ceiling and meter._plausible(1e7) == ceiling * meter.policy.ceiling_slack
    assert meter._plausible(5000.0) == 5000.0


def test_a_burst_that_hit_one_measurement_costs_one_repeat_of_the_same_launches():
    stub = BurstStub(7300.0, bursts=1)
    meter = PointMeter(stub, PointPolicy())
    meter._guess_gbs["shared"] = 7300.0
    m = meter.measure(CONFIG, 8192, phase="coarse")
    assert len(stub.calls) == 2 and stub.calls[0] == stub.calls[1]
    assert "remeasured" in m.flag_set and "poor_r2" not in m.flag_set
    assert abs(m.bandwidth_gbs / 7300.0 - 1) < 0.01 and m.r2 >= 0.999
