"""Capacities on the simulator, where the truth is known: every fall shape, 2-5 levels, NVIDIA
and AMD, 8 seeds each, through the tool's own path (sweeps, analysis, more points where a
capacity is still uncertain, analysis again). Every estimate within 3% of the truth and within 2%
of the seeds' median; the built-in profiles reproduce the cards they stand for. (Generated GPUs,
drawn from wide ranges, are in tests/test_generated_gpus.py.)"""
import dataclasses
import functools
import math
import statistics

import pytest

from detect_caches.records import MeasurementLog
from detect_caches.measure.session import SessionOptions
from detect_caches.measure.sim.profile import BUILTIN_PROFILES
from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile, parse_profile
from detect_caches.pipeline.api import sweep_and_detect
from sim_profiles import ACCURACY_PROFILES, KIB, MIB

SEEDS = range(8)
TRUTH_TOL, SEED_TOL = 0.03, 0.02
CLIFF = {"cliff", "cliff, then partial hits", "cliff, sets overflowing one by one", "step"}
RANDOM = {"random-replacement tail", "random replacement, hashed sets"}
SHAPES = {  # the fall shape each profile's levels must show (the best-supported model's)
    ("nv_cliff_tail", "L1"): {"cliff, then partial hits"}, ("nv_cliff_tail", "L2"): {"hashed-set fall"},
    ("nv_plru_split", "L1"): {"decline, then collapse"}, ("nv_plru_split", "L2"): {"hashed-set fall"},
    ("amd_random", "L1"): RANDOM, ("amd_random", "L2"): CLIFF,
    ("amd_xcd", "L1"): CLIFF, ("amd_xcd", "L2"): {"hashed-set fall"},
    ("rdna_five", "L1"): {"decline, then collapse"}, ("rdna_five", "L2"): RANDOM,
    ("nv_unnamed_l3", "L3"): {"hashed-set fall"}, ("nv_two", "L1"): CLIFF,
}


def run(spec, *, peaks=False):
    prof = parse_profile(spec)
    log = MeasurementLog(None)
    _, det, _ = sweep_and_detect(SimulatedGPU(prof), log, SessionOptions(peak_budget=24 if peaks else 0))
    return det, len(log.records)


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
            assert said <= max(4 * seen, 0.01), (name, level, seen, said)


# -- the built-in profiles -------------------------------------------------------------------

BUILTIN_TOL = 0.03
# Known misses, measured (BENCHMARKS.md, "Capacities on generated GPUs"), each with its cause;
# every other profile and level is held to BUILTIN_TOL on every seed
KNOWN_MISSES = {
    # L1 only 1.4x faster than the L2 and a pseudo-LRU decline: the decline's start, which places
    # C, moves 1.3% in bandwidth under 1.5% noise. Read again (detector.precision), seeds 1-40
    # (benchmarks/accuracy.py's runs, peak probes off):
    # within 3% on 31, rms 2.7%, worst +7.8% (26, rms 4.0%, worst -14.1% before; -7.8% while its
    # sag could pass for a level: test_a_pseudo_lru_sag_is_read_with_its_fall)
    ("mi300x", "L1"): 0.06,
}


@pytest.mark.parametrize("name", sorted(BUILTIN_PROFILES))
def test_builtin_profiles_reproduce_their_cards(name):
    for seed in (1, 2):
        prof = dataclasses.replace(load_profile(name), seed=seed)
        det, _ = run_profile(prof)
        assert [lv.name for lv in det.levels] == [lv.name for lv in prof.levels]
        for lv in det.levels:
            truth = prof.true_capacity(lv.name)
            if truth:
                tol = KNOWN_MISSES.get((name, lv.name), BUILTIN_TOL)
                assert abs(lv.capacity_bytes / truth - 1) <= tol, (seed, lv.name, lv.capacity_bytes, truth)


def test_a_short_level_whose_plateau_ends_in_the_next_fall_is_found():
    """mi210 seed 4: the L3's plateau (1.1 octaves, 1.15x slower than the L2) ends in three
    refined points of its own fall, and a bin of them read as a slope: the L3 was lost and the
    L2 read +127% (the L3's size)."""
    prof = dataclasses.replace(load_profile("mi210"), seed=4)
    det, _ = run_profile(prof)
    assert [lv.name for lv in det.levels] == ["L1", "L2", "L3", "HBM"]
    assert abs(det.levels[2].capacity_bytes / prof.true_capacity("L3") - 1) <= BUILTIN_TOL


def test_a_pseudo_lru_sag_is_read_with_its_fall():
    """mi300x seed 2: a third refining round made the L1's sag (42-76 KiB, 0.85 octaves falling
    steadily before the collapse) a level, and the L1 was read from the step above it alone: 29.5 KiB
    (-7.8%), a random-replacement tail. Read as one fall now (+3.1%: its known miss's noise)."""
    prof = dataclasses.replace(load_profile("mi300x"), seed=2)
    det, _ = run_profile(prof)
    l1 = det.levels[0]
    assert l1.fall_shape == "decline, then collapse"
    assert [lv.name for lv in det.levels] == [lv.name for lv in prof.levels]
    assert abs(l1.capacity_bytes / prof.true_capacity("L1") - 1) <= KNOWN_MISSES[("mi300x", "L1")]


def test_mi300x_seed_14_reads_the_l1_from_its_decline():
    """Past the 8 seeds the accuracy figures use (SIMULATED): the pseudo-LRU decline lost to a broad
    fall centred on the collapse (2.4 C), and the L1 read +142%, while a lone spike of the shared
    curve was its lower speed; put between its neighbours (detector.flatten), +0.8% (+6.3% since
    its start is read again: inside what seeds 1-40 show, worst +7.8% with the peak probes off)."""
    prof = dataclasses.replace(load_profile("mi300x"), seed=14)
    det, _ = run_profile(prof)
    assert det.levels[0].fall_shape == "decline, then collapse"
    assert abs(det.levels[0].capacity_bytes / prof.true_capacity("L1") - 1) <= 0.08   # seeds 1-40's worst


def run_profile(prof):
    log = MeasurementLog(None)
    _, det, _ = sweep_and_detect(SimulatedGPU(prof), log, SessionOptions())
    return det, len(log.records)


def test_h200_profile_shows_the_cards_shapes():
    det, _ = run_profile(load_profile("h200"))
    l1, l2 = det.levels[0], det.levels[1]
    assert l1.fall_shape == "cliff, then partial hits" and 220 * KIB <= l1.capacity_bytes <= 222 * KIB
    assert l2.fall_shape == "hashed-set fall" and 54 * MIB <= l2.capacity_bytes <= 61 * MIB
