"""Drift across driver updates: what changed around the card is recorded and printed, results of
schema 1 are read, `history` lists a model's runs in time order and exits 1 when a GPU's newest
run drifts from its previous one, and --baseline DIR takes the latest earlier run of that GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from detect_caches.errors import InputError
from detect_caches.pipeline.api import resolve_baseline
from detect_caches.reports.compare import compare_results
from detect_caches.reports.result_json import read_result
from sim_runs import run_profile
from h200_runs import H200

ROOT = Path(__file__).resolve().parents[1]
OLD_H200 = H200 / "2026-11-29-v1" / "result.json"     # a real H200 run, schema 1


def cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "detect_caches", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def _run(uuid: str, created: str, driver: str, *, l1: float = 1.0, seed: int = 0, name: str | None = None) -> dict:
    res = run_profile("nv_cliff_tail", seed)
    res["created"] = created
    res["device"].update(uuid=uuid, environment=dict(res["device"].get("environment") or {}, driver=driver))
    if name:
        res["device"]["name"] = name
    lv = res["levels"][0]
    for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes"):
        lv[key] = int(lv[key] * l1)
    return res


def _write(folder: Path, res: dict) -> Path:
    path = folder / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res))
    return path


def test_schema_1_results_are_read_and_compared():
    old = read_result(OLD_H200)
    assert old["schema_version"] == 3 and old["migrated_from"] == 1
    assert [lv["name"] for lv in old["levels"]][:2] == ["L1", "L2"]
    cmp = compare_results(old, old)
    assert not cmp.drift and any("schema 1" in n for n in cmp.notes)
    assert all(row[5] == "4.2%" for row in cmp.rows)     # 1% assumed each: 3 x hypot(1%, 1%)


def test_compare_names_what_changed_around_the_card(tmp_path):
    base = _write(tmp_path / "a", _run("GPU-1", "2026-01-05T10:00:00+0000", "580.159.04"))
    cur = _write(tmp_path / "b", _run("GPU-1", "2026-02-05T10:00:00+0000", "590.44.01", l1=0.93, seed=100))
    code, out, err = cli("compare", base, cur)
    assert code == 1, err
    assert "driver 580.159.04 -> 590.44.01" in out
    verdict = out.strip().splitlines()[-1]
    assert "driver 580.159.04 -> 590.44.01" in verdict and "L1 capacity 221 KiB -> 206 KiB: drift" in verdict
    same = _write(tmp_path / "c", _run("GPU-1", "2026-02-06T10:00:00+0000", "590.44.01", seed=101))
    code, out, _ = cli("compare", base, same)
    assert code == 0 and "driver 580.159.04 -> 590.44.01" in out and "no drift" in out


def _history_folder(root: Path) -> None:
    # GPU-1: three runs, the last after a driver update with a 7% smaller L1 (the times are
    # given in two time zones: 09:30-0200 is after 10:00+0000)
    _write(root / "n1" / "run1", _run("GPU-1", "2026-01-05T10:00:00+0000", "580.159.04", seed=1))
    _write(root / "n1" / "run2", _run("GPU-1", "2026-02-05T10:00:00+0000", "580.159.04", seed=2))
    _write(root / "n1" / "run3", _run("GPU-1", "2026-03-05T09:30:00-0200", "590.44.01", seed=3, l1=0.93))
    # GPU-2: two runs, steady
    _write(root / "n2" / "run1", _run("GPU-2", "2026-01-06T10:00:00+0000", "580.159.04", seed=4))
    _write(root / "n2" / "run2", _run("GPU-2", "2026-03-06T10:00:00+0000", "590.44.01", seed=5))
    # another model in the same tree: its own table
    _write(root / "other" / "run1", _run("GPU-9", "2026-01-01T00:00:00+0000", "580.159.04", seed=6, name="other card"))
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a result")


def test_history_in_time_order_exits_1_on_the_newest_drift(tmp_path):
    root = tmp_path / "runs"
    _history_folder(root)
    out = tmp_path / "hist"
    code, text, err = cli("history", root, "--out", out)
    assert code == 1, err
    assert (out / "history.md").read_text() == text if text.endswith("\n") else True
    assert (out / "history.png").stat().st_size > 5_000
    assert "# History: simulated nv_cliff_tail (5 run(s), 2 GPU(s))" in text
    assert "# History: other card (1 run(s), 1 GPU(s))" in text
    table = text.split("# History: simulated nv_cliff_tail")[1].split("# History")[0]
    dates = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| 2026")]
    assert dates == ["2026-01-05 10:00", "2026-01-06 10:00", "2026-02-05 10:00",
                     "2026-03-05 09:30", "2026-03-06 10:00"]
    drift_rows = [line for line in table.splitlines() if "DRIFT" in line]
    assert len(drift_rows) == 1 and "GPU-1" in drift_rows[0] and "driver 580.159.04 -> 590.44.01" in drift_rows[0]
    gpu2_last = [line for line in table.splitlines() if "GPU-2" in line][-1]
    assert "ok (driver 580.159.04 -> 590.44.01)" in gpu2_last
    # without the drifting run the newest runs agree: exit 0
    (root / "n1" / "run3" / "result.json").unlink()
    code, text, _ = cli("history", root)
    assert code == 0 and "no drift in the newest runs" in text


@pytest.mark.parametrize("args,needle", [
    (["history", "/nonexistent-folder"], "no such file or folder"),
    (["history", "{empty}"], "no result.json found"),
    (["history", "{empty}", "--capacity-tol", "-1"], "must be a fraction"),
])
def test_history_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    (tmp_path / "empty").mkdir()
    code, out, err = cli(*[a.replace("{empty}", str(tmp_path / "empty")) for a in args])
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_baseline_folder_takes_the_latest_earlier_run_of_the_same_gpu(tmp_path):
    root = tmp_path / "runs"
    _write(root / "a1", _run("GPU-A", "2026-01-01T00:00:00+0000", "580", seed=1))
    _write(root / "a2", _run("GPU-A", "2026-03-01T00:00:00+0000", "580", seed=2))
    _write(root / "b1", _run("GPU-B", "2026-04-01T00:00:00+0000", "580", seed=3))
    _write(root / "x1", _run("GPU-X", "2026-05-01T00:00:00+0000", "580", seed=4, name="other card"))
    name = "simulated nv_cliff_tail"
    assert resolve_baseline(root, SimpleNamespace(uuid="GPU-A", name=name))["created"].startswith("2026-03-01")
    # a GPU never measured before: the newest run of its model
    assert resolve_baseline(root, SimpleNamespace(uuid="GPU-C", name=name))["created"].startswith("2026-04-01")
    with pytest.raises(InputError, match="no earlier result of a third card"):
        resolve_baseline(root, SimpleNamespace(uuid="GPU-A", name="third card"))
    # a baseline file of another model is refused before anything is measured
    with pytest.raises(InputError, match="different device models"):
        resolve_baseline(root / "x1" / "result.json", SimpleNamespace(uuid="GPU-A", name=name))


def test_main_job_with_a_baseline_folder(tmp_path):
    first = tmp_path / "runs" / "first"
    code, _, err = cli("--simulate", "h200", "--no-latency", "--no-peaks", "--out", first, "--quiet")
    assert code == 0, err
    code, out, err = cli("--simulate", "h200", "--no-latency", "--no-peaks", "--out", tmp_path / "runs" / "second",
                         "--baseline", tmp_path / "runs", "--quiet")
    assert code == 0, err
    assert "| L2 (device) | capacity |" in out and "Result: no drift." in out
    data = json.loads((tmp_path / "runs" / "second" / "result.json").read_text())
    assert data["comparison"]["drift"] is False


def test_history_and_fleet_through_the_api_as_on_the_command_line(tmp_path):
    """`from detect_caches import history, fleet`: the reports the commands print, their files
    written into a new folder, and the verdict the commands turn into their exit code."""
    from detect_caches import fleet, history
    runs = tmp_path / "runs"
    _write(runs / "a", _run("GPU-1", "2026-01-05T10:00:00+0000", "580.159.04"))
    _write(runs / "b", _run("GPU-1", "2026-02-05T10:00:00+0000", "590.44.01", l1=0.93, seed=100))
    h = history(runs, out=tmp_path / "hist", capacity_tol="3%")
    assert h.drift and not h.skipped
    assert {p.name for p in (tmp_path / "hist").iterdir()} == {"history.md", "history.json", "history.png"}
    code, out, _ = cli("history", runs)
    assert code == 1 and out.strip() == h.markdown().strip()
    other = _write(tmp_path / "other" / "x", _run("GPU-2", "2026-02-05T11:00:00+0000", "590.44.01", seed=7))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text("{")
    said: list[str] = []
    report = fleet([runs / "b", other, tmp_path / "broken"], out=tmp_path / "fleet", said=said)
    assert len(report.results) == 2 and report.failed and any("broken" in line for line in said)
    assert {p.name for p in (tmp_path / "fleet").iterdir()} == {"fleet.md", "fleet.json", "fleet.csv", "fleet.png"}
    with pytest.raises(InputError, match="ambiguous"):
        history(runs, capacity_tol=3)
