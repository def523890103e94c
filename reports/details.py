"""The report's second table: how sure each figure is and where it comes from (the interval, the
fall's shape, the share of the physical ceiling, line and sector, repeatabilities)."""
from __future__ import annotations

from detect_caches.reports.fmt import fmt_bytes
from detect_caches.reports.summary import fmt_bw

DETAIL_HEADER = ["level", "size interval", "fall shape", "share of ceiling", "line / sector",
                 "repeatability: size / bandwidth / latency"]


def interval(lv: dict) -> str:
    if lv.get("capacity_bytes") is None:
        return "-"
    return f"{fmt_bytes(lv.get('capacity_low_bytes'))} to {fmt_bytes(lv.get('capacity_high_bytes'))}"


def share(lv: dict) -> str:
    ceiling = lv.get("ceiling_gbs")
    if not ceiling:
        return "no published ceiling"
    return f"{lv['bandwidth_gbs'] / ceiling:.0%} of {fmt_bw(ceiling)}"


def lines(lv: dict) -> str:
    line, sector = lv.get("line_bytes"), lv.get("sector_bytes")
    if line is None and sector is None:
        return "-"
    return " / ".join("-" if v is None else f"{v} B" for v in (line, sector))


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1%}"


def repeat(lv: dict) -> str:
    cap = lv.get("capacity_repeatability") if lv.get("capacity_bytes") else None
    return " / ".join(_pct(v) for v in (cap, lv.get("bandwidth_repeatability"), lv.get("latency_repeatability")))


def detail_rows(result: dict) -> list[list[str]]:
    return [[lv["name"], interval(lv), lv.get("fall_shape") or "-", share(lv), lines(lv), repeat(lv)]
            for lv in result.get("levels", [])]


def documented_sentences(result: dict) -> list[str]:
    """Where a measured size and a documented one differ, say which is which."""
    out = []
    for lv in result.get("levels", []):
        cap, api = lv.get("capacity_bytes"), lv.get("api_bytes")
        if cap and api and fmt_bytes(cap) != fmt_bytes(api):
            out.append(f"The {lv['name']} measures {fmt_bytes(cap)} (interval {interval(lv)}); the driver API or "
                       f"the vendor documents {fmt_bytes(api)}. The measured figure is what this run's reads "
                       f"could use; the documented one is given for reference.")
    return out
