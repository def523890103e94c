"""Reliability, by class of failure (issue 16): a crash never reads as drift (exit 1 means drift
and nothing else), nothing hangs or grows without bound, no result is overwritten, lost or locked
away, and no input gives a silently wrong result. Each case ends with exit 2 and one line on
stderr, or with a result and a warning."""
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import detect_caches.cli
from detect_caches import main
from h200_runs import H200

ROOT = Path(__file__).resolve().parents[1]
H200_V1 = H200 / "2026-11-29-v1" / "result.json"
H200_CSV = H200 / "2026-11-29-v1" / "measurements.csv"


def cli(*args, env=None, timeout=120, cwd=None, **kw):
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "detect_caches", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd, **kw)


def one_line_exit_2(proc, needle: str = "") -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("detect-caches: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert needle in proc.stderr, proc.stderr


def _profile(tmp_path: Path, filename="p.json", **changes) -> Path:
    data = json.loads((ROOT / "measure" / "sim" / "profiles" / "h200.json").read_text())
    data.update(changes)
    path = tmp_path / filename
    path.write_text(json.dumps(data))
    return path


# -- 1. an unexpected failure is exit 2 with its traceback saved, never exit 1 --------------------

def test_an_internal_error_is_exit_2_with_the_traceback_in_a_file(monkeypatch, capsys):
    def broken(argv):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(detect_caches.cli, "cmd_compare", broken)
    code = main(["compare", "a", "b"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "internal error: ZeroDivisionError" in err
    saved = Path(re.search(r"traceback saved in (\S+);", err).group(1))
    assert "Traceback" in saved.read_text() and "broken" in saved.read_text()
    saved.unlink()


@pytest.mark.parametrize("args,needle", [
    (["--simulate", "{p:noise_bursts=[{\"after_calls\": \"x\"}]}"], "noise_bursts"),
    (["--simulate", "{p:outlier_rate=\"often\"}"], "outlier_rate"),
    (["--simulate", "{p:seed=-1}"], "seed"),
    (["--simulate", "{p:warp_size=0}", "--timing", "device"], "warp_size"),
    (["--simulate", "h200", "--max-working-set", "0.5"], "at least 16 MiB"),
    (["--simulate", "h200,h200", "--out", "{file}"], "not a folder"),
    (["--simulate", "h200", "--out", "{file}/sub"], "not a folder"),
    (["--simulate", "h200", "--budget", "nan"], "not a number"),
    (["--simulate", "h200", "--max-working-set", "inf"], "finite number"),
    (["--simulate", "h200", "--budget", "5"], "too small"),
    (["--simulate", "h200", "--sweeps", "private,bogus"], "--sweeps"),
    (["compare", "{bad_result}", "{v1}"], "bandwidth_spread_gbs"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    (tmp_path / "file").write_text("x")
    bad = json.loads(H200_V1.read_text())
    bad["levels"][0]["bandwidth_spread_gbs"] = "wide"
    (tmp_path / "bad.json").write_text(json.dumps(bad))

    def fill(a: str) -> str:
        m = re.fullmatch(r"\{p:(\w+)=(.*)\}", a)
        if m:
            return str(_profile(tmp_path, **{m.group(1): json.loads(m.group(2))}))
        return a.format(file=tmp_path / "file", bad_result=tmp_path / "bad.json", v1=H200_V1)
    proc = cli(*map(fill, args), "--quiet" if args[0] != "compare" else "--force", cwd=tmp_path)
    one_line_exit_2(proc, needle)
    assert not any(p.name.startswith("detect-caches-results") for p in tmp_path.iterdir())   # nothing half made


@pytest.mark.parametrize("env,needle", [
    ({"RANK": "abc", "WORLD_SIZE": "1"}, "RANK"),
    ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "x", "MASTER_ADDR": "127.0.0.1"}, "SLURM_NTASKS"),
])
def test_bad_launcher_variables_are_one_line(tmp_path, env, needle):
    one_line_exit_2(cli("--simulate", "h200", "--quiet", env=env, cwd=tmp_path), needle)


def test_a_full_disk_under_stdout_is_exit_2(tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "detect_caches", "compare", str(H200_V1), str(H200_V1)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2 and "No space left on device" in proc.stderr and proc.stderr.count("\n") == 1


def test_a_full_disk_under_out_keeps_the_measurements(tmp_path, monkeypatch, capsys):
    import detect_caches.reports.atomic as atomic
    real = atomic.write_text_atomic

    def full(path, text):
        if Path(path).name == "report.md":
            raise OSError(28, "No space left on device", str(path))
        return real(path, text)
    monkeypatch.setattr(atomic, "write_text_atomic", full)
    out = tmp_path / "run"
    code = main(["--simulate", "h200", "--no-latency", "--no-peaks", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err
    rows = (out / "measurements.csv").read_text().splitlines()
    assert len(rows) > 100          # what was measured is still there
    assert not (out / ".detect-caches-claim").exists()


def test_dollar_signs_in_names_and_folders(tmp_path):
    prof = _profile(tmp_path, "$cost$.json", name="$x^2$ card_{1}")
    out = tmp_path / "run $HOME $a$"
    proc = cli("--simulate", prof, "--no-latency", "--no-peaks", "--out", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert (out / "bandwidth.png").stat().st_size > 10_000
    assert "$x^2$ card_{1}" in (out / "report.md").read_text()


def test_stderr_closed_still_writes_every_file(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(f"{sys.executable} -m detect_caches --simulate h200 --no-latency --out '{out}' 2>&-",
                          shell=True, capture_output=False, stdout=subprocess.PIPE, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0
    assert {p.name for p in out.iterdir()} == {"measurements.csv", "result.json", "report.md", "report.html",
                                               "bandwidth.png"}


def test_two_seed_benchmarks_in_one_second_keep_both(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-m", "detect_caches", "benchmark", "--simulate", "h200",
                               "--results-dir", str(tmp_path), "--num-repeat", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT))) for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    assert len(list(tmp_path.rglob("*.csv"))) == 4     # two details and two summaries, none replaced


# -- 2. nothing hangs, nothing grows without bound ------------------------------------------------

@pytest.mark.parametrize("args", [
    ["analyze", "{fifo}"], ["analyze", "/dev/zero"], ["compare", "/dev/zero", "{v1}"], ["fleet", "/dev/zero"],
    ["history", "/dev/zero"], ["--simulate", "/dev/zero"], ["--simulate", "{fifo}"],
    ["--simulate", "h200", "--baseline", "/dev/zero"], ["--simulate", "h200", "--baseline", "{fifo}"],
    ["analyze", "{csv}", "--device-json", "/dev/zero"], ["analyze", "{csv}", "--device-json", "{fifo}"],
])
def test_pipes_and_devices_are_refused_at_once(tmp_path, args):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t = time.perf_counter()
    proc = cli(*[a.format(fifo=fifo, v1=H200_V1, csv=H200_CSV) for a in args], timeout=60, cwd=tmp_path)
    assert time.perf_counter() - t < 30
    one_line_exit_2(proc)
    assert re.search(r"not a regular file|no such file", proc.stderr)


def test_a_huge_file_is_refused_by_size(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(200 * 2**20)          # sparse: 200 MiB of zeros, no disk used
    one_line_exit_2(cli("compare", big, H200_V1, "--force"), "")


def test_slurm_without_srun_gives_up_in_bounded_time(tmp_path):
    pytest.importorskip("torch.distributed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "DETECT_CACHES_RENDEZVOUS_SECONDS": "5"}
    t = time.perf_counter()
    proc = cli("--simulate", "h200", "--quiet", "--out", tmp_path / "fleet", env=env, timeout=120)
    assert time.perf_counter() - t < 90
    one_line_exit_2(proc, "could not form the process group within 5 s")


# -- 3. results never overwritten, lost or locked away ---------------------------------------------

def test_concurrent_runs_into_one_folder_one_wins(tmp_path):
    out = tmp_path / "shared-out"
    procs = [subprocess.Popen([sys.executable, "-m", "detect_caches", "analyze", str(H200_CSV), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT))) for _ in range(4)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2, 2, 2], results
    for code, err in results:
        if code == 2:
            assert re.search(r"already exists|being written by another", err) and err.count("\n") == 1
    assert json.loads((out / "result.json").read_text())["schema_version"] == 3


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_get_the_mode_the_umask_gives(tmp_path, umask, mode):
    out = tmp_path / "run"
    proc = subprocess.run(f"umask {umask:03o}; {sys.executable} -m detect_caches --simulate h200,h200 "
                          f"--no-latency --no-peaks --out '{out}'", shell=True, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"result.json", "report.md", "bandwidth.png", "measurements.csv", "fleet.md", "fleet.json",
            "fleet.csv", "fleet.png"} <= names
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {mode}


def test_sigterm_to_a_node_run_stops_its_children(tmp_path):
    out = tmp_path / "node"
    slow = _profile(tmp_path, "slow.json", launch_sleep_ms=50)     # each launch takes a while
    proc = subprocess.Popen([sys.executable, "-m", "detect_caches", "--simulate", f"{slow},{slow}", "--out", str(out),
                             "--no-latency"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    def rows(i: int) -> int:
        path = out / f"gpu{i}" / "measurements.csv"
        return len(path.read_text().splitlines()) - 1 if path.exists() else 0
    deadline = time.time() + 60
    while time.time() < deadline and not all(rows(i) > 0 for i in (0, 1)):   # both measuring
        time.sleep(0.1)
    seen = [rows(i) for i in (0, 1)]
    assert min(seen) > 0, seen
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    err = proc.stderr.read()
    assert code == 2 and "signal" in err, err
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(out) not in ps                     # no child left measuring
    assert all(rows(i) >= seen[i] for i in (0, 1)), seen          # what was measured is kept


def test_a_baseline_of_another_model_is_refused_before_measuring(tmp_path):
    out = tmp_path / "run"
    proc = cli("--simulate", "h200", "--baseline", H200_V1, "--out", out, "--quiet")
    one_line_exit_2(proc, "different device models")
    assert not out.exists()


def test_device_timing_that_needs_two_waves_is_refused_before_launching(tmp_path):
    out = tmp_path / "run"
    proc = cli("--simulate", "h200", "--timing", "device", "--grid-multiplier", "16", "--sweeps", "shared",
               "--out", out, "--quiet")
    one_line_exit_2(proc, "one wave")
    assert not (out / "measurements.csv").exists() or len((out / "measurements.csv").read_text().splitlines()) <= 1


# -- 4. no silently wrong results, no misleading messages ------------------------------------------

def test_a_row_cut_short_is_left_out_with_a_warning(tmp_path):
    text = H200_CSV.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text.rstrip("\n").rsplit(",", 6)[0] + "\n")
    proc = cli("analyze", cut, "--out", tmp_path / "a", "--json")
    assert proc.returncode == 0, proc.stderr
    warnings = json.loads(proc.stdout)["warnings"]
    assert any("cut short" in w and "left out" in w for w in warnings)
    # in the middle of the file it is an error, not a guess
    lines = text.splitlines()
    lines[5] = lines[5].rsplit(",", 6)[0]
    (tmp_path / "mid.csv").write_text("\n".join(lines) + "\n")
    one_line_exit_2(cli("analyze", tmp_path / "mid.csv", "--out", tmp_path / "b"), "fewer fields")


def test_a_duplicated_column_is_refused(tmp_path):
    lines = H200_CSV.read_text().splitlines()
    lines = [line + "," + line.split(",")[2] for line in lines]
    (tmp_path / "dup.csv").write_text("\n".join(lines) + "\n")
    one_line_exit_2(cli("analyze", tmp_path / "dup.csv", "--out", tmp_path / "a"), "more than once")


@pytest.mark.parametrize("field,value,needle", [
    ("sm_clock_max_mhz", "NaN", "not a number JSON allows"), ("sm_clock_max_mhz", -1500, "sm_clock_max_mhz"),
    ("compute_units", -4, "compute_units"), ("l2_bytes_reported", "lots", "l2_bytes_reported"),
    ("warp_size", 0, "warp_size"), ("xcds", 1000, "xcds"),
])
def test_device_json_fields_are_checked(tmp_path, field, value, needle):
    dev = json.loads(H200_V1.read_text())["device"]
    dev[field] = value
    path = tmp_path / "device.json"
    path.write_text(json.dumps(dev).replace('"NaN"', "NaN"))
    one_line_exit_2(cli("analyze", H200_CSV, "--device-json", path, "--out", tmp_path / "a"), needle)


def test_a_result_that_fails_its_own_schema_is_an_internal_error(tmp_path, monkeypatch, capsys):
    import detect_caches.reports.result_json as rj
    real = rj.build_result

    def bad(*a, **kw):
        data = real(*a, **kw)
        data["levels"][0]["bandwidth_gbs"] = -1.0
        return data
    monkeypatch.setattr(rj, "build_result", bad)
    out = tmp_path / "run"
    code = main(["analyze", str(H200_CSV), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" in err and "please report it" in err
    assert not (out / "result.json").exists() and not (out / "report.md").exists()   # nothing half written
    Path(re.search(r"traceback saved in (\S+);", err).group(1)).unlink()


def test_a_node_with_one_bad_profile_names_it_and_keeps_the_rest(tmp_path):
    bad = _profile(tmp_path, "bad.json", noise=7)
    out = tmp_path / "node"
    proc = cli("--simulate", f"h200,{bad}", "--no-latency", "--no-peaks", "--out", out, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "GPU 1: exit 2" in proc.stderr and "noise" in proc.stderr
    assert (out / "gpu0" / "result.json").exists() and (out / "fleet.md").exists()
    assert "GPUs without a result: GPU 1" in (out / "fleet.md").read_text()


def test_an_unreadable_result_in_a_fleet_is_named_and_exit_2(tmp_path):
    for i in range(3):
        (tmp_path / f"g{i}").mkdir()
        (tmp_path / f"g{i}" / "result.json").write_text(H200_V1.read_text().replace('"index": 0', f'"index": {i}'))
    (tmp_path / "g1" / "result.json").write_text("{ not json")
    proc = cli("fleet", tmp_path)
    assert proc.returncode == 2 and "g1/result.json" in proc.stdout and "g1/result.json" in proc.stderr
    # the last line says why the exit is 2, as history's does; the report's verdict says it too
    assert proc.stderr.strip().splitlines()[-1].endswith("1 GPU(s) without a result; the check is incomplete")
    assert "Result: no outliers; **incomplete**" in proc.stdout


def test_sigterm_to_a_run_keeps_what_it_measured(tmp_path):
    out = tmp_path / "run"
    slow = _profile(tmp_path, "slow.json", launch_sleep_ms=50)
    proc = subprocess.Popen([sys.executable, "-m", "detect_caches", "--simulate", str(slow), "--out", str(out),
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    csv = out / "measurements.csv"
    deadline = time.time() + 60
    while time.time() < deadline and not (csv.exists() and len(csv.read_text().splitlines()) > 1):
        time.sleep(0.1)
    seen = len(csv.read_text().splitlines()) - 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 2
    err = proc.stderr.read()
    said = int(re.search(r"interrupted; the (\d+) measurements taken are kept", err).group(1))
    assert said >= seen > 0 and len((out / "measurements.csv").read_text().splitlines()) == 1 + said
    assert not (out / ".detect-caches-claim").exists()
