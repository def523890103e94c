"""Regression checks on the simulator, where the truth is known: reruns of one card never drift,
a 5% change of any level's capacity or bandwidth is caught, and a node or a fleet names exactly
its odd GPUs. Every run is seeded (the same verdicts on every machine)."""
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from detect_caches.reports.compare import compare_results
from sim_profiles import ACCURACY_PROFILES
from sim_runs import run_profile

ROOT = Path(__file__).resolve().parents[1]
PAIRS = range(8)            # 8 pairs of reruns x 7 profiles = 56 clean pairs
CHANGE = 0.05


def _levels(kind: str):
    """(profile, level) for every level that has the figure: caches for capacity, all for bandwidth."""
    return [(name, lv["name"]) for name, spec in ACCURACY_PROFILES.items() for lv in spec["levels"]
            if kind == "bandwidth" or lv.get("capacity_bytes")]


def _flags(cmp, level: str, what: str) -> bool:
    return any(d.startswith(f"{level} ") and f" {what} " in d for d in cmp.drifted)


def test_clean_reruns_never_drift():
    assert len(ACCURACY_PROFILES) >= 5
    verdicts = []
    for name in ACCURACY_PROFILES:
        for s in PAIRS:
            cmp = compare_results(run_profile(name, s), run_profile(name, 100 + s))
            verdicts.append((name, s, cmp.drifted))
    assert len(verdicts) >= 50
    assert [v for v in verdicts if v[2]] == []


@pytest.mark.parametrize("what", ["capacity", "bandwidth"])
def test_five_percent_changes_are_caught(what):
    """Each level of each profile made 5% smaller (seed 0) and 5% larger (seed 1), against a clean
    run of another seed: where the two runs say a 5% change is detectable, the changed figure is
    flagged in at least 95% of the trials; that is most trials (a pseudo-LRU L1, whose decline
    places its size only to a few percent, says so and is not flagged on a 5% change); and no
    unchanged figure is flagged in any."""
    trials, detectable, caught, elsewhere = 0, 0, [], []
    for name, level in _levels(what):
        for i, factor in enumerate((1 - CHANGE, 1 + CHANGE)):
            base = run_profile(name, i)
            changed = run_profile(name, 200 + i, level=level, **{what: factor})
            cmp = compare_results(base, changed)
            trials += 1
            row = next(v for v in cmp.verdicts if v.level.startswith(f"{level} ") and v.quantity == what)
            if row.detectable is not None and row.detectable < CHANGE:
                detectable += 1
                if _flags(cmp, level, what):
                    caught.append((name, level, factor))
            others = [d for d in cmp.drifted if not (d.startswith(f"{level} ") and f" {what} " in d)]
            if others:
                elsewhere.append((name, level, factor, others))
    assert trials >= 20 and detectable >= 0.85 * trials, (detectable, trials)
    assert len(caught) >= 0.95 * detectable, (len(caught), detectable)
    assert elsewhere == []


def test_the_table_says_the_smallest_detectable_change():
    cmp = compare_results(run_profile("nv_cliff_tail", 0), run_profile("nv_cliff_tail", 100))
    for row in cmp.rows:
        detectable = float(row[5].rstrip("%")) / 100
        assert 0.03 <= detectable < 0.05, row   # the tolerance, or what the repeatabilities allow


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def test_node_flags_exactly_the_gpu_with_a_5_percent_smaller_l2(tmp_path):
    data = json.loads((ROOT / "measure" / "sim" / "profiles" / "h200.json").read_text())
    data["levels"][1]["capacity_bytes"] = int(data["levels"][1]["capacity_bytes"] * (1 - CHANGE))
    small = tmp_path / "h200-l2-5pct.json"
    small.write_text(json.dumps(data))
    out = tmp_path / "node"
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "--simulate", f"h200,h200,{small},h200",
                           "--out", str(out), "--no-peaks", "--no-latency"], env=_env(), capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    fleet = json.loads((out / "fleet.json").read_text())
    assert len(fleet["gpus"]) == 4
    assert [g["place"].split(":")[1] for g in fleet["gpus"] if g["outlier"]] == ["2"]
    assert fleet["gpus"][0]["outlier"] and fleet["gpus"][0]["place"].endswith(":2")
    (what,) = fleet["outliers"].values()
    assert len(what) == 1 and what[0].startswith("L2 (device) capacity")
    # the three like GPUs were measured with noise of their own, not copies of one run (their
    # capacities may agree: they are read on the sweep's grid)
    l2 = {g["place"]: g["levels"][1]["bandwidth_gbs"] for g in fleet["gpus"]}
    assert len(set(l2.values())) == 4


