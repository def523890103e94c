"""Which points of a fall still run at speed (detector.fallwindow.speed_states) is judged against
the smaller of the two noise readings: one point's, from pairs of close sizes, counts a crowded
fall's steps as noise where refinement put pairs across them. A seventeenth H100 80GB HBM3 lent for
an H200, GPU-d150ccd1, three cold runs at 7049b62 (tests/data/h200-runs.tar.xz's
2026-12-07/h100-card-16): run 3's L1 was written 229.5 KiB where runs 1 and 2 read 221, and
compare flagged the card against itself."""
import json
import math

import numpy as np

from detect_caches.detector.analyze import detect_levels
from detect_caches.detector.fallwindow import FallWindow
from detect_caches.device import load_device_json
from detect_caches.reader import read_measurements
from h200_runs import H200

KIB = 1024
CARD = H200 / "2026-12-07" / "h100-card-16"


def _window(sigma_point: float, sigma_curve: float) -> FallWindow:
    """An L1 at log10 4.51 (32.4 TB/s) falling at 221 KiB onto partial hits 12% slow to 229.5 KiB,
    then the L2's speed (log10 3.90), as run 3 measured it."""
    sizes = np.array([200, 205, 210, 215, 216, 217, 218, 219, 220, 221, 221.5, 222, 224.5, 229.5, 230, 232, 240,
                      256, 300, 400, 600, 1024]) * KIB
    y = np.where(sizes <= 221 * KIB, 4.51, np.where(sizes <= 229.5 * KIB, 4.51 + math.log10(0.88), 3.90))
    y = y + 0.002 * np.sin(np.arange(sizes.size))
    return FallWindow(sizes, y, None, sigma_point, sigma_curve, ((4.51, 0.006), (3.90, 0.013)))


def test_partial_hits_12_percent_slow_are_missing_against_the_curves_noise():
    win = _window(sigma_point=0.030, sigma_curve=0.009)
    states = win.speed_states()
    partial = (win.sizes > 221 * KIB) & (win.sizes <= 229.5 * KIB)
    assert np.all(states[partial] == -1)
    served = win.served_whole()
    assert served[win.sizes == 221 * KIB][0] and not served[win.sizes == 229.5 * KIB][0]
    assert win.delta == 4 * 0.030      # the residuals' cap still reads the larger


def test_a_quiet_point_noise_is_kept_where_the_curve_reads_louder():
    """The other way round the point's own noise decides: 12% slow is missing at 0.009 either way,
    and 1% slow is at speed."""
    assert _window(0.009, 0.03).served_sigma == 0.009
    sizes = np.array([100, 110, 120, 130, 140, 150, 160]) * KIB
    y = np.array([4.51, 4.51, 4.51, 4.51 + math.log10(0.99), 4.51, 4.51, 4.51])
    win = FallWindow(sizes, y, None, 0.009, 0.03, ((4.51, 0.006), (3.90, 0.013)))
    assert np.all(win.speed_states() == 1)


def _levels(run):
    path = CARD / run
    det = detect_levels(read_measurements(path / "measurements.csv"), load_device_json(path / "result.json"))
    return {lv.name: lv for lv in det.levels}


def test_the_h100_l1_read_at_its_cliff_in_every_run():
    """Run 3's partial hits at 222.5-229.5 KiB (12% slow) passed for noise while the close pairs
    across the cliff read one point's noise 7%: re-analysed, 221 KiB, a cliff, in all three runs,
    as written in runs 1 and 2; the L2s as written, within 3% of each other."""
    written = {r: json.loads((CARD / r / "result.json").read_text()) for r in ("run1", "run2", "run3")}
    assert [lv["capacity_bytes"] for r in ("run1", "run2", "run3") for lv in written[r]["levels"]
            if lv["name"] == "L1"] == [221 * KIB, 221 * KIB, 235008]
    l2s = []
    for run in ("run1", "run2", "run3"):
        by = _levels(run)
        assert list(by) == ["L1", "L2", "HBM"]
        assert by["L1"].capacity_bytes == 221 * KIB and by["L1"].fall_shape.startswith("cliff")
        l2 = next(lv for lv in written[run]["levels"] if lv["name"] == "L2")
        assert by["L2"].capacity_bytes == l2["capacity_bytes"]
        l2s.append(by["L2"].capacity_bytes)
    assert max(l2s) / min(l2s) - 1 < 0.03


def test_the_card_no_longer_drifts_from_itself():
    """compare of run 1 and run 3 re-analysed: no drift (as written: the L1 +3.8%, exit 1)."""
    from detect_caches.pipeline.api_analysis import analyze
    from detect_caches.reports.compare import compare_results
    data = {r: analyze(CARD / r / "measurements.csv", CARD / r / "result.json").data for r in ("run1", "run3")}
    assert not compare_results(data["run1"], data["run3"]).drifted
    assert data["run3"]["levels"][0]["capacity_bytes"] == 221 * KIB
