"""Reliability, third pass (issue 25), by class: a bytecode cache that cannot be turned against
its user; every writer of an --out folder claims it; identity and time order; validation of
every number at the edges; the Python API leaves the process as it found it; text that is not
UTF-8; the late or unclear messages."""
import json
import marshal
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from detect_caches.errors import InputError
from h200_runs import H200

ROOT = Path(__file__).resolve().parents[1]
H200_V1 = H200 / "2026-11-29-v1" / "result.json"
NOBODY = 65534
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="needs root to plant files as another user")


def _env(**extra) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


def cli(*args, cwd=None, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "detect_caches", *map(str, args)], capture_output=True,
                          timeout=timeout, env=env or _env(), cwd=cwd, text=True, errors="backslashreplace")


def one_line(proc, needle: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-1500:])
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


# -- 1. the bytecode cache ---------------------------------------------------------------------

IMPORT = """
import sys, json
sys.path.insert(0, {root!r}); sys.path.insert(0, {lib!r})
from detect_caches.pipeline import bytecode
finder = bytecode.install()
import pkg.mod
bytecode.flush(10)
print(json.dumps({{"installed": finder is not None, "x": pkg.mod.X}}))
"""


@pytest.fixture
def lib(tmp_path):
    pkg = tmp_path / "lib" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("X = 1\n")
    return tmp_path / "lib"


