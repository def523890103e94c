"""history.png and fleet.png as a reader needs them: the history of a GPU whose L2 bandwidth fell
10% marks that figure (and no other) with its change, against dates, with the reference and the
tolerated band drawn; the fleet plot names its outlier, draws the tolerated band, and keeps the
ordinary GPUs' spread readable beside one GPU 66% off; no label overlaps another anywhere."""
import subprocess
import sys
from pathlib import Path

import matplotlib.dates
import pytest

from reading_data import fleet_results, history_runs
from detect_caches.reports.fleet import build_fleet_report
from detect_caches.reports.fleet_plot import build_fleet_figure
from detect_caches.reports.history import build_history
from detect_caches.reports.history_plot import build_history_figure
from detect_caches.reports.label_place import overlapping_texts, texts_outside

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = history_runs(tmp_path_factory.mktemp("history") / "runs")
    return root, build_history([root], capacity_tol=0.03, bandwidth_tol=0.03)


def test_history_marks_the_figure_that_drifted(history):
    _, h = history
    assert h.drift
    fig = build_history_figure(h)
    panels = {ax.get_title(): ax for ax in fig.axes}
    assert {"L1 per SM: size", "L1 per SM: bandwidth", "L2: size", "L2: bandwidth", "HBM: bandwidth"} <= set(panels)
    assert "HBM: size" not in panels                        # memory has no size: no empty panel for it
    marked = {title: [t.get_text().strip() for t in ax.texts] for title, ax in panels.items() if ax.texts}
    assert list(marked) == ["L2: bandwidth"], marked
    assert marked["L2: bandwidth"][0].startswith("-1") and marked["L2: bandwidth"][0].endswith("% worse")
    assert panels["L2: bandwidth"].get_ylabel() == "bandwidth (TB/s)" and panels["L2: size"].get_ylabel() == "size (MiB)"
    ax = panels["L2: bandwidth"]
    assert isinstance(ax.xaxis.get_major_formatter(), matplotlib.dates.ConciseDateFormatter)
    assert len(ax.collections) == 2                        # each GPU's tolerated band
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"node1:0", "node1:1", "reference", "tolerated band", "drift (fails the check)"} <= set(legend)
    assert any("Drift that fails the check: L2: bandwidth of node1:0" in t.get_text() for t in fig.texts)
    # a tiny wiggle is not blown up: the band (+-3% or more) sets the scale
    lo, hi = panels["L1 per SM: size"].get_ylim()
    assert (hi - lo) / ((hi + lo) / 2) > 0.06
    assert overlapping_texts(fig) == [] and texts_outside(fig) == []


def test_history_command_writes_the_plot_and_names_the_gpus(history, tmp_path):
    root, _ = history
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "history", str(root), "--out", str(tmp_path / "h")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "h" / "history.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 2026-11-02 10:00 | node1:0 | 590.44.01 |" in proc.stdout
    assert "Result: **drift**" in proc.stdout and "node1:0 (driver 580.159.04 -> 590.44.01; L2 bandwidth" in proc.stdout


@pytest.fixture(scope="module")
def fleets(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet")
    return {"outlier": build_fleet_report(fleet_results(base / "outlier", dict(level="L2", capacity=0.9))),
            "far": build_fleet_report(fleet_results(base / "far", dict(level="L2", bandwidth=1.66)))}


def test_fleet_plot_names_the_outlier(fleets):
    report = fleets["outlier"]
    assert list(report.names[g] for g in report.outliers) == ["node7:5"]
    fig = build_fleet_figure(report)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == 1 and labels[0].startswith("node7:5 -10.")
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert any(r.startswith("L2 size (median") for r in rows) and any(r.startswith("HBM bandwidth") for r in rows)
    assert len(ax.collections) >= len(rows)                 # a tolerated band on every strip
    assert any(t.get_text().startswith("Outliers: node7:5 (L2 size -10.") for t in fig.texts)
    assert overlapping_texts(fig) == [] and texts_outside(fig) == []


def test_fleet_plot_keeps_its_scale_beside_one_far_off_gpu(fleets):
    report = fleets["far"]
    fig = build_fleet_figure(report)
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert hi < 20 and lo > -20                              # percent: the ordinary GPUs keep their spread
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["node7:5 +6" + labels[0][len("node7:5 +6"):]] and labels[0].endswith("%")
    assert ax.texts[0].get_position()[0] > 0.8 * hi           # written at the edge of the scale
    assert overlapping_texts(fig) == [] and texts_outside(fig) == []


def test_fleet_files_name_gpus_apart_and_carry_latency(fleets, tmp_path):
    report = fleets["outlier"]
    md, csv = report.markdown(), report.csv()
    assert "| node7:5 | GPU-00000005-aaaa |" in md and "## Outliers" in md and "- node7:5: L2" in md
    header = csv.splitlines()[0].split(",")
    assert "L1 (per_cu) latency_ns" in header and "L2 (device) bandwidth_repeatability" in header
