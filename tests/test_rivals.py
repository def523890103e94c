"""A device fall's rival (detector.telling.rival_sizes): the best-scored model whose capacity lies
RIVAL_APART from the leader's is measured where the two part, however little evidence it holds,
until the data there is in; any fall's two leading models that both count in the estimate and
read it CONTEST_APART apart (contest_sizes) likewise. SIMULATED (the hit-rate models,
tests/gpu_generator.py and tests/physics_generator.py)."""
import dataclasses
import math

import numpy as np
import pytest

from detect_caches.detector.fallfit import fit_fall
from detect_caches.detector.hitmodels import BY_NAME, DEVICE_MODELS
from detect_caches.detector.telling import (CLEAR, CONTEST_APART, CONTEST_WEIGHT, GAP, HALF, RIVAL_APART,
                                            CONTEST_MEASURED, RIVAL_MEASURED, RIVAL_SCORE, TELLING_SIZES, contest_sizes,
                                            predicted_log, rival_sizes)

MIB = 2 ** 20
C = 140 * MIB


def _lru_fall(seed: int, noise: float = 0.007):
    """An 8-way LRU L2 with hashed sets at 1.27x over the level below (physics GPU 129's), 40
    points from 0.3 to 4 C, fitted with the device models."""
    rng = np.random.default_rng(seed)
    sizes = C * np.geomspace(0.3, 4.0, 40)
    h = BY_NAME["ways"].hit(sizes / C, (8.0,))
    y = -np.log10(h / 19370 + (1 - h) / 15277) + rng.normal(0, noise, sizes.size)
    return sizes, fit_fall(sizes, y, sigma_point=noise, models=DEVICE_MODELS, resamples=0)


def _led_by(fit, lead, rival, ratio):
    """``fit`` with ``lead`` holding the evidence and ``rival`` ``ratio`` of the leader's weight."""
    others = [dataclasses.replace(f, weight=0.0) for f in fit.fits if f is not lead and f is not rival]
    return dataclasses.replace(fit, fits=[dataclasses.replace(lead, weight=1.0),
                                          dataclasses.replace(rival, weight=ratio), *others])


def _pair(fit):
    """The LRU reading and the random-replacement one (30% apart), from one fit."""
    ways = max((f for f in fit.fits if f.model == "ways"), key=lambda f: f.weight)
    rnd = max((f for f in fit.fits if f.model == "random_ways"), key=lambda f: f.weight)
    assert abs(math.log(ways.capacity_bytes / rnd.capacity_bytes)) > math.log(RIVAL_APART)
    return ways, rnd


def test_sizes_lie_where_the_leader_and_its_rival_part():
    """The rival with e^-7 of the leader's weight (Akaike weights leave it out of the estimate
    and of telling_sizes) is told: sizes where the two curves part by HALF of the most, the most
    among them, GAP apart, at most TELLING_SIZES."""
    sizes, fit = _lru_fall(1)
    ways, rnd = _pair(fit)
    led = _led_by(fit, rnd, ways, math.exp(-7))
    xs = rival_sizes(led, low_bytes=sizes[0], high_bytes=sizes[-1], point_sigma=0.007)
    grid = np.geomspace(sizes[0], sizes[-1], 200)
    part = lambda at: np.abs(predicted_log(ways, np.asarray(at)) - predicted_log(rnd, np.asarray(at)))  # noqa: E731
    most = float(part(grid).max())
    assert most >= CLEAR * 0.007
    assert 0 < len(xs) <= TELLING_SIZES
    assert all(b / a > math.exp(GAP) * 0.999 for a, b in zip(xs, xs[1:]))
    assert np.all(part(xs) >= HALF * most * 0.999) and part(xs).max() >= 0.99 * most


