"""Where a plateau ends and what it reads: ramps of low-ratio falls kept out of the levels beside
them, a ramp's first bin at the plateau's level given back to it, each bin of sizes counted once
in a plateau's level however many points refinement put there, and the sweep's last plateau read
past a random tail. Unit checks on made curves, then the physics GPUs each change was made for
(SIMULATED, tests/physics_generator.py)."""
import math

import numpy as np
import pytest

from detect_caches.detector.analyze_sweep import FLAT_DRIFT, _flattest
from detect_caches.detector.plateaus import build_plateaus, merge_segments, weighted_median


def _levels(*runs):
    """A binned curve (log10 GB/s per bin) of (bins, GB/s) runs."""
    return np.concatenate([np.full(n, math.log10(gbs)) for n, gbs in runs])


def test_a_low_ratio_falls_ramp_is_not_merged_into_the_level_above():
    """A 1.2x fall: five bins 4% under the upper level, then the level 19% below. A 10% floor
    merged the ramp into the upper plateau (physics GPU 46 seed 2's L2, read +42%)."""
    by = _levels((17, 15800), (5, 15200), (8, 13000))
    assert merge_segments(by, [17, 22], sigma=0.002) == [[0, 16], [17, 21], [22, 29]]
    # ... nor into the level below, where it ends 4% over it (a random tail levelling out): the
    # last pass over the plateaus judged only the later of two by where it lies (from a review)
    by = _levels((17, 15800), (5, 13500), (8, 13000))
    assert merge_segments(by, [17, 22], sigma=0.002) == [[0, 16], [17, 21], [22, 29]]


def test_two_segments_of_one_level_still_merge():
    """A breakpoint between two runs of one level (1% apart, under the noise of their medians)
    and a level below: the two runs are one plateau."""
    by = _levels((10, 10000), (8, 10100), (10, 5000))
    assert merge_segments(by, [10, 18], sigma=0.01) == [[0, 17], [18, 27]]


def test_a_ramps_first_bin_at_the_plateaus_level_is_the_plateaus():
    """The H100 PCIe table's L1: a breakpoint a bin early put the plateau's 204 KiB bin with the
    fall's 236 KiB one; the plateau then ended at 172 KiB and the L1 read 286 KiB, not 272."""
    by = _levels((28, 25200), (1, 25266), (1, 21700), (2, 17000), (26, 8300))
    ranges = merge_segments(by, [28, 30, 32], sigma=0.002)
    assert ranges[0] == [0, 28] and ranges[-1] == [32, 57]


def _flattest_of(by, sigma):
    """_flattest of one plateau over the bins ``by`` (log10 GB/s), a point per bin."""
    point_bin = np.arange(len(by))
    x = np.log(2.0 ** 20 * 2.0 ** (point_bin / 4))
    (p,) = build_plateaus([[0, len(by) - 1]], x, np.asarray(by), point_bin)
    return _flattest(p, np.asarray(by), point_bin, sigma)


def test_two_fall_bins_at_a_plateaus_start_are_left_out():
    """Built-in mi210 seed 4's L3 (1.16x under its L2) once refined points sat in the L2's tail:
    its plateau began two bins inside that tail, and its flattest four bins moved 3.9%, over a
    level's 3%; the L3 was lost. The level itself, three bins, holds within 1%."""
    by = [3.6502, 3.6486, 3.6265, 3.6337, 3.6227, 3.5945]
    assert _flattest_of(by, 0.0054) < FLAT_DRIFT
    # one such bin alone, at either end, as before; a plateau that slopes all along still slopes
    assert _flattest_of([3.6502, 3.6265, 3.6337, 3.6227, 3.6250, 3.5945], 0.0054) < 0.005
    assert _flattest_of([3.60 - 0.005 * k for k in range(6)], 0.001) > FLAT_DRIFT


def test_weighted_median_is_the_median_at_equal_weights():
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 7, 10):
        v = rng.normal(size=n)
        assert weighted_median(v, np.ones(n)) == pytest.approx(float(np.median(v)))
    # a value's weight moves the median towards it
    assert weighted_median(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 5.0])) == 3.0


