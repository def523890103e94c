"""Generated GPUs whose cache levels fall as a simulated cache does (tests/cache_physics.py), not
as the simulator's formulas: issue 28's check that the estimator is not only right on its own
model family.

A GPU is drawn by tests/gpu_generator.py (its code, another stream of GPUs): bandwidth ratios
1.2-8x, noise 0.5-3%, 32-304 SMs/CUs, 2-5 levels, NVIDIA and AMD, per-XCD L2s, split L2s. Then
each cache level's formula fall is replaced: the level draws a replacement (lru, tree_plru,
random), an indexing (modulo, hashed, page_coloured with 4 KiB / 64 KiB / 2 MiB pages), ways and a
line size; its sets are the drawn capacity over ways x line, rounded, its truth sets x ways x
line, and its profile entry carries the computed hit table (``transition: "table"``).
"""
from __future__ import annotations

import numpy as np

from cache_physics import INDEXINGS, Cache, hit_table
from gpu_generator import draw_gpu as draw_skeleton
from gpu_generator import expected_levels, with_seed
from set_replacement import POLICIES

__all__ = ["draw_gpu", "draw_cache", "expected_levels", "with_seed"]   # the benchmark's one import
STREAM = 20261201
# What GPU caches are: per-SM/CU caches virtually indexed (modulo, or hashed) with many ways;
# device caches hashed over their slices or indexed by physical pages (64 KiB or 2 MiB on GPUs)
PER_CU_WAYS = (4, 8, 16, 32, 64)
DEVICE_WAYS = (8, 12, 16, 24, 32)
TREE_WAYS = (4, 8, 16, 32)           # tree-PLRU needs a power of two
LINE_BYTES = (64, 128)
PAGE_BYTES = (4 * 1024, 64 * 1024, 2 * 1024 * 1024)
MIN_COLOURS = 256
FORMULA_KEYS = ("width", "tail_hit", "tail_power", "decline_power", "collapse_ratio", "alias_depth")


def draw_cache(rng, *, capacity_bytes: int, per_cu: bool = False) -> Cache:
    """A cache of about ``capacity_bytes``: replacement, indexing, ways, line, sets. Per-SM/CU
    caches are indexed by their address bits (modulo); device caches hash lines over their sets or
    take the set from the physical page (page_coloured), with 8 ways or more (what GPU L2s and
    last-level caches are; a hashed cache of a handful of sets is one draw of a few set loads)."""
    replacement = POLICIES[int(rng.integers(len(POLICIES)))]
    indexing = "modulo" if per_cu else ("hashed", "page_coloured")[int(rng.integers(2))]
    ways_choice = TREE_WAYS if replacement == "tree_plru" else (PER_CU_WAYS if per_cu else DEVICE_WAYS)
    if not per_cu:
        ways_choice = tuple(w for w in ways_choice if w >= 8)
    ways = int(ways_choice[int(rng.integers(len(ways_choice)))])
    line_bytes = int(LINE_BYTES[int(rng.integers(len(LINE_BYTES)))])
    page_bytes = int(PAGE_BYTES[int(rng.integers(len(PAGE_BYTES)))])
    sets = max(1, round(capacity_bytes / (ways * line_bytes)))
    if indexing == "page_coloured":
        # at least MIN_COLOURS page colours: a set hash that takes frame bits from only a few
        # pages is a staircase of a few colours' loads, not a fall any model of the mean places
        page_bytes = max([p for p in PAGE_BYTES if sets * line_bytes // p >= MIN_COLOURS], default=0)
        if not page_bytes:
            indexing, page_bytes = "hashed", PAGE_BYTES[0]
    if indexing == "page_coloured":
        # a page holds whole colours of sets, or a way holds whole pages
        lines_per_page = page_bytes // line_bytes
        if sets >= lines_per_page:
            sets = round(sets / lines_per_page) * lines_per_page
        else:
            sets = 2 ** int(round(np.log2(sets)))
    return Cache(sets=sets, ways=ways, line_bytes=line_bytes, replacement=replacement,
                 indexing=indexing, page_bytes=page_bytes, seed=int(rng.integers(2**31)))


def describe(cache: Cache) -> str:
    page = f" {cache.page_bytes // 1024} KiB pages" if cache.indexing == "page_coloured" else ""
    return f"{cache.replacement} {cache.indexing}{page} {cache.ways}w {cache.line_bytes}B x {cache.sets} sets"


def physics_level(rng, level: dict) -> None:
    """A simulated cache in place of a level's formula fall (its capacity rounded to whole sets)."""
    cache = draw_cache(rng, capacity_bytes=level["capacity_bytes"], per_cu=level.get("scope") == "per_cu")
    for key in FORMULA_KEYS:
        level.pop(key, None)
    level.update(capacity_bytes=cache.capacity_bytes, line_bytes=cache.line_bytes, transition="table",
                 hit_table=[list(pair) for pair in hit_table(cache)], physics=describe(cache))


def _ratio_where(table, level: float) -> float:
    """The first W / C of a hit table where the hit rate is below ``level``."""
    return next((r for r, h in table if h < level), table[-1][0])


def draw_gpu(k: int) -> dict:
    """Profile JSON of physics GPU number ``k`` (the same for the same k, on every machine). Each
    level's plateau is kept clear of the falls around it, as the formula generator keeps its own:
    a physics fall can start earlier (hashed sets: near half the size) and end later (random
    replacement: past three times it), so a level too close to the one before is moved up."""
    profile = draw_skeleton(k, stream=STREAM)
    profile["name"] = f"phys{k}"
    cus, xcds = profile["compute_units"], max(profile.get("xcds", 1), 1)
    prev_end = 0.0
    for i, level in enumerate(profile["levels"][:-1]):
        scale = {"per_cu": 1, "per_xcd": xcds}.get(level.get("scope", "device"), 1)
        if i and level.get("scope") != "per_cu" and profile["levels"][i - 1].get("scope") == "per_cu":
            prev_end *= cus       # the L2 fills at every SM's L1 together
        for attempt in range(8):
            physics_level(np.random.default_rng([STREAM, k, i, attempt]), level)
            start = _ratio_where(level["hit_table"], 0.97) * level["capacity_bytes"] * scale
            if start >= 1.5 * prev_end:
                break
            level["capacity_bytes"] = int(level["capacity_bytes"] * 1.5 * prev_end / start * 1.05)
        prev_end = _ratio_where(level["hit_table"], 0.05) * level["capacity_bytes"] * scale
    if "l2_bytes_reported" in profile:     # the API reports the L2 it has
        profile["l2_bytes_reported"] = next(lv["capacity_bytes"] for lv in profile["levels"]
                                            if lv["name"] == "L2")
    return profile
