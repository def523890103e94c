"""Falls that noise keeps from repeating are measured again (detector.precision,
pipeline.sweep_detect's precision rounds); one size's repeats are centred by a trimmed mean
(detector.curve._center); a last plateau's tail stays in the fall before it (detector.levels).
SIMULATED (tests/physics_generator.py: cache physics written apart from the simulator)."""
import dataclasses

import numpy as np
import pytest

import physics_generator as pg
from detect_caches.detector.curve import _center
from detect_caches.detector.precision import PRECISE, noisy_falls
from detect_caches.measure.session import SessionOptions
from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile, parse_profile
from detect_caches.pipeline import sweep_detect
from detect_caches.records import MeasurementLog


def _run(k: int, seed: int):
    device = SimulatedGPU(parse_profile(dict(pg.draw_gpu(k), seed=seed)))
    log = MeasurementLog(None)
    session, detection, _ = sweep_detect.sweep_and_detect(device, log, SessionOptions(peak_budget=0))
    return session, detection


def _level(detection, name):
    return next(lv for lv in detection.levels if lv.name == name)


def _truth(k: int, name: str) -> float:
    """The level's own bytes (a per-XCD L2's: one XCD's, as the level reports it)."""
    return next(lv for lv in pg.draw_gpu(k)["levels"] if lv["name"] == name)["capacity_bytes"]


def test_center_keeps_a_median_of_three_and_trims_four_or_more():
    assert _center([5.0]) == 5.0
    assert _center([1.0, 2.0]) == 1.5
    assert _center([1.0, 2.0, 100.0]) == 2.0
    assert _center([100.0, 1.0, 3.0, 2.0]) == 2.5          # 1 and 100 trimmed
    assert _center([0.0, 10.0, 10.0, 10.0, 1e6]) == 10.0


def test_center_of_five_repeats_is_steadier_than_their_median():
    """What the precision rounds' repeats are for: of five readings, the trimmed mean's scatter is
    well under the median's (about 0.8 of it for Gaussian noise), an outlier in each kept out."""
    rng = np.random.default_rng(7)
    draws = rng.normal(0.0, 1.0, size=(4000, 5))
    draws[:, 0] += 50.0 * (rng.random(4000) < 0.05)          # 5% outliers
    trimmed = np.array([_center(list(d)) for d in draws])
    medians = np.median(draws, axis=1)
    assert trimmed.std() < 0.9 * medians.std()
    assert abs(trimmed.mean()) < 0.1


@pytest.mark.parametrize("seed", [1, 2])
def test_a_noisy_low_ratio_device_fall_repeats(seed):
    """Physics GPU 289's L2 (random replacement in page-coloured sets, 1.2x over HBM, 2% noise)
    read +24.8% on seed 1 and -0.2% on seed 2 before the precision rounds: both within 1% now, and
    no per-SM/CU fall or precise device fall is asked for again."""
    session, detection = _run(289, seed)
    assert abs(_level(detection, "L2").capacity_bytes / _truth(289, "L2") - 1) < 0.01
    assert session.method["interval_refine"]["measurements"] > 0
    for sweep, sizes in noisy_falls(detection):
        assert sweep == "shared" and sizes
    asked = {round(s) for _, sizes in noisy_falls(detection, above=0.0) for s in sizes}
    noisy = {round(s) for _, sizes in noisy_falls(detection) for s in sizes}
    assert noisy <= asked


def test_the_precision_rounds_are_what_settles_it(monkeypatch):
    """The same run without them: physics GPU 289 seed 1's L2 more than 10% off."""
    monkeypatch.setattr(sweep_detect, "PRECISION_ROUNDS", 0)
    _, detection = _run(289, 1)
    assert abs(_level(detection, "L2").capacity_bytes / _truth(289, "L2") - 1) > 0.10


def test_a_random_tail_reaching_the_sweeps_end_keeps_its_memory_floor():
    """Physics GPU 153 seed 2's Infinity Cache (random replacement, 64 KiB page colouring, 4.4x over
    DRAM): the DRAM plateau's core starts inside the tail, its median speed sits over the floor the
    sweep ends on, and those last points were cut as a "next fall" past the last plateau; the fall
    then read as an LRU one at +36% once measured again. Within 1% now."""
    _, detection = _run(153, 2)
    assert abs(_level(detection, "Infinity Cache").capacity_bytes / _truth(153, "Infinity Cache") - 1) < 0.01
    assert PRECISE < 0.01