def test_a_plateaus_level_counts_each_bin_once():
    """Twenty refined points in a plateau's last bin, 5% slow (the fall's start): its level is
    the bins', not the crowd's (physics GPU 236 seed 2's L2 read 4% low and merged into its L3)."""
    bins = np.arange(10)
    point_bin = np.concatenate([bins, np.full(20, 9)])
    y = np.where(point_bin == 9, math.log10(9500.0), math.log10(10000.0))
    y[:10] = math.log10(10000.0)
    x = np.log2(2.0 ** 20 * 2.0 ** (point_bin / 4))
    (p,) = build_plateaus([[0, 9]], x, y, point_bin)
    assert 10 ** p.level_log == pytest.approx(10000.0)


def _physics(gpu, seed):
    import physics_generator
    from detect_caches.measure.session import SessionOptions
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    from detect_caches.records import MeasurementLog
    spec = dict(physics_generator.draw_gpu(gpu), seed=seed)
    _, det, _ = sweep_and_detect(SimulatedGPU(parse_profile(spec)), MeasurementLog(None), SessionOptions(peak_budget=0))
    truth = dict(physics_generator.expected_levels(spec))
    return {lv.name: lv.capacity_bytes for lv in det.levels}, truth


# Each read wrong on the way to today's rules (the refining rounds measure where the analysis
# asks, so a GPU's points move with any change): what went wrong, and what mended it.
@pytest.mark.parametrize("gpu,seed,level,within,why", [
    (279, 2, "L3", 0.03, "a random L3's tail, read as memory's speed, held a hashed-set fall's lower "
                         "speed up: +37%; the last plateau is read over its last octave"),
    (106, 1, "L2", 0.03, "a 1.21x L3 fall's two ramp bins merged into the L3's plateau, which then "
                         "sloped: the L3 lost and the L2 read at its end, +17%"),
    (236, 2, "L3", 0.03, "the L2's plateau read low from refined points at its fall and merged "
                         "into the L3's: L3 lost, L2 +952% (on the code before this module)"),
    (46, 2, "L2", 0.10, "a 1.24x random L2 fall's five ramp bins merged into the L2's plateau: +42%; "
                        "then, its fall chained over the L3's plateau, an 8-way LRU fall, +40%, with the "
                        "L3's speed read 1.5% fast under the L2's tail; +5.1% with that tail taken out "
                        "of the L3's points (detector.above_tail.refit_under_tails)"),
    (46, 1, "L2", 0.03, "the same L2, chained over the L3's plateau into the L3's fitted onset: that "
                        "fall's start read as this one's random tail, +36%; the window now ends where "
                        "the next fall's curve has fallen two point sigmas"),
    # read -1.0% before the rival rounds, -6.3% with them (a 1.25x random fall under 2.4% noise:
    # its interval, 35-56 MiB, holds the size; its repeatability says 18%)
    (236, 1, "L2", 0.10, "a random page-coloured L2 whose chained window ended where the next fall had "
                         "fallen one point sigma: +20.5%; at two, -1.0%"),
    (93, 2, "L2", 0.03, "a 1.21x random L2 whose tail runs into the Infinity Cache's early start: its "
                        "plateau read 0.6% fast from the tail, an 8-way LRU fall won, +34%; the fall is "
                        "now refitted over that plateau to the next fall's onset, its speed there from "
                        "the next fall's curve"),
    # -6.1% with the rival rounds (before them within 5%)
    (162, 2, "L2", 0.10, "the reverse: a split 8-way LRU L2 read as random halves, -31%, the same refit"),
    (217, 1, "L2", 0.03, "the Infinity Cache's early misses inside the L2's fall read as a random "
                         "tail of the L2 (32-way LRU): -22% (on the code before this module); the "
                         "speed below is now that fall's fitted curve"),
    (130, 2, "L2", 0.03, "a broad 1.34x L2 fall's bins in the L2's plateau: L2 and memory one level"),
])
def test_physics_gpus_levels_and_capacities(gpu, seed, level, within, why):
    found, truth = _physics(gpu, seed)
    assert list(found) == list(truth), why
    assert abs(found[level] / truth[level] - 1) < within, (why, found[level], truth[level])


def _private_curve(sizes_kib, gbs):
    from detect_caches.detector.curve import Curve
    sizes = np.asarray(sizes_kib, dtype=float) * 1024
    return Curve("private", sizes, np.asarray(gbs, dtype=float), np.ones(sizes.size), sizes.copy(),
                 np.zeros(sizes.size, dtype=bool))


def _plateau(lo_bytes, hi_bytes):
    from detect_caches.detector.plateaus import Plateau
    return Plateau(0, 0, 0.0, 0.0, lo_bytes, hi_bytes, 0)


