"""Simulated GPUs drawn by a seeded generator from wide ranges, for accuracy tests and the
accuracy benchmark: every fall shape, widths, replacement parameters, bandwidth ratios 1.2-8x
between neighbouring levels, 32-304 SMs/CUs, odd sizes, noise 0.5-3%, split L2s with and without
a slower far half, per-XCD L2s, 2-5 levels, NVIDIA and AMD. A hand-picked list of profiles is what
rules overfit to; GPUs drawn from ranges are not.

``draw_gpu(k)`` is GPU number ``k`` (the same profile for the same k, on every machine);
``expected_levels`` the names and capacities the tool must report for it.
"""
from __future__ import annotations

import math

import numpy as np

KIB, MIB = 1024, 1024 * 1024
SHAPES = ("sharp", "hashed", "random", "cliff_tail", "plru")


def _log_uniform(rng, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


DEVICE_SHAPES = ("sharp", "hashed", "random")


def _shape(rng, level: dict, *, device: bool) -> None:
    """A fall shape and its parameters, drawn into ``level``: per-SM/CU caches every shape, device
    caches LRU or random replacement over sets (sharp, hashed, random): the pseudo-LRU decline and
    the cliff onto partial hits are what L1 tables show."""
    shapes = DEVICE_SHAPES if device else SHAPES
    shape = shapes[int(rng.integers(len(shapes)))]
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


def fall_end(level: dict) -> float:
    """Working set over capacity where the level's hit rate has fallen below 5% (at most 8)."""
    from detect_caches.measure.sim.model import SimLevel, hit_rate
    keys = ("transition", "width", "tail_hit", "tail_power", "decline_power", "collapse_ratio")
    sim = SimLevel(level["name"], 1.0, 1, **{k: level[k] for k in keys if k in level})
    return next((r for r in np.geomspace(1.0, 8.0, 200) if hit_rate(r, sim) < 0.05), 8.0)


def _split_l2(rng, levels: list[dict], vendor: str) -> None:
    """A split L2 (NVIDIA): two partitions, and in some a slower far half (a hashed fall)."""
    l2 = next((lv for lv in levels if lv["name"] == "L2"), None)
    if l2 is None or vendor != "nvidia" or rng.random() >= 0.5:
        return
    l2["partitions"] = 2
    if rng.random() < 0.6:
        l2["far"] = True
        for key in ("tail_hit", "tail_power", "decline_power", "collapse_ratio"):
            l2.pop(key, None)
        l2["transition"], l2["width"] = "hashed", round(rng.uniform(0.02, 0.08), 4)


def _capacities(rng, levels: list[dict], cus: int, xcds: int) -> None:
    """Capacities in order, each level's plateau clear of the fall before it: a per-CU L0 of
    16-32 KiB, an L1 of 16-256 KiB, device caches from 1.5x the L1s' sum and 2 MiB, each next one
    at least 4x the last and 2.5x past where its fall ends, the largest at most 512 MiB."""
    prev = None
    top = 512 * MIB
    for i, lv in enumerate(levels):
        if lv["scope"] == "per_cu":
            if lv["name"] == "L0":
                cap = _log_uniform(rng, 16 * KIB, 32 * KIB)
            else:
                lo = 16 * KIB if prev is None else max(3 * prev, 2.5 * fall_end(levels[i - 1]) * prev)
                cap = _log_uniform(rng, lo, max(lo, 256 * KIB))
            lv["capacity_bytes"] = prev = _round(cap, 256)
            continue
        if levels[i - 1]["scope"] == "per_cu":
            lo, span = max(1.5 * prev * cus, 2 * MIB), 24
        else:
            lo, span = max(4 * prev, 2.5 * fall_end(levels[i - 1]) * prev), 6
        if lo > top:
            del levels[i:]
            return
        cap = _round(_log_uniform(rng, lo, min(lo * span, top)), 64 * KIB)
        prev = cap
        if i == next(j for j, x in enumerate(levels) if x["scope"] != "per_cu") and xcds > 1:
            lv["scope"], cap = "per_xcd", cap // xcds
        lv["capacity_bytes"] = cap


STREAM = 20261130


def draw_gpu(k: int, *, stream: int = STREAM) -> dict:
    """Profile JSON (the interface's schema) of generated GPU number ``k`` (``stream``: another
    series of GPUs drawn the same way)."""
    rng = np.random.default_rng([stream, k])
    vendor = "nvidia" if rng.random() < 0.5 else "amd"
    kind = "nvidia" if vendor == "nvidia" else ("cdna3", "cdna2", "rdna")[int(rng.integers(3))]
    xcds = int(rng.choice([2, 4, 8])) if kind == "cdna3" and rng.random() < 0.6 else 1
    cus = int(round(_log_uniform(rng, 32, 304) / xcds)) * xcds
    n_levels = int(rng.integers(2, 6))        # caches and memory
    per_cu = 2 if kind == "rdna" and n_levels >= 3 else 1
    n_device = n_levels - 1 - per_cu
    names = ["L0", "L1"] if per_cu == 2 else ["L1"]
    llc = "Infinity Cache" if kind in ("cdna3", "rdna") else "L3"
    names += ["L2", llc] + [f"L{n}" for n in range(4, 8)][:max(n_device - 2, 0)]
    levels: list[dict] = [{"name": n, "scope": "per_cu" if i < per_cu else "device"}
                          for i, n in enumerate(names[:per_cu + n_device])]
    for lv in levels:
        _shape(rng, lv, device=lv["scope"] != "per_cu")
    _split_l2(rng, levels, vendor)
    _capacities(rng, levels, cus, xcds)
    memory = "DRAM" if kind == "rdna" else "HBM"
    levels.append({"name": memory})
    # bandwidths from memory up: each level 1.2-8x faster than the one below
    bw = _log_uniform(rng, 500, 6000)
    for lv in reversed(levels):
        lv["bandwidth_gbs"] = round(bw, 1)
        bw *= _log_uniform(rng, 1.2, 8.0)
    l2 = next((lv for lv in levels if lv["name"] == "L2"), None)
    below = levels[levels.index(l2) + 1]["bandwidth_gbs"] if l2 is not None else 0.0
    if l2 is not None and l2.pop("far", False) and l2["bandwidth_gbs"] >= 1.5 * below:
        # the far half of a split L2 between its near half and the next level, at least 15% apart
        far = math.sqrt(l2["bandwidth_gbs"] * below) * _log_uniform(rng, 0.9, 1.1)
        l2["far_bandwidth_gbs"] = round(min(max(far, 1.15 * below), l2["bandwidth_gbs"] / 1.15), 1)
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
    # the memory's bus width and clock, as NVML and ROCm SMI report them on every card: a ceiling
    # the memory plateau reads 90% of (an H200's 97%, the simulated MI300X's 81%); no draw, so the
    # rest of every GPU is as it was
    bus = 8192 if memory == "HBM" else 256
    profile["memory_bus_width_bits"] = bus
    profile["mem_clock_max_mhz"] = round(levels[-1]["bandwidth_gbs"] / 0.9 * 1e3 / (bus / 8 * 2), 1)
    return profile


def expected_levels(profile: dict) -> list[tuple[str, int | None]]:
    """(name, capacity in bytes or None) of each level the tool must report, fastest first."""
    return [(lv["name"], lv.get("capacity_bytes")) for lv in profile["levels"]]


def with_seed(profile: dict, seed: int) -> dict:
    return dict(profile, seed=seed)
