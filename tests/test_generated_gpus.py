"""Capacities on GPUs drawn by a seeded generator from wide ranges (tests/gpu_generator.py: every
fall shape, ratios 1.2-8x, noise 0.5-3%, 32-304 SMs/CUs, split and per-XCD L2s, 2-5 levels), and
on GPUs whose falls come from simulated caches (tests/physics_generator.py: sets and ways under a
cyclic sweep). CI runs a held-out slice (GPU numbers no rule was tuned on); the full figures, on
300 and more GPUs, come from benchmarks/accuracy.py and are in BENCHMARKS.md. The last tests pin
single GPUs and seeds that once read wrong (regressions, not accuracy figures). SIMULATED."""
import pytest

from accuracy import run_one, summarize   # benchmarks/, on the path from conftest

HELD_OUT = range(1000, 1040)       # the benchmark's figures are for GPUs 0-299
PHYSICS_HELD_OUT = range(1000, 1016)


@pytest.fixture(scope="module")
def formula_runs():
    return summarize([run_one((k, seed, "gpu_generator")) for k in HELD_OUT for seed in (1, 2)])


@pytest.fixture(scope="module")
def physics_runs():
    return summarize([run_one((k, seed, "physics_generator")) for k in PHYSICS_HELD_OUT for seed in (1, 2)])


def test_generated_gpus_capacities_and_levels(formula_runs):
    s = formula_runs
    assert s["pairs"] >= 80
    assert s["within_3pct"] >= 0.90, s["worst"][:5]
    assert s["within_10pct"] >= 0.95, s["worst"][:5]
    assert s["right_levels"] >= 0.95
    assert s["intervals_missing"] <= 0.15
    assert s["spread_within_2pct"] >= 0.85
    # seeds apart as their repeatabilities said (3.5% of pairs beyond twice them; a true 1 sigma
    # gives about 5%), and within 2% where those promised it (69 of 70 pairs)
    assert s["spread_beyond_said"] <= 0.10
    assert s["precise_within_2pct"] >= 0.95


def test_physics_gpus_capacities_and_levels(physics_runs):
    """Falls made from sets and ways (LRU, tree-PLRU, random; modulo, hashed, page colours)."""
    s = physics_runs
    assert s["pairs"] >= 30
    assert s["within_10pct"] >= 0.70, s["worst"][:5]
    assert s["right_levels"] >= 0.85
    assert s["spread_beyond_said"] <= 0.10      # 0 of 35 pairs; 19 of 19 promised within 2% were
    assert s["precise_within_2pct"] >= 0.90


def test_the_spread_is_judged_against_what_each_run_said():
    """Seed pairs apart by more than twice the repeatabilities their runs said, and the share
    within 2% of the pairs whose repeatabilities promised that (benchmarks/accuracy.summarize)."""
    def run(seed, got, rep):
        return {"gpu": 7, "seed": seed, "truth": [("L2", 100), ("HBM", None)], "analysis_s": 0.1, "shapes": {},
                "found": [("L2", got, got - 1, got + 1, "hashed-set fall", rep, 0.1), ("HBM", None, None, None, "", None, None)]}
    # 100 and 103: 3% apart; said 0.5% each (0.7% apart, 1 sigma): beyond, and a promise broken
    s = summarize([run(1, 100, 0.005), run(2, 103, 0.005)])
    assert s["spread_beyond_said"] == 1.0 and s["said_precise"] == 1.0 and s["precise_within_2pct"] == 0.0
    # said 2% each: within what they said, and no promise of 2%
    s = summarize([run(1, 100, 0.02), run(2, 103, 0.02)])
    assert s["spread_beyond_said"] == 0.0 and s["said_precise"] == 0.0
    # three seeds, three pairs: 101 and 103 (1.96% apart) beyond twice 0.7% yet within 2%
    s = summarize([run(1, 100, 0.005), run(2, 101, 0.005), run(3, 103, 0.005)])
    assert s["said_precise"] == 1.0 and abs(s["precise_within_2pct"] - 2 / 3) < 1e-9
    assert abs(s["spread_beyond_said"] - 2 / 3) < 1e-9


