"""A seventeenth and an eighteenth H100 80GB HBM3 lent for an H200, GPU-d150ccd1 and GPU-2874264e,
three cold runs each at 7049b62 (tests/data/h200-runs.tar.xz's 2026-12-07/h100-card-16 and
h100-card-17; BENCHMARKS.md, 2026-12-07 twelfth session). Two readings there are wrong and kept
as strict expected failures until mended: card 16's run 3 wrote its L1 229.5 KiB (partial hits
12% slow at 222.5-229.5 KiB passed for served while the close pairs across the cliff read one
point's noise 7%; judging them against the curve's noise mends it but reads the H200's carveout
L1s 224-227 KiB: their aliasing dip is then no longer forgiven), and card 17's run 2 read its L2
48.6 MiB (after 80 precision readings, saying 1.6%) where runs 1 and 3 read 52.1 and 52.3, so
compare flags the card against itself."""
import json

import pytest

from detect_caches.detector.analyze import detect_levels
from detect_caches.device import load_device_json
from detect_caches.reader import read_measurements
from h200_runs import H200

KIB = 1024
RUNS = ("run1", "run2", "run3")


def _path(card, run):
    return H200 / "2026-12-07" / card / run


def _levels(card, run):
    det = detect_levels(read_measurements(_path(card, run) / "measurements.csv"),
                        load_device_json(_path(card, run) / "result.json"))
    return {lv.name: lv for lv in det.levels}


def _written(card, run):
    return {lv["name"]: lv for lv in json.loads((_path(card, run) / "result.json").read_text())["levels"]}


@pytest.mark.parametrize("card, run", [("h100-card-16", "run1"), ("h100-card-16", "run2"),
                                       ("h100-card-17", "run1"), ("h100-card-17", "run2"), ("h100-card-17", "run3")])
def test_the_runs_read_again_as_written(card, run):
    """Re-analysed, each run gives the levels its own analysis wrote: L1 221 KiB, a cliff; the L2
    to the byte, a hashed-set fall."""
    by, written = _levels(card, run), _written(card, run)
    assert list(by) == ["L1", "L2", "HBM"]
    assert by["L1"].capacity_bytes == written["L1"]["capacity_bytes"] == 221 * KIB
    assert by["L1"].fall_shape.startswith("cliff")
    assert by["L2"].capacity_bytes == written["L2"]["capacity_bytes"]
    assert by["L2"].fall_shape == "hashed-set fall"


@pytest.mark.xfail(strict=True, reason="partial hits 12% slow pass for served where one point's noise reads 7%")
def test_card_16_run_3_reads_its_l1_at_the_cliff():
    assert _written("h100-card-16", "run3")["L1"]["capacity_bytes"] == 235008
    assert _levels("h100-card-16", "run3")["L1"].capacity_bytes == 221 * KIB


def _compare(card, a, b):
    from detect_caches.pipeline.api_analysis import analyze
    from detect_caches.reports.compare import compare_results
    data = [analyze(_path(card, r) / "measurements.csv", _path(card, r) / "result.json").data for r in (a, b)]
    return compare_results(*data).drifted


def test_the_runs_of_card_17_that_agree_find_no_drift():
    assert _compare("h100-card-17", "run1", "run2") == []
    assert _compare("h100-card-17", "run1", "run3") == []


@pytest.mark.xfail(strict=True, reason="an L2 read again says 1.6% where its card's runs move 4%")
def test_card_17_never_flags_itself():
    assert _compare("h100-card-17", "run2", "run3") == []
