"""Number formatting shared by the Markdown report, the terminal table and compare."""
from __future__ import annotations

from detect_caches.detector.units import fmt_bytes  # noqa: F401  (one formatter for both layers)


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
