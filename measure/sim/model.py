"""The simulated GPU's physics: how a level's hit rate falls with its footprint, and how the
levels' bandwidths mix. Plain functions of a profile; no randomness here.

Fall shapes (``transition`` of a profile level; r = footprint / capacity):

- ``sharp``: LRU under a cyclic sweep, h = 1 up to the capacity and 0 past it.
- ``hashed``: LRU with hashed or scattered sets, a logistic in ln r of scale ``width``:
  half the data hits at the capacity.
- ``random``: random replacement, h = 1 up to the capacity, then the fixed point
  h = exp(-r (1 - h)): a long tail of partial hits.
- ``cliff_tail``: a cliff at the capacity to ``tail_hit``, then partial hits falling as
  r ** -tail_power (the H200's L1).
- ``plru``: the hit rate leaves 100% at 0.9 of the capacity, is 95% at it, sags as
  0.95 r ** -decline_power and collapses at ``collapse_ratio`` x the capacity (the NVIDIA L1
  tables of gpu-benches).
- ``table``: ``hit_table``, (ratio, hit rate) pairs made elsewhere (tests/cache_physics.py),
  linear in ln r between them and the end values beyond.

A level with ``partitions: 2`` is a split L2: data that programs on many SMs read is held once
per partition (it fills at half the capacity, gpu-cache's view), and with ``far_bandwidth_gbs``
distinct data past half the capacity is served from the far partition at that rate.
``alias_depth`` adds a deterministic, size-dependent dip inside a transition (set aliasing).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import lambertw

TRANSITIONS = ("sharp", "hashed", "random", "cliff_tail", "plru", "table")
COLLAPSE_WIDTH = 0.03


@dataclass
class SimLevel:
    name: str
    bandwidth_gbs: float
    capacity_bytes: int | None = None     # None: main memory
    scope: str = "device"
    transition: str = "hashed"
    width: float = 0.05
    tail_hit: float = 0.6
    tail_power: float = 1.5
    decline_power: float = 0.5
    collapse_ratio: float = 1.7
    partitions: int = 1
    far_bandwidth_gbs: float | None = None
    alias_depth: float = 0.0
    latency_ns: float | None = None       # load-to-use latency of a hit (pointer chase)
    far_latency_ns: float | None = None   # partitions 2: a hit in the far partition
    line_bytes: int | None = None         # allocation unit (default 128)
    sector_bytes: int | None = None       # the unit it hands to the level above (default: the line)
    miss_bytes: int | None = None         # what a miss brings from below (default: the sector)
    hit_table: tuple[tuple[float, float], ...] = ()   # transition table: (ratio, hit rate)
    unified_bytes: int | None = None      # per_cu on NVIDIA: the L1/shared array it is carved from
    reserve_bytes: int = 0                # ... less what the system keeps (capacity = array - carveout - this)

    def hit_rate(self, ratio: float) -> float:
        """Hit rate of a cyclic sweep over ``ratio`` x the capacity."""
        return hit_rate(ratio, self)


def hit_rate(r: float, lv: SimLevel) -> float:
    t = lv.transition
    if t == "hashed":
        z = math.log(max(r, 1e-300)) / max(lv.width, 1e-6)
        return 1.0 / (1.0 + math.exp(min(z, 700.0)))
    if t == "table":
        log_ratios, hits = _table(lv.hit_table)
        return float(np.interp(math.log(max(r, 1e-300)), log_ratios, hits))
    if t == "plru":
        collapse = 1.0 / (1.0 + math.exp(min(math.log(r / lv.collapse_ratio) / COLLAPSE_WIDTH, 700.0)))
        # 100% up to 0.9 of the capacity, 95% at it, then a slow sag
        start = 1.0 - 0.05 * min(max((r - 0.9) / 0.1, 0.0), 1.0)
        return (start if r < 1.0 else 0.95 * r ** -lv.decline_power) * collapse
    if r <= 1.0:
        return 1.0
    if t == "sharp":
        return 0.0
    if t == "random":
        return float(abs(-lambertw(-r * math.exp(-r)) / r))
    return lv.tail_hit * r ** -lv.tail_power          # cliff_tail


@lru_cache(maxsize=64)
def _table(pairs: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    # np.interp holds the end values beyond the table: h = 1 before a table that starts at 1
    ratios, hits = np.asarray(pairs, dtype=float).T
    return np.log(ratios), hits


def alias(stream_bytes: int, seed: int) -> float:
    """A deterministic pseudo-random number in [0, 1) for a size: the same at every run."""
    digest = hashlib.blake2b(f"{seed}:{stream_bytes}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") / 2**32


@dataclass(frozen=True)
class Footprints:
    """Bytes one launch makes each kind of cache hold."""

    per_cu: float          # distinct bytes streamed on one SM/CU
    per_xcd: float         # distinct bytes one chiplet's programs stream
    device: float          # distinct bytes over the device
    shared_rows: bool      # rows are read by programs on many SMs (one buffer, or rows shared)


def mixed_bandwidth(levels: list[SimLevel], fp: Footprints, stream_bytes: int, seed: int,
                    skip_per_cu: bool) -> float:
    """Bandwidth of a streaming launch: each level serves what hits in it and missed in the faster
    ones; times add (harmonic mixing)."""
    inv_bw, missing, dip = 0.0, 1.0, 1.0
    for lv in levels:
        if lv.scope == "per_cu" and skip_per_cu:
            continue
        footprint = {"per_cu": fp.per_cu, "per_xcd": fp.per_xcd}.get(lv.scope, fp.device)
        served_bw = lv.bandwidth_gbs
        if lv.capacity_bytes is None:
            h = 1.0
        elif lv.partitions == 2 and fp.shared_rows:
            h = lv.hit_rate(2 * footprint / lv.capacity_bytes)   # a copy in each partition
        else:
            h = lv.hit_rate(footprint / lv.capacity_bytes)
            if lv.partitions == 2 and lv.far_bandwidth_gbs:
                near = hit_rate(2 * footprint / lv.capacity_bytes, lv)
                served_bw = 1.0 / (near / lv.bandwidth_gbs + (1 - near) / lv.far_bandwidth_gbs)
        if lv.alias_depth and (0.02 < h < 0.98 or (lv.capacity_bytes and 0.9 < footprint / lv.capacity_bytes <= 1.0)):
            dip *= 1.0 - lv.alias_depth * alias(stream_bytes, seed)
        inv_bw += missing * h / served_bw
        missing *= 1.0 - h
    return dip / inv_bw


DEFAULT_LATENCY_NS = {"per_cu": 25.0, "per_xcd": 200.0, "device": 250.0, None: 600.0}


def level_latency(lv: SimLevel) -> float:
    if lv.latency_ns:
        return lv.latency_ns
    return DEFAULT_LATENCY_NS[lv.scope] if lv.capacity_bytes else DEFAULT_LATENCY_NS[None]


def chase_latency_ns(levels: list[SimLevel], elements: int, slot_bytes: int, sequential: bool,
                     l2only: bool, cold: bool) -> float:
    """Mean latency of a hop of a one-program pointer chase. A random chain of ``elements`` in
    slots of ``slot_bytes`` occupies elements x min(slot, line) bytes of a cache; a walk in
    address order also hits the part of each fetched sector it has not used yet; a cold (partial)
    walk finds nothing it has not brought in itself."""
    lat, missing = 0.0, 1.0
    for lv in levels:
        if lv.scope == "per_cu" and l2only:
            continue
        if lv.capacity_bytes is None:
            lat += missing * level_latency(lv)
            break
        line = lv.line_bytes or 128
        fetch = lv.miss_bytes or lv.sector_bytes or line
        footprint = elements * min(slot_bytes, line)
        h_cap = 0.0 if cold else hit_rate(footprint / lv.capacity_bytes, lv)
        near = h_cap
        if lv.partitions == 2 and lv.far_latency_ns and not cold:
            near = hit_rate(2 * footprint / lv.capacity_bytes, lv)
        h = h_cap
        if sequential:
            h = h_cap + (1 - h_cap) * max(0.0, 1 - slot_bytes / fetch)
            near = near + (h - h_cap)
        far_lat = lv.far_latency_ns or level_latency(lv)
        lat += missing * (min(near, h) * level_latency(lv) + max(h - near, 0.0) * far_lat)
        missing *= 1.0 - h
    return lat
