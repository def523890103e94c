"""One cache set under a cyclic sweep: the steady-state hit rate of a set of ``ways`` ways that
receives ``k`` distinct lines, read in the same order again and again. Written from the
replacement policies themselves, not from measure/sim_model.py's formulas.

Under a cyclic sweep of a buffer every set sees its own cyclic sequence of the lines that map to
it, and sets do not interact, so a whole cache is a sum of this one function of ``k``
(tests/cache_physics.py). Policies:

- ``lru``: closed form, every access hits while k <= ways, none past it (the line needed next is
  always the least recently used one).
- ``tree_plru``: binary-tree pseudo-LRU (ways a power of two), simulated exactly: the set's state
  at the start of a pass (tree bits and contents) is deterministic, so the passes repeat in a
  cycle; the hit rate is the mean over that cycle. Starts cold; invalid ways fill first, in order.
- ``random``: the victim is a uniformly random way (seeded); Monte Carlo over replicas of the set,
  warm-up passes, then timed passes.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

POLICIES = ("lru", "tree_plru", "random")
# Past 8 lines per way a set under random replacement keeps ~3e-4 of them (fixed point
# h = exp(-8 (1 - h))), under LRU and tree-PLRU none: loads beyond count as all misses.
LINES_PER_WAY_SIMULATED = 8


def set_hit_rates(*, replacement: str, ways: int, max_lines: int) -> np.ndarray:
    """h[k] for k = 0..max_lines (h[0] = 1 by convention: an empty set misses nothing)."""
    if replacement not in POLICIES:
        raise ValueError(f"replacement must be one of {', '.join(POLICIES)}, got {replacement!r}")
    if replacement == "tree_plru" and ways & (ways - 1):
        raise ValueError(f"tree_plru needs ways a power of two, got {ways}")
    h = np.zeros(max_lines + 1)
    h[: min(ways, max_lines) + 1] = 1.0
    if replacement != "lru":
        table = _overflowing(replacement, ways)      # k = ways+1 .. 8 ways
        n = min(len(table), max(max_lines - ways, 0))
        h[ways + 1: ways + 1 + n] = table[:n]
    return h


@lru_cache(maxsize=None)
def _overflowing(replacement: str, ways: int) -> np.ndarray:
    ks = np.arange(ways + 1, LINES_PER_WAY_SIMULATED * ways + 1)
    if replacement == "tree_plru":
        out = np.array([tree_plru_hit_rate(lines=int(k), ways=ways) for k in ks])
    else:
        out = random_hit_rates(ks, ways=ways)
    out.setflags(write=False)
    return out


def tree_plru_hit_rate(*, lines: int, ways: int, max_passes: int = 100_000) -> float:
    """Exact steady-state hit rate of ``lines`` lines swept cyclically through one tree-PLRU set."""
    seen: dict[tuple, int] = {}
    hits_per_pass: list[int] = []
    for p, (state, hits) in enumerate(tree_plru_passes(lines=lines, ways=ways)):
        if state in seen:                   # the passes from here on repeat the cycle since then
            cycle = hits_per_pass[seen[state]:]
            return sum(cycle) / (len(cycle) * lines)
        if p == max_passes:
            raise RuntimeError(f"tree-PLRU with {lines} lines in {ways} ways found no cycle in {p} passes")
        seen[state] = p
        hits_per_pass.append(hits)


def tree_plru_passes(*, lines: int, ways: int):
    """Yields, pass after pass, (state at the pass's start, hits in the pass). The state is
    (tree bits, line held by each way or -1); tree node n (heap-numbered from 1) sends the next
    victim to its left child when its bit is 0, and an access points the bits on its path away."""
    depth = ways.bit_length() - 1
    bits = [0] * ways
    content = [-1] * ways
    where: dict[int, int] = {}
    while True:
        state = (tuple(bits), tuple(content))
        hits = 0
        for line in range(lines):
            way = where.get(line)
            if way is not None:
                hits += 1
            else:
                if -1 in content:
                    way = content.index(-1)
                else:
                    node = 1
                    for _ in range(depth):
                        node = 2 * node + bits[node]
                    way = node - ways
                    del where[content[way]]
                content[way] = line
                where[line] = way
            node = way + ways               # the leaf
            while node > 1:
                bits[node >> 1] = 0 if node & 1 else 1
                node >>= 1
        yield state, hits


def random_hit_rates(ks: np.ndarray, *, ways: int, replicas: int = 16, warm_passes: int = 6,
                     timed_passes: int = 24, seed: int = 12345) -> np.ndarray:
    """Steady-state hit rate under random replacement for each load in ``ks`` (all > ways), all
    loads and replicas stepped together; a row with load k reads line t mod k at step t."""
    ks = np.asarray(ks, dtype=np.int64)
    rng = np.random.default_rng([seed, ways])
    loads = np.repeat(ks, replicas)
    kmax = int(ks.max())
    # flat arrays: where[row * kmax + line] is the way holding a line (-1: not held),
    # content[row * ways + way] the line a way holds; start full with lines 0..ways-1
    line_base, way_base = np.arange(loads.size) * kmax, np.arange(loads.size) * ways
    content = np.tile(np.arange(ways), loads.size)
    where = np.full(loads.size * kmax, -1, dtype=np.int64)
    where.reshape(loads.size, kmax)[:, :ways] = np.arange(ways)
    warm_steps, steps = warm_passes * kmax, (warm_passes + timed_passes) * kmax
    hits = np.zeros(loads.size, dtype=np.int64)
    for t in range(steps):
        line = t % loads
        at = line_base + line
        miss = where[at] < 0
        if t >= warm_steps:
            hits += ~miss
        victim = rng.integers(0, ways, size=int(miss.sum()))
        slot = way_base[miss] + victim
        where[line_base[miss] + content[slot]] = -1
        content[slot] = line[miss]
        where[at[miss]] = victim
    return (hits / (steps - warm_steps)).reshape(ks.size, replicas).mean(axis=1)
