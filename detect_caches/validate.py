"""Checks for values read from files and the environment: type, finiteness and range, each
failure one user-facing sentence (InputError). Used by every reader (profiles, device facts,
result.json, measurement CSVs, torchrun/Slurm variables)."""
from __future__ import annotations

import math
import sys

from detect_caches.errors import InputError


def is_number(value) -> bool:
    """A real, finite number (bool is not a number here, nor an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def number(value, what: str, *, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False, integer: bool = False):
    """``value`` as a number within [lo, hi] (lo excluded with ``lo_open``), or InputError."""
    if integer:
        ok = isinstance(value, int) and not isinstance(value, bool) and is_number(value)
        kind = "an integer"
    else:
        ok = is_number(value)
        kind = "a finite number"
    if not ok:
        raise InputError(f"{what} must be {kind}, got {_short(value)}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise InputError(f"{what} must be {'>' if lo_open else '>='} {lo:g}, got {_short(value)}")
    if hi is not None and value > hi:
        raise InputError(f"{what} must be <= {hi:g}, got {_short(value)}")
    return value


def _short(value) -> str:
    """A value as a message shows it: repr, cut to 60 characters (an integer of 5000 digits
    is not a message)."""
    try:
        text = repr(value)
    except ValueError:           # an integer longer than Python will print
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return text if len(text) <= 60 else text[:57] + "..."


def text(value, what: str, *, max_len: int = 4096) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > max_len:
        raise InputError(f"{what} is longer than {max_len} characters")
    return value


def env_int(env: dict, name: str, *, lo: int = 0, hi: int = 1 << 20) -> int:
    """An integer environment variable (torchrun, Slurm), or InputError naming it."""
    raw = env.get(name, "")
    try:
        value = int(raw.strip()) if len(raw.strip()) <= 20 else None
    except ValueError:
        value = None
    if value is None:
        raise InputError(f"the environment variable {name}={_short(raw)} is not an integer") from None
    if not lo <= value <= hi:
        raise InputError(f"the environment variable {name}={value} is out of range ({lo} to {hi})")
    return value
