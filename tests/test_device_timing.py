"""In-kernel timing around the kernel (the interpreter cannot run its inline assembly): the
single-wave arithmetic, the refusal, and the conversion of clock readings to bandwidth."""
import numpy as np
import pytest

from detect_caches.device import DeviceFacts
from detect_caches.measure.launch import ClockTiming, LaunchConfig
from detect_caches.measure.occupancy import KernelResources, NotOneWaveError, check_single_wave, programs_per_cu
from detect_caches.measure.point import PointMeter, PointPolicy

H200 = DeviceFacts(name="H200", compute_units=132, threads_per_cu=2048, registers_per_cu=65536,
                   shared_bytes_per_cu=233472, sm_clock_max_mhz=1980)


@pytest.mark.parametrize("warps,regs,shared,expect", [
    (8, 40, 0, 6),        # registers: 40 x 32 = 1280 per warp -> 51 warps -> 6 programs of 8 warps
    (8, 32, 0, 8),        # threads: 2048 / 256
    (4, 32, 0, 16),
    (1, 16, 0, 32),       # the 32-programs-per-SM limit
    (4, 32, 64 * 1024, 3),  # shared memory: 233472 / 65536
    (32, 128, 0, 0),      # not even one fits
])
def test_programs_per_cu(warps, regs, shared, expect):
    assert programs_per_cu(H200, KernelResources(warps, regs, shared)) == expect


def test_single_wave_refusal_names_the_limit():
    assert check_single_wave(H200, 132 * 6, KernelResources(8, 40)) == 6
    with pytest.raises(NotOneWaveError, match=r"793 programs of 8 warps, 40 registers/thread exceed the 792"):
        check_single_wave(H200, 793, KernelResources(8, 40))


class ClockStub:
    """A device whose in-kernel clock says exactly how long the timed phase took."""

    def __init__(self, gbs: float, spread: float = 0.0, gave_up: int = 0):
        self.facts = H200
        self.gbs, self.spread, self.gave_up = gbs, spread, gave_up
        self.calls = []

    def time_in_kernel(self, config, stream_elems, warm_iters, load_iters, repeats):
        self.calls.append((warm_iters, load_iters, repeats))
        ns = config.programs * stream_elems * 4 * load_iters / self.gbs
        longest = ns * (1 + self.spread * np.linspace(-1, 1, repeats))
        return ClockTiming(longest, np.full(repeats, 500.0), 8, "stub", self.gave_up)

    def sm_clock_mhz(self):
        return 1980.0


def test_clock_readings_become_bandwidth():
    dev = ClockStub(9000.0)
    cfg = LaunchConfig("shared", 528, 1024, 8, 1, "l2only")
    m = PointMeter(dev, PointPolicy(timing="device")).measure(cfg, 16 * 1024, phase="coarse")
    assert m.timing == "device" and m.bandwidth_gbs == pytest.approx(9000.0, rel=1e-9)
    warm, iters, repeats = dev.calls[-1]
    assert warm == 2 and repeats == 5
    assert m.load_iters == iters and m.slope_ms == pytest.approx(528 * 16384 / 9e12 * 1e3)
    # the timed phase is sized to the target duration (0.4 ms) within a factor of two
    assert 0.2 < iters * 528 * 16384 / 9e12 * 1e3 < 0.8
    assert m.flags == ""


def test_spread_repeats_are_remeasured_then_flagged_and_a_lost_wave_is_rejected():
    cfg = LaunchConfig("shared", 528, 1024, 8, 1, "l2only")
    noisy = PointMeter(ClockStub(9000.0, spread=0.05), PointPolicy(timing="device")).measure(cfg, 16384, phase="coarse")
    assert {"remeasured", "noisy"} <= noisy.flag_set
    lost = PointMeter(ClockStub(9000.0, gave_up=3), PointPolicy(timing="device")).measure(cfg, 16384, phase="coarse")
    assert "not_one_wave" in lost.flag_set
    from detect_caches.records import REJECTED_FLAGS
    assert "not_one_wave" in REJECTED_FLAGS
