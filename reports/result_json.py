"""result.json: build, validate, write atomically, read back (and migrate older versions).

Schema 2 adds per level the fall shape, the half-hit point, the repeatability of the capacity
and the bandwidth (1-sigma relative run-to-run spread, estimated inside the run), the latency
(ns and SM cycles), line and sector sizes; per device what a driver update can change; per run
the time it was made. Schema 3 adds per level the latency's repeatability and every line size
the line probes fit (the reported one is the best fit), per run its doubts (why the result may be
incomplete: reports.doubt), what the run's launches ran under (``device.carveout``) and, with
``--carveouts``, the L1 under each shared-memory carveout and the unified array
(reports.carveout_json). Older files are read and migrated (the new fields null or empty, no
carveout recorded), as asv migrates its results: nothing measured is lost to a version bump.
Every number is checked for its type (a boolean is not a number), its range and its size (a
5000-digit integer is refused, not converted); a level given twice is refused.
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from detect_caches._version import __version__
from detect_caches.device import DeviceFacts
from detect_caches.errors import InputError
from detect_caches.safe_read import read_json_bounded
from detect_caches.reports import carveout_json
from detect_caches.reports.atomic import write_text_atomic
from detect_caches.reports.identity import run_time

if TYPE_CHECKING:     # reading and writing results needs no analysis (ruptures, scipy.stats: 1 s)
    from detect_caches.detector.levels import Detection

SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
TOOL = {"name": "detect-caches", "version": __version__}
LEVEL_NAME = re.compile(r"^(L\d{1,2}(\.\d{1,2})?( near)?|Infinity Cache|HBM|DRAM)$")
SCOPES = ("per_cu", "per_xcd", "device")
# optional numeric level fields: lowest value (exclusive where marked), whether an integer, highest
BIG = float(2 ** 60)
LEVEL_NUMBERS = {
    "capacity_low_bytes": (0, True, False, BIG), "capacity_high_bytes": (0, True, False, BIG),
    "onset_bytes": (0, True, False, BIG), "half_hit_bytes": (0, True, False, BIG),
    "aggregate_capacity_bytes": (0, True, False, BIG), "bandwidth_spread_gbs": (0, False, False, 1e9),
    "transition_width_octaves": (0, False, False, 64), "api_bytes": (0, True, False, BIG),
    "ceiling_gbs": (0, True, False, 1e9), "plateau_lo_bytes": (0, True, False, BIG),
    "plateau_hi_bytes": (0, True, False, BIG), "peak_bandwidth_gbs": (0, True, False, 1e9),
    "capacity_repeatability": (0, False, False, 1.0), "bandwidth_repeatability": (0, False, False, 1.0),
    "latency_repeatability": (0, False, False, 1.0), "latency_ns": (0, True, False, 1e9),
    "latency_cycles": (0, True, False, 1e12), "latency_capacity_bytes": (0, True, False, BIG),
    "line_bytes": (0, True, True, 2 ** 20), "sector_bytes": (0, True, True, 2 ** 20),
}
LEVEL_TEXT = ("fall_shape", "latency_fall_shape", "peak_launch", "notes", "sweep")
MIGRATED_FIELDS = {"fall_shape": "", "half_hit_bytes": None, "capacity_repeatability": None,
                   "bandwidth_repeatability": None, "latency_ns": None, "latency_cycles": None,
                   "latency_capacity_bytes": None, "latency_fall_shape": "", "latency_steps": [],
                   "line_bytes": None, "sector_bytes": None, "latency_repeatability": None,
                   "line_candidates_bytes": []}


def build_result(detection: Detection, facts: DeviceFacts, *, measurements: int, elapsed_s: float,
                 method: dict | None = None, extra_warnings: list[str] = (), carveout: dict | None = None) -> dict:
    """``carveout``: what the run's launches ran under (detector.carveouts.launch_carveout)."""
    from detect_caches.detector.carveouts import launch_note
    device = facts.to_dict()
    device["carveout"] = carveout
    levels = [lv.to_dict() for lv in detection.levels]
    l1 = next((lv for lv in levels if lv["scope"] == "per_cu"), None)
    note = launch_note(carveout, l1["capacity_bytes"] if l1 else None)
    if note:
        l1["notes"] = "; ".join(n for n in (note, l1["notes"]) if n)
    fields, carveout_warnings = carveout_json.result_fields(detection, carveout)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": dict(TOOL),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "device": device,
        "levels": levels,
        **fields,
        "measurements": int(measurements),
        "elapsed_s": round(float(elapsed_s), 3),
        "method": method or {},
        "warnings": list(detection.warnings) + carveout_warnings + list(extra_warnings),
        "doubts": [],
    }


