"""Reads and validates a measurements CSV. Only CSV is parsed; nothing is executed or unpickled.

Required columns: ``sweep`` and ``working_set_bytes``, and per row a figure: ``bandwidth_gbs`` (a
bandwidth row, the default) or ``latency_ns`` (``metric`` = ``latency``, a pointer chase). Every
other known column is checked (finite, in range) where it is read; unknown columns are ignored.
A last row cut short (a run stopped by a full disk or a kill) is left out with a warning; a
short row anywhere else is an error.
"""
from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

from detect_caches.grid import DENSE_SLOT_BYTES
from detect_caches.errors import InputError
from detect_caches.records import METRICS, PHASES, SWEEPS, Measurement
from detect_caches.safe_read import MAX_BYTES, read_text_bounded

_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(Measurement)}
REQUIRED = ("sweep", "working_set_bytes")
MAX_INT = 1 << 62
# what a reading may hold: wider than any GPU's, narrow enough that the analysis' ratios stay finite
FIGURE_RANGE = {"bandwidth_gbs": (1e-6, 1e9, "GB/s"), "latency_ns": (1e-3, 1e7, "ns")}


def _number(text, name: str, where: str, *, integer: bool = False, positive: bool = True) -> float | int:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(value) or (positive and value <= 0) or (not positive and value < 0):
        raise InputError(f"{where}: {name} must be a finite number {'>' if positive else '>='} 0, got {text!r}")
    if integer:
        if value != int(value) or abs(value) > MAX_INT:
            raise InputError(f"{where}: {name} must be a whole number, got {text!r}")
        return int(value)
    return value


def _figure(text, name: str, where: str) -> float:
    """A reading: a finite number > 0 inside FIGURE_RANGE."""
    value = _number(text, name, where)
    lo, hi, unit = FIGURE_RANGE[name]
    if not lo <= value <= hi:
        raise InputError(f"{where}: {name} must be from {lo:g} to {hi:g} {unit}, got {text.strip()!r}")
    return value


def _optional(value: str, name: str, kind: str, where: str):
    """A known optional column: empty is unknown; anything else must parse and be finite."""
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    if kind == "int":
        return _number(value, name, where, integer=True, positive=False)
    if kind == "float":
        try:
            v = float(value)
        except ValueError:
            raise InputError(f"{where}: {name} {value!r} is not a number") from None
        if math.isinf(v):
            raise InputError(f"{where}: {name} must be finite, got {value!r}")
        return v
    if len(value) > 200:
        raise InputError(f"{where}: {name} is longer than 200 characters")
    return value


def _header(reader, path: Path) -> list[str]:
    header = [h.strip() for h in (reader.fieldnames or [])]
    dup = sorted({h for h in header if h and header.count(h) > 1})
    if dup:
        raise InputError(f"{path} has the column(s) {', '.join(dup)} more than once; which one holds "
                         f"the figures is ambiguous")
    missing = [c for c in REQUIRED if c not in header]
    if missing or ("bandwidth_gbs" not in header and "latency_ns" not in header):
        raise InputError(f"{path} lacks the column(s) {', '.join(missing or ['bandwidth_gbs'])}; a measurements "
                         f"CSV needs sweep, working_set_bytes and bandwidth_gbs (or latency_ns)")
    return header


