"""A set-associative cache under the streaming kernel's cyclic sweep, from first principles and
apart from measure/sim_model.py: the steady-state hit rate of a buffer of W bytes read line by
line in address order, again and again.

The cache is sets x ways x line_bytes. Indexing decides which set each line of the buffer lands in:

- ``modulo``: set = line index mod sets (a physically contiguous buffer);
- ``hashed``: set = a fixed pseudo-random hash of the physical line address (seeded);
- ``page_coloured``: virtual pages of ``page_bytes`` lie in pseudo-random physical frames of a
  memory much larger than the buffer; set = physical line index mod sets.

Replacement (tests/set_replacement.py) decides what a set does with the k lines it receives.
Sets are independent and each sees its own cyclic sequence, so the cache's hit rate is
sum over sets of k h(k) / lines. The buffer is cut into granules that each put one line into
every set of one colour: a line (hashed, a colour per set), a page (page_coloured, sets / colours
sets per colour) or a way's worth of lines (modulo, one colour). Growing the buffer by a granule
moves one colour from load r to r + 1, so the hit rate at every size is one cumulative sum.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from set_replacement import POLICIES, set_hit_rates

INDEXINGS = ("modulo", "hashed", "page_coloured")
# Hashed sets and page colours are independent draws, so past a few thousand the curve only
# averages more of the same: larger caches are simulated with this many (curve per set unchanged).
MAX_SIMULATED_COLOURS = 4096


@dataclass(frozen=True)
class Cache:
    sets: int
    ways: int
    line_bytes: int = 128
    replacement: str = "lru"
    indexing: str = "modulo"
    page_bytes: int = 4096        # page_coloured: the virtual-memory page
    seed: int = 0                 # the hash, the frames

    def __post_init__(self):
        if self.replacement not in POLICIES:
            raise ValueError(f"replacement must be one of {', '.join(POLICIES)}")
        if self.indexing not in INDEXINGS:
            raise ValueError(f"indexing must be one of {', '.join(INDEXINGS)}")
        if self.sets < 1 or self.ways < 1:
            raise ValueError("a cache needs at least one set and one way")
        way_bytes = self.sets * self.line_bytes
        if self.indexing == "page_coloured" and (self.page_bytes % self.line_bytes
                                                 or way_bytes % self.page_bytes and self.page_bytes % way_bytes):
            # otherwise a page's lines would wrap around the sets at a frame-dependent offset
            raise ValueError("page_coloured needs whole lines in a page, and whole pages in a way "
                             "(sets x line_bytes) or whole ways in a page")

    @property
    def capacity_bytes(self) -> int:
        return self.sets * self.ways * self.line_bytes

    def colours(self) -> int:
        """Set groups a granule can land in (modulo 1; hashed one per set; page_coloured the
        frames' colours), and the most that are simulated."""
        if self.indexing == "modulo":
            return 1
        if self.indexing == "hashed":
            return min(self.sets, MAX_SIMULATED_COLOURS)
        return min(max(1, self.sets * self.line_bytes // self.page_bytes), MAX_SIMULATED_COLOURS)


def mix64(values: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of ``values`` xor a seed: a fixed pseudo-random function of an address."""
    salt = np.uint64((seed * 0x9E3779B97F4A7C15) % 2**64)
    z = (np.asarray(values, dtype=np.uint64) ^ salt) + np.uint64(0x9E3779B97F4A7C15)   # wraps mod 2^64
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def granule_colours(cache: Cache, count: int) -> np.ndarray:
    """The colour of each of the buffer's first ``count`` granules (the same for any count)."""
    index = np.arange(count, dtype=np.uint64)
    if cache.indexing == "modulo" or cache.colours() == 1:
        return np.zeros(count, dtype=np.int64)
    # hashed: the line's hash picks its set; page_coloured: the page's frame picks its colour
    return (mix64(index, cache.seed) % np.uint64(cache.colours())).astype(np.int64)


def line_sets(cache: Cache, lines: int) -> np.ndarray:
    """The set of each of the buffer's first ``lines`` lines, line by line (for a direct
    simulation; needs a cache small enough to be simulated with all its sets)."""
    if cache.indexing == "hashed":
        if cache.colours() != cache.sets:
            raise ValueError("line_sets: the cache has more hashed sets than are simulated")
        return granule_colours(cache, lines)
    index = np.arange(lines, dtype=np.int64)
    if cache.indexing == "modulo" or cache.colours() == 1:   # pages at least a way: no colours
        return index % cache.sets
    lines_per_page = cache.page_bytes // cache.line_bytes
    if cache.colours() * lines_per_page != cache.sets:
        raise ValueError("line_sets: the cache has more page colours than are simulated")
    page_colour = granule_colours(cache, -(-lines // lines_per_page))
    return page_colour[index // lines_per_page] * lines_per_page + index % lines_per_page


def hit_rates(cache: Cache, ratios) -> np.ndarray:
    """Steady-state hit rate of a cyclic sweep over ``ratios`` x the capacity."""
    ratios = np.asarray(ratios, dtype=float)
    if np.any(ratios <= 0):
        raise ValueError("working sets must be > 0")
    colours = cache.colours()
    per_capacity = colours * cache.ways            # granules in a buffer of the capacity
    position = ratios * per_capacity
    count = int(np.ceil(position.max())) + 1
    colour = granule_colours(cache, count)
    order = np.argsort(colour, kind="stable")
    first = np.searchsorted(colour[order], colour[order], side="left")
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count) - first         # granules of its colour before it
    h_set = set_hit_rates(replacement=cache.replacement, ways=cache.ways, max_lines=int(rank.max()) + 1)
    held = np.arange(h_set.size) * h_set           # lines a set with k lines hits per pass
    step = held[rank + 1] - held[rank]
    total = np.concatenate([[0.0], np.cumsum(step)])
    whole = np.floor(position).astype(np.int64)
    # a granule is filled line by line, one set after another: linear within it
    return (total[whole] + (position - whole) * step[whole]) / position


def hit_rate(cache: Cache, *, working_set_bytes: float) -> float:
    return float(hit_rates(cache, [working_set_bytes / cache.capacity_bytes])[0])


def table_ratios(ways: int) -> np.ndarray:
    """W / C where a hit table is computed: 16 a doubling from 1/64 to 8 (a plateau's start and
    a random tail's end), 96 more from 0.85 to 1.3, and modulo's corners 1 and 1 + 1/ways."""
    grid = np.concatenate([np.geomspace(1 / 64, 8, 16 * 9 + 1), np.geomspace(0.85, 1.3, 96),
                           [1.0, 1.0 + 1.0 / ways]])
    return np.unique(np.round(grid, 6))


def hit_table(cache: Cache) -> tuple[tuple[float, float], ...]:
    """(W / C, hit rate) pairs for a profile level's ``hit_table``."""
    ratios = table_ratios(cache.ways)
    return tuple((float(r), round(float(h), 6)) for r, h in zip(ratios, hit_rates(cache, ratios)))