def test_a_settled_rival_or_one_that_agrees_asks_for_nothing():
    """A rival below e^-RIVAL_SCORE/2 of the leader's weight is settled; one whose capacity lies
    within RIVAL_APART reads the level alike; curves that part by less than CLEAR point sigmas
    cannot be told by a few points."""
    sizes, fit = _lru_fall(2)
    ways, rnd = _pair(fit)
    low, high = sizes[0], sizes[-1]
    assert rival_sizes(_led_by(fit, rnd, ways, math.exp(-RIVAL_SCORE / 2) * 0.9), low_bytes=low, high_bytes=high,
                       point_sigma=0.007) == []
    near = dataclasses.replace(ways, capacity_bytes=rnd.capacity_bytes * RIVAL_APART * 0.98)
    assert rival_sizes(_led_by(fit, rnd, near, 0.5), low_bytes=low, high_bytes=high, point_sigma=0.007) == []
    apart = float(np.abs(predicted_log(ways, sizes) - predicted_log(rnd, sizes)).max())
    assert rival_sizes(_led_by(fit, rnd, ways, 0.5), low_bytes=low, high_bytes=high,
                       point_sigma=apart / CLEAR * 1.1) == []


def test_sizes_already_measured_are_not_asked_again():
    """A size where RIVAL_MEASURED points lie within GAP / 2 is left out, so the rounds end where
    the data has been asked (a broad fall crowded with points reads as two levels)."""
    sizes, fit = _lru_fall(3)
    ways, rnd = _pair(fit)
    led = _led_by(fit, rnd, ways, 0.01)
    xs = rival_sizes(led, low_bytes=sizes[0], high_bytes=sizes[-1], point_sigma=0.007)
    assert xs
    held = np.repeat(xs[:1], RIVAL_MEASURED)
    again = rival_sizes(led, low_bytes=sizes[0], high_bytes=sizes[-1], point_sigma=0.007, measured=held)
    assert xs[0] not in again and set(again) <= set(xs)
    fewer = rival_sizes(led, low_bytes=sizes[0], high_bytes=sizes[-1], point_sigma=0.007, measured=held[1:])
    assert fewer == xs


def test_two_leading_models_apart_are_told_where_they_part():
    """Two models that both count in the estimate, their capacities CONTEST_APART or more apart:
    sizes where their curves part (the estimate between them moves with the seed otherwise).
    One that counts for too little, or reads the level alike, asks for nothing."""
    sizes, fit = _lru_fall(4)
    ways, rnd = _pair(fit)
    low, high = sizes[0], sizes[-1]
    xs = contest_sizes(_led_by(fit, rnd, ways, 0.6), low_bytes=low, high_bytes=high, point_sigma=0.007)
    part = lambda at: np.abs(predicted_log(ways, np.asarray(at)) - predicted_log(rnd, np.asarray(at)))  # noqa: E731
    most = float(part(np.geomspace(low, high, 200)).max())
    assert 0 < len(xs) <= TELLING_SIZES and np.all(part(xs) >= HALF * most * 0.999)
    assert contest_sizes(_led_by(fit, rnd, ways, CONTEST_WEIGHT * 0.9), low_bytes=low, high_bytes=high,
                         point_sigma=0.007) == []
    alike = dataclasses.replace(ways, capacity_bytes=rnd.capacity_bytes * CONTEST_APART * 0.99)
    assert contest_sizes(_led_by(fit, rnd, alike, 0.6), low_bytes=low, high_bytes=high, point_sigma=0.007) == []
    # a close contest is noise's to decide: it asks until CONTEST_MEASURED points lie at each size
    assert CONTEST_MEASURED > RIVAL_MEASURED
    assert contest_sizes(_led_by(fit, rnd, ways, 0.6), low_bytes=low, high_bytes=high, point_sigma=0.007,
                         measured=np.repeat(xs, CONTEST_MEASURED - 1)) == xs
    assert contest_sizes(_led_by(fit, rnd, ways, 0.6), low_bytes=low, high_bytes=high, point_sigma=0.007,
                         measured=np.repeat(xs, CONTEST_MEASURED)) == []


@pytest.mark.parametrize("gpu,seed", [(190, 2), (263, 4)])
def test_a_contest_between_a_cliff_and_random_replacement_is_measured(gpu, seed):
    """Generated GPUs whose L1 two models read 3-5% apart, the estimate between them: a random
    replacement tail -3.0% (GPU 190 seed 2) and against a cliff onto partial hits -3.3% (GPU 263
    seed 4) before the points where they part were measured; within 3% with them."""
    import gpu_generator
    from detect_caches.measure.session import SessionOptions
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    from detect_caches.records import MeasurementLog
    spec = dict(gpu_generator.draw_gpu(gpu), seed=seed)
    _, det, _ = sweep_and_detect(SimulatedGPU(parse_profile(spec)), MeasurementLog(None), SessionOptions(peak_budget=0))
    truth = dict(gpu_generator.expected_levels(spec))
    l1 = next(lv for lv in det.levels if lv.name == "L1")
    assert abs(l1.capacity_bytes / truth["L1"] - 1) < 0.03, (l1.capacity_bytes, truth["L1"])


