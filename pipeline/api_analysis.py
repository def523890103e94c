"""The Python API's analysis and check: ``analyze`` (detection and reports on recorded
measurements, no GPU, no torch) and ``compare`` (a regression check of two results), on the
same path as the command line's `analyze` and `compare`."""
from __future__ import annotations

import json
import time
from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.pipeline.result import Result


def _tolerances(capacity_tol, bandwidth_tol, latency_tol, fail_on) -> dict:
    """compare's keyword arguments from what a user gave (3%, 0.03 or None for the default)."""
    from detect_caches.reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, DEFAULT_LATENCY_TOL
    from detect_caches.reports.verdict import check_fail_on, parse_tolerance
    pick = lambda v, d, w: d if v is None else parse_tolerance(v, w)  # noqa: E731
    return dict(capacity_tol=pick(capacity_tol, DEFAULT_CAPACITY_TOL, "the capacity tolerance"),
                bandwidth_tol=pick(bandwidth_tol, DEFAULT_BANDWIDTH_TOL, "the bandwidth tolerance"),
                latency_tol=pick(latency_tol, DEFAULT_LATENCY_TOL, "the latency tolerance"),
                fail_on=check_fail_on(fail_on))


def _facts(device, vendor: str | None, name: str):
    from detect_caches.device import DeviceFacts, load_device_json
    if device is None:
        facts = DeviceFacts(name=name)
    elif isinstance(device, DeviceFacts):
        facts = device
    elif isinstance(device, dict):
        data = device.get("device", device) if isinstance(device.get("device"), dict) else device
        facts = DeviceFacts.from_dict(data, source="device")
    else:
        facts = load_device_json(device)
    if vendor:
        if vendor not in ("nvidia", "amd"):
            raise InputError(f"vendor must be nvidia or amd, got {vendor!r}")
        facts.vendor = vendor
    return facts


def analyze(measurements, device=None, *, vendor: str | None = None, out=None, overwrite: bool = False) -> Result:
    """Detection and reports on recorded measurements: a measurements.csv path or a pandas
    DataFrame with its columns. ``device``: what --device-json holds (a dict or a path; a
    result.json works too). No GPU, no torch. ``overwrite=True`` replaces an earlier result in ``out``
    (never the CSV it reads)."""
    from detect_caches.reader import read_measurements, records_from_rows
    t0 = time.perf_counter()
    warnings: list[str] = []
    if hasattr(measurements, "to_dict") and hasattr(measurements, "columns"):
        records = records_from_rows(measurements.to_dict("records"), "the DataFrame", warnings)
        source, name = "DataFrame", "measurements"
    else:
        records = read_measurements(measurements, warnings)
        source, name = str(measurements), Path(measurements).stem
    facts = _facts(device, vendor, name)
    from detect_caches.pipeline.cli_log import get
    get("api").info("analyze: %d measurements from %s, device %s", len(records), source, facts.name)
    if overwrite and out is not None and isinstance(measurements, (str, Path)) and \
            Path(measurements).resolve().parent == Path(out).resolve():
        raise InputError("overwrite would replace the measurements being analyzed; write into another out=")
    from detect_caches.detector.analyze import detect_levels
    from detect_caches.detector.carveouts import launch_carveout, recorded_launch
    from detect_caches.pipeline.api import _finish, _l1_bytes   # api imports this module
    from detect_caches.reports.carveout_json import recorded_launch_of
    detection = detect_levels(records, facts)
    carveout = launch_carveout(recorded_launch_of(device) or recorded_launch(records, facts),
                               _l1_bytes(detection), facts)
    # the folder is claimed once the analysis stands: a refused one leaves none made, and
    # overwrite=True removes an earlier result only for a new one
    out_path = None
    if out is not None:
        from detect_caches.pipeline.outputs import claim_out_dir
        out_path = claim_out_dir(Path(out), overwrite=overwrite)
    try:
        return _finish(detection, facts, records, out_path, None, {"source": source}, warnings,
                       time.perf_counter() - t0, carveout=carveout)
    finally:
        if out_path is not None:
            from detect_caches.pipeline.outputs import release
            release(out_path)


def _as_result(x) -> dict:
    from detect_caches.reports.result_json import read_result, validate_result
    if isinstance(x, Result):
        return x.data
    if isinstance(x, dict):
        try:
            copy = json.loads(json.dumps(x, default=str, allow_nan=False))
        except (ValueError, TypeError, RecursionError) as exc:
            raise InputError(f"the result is not JSON data: {exc}") from None
        return validate_result(copy, "the result")
    if not isinstance(x, (str, Path)):
        raise InputError(f"a result must be a Result, a dict or a result.json path, got {type(x).__name__}")
    return read_result(x)


def compare(baseline, current, *, capacity_tol=None, bandwidth_tol=None, latency_tol=None,
            fail_on: str = "worse", force: bool = False):
    """Regression check of ``current`` against ``baseline`` (Results, dicts or result.json paths):
    a reports.compare.Comparison (``.failed``: the check's verdict under ``fail_on``; ``.drift``:
    any change beyond what the runs can tell apart; ``.verdicts``, ``.rows``, ``.markdown()``,
    ``.to_dict()``). Tolerances are written 3% or 0.03 (None: the defaults)."""
    from detect_caches.reports.compare import check_comparable, compare_results
    tolerances = _tolerances(capacity_tol, bandwidth_tol, latency_tol, fail_on)
    base, cur = _as_result(baseline), _as_result(current)
    from detect_caches.pipeline.cli_log import get
    get("api").info("compare: %s (%s) against %s (%s)", cur["device"].get("name"), cur.get("created") or "undated",
                    base["device"].get("name"), base.get("created") or "undated")
    check_comparable(base, cur, force=force)
    return compare_results(base, cur, **tolerances)
