"""Pointer chains for the latency chase: which elements, in which order, and how far to walk.

A chain of ``elements`` elements, one per ``slot_bytes`` slot, visited in a random cyclic order
(one cycle through every element, so a walk of ``elements`` hops touches every line of the
working set) or in address order (``sequential``: the stride sweep that shows how many bytes a
miss brings in). Each element holds the address of the next. Torch-free: the device builds the
chain from ``order()``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from detect_caches.grid import DENSE_SLOT_BYTES

ELEMENT_BYTES = 8                # an address
MIN_TIMED_HOPS = 16384           # short chains are walked round several times
FULL_WALK_MAX = 1 << 23          # chains longer than this are walked partly, cold (memory level)
PARTIAL_HOPS = 1 << 17           # ... this many hops, each to a line not touched before


@dataclass(frozen=True)
class ChainSpec:
    elements: int
    slot_bytes: int = DENSE_SLOT_BYTES
    sequential: bool = False     # address order (stride sweep) instead of a random cycle
    l2only: bool = False         # loads that skip the L1 (NVIDIA .cg)
    seed: int = 0
    cold: bool = False           # walk a part at a time, on lines no earlier walk touched
    carveout_kib: int | None = None   # shared memory carved out of the L1 (NVIDIA); None: the driver's choice

    def __post_init__(self) -> None:
        if self.elements < 2:
            raise ValueError(f"a chain needs at least 2 elements, got {self.elements}")
        if self.slot_bytes < ELEMENT_BYTES or self.slot_bytes % ELEMENT_BYTES:
            raise ValueError(f"slot_bytes must be a multiple of {ELEMENT_BYTES}, got {self.slot_bytes}")

    @property
    def span_bytes(self) -> int:
        """Bytes from the first slot to the end of the last."""
        return self.elements * self.slot_bytes

    @property
    def partial(self) -> bool:
        """Walked cold, a part at a time, each part on fresh lines: asked for, or too long to
        walk whole (past every cache anyway)."""
        return self.cold or self.elements > FULL_WALK_MAX

    def walk(self) -> tuple[int, int]:
        """(warm-up hops, timed hops) of one measurement: the warm-up walks the whole cycle."""
        if self.partial:
            return 0, PARTIAL_HOPS
        return self.elements, max(self.elements, MIN_TIMED_HOPS)

    def order(self) -> np.ndarray:
        """Element indices in visiting order: one cycle through every element."""
        if self.sequential:
            return np.arange(self.elements, dtype=np.int64)
        return np.random.default_rng(self.seed).permutation(self.elements).astype(np.int64)


def build_host_chain(spec: ChainSpec, base_address: int, buffer: np.ndarray) -> int:
    """Write the chain into ``buffer`` (int64, at ``base_address``); returns the start address."""
    order = spec.order()
    stride = spec.slot_bytes // ELEMENT_BYTES
    buffer[order * stride] = base_address + np.roll(order, -1) * spec.slot_bytes
    return int(base_address + order[0] * spec.slot_bytes)


def walk_host_chain(buffer: np.ndarray, base_address: int, start: int, hops: int) -> int:
    """Follow ``hops`` links of a chain in ``buffer`` on the host (the reference for tests)."""
    p = start
    for _ in range(hops):
        p = int(buffer[(p - base_address) // ELEMENT_BYTES])
    return p


def is_one_cycle(spec: ChainSpec, buffer: np.ndarray, base_address: int, start: int) -> bool:
    """Does the chain visit every element exactly once before returning to the start?"""
    seen = set()
    p = start
    for _ in range(spec.elements):
        slot, rem = divmod(p - base_address, spec.slot_bytes)
        if rem or slot in seen or not 0 <= slot < spec.elements:
            return False
        seen.add(slot)
        p = int(buffer[(p - base_address) // ELEMENT_BYTES])
    return p == start and len(seen) == spec.elements
