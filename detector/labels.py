"""Names for levels found in the data: order and vendor convention first, the known part after.

The data decides how many levels there are; this module only names them. Per-SM/CU levels end
with `L1` (two of them: `L0`, `L1`, as on RDNA). Device caches start with `L2`; on AMD the next
one is the `Infinity Cache` (AMD's name for its last-level cache, MALL), except on parts known
to have none (CDNA1/2); any further cache, or one that no convention names (a third device
cache on NVIDIA), gets a neutral name (`L3`, `L4`, ...) and a note. On NVIDIA, when the API's L2
size says that two device caches are the halves of a split L2 (the first ends at 0.3-0.75 of it,
the second at 0.75-1.33), they are `L2 near` and `L2`. Documented sizes never add, drop or move a
level: they annotate it.
"""
from __future__ import annotations

from detect_caches.detector.units import fmt_bytes
from detect_caches.device import DeviceFacts

NO_INFINITY_CACHE = ("gfx906", "gfx908", "gfx90a")   # Vega 20, CDNA1, CDNA2
UNNAMED_NOTE = ("a cache level that no {vendor} convention names: found in the data (a plateau "
                "distinct in speed from its neighbours), whatever a document says")
PARTITION_NOTE = ("the near half of a split L2: with the API reporting {api} of L2, data past about "
                  "half of it is served from the far partition at a lower rate")


def per_cu_names(count: int) -> list[str]:
    if count <= 1:
        return ["L1"][:count]
    if count == 2:
        return ["L0", "L1"]
    return ["L0", "L1"] + [f"L1.{i}" for i in range(1, count - 1)]


def device_names(facts: DeviceFacts, capacities: list[float | None]) -> tuple[list[str], list[str]]:
    """(names, notes) for device caches in order, given their capacities (bytes, device-wide)."""
    n = len(capacities)
    names, notes = [], []
    api = facts.l2_bytes_reported
    split = (facts.vendor == "nvidia" and api and n >= 2 and capacities[0] and capacities[1]
             and 0.3 <= capacities[0] / api <= 0.75 and 0.75 <= capacities[1] / api <= 1.33)
    llc_ok = facts.vendor == "amd" and not facts.arch.startswith(NO_INFINITY_CACHE)
    next_level = 3
    for i in range(n):
        if split and i == 0:
            names.append("L2 near")
            notes.append(PARTITION_NOTE.format(api=fmt_bytes(api)))
            continue
        if i == 0 or (split and i == 1):
            names.append("L2")
            notes.append("")
            continue
        if llc_ok and "Infinity Cache" not in names:
            names.append("Infinity Cache")
            notes.append("" if facts.llc_bytes_reported or facts.arch else
                         "named by AMD's convention for the cache after the L2")
            next_level = 4
            continue
        names.append(f"L{next_level}")
        notes.append(UNNAMED_NOTE.format(vendor="NVIDIA" if facts.vendor == "nvidia" else "AMD"))
        next_level += 1
    return names, notes


def documented_bytes(name: str, facts: DeviceFacts, spread: bool = True) -> float | None:
    """Documented size of a device cache in a sweep's device-footprint units.

    ``spread``: the data is spread over the XCDs (distinct rows per program), so a per-XCD L2
    fills at XCDs x its size; a single buffer read by every CU fills each XCD's L2 at its size.
    """
    if name == "L2" and facts.l2_bytes_reported:
        per_xcd = facts.vendor == "amd" and facts.xcds > 1 and spread
        return float(facts.l2_bytes_reported * (facts.xcds if per_xcd else 1))
    if name == "Infinity Cache" and facts.llc_bytes_reported:
        return float(facts.llc_bytes_reported)
    return None
