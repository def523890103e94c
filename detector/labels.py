"""Names for plateaus: which are per-SM/CU caches, which are device caches, which is memory.

The vendor's hierarchy decides how many names there are; device facts (API L2 size, Infinity
Cache size, XCD count) decide which step is which. A step that no documented cache explains
is not made into a level: it is merged into its neighbour and described in that level's notes.
"""
from __future__ import annotations

import math

from measure.device import DeviceFacts, is_rdna

PARTITION_NOTE = ("a step at {cap} ({hi:,.0f} -> {lo:,.0f} GB/s) inside the L2 range, near half the "
                  "API size: this L2 is split into two partitions, and data beyond about half of it "
                  "is served from the far partition at a lower rate")


def hierarchy(facts: DeviceFacts) -> tuple[list[str], list[str]]:
    """(per-SM/CU cache names, device cache names) for the vendor and architecture."""
    if facts.vendor == "nvidia":
        return ["L1"], ["L2"]
    if is_rdna(facts):
        return ["L0", "L1"], ["L2", "Infinity Cache"]
    has_llc = facts.llc_bytes_reported is not None or facts.arch.startswith(("gfx942", "gfx950")) \
        or facts.xcds > 1
    return ["L1"], (["L2", "Infinity Cache"] if has_llc else ["L2"])


def expected_device_bytes(name: str, facts: DeviceFacts, spread: bool = True) -> float | None:
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


def choose_boundaries(capacities: list[float], steps_log: list[float], names: list[str],
                      facts: DeviceFacts, *, spread: bool = True,
                      max_size: float = float("inf")) -> list[int]:
    """Pick, in order, which transitions end the named caches.

    A documented size picks the transition nearest to it (within a factor of 2.5); a cache
    whose documented size the sweep never passed is left unfilled; otherwise the largest
    remaining bandwidth steps are taken, keeping their order.
    """
    chosen: list[int] = []
    free = list(range(len(capacities)))
    for name in names:
        want = expected_device_bytes(name, facts, spread)
        cands = [i for i in free if not chosen or i > chosen[-1]]
        if not cands:
            break
        pick = None
        if want:
            near = min(cands, key=lambda i: abs(math.log(capacities[i] / want)))
            if abs(math.log(capacities[near] / want)) < math.log(2.5):
                pick = near
        if pick is None and want and max_size < 1.5 * want:
            break
        if pick is None:
            remaining = len(names) - len(chosen)
            # leave enough later transitions for the names still to come
            usable = cands[:len(cands) - (remaining - 1)] if remaining > 1 else cands
            pick = max(usable or cands, key=lambda i: abs(steps_log[i]))
        chosen.append(pick)
        free = [i for i in free if i > pick]
    return chosen