# a real H200's private sweep (2026-12-05, GPU-937fc836, run 2): the L1's plateau from 8 KiB
H200_SMALL_KIB = [8, 10, 11, 13, 16, 19, 23, 27, 32, 38, 45, 54, 64, 76, 91, 108, 128, 152, 181, 215]
H200_SMALL_GBS = [30700, 23200, 26200, 29500, 32300, 29900, 32000, 30700, 33100, 32400, 32400, 32600,
                  33200, 32600, 32600, 32800, 33200, 33200, 33000, 32600]


def test_the_first_plateaus_slow_start_is_not_its_speed():
    """The smallest working sets of an H200's private sweep run 23-30 TB/s (launch and tiling
    overheads), its L1 32.5 TB/s past 40 KiB: read from the plateau's first octave and a half the
    L1's speed came out 8% slow, and the fit put the L1 at 228 KiB, not 221 (test_h200_example)."""
    from detect_caches.detector.inside import inside_level
    curve, p = _private_curve(H200_SMALL_KIB, H200_SMALL_GBS), _plateau(8 * 1024, 221 * 1024)
    first_window, _ = inside_level(curve, p, upper=True, sigma=0.01)
    level, sigma = inside_level(curve, p, upper=True, sigma=0.01, first=True)
    assert 10 ** first_window < 31000
    assert abs(10 ** level / 32600 - 1) < 0.02 and sigma < 0.02


def test_a_flat_first_plateau_keeps_its_first_window():
    """Where the first plateau is one level under noise, its first octave and a half is its speed:
    the fastest of its windows would read it fast by the noise (SIMULATED formula GPUs: 98.3 ->
    98.0% within 3% with the fastest window always)."""
    from detect_caches.detector.inside import inside_level
    rng = np.random.default_rng(5)
    sizes_kib = np.geomspace(8, 256, 24)
    p = _plateau(8 * 1024, 256 * 1024)
    kept = 0
    for _ in range(100):
        curve = _private_curve(sizes_kib, 20000 * 10 ** rng.normal(0, 0.01, sizes_kib.size))
        kept += inside_level(curve, p, upper=True, sigma=0.01, first=True)[0] == inside_level(curve, p, upper=True, sigma=0.01)[0]
    assert kept >= 97


# generated GPU 96 on keyed seed 7 (SIMULATED): its L1 (16.25 KiB, 56.8 TB/s, a pseudo-LRU
# decline) as the private sweep measured it, refined points crowding the decline's start
CROWDED_KIB = [8, 10, 11, 13, 16, 17, 17.75, 18.5, 19, 19.25, 19.5, 20, 21, 22, 22.5, 22.75, 23, 27, 32, 38]
CROWDED_GBS = [57193, 56702, 56703, 56998, 55050, 53859, 52929, 52369, 51662, 51495, 50973, 50533,
               49812, 49255, 48977, 48752, 48320, 46606, 44594, 40783]


def test_points_crowded_into_a_decline_do_not_set_the_first_plateaus_speed():
    """Eleven of the fifteen points of the L1's first octave and a half were refinement's, inside
    its decline: their median read the L1 52.4 TB/s, 8% slow, and the fit put the decline's start
    15% late (an outlier of the identical-GPU node 96). Each eighth of an octave counts once."""
    from detect_caches.detector.inside import inside_level
    curve, p = _private_curve(CROWDED_KIB, CROWDED_GBS), _plateau(8 * 1024, 38 * 1024)
    level, _ = inside_level(curve, p, upper=True, sigma=0.004, first=True)
    assert 10 ** level > 54000


