"""The adaptive sweep against a simulated GPU with a known truth, and the command line end to end."""
import os
import re
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from detect_caches import main
from detect_caches.detector.analyze import detect_levels
from detect_caches.measure.launch import LaunchConfig
from detect_caches.measure.point import PointMeter
from detect_caches.records import MeasurementLog
from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
from detect_caches.measure.sweep import AdaptiveSweep, SweepPlan

ROOT = Path(__file__).resolve().parents[1]

KIB = 1024


def random_profile(seed):
    """2 to 4 levels: an L1 cliff, then optionally an L2 (device-wide, or per XCD on AMD) and an
    Infinity Cache, both hashed (gradual), and memory; sizes not powers of two, 1-3% noise."""
    rng = np.random.default_rng(seed)
    amd = bool(rng.integers(2))
    xcds = int(rng.choice([4, 8])) if amd else 1
    cus = xcds * int(rng.integers(20, 40)) if amd else int(rng.integers(40, 140))
    n_device = int(rng.integers(0, 3 if amd else 2))
    levels = [{"name": "L1", "scope": "per_cu", "capacity_bytes": int(rng.integers(12, 240)) * KIB,
               "bandwidth_gbs": 30000, "transition": "sharp"}]
    prof = {"name": f"r{seed}", "vendor": "amd" if amd else "nvidia", "compute_units": cus, "xcds": xcds,
            "arch": ("gfx942" if n_device == 2 else "gfx90a") if amd else "sm_90",
            "noise": float(rng.uniform(0.01, 0.03)), "seed": seed}
    bw = 30000.0
    if n_device >= 1:
        l2 = int(rng.integers(2 * 1024, (8 if amd else 40) * 1024)) * KIB
        bw /= rng.uniform(1.8, 3.5)
        levels.append({"name": "L2", "scope": "per_xcd" if amd else "device", "capacity_bytes": l2,
                       "bandwidth_gbs": bw, "transition": "hashed", "width": float(rng.uniform(0.03, 0.08))})
        prof["l2_bytes_reported"] = l2
    if n_device >= 2:
        ic = int(rng.integers(96, 300)) * 1024 * KIB
        bw /= rng.uniform(1.8, 3)
        levels.append({"name": "Infinity Cache", "scope": "device", "capacity_bytes": ic, "bandwidth_gbs": bw,
                       "transition": "hashed", "width": float(rng.uniform(0.03, 0.08))})
        prof["llc_bytes_reported"] = ic
    levels.append({"name": "HBM", "bandwidth_gbs": bw / rng.uniform(1.8, 3)})
    prof["levels"] = levels
    return prof


MEASUREMENT_BOUND = 300   # the default --budget; 4-level profiles took 129-148 in trials


@pytest.mark.parametrize("seed", range(24))
def test_random_profiles_found_and_sized(seed):
    """Every level found and named; every capacity within 3% of the truth (cliffs exactly)."""
    from detect_caches.measure.session import SessionOptions, characterize
    spec = random_profile(seed)
    prof = parse_profile(spec)
    log = MeasurementLog(None)
    characterize(SimulatedGPU(prof), log, SessionOptions())
    assert len(log.records) <= MEASUREMENT_BOUND
    det = detect_levels(log.records, prof.facts)
    assert [lv.name for lv in det.levels] == [lv["name"] for lv in spec["levels"]]
    for lv, truth in zip(det.levels, spec["levels"]):
        true = truth.get("capacity_bytes")
        if true is None:
            assert lv.capacity_bytes is None
        elif truth["transition"] == "sharp":
            assert abs(lv.capacity_bytes - true) <= 1024, (lv.capacity_bytes, true)
        else:
            assert abs(lv.capacity_bytes / true - 1) <= 0.03, (lv.name, lv.capacity_bytes, true)
        if truth.get("scope") == "per_xcd":
            assert lv.scope == "per_xcd" and lv.aggregate_capacity_bytes == spec["xcds"] * lv.capacity_bytes


