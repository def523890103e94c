"""Capacities on the simulator, where the truth is known: every fall shape, 2-5 levels, NVIDIA
and AMD, 8 seeds each. Every estimate within 3% of the truth and within 2% of the seeds' median;
the built-in profiles reproduce the shapes of the cards they stand for."""
import functools
import math
import statistics

import pytest

from detector.analyze import detect_levels
from measure.records import MeasurementLog
from measure.session import SessionOptions, characterize
from measure.simulated import SimulatedGPU, load_profile, parse_profile
from sim_profiles import ACCURACY_PROFILES, KIB, MIB

SEEDS = range(8)
TRUTH_TOL, SEED_TOL = 0.03, 0.02
SHAPES = {  # the fall shape each profile's levels must show
    ("nv_cliff_tail", "L1"): {"cliff, then partial hits"}, ("nv_cliff_tail", "L2"): {"hashed-set fall"},
    ("nv_plru_split", "L1"): {"decline, then collapse"}, ("nv_plru_split", "L2"): {"hashed-set fall"},
    ("amd_random", "L1"): {"tail", "broad fall"}, ("amd_random", "L2"): {"cliff", "step"},
    ("amd_xcd", "L1"): {"cliff"}, ("amd_xcd", "L2"): {"hashed-set fall"},
    ("rdna_five", "L1"): {"decline, then collapse"}, ("rdna_five", "L2"): {"tail", "broad fall"},
    ("nv_unnamed_l3", "L3"): {"hashed-set fall"}, ("nv_two", "L1"): {"cliff"},
}


def run(spec, *, peaks=False):
    prof = parse_profile(spec)
    log = MeasurementLog(None)
    characterize(SimulatedGPU(prof), log, SessionOptions(peak_budget=24 if peaks else 0))
    return detect_levels(log.records, prof.facts), len(log.records)


@functools.lru_cache(maxsize=None)
def seeds_of(name):
    return [run(dict(ACCURACY_PROFILES[name], seed=seed)) for seed in SEEDS]


@pytest.mark.parametrize("name", list(ACCURACY_PROFILES))
def test_every_capacity_within_3_percent_and_2_percent_of_the_other_seeds(name):
    spec = ACCURACY_PROFILES[name]
    truths = {lv["name"]: lv.get("capacity_bytes") for lv in spec["levels"]}
    estimates: dict[str, list[int]] = {}
    for det, n in seeds_of(name):
        assert n <= 300
        assert [lv.name for lv in det.levels] == list(truths)
        for lv in det.levels:
            if truths[lv.name] is None:
                assert lv.capacity_bytes is None
                continue
            assert abs(lv.capacity_bytes / truths[lv.name] - 1) <= TRUTH_TOL, (lv.name, lv.capacity_bytes / truths[lv.name])
            if (name, lv.name) in SHAPES:
                assert lv.fall_shape in SHAPES[(name, lv.name)], (lv.name, lv.fall_shape)
            estimates.setdefault(lv.name, []).append(lv.capacity_bytes)
    for level, values in estimates.items():
        mid = statistics.median(values)
        assert all(abs(v / mid - 1) <= SEED_TOL for v in values), (level, [v / mid for v in values])


def test_unnamed_level_is_found_whole():
    for det, _ in seeds_of("nv_unnamed_l3"):
        l3 = next(lv for lv in det.levels if lv.name == "L3")
        assert l3.scope == "device" and any("no NVIDIA convention names" in n for n in l3.notes)


def test_repeatability_follows_the_spread_between_seeds():
    """The in-run repeatability (1 sigma, robust) against how much the estimate really moves
    between seeds: the seeds' robust spread (1.48 MAD) is at most 2.5x what the runs said, and the
    runs do not claim more than 4x the spread they show (a figure that inflated would hide drift)."""
    for name in ACCURACY_PROFILES:
        runs = seeds_of(name)
        for level in [lv.name for lv in runs[0][0].levels if lv.capacity_bytes]:
            values = [math.log(next(lv.capacity_bytes for lv in det.levels if lv.name == level)) for det, _ in runs]
            mid = statistics.median(values)
            seen = 1.4826 * statistics.median(abs(v - mid) for v in values)
            said = statistics.median(next(lv.capacity_repeatability for lv in det.levels if lv.name == level)
                                     for det, _ in runs)
            assert seen <= max(2.5 * said, 0.002), (name, level, seen, said)
            assert said <= max(4 * seen, 0.006), (name, level, seen, said)


# -- the built-in profiles -------------------------------------------------------------------

BUILTIN_EXPECT = {
    # profile: {level: (truth, tolerance)}; looser tolerances carry the reason
    "h200": {"L1": (221 * KIB, 1 * KIB / (221 * KIB)), "L2": (None, 0.03)},
    "a100": {"L1": (None, 0.03), "L2": (None, 0.03)},
    "h100": {"L1": (None, 0.03), "L2": (None, 0.03)},
    "v100": {"L1": (None, 0.03), "L2": (None, 0.03)},
    # the L1 sags as 0.95 r^-0.26 (the table's slow decline): its 95% point moves 1% for every
    # 0.25% of noise in a hit rate (the repeatability says ~5%)
    "a40": {"L1": (None, 0.06), "L2": (None, 0.03)},
    "l40": {"L1": (None, 0.03), "L2": (None, 0.03)},
    "rx6900xt": {"L0": (None, 0.03), "L1": (None, 0.03), "L2": (None, 0.03), "Infinity Cache": (None, 0.03)},
    "mi100": {"L1": (None, 0.03), "L2": (None, 0.03)},
    # L1 over L2 is only 1.4x: with 1.5% noise a point's hit rate is uncertain by ~4%, and the 95%
    # point of a slow decline moves by tens of percent (as the real table's: 48 KiB for 32)
    "mi300x": {"L1": (None, 0.40), "L2": (None, 0.03), "Infinity Cache": (None, 0.03)},
}


@pytest.mark.parametrize("name", sorted(BUILTIN_EXPECT))
def test_builtin_profiles_reproduce_their_cards(name):
    prof = load_profile(name)
    log = MeasurementLog(None)
    characterize(SimulatedGPU(prof), log, SessionOptions())
    det = detect_levels(log.records, prof.facts)
    assert [lv.name for lv in det.levels] == [lv.name for lv in prof.levels]
    for level, (truth, tol) in BUILTIN_EXPECT[name].items():
        lv = next(x for x in det.levels if x.name == level)
        truth = truth or prof.true_capacity(level)
        assert abs(lv.capacity_bytes / truth - 1) <= tol, (level, lv.capacity_bytes, truth)


def test_h200_profile_shows_the_cards_shapes():
    prof = load_profile("h200")
    log = MeasurementLog(None)
    characterize(SimulatedGPU(prof), log, SessionOptions())
    det = detect_levels(log.records, prof.facts)
    l1, l2 = det.levels[0], det.levels[1]
    assert l1.fall_shape == "cliff, then partial hits" and 220 * KIB <= l1.capacity_bytes <= 222 * KIB
    assert l2.fall_shape == "hashed-set fall" and 54 * MIB <= l2.capacity_bytes <= 61 * MIB
