"""Reads and validates a measurements CSV. Only CSV is parsed; nothing is executed or unpickled."""
from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

from measure.errors import InputError
from measure.records import REQUIRED_COLUMNS, SWEEPS, Measurement

_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(Measurement)}
MAX_BYTES = 256 * 1024 * 1024


def _number(text: str, name: str, where: str, integer: bool) -> float | int:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{where}: {name} must be a finite number > 0, got {text!r}")
    if integer:
        if value != int(value):
            raise InputError(f"{where}: {name} must be a whole number of bytes, got {text!r}")
        return int(value)
    return value


def _optional(value: str, kind: str):
    if value is None or value == "":
        return None
    try:
        if kind == "int":
            return int(float(value))
        if kind == "float":
            return float(value)
    except ValueError:
        return None
    return value


def read_measurements(path: str | Path) -> list[Measurement]:
    """Parse ``path`` into measurements, or raise InputError with the first problem found."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path} is a folder; give the measurements.csv inside it")
    try:
        if path.stat().st_size > MAX_BYTES:
            raise InputError(f"{path} is larger than 256 MiB; that is not a measurements file")
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a text CSV file") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if "\0" in text:
        raise InputError(f"{path} is not a text CSV file")
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise InputError(f"{path} is empty; it needs a header and rows with "
                         f"{', '.join(REQUIRED_COLUMNS)}")
    try:
        reader = csv.DictReader(lines)
        header = [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as exc:
        raise InputError(f"{path} is not a valid CSV file ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path} lacks the column(s) {', '.join(missing)}; a measurements CSV "
                         f"needs {', '.join(REQUIRED_COLUMNS)}")
    reader.fieldnames = header
    records: list[Measurement] = []
    try:
        for line_no, row in enumerate(reader, start=2):
            where = f"{path} line {line_no}"
            if None in row:
                raise InputError(f"{where} has more fields than the header")
            sweep = (row.get("sweep") or "").strip()
            if sweep not in SWEEPS:
                raise InputError(f"{where}: sweep must be one of {', '.join(SWEEPS)}, got {sweep!r}")
            kwargs = {"sweep": sweep,
                      "working_set_bytes": _number(row["working_set_bytes"], "working_set_bytes", where, True),
                      "bandwidth_gbs": _number(row["bandwidth_gbs"], "bandwidth_gbs", where, False)}
            for name, kind in _FIELD_TYPES.items():
                if name in kwargs or name not in row:
                    continue
                value = _optional(row[name], kind)
                if value is not None:
                    kwargs[name] = value
            records.append(Measurement(**kwargs))
    except csv.Error as exc:
        raise InputError(f"{path} is not a valid CSV file ({exc})") from None
    if not records:
        raise InputError(f"{path} has a header but no measurements")
    return records
