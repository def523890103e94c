"""Human units shared by the detector's notes and the reports."""
from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    """Binary units (22 KiB, 60.0 MiB); "-" for unknown."""
    if n is None:
        return "-"
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            v = n / div
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"
