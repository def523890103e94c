"""The Python API as a notebook uses it (a script in a fresh interpreter: the backend a user set
stays, Results show a short repr and a table, comparisons and levels are numbers, a cell run
again may overwrite its folder), and the command line's shape: subcommands in the usage, help
on every argument, -v through logging, a progress bar that counts the planned work, fleet
--force across models."""
import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOK = r'''
import json, sys
import matplotlib
matplotlib.use("svg")                     # the user's choice, before the tool is imported
import matplotlib.pyplot as plt
plt.figure()
from detect_caches import DetectCachesError, DeviceError, InputError, analyze, characterize, compare
before = (matplotlib.get_backend(), plt.get_fignums())
out = sys.argv[1]
r = characterize(simulate="h200", latency=False, peaks=False, out=out + "/run")
a = analyze(out + "/run/measurements.csv", device=out + "/run/result.json", out=out + "/again")
a = analyze(out + "/run/measurements.csv", device=out + "/run/result.json", out=out + "/again", overwrite=True)
c = compare(r, a)
fig = r.plot()
try:
    analyze(out + "/run/measurements.csv", out=out + "/again")
    refused = ""
except InputError as exc:
    refused = str(exc)
frame, levels = c.frame, r.levels_frame
print(json.dumps({
    "same": (matplotlib.get_backend(), plt.get_fignums()) == before,
    "repr": repr(r), "html": r._repr_html_(), "cmp_repr": repr(c),
    "change_dtype": str(frame["change"].dtype), "baseline_dtype": str(frame["baseline"].dtype),
    "quantities": sorted(set(frame["quantity"])), "l2_bytes": int(levels.loc["L2", "capacity_bytes"]),
    "l2_gbs": float(levels.loc["L2", "bandwidth_gbs"]), "hbm_bytes_na": bool(levels["capacity_bytes"].isna()["HBM"]),
    "fig": type(fig).__name__, "fig_canvas": type(fig.canvas).__name__, "refused": refused,
    "errors": [issubclass(InputError, DetectCachesError), issubclass(DeviceError, DetectCachesError)],
    "levels_dicts": [lv["name"] for lv in r.levels]}))
'''


def test_a_notebook_keeps_its_backend_and_gets_numbers(tmp_path):
    proc = subprocess.run([sys.executable, "-c", NOTEBOOK, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["same"]                                            # backend and pyplot's figures untouched
    assert got["repr"].startswith("<Result simulated h200: L1 221 KiB per SM") and "\n" not in got["repr"]
    assert len(got["repr"]) < 300 and "L2" in got["repr"]
    assert "<table>" in got["html"] and "size (measured)" in got["html"]
    assert got["cmp_repr"].startswith("<Comparison of ") and len(got["cmp_repr"]) < 300
    assert got["change_dtype"] == "float64" and got["baseline_dtype"] == "float64"
    assert {"capacity", "bandwidth"} <= set(got["quantities"])
    assert 50 * 2**20 < got["l2_bytes"] < 70 * 2**20 and got["l2_gbs"] > 5000 and got["hbm_bytes_na"]
    assert got["fig"] == "Figure" and got["fig_canvas"] == "FigureCanvasAgg"
    assert "already exists; pass another out= or overwrite=True" in got["refused"]   # API words, not --out
    assert all(got["errors"]) and got["levels_dicts"] == ["L1", "L2", "HBM"]
    assert (tmp_path / "again" / "report.html").exists()


def test_overwrite_replaces_a_result_folder_only(tmp_path):
    from detect_caches.errors import InputError
    from detect_caches.pipeline.outputs import claim_out_dir, release
    folder = tmp_path / "cell"
    release(claim_out_dir(folder))
    (folder / "report.md").write_text("old")
    release(claim_out_dir(folder, overwrite=True))
    assert not (folder / "report.md").exists()
    (folder / "notes.txt").write_text("mine")
    try:
        claim_out_dir(folder, overwrite=True)
        raise AssertionError("a folder with other files was taken")
    except InputError as exc:
        assert "notes.txt" in str(exc)
    assert (folder / "notes.txt").read_text() == "mine"


def _parsers(p: argparse.ArgumentParser):
    yield p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_the_usage_lists_the_commands_and_every_argument_has_help():
    from detect_caches import main_parser
    parser = main_parser()
    usage = parser.format_usage()
    for name in ("analyze", "compare", "history", "fleet", "run", "benchmark"):
        assert name in usage
    missing = [f"{p.prog} {a.dest}" for p in _parsers(parser) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and a.help in (None, "")]
    assert missing == []


def test_verbose_logs_each_step_on_stderr(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "--simulate", "h200", "--no-latency", "--no-peaks",
                           "--quiet", "-v", "--out", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "detect-caches: device: simulated h200" in proc.stderr and "detect-caches: analysis of" in proc.stderr
    quiet = subprocess.run([sys.executable, "-m", "detect_caches", "compare", str(tmp_path / "run" / "result.json"),
                            str(tmp_path / "run" / "result.json")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert quiet.returncode == 0 and quiet.stderr == ""


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_bar_counts_the_planned_work():
    from detect_caches.pipeline.api import characterize
    from detect_caches.pipeline.progress import Progress
    bar = Progress(400, stream=_Tty())
    totals = []

    def seen(m):
        bar(m)
        totals.append(bar.total)
    seen.plan, seen.close = bar.plan, bar.close
    characterize(simulate="h200", progress=seen)
    done = len(totals)
    assert done < 300 and abs(totals[0] / done - 1) < 0.2        # planned close to what it took, not the budget
    assert bar.bar.total == done                                 # and it ends full


def test_fleet_force_compares_mixed_models(tmp_path):
    from sim_runs import run_profile
    paths = []
    for i, name in enumerate(("nv_cliff_tail", "nv_cliff_tail", "nv_two")):
        res = run_profile(name, 70 + i)
        res["device"].update(uuid=f"GPU-{i}", host="n", index=i)
        path = tmp_path / f"g{i}" / "result.json"
        path.parent.mkdir()
        path.write_text(json.dumps(res))
        paths.append(str(path))
    refused = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", *paths], capture_output=True, text=True,
                             timeout=120, cwd=ROOT)
    assert refused.returncode == 2 and "--force compares them anyway" in refused.stderr
    forced = subprocess.run([sys.executable, "-m", "detect_caches", "fleet", *paths, "--force"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert forced.returncode in (0, 1), forced.stderr
    assert "compared anyway (--force)" in forced.stdout
