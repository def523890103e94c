"""The first real runs measured with the precision readings (detector.precision; the fall's
window read four more times, one analysis after them): a fifteenth and a sixteenth H100 80GB
HBM3 lent for an H200, GPU-586f0232 and GPU-248e81d1, three cold runs each at 2846942 (the
tree sent also held a first detector.pairfit, run on the chase's curve too: re-analysed at
2846942 and since, every level and latency step the same; tests/data/h200-runs.tar.xz's
2026-12-07/h100-card-14 and h100-card-15). Runs 1 and 3 of the
first card and run 3 of the second read the L2 again (104, 108 and 80 measurements past the
sweep, against 12-14 or none in the others; BENCHMARKS.md, 2026-12-07 eleventh session).

A seventeenth and an eighteenth, GPU-d150ccd1 and GPU-2874264e, three cold runs each at 7049b62
(h100-card-16, h100-card-17; the twelfth session). Card 16's run 3 wrote its L1 229.5 KiB, wrong
and kept as a strict expected failure until mended (partial hits 12% slow at 222.5-229.5 KiB
passed for served while the close pairs across the cliff read one point's noise 7%; judging them
against the curve's noise mends it but reads the H200's carveout L1s 224-227 KiB: their aliasing
dip is then no longer forgiven). Card 17's run 2 read its L2 48.6 MiB (after 80 precision
readings, saying 1.6%) where runs 1 and 3 read 52.1 and 52.3, and compare flagged the card
against itself until a hashed-set fall said at least 2% (the fourteenth session).

A nineteenth and a twentieth, GPU-6fb009b7 and GPU-f56a3f26, three cold runs each at 109b88a
(h100-card-18, h100-card-19; the thirteenth session, lent for an H200 again): L1 221 KiB in all
six, L2 49.89 / 51.05 / 51.43 and 51.18 / 52.98 / 50.66 MiB, no drift between any two runs of a card.
A twenty-first, GPU-061ff5c7, at e2bc44a (h100-card-20; the default budget 800, of which each run
used 245-252 measurements): L1 221 KiB x3, L2 51.18 / 51.69 / 51.56 MiB. A twenty-second,
GPU-b2b5d858, at b97b935 (h100-card-21; the ways' spread in the repeatability): L1 221 KiB x3, L2
51.43 / 52.72 / 49.76 MiB, each saying 1.5-2.6%. A twenty-third, GPU-5fa85614, at bba06db
(h100-card-22): L1 221 KiB x3, L2 51.05 / 51.56 / 52.72 MiB. A twenty-fourth, GPU-6c6a7b60, at
e0a041b (h100-card-23; the fourteenth session, a smooth fall's C written to the byte): L1 221 KiB
x3, L2 52.24 / 48.83 / 51.22 MiB. A twenty-fifth, GPU-79c5ceb7, at d344b23 (h100-card-24; the
fifteenth session, onset models tried inside the gaps between measured sizes): L1 221 KiB x3, L2
52.05 / 52.88 / 50.75 MiB. A twenty-sixth, GPU-45d8773c, at 4692854 (h100-card-25; the sixteenth
session, lent for an H200 again): L1 221 KiB x3, L2 50.11 / 52.89 / 49.93 MiB. A twenty-seventh,
GPU-5d5ddbce, at c8b9c43 (h100-card-26; the run's split naming its refining): L1 221 KiB x3, L2
52.22 / 52.93 / 54.01 MiB. A twenty-eighth, GPU-e5cfd6b0, at 0fb15fc (h100-card-27; the analysis
stack imported beside the sweeps): L1 221 KiB x3, L2 51.31 / 50.19 / 50.77 MiB. A twenty-ninth,
GPU-e6733a96, at 94514ce (h100-card-28; the eighteenth session, lent for an H200 again; the
analysis imports beside the latency sweep): L1 221 KiB x3, L2 51.06 / 51.86 / 50.15 MiB."""
import functools
import json

import pytest

from detect_caches.detector.analyze import detect_levels
from detect_caches.detector.level_figures import size_grid
from detect_caches.device import load_device_json
from detect_caches.reader import read_measurements
from h200_runs import H200

CARDS = ("h100-card-14", "h100-card-15")
RUNS = ("run1", "run2", "run3")
KIB = 1024


@functools.lru_cache(maxsize=None)
def _detection(card, run):
    path = H200 / "2026-12-07" / card / run
    return detect_levels(read_measurements(path / "measurements.csv"), load_device_json(path / "result.json"))


def _levels(card, run):
    return {lv.name: lv for lv in _detection(card, run).levels}


def _l2_as_written(card, run) -> bool:
    """The L2 read again as the run's own analysis wrote it: before e0a041b on the shared sweep's
    size grid, since then to the byte (within a millionth: another machine's floating point)."""
    c, written = _levels(card, run)["L2"].capacity_bytes, _written(card, run)["L2"]["capacity_bytes"]
    if int(card.rsplit("-", 1)[1]) >= 23:
        return abs(c - written) <= 1e-6 * written
    grid = size_grid(_detection(card, run).sweeps["shared"])
    return int(round(c / grid) * grid) == written


def _refined(card, run) -> int:
    method = json.loads((H200 / "2026-12-07" / card / run / "result.json").read_text())["method"]
    return (method.get("interval_refine") or {}).get("measurements", 0)


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("run", RUNS)
def test_the_runs_read_again_as_they_were_measured(card, run):
    """Re-analysed here, each run gives the figures the card's own analysis wrote: the L1 at 221
    KiB, a cliff, and the L2 to the byte on the sweep's grid (the readings' rounds, then one
    analysis, are all in its measurements); the one-SM chase's far half ends where the bandwidth
    fall does, as on the other H100s."""
    by = _levels(card, run)
    assert list(by) == ["L1", "L2", "HBM"]
    assert by["L1"].capacity_bytes == 221 * KIB and by["L1"].fall_shape.startswith("cliff")
    assert _l2_as_written(card, run)
    assert by["L2"].fall_shape == "hashed-set fall"
    assert abs(by["L2"].latency_steps[-1]["up_to_bytes"] / by["L2"].capacity_bytes - 1) <= 0.07