def _import(lib: Path, cache: Path) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env.update(PYTHONDONTWRITEBYTECODE="1", DETECT_CACHES_BYTECODE_CACHE=str(cache))
    proc = subprocess.run([sys.executable, "-c", IMPORT.format(root=str(ROOT), lib=str(lib))], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def _plant(lib: Path, cache: Path, code: str = "X = 'planted'\n") -> Path:
    """A .pyc with the right header for pkg/mod.py, holding other code, where the cache looks."""
    from detect_caches.pipeline.bytecode import CachingLoader, _header
    src = lib / "pkg" / "mod.py"
    st = src.stat()
    path = Path(type("L", (CachingLoader,), {"root": str(cache)})("pkg.mod", str(src)).cache_path(str(src)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_header(st.st_mtime, st.st_size) + marshal.dumps(compile(code, str(src), "exec")))
    return path


@as_root
def test_a_cache_folder_of_another_user_is_refused_once_and_its_pyc_never_runs(lib, tmp_path):
    shared = tmp_path / "shared"
    planted = _plant(lib, shared)
    for p in [shared, *shared.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    out, err = _import(lib, shared)
    assert out["x"] == 1 and not out["installed"]
    assert err.count("\n") == 1 and "not using the bytecode cache" in err and "another user" in err
    assert planted.stat().st_uid == NOBODY            # left as it was


def test_a_cache_folder_others_can_write_is_refused(lib, tmp_path):
    shared = tmp_path / "shared"
    planted = _plant(lib, shared)
    os.chmod(shared, 0o777)
    out, err = _import(lib, shared)
    assert out["x"] == 1 and "other users can write to it" in err
    assert b"planted" in planted.read_bytes()


def test_a_cache_inside_a_folder_others_can_write_is_refused(lib, tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    os.chmod(outer, 0o777)                            # not sticky: anyone may rename the cache away
    out, err = _import(lib, outer / "cache")
    assert out["x"] == 1 and "can be written by other users" in err


@as_root
def test_a_planted_pyc_of_another_user_in_the_users_own_cache_is_ignored_and_replaced(lib, tmp_path):
    cache = tmp_path / "cache"
    planted = _plant(lib, cache)
    os.chmod(cache, 0o700)
    os.chown(planted, NOBODY, NOBODY)
    out, err = _import(lib, cache)
    assert out == {"installed": True, "x": 1} and err == ""
    assert planted.stat().st_uid == os.geteuid()      # replaced by the user's own
    assert _import(lib, cache)[0]["x"] == 1


def test_a_pyc_others_can_write_is_ignored(lib, tmp_path):
    cache = tmp_path / "cache"
    planted = _plant(lib, cache)
    os.chmod(planted, 0o666)
    assert _import(lib, cache)[0]["x"] == 1


@pytest.mark.parametrize("payload", [marshal.dumps(42), marshal.dumps(("a", 1)), b"\x00" * 40, b""])
def test_a_damaged_entry_is_ignored_and_replaced(lib, tmp_path, payload):
    cache = tmp_path / "cache"
    good = _plant(lib, cache, "X = 1\n")
    good.write_bytes(good.read_bytes()[:16] + payload)      # the right header, damaged code
    for _ in range(2):                                    # every later run works too
        out, err = _import(lib, cache)
        assert out["x"] == 1 and err == ""
    assert isinstance(marshal.loads(good.read_bytes()[16:]), type(compile("", "", "exec")))


def test_a_link_planted_where_the_cache_writes_is_never_followed(tmp_path):
    from detect_caches.pipeline.bytecode_safety import write_private
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file")
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    target = folder / "mod.pyc"
    os.symlink(victim, target)                                         # at the file's name
    os.symlink(victim, f"{target}.{os.getpid()}.tmp")                   # at the old, predictable name
    write_private(str(target), b"data")
    assert victim.read_text() == "the user's file"
    assert not target.is_symlink() and target.read_bytes() == b"data" and target.stat().st_mode & 0o777 == 0o600


# -- 2. output folders -------------------------------------------------------------------------

def test_two_torchrun_fleets_into_one_folder_the_second_is_refused_before_measuring(tmp_path):
    pytest.importorskip("torch.distributed")
    out = tmp_path / "fleet"

    def fleet(port: int):
        return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                               "--master-port", str(port), "-m", "detect_caches", "--simulate", "h200,h200",
                               "--out", str(out), "--no-latency", "--no-peaks", "--quiet"], env=_env(),
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    base_port = 31000 + os.getpid() % 1000
    first = fleet(base_port)
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    second = fleet(base_port + 1)
    assert second.returncode != 0
    assert "already exists; choose another --out" in second.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before      # nothing overwritten


def test_fleet_out_into_a_used_folder_is_refused(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "fleet.md").write_text("earlier")
    one_line(cli("fleet", H200_V1, "--out", tmp_path / "used"), "already exists")
    assert (tmp_path / "used" / "fleet.md").read_text() == "earlier"


# -- 3. identity and time ------------------------------------------------------------------------

def _result(**device) -> dict:
    res = json.loads(H200_V1.read_text())
    res["device"].update(device)
    return res


def test_results_without_a_host_or_uuid_are_kept_apart_and_said_so(tmp_path):
    for i, factor in enumerate((1.0, 1.0, 0.8)):
        res = _result(host="", uuid="", index=0)
        for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes"):
            res["levels"][1][key] = int(res["levels"][1][key] * factor)
        (tmp_path / "runs" / f"r{i}").mkdir(parents=True)
        (tmp_path / "runs" / f"r{i}" / "result.json").write_text(json.dumps(res))
    proc = cli("fleet", tmp_path / "runs", "--json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert len(data["gpus"]) == 3 and any("neither a UUID nor a host" in n for n in data["notes"])
    (outlier,) = data["outliers"]
    assert "r2" in outlier
    hist = cli("history", tmp_path / "runs")
    assert "3 GPU(s)" in hist.stdout and "kept apart" in hist.stdout


def test_history_exits_2_when_the_newest_result_cannot_be_read(tmp_path):
    for name, created in (("a", "2026-01-01T00:00:00+0000"), ("b", "2026-02-01T00:00:00+0000")):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "result.json").write_text(json.dumps(dict(_result(uuid="GPU-1"), created=created)))
    (tmp_path / "runs" / "c").mkdir()
    (tmp_path / "runs" / "c" / "result.json").write_text('{"schema_version": 3, "created": "2026-03-01')
    proc = cli("history", tmp_path / "runs")
    assert proc.returncode == 2 and "# History:" in proc.stdout
    assert "runs/c/result.json" in proc.stderr and "the check is incomplete" in proc.stderr.splitlines()[-1]


def test_fleet_baseline_of_another_model_is_exit_2_unless_forced(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_result(name="another card")))
    one_line(cli("fleet", H200_V1, "--baseline", other), "different device models")
    assert cli("fleet", H200_V1, "--baseline", other, "--force").returncode in (0, 1)


# -- 4. validation at the edges --------------------------------------------------------------------

def _bad(tmp_path: Path, change) -> Path:
    res = json.loads(H200_V1.read_text())
    change(res)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(res) if not isinstance(res, str) else res)
    return path


@pytest.mark.parametrize("change,needle", [
    (lambda r: r.update(schema_version=True), "schema_version True"),
    (lambda r: r["levels"][1].update(bandwidth_repeatability=1e308), "bandwidth_repeatability must be"),
    (lambda r: r["levels"].insert(1, dict(r["levels"][1])), "repeats the level L2"),
    (lambda r: r["levels"][1].update(capacity_bytes=True), "capacity_bytes must be"),
    (lambda r: r["levels"][1].update(bandwidth_gbs=1e300), "bandwidth_gbs must be"),
    (lambda r: r["device"].update(index=True), "device.index"),
    (lambda r: r.update(created="yesterday"), "is not a time like"),
    (lambda r: r["levels"][0].update(line_bytes=10 ** 30), "line_bytes must be"),
    (lambda r: r.update(measurements=-1), "measurements"),
])
def test_numbers_in_a_result_are_checked(tmp_path, change, needle):
    one_line(cli("compare", H200_V1, _bad(tmp_path, change)), needle)


def test_a_5000_digit_integer_is_one_line_and_does_not_stop_a_folder_search(tmp_path):
    huge = "9" * 5000
    text = H200_V1.read_text().replace('"measurements": ', f'"measurements": {huge}, "x": ', 1)
    one_line(cli("compare", H200_V1, _write(tmp_path / "one", text)), "integer of 5000 digits")
    runs = tmp_path / "runs"
    _write(runs / "good", json.dumps(dict(_result(uuid="GPU-1", name="simulated h200"),
                                          created="2026-01-01T00:00:00+0000")))
    _write(runs / "huge", text)
    hist = cli("history", runs)
    assert hist.returncode == 2 and "# History" in hist.stdout and "integer of 5000 digits" in hist.stderr
    fleet = cli("fleet", runs)
    assert fleet.returncode == 2 and "Fleet report: 1 GPU(s)" in fleet.stdout
    base = cli("--simulate", "h200", "--baseline", runs, "--no-latency", "--no-peaks", "--out", tmp_path / "run")
    assert base.returncode in (0, 1), base.stderr
    assert "baseline folder: skipped" in base.stderr and "integer of 5000 digits" in base.stderr


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(text)
    return folder / "result.json"


@pytest.mark.parametrize("args,needle", [
    (["--grid-multiplier", "1000000000"], "from 1 to 64"),
    (["--grid-multiplier", "1e9"], "from 1 to 64"),                   # 1e9 read as 1000000000
    (["--max-working-set", "1e303"], "at most"),
    (["--max-working-set", "1e9"], "more than the"),                 # more than the device's memory
    (["--budget", "1000000"], "from 60 to 100000"),
])
def test_size_like_options_are_bounded_before_anything_runs(tmp_path, args, needle):
    proc = cli("--simulate", "h200", *args, "--out", tmp_path / "run", timeout=60)
    one_line(proc, needle)
    assert not (tmp_path / "run").exists()


def test_a_rendezvous_wait_that_is_not_a_number_is_one_line(tmp_path):
    pytest.importorskip("torch.distributed")
    env = _env(RANK="0", WORLD_SIZE="1", DETECT_CACHES_RENDEZVOUS_SECONDS="abc")
    one_line(cli("--simulate", "h200", "--quiet", "--out", tmp_path / "f", env=env, cwd=tmp_path),
             "DETECT_CACHES_RENDEZVOUS_SECONDS='abc' is not an integer")


# -- 5. the API's manners --------------------------------------------------------------------------

def test_the_api_leaves_the_backend_the_umask_and_pyplot_as_it_found_them(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    from detect_caches.pipeline.api import characterize
    calls = []
    real = os.umask
    monkeypatch.setattr(os, "umask", lambda m: calls.append(m) or real(m))
    figures = plt.get_fignums()
    characterize(simulate="h200", out=tmp_path / "run", latency=False)
    assert matplotlib.get_backend() == "svg" and plt.get_fignums() == figures
    assert calls == []                              # never changed, not even for a moment
    assert (tmp_path / "run" / "bandwidth.png").read_bytes()[:4] == b"\x89PNG"


def test_concurrent_runs_put_the_switch_interval_back(tmp_path):
    from detect_caches.pipeline.api import characterize
    before = sys.getswitchinterval()
    errors = []

    def run(i):
        try:
            characterize(simulate="h200", latency=False, peaks=i == 0, out=tmp_path / f"run{i}")
        except Exception as exc:                   # noqa: BLE001  (reported below)
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sys.getswitchinterval() == before
    # their plots were drawn at once in three threads: each whole (text layout is not thread-safe)
    assert all((tmp_path / f"run{i}" / "bandwidth.png").stat().st_size > 10_000 for i in range(3))


@pytest.mark.parametrize("kwargs,needle", [
    (dict(budget="400"), "the budget must be a whole number"),
    (dict(budget=True), "the budget must be a whole number"),
    (dict(grid_multiplier=0), "the grid multiplier must be from 1 to 64"),
    (dict(grid_multiplier=10 ** 9), "the grid multiplier must be from 1 to 64"),
    (dict(latency="yes"), "latency must be True or False"),
    (dict(sweeps="private"), "sweeps take private, shared or both"),
    (dict(max_working_set_bytes=1.5e308), "at most"),
    (dict(max_working_set_bytes=float("nan")), "whole number of bytes"),
    (dict(gpu="0", simulate="h200"), "gpu must be a GPU index"),
    (dict(capacity_tol="3"), "ambiguous"),
    (dict(fail_on="sometimes"), "fail_on must be worse or any"),
    (dict(baseline=42), "the baseline must be a result"),
])
def test_api_arguments_raise_the_clis_sentences(kwargs, needle):
    from detect_caches.pipeline.api import characterize
    kwargs.setdefault("simulate", "h200")
    with pytest.raises(InputError, match=needle):
        characterize(**kwargs)


def test_nan_rows_of_a_dataframe_are_warned_like_a_csvs(tmp_path):
    import pandas as pd
    from detect_caches.pipeline.api import analyze
    csv = H200 / "2026-11-29-v1" / "measurements.csv"
    df = pd.read_csv(csv)
    df.loc[df.index[:3], "bandwidth_gbs"] = float("nan")
    result = analyze(df)
    assert any("3 row(s) of the DataFrame hold no figure" in w for w in result.warnings)


def test_a_signal_in_the_last_second_says_where_the_measurements_are(tmp_path, monkeypatch, capsys):
    import detect_caches.pipeline.api as api
    from detect_caches import main

    def late(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(api, "_after_measuring", late)
    code = main(["--simulate", "h200", "--no-latency", "--no-peaks", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "interrupted after measuring" in err
    assert str(tmp_path / "run" / "measurements.csv") in err


def test_a_full_disk_while_measuring_names_the_file(tmp_path, monkeypatch, capsys):
    from detect_caches import main
    from detect_caches.records import MeasurementLog
    real = MeasurementLog.append
    count = [0]

    def full(self, record):
        count[0] += 1
        if count[0] > 30:
            raise OSError(28, "No space left on device")
        return real(self, record)
    monkeypatch.setattr(MeasurementLog, "append", full)
    code = main(["--simulate", "h200", "--no-latency", "--no-peaks", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err
    assert "measurements.csv" in err


# -- 6. text that is not UTF-8 -----------------------------------------------------------------------

def test_folder_names_that_are_not_utf8_are_shown_escaped(tmp_path):
    root = os.fsencode(str(tmp_path / "runs"))
    odd = os.path.join(root, b"caf\xe9")
    os.makedirs(odd)
    with open(os.path.join(odd, b"result.json"), "wb") as fh:
        fh.write(json.dumps(dict(_result(uuid="GPU-1"), created="2026-01-01T00:00:00+0000")).encode())
    with open(os.path.join(root, b"bad\xff.json"), "wb") as fh:
        fh.write(b"{")
    strict = _env(PYTHONIOENCODING="utf-8:strict")
    for args in (["history", tmp_path / "runs"], ["fleet", tmp_path / "runs", "--json"]):
        proc = cli(*args, env=strict)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    bad = subprocess.run([sys.executable, "-m", "detect_caches", "compare", os.path.join(root, b"bad\xff.json"),
                          H200_V1], capture_output=True, env=strict, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1 and b"bad\\udcff.json" in bad.stderr


def test_lone_surrogates_in_a_result_are_shown_escaped(tmp_path):
    text = H200_V1.read_text().replace('"NVIDIA H200"', '"NVIDIA H200 \\ud800"')
    a = _write(tmp_path / "a", text)
    proc = cli("compare", a, a, env=_env(PYTHONIOENCODING="utf-8:strict"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    hist = cli("history", a, "--out", tmp_path / "h", env=_env(PYTHONIOENCODING="utf-8:strict"))
    assert hist.returncode == 0 and "\\ud800" in (tmp_path / "h" / "history.md").read_text()


# -- 7. said, not silent -----------------------------------------------------------------------------

def test_linked_folders_in_a_search_are_named(tmp_path):
    real = tmp_path / "elsewhere" / "r"
    _write(real, json.dumps(dict(_result(uuid="GPU-1"), created="2026-01-01T00:00:00+0000")))
    _write(tmp_path / "runs" / "a", json.dumps(dict(_result(uuid="GPU-2"), created="2026-01-01T00:00:00+0000")))
    os.symlink(tmp_path / "elsewhere", tmp_path / "runs" / "linked")
    proc = cli("history", tmp_path / "runs")
    assert proc.returncode == 0 and "1 linked folder(s)" in proc.stdout and "were not followed" in proc.stdout


def test_the_baseline_run_taken_from_a_folder_is_named_before_measuring(tmp_path):
    first = cli("--simulate", "h200", "--no-latency", "--no-peaks", "--out", tmp_path / "runs" / "a", "--quiet")
    assert first.returncode == 0
    proc = cli("--simulate", "h200", "--no-latency", "--no-peaks", "--out", tmp_path / "runs" / "b",
               "--baseline", tmp_path / "runs")
    assert proc.returncode == 0
    first_line = proc.stderr.splitlines()[0]
    assert first_line.startswith("detect-caches: baseline: ") and "runs/a/result.json" in first_line
    assert "the latest earlier run of this GPU" in first_line


def test_force_is_honoured_with_a_baseline_of_another_model(tmp_path):
    proc = cli("--simulate", "h200", "--no-latency", "--no-peaks", "--baseline", H200_V1, "--force", "--quiet",
               "--out", tmp_path / "run")
    assert proc.returncode in (0, 1) and "different device models" not in proc.stderr
    assert "comparison" in json.loads((tmp_path / "run" / "result.json").read_text())


def test_a_node_whose_profiles_all_fail_is_refused_before_its_folder_is_claimed(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    proc = cli("--simulate", f"{bad},{bad}", "--out", tmp_path / "node")
    one_line(proc, "not valid JSON")
    assert not (tmp_path / "node").exists()
