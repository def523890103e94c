"""The run's timeline and its split (benchmarks/bench_detect.py): the refining and precision
readings' time and the plot's wait named apart from the writing, where the split once counted
them, and nothing heavy imported before the first measurement (SIMULATED)."""
import json
import time

from detect_caches.measure.point import PointMeter
from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
from detect_caches.pipeline import api
from detect_caches.pipeline.api import characterize

DELAY_S = 0.002
REFINING = "refining (more points where an interval stayed wide or noise kept a fall from repeating)"


def test_the_split_names_the_refining_the_precision_readings_and_the_plot(monkeypatch, tmp_path):
    from accuracy import builtin_spec
    from bench_detect import split
    from detect_caches.measure.sim.profile import BUILTIN_PROFILES
    measure = PointMeter.measure

    def slowed(self, *args, **kwargs):
        time.sleep(DELAY_S)
        return measure(self, *args, **kwargs)
    monkeypatch.setattr(PointMeter, "measure", slowed)
    spec = dict(builtin_spec(BUILTIN_PROFILES.index("mi210")), seed=7)   # a noisy L2: every round asked
    t = time.perf_counter()
    monkeypatch.setattr(api, "T0", t)       # the process's start, as the command line sets it
    r = characterize(device=SimulatedGPU(parse_profile(spec)), budget=800, out=tmp_path / "run")
    wall = time.perf_counter() - t
    method = r.data["method"]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["method"] == method
    refine, precise, plot = method["interval_refine"], method["precision_readings"], method["plot"]
    assert 0 < precise["measurements"] <= refine["measurements"]
    assert refine["seconds"] >= refine["measurements"] * DELAY_S
    assert precise["measurements"] * DELAY_S <= precise["seconds"] <= refine["seconds"]
    assert 0 < plot["render_seconds"] < wall and 0 <= plot["waited_seconds"] < wall
    parts = split(dict(r.data, _wall_s=wall))
    assert parts[REFINING] == refine["seconds"]
    assert parts["of the stage above, the precision readings"] == precise["seconds"]
    assert parts["waiting on the plot (rendered beside the probes; its render alone below)"] == plot["waited_seconds"]
    # what the stages leave of the wall time is the writing: the sweeps' seconds hold no refining,
    # and no set-up or wait goes unnamed
    assert 0 <= parts["the rest (writing, exit)"] < 0.2 * wall


FIRST_POINT = """
import runpy, sys
from detect_caches.measure import session
from detect_caches.measure.point import PointMeter
measure, sweeps, seen = PointMeter.measure, session.characterize, []
def first(self, *a, **k):
    if not seen:
        seen.append(1)
        print("IMPORTED", sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
    return measure(self, *a, **k)
def swept(*a, **k):
    out = sweeps(*a, **k)
    print("SWEPT", sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
    return out
PointMeter.measure, session.characterize = first, swept
sys.argv = ["detect-caches"] + sys.argv[1:]
runpy.run_module("detect_caches", run_name="__main__", alter_sys=True)
"""


def test_the_bandwidth_sweeps_wait_on_no_analysis_import(tmp_path):
    """The analysis stack (scipy, ruptures; 1-3 s) is imported by the analysis beside the latency
    sweep, whose timing is the kernel's own clock: sweep_and_detect imported it before its
    sweeps, 1.8-2.9 s before the first measurement on an H100 (cards 25 and 26), which the run's
    split counted as writing the files; a thread importing it beside the bandwidth sweeps took
    the interpreter from their timed launches (on one H100, 15-32 of their points measured again
    against 11-15)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    heavy = ("detect_caches.detector.analyze", "ruptures", "scipy.optimize", "matplotlib")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", FIRST_POINT.format(heavy=heavy), "--simulate", "h200",
                           "--out", str(tmp_path / "run"), "--quiet"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(root)), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith(("IMPORTED", "SWEPT"))]
    assert said == ["IMPORTED []", "SWEPT []"], said
