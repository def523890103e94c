"""result.json, schema_version 1: build, validate, write atomically, read back."""
from __future__ import annotations

import json
import math
from pathlib import Path

from detector.levels import Detection
from measure.device import DeviceFacts
from measure.errors import InputError
from reports.atomic import write_text_atomic

SCHEMA_VERSION = 1
TOOL = {"name": "detect-caches", "version": "0.1.0"}
LEVEL_NAMES = ("L0", "L1", "L2", "Infinity Cache", "HBM", "DRAM")
SCOPES = ("per_cu", "per_xcd", "device")


def build_result(detection: Detection, facts: DeviceFacts, *, measurements: int, elapsed_s: float,
                 method: dict | None = None, extra_warnings: list[str] = ()) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": dict(TOOL),
        "device": facts.to_dict(),
        "levels": [lv.to_dict() for lv in detection.levels],
        "measurements": int(measurements),
        "elapsed_s": round(float(elapsed_s), 3),
        "method": method or {},
        "warnings": list(detection.warnings) + list(extra_warnings),
    }


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate_result(data, source: str = "result") -> dict:
    """Raise InputError unless ``data`` is a schema-1 result."""
    def bad(what: str):
        raise InputError(f"{source} is not a detect-caches result: {what}")
    if not isinstance(data, dict):
        bad("the top level must be a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"{source} has schema_version {version!r}; this tool reads version "
                         f"{SCHEMA_VERSION} (re-run analyze on its measurements.csv to convert it)")
    dev = data.get("device")
    if not isinstance(dev, dict) or not isinstance(dev.get("name"), str):
        bad("device.name is missing")
    levels = data.get("levels")
    if not isinstance(levels, list) or not levels:
        bad("levels must be a non-empty list")
    for i, lv in enumerate(levels):
        where = f"levels[{i}]"
        if not isinstance(lv, dict):
            bad(f"{where} must be an object")
        if lv.get("name") not in LEVEL_NAMES:
            bad(f"{where}.name must be one of {', '.join(LEVEL_NAMES)}")
        if lv.get("scope", "device") not in SCOPES:
            bad(f"{where}.scope must be one of {', '.join(SCOPES)}")
        if not _num(lv.get("bandwidth_gbs")) or lv["bandwidth_gbs"] <= 0:
            bad(f"{where}.bandwidth_gbs must be a number > 0")
        cap = lv.get("capacity_bytes")
        if cap is not None:
            if not _num(cap) or cap <= 0:
                bad(f"{where}.capacity_bytes must be null or a number > 0")
            lo, hi = lv.get("capacity_low_bytes"), lv.get("capacity_high_bytes")
            if lo is not None and hi is not None and (not _num(lo) or not _num(hi) or not lo <= cap <= hi):
                bad(f"{where} needs capacity_low_bytes <= capacity_bytes <= capacity_high_bytes")
        conf = lv.get("confidence", 0.0)
        if not _num(conf) or not 0 <= conf <= 1:
            bad(f"{where}.confidence must be in [0, 1]")
    if levels[-1].get("capacity_bytes") is not None and levels[-1].get("name") in ("HBM", "DRAM"):
        bad("main memory has no capacity")
    if not _num(data.get("measurements", 0)) or not _num(data.get("elapsed_s", 0)):
        bad("measurements and elapsed_s must be numbers")
    if not isinstance(data.get("warnings", []), list):
        bad("warnings must be a list")
    return data


def write_result(path: Path, result: dict) -> None:
    validate_result(result, "the result being written")
    write_text_atomic(path, json.dumps(result, indent=2, sort_keys=False) + "\n")


def read_result(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        raise InputError(f"{path} is empty")
    try:
        data = json.loads(text, parse_constant=lambda c: float("nan"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to be a result") from None
    return validate_result(data, str(path))
