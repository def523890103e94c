"""Verdicts a CI job can trust (issue 24): each change has a direction and the check fails on the
worse ones by default (--fail-on worse) or on all (--fail-on any); tolerances are written 3% or
0.03; latencies and line/sector sizes are compared; `history` judges the newest run of each GPU
against a reference, so a regression that persists stays one; --json says it for machines."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from detect_caches.errors import InputError
from detect_caches.reports.compare import compare_results
from detect_caches.reports.verdict import parse_tolerance
from sim_runs import run_profile
from h200_runs import H200

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "detect_caches", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def scaled(res: dict, level: str, *, capacity: float = 1.0, bandwidth: float = 1.0, latency: float = 1.0,
           cycles: float | None = None) -> dict:
    """A copy of ``res`` whose ``level`` reads as a card with that change would show it."""
    out = json.loads(json.dumps(res))
    for lv in out["levels"]:
        if lv["name"] != level:
            continue
        for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes", "half_hit_bytes"):
            if lv.get(key):
                lv[key] = int(lv[key] * capacity)
        for key in ("bandwidth_gbs", "bandwidth_spread_gbs"):
            if lv.get(key):
                lv[key] *= bandwidth
        if lv.get("latency_ns"):
            lv["latency_ns"] *= latency
            lv["latency_cycles"] *= latency if cycles is None else cycles
    return out


def write(folder: Path, res: dict, created: str, uuid: str = "GPU-1") -> Path:
    res = dict(res, created=created)
    res["device"] = dict(res["device"], uuid=uuid)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(res))
    return folder / "result.json"


def h200_run(tmp_path: Path, seed: int) -> dict:
    """A simulated H200 measured with latency (its chase, line and sector probes), seeded."""
    from detect_caches.pipeline.api import characterize
    spec = json.loads((ROOT / "measure" / "sim" / "profiles" / "h200.json").read_text())
    path = tmp_path / f"h200-{seed}.json"
    path.write_text(json.dumps(dict(spec, seed=seed)))
    return characterize(simulate=str(path), peaks=False).data


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return h200_run(tmp_path_factory.mktemp("base"), 11)


@pytest.fixture(scope="module")
def again(tmp_path_factory):
    return h200_run(tmp_path_factory.mktemp("again"), 12)


def test_clean_reruns_with_latency_lines_and_sectors_never_drift(tmp_path):
    """Reruns of a simulated H200 with every probe: no figure drifts, latencies and sizes included."""
    runs = [h200_run(tmp_path, seed) for seed in range(20, 26)]
    assert all(lv.get("latency_ns") for r in runs for lv in r["levels"])
    assert all(r["levels"][i]["line_bytes"] == 128 for r in runs for i in (0, 1))
    pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
    drifted = [compare_results(a, b).drifted for a, b in pairs]
    assert len(pairs) == 15 and drifted == [[]] * 15


# -- direction and --fail-on ---------------------------------------------------------------------

@pytest.mark.parametrize("change,figure,direction,fails_by_default", [
    (dict(level="L2", capacity=0.95), "L2 (device) capacity", "smaller", True),
    (dict(level="L2", capacity=1.05), "L2 (device) capacity", "larger", True),
    (dict(level="HBM", bandwidth=0.94), "HBM (device) bandwidth", "worse", True),
    (dict(level="HBM", bandwidth=1.06), "HBM (device) bandwidth", "better", False),
    (dict(level="L1", latency=1.10), "L1 (per_cu) latency", "worse", True),
    (dict(level="L1", latency=0.90), "L1 (per_cu) latency", "better", False),
])
def test_every_verdict_has_a_direction_and_ratio(base, again, change, figure, direction, fails_by_default):
    level = change.pop("level")
    cmp = compare_results(base, scaled(again, level, **change))
    drifting = [v for v in cmp.verdicts if v.drift]
    assert [v.figure for v in drifting] == [figure]
    v = drifting[0]
    assert v.direction == direction and abs(v.ratio - list(change.values())[0]) < 0.02
    assert cmp.failed is fails_by_default
    assert compare_results(base, scaled(again, level, **change), fail_on="any").failed
    row = next(r for r in cmp.rows if f"{r[0]} {r[1]}" == figure)
    assert direction in row[6] and f"x{v.ratio:.3f}" in row[6]


def test_a_latency_the_sm_cycles_do_not_show_is_the_clock_not_drift(base, again):
    # an L1 hit read 30% longer in ns at the same SM cycles: the SM clock ran slower, not the cache
    cmp = compare_results(base, scaled(again, "L1", latency=1.3, cycles=1.0))
    v = next(v for v in cmp.verdicts if v.figure == "L1 (per_cu) latency")
    assert not v.drift and "SM cycles unchanged" in v.note and not cmp.failed
    assert any("SM clock differed" in n for n in cmp.notes)


def test_line_and_sector_sizes_are_compared_with_what_the_probes_fit(base, again):
    cur = json.loads(json.dumps(again))
    cur["levels"][0]["line_bytes"], cur["levels"][0]["line_candidates_bytes"] = 64, [64]
    cmp = compare_results(base, cur)
    v = next(v for v in cmp.verdicts if v.figure == "L1 (per_cu) line")
    assert v.drift and v.direction == "smaller" and cmp.failed       # the geometry changed: fails either way
    assert "| L1 (per_cu) | line | 128 B | 64 B | DRIFT: smaller, x0.500 |" in cmp.markdown()
    # a run whose probes fit 64 and 128 B alike read 64: not drift, and said why
    cur["levels"][0]["line_candidates_bytes"] = [64, 128]
    v = next(v for v in compare_results(base, cur).verdicts if v.figure == "L1 (per_cu) line")
    assert not v.drift and "fit 64 B, 128 B alike" in v.note
    cur["levels"][1]["sector_bytes"] = 64
    cmp = compare_results(base, cur)
    assert [v.figure for v in cmp.verdicts if v.drift] == ["L2 (device) sector"]


def test_compare_cli_improvement_exits_0_with_better_and_1_with_fail_on_any(tmp_path, base, again):
    a = write(tmp_path / "a", base, "2026-01-01T00:00:00+0000")
    b = write(tmp_path / "b", scaled(again, "HBM", bandwidth=1.08), "2026-02-01T00:00:00+0000")
    code, out, err = cli("compare", a, b)
    assert code == 0, err
    assert re.search(r"better, x1\.0[6-9]\d", out) and "not a failure under --fail-on worse" in out
    assert out.strip().splitlines()[-1].startswith("Result: no drift that fails the check")
    code, out, _ = cli("compare", a, b, "--fail-on", "any")
    assert code == 1 and "DRIFT: better" in out and "**drift found**" in out


def test_compare_json_is_machine_readable(tmp_path, base, again):
    a = write(tmp_path / "a", base, "2026-01-01T00:00:00+0000")
    b = write(tmp_path / "b", scaled(again, "L2", capacity=0.95), "2026-02-01T00:00:00+0000")
    code, out, _ = cli("compare", a, b, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["failed"] is True and data["fail_on"] == "worse"
    l2 = next(v for v in data["verdicts"] if v["figure"] == "L2 (device) capacity")
    assert set(l2) >= {"figure", "baseline", "current", "change", "detectable", "verdict", "direction"}
    assert l2["verdict"] == "drift" and l2["direction"] == "smaller" and -0.06 < l2["change"] < -0.04
    assert l2["current"] < l2["baseline"] and 0.03 <= l2["detectable"] < 0.05
    ok = [v for v in data["verdicts"] if v["verdict"] == "ok"]
    assert ok and all(v["direction"] is None for v in ok)


# -- tolerances ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [("3%", 0.03), ("0.03", 0.03), (" 5% ", 0.05), ("0", 0.0), ("1", 1.0),
                                        ("100%", 1.0), (0.03, 0.03), ("2.5%", 0.025)])
def test_tolerance_spellings(text, value):
    assert parse_tolerance(text) == pytest.approx(value)


@pytest.mark.parametrize("text,needle", [("3", "ambiguous: write 3% for a percentage"), ("300%", "at most 100%"),
                                         ("-1", "must be a fraction >= 0"), ("abc", "written 3% or 0.03"),
                                         ("nan", "must be a fraction"), ("inf%", "must be a fraction"),
                                         (True, "written 3% or 0.03"), ("%", "written 3% or 0.03")])
def test_bad_tolerances_are_refused(text, needle):
    with pytest.raises(InputError, match=needle.replace("%", "%").replace("(", r"\(")):
        parse_tolerance(text)


@pytest.mark.parametrize("flag", ["--bandwidth-tol", "--capacity-tol", "--latency-tol"])
def test_a_bare_number_above_1_is_one_line_and_exit_2(tmp_path, base, flag):
    a = write(tmp_path / "a", base, "2026-01-01T00:00:00+0000")
    code, out, err = cli("compare", a, a, flag, "3")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("detect-caches: error: argument") and "ambiguous: write 3% for a percentage" in err


def test_3_percent_and_0_03_give_the_same_verdict(tmp_path, base, again):
    a = write(tmp_path / "a", base, "2026-01-01T00:00:00+0000")
    b = write(tmp_path / "b", scaled(again, "HBM", bandwidth=0.90), "2026-02-01T00:00:00+0000")
    verdicts = [cli("compare", a, b, "--bandwidth-tol", t) for t in ("3%", "0.03")]
    assert [v[0] for v in verdicts] == [1, 1] and verdicts[0][1] == verdicts[1][1]
    assert cli("compare", a, b, "--bandwidth-tol", "15%")[0] == 0      # -10% within 15%


# -- history against a reference ------------------------------------------------------------------

def _series(tmp_path: Path, base, again, factors: list[float], what: str = "capacity", level: str = "L2") -> Path:
    root = tmp_path / "runs"
    for i, f in enumerate(factors):
        res = scaled(run_profile("nv_cliff_tail", 300 + i), level, **{what: f})
        res.pop("comparison", None)
        write(root / f"run{i}", res, f"2026-0{i + 1}-01T00:00:00+0000")
    return root


def test_history_good_regressed_regressed_exits_1_on_the_third(tmp_path, base, again):
    root = _series(tmp_path, base, again, [1.0, 0.95])
    code, out, _ = cli("history", root)
    assert code == 1 and "smaller" in out
    write(root / "run2", scaled(run_profile("nv_cliff_tail", 302), "L2", capacity=0.95), "2026-03-01T00:00:00+0000")
    code, out, _ = cli("history", root)
    # against the neighbour the third run would read "ok"; against the first run it is still smaller
    assert code == 1, out
    last = [line for line in out.splitlines() if line.startswith("| 2026-03-01")][0]
    assert "DRIFT" in last and "L2 capacity" in last and "smaller" in last
    assert "first run, 2026-01-01" in out
    # a new reference (the regressed run) accepts the regression: exit 0
    code, out, _ = cli("history", root, "--reference", "2026-02-15")
    assert code == 0 and "last run on or before 2026-02-15" in out
    code, _, _ = cli("history", root, "--reference", root / "run1" / "result.json")
    assert code == 0
    # each run against the one before it (interface.md's first wording): the third run passes
    code, out, _ = cli("history", root, "--reference", "previous")
    assert code == 0 and "against the reference (previous run)" in out, out
    row = [line for line in out.splitlines() if line.startswith("| 2026-02-01")][0]
    assert "DRIFT" in row and "smaller" in row          # the second run still drifted from the first
    # a date before every run: said, and the first run is the reference
    code, out, _ = cli("history", root, "--reference", "2025-12-01")
    assert code == 1 and "is on or before the reference date: judged against its first run" in out, out


def test_history_good_improved_exits_0_with_better_and_1_with_fail_on_any(tmp_path, base, again):
    root = _series(tmp_path, base, again, [1.0, 1.08], what="bandwidth", level="HBM")
    code, out, err = cli("history", root)
    assert code == 0, err
    assert "better" in out and "no drift in the newest runs" in out
    code, out, _ = cli("history", root, "--fail-on", "any")
    assert code == 1 and "better" in out


def test_history_plot_says_the_newest_runs_verdict(tmp_path):
    """history.png's line is the check's verdict: an earlier run's drift is said apart from it (it
    said 'Drift that fails the check' while history exited 0), also where the newest run lacks the
    figure that drifted before (a run without the latency sweep)."""
    from detect_caches.reports.history import build_history
    from detect_caches.reports.history_plot import build_history_figure
    root, first = tmp_path / "runs", h200_run(tmp_path, 1)
    write(root / "run1", first, "2026-01-01T00:00:00+0000")
    write(root / "run2", scaled(first, "HBM", latency=1.3, cycles=1.3), "2026-02-01T00:00:00+0000")
    blind = json.loads(json.dumps(first))
    for lv in blind["levels"]:
        lv.update(latency_ns=None, latency_cycles=None, latency_repeatability=None, latency_steps=[])
    write(root / "run3", blind, "2026-03-01T00:00:00+0000")

    def line() -> str:
        fig = build_history_figure(build_history([root], capacity_tol=0.03, bandwidth_tol=0.03))
        return next(t.get_text() for t in fig.texts if "drift" in t.get_text().lower())
    code, out, err = cli("history", root)
    assert code == 0 and "HBM latency" in out, out + err
    assert line().startswith("No drift in the newest runs; earlier runs drifted: HBM: latency"), line()
    # the newest run's own drift heads the line
    write(root / "run4", scaled(first, "L2", capacity=0.9), "2026-04-01T00:00:00+0000")
    assert line().startswith("Drift that fails the check: L2: size"), line()


def test_history_median_reference_and_json(tmp_path, base, again):
    root = _series(tmp_path, base, again, [1.0, 1.0, 1.0, 0.94], what="bandwidth", level="HBM")
    code, out, _ = cli("history", root, "--reference", "median", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["reference"] == "median of the earlier runs" and data["failed"] is True
    (gpu,) = data["gpus"]
    assert gpu["runs"] == 4 and gpu["fails"] is True
    hbm = next(v for v in gpu["comparison"]["verdicts"] if v["figure"] == "HBM (device) bandwidth")
    assert hbm["direction"] == "worse" and hbm["verdict"] == "drift"


def test_history_bad_reference_is_one_line(tmp_path, base, again):
    root = _series(tmp_path, base, again, [1.0])
    code, out, err = cli("history", root, "--reference", "last tuesday")
    assert code == 2 and err.count("\n") == 1 and "--reference takes first, previous, median" in err


def test_history_two_models_on_one_host_label_are_two_gpus(tmp_path):
    # no UUIDs: host:index is the same for both cards; the newest run of one drifts
    root = tmp_path / "runs"
    for i, (name, l2) in enumerate([("card A", 1.0), ("card B", 1.0), ("card A", 1.0), ("card B", 0.9)]):
        res = scaled(run_profile("nv_cliff_tail", 400 + i), "L2", capacity=l2)
        res["device"].update(name=name, uuid="", host="node7", index=0)
        (root / f"r{i}").mkdir(parents=True)
        (root / f"r{i}" / "result.json").write_text(json.dumps(dict(res, created=f"2026-0{i + 1}-01T00:00:00+0000")))
    code, out, _ = cli("history", root)
    assert code == 1, out
    assert "# History: card A (2 run(s), 1 GPU(s))" in out and "# History: card B (2 run(s), 1 GPU(s))" in out
    drift = [line for line in out.splitlines() if line.startswith("| 2026") and "DRIFT" in line]
    assert len(drift) == 1 and drift[0].startswith("| 2026-04-01")


def test_schema_1_results_have_no_time_and_never_take_one_from_the_file(tmp_path, base):
    old = json.loads((H200 / "2026-11-29-v1" / "result.json").read_text())
    root = tmp_path / "runs"
    new = json.loads(json.dumps(old))
    new.update(schema_version=2, created="2026-03-01T00:00:00+0000")
    (root / "new").mkdir(parents=True)
    (root / "new" / "result.json").write_text(json.dumps(new))
    (root / "old-copy").mkdir()
    (root / "old-copy" / "result.json").write_text(json.dumps(old))     # copied last: the newest file time
    os.utime(root / "old-copy" / "result.json", (2e9, 2e9))
    code, out, _ = cli("history", root, "--json")
    data = json.loads(out)
    assert data["gpus"][0]["created"] == "2026-03-01T00:00:00+0000"      # the dated run is the newest
    assert any("no time of their own" in n and "never by file time" in n for n in data["notes"])