def test_a_pseudo_lru_sag_is_not_a_level_of_its_own():
    """Generated GPU 96, seed 5: a 16.25 KiB L1 whose pseudo-LRU sag falls 0.09 log10 (20 point
    sigmas) before it collapses. Judged against the binned curve's noise (2-3x the points', from
    the sag's own slope) the sag passed for flat, and an L0 of 20 KiB was reported above an L1 of 25 KiB."""
    r = run_one((96, 5, "gpu_generator"))
    assert [f[0] for f in r["found"]] == [n for n, _ in r["truth"]]
    got, truth = r["found"][0][1], dict(r["truth"])["L1"]
    assert abs(got / truth - 1) <= 0.03, (got, truth)


def test_noise_that_keeps_an_interval_wide_gets_more_refining_rounds(monkeypatch):
    """Generated GPU 193, seed 2: a random-replacement L2 reads +36% after one refining round,
    whose interval stays wide; within 3% with the three rounds it takes. (The built-in mi210's
    L2, seed 4, was this case, -9.4% after one round, until its fall was refitted over the L3's
    whole plateau: one round now reads it within 2%.)"""
    import detect_caches.measure.session as session
    import detect_caches.pipeline.sweep_detect as sweep_detect
    rounds, real = [], session.refine_intervals
    monkeypatch.setattr(session, "refine_intervals", lambda *a, **k: rounds.append(1) or real(*a, **k))

    def l2_error():
        r = run_one((193, 2, "gpu_generator"))
        return abs(next(f[1] for f in r["found"] if f[0] == "L2") / dict(r["truth"])["L2"] - 1)
    assert l2_error() <= 0.03 and len(rounds) > 2
    monkeypatch.setattr(sweep_detect, "ROUNDS", 1)
    monkeypatch.setattr(sweep_detect, "PRECISION_ROUNDS", 0)   # (which settle it alone since)
    assert l2_error() > 0.06


@pytest.mark.parametrize("seed", [1, 4])
def test_a_narrow_fall_refitted_over_a_long_plateau_keeps_its_shape(seed):
    """Generated GPU 55's narrow hashed L2 (53.3 MiB), refitted over 2.5 octaves of its L3's
    plateau: with its smooth models' candidate capacities spread over that whole window (4.6%
    apart, wider than the fall), a modulo reading 5.3% small won on these seeds and a node of
    eight such GPUs flagged two; the candidates now lie over the fall's own window."""
    r = run_one((55, seed, "gpu_generator"))
    got = next(f for f in r["found"] if f[0] == "L2")
    assert abs(got[1] / dict(r["truth"])["L2"] - 1) <= 0.01 and got[4] == "hashed-set fall", got


def test_an_interval_narrower_than_its_repeatability_is_refined():
    """Generated GPU 62, seed 5: a pseudo-LRU L1 read +9.9% with an interval of 176-183 KB and a
    repeatability of 2.6% (the grid's profile is jagged along a decline's slope-vs-start valley),
    so no refining round ran, and a node of 8 such GPUs flagged it."""
    r = run_one((62, 5, "gpu_generator"))
    got, truth = r["found"][0][1], dict(r["truth"])["L1"]
    assert abs(got / truth - 1) <= 0.03, (got, truth)


def test_a_level_whose_top_slopes_under_the_tail_above_is_found():
    """Generated GPU 75 seed 6: a cliff L0 whose partial hits (0.8 r^-1.05) slope across the
    whole L1 plateau, cut by segmentation into three pieces. Leaving out two fall bins at a
    plateau's start, as one is, made the middle piece flat, and the L1 (385 KiB) was lost: a
    node of eight of these GPUs flagged this one."""
    run = run_one((75, 6, "gpu_generator"))
    truth = dict(run["truth"])
    found = {f[0]: f[1] for f in run["found"]}
    assert list(found) == [name for name, _ in run["truth"]]
    assert abs(found["L1"] / truth["L1"] - 1) <= 0.03
