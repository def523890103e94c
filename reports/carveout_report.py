"""The carveout in the report: the device table's line (what the run's launches ran under, or
AMD's separate LDS), and with ``--carveouts`` the table "shared memory carved out -> L1 capacity,
bandwidth, latency" and one line on the unified array and its reserve."""
from __future__ import annotations

from detect_caches.reports.fmt import fmt_bytes, fmt_gbs, markdown_table

HEADER = ["shared memory carved out", "asked (preference)", "L1 capacity (interval)", "fall", "bandwidth",
          "latency", "granted"]


def device_line(result: dict) -> str:
    """The device table's carveout cell ('' where nothing applies or nothing was recorded)."""
    dev = result["device"]
    if dev.get("vendor") == "amd":
        return "none: AMD's LDS is a separate array; the L1 is not carved"
    c = dev.get("carveout")
    if not c:
        return ""
    implied = c.get("implied_carveout_kib")
    who = ("the driver's choice" if c.get("preference_pct") is None else f"a preference of {c['preference_pct']}%")
    text = (f"{implied} KiB ({who}; implied by the L1 and the documented {c.get('documented_array_kib')} KiB array)"
            if implied is not None else f"unknown ({who})")
    if c.get("blocks_per_sm"):
        shared = c.get("shared_bytes_per_block")
        text += (f"; {c['blocks_per_sm']} blocks per SM of {'?' if shared is None else shared} B shared memory "
                 f"+ {c.get('reserved_bytes_per_block') or 0} B reserved")
        if c.get("least_carveout_kib") is not None:
            text += f", at least {c['least_carveout_kib']} KiB"
    return text


def _cells(row: dict) -> list[str]:
    cap = row.get("l1_capacity_bytes")
    pct = row.get("preference_pct")
    carved = "?" if row.get("carveout_kib") is None else f"{row['carveout_kib']} KiB"
    return [carved + (" (default)" if row.get("driver_default") else ""),
            "driver's choice" if row.get("driver_default") else ("-" if pct is None else f"{pct}%"),
            "-" if cap is None else f"{fmt_bytes(cap)} ({fmt_bytes(row.get('l1_low_bytes'))} to "
                                    f"{fmt_bytes(row.get('l1_high_bytes'))})",
            row.get("fall_shape") or "-", fmt_gbs(row.get("bandwidth_gbs")),
            "-" if row.get("latency_ns") is None else f"{row['latency_ns']:.1f} ns",
            "default" if row.get("driver_default") else ("yes" if row.get("reached") else "no: the default's L1")]


def table_rows(result: dict) -> list[list[str]]:
    """The carveout table's rows (empty without --carveouts)."""
    return [_cells(r) for r in result.get("carveouts") or []]


def array_line(result: dict) -> str:
    a = result.get("unified_array")
    if not a or a.get("seen_kib") is None:
        return "Too few carveouts were granted to read the unified array off them."
    text = (f"Unified L1/shared array as the L1 sees it: {a['seen_kib']:.1f} KiB (L1 + carveout, median over "
            f"{a['carveouts_used']} granted carveout(s)")
    text += f"; L1 against carveout: slope {a['slope']:+.2f})" if a.get("slope") is not None else ")"
    if a.get("documented_kib"):
        reserve = a.get("reserve_kib") or {}
        spread = (f", {min(reserve.values()):.1f} to {max(reserve.values()):.1f} KiB over the carveouts"
                  if len(reserve) > 1 else "")
        text += (f"; documented {a['documented_kib']} KiB, so the system keeps a reserve of "
                 f"{a['reserve_median_kib']:.1f} KiB (median{spread})")
    return text + "."


def section(result: dict) -> list[str]:
    """The report's carveout section (empty without --carveouts)."""
    rows = result.get("carveouts") or []
    if not rows:
        return []
    return ["## The L1 under each shared-memory carveout", "",
            markdown_table(HEADER, [_cells(r) for r in rows]), "", array_line(result), ""]


def terminal(result: dict) -> list[str]:
    """The same table for the terminal summary."""
    rows = result.get("carveouts") or []
    if not rows:
        return []
    cells = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADER)]
    line = lambda cs: "  ".join(c.ljust(w) for c, w in zip(cs, widths)).rstrip()  # noqa: E731
    return ["", line(HEADER)] + [line(c) for c in cells] + [array_line(result)]
