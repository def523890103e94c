"""A carveout change as the cause of an L1 change between two results: on NVIDIA (sm_70 on) the
L1 is what the shared-memory carveout leaves of one array, so a driver that picks another
carveout for the same launch moves the L1 with no change in the cache. The cause is named when
the two runs' carveouts (recorded, or implied by each L1 and the documented array) differ and
L1 + carveout, the array, stayed the same: then the L1's capacity change is not drift.
"""
from __future__ import annotations

from detect_caches.carveout import implied_carveout_kib
from detect_caches.device import DeviceFacts
from detect_caches.reports.fmt import fmt_bytes

KIB = 1024
ARRAY_TOL_KIB = 4.0      # L1 + carveout may move this much (the reserve differs between carveouts: an
                         # H200's read 3.0-6.5 KiB: BENCHMARKS.md, 2026-11-30, sixth and seventh
                         # sessions); an L1 change that no carveout step matches this closely is
                         # the cache's, since a carveout implied by the L1 alone would otherwise
                         # explain any change


def _l1(result: dict) -> dict | None:
    return next((lv for lv in result.get("levels", []) if lv.get("scope") == "per_cu" and lv.get("name") == "L1"),
                None)


def run_carveout_kib(result: dict) -> int | None:
    """The carveout (KiB) a result's launches ran under: recorded in device.carveout, else implied
    by its L1 and its arch's documented array (results older than schema 3)."""
    dev = result.get("device") or {}
    recorded = (dev.get("carveout") or {}).get("implied_carveout_kib")
    if recorded is not None:
        return int(recorded)
    l1 = _l1(result)
    if not l1 or not l1.get("capacity_bytes"):
        return None
    facts = DeviceFacts(vendor=dev.get("vendor") or "nvidia", arch=dev.get("arch") or "",
                        shared_bytes_per_cu=dev.get("shared_bytes_per_cu"))
    return implied_carveout_kib(l1["capacity_bytes"], facts)


def carveout_cause(base: dict, cur: dict) -> str | None:
    """'L1 221 KiB -> 189 KiB: carveout 32 -> 64 KiB' when a carveout change explains the two
    results' L1 change; None otherwise (no L1, same carveout, or an L1 change the carveout's
    does not account for)."""
    b_l1, c_l1 = _l1(base), _l1(cur)
    b_c, c_c = run_carveout_kib(base), run_carveout_kib(cur)
    if not (b_l1 and c_l1 and b_l1.get("capacity_bytes") and c_l1.get("capacity_bytes")) or None in (b_c, c_c) \
            or b_c == c_c:
        return None
    b_array = b_l1["capacity_bytes"] / KIB + b_c
    c_array = c_l1["capacity_bytes"] / KIB + c_c
    if abs(b_array - c_array) > ARRAY_TOL_KIB:
        return None
    return (f"L1 {fmt_bytes(b_l1['capacity_bytes'])} -> {fmt_bytes(c_l1['capacity_bytes'])}: "
            f"carveout {b_c} -> {c_c} KiB")