def test_a_broad_page_coloured_fall_is_one_level():
    """Physics GPU 155 seed 2: a page-coloured 64 KiB-page LRU Infinity Cache whose broad fall the
    rounds crowded with points read as two levels (-67% and a phantom L4); with its contest told
    where the two leading models part, one level within 5% (SIMULATED: -1.6%)."""
    found, truth = _physics(155, 2)
    assert list(found) == list(truth)
    assert abs(found["Infinity Cache"] / truth["Infinity Cache"] - 1) < 0.05, found


def _physics(gpu: int, seed: int):
    import physics_generator
    from detect_caches.measure.session import SessionOptions
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    from detect_caches.records import MeasurementLog
    spec = dict(physics_generator.draw_gpu(gpu), seed=seed)
    _, det, _ = sweep_and_detect(SimulatedGPU(parse_profile(spec)), MeasurementLog(None), SessionOptions(peak_budget=0))
    return {lv.name: lv.capacity_bytes for lv in det.levels}, dict(physics_generator.expected_levels(spec))


@pytest.mark.parametrize("gpu,seed,level,within", [
    (206, 2, "L2", 0.05),    # split page-coloured 16-way LRU: -46.7% before
    (173, 1, "L2", 0.05),    # split random 24-way with a 0.44x far half: +29.9% ...
    (173, 2, "L2", 0.05),    # ... and +42.2%
    (5, 1, "L4", 0.05),      # random page-coloured 12-way, the last fall: +39.7%
    # held out (seeds 3 and 4, not the benchmark's): a random hashed 16-way L2 at 1.25x, +23.4%;
    # the split random L2 again, -22.3%; two L2s read at 6.1 and 9.4 times their size, the L3
    # lost (a random 16-way L2 at 1.24x, 0.5% noise; a random page-coloured one at 1.25x, 2.4%)
    # (173 seed 4: -3.9% until 49909d2, -7.6% since: which sizes its rounds measured moved; 235
    # seed 3: -4.7% until 16723eb, -7.8% since, the L3 below read less the L2's tail)
    # (46 seed 4: +18.9% until 16723eb, +0.9% since)
    (235, 3, "L2", 0.10), (173, 4, "L2", 0.10), (46, 4, "L2", 0.10),
    # read past 20% with the rival rounds alone, within it once their two leading models were
    # measured where they part (contest_sizes; SIMULATED, BENCHMARKS.md 2026-12-05): a random
    # page-coloured 16-way L2 at 1.25x under 2.4% noise read as 8-way LRU, +32.6% -> +17.0%; since
    # its fall is measured again for precision (detector.precision) +24.6% on seed 2 and +10.2%
    # on seed 4: where its points lie flipped its reading; +3.8% and +0.8% since the fall is
    # weighed with the L3's below it (detector.pairfit) ...
    (236, 4, "L2", 0.05), (236, 2, "L2", 0.05),
    # ... and a random page-coloured 16-way Infinity Cache, +28.6% -> +0.4%
    (284, 1, "Infinity Cache", 0.05),
    # a random page-coloured L2 at its nearest twin (benchmarks/twins.py), +24.8% (+10.7% before),
    # -0.2% since its fall is measured again for precision (tests/test_precision.py)
    (289, 1, "L2", 0.05)])
def test_physics_gpus_that_read_past_20_percent_before(gpu, seed, level, within):
    """Physics GPUs whose device fall was read by a model 20-40% off (or lost a level) while its
    rival, left out by the evidence, was never measured where the two part: every level found,
    and within 5% (10-20% where a 1.25x random fall's noise leaves it)."""
    found, truth = _physics(gpu, seed)
    assert list(found) == list(truth)
    assert abs(found[level] / truth[level] - 1) < within, (found[level], truth[level])