def _row(row: dict, where: str) -> Measurement | None:
    """One measurement, or None for a row whose timing gave no figure (an empty latency_ns or
    bandwidth_gbs: a chase that gave no time, a regression with no positive slope; the writer
    records the attempt, the analysis has nothing to use)."""
    sweep = (row.get("sweep") or "").strip()
    if sweep not in SWEEPS:
        raise InputError(f"{where}: sweep must be one of {', '.join(SWEEPS)}, got {sweep!r}")
    metric = (row.get("metric") or "bandwidth").strip() or "bandwidth"
    if metric not in METRICS:
        raise InputError(f"{where}: metric must be one of {', '.join(METRICS)}, got {metric!r}")
    kwargs = {"sweep": sweep, "metric": metric,
              "working_set_bytes": _number(row["working_set_bytes"], "working_set_bytes", where, integer=True)}
    for name, kind in _FIELD_TYPES.items():
        if name in kwargs or name not in row or name in ("bandwidth_gbs", "latency_ns"):
            continue
        value = _optional(row[name], name, kind, where)
        if value is not None:
            kwargs[name] = value
    if kwargs.get("phase", "coarse") not in PHASES:
        raise InputError(f"{where}: phase must be one of {', '.join(PHASES)}, got {kwargs['phase']!r}")
    if metric == "latency":
        if not (row.get("latency_ns") or "").strip():
            return None
        ns = _figure(row.get("latency_ns"), "latency_ns", where)
        slot = kwargs.get("stride_bytes") or DENSE_SLOT_BYTES
        kwargs.update(latency_ns=ns, stride_bytes=slot, sweep="chase" if sweep != "chase" else sweep)
        kwargs["bandwidth_gbs"] = slot / ns     # the rate the analyzer segments
        lo, hi, _ = FIGURE_RANGE["bandwidth_gbs"]
        if not lo <= slot / ns <= hi:      # only a stride_bytes given can take it there
            raise InputError(f"{where}: stride_bytes / latency_ns ({slot} / {ns:g}) must be from "
                             f"{lo:g} to {hi:g} bytes per ns")
    else:
        if not (row.get("bandwidth_gbs") or "").strip():
            return None
        kwargs["bandwidth_gbs"] = _figure(row.get("bandwidth_gbs"), "bandwidth_gbs", where)
    return Measurement(**kwargs)


def read_measurements(path: str | Path, warnings: list[str] | None = None) -> list[Measurement]:
    """Parse ``path`` into measurements, or raise InputError with the first problem found; a
    note about anything left out goes to ``warnings``."""
    path = Path(path)
    text = read_text_bounded(path, what="measurements CSV", max_bytes=MAX_BYTES)
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise InputError(f"{path} is empty; it needs a header and rows with sweep, working_set_bytes, "
                         f"bandwidth_gbs")
    try:
        reader = csv.DictReader(lines)
        header = _header(reader, path)
        reader.fieldnames = header
        rows = list(enumerate(reader, start=2))
    except csv.Error as exc:
        raise InputError(f"{path} is not a valid CSV file ({exc})") from None
    records: list[Measurement] = []
    untimed = 0
    for i, (line_no, row) in enumerate(rows):
        where = f"{path} line {line_no}"
        if None in row:
            raise InputError(f"{where} has more fields than the header")
        cut = [k for k in header if row.get(k) is None]
        if cut:
            if i == len(rows) - 1:   # the last row of a run that stopped while writing
                if warnings is not None:
                    warnings.append(f"the last row of {path.name} (line {line_no}) was cut short "
                                    f"({len(header) - len(cut)} of {len(header)} fields) and was left out")
                break
            raise InputError(f"{where} has fewer fields than the header")
        record = _row(row, where)
        if record is None:
            untimed += 1
        else:
            records.append(record)
    if untimed and warnings is not None:
        warnings.append(f"{untimed} row(s) of {path.name} hold no figure (an empty bandwidth_gbs or "
                        f"latency_ns: timings that gave none) and were left out")
    if not records:
        raise InputError(f"{path} has a header but no measurements")
    return records


def records_from_rows(rows, source: str, warnings: list[str] | None = None) -> list[Measurement]:
    """Measurements from rows of a table already in memory (a DataFrame's records), checked like
    a CSV's rows; rows without a figure (NaN) are left out with the CSV's warning."""
    records = []
    untimed = 0
    for i, row in enumerate(rows):
        text = {str(k).strip(): ("" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
                for k, v in row.items()}
        missing = [c for c in REQUIRED if c not in text]
        if missing:
            raise InputError(f"{source} lacks the column(s) {', '.join(missing)}")
        record = _row(text, f"{source} row {i}")
        if record is not None:
            records.append(record)
        else:
            untimed += 1
    if untimed and warnings is not None:
        warnings.append(f"{untimed} row(s) of {source} hold no figure (an empty or NaN bandwidth_gbs or "
                        f"latency_ns: timings that gave none) and were left out")
    if not records:
        raise InputError(f"{source} has no measurements")
    return records
