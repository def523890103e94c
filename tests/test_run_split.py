"""The run's split (benchmarks/bench_detect.py) names the refining and precision readings' time,
which it once left in "writing the files, waiting on the plot", and the plot's wait apart from
the writing (SIMULATED, each reading slowed by DELAY_S)."""
import json
import time

from detect_caches.measure.point import PointMeter
from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
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
    # what the stages leave of the wall time is the rest (the sweeps' seconds hold no refining)
    assert 0 <= parts["the rest (writing, exit)"] < wall - refine["seconds"]
