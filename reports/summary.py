"""The answer first: one line with each level's size, bandwidth and latency, and the narrow
table of the same figures, for the terminal, report.md, report.html and the plot's subtitle.

"L1 221 KiB per SM, 32.5 TB/s, 17 ns | L2 57.4 MiB, 8.53 TB/s (10.5 tuned), 132/246 ns | HBM ..."
"""
from __future__ import annotations

import math

from detect_caches.reports.fmt import fmt_bytes
from detect_caches.reports.plot_levels import SAME_LATENCY

MEMORY = ("HBM", "DRAM")
TUNED = 1.05          # a tuned launch this much faster than the sweep's is worth a mention
NARROW_HEADER = ["level", "size (measured)", "documented size", "bandwidth", "tuned peak", "latency",
                 "confidence"]


def unit_word(vendor: str | None) -> str:
    """What one SM/CU is called on this vendor's parts."""
    return {"nvidia": "SM", "amd": "CU"}.get(vendor or "", "SM/CU")


def scope_words(scope: str | None, vendor: str | None = None) -> str:
    """per SM, per CU, per XCD, or device (one name for a scope everywhere a result is shown)."""
    if scope == "per_cu":
        return f"per {unit_word(vendor)}"
    if scope == "per_xcd":
        return "per XCD"
    return "device"


def fmt_bw(gbs: float | None) -> str:
    """Bandwidth to three significant figures: 32.5 TB/s, 8.53 TB/s, 850 GB/s."""
    if gbs is None:
        return "-"
    if gbs >= 1000:
        tb = gbs / 1000
        return f"{tb:.1f} TB/s" if tb >= 10 else f"{tb:.2f} TB/s"
    return f"{gbs:.0f} GB/s"


def _ns(v: float) -> str:
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def fmt_latency(lv: dict) -> str:
    """17 ns; a level the chase sees in steps: 132/246 ns (near, then far); "-" unmeasured."""
    ns = lv.get("latency_ns")
    if ns is None:
        return "-"
    steps = [s["latency_ns"] for s in lv.get("latency_steps") or [] if s.get("latency_ns")]
    if steps and abs(math.log(steps[0] / ns)) <= SAME_LATENCY:   # the near step is the level's hit
        steps = steps[1:]          # (detector.latency; results before 2026-12-07 read it another way)
    return "/".join(_ns(v) for v in [ns] + steps) + " ns"


def tuned(lv: dict) -> float | None:
    """The tuned launch's bandwidth where it beats the sweep's plateau by TUNED or more."""
    peak, bw = lv.get("peak_bandwidth_gbs"), lv.get("bandwidth_gbs")
    return peak if peak and bw and peak >= TUNED * bw else None


def fmt_size(lv: dict, vendor: str | None) -> str:
    """221 KiB per SM, 4.0 MiB per XCD, 57.4 MiB; "" for memory; "not filled" for a cache the
    sweep never left."""
    if lv.get("capacity_bytes") is None:
        return "" if lv.get("name") in MEMORY else "not filled"
    scope = scope_words(lv.get("scope"), vendor)
    return fmt_bytes(lv["capacity_bytes"]) + ("" if scope == "device" else f" {scope}")


def level_phrase(lv: dict, vendor: str | None, with_tuned: bool = True) -> str:
    bw = fmt_bw(lv.get("bandwidth_gbs"))
    fast = tuned(lv) if with_tuned else None
    if fast:
        bw += f" ({fmt_bw(fast).split()[0]} tuned)"
    parts = [p for p in (fmt_size(lv, vendor), bw) if p]
    if lv.get("latency_ns") is not None:
        parts.append(fmt_latency(lv))
    return f"{lv['name']} " + ", ".join(parts)


def answer_line(result: dict, *, tuned: bool = True) -> str:
    """Each level's size, bandwidth and latency on one line (with the tuned launch's bandwidth
    where it is clearly faster, unless ``tuned`` is False)."""
    vendor = result.get("device", {}).get("vendor")
    return " | ".join(level_phrase(lv, vendor, tuned) for lv in result.get("levels", []))


def narrow_rows(result: dict) -> list[list[str]]:
    """The levels table: figures a reader compares, nothing else."""
    vendor = result.get("device", {}).get("vendor")
    rows = []
    for lv in result.get("levels", []):
        api = lv.get("api_bytes")
        rows.append([lv["name"], fmt_size(lv, vendor) or "-", fmt_bytes(api) if api else "-",
                     fmt_bw(lv.get("bandwidth_gbs")), fmt_bw(lv.get("peak_bandwidth_gbs")), fmt_latency(lv),
                     f"{lv.get('confidence', 0):.2f}"])
    return rows


def run_line(result: dict) -> str:
    """What the answer comes from: the device, how many levels and measurements, how long."""
    dev = result.get("device", {})
    name = str(dev.get("name", "?"))
    sim = " (simulated)" if dev.get("simulated") and not name.lower().startswith("simulated") else ""
    return (f"{name}{sim}: {len(result.get('levels', []))} levels from "
            f"{result.get('measurements', 0)} measurements in {result.get('elapsed_s', 0):.1f} s")


def text_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    return ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in [header] + rows]


def terminal_summary(result: dict) -> list[str]:
    """The answer, then where it comes from, then the narrow table."""
    return [answer_line(result), run_line(result), ""] + text_table(NARROW_HEADER, narrow_rows(result))