def _scale(lv: dict, capacity_bytes: float, bandwidth_gbs: float) -> None:
    """A level's figures scaled as a card with that cache or speed would show them (the interval
    and spread with them)."""
    for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes", "half_hit_bytes"):
        if lv.get(key):
            lv[key] = int(lv[key] * capacity_bytes)
    for key in ("bandwidth_gbs", "bandwidth_spread_gbs", "peak_gbs"):
        if lv.get(key):
            lv[key] = lv[key] * bandwidth_gbs


def _fleet(tmp_path: Path, n_nodes: int = 250, per_node: int = 8) -> tuple[Path, dict[str, str]]:
    """2000 results: copies of one simulated H200 run with 0.2-0.3% jitter per figure, each a GPU of
    its own (UUID, host, index); three of them odd."""
    base = run_profile("nv_cliff_tail", 0)
    rng = random.Random(7)
    odd = {("node017", 3): ("L2", "capacity_bytes", 0.80), ("node101", 0): ("HBM", "bandwidth_gbs", 0.94),
           ("node230", 6): ("L1", "capacity_bytes", 0.95)}
    root = tmp_path / "fleet-results"
    labels = {}
    for n in range(n_nodes):
        for g in range(per_node):
            res = json.loads(json.dumps(base))
            host = f"node{n:03d}"
            res["device"].update(host=host, index=g, uuid=f"GPU-{n:04d}-{g}")
            for lv in res["levels"]:
                factors = {key: 1 + rng.choice((-1, 1)) * rng.uniform(0.002, 0.003)
                           for key in ("capacity_bytes", "bandwidth_gbs")}
                if (host, g) in odd and lv["name"] == odd[(host, g)][0]:
                    key, factor = odd[(host, g)][1:]
                    factors[key] *= factor
                _scale(lv, **factors)
            path = root / host / f"gpu{g}" / "result.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(res))
            if (host, g) in odd:
                labels[res["device"]["uuid"]] = odd[(host, g)][0]
    return root, labels


def test_fleet_of_2000_flags_exactly_the_odd_gpus_first_and_fast(tmp_path):
    root, odd = _fleet(tmp_path)
    out = tmp_path / "report"
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", str(root), "--out", str(out)],
                          env=_env(), capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert wall < 5.0, wall
    fleet = json.loads((out / "fleet.json").read_text())
    assert len(fleet["gpus"]) == 2000
    assert set(fleet["outliers"]) == set(odd)
    assert {g["label"] for g in fleet["gpus"][:3]} == set(odd)          # listed first
    assert not any(g["outlier"] for g in fleet["gpus"][3:])
    for label, level in odd.items():
        assert all(w.startswith(level) for w in fleet["outliers"][label])
    text = (out / "fleet.md").read_text()
    assert text.index("## Outliers") < text.index("## Levels across the fleet")
    # fleet.md names a GPU by host:index where that is unique (the UUID is GPU-<node>-<index>)
    places = [f"node{int(label.split('-')[1]):03d}:{label.split('-')[2]}" for label in odd]
    assert all(place in text.split("## Levels")[0] for place in places)
    assert "fleet.csv" in text and (out / "fleet.csv").read_text().count("\n") == 2001
    assert (out / "fleet.png").stat().st_size > 10_000


def test_a_plateau_of_few_points_says_the_sweeps_noise():
    """Generated GPU 120 on two seeds: the L1's plateau has seven points at 2.3% noise, and their
    scatter read 0.7% on one seed by chance; its bandwidth said 0.3% repeatability and compare
    called a 3% move drift. A plateau's scatter is now drawn toward the sweep's pooled scatter."""
    import gpu_generator
    from sim_runs import result_of
    a, b = (result_of(dict(gpu_generator.draw_gpu(120), seed=s)) for s in (1, 2))
    la, lb = (next(lv for lv in r["levels"] if lv["name"] == "L1") for r in (a, b))
    assert abs(lb["bandwidth_gbs"] / la["bandwidth_gbs"] - 1) > 0.02      # the seeds' move is real
    assert min(la["bandwidth_repeatability"], lb["bandwidth_repeatability"]) > 0.005
    assert not compare_results(a, b).drifted


