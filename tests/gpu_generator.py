"""Simulated GPUs drawn by a seeded generator from wide ranges, for accuracy tests and the
accuracy benchmark: every fall shape, widths, replacement parameters, bandwidth ratios 1.2-8x
between neighbouring levels, 32-304 SMs/CUs, odd sizes, noise 0.5-3%, split L2s with and without
a slower far half, per-XCD L2s, 2-5 levels, NVIDIA and AMD. A hand-picked list of profiles is what
rules overfit to; GPUs drawn from ranges are not.

``draw_gpu(k)`` is GPU number ``k`` (the same profile for the same k, on every machine);
``expected_levels`` the names and capacities the tool must report for it. Another ``stream``
draws other GPUs the same way (tests/physics_generator.py).
"""
from __future__ import annotations

import math

import numpy as np

KIB, MIB = 1024, 1024 * 1024
SHAPES = ("sharp", "hashed", "random", "cliff_tail", "plru")
STREAM = 20261130


def _log_uniform(rng, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _shape(rng, level: dict, *, device: bool) -> None:
    """A fall shape and its parameters, drawn into ``level``."""
    shape = SHAPES[int(rng.integers(len(SHAPES)))]
    level["transition"] = shape
    if shape == "hashed":
        level["width"] = round(rng.uniform(0.02, 0.12), 4)
    elif shape == "cliff_tail":
        level["tail_hit"] = round(rng.uniform(0.4, 0.9), 3)
        level["tail_power"] = round(rng.uniform(1.0, 3.0), 3)
    elif shape == "plru":
        level["decline_power"] = round(rng.uniform(0.2, 0.8), 3)
        level["collapse_ratio"] = round(rng.uniform(1.3, 2.6), 3)
    if not device and rng.random() < 0.3:
        level["alias_depth"] = round(rng.uniform(0.0, 0.05), 4)


def _round(nbytes: float, unit: int) -> int:
    return max(unit, int(round(nbytes / unit)) * unit)


def draw_gpu(k: int, *, stream: int = STREAM) -> dict:
    """Profile JSON (the interface's schema) of generated GPU number ``k`` of ``stream``."""
    rng = np.random.default_rng([stream, k])
    vendor = "nvidia" if rng.random() < 0.5 else "amd"
    kind = "nvidia" if vendor == "nvidia" else ("cdna3", "cdna2", "rdna")[int(rng.integers(3))]
    xcds = int(rng.choice([2, 4, 8])) if kind == "cdna3" and rng.random() < 0.6 else 1
    cus = int(round(_log_uniform(rng, 32, 304) / xcds)) * xcds
    n_levels = int(rng.integers(2, 6))        # caches and memory
    per_cu = 2 if kind == "rdna" and n_levels >= 3 else 1
    n_device = n_levels - 1 - per_cu
    levels: list[dict] = []
    if per_cu == 2:
        l0 = _round(_log_uniform(rng, 16 * KIB, 32 * KIB), 256)
        levels.append({"name": "L0", "scope": "per_cu", "capacity_bytes": l0})
        levels.append({"name": "L1", "scope": "per_cu",
                       "capacity_bytes": _round(l0 * _log_uniform(rng, 3, 8), 256)})
    else:
        levels.append({"name": "L1", "scope": "per_cu",
                       "capacity_bytes": _round(_log_uniform(rng, 16 * KIB, 256 * KIB), 256)})
    footprint = levels[-1]["capacity_bytes"] * cus
    llc = "Infinity Cache" if kind in ("cdna3", "rdna") else "L3"
    names = ["L2", llc] + [f"L{n}" for n in range(4, 8)]
    for i in range(n_device):
        lo = max(footprint * (1.5 if i == 0 else 4.0), 2 * MIB)
        cap = _round(lo * _log_uniform(rng, 1.0, 6.0 if i == 0 else 8.0), 64 * KIB)
        scope = "per_xcd" if i == 0 and xcds > 1 else "device"
        lv = {"name": names[i], "scope": scope, "capacity_bytes": cap // xcds if scope == "per_xcd" else cap}
        levels.append(lv)
        footprint = cap
    memory = "DRAM" if kind == "rdna" else "HBM"
    levels.append({"name": memory})
    # bandwidths from memory up: each level 1.2-8x faster than the one below
    bw = _log_uniform(rng, 500, 6000)
    for lv in reversed(levels):
        lv["bandwidth_gbs"] = round(bw, 1)
        bw *= _log_uniform(rng, 1.2, 8.0)
    for lv in levels[:-1]:
        _shape(rng, lv, device=lv["scope"] != "per_cu")
    # a split L2 (NVIDIA): two partitions, and in some a slower far half
    l2 = next((lv for lv in levels if lv["name"] == "L2"), None)
    if l2 is not None and vendor == "nvidia" and rng.random() < 0.5:
        l2["partitions"] = 2
        if rng.random() < 0.6:
            below = levels[levels.index(l2) + 1]["bandwidth_gbs"]
            l2["far_bandwidth_gbs"] = round(math.sqrt(l2["bandwidth_gbs"] * below)
                                            * _log_uniform(rng, 0.9, 1.1), 1)
            if l2["far_bandwidth_gbs"] <= below * 1.15:
                l2["far_bandwidth_gbs"] = round(below * 1.15, 1)
            if l2["transition"] in ("plru", "random", "cliff_tail"):
                l2["transition"], l2["width"] = "hashed", round(rng.uniform(0.02, 0.08), 4)
    arch = {"nvidia": str(rng.choice(["sm_80", "sm_90", "sm_100"])), "cdna3": "gfx942", "cdna2": "gfx90a",
            "rdna": "gfx1030"}[kind]
    profile = {"name": f"gen{k}", "vendor": vendor, "arch": arch, "compute_units": cus, "xcds": xcds,
               "warp_size": 32 if vendor == "nvidia" or kind == "rdna" else 64,
               "memory_kind": memory, "total_memory_bytes": 96 * 1024 * MIB,
               "noise": round(_log_uniform(rng, 0.005, 0.03), 4),
               "outlier_rate": round(float(rng.uniform(0, 0.01)), 4), "levels": levels}
    if l2 is not None and rng.random() < 0.8:
        # the API's L2 size, as torch reports it (per XCD on CDNA3)
        profile["l2_bytes_reported"] = int(l2["capacity_bytes"])
    return profile


def expected_levels(profile: dict) -> list[tuple[str, int | None]]:
    """(name, capacity in bytes or None) of each level the tool must report, fastest first."""
    return [(lv["name"], lv.get("capacity_bytes")) for lv in profile["levels"]]


def with_seed(profile: dict, seed: int) -> dict:
    return dict(profile, seed=seed)
