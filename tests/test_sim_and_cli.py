"""The adaptive sweep against a simulated GPU with a known truth, and the command line end to end."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from detect_caches import main
from detector.analyze import detect_levels
from measure.launch import LaunchConfig
from measure.point import PointMeter
from measure.records import MeasurementLog
from measure.simulated import SimulatedGPU, parse_profile
from measure.sweep import AdaptiveSweep, SweepPlan

KIB = 1024


def random_profile(seed):
    rng = np.random.default_rng(seed)
    l1 = int(rng.integers(20, 240)) * KIB
    l2 = int(rng.integers(3 * 1024, 80 * 1024)) * KIB
    return {"name": f"r{seed}", "vendor": "nvidia", "compute_units": int(rng.integers(40, 140)),
            "l2_bytes_reported": l2, "noise": float(rng.uniform(0.01, 0.03)), "seed": seed,
            "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": l1, "bandwidth_gbs": 20000,
                        "transition": "sharp"},
                       {"name": "L2", "scope": "device", "capacity_bytes": l2, "bandwidth_gbs": 7000,
                        "transition": "hashed", "width": 0.05},
                       {"name": "HBM", "bandwidth_gbs": 2500}]}


@pytest.mark.parametrize("seed", range(6))
def test_sharp_l1_found_within_one_kib_and_l2_within_interval(seed):
    prof = parse_profile(random_profile(seed))
    gpu = SimulatedGPU(prof)
    log = MeasurementLog(None)
    meter = PointMeter(gpu)
    cus = prof.facts.compute_units
    AdaptiveSweep(meter, SweepPlan(LaunchConfig("private", cus, 2048, 8, 1, "cached"), 4 * KIB, 1 << 20), log).run()
    AdaptiveSweep(meter, SweepPlan(LaunchConfig("shared", cus * 4, 1024, 8, 1, "l2only"), 4 * KIB,
                                   16 * prof.true_capacity("L2") // (cus * 4) // KIB * KIB), log).run()
    assert len(log.records) <= 300
    det = detect_levels(log.records, prof.facts)
    names = [lv.name for lv in det.levels]
    assert names == ["L1", "L2", "HBM"], names
    l1, l2 = det.levels[0], det.levels[1]
    true_l1, true_l2 = prof.true_capacity("L1"), prof.true_capacity("L2")
    assert abs(l1.onset_bytes - true_l1) <= KIB, (l1.onset_bytes, true_l1)   # the cliff, to 1 KiB
    assert l1.capacity_low_bytes - KIB <= true_l1 <= l1.capacity_high_bytes + KIB
    assert l2.capacity_low_bytes <= true_l2 <= l2.capacity_high_bytes


def test_sweep_is_deterministic():
    runs = []
    for _ in range(2):
        prof = parse_profile(random_profile(11))
        log = MeasurementLog(None)
        AdaptiveSweep(PointMeter(SimulatedGPU(prof)), SweepPlan(LaunchConfig("private", 60, 2048, 8, 1, "cached"),
                                                                  4 * KIB, 1 << 20), log).run()
        runs.append([(m.working_set_bytes, round(m.bandwidth_gbs, 6)) for m in log.records])
    assert runs[0] == runs[1]


def run_cli(*args):
    proc = subprocess.run([sys.executable, "-m", "detect_caches", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("sim")
    for name in ("a", "b"):
        assert main(["--simulate", "h200", "--quiet", "--out", str(base / name)]) == 0
    return base


def test_simulated_run_writes_every_file(sim_runs):
    out = sim_runs / "a"
    for f in ("report.md", "result.json", "measurements.csv", "bandwidth.png"):
        assert (out / f).stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "SIMULATED" in report and "| L1 |" in report and "![bandwidth" in report
    result = json.loads((out / "result.json").read_text())
    assert result["schema_version"] == 1 and result["device"]["simulated"] is True
    assert [lv["name"] for lv in result["levels"]] == ["L1", "L2", "HBM"]
    assert (out / "bandwidth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_same_profile_no_drift(sim_runs):
    code, out, _ = run_cli("compare", str(sim_runs / "a" / "result.json"), str(sim_runs / "b" / "result.json"))
    assert code == 0 and "no drift" in out


def test_compare_finds_drift(sim_runs, tmp_path):
    cur = json.loads((sim_runs / "a" / "result.json").read_text())
    l2 = cur["levels"][1]
    for k in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes"):
        l2[k] = l2[k] // 2
    (tmp_path / "cur.json").write_text(json.dumps(cur))
    code, out, _ = run_cli("compare", str(sim_runs / "a" / "result.json"), str(tmp_path / "cur.json"))
    assert code == 1 and "DRIFT" in out
    cur["levels"].pop(1)
    (tmp_path / "cur.json").write_text(json.dumps(cur))
    code, out, _ = run_cli("compare", str(sim_runs / "a" / "result.json"), str(tmp_path / "cur.json"))
    assert code == 1 and "vanished" in out


@pytest.mark.parametrize("content,needle", [("", "empty"), ("{", "not valid JSON"),
                                            ('{"schema_version": 2}', "schema_version 2"),
                                            ('[1,2]', "JSON object")])
def test_compare_rejects_bad_results(sim_runs, tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = run_cli("compare", str(sim_runs / "a" / "result.json"), str(bad))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_compare_rejects_other_device_unless_forced(sim_runs, tmp_path):
    cur = json.loads((sim_runs / "a" / "result.json").read_text())
    cur["device"]["name"] = "another GPU"
    (tmp_path / "o.json").write_text(json.dumps(cur))
    assert run_cli("compare", str(sim_runs / "a" / "result.json"), str(tmp_path / "o.json"))[0] == 2
    assert run_cli("compare", "--force", str(sim_runs / "a" / "result.json"), str(tmp_path / "o.json"))[0] == 0


def test_analyze_reproduces_live_levels(sim_runs, tmp_path):
    code, out, err = run_cli("analyze", str(sim_runs / "a" / "measurements.csv"), "--device-json",
                             str(sim_runs / "a" / "result.json"), "--out", str(tmp_path / "an"), "--json")
    assert code == 0, err
    live = json.loads((sim_runs / "a" / "result.json").read_text())
    again = json.loads(out)
    assert [lv["capacity_bytes"] for lv in again["levels"]] == [lv["capacity_bytes"] for lv in live["levels"]]


@pytest.mark.parametrize("args,needle", [
    (["--simulate", "nosuch"], "no built-in profile"),
    (["--gpu", "0", "--budget", "0"], "must be > 0"),
    (["run", "--simulate", "h200", "--block-size", "100"], "power of two"),
    (["run", "--simulate", "h200", "--stream-elements", "100"], "multiple of 256"),
    (["analyze", "/nonexistent.csv"], "no such file"),
    ([], "one of the arguments --gpu --simulate is required"),
])
def test_bad_arguments_one_line_exit_2(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_never_overwrites(sim_runs):
    code, _, err = run_cli("--simulate", "h200", "--quiet", "--out", str(sim_runs / "a"))
    assert code == 2 and "already exists" in err


def test_no_gpu_says_what_to_do():
    code, _, err = run_cli("--gpu", "0", "--quiet", "--out", "/tmp/never-made-detect-caches")
    assert code == 2 and ("--simulate" in err or "does not exist" in err)