def test_memory_speed_is_read_past_a_random_tail():
    """Generated GPU 23 (seed 3): a random-replacement L4 (309 MiB) runs its partial hits on for
    octaves into memory's plateau; its median read memory 11.7% fast, an outlier among eight seeds
    of one GPU. Only points the fitted tail leaves unlifted count."""
    import gpu_generator
    from sim_runs import result_of
    spec = dict(gpu_generator.draw_gpu(23), seed=3)
    truth = {lv["name"]: lv["bandwidth_gbs"] for lv in spec["levels"]}
    res = result_of(spec)
    assert [lv["name"] for lv in res["levels"]] == list(truth)
    for lv in res["levels"]:
        assert abs(lv["bandwidth_gbs"] / truth[lv["name"]] - 1) < 0.03, lv["name"]


def test_a_rerun_that_another_model_wins_is_not_drift(monkeypatch):
    """Generated GPU 26's L2 (a random-replacement fall at a 1.2x ratio under 2.9% noise, 64 MiB):
    most seeds read a random tail, one (seed 2 today) a few-way LRU share that puts it some 15%
    larger. Each run's repeatability counts how likely a model with too little evidence to move
    its estimate is to win a rerun, so compare calls no pair of the eight seeds a drift (before,
    generated GPU 24's seeds 3 and 8 said 2% each and read +25% apart, a drift). Its fall measured
    again for precision (detector.precision), the seeds read within 12%: the runs here are without
    those rounds, the case the repeatability must still tell."""
    import itertools
    import gpu_generator
    import sim_runs
    import detect_caches.pipeline.sweep_detect as sweep_detect
    specs = [json.dumps(dict(gpu_generator.draw_gpu(26), seed=s), sort_keys=True) for s in range(1, 9)]
    precise = [next(lv for lv in json.loads(sim_runs._run(s))["levels"] if lv["name"] == "L2")["capacity_bytes"]
               for s in specs]
    assert max(precise) / min(precise) - 1 < 0.12
    monkeypatch.setattr(sweep_detect, "PRECISION_ROUNDS", 0)
    runs = [json.loads(sim_runs._run.__wrapped__(s)) for s in specs]    # not the session's cache
    l2 = [next(lv for lv in r["levels"] if lv["name"] == "L2") for r in runs]
    caps = [lv["capacity_bytes"] for lv in l2]
    assert max(caps) / min(caps) - 1 > 0.12                     # the reading moved between seeds
    widest = max(range(8), key=lambda k: abs(math.log(caps[k] / float(np.median(caps)))))
    assert l2[widest]["capacity_repeatability"] > 0.05          # ... and the run that moved says so
    for a, b in itertools.combinations(runs, 2):
        assert not compare_results(a, b).drifted


def test_fleet_json_rows_are_the_same_document_as_the_indented_form():
    from detect_caches.reports.result_json import dumps, dumps_rows
    import numpy as np
    doc = {"schema_version": 3, "empty": [], "rows": [{"a": 1.5, "b": [1, [2, 3]], "c": float("nan")},
                                                     {"n": np.float64(2.0), "t": (1, 2), "s": "é\"x"}],
           "nested": {"k": [1, 2]}, 7: "int key", None: True}
    text = dumps_rows(doc)
    assert json.loads(text) == json.loads(dumps(doc))
    assert text.count("\n") == 11             # a line per key and per row


@pytest.mark.parametrize("n", [3, 6, 9, 14])
def test_a_few_points_spread_reads_their_sigma(n):
    """A plateau of a few points says its noise unbiased (1.4826 MAD alone reads it short by up to
    a third; identical GPUs then drifted by chance: generated GPU 149's six-point L1 plateau)."""
    import numpy as np
    from detect_caches.detector.level_figures import mad_small_sample
    x = np.random.default_rng(n).normal(size=(40000, n))
    mad = 1.4826 * np.median(np.abs(x - np.median(x, axis=1, keepdims=True)), axis=1)
    assert abs(mad.mean() * mad_small_sample(n) - 1) < 0.02
    assert mad.mean() < 0.95      # without the factor the sigma reads short