@pytest.mark.parametrize("card", CARDS)
def test_the_l2_read_again_agrees_with_the_runs_that_were_not(card):
    """Each run whose L2 fall was read four more times against each of the card's runs whose was
    not: within two of the repeatabilities they said, and compare finds no drift."""
    from detect_caches.pipeline.api_analysis import analyze
    from detect_caches.reports.compare import compare_results
    again = [r for r in RUNS if _refined(card, r) > 60]
    not_again = [r for r in RUNS if _refined(card, r) < 30]
    assert again and not_again
    path = H200 / "2026-12-07" / card
    data = {r: analyze(path / r / "measurements.csv", path / r / "result.json").data for r in RUNS}
    l2 = {r: next(lv for lv in data[r]["levels"] if lv["name"] == "L2") for r in RUNS}
    for a in again:
        for b in not_again:
            said = (l2[a]["capacity_repeatability"] ** 2 + l2[b]["capacity_repeatability"] ** 2) ** 0.5
            assert abs(l2[a]["capacity_bytes"] / l2[b]["capacity_bytes"] - 1) <= 2 * said, (a, b)
            assert not compare_results(data[b], data[a]).drifted


def _written(card, run):
    return {lv["name"]: lv for lv in json.loads((H200 / "2026-12-07" / card / run / "result.json").read_text())["levels"]}


@pytest.mark.parametrize("card, run", [("h100-card-16", "run1"), ("h100-card-16", "run2"),
                                       ("h100-card-17", "run1"), ("h100-card-17", "run2"), ("h100-card-17", "run3"),
                                       ("h100-card-18", "run1"), ("h100-card-18", "run2"), ("h100-card-18", "run3"),
                                       ("h100-card-19", "run1"), ("h100-card-19", "run2"), ("h100-card-19", "run3"),
                                       ("h100-card-20", "run1"), ("h100-card-20", "run2"), ("h100-card-20", "run3"),
                                       ("h100-card-21", "run1"), ("h100-card-21", "run2"), ("h100-card-21", "run3"),
                                       ("h100-card-22", "run1"), ("h100-card-22", "run2"), ("h100-card-22", "run3"),
                                       ("h100-card-23", "run1"), ("h100-card-23", "run2"), ("h100-card-23", "run3"),
                                       ("h100-card-24", "run1"), ("h100-card-24", "run2"), ("h100-card-24", "run3"),
                                       ("h100-card-25", "run1"), ("h100-card-25", "run2"), ("h100-card-25", "run3"),
                                       ("h100-card-26", "run1"), ("h100-card-26", "run2"), ("h100-card-26", "run3"),
                                       ("h100-card-27", "run1"), ("h100-card-27", "run2"), ("h100-card-27", "run3"),
                                       ("h100-card-28", "run1"), ("h100-card-28", "run2"), ("h100-card-28", "run3")])
def test_the_later_cards_read_again_as_written(card, run):
    """Re-analysed, each run gives the levels its own analysis wrote: L1 221 KiB, a cliff; the L2
    to the byte on the sweep's grid, a hashed-set fall."""
    by, written = _levels(card, run), _written(card, run)
    assert list(by) == ["L1", "L2", "HBM"]
    assert by["L1"].capacity_bytes == written["L1"]["capacity_bytes"] == 221 * KIB
    assert by["L1"].fall_shape.startswith("cliff")
    assert _l2_as_written(card, run)
    assert by["L2"].fall_shape == "hashed-set fall"


@pytest.mark.xfail(strict=True, reason="partial hits 12% slow pass for served where one point's noise reads 7%")
def test_card_16_run_3_reads_its_l1_at_the_cliff():
    assert _written("h100-card-16", "run3")["L1"]["capacity_bytes"] == 235008
    assert _levels("h100-card-16", "run3")["L1"].capacity_bytes == 221 * KIB


def _drifted(card, a, b):
    from detect_caches.pipeline.api_analysis import analyze
    from detect_caches.reports.compare import compare_results
    path = H200 / "2026-12-07" / card
    data = [analyze(path / r / "measurements.csv", path / r / "result.json").data for r in (a, b)]
    return compare_results(*data).drifted


def test_the_runs_of_card_17_that_agree_find_no_drift():
    assert _drifted("h100-card-17", "run1", "run2") == []
    assert _drifted("h100-card-17", "run1", "run3") == []


@pytest.mark.parametrize("card", ("h100-card-18", "h100-card-19", "h100-card-20", "h100-card-21", "h100-card-22",
                                  "h100-card-23", "h100-card-24", "h100-card-25",
                                  "h100-card-26", "h100-card-27", "h100-card-28"))
def test_no_two_runs_of_the_later_cards_flag_each_other(card):
    assert [_drifted(card, a, b) for a, b in (("run1", "run2"), ("run1", "run3"), ("run2", "run3"))] == [[], [], []]


def test_card_17_never_flags_itself():
    """Run 2 read its L2 48.6 MiB where runs 1 and 3 read 52.1 and 52.3, each saying 1.5-1.7%
    while the H100s' L2s move 2.35% between runs of a card: a hashed-set fall says at least 2%
    (detector.level_figures.HASHED_FLOOR)."""
    assert _drifted("h100-card-17", "run2", "run3") == []