def _num(v) -> bool:
    """A finite real number of a sane size: not a boolean, not an integer too large for a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v) and abs(v) < 1e300
    except OverflowError:       # an integer of hundreds of digits
        return False


def migrate(data: dict) -> dict:
    """An older result as the current version: the fields it could not know are null."""
    version = data.get("schema_version")
    if version == SCHEMA_VERSION:
        return data
    data = dict(data, schema_version=SCHEMA_VERSION, migrated_from=data.get("migrated_from") or version)
    data["levels"] = [{**MIGRATED_FIELDS, **lv} if isinstance(lv, dict) else lv for lv in data["levels"]]
    if isinstance(data.get("device"), dict):
        data["device"] = {"environment": {}, **data["device"]}
    data.setdefault("created", "")
    data.setdefault("doubts", [])
    data = carveout_json.migrate(data)
    return data


def validate_result(data, source: str = "result") -> dict:
    """Raise InputError unless ``data`` is a readable result; return it as the current version."""
    def bad(what: str):
        raise InputError(f"{source} is not a detect-caches result: {what}")
    if not isinstance(data, dict):
        bad("the top level must be a JSON object")
    version = data.get("schema_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise InputError(f"{source} has schema_version {version!r}; this tool reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))} (re-run analyze on its measurements.csv)")
    dev = data.get("device")
    if not isinstance(dev, dict) or not isinstance(dev.get("name"), str) or not dev["name"].strip():
        bad("device.name is missing")
    for key in ("name", "uuid", "host", "driver", "vendor", "arch"):
        if dev.get(key) is not None and (not isinstance(dev.get(key), str) or len(dev[key]) > 1000):
            bad(f"device.{key} must be a string (at most 1000 characters)")
    index = dev.get("index")
    if index is not None and (type(index) is not int or not 0 <= index < 1 << 20):
        bad("device.index must be a whole number from 0")
    if dev.get("environment") is not None and not isinstance(dev.get("environment"), dict):
        bad("device.environment must be an object")
    levels = data.get("levels")
    if not isinstance(levels, list) or not levels or len(levels) > 64:
        bad("levels must be a non-empty list")
    seen = set()
    for i, lv in enumerate(levels):
        _check_level(lv, f"levels[{i}]", bad)
        key = (lv["name"], lv.get("scope", "device"))
        if key in seen:
            bad(f"levels[{i}] repeats the level {lv['name']} ({key[1]}); each level is listed once")
        seen.add(key)
    if levels[-1].get("capacity_bytes") is not None and levels[-1].get("name") in ("HBM", "DRAM"):
        bad("main memory has no capacity")
    for key, hi in (("measurements", 1e9), ("elapsed_s", 1e9)):
        v = data.get(key, 0)
        if not _num(v) or not 0 <= v <= hi:
            bad(f"{key} must be a number from 0 to {hi:g}")
    for key in ("warnings", "doubts"):
        v = data.get(key, [])
        if not isinstance(v, list) or len(v) > 10000 or not all(isinstance(w, str) for w in v):
            bad(f"{key} must be a list of strings")
    if not isinstance(data.get("method", {}), dict):
        bad("method must be an object")
    created = data.get("created")
    if created is not None and not isinstance(created, str):
        bad("created must be a string")
    if created and run_time(data) is None:
        bad(f"created {created[:40]!r} is not a time like 2026-11-30T10:00:00+0000")
    data = migrate(data)
    carveout_json.validate(data, bad)
    return data


def _check_level(lv, where: str, bad) -> None:
    if not isinstance(lv, dict):
        bad(f"{where} must be an object")
    if not isinstance(lv.get("name"), str) or not LEVEL_NAME.match(lv["name"]):
        bad(f"{where}.name must be L<n>, Infinity Cache, HBM or DRAM")
    if lv.get("scope", "device") not in SCOPES:
        bad(f"{where}.scope must be one of {', '.join(SCOPES)}")
    if not _num(lv.get("bandwidth_gbs")) or not 0 < lv["bandwidth_gbs"] <= 1e9:
        bad(f"{where}.bandwidth_gbs must be a number > 0 and <= 1e9")
    cap = lv.get("capacity_bytes")
    if cap is not None and (not _num(cap) or not 0 < cap <= BIG):
        bad(f"{where}.capacity_bytes must be null or a number > 0 and <= 2^60")
    for key, (low, strict, integer, high) in LEVEL_NUMBERS.items():
        v = lv.get(key)
        if v is None:
            continue
        ok = _num(v) and (v > low if strict else v >= low) and v <= high and (not integer or float(v).is_integer())
        if not ok:
            limit = f"2^{int(high).bit_length() - 1}" if high >= 1024 and float(high).is_integer() \
                and not int(high) & (int(high) - 1) else f"{high:g}"
            bad(f"{where}.{key} must be null or a {'whole ' if integer else ''}number "
                f"{'>' if strict else '>='} {low} and <= {limit}")
    if cap is not None:
        lo, hi = lv.get("capacity_low_bytes"), lv.get("capacity_high_bytes")
        if lo is not None and hi is not None and not lo <= cap <= hi:
            bad(f"{where} needs capacity_low_bytes <= capacity_bytes <= capacity_high_bytes")
    conf = lv.get("confidence", 0.0)
    if not _num(conf) or not 0 <= conf <= 1:
        bad(f"{where}.confidence must be in [0, 1]")
    for key in LEVEL_TEXT:
        if lv.get(key) is not None and not isinstance(lv.get(key), str):
            bad(f"{where}.{key} must be a string")
    cands = lv.get("line_candidates_bytes", [])
    if not isinstance(cands, list) or len(cands) > 16 or not all(
            _num(c) and float(c).is_integer() and 0 < c <= 2 ** 20 for c in cands):
        bad(f"{where}.line_candidates_bytes must be a list of line sizes in bytes")
    steps = lv.get("latency_steps", [])
    if not isinstance(steps, list) or len(steps) > 64 or not all(
            isinstance(s, dict) and _num(s.get("latency_ns")) and _num(s.get("up_to_bytes")) for s in steps):
        bad(f"{where}.latency_steps must be a list of {{latency_ns, up_to_bytes}}")


def _json_safe(obj):
    """NaN and infinities are not JSON: null instead (strict readers refuse them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):   # numpy scalars
        return _json_safe(obj.item())
    return obj


def dumps(result: dict) -> str:
    return json.dumps(_json_safe(result), indent=2, allow_nan=False) + "\n"


def dumps_rows(doc: dict) -> str:
    """A large document (a fleet's thousands of GPUs): its top-level keys a line each, a list's
    items a line each, through json's C encoder (indented output is pure Python: 5x slower)."""
    safe = _json_safe(doc)
    lines = []
    for key, value in safe.items():
        name = json.dumps({key: 0})[1:-4]        # a key as json writes it (1 -> "1", None -> "null")
        if isinstance(value, list) and value:
            items = ",\n    ".join(json.dumps(v, allow_nan=False) for v in value)
            lines.append(f"  {name}: [\n    {items}\n  ]")
        else:
            lines.append(f"  {name}: {json.dumps(value, allow_nan=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_result(path: Path, result: dict) -> None:
    validate_result(_json_safe(result), "the result being written")
    write_text_atomic(path, dumps(result))


def read_result(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    data = read_json_bounded(path, what="result.json")
    return validate_result(data, str(path))
