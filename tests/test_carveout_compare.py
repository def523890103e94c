"""A carveout change between two results is named as the cause of the L1's change and is not
drift (compare, --baseline, history); --carveouts and the unified array's profile fields refused
with one clear line where they do not apply; result.json schema 3 read and older ones migrated."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from detect_caches.errors import InputError
from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile, parse_profile
from detect_caches.pipeline.api import Options, characterize, compare
from detect_caches.reports.carveout_cause import carveout_cause, run_carveout_kib
from detect_caches.reports.history import build_history
from detect_caches.reports.result_json import read_result, validate_result
from h200_runs import H200

ROOT = Path(__file__).resolve().parents[1]
OLD_H200 = H200 / "2026-11-29-v1" / "result.json"     # a real H200 run, schema 1
KIB = 1024


def h200_spec(default_carveout_kib: int = 32) -> dict:
    spec = json.loads((ROOT / "measure" / "sim" / "profiles" / "h200.json").read_text())
    spec["default_carveout_kib"] = default_carveout_kib
    spec["levels"][0]["capacity_bytes"] = (256 - default_carveout_kib - 3) * KIB
    return spec


def run(spec: dict, baseline=None, **options):
    return characterize(device=SimulatedGPU(parse_profile(spec)), baseline=baseline,
                        options=Options(peaks=False, latency=False, **options))


@pytest.fixture(scope="module")
def pair():
    """The simulated H200 under the driver's default of 32 KiB, and after a driver that carves 64."""
    return run(h200_spec(32)).data, run(h200_spec(64)).data


