"""result.json's carveout fields (schema 3): ``device.carveout`` (what the run's launches ran
under), ``carveouts`` (the L1 under each carveout asked for) and ``unified_array`` (the array as
the L1 sees it); built from a detection, checked when read, and null or empty in older results."""
from __future__ import annotations

import math
from pathlib import Path

LAUNCH_NUMBERS = ("preference_pct", "shared_bytes_per_block", "blocks_per_sm", "reserved_bytes_per_block",
                  "least_carveout_kib", "implied_carveout_kib", "documented_array_kib")
ROW_NUMBERS = ("carveout_kib", "preference_pct", "l1_capacity_bytes", "l1_low_bytes", "l1_high_bytes",
               "bandwidth_gbs", "latency_ns", "measurements")
ARRAY_NUMBERS = ("seen_kib", "documented_kib", "reserve_median_kib", "slope", "carveouts_used")
EMPTY = {"carveouts": [], "unified_array": None}


def result_fields(detection, launch: dict | None) -> tuple[dict, list[str]]:
    """(the top-level fields, warnings) of a detection's carveout table; ``launch`` is
    device.carveout (detector.carveouts.launch_carveout)."""
    table = getattr(detection, "carveouts", None)
    if table is None:
        return dict(EMPTY), []
    fields = {"carveouts": [r.to_dict() for r in table.rows], "unified_array": table.array.to_dict()}
    return fields, list(table.warnings)


def _number_or_null(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def _object(obj, keys, where: str, bad) -> None:
    if not isinstance(obj, dict):
        bad(f"{where} must be an object")
    for key in keys:
        if not _number_or_null(obj.get(key)):
            bad(f"{where}.{key} must be null or a number")


def validate(data: dict, bad) -> None:
    """Check the carveout fields of a schema-3 result (``bad(what)`` raises)."""
    launch = data["device"].get("carveout")
    if launch is not None:
        _object(launch, LAUNCH_NUMBERS, "device.carveout", bad)
    rows = data.get("carveouts", [])
    if not isinstance(rows, list) or len(rows) > 64:
        bad("carveouts must be a list")
    for i, row in enumerate(rows):
        _object(row, ROW_NUMBERS, f"carveouts[{i}]", bad)
        if not isinstance(row.get("reached"), bool):
            bad(f"carveouts[{i}].reached must be true or false")
        if not isinstance(row.get("fall_shape", ""), str):
            bad(f"carveouts[{i}].fall_shape must be a string")
    array = data.get("unified_array")
    if array is not None:
        _object(array, ARRAY_NUMBERS, "unified_array", bad)
        reserve = array.get("reserve_kib", {})
        if not isinstance(reserve, dict) or not all(_number_or_null(v) for v in reserve.values()):
            bad("unified_array.reserve_kib must map carveouts to numbers")


def migrate(data: dict) -> dict:
    """A schema-2 result as schema 3: it recorded no carveout."""
    data = {**EMPTY, **data}
    if isinstance(data.get("device"), dict):
        data["device"] = {"carveout": None, **data["device"]}
    return data


def recorded_launch_of(device) -> dict | None:
    """What a result.json given to ``analyze`` as its device facts (a dict or a path) recorded of
    its launches (device.carveout), less what that run inferred from its own L1."""
    if isinstance(device, (str, Path)) and Path(device).is_file():
        from detect_caches.safe_read import read_json_bounded
        device = read_json_bounded(Path(device), what="device JSON")
    if not isinstance(device, dict):
        return None
    dev = device["device"] if isinstance(device.get("device"), dict) else device
    launch = dev.get("carveout")
    if not isinstance(launch, dict):
        return None
    return {k: launch.get(k) for k in LAUNCH_NUMBERS[:5]}