def test_the_readings_are_analysed_once_after_them_all(monkeypatch):
    """Every size of the noisy fall is read PRECISION_ROUNDS more times, then one analysis (one
    pass on the run's path, done-when 6: an analysis after each round cost up to four)."""
    from detect_caches.detector import analyze
    from detect_caches.measure import session as measure_session
    events, refine, detect = [], measure_session.refine_intervals, analyze.detect_levels

    def refining(*args, **kw):
        events.append("reading" if "repeats" in kw else "refining")
        return refine(*args, **kw)

    def detecting(*args, **kw):
        events.append("analysis")
        return detect(*args, **kw)
    monkeypatch.setattr(measure_session, "refine_intervals", refining)
    monkeypatch.setattr(analyze, "detect_levels", detecting)
    device = SimulatedGPU(parse_profile(dict(pg.draw_gpu(289), seed=1)))
    opts = SessionOptions(peak_budget=0, budget=1000)      # room for every round
    sweep_detect.sweep_and_detect(device, MeasurementLog(None), opts)
    first = events.index("reading")
    readings = events[first:-1]
    assert set(readings) == {"reading"} and events[-1] == "analysis"
    assert len(readings) in (sweep_detect.PRECISION_ROUNDS, 2 * sweep_detect.PRECISION_ROUNDS)


def _builtin_run(name: str, seed: int, budget: int = 400):
    device = SimulatedGPU(dataclasses.replace(load_profile(name), seed=seed))
    log = MeasurementLog(None)
    _, detection, _ = sweep_detect.sweep_and_detect(device, log, SessionOptions(peak_budget=0, budget=budget))
    return detection, log


def test_a_noisy_per_cu_decline_is_read_again_at_its_start():
    """The built-in mi300x's L1 (a pseudo-LRU decline 1.4x over the L2, 1.5% noise) read +5.5% on
    seed 3 with its fall measured once: its plateau and its start, read again after the device
    falls, place it within 3% (SIMULATED)."""
    detection, log = _builtin_run("mi300x", 3)
    l1 = _level(detection, "L1")
    assert abs(l1.capacity_bytes / 32768 - 1) <= 0.03
    repeats = {}
    for r in log.records:
        if r.sweep == "private" and r.phase == "refine":
            repeats[r.working_set_bytes] = repeats.get(r.working_set_bytes, 0) + 1
    near = [n for size, n in repeats.items() if 32768 / 4 <= size <= 32768 * 1.15]
    assert len(near) >= 8 and sorted(near)[len(near) // 2] >= sweep_detect.PRECISION_ROUNDS


def test_a_per_cu_fall_asks_its_plateau_and_start_only():
    """What noisy_falls asks of a per-SM/CU fall: sizes of its sweep between PLATEAU_OCTAVES under
    the capacity and PAST_C over it, none of the collapse past; and nothing where it is precise."""
    from detect_caches.detector.precision import PAST_C, PLATEAU_OCTAVES
    detection, _ = _builtin_run("mi300x", 3, budget=250)
    l1, pr = _level(detection, "L1"), detection.sweeps["private"]
    asked = noisy_falls(detection, sweep="private", above=0.0)
    assert asked and all(sweep == "private" for sweep, _ in asked)
    sizes = asked[0][1]
    assert min(sizes) >= l1.capacity_bytes / 2 ** PLATEAU_OCTAVES * (1 - 1e-9)
    assert max(sizes) <= l1.capacity_bytes * PAST_C * (1 + 1e-9)
    assert set(sizes) <= {float(x) for x in pr.curve.size_bytes}
    assert noisy_falls(detection, sweep="private", above=1.0) == []


def test_device_falls_come_first_on_the_budget(monkeypatch):
    """A per-SM/CU fall's readings take only what the device falls' readings left: the shared
    sweep's requests are served before the private sweep's, each its own rounds."""
    from detect_caches.measure import session as measure_session
    order, refine = [], measure_session.refine_intervals

    def refining(session, requests, *args, **kw):
        if "repeats" in kw:
            order.append(tuple(sorted({sweep for sweep, _ in requests})))
        return refine(session, requests, *args, **kw)
    monkeypatch.setattr(measure_session, "refine_intervals", refining)
    from detect_caches.detector import precision
    asking = precision.noisy_falls
    monkeypatch.setattr(precision, "noisy_falls", lambda det, **kw: asking(det, **kw, above=0.0))  # every fall asks
    _builtin_run("mi300x", 3, budget=1000)
    assert order and all(len(sweeps) == 1 for sweeps in order)
    assert order == sorted(order, key=lambda sweeps: sweeps != ("shared",))
    assert ("private",) in order and ("shared",) in order