def test_simulated_mi300x_end_to_end(tmp_path):
    # the simulated MI300X's L1 (a pseudo-LRU decline only 1.4x above the L2) is uncertain: its
    # confidence has read 0.2 to 0.8 (the doubt line's exit code: tests/test_exit_codes.py), so the
    # result is accepted either way
    assert main(["--simulate", "mi300x", "--quiet", "--accept-incomplete", "--out", str(tmp_path / "mi")]) == 0
    result = json.loads((tmp_path / "mi" / "result.json").read_text())
    by_name = {lv["name"]: lv for lv in result["levels"]}
    assert list(by_name) == ["L1", "L2", "Infinity Cache", "HBM"]
    assert by_name["L2"]["scope"] == "per_xcd"
    for name, size in (("L2", 4 * 1024 * KIB), ("Infinity Cache", 256 * 1024 * KIB)):
        lv = by_name[name]
        assert abs(lv["capacity_bytes"] / size - 1) <= 0.03, name
    # L1 over L2 is 1.4x only (test_capacity_sim.KNOWN_MISSES says why the L1 is looser): its
    # interval holds the size and says the doubt (24-43 KiB with up to four refining rounds,
    # 30-36.5 KiB with six): the sag's start is what places it, and the figure moves with the
    # noise. This run read 37.8 KiB, then 32.75 KiB after the second refining round, 36.5 KiB
    # (+14%) since the round also measures where the models part (de3fb44), and 32.75 KiB with
    # six rounds; over 24 seeds (sweep_and_detect, SIMULATED) the L1 was within 10% on 19 both
    # before and after de3fb44, beyond 15% on 4 before and 3 after (issue 28, target 2)
    l1 = by_name["L1"]
    assert abs(l1["capacity_bytes"] / (32 * KIB) - 1) <= 0.15
    assert l1["capacity_low_bytes"] <= 32 * KIB <= l1["capacity_high_bytes"]
    assert l1["capacity_high_bytes"] / l1["capacity_low_bytes"] > 1.1
    assert not any("above its physical ceiling" in w for w in result["warnings"])
    report = (tmp_path / "mi" / "report.md").read_text()
    assert "per XCD" in report and "Infinity Cache" in report


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


def test_result_json_round_trips(sim_runs, tmp_path):
    from detect_caches.reports.result_json import read_result, write_result
    original = read_result(sim_runs / "a")
    write_result(tmp_path / "r.json", original)
    assert read_result(tmp_path / "r.json") == original
    broken = dict(original, levels=[dict(original["levels"][0], confidence=2.0)])
    with pytest.raises(Exception, match="confidence"):
        write_result(tmp_path / "bad.json", broken)
    assert not (tmp_path / "bad.json").exists()


def test_simulated_run_writes_every_file(sim_runs):
    out = sim_runs / "a"
    for f in ("report.md", "result.json", "measurements.csv", "bandwidth.png"):
        assert (out / f).stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "SIMULATED" in report and "| L1 |" in report and "![bandwidth" in report
    result = json.loads((out / "result.json").read_text())
    assert result["schema_version"] == 3 and result["device"]["simulated"] is True
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
                                            ('{"schema_version": 99}', "schema_version 99"),
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
    (["--gpu", "0", "--budget", "0"], "must be a finite number > 0"),
    (["run", "--simulate", "h200", "--block-size", "100"], "power of two"),
    (["run", "--simulate", "h200", "--stream-elements", "100"], "multiple of 256"),
    (["run", "--simulate", "h200", "--num-warps", "3"], "argument --num-warps: must be a power of two"),
    (["benchmark", "--simulate", "h200", "--test-name", "../escape"], "file name prefix"),
    (["--simulate", "h200", "--budget", "99999999999999999999999"], "must be from 60 to 100000"),
    (["--simulate", "h200", "--budget", "2.5"], "'2.5' is not a whole number"),
    (["--simulate", "h200", "--budget", "1e1"], "too small to find levels"),      # 1e1 read as 10
    (["run", "--simulate", "h200", "--load-iterations", "1"], "--load-iterations must be at least 4"),
    (["--simulate", "h200", "--sweeps", "private,private"], "got 'private,private'"),
    (["analyze", "/nonexistent.csv"], "no such file"),
    ([], "say what to measure"),
])
def test_bad_arguments_one_line_exit_2(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_refused_analyze_leaves_no_folder(sim_runs, tmp_path):
    """A CSV refused (a bandwidth past any GPU's) or too small to analyze: one line, exit 2, and
    no empty output folder left behind (nor its parents); a folder the user made stays, and an
    earlier result that overwrite=True would replace stays until a new one is written."""
    rows = (sim_runs / "a" / "measurements.csv").read_text().splitlines()
    head = rows[0].split(",")
    row = rows[1].split(",")
    row[head.index("bandwidth_gbs")] = "1e30"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([rows[0], ",".join(row)] + rows[2:]) + "\n")
    small = tmp_path / "small.csv"
    small.write_text("sweep,working_set_bytes,bandwidth_gbs\nshared,1024,5000\n")
    (tmp_path / "mine").mkdir()
    for csv, out in ((bad, "o1"), (small, "deep/o2"), (small, "mine"), (small, "no/../mine")):
        code, _, err = run_cli("analyze", str(csv), "--out", str(tmp_path / out))
        assert code == 2 and len(err.strip().splitlines()) == 1 and "internal" not in err, err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "deep").exists()
    assert (tmp_path / "mine").is_dir() and not list((tmp_path / "mine").iterdir())
    from detect_caches.errors import InputError
    from detect_caches.pipeline.api_analysis import analyze
    earlier = analyze(sim_runs / "a" / "measurements.csv", sim_runs / "a" / "result.json", out=tmp_path / "nb")
    with pytest.raises(InputError):
        analyze(small, out=tmp_path / "nb", overwrite=True)
    assert json.loads((tmp_path / "nb" / "result.json").read_text())["levels"] == earlier.data["levels"]