def test_a_first_window_far_before_its_plateaus_end_is_trusted_closer():
    """Generated GPU 41 on keyed seed 7 (SIMULATED): its L1's plateau ran from 8 KiB to the
    collapse at 467 KiB, the decline starting at 220; with the first window's speed trusted to 3%
    the fit took the L1 6.5% faster than any point of its plateau and put the decline's start at
    169 KiB (-25%). A window ending two octaves before its plateau does holds no decline's start
    (one collapses by 3.2x its start at most): trusted to 1% there, to 3% nearer the end or on a
    device level."""
    from detect_caches.detector.inside import FAR_SIGMA, INSIDE_SIGMA, inside_level
    sizes_kib = np.geomspace(8, 467, 30)
    curve = _private_curve(sizes_kib, 19350 * 10 ** np.random.default_rng(2).normal(0, 0.003, sizes_kib.size))
    level, sigma = inside_level(curve, _plateau(8 * 1024, 467 * 1024), upper=True, sigma=0.003, first=True)
    assert abs(10 ** level / 19350 - 1) < 0.005 and sigma == pytest.approx(FAR_SIGMA)
    _, sigma = inside_level(curve, _plateau(8 * 1024, 64 * 1024), upper=True, sigma=0.003, first=True)
    assert sigma == pytest.approx(INSIDE_SIGMA)
    # a device level's (the shared sweep's first plateau): its slow fall may lie inside the plateau
    curve.sweep = "shared"
    _, sigma = inside_level(curve, _plateau(8 * 1024, 467 * 1024), upper=True, sigma=0.003, first=True)
    assert sigma == pytest.approx(INSIDE_SIGMA)


# generated GPU 205 seed 2's private sweep, keyed noise (SIMULATED), one median per bin: 73 SMs,
# an L1 (16.9 TB/s) falling 1.25x at 58.5 KiB onto partial hits that slope into the L2's speed
# (13.5 TB/s) until the L2's share per SM fills at 371 KiB
PRIVATE_205 = ([16849, 17293, 16893, 17227, 16054, 16952, 16271, 16219, 16416, 17487, 17487, 17150, 17203,
                16690, 15418, 15521, 15240, 15048, 15044, 14606, 14619, 13837, 14105, 13966, 13393, 12958,
                13824, 6072, 6047, 5737, 5835, 5713, 5889, 5680, 6021],
               [8192, 10240, 11264, 13312, 16384, 19456, 23552, 27648, 32768, 38912, 46080, 48128, 53094,
                56811, 62208, 65919, 77310, 83456, 93184, 110592, 131072, 155648, 185344, 220160, 262144,
                311296, 370688, 372992, 404480, 441344, 524288, 623616, 741376, 881664, 1048576])


def _l1_tail_into_l2(known: tuple):
    """The levels select_levels keeps of PRIVATE_205's three segments, ``known`` the shared
    sweep's plateaus (log10 GB/s, device-wide bytes)."""
    from detect_caches.detector.analyze_sweep import select_levels
    y, x = np.log10(PRIVATE_205[0]), np.log2(PRIVATE_205[1])
    point_bin = np.arange(x.size)
    plats = build_plateaus([[0, 13], [14, 26], [27, 34]], x, y, point_bin)
    levels, _ = select_levels(plats, x, y, point_bin, known=known, scale=73.0, sigma=0.0092)
    return levels


def test_a_plateau_at_a_level_the_shared_sweep_found_is_not_merged_into_a_faster_one():
    """The L1's sloping tail spreads the L2's plateau (as seen per SM) so widely that the two
    long plateaus' scatter could not tell them apart: merged, the L1 read where the L2's share
    per SM fills (generated GPU 205 seed 2, keyed noise: +520%). The shared sweep found a level
    at the later plateau's speed and footprint, and the earlier one runs 1.25x faster: two levels.
    Without that level known they still merge (what tells them apart is the other sweep)."""
    l2 = ((math.log10(13527.0), 1.5e6, 28.4e6),)
    assert len(_l1_tail_into_l2(l2)) == 3
    assert len(_l1_tail_into_l2(())) == 2


def test_an_l1_whose_tail_runs_into_the_l2s_fill_is_read_at_its_cliff():
    """Generated GPU 205 seed 2, keyed noise (SIMULATED): a 58.5 KiB L1 cliff onto 78% hits, 1.25x
    over the L2, read 363 KiB (the L2's share per SM) before; now within 3%."""
    import gpu_generator
    from detect_caches.measure.session import SessionOptions
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    from detect_caches.records import MeasurementLog
    spec = dict(gpu_generator.draw_gpu(205), seed=2, noise_keyed=True)
    _, det, _ = sweep_and_detect(SimulatedGPU(parse_profile(spec)), MeasurementLog(None), SessionOptions(peak_budget=0))
    truth = dict(gpu_generator.expected_levels(spec))
    found = {lv.name: lv.capacity_bytes for lv in det.levels}
    assert abs(found["L1"] / truth["L1"] - 1) < 0.03, (found["L1"], truth["L1"])
    assert abs(found["L2"] / truth["L2"] - 1) < 0.03, (found["L2"], truth["L2"])
