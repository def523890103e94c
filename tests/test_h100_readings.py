"""The first real runs measured with the precision readings (detector.precision; the fall's
window read four more times, one analysis after them): a fifteenth H100 80GB HBM3 lent for an
H200, GPU-586f0232, three cold runs at 2846942 (tests/data/h200-runs.tar.xz's
2026-12-07/h100-card-14). Runs 1 and 3 read the L2 again (104 and 108 measurements past the
sweep, against 12 in run 2); the analysis on their path took 0.49, 0.46 and 0.48 s
(BENCHMARKS.md, 2026-12-07 eleventh session)."""
import json

import pytest

from detect_caches.detector.analyze import detect_levels
from detect_caches.device import load_device_json
from detect_caches.reader import read_measurements
from h200_runs import H200

CARD = H200 / "2026-12-07" / "h100-card-14"
RUNS = ("run1", "run2", "run3")
KIB = 1024


def _levels(run):
    path = CARD / run
    det = detect_levels(read_measurements(path / "measurements.csv"), load_device_json(path / "result.json"))
    return {lv.name: lv for lv in det.levels}


@pytest.mark.parametrize("run", RUNS)
def test_the_runs_read_again_as_they_were_measured(run):
    """Re-analysed here, each run gives the figures the card's own analysis wrote: the L1 at 221
    KiB, a cliff, and the L2 to the byte (the readings' rounds, then one analysis, are all in its
    measurements)."""
    by = _levels(run)
    written = {lv["name"]: lv for lv in json.loads((CARD / run / "result.json").read_text())["levels"]}
    assert list(by) == ["L1", "L2", "HBM"]
    assert by["L1"].capacity_bytes == 221 * KIB and by["L1"].fall_shape.startswith("cliff")
    assert by["L2"].capacity_bytes == written["L2"]["capacity_bytes"]
    assert by["L2"].fall_shape == "hashed-set fall"
    # ... and the one-SM chase's far half ends where the bandwidth fall does (as on the other H100s)
    assert abs(by["L2"].latency_steps[-1]["up_to_bytes"] / by["L2"].capacity_bytes - 1) <= 0.07


def test_the_l2_read_again_agrees_with_the_run_that_was_not():
    """Runs 1 and 3 (the L2's fall read four more times) against run 2 (not): within two of the
    repeatabilities they said, and compare finds no drift."""
    from detect_caches.pipeline.api_analysis import analyze
    from detect_caches.reports.compare import compare_results
    refine = {r: json.loads((CARD / r / "result.json").read_text())["method"]["interval_refine"]["measurements"]
              for r in RUNS}
    assert refine["run1"] > 60 and refine["run3"] > 60 and refine["run2"] < 30
    l2 = {r: _levels(r)["L2"] for r in RUNS}
    for r in ("run1", "run3"):
        said = (l2[r].capacity_repeatability ** 2 + l2["run2"].capacity_repeatability ** 2) ** 0.5
        assert abs(l2[r].capacity_bytes / l2["run2"].capacity_bytes - 1) <= 2 * said
    runs = [analyze(CARD / r / "measurements.csv", CARD / r / "result.json").data for r in RUNS]
    assert not compare_results(runs[1], runs[0]).drifted and not compare_results(runs[1], runs[2]).drifted
