"""The command line's argument types: one line and exit 2 on anything else (argparse's own
messages included)."""
from __future__ import annotations

import argparse
import math

from detect_caches.errors import InputError


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise InputError(f"{message} (see {self.prog} --help)")


def positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = _finite(text) if kind is int else None
            if value is None and kind is int and any(c.isdigit() for c in text) and _finite(text, huge=True):
                raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range") from None
            if value is None:
                raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number") from None
            if not value.is_integer():
                raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number") from None
            if abs(value) > 2 ** 62:
                raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range") from None
            value = int(value)      # 1e3 as 1000
        if not (value > 0 and value < float("inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
        return value
    return parse


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + f" (... {len(text)} characters)"


def _finite(text: str, *, huge: bool = False) -> float | None:
    """The number ``text`` holds if finite (``huge``: or past a float's range), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) or (huge and math.isinf(value)) else None


def block(text: str) -> int:
    from detect_caches.measure.kernel_meta import check_block_size
    value = positive(int)(text)
    try:
        check_block_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def bounded(hi: int):
    """A whole number from 1 to ``hi`` (a size-like option)."""
    def parse(text: str) -> int:
        value = positive(int)(text)
        if value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi}, got {text}")
        return value
    return parse


def warps(text: str) -> int:
    """Warps per program: a power of two from 1 to 32 (what a Triton launch takes)."""
    value = bounded(32)(text)
    if value & (value - 1):
        raise argparse.ArgumentTypeError(f"must be a power of two from 1 to 32, got {text}")
    return value


def file_prefix(text: str) -> str:
    """A file name's prefix: no folder in it, so the files land where --results-dir says."""
    name = text
    if not name or name in (".", "..") or any(c in name for c in "/\\") or len(name) > 100 \
            or any(ord(c) < 32 for c in name):
        raise argparse.ArgumentTypeError(f"must be a file name prefix (no '/', no control characters, at most "
                                         f"100 characters), got {_shown(text)}")
    return name
