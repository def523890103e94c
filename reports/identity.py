"""Who a result is about and when it was made.

A GPU is its UUID; without one, its host, index and model together (two models on one host
label are two GPUs); a result that names neither a UUID nor a host is a GPU of its own, never
merged with another (its path tells it apart), and reports say so. A result's time is its own
``created`` stamp (with its offset from UTC, so results from machines in other time zones order
correctly); a result without one (schema 1) has no known time: it is never ordered by its
file's modification time, which a copy or a restore changes.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


def identified(result: dict) -> bool:
    dev = result["device"]
    return bool(dev.get("uuid")) or (bool(dev.get("host")) and dev.get("index") is not None)


def gpu_label(result: dict, path: Path | str | None = None) -> str:
    """The GPU as people read it: its UUID, else host:index, else the result's path."""
    dev = result["device"]
    if dev.get("uuid"):
        return str(dev["uuid"])
    if dev.get("host") and dev.get("index") is not None:
        return f"{dev['host']}:{dev['index']}"
    return f"unidentified ({path})" if path is not None else "unidentified"


def gpu_key(result: dict, path: Path | str | None = None) -> str:
    """The GPU's identity for grouping runs: the label, with the model where no UUID says it."""
    dev = result["device"]
    label = gpu_label(result, path)
    return label if dev.get("uuid") else f"{dev.get('name', '?')}|{label}"


def run_time(result: dict) -> float | None:
    """When the result was made, seconds since the epoch; None when it does not say."""
    try:
        return datetime.strptime(str(result.get("created") or ""), TIME_FORMAT).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def parse_when(text: str) -> float | None:
    """A date or time a user gives (2026-11-30, 2026-11-30T10:00:00, with or without an offset):
    the end of that day for a date, local time where no offset is given; None if unreadable."""
    text = text.strip()
    for fmt, end_of_day in (("%Y-%m-%d", True), ("%Y-%m-%dT%H:%M:%S%z", False), ("%Y-%m-%dT%H:%M:%S", False),
                            ("%Y-%m-%d %H:%M:%S", False)):
        try:
            when = datetime.strptime(text, fmt)
        except ValueError:
            continue
        try:
            return when.timestamp() + (86400 - 1 if end_of_day else 0)
        except (OverflowError, OSError, ValueError):
            return None
    return None