def cli(*args):
    proc = subprocess.run([sys.executable, "-m", "detect_caches", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return proc.returncode, proc.stdout, proc.stderr


def test_a_carveout_change_is_named_and_is_not_drift(pair):
    base, cur = pair
    assert base["device"]["carveout"]["implied_carveout_kib"] == 32
    assert cur["device"]["carveout"]["implied_carveout_kib"] == 64
    cmp = compare(base, cur)
    assert not cmp.drift, cmp.markdown()
    assert cmp.explained == ["L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB"]
    row = next(r for r in cmp.rows if r[0].startswith("L1") and r[1] == "capacity")
    assert row[6] == "ok (carveout 32 -> 64 KiB)" and row[4] == "-14.5%"
    assert "Not drift: L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB" in cmp.markdown()


def test_bandwidth_and_other_levels_still_drift(pair):
    base, cur = copy.deepcopy(pair)
    cur["levels"][0]["bandwidth_gbs"] *= 0.8
    cmp = compare(base, cur)
    assert cmp.drift and cmp.drifted == [f"L1 bandwidth {_tb(base)} -> {_tb(cur)}"]
    assert cmp.explained == ["L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB"]


def _tb(res):
    from detect_caches.reports.fmt import fmt_gbs
    return fmt_gbs(res["levels"][0]["bandwidth_gbs"])


def test_an_l1_change_the_carveout_does_not_explain_is_drift(pair):
    base, cur = copy.deepcopy(pair)
    for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes"):
        cur["levels"][0][key] = 170 * KIB          # array 170 + 64 = 234 KiB, not 253
    cmp = compare(base, cur)
    assert cmp.drift and not cmp.explained and any(d.startswith("L1 capacity") for d in cmp.drifted)
    same = copy.deepcopy(base)
    for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes"):
        same["levels"][0][key] = 200 * KIB         # carveout unchanged (32): a smaller L1 is drift
    assert carveout_cause(base, same) is None and compare(base, same).drift


def test_older_results_imply_their_carveout_from_the_l1():
    old = read_result(OLD_H200)
    assert old["device"]["carveout"] is None and run_carveout_kib(old) == 32
    smaller = copy.deepcopy(old)
    for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes"):
        smaller["levels"][0][key] = 189 * KIB
    assert run_carveout_kib(smaller) == 64
    cmp = compare(old, smaller)
    assert not cmp.drift and cmp.explained and cmp.explained[0].endswith("carveout 32 -> 64 KiB")


def test_baseline_names_the_carveout(pair):
    base, _ = pair
    r = run(h200_spec(64), baseline=base)
    assert r["comparison"]["drift"] is False
    assert r["comparison"]["explained"] == ["L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB"]


def test_history_names_the_carveout_and_exits_0(pair, tmp_path):
    for i, res in enumerate(pair):
        res = dict(res, created=f"2026-12-0{i + 1}T10:00:00+0000")
        (tmp_path / f"run{i}").mkdir()
        (tmp_path / f"run{i}" / "result.json").write_text(json.dumps(res))
    history = build_history([tmp_path], capacity_tol=0.03, bandwidth_tol=0.03)
    assert not history.drift
    assert "ok (L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB)" in history.markdown()
    code, out, _ = cli("history", tmp_path)
    assert code == 0 and "carveout 32 -> 64 KiB" in out


@pytest.mark.parametrize("args,needle", [
    (["--simulate", "mi300x", "--carveouts"], "AMD's LDS is a separate array"),
    (["--simulate", "mi300x", "--carveouts", "32"], "--carveouts does not apply"),
    (["--simulate", "a100", "--carveouts", "all"], "models no unified L1/shared array"),
    (["--simulate", "h200", "--carveouts", "48"], "offers 0, 8, 16, 32, 64, 100, 132, 164, 196, 228 KiB, not 48"),
    (["--simulate", "h200", "--carveouts", "32,big"], "--carveouts takes all or KiB values"),
    (["--simulate", "h200", "--carveouts", "all", "--sweeps", "shared"], "needs the private sweep"),
])
def test_carveouts_refused_with_one_line(args, needle, tmp_path):
    out = tmp_path / "never"
    code, stdout, err = cli(*args, "--out", out)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_the_api_refuses_too():
    with pytest.raises(InputError, match="separate array"):
        characterize(simulate="mi300x", carveouts="all")


def _level0(spec):
    return spec["levels"][0]


@pytest.mark.parametrize("change,needle", [
    (lambda s: _level0(s).update(capacity_bytes=220 * KIB), "must be unified_bytes - default_carveout_kib"),
    (lambda s: s.update(default_carveout_kib=48), "default_carveout_kib must be one of"),
    (lambda s: s.update(least_carveout_kib=64), "exceeds default_carveout_kib"),
    (lambda s: s.pop("default_carveout_kib"), "needs default_carveout_kib"),
    (lambda s: _level0(s).update(unified_bytes=-5), "unified_bytes"),
    (lambda s: _level0(s).update(unified_bytes=40 * KIB, capacity_bytes=5 * KIB), "leaves less than 1 KiB"),
    (lambda s: s.update(arch="gfx942", vendor="amd"), "needs an NVIDIA arch"),
    (lambda s: [_level0(s).pop(k) for k in ("unified_bytes", "reserve_bytes")], "need a level with unified_bytes"),
])
def test_profile_unified_array_validated(change, needle):
    spec = h200_spec(32)
    change(spec)
    with pytest.raises(InputError, match=needle):
        parse_profile(spec)


def test_the_built_in_h200_profile_models_the_array():
    prof = load_profile("h200")
    assert prof.default_carveout_kib == 32 and prof.least_carveout_kib == 32
    assert [lv.capacity_bytes for lv in prof.levels_under(64)][0] == 189 * KIB
    assert [lv.capacity_bytes for lv in prof.levels_under(None)][0] == 221 * KIB
    assert [lv.capacity_bytes for lv in prof.levels_under(0)][0] == 221 * KIB    # the driver keeps 32


def test_schema_2_results_read_as_schema_3(pair, tmp_path):
    old = copy.deepcopy(pair[0])
    old["schema_version"] = 2
    for key in ("carveouts", "unified_array"):
        old.pop(key)
    old["device"].pop("carveout")
    res = validate_result(old)
    assert res["schema_version"] == 3 and res["migrated_from"] == 2
    assert res["carveouts"] == [] and res["unified_array"] is None and res["device"]["carveout"] is None


@pytest.mark.parametrize("where,value,needle", [
    ("row", {"reached": "yes"}, "reached must be true or false"),
    ("row", {"l1_capacity_bytes": "big"}, "l1_capacity_bytes must be null or a number"),
    ("device", {"blocks_per_sm": "four"}, "device.carveout.blocks_per_sm"),
    ("array", {"reserve_kib": {"64": "x"}}, "reserve_kib"),
])
def test_bad_carveout_fields_refused(where, value, needle, tmp_path):
    res = copy.deepcopy(run(h200_spec(32), carveouts="64").data)
    target = {"row": res["carveouts"][-1], "device": res["device"]["carveout"], "array": res["unified_array"]}[where]
    target.update(value)
    (tmp_path / "r.json").write_text(json.dumps(res))
    with pytest.raises(InputError, match=needle):
        read_result(tmp_path / "r.json")
