"""Number formatting shared by the Markdown report, the terminal table and compare."""
from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    """Binary units: 22 KiB, 60.0 MiB."""
    if n is None:
        return "-"
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            v = n / div
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def fmt_gbs(v: float | None) -> str:
    """Bandwidth: TB/s from 1000 GB/s on."""
    if v is None:
        return "-"
    return f"{v / 1000:.2f} TB/s" if v >= 1000 else f"{v:.0f} GB/s"


def level_key(level: dict) -> str:
    return f"{level['name']} ({level.get('scope', 'device')})"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)
