"""Human units shared by the detector's notes and the reports."""
from __future__ import annotations


def fmt_bytes(n: float | None, digits: int | None = None) -> str:
    """Binary units (22 KiB, 60.0 MiB; ``digits`` decimals when given); "-" for unknown."""
    if n is None:
        return "-"
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            v = n / div
            if digits is not None:
                return f"{v:.{digits}f} {unit}"
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def fmt_bytes_apart(a: float, b: float) -> tuple[str, str]:
    """Two sizes written with as many decimals (up to 2) as it takes to tell them apart (a cliff
    between 221.00 and 221.25 KiB)."""
    pair = (fmt_bytes(a), fmt_bytes(b))
    for digits in (1, 2):
        if pair[0] != pair[1] or a == b:
            break
        pair = (fmt_bytes(a, digits), fmt_bytes(b, digits))
    return pair