def test_never_overwrites(sim_runs):
    code, _, err = run_cli("--simulate", "h200", "--quiet", "--out", str(sim_runs / "a"))
    assert code == 2 and "already exists" in err


def test_no_gpu_says_what_to_do():
    code, _, err = run_cli("--gpu", "0", "--quiet", "--out", "/tmp/never-made-detect-caches")
    assert code == 2 and ("--simulate" in err or "does not exist" in err)


# -- many GPUs: a node of simulated GPUs, torchrun with gloo, the fleet subcommand ------------

def _small_l2_profile(tmp_path: Path) -> Path:
    data = json.loads((ROOT / "measure" / "sim" / "profiles" / "h200.json").read_text())
    data["levels"][1]["capacity_bytes"] = 40 * 2**20     # one GPU with a third of its L2 gone
    path = tmp_path / "h200-small-l2.json"
    path.write_text(json.dumps(data))
    return path


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def test_node_of_simulated_gpus_flags_exactly_the_small_cache(tmp_path):
    small = _small_l2_profile(tmp_path)
    out = tmp_path / "node"
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "--simulate", f"h200,h200,{small}",
                           "--out", str(out), "--no-peaks"], env=_env(), capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    fleet = json.loads((out / "fleet.json").read_text())
    # outliers first: the GPU with the small L2 (index 2), then the others in order
    assert [g["label"].split(":")[1] for g in fleet["gpus"]] == ["2", "0", "1"]
    assert list(fleet["outliers"]) == [fleet["gpus"][0]["label"]] and fleet["gpus"][0]["outlier"]
    assert "L2" in fleet["outliers"][fleet["gpus"][0]["label"]][0]
    assert (out / "fleet.png").stat().st_size > 10_000 and (out / "fleet.csv").read_text().count("\n") == 4
    for i in range(3):
        assert (out / f"gpu{i}" / "result.json").exists() and (out / f"gpu{i}" / "report.md").exists()
    # the same report from the result files, collected any other way
    files = [str(out / f"gpu{i}" / "result.json") for i in range(3)]
    again = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", *files], env=_env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "1 outlier" in again.stdout
    ok = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", *files[:2]], env=_env(),
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "no outliers" in ok.stdout
    against = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", *files[:2], "--baseline", files[2]],
                             env=_env(), capture_output=True, text=True, timeout=120)
    assert against.returncode == 1 and "**2 outlier(s)**" in against.stdout   # both drift from it
    assert against.stdout.split("## Levels")[0].count("vs baseline") == 2
    dup = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", files[0], files[0]], env=_env(),
                         capture_output=True, text=True, timeout=120)
    # the same GPU twice counts once (its newest result), and says so
    assert dup.returncode == 0 and "1 older result(s)" in dup.stdout and "1 GPU(s)" in dup.stdout


def test_torchrun_gloo_fleet_flags_exactly_the_small_cache(tmp_path):
    small = _small_l2_profile(tmp_path)
    out = tmp_path / "fleet"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3",
                           "--master-port", str(29500 + os.getpid() % 1000), "-m", "detect_caches",
                           "--simulate", f"h200,h200,{small}", "--out", str(out), "--no-peaks", "--quiet"],
                          env=_env(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]      # drift from the fleet: exit 1
    fleet = json.loads((out / "fleet.json").read_text())
    assert len(fleet["gpus"]) == 3 and not fleet["failed"]
    flagged = list(fleet["outliers"])
    assert flagged == [g["label"] for g in fleet["gpus"] if g["device"]["index"] == 2]


@pytest.mark.parametrize("gpu", ["0,0", "-1,2", "x", ""])
def test_bad_gpu_lists_are_refused(gpu, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "--gpu", gpu, "--out", str(tmp_path / "o")],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# -- faults during a live run (simulated): nothing measured is lost ----------------------------

def _profile_with(tmp_path: Path, **extra) -> Path:
    data = json.loads((ROOT / "measure" / "sim" / "profiles" / "h200.json").read_text())
    data.update(extra)
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("fault,words", [("fail_after_calls", "launch failed"), ("interrupt_after_calls", "interrupted")])
def test_fault_mid_sweep_keeps_the_measurements(tmp_path, capsys, fault, words):
    out = tmp_path / "run"
    code = main(["--simulate", str(_profile_with(tmp_path, **{fault: 70})), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and words in err and "kept in" in err
    rows = (out / "measurements.csv").read_text().splitlines()
    said = int(re.search(r"the (\d+) measurements taken are kept", err).group(1))
    assert 50 < said < 70 and len(rows) == 1 + said   # every point measured before the fault (70 launches)
    assert not (out / "result.json").exists()
    # the partial folder is usable: analyze reports on what exists
    assert main(["analyze", str(out / "measurements.csv"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "report.md").exists()


def test_small_free_memory_caps_the_sweep_and_says_so(tmp_path):
    out = tmp_path / "run"
    assert main(["--simulate", str(_profile_with(tmp_path, total_memory_bytes=1 << 30)), "--out", str(out),
                 "--quiet", "--no-peaks"]) in (0, 1)
    result = json.loads((out / "result.json").read_text())
    assert any("free device memory" in w for w in result["warnings"])
    sizes = [int(r.split(",")[1]) for r in (out / "measurements.csv").read_text().splitlines()[1:]
             if r.startswith("shared")]
    assert sizes and max(sizes) <= 0.6 * (1 << 30)   # within what fits


def test_busy_gpu_is_detected_and_lowers_confidence(tmp_path):
    clean, busy = tmp_path / "clean", tmp_path / "busy"
    assert main(["--simulate", "h200", "--out", str(clean), "--quiet", "--no-peaks"]) == 0
    noisy = _profile_with(tmp_path, noise_bursts=[{"after_calls": 30, "calls": 60, "noise": 0.06}],
                          other_processes=2)
    assert main(["--simulate", str(noisy), "--out", str(busy), "--quiet", "--no-peaks"]) == 0
    c, b = (json.loads((p / "result.json").read_text()) for p in (clean, busy))
    warnings = " ".join(b["warnings"])
    assert "2 other process(es)" in warnings and "poor regression fit" in warnings
    assert not any("other process" in w for w in c["warnings"])
    conf = lambda r, name: next(lv["confidence"] for lv in r["levels"] if lv["name"] == name)  # noqa: E731
    # the burst (in the shared sweep, which runs first) lowers the confidence of what it touched,
    # and moves no capacity: the fits cap the residuals of the points it spoilt
    names = [lv["name"] for lv in c["levels"]]
    assert [lv["name"] for lv in b["levels"]] == names
    assert any(conf(b, n) < conf(c, n) for n in names)
    for bl, cl in zip(b["levels"], c["levels"]):
        if cl["capacity_bytes"]:
            assert abs(bl["capacity_bytes"] / cl["capacity_bytes"] - 1) < 0.01


def test_device_timing_on_the_simulator_and_single_wave_refusal(tmp_path, capsys):
    out = tmp_path / "dev"
    assert main(["--simulate", "h200", "--timing", "device", "--out", str(out), "--quiet", "--no-peaks"]) == 0
    rows = (out / "measurements.csv").read_text().splitlines()
    header = rows[0].split(",")
    bandwidth = [r.split(",") for r in rows[1:] if r.split(",")[header.index("metric")] == "bandwidth"]
    # every sweep and peak point on the in-kernel clock; the L2's stride probe is a regression of
    # whole launches (its figure is a ratio between strides, not a bandwidth of the level)
    sweeps = [r for r in bandwidth if r[header.index("phase")] != "sector"]
    assert sweeps and all(r[header.index("timing")] == "device" for r in sweeps)
    assert {r[header.index("timing")] for r in bandwidth if r[header.index("phase")] == "sector"} == {"events"}
    result = json.loads((out / "result.json").read_text())
    assert result["method"]["timing"] == "device" and [lv["name"] for lv in result["levels"]] == ["L1", "L2", "HBM"]
    # 16 programs of 8 warps per SM cannot all be resident: refused with one line
    code = main(["--simulate", "h200", "--timing", "device", "--grid-multiplier", "16", "--sweeps", "shared",
                 "--out", str(tmp_path / "refused"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "one wave" in err


def test_gpu_count_without_torch_where_nvml_answers(monkeypatch):
    """`--gpu all` counts GPUs through NVML (no torch import in the node's parent: 3-4 s on an
    H200 host); CUDA_VISIBLE_DEVICES narrows what torch sees, so then torch answers."""
    import detect_caches.measure.gpu.facts as gpu

    class FakeTorch:
        class cuda:
            is_available = staticmethod(lambda: True)
            device_count = staticmethod(lambda: 1)

    def no_torch():
        raise AssertionError("torch imported")
    monkeypatch.setattr(gpu.clocks, "nvidia_gpu_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpu, "_torch", no_torch)
    assert gpu.gpu_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(gpu, "_torch", lambda: FakeTorch)
    assert gpu.gpu_count() == 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(gpu.clocks, "nvidia_gpu_count", lambda: None)   # no NVML (AMD, no driver)
    assert gpu.gpu_count() == 1


def test_the_analysis_beside_the_latency_sweep_changes_nothing():
    """The bandwidth sweeps are analysed in a thread while the latency sweep measures; the run's
    levels are those of one plain pass over all its records (SIMULATED)."""
    import threading
    from detect_caches.measure.session import SessionOptions, measure_latency
    from detect_caches.measure.sim.profile import load_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    import functools
    import detect_caches.detector.analyze as analyze_module
    import detect_caches.detector.latency as latency_module
    device = SimulatedGPU(load_profile("mi300x"))
    log, opts, seen = MeasurementLog(None), SessionOptions(peak_budget=0), []
    real, analysed = analyze_module.analyze_sweep, []

    @functools.wraps(real)
    def counted(curve, *args, **kwargs):
        analysed.append((threading.current_thread().name, curve.sweep))
        return real(curve, *args, **kwargs)

    def latency(session):
        seen.append(any(t.name == "detect-caches-analysis" for t in threading.enumerate()))
        measure_latency(session, device, log, opts)
    analyze_module.analyze_sweep = latency_module.analyze_sweep = counted
    try:
        session, det, _ = sweep_and_detect(device, log, opts, before_detect=latency)
    finally:
        analyze_module.analyze_sweep = latency_module.analyze_sweep = real
    assert seen == [True] and session.method["analysis_beside_seconds"] > 0
    # the bandwidth sweeps analysed in the thread; the pass after the latency sweep took them from
    # the memo and analysed only the latency curve
    assert analysed[:2] == [("detect-caches-analysis", "shared"), ("detect-caches-analysis", "private")]
    assert analysed[2][1] == "chase" and analysed[2][0] != "detect-caches-analysis"
    assert any(r.sweep == "chase" for r in session.records)
    again = detect_levels(session.records, device.facts)
    figures = [(lv.name, lv.capacity_bytes, lv.bandwidth_gbs, lv.fall_shape, lv.latency_ns) for lv in det.levels]
    assert figures == [(lv.name, lv.capacity_bytes, lv.bandwidth_gbs, lv.fall_shape, lv.latency_ns)
                       for lv in again.levels]


def test_a_sweep_past_its_end_stops_when_its_budget_is_spent():
    """A last plateau faster than memory can be sends the sweep on past its planned end; with the
    budget spent there it must stop (it looped for ever: `--simulate h200 --budget 60` hung)."""
    import threading

    class Flat:
        calls = 0

        def measure(self, config, size, phase):
            Flat.calls += 1
            return Measurement("shared", size, 9000.0, stream_bytes=size, phase=phase)

    from detect_caches.records import Measurement
    plan = SweepPlan(LaunchConfig("shared", 528, 1024, 8, 1, "l2only"), 8 * KIB, 1024 * KIB, 4, 40,
                     extend_stream_bytes=1 << 40, memory_ceiling_log=3.0)
    sweep = AdaptiveSweep(Flat(), plan, MeasurementLog(None))
    done = threading.Thread(target=sweep.run, daemon=True)
    done.start()
    done.join(timeout=30)
    assert not done.is_alive() and Flat.calls <= 40
