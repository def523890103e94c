"""The cache physics of tests/cache_physics.py against closed forms derived by hand, a direct
line-by-line simulation of small caches, and the simulator's "table" transition that carries it."""
from __future__ import annotations

import math
from collections import OrderedDict
from itertools import combinations, islice

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom

from cache_physics import Cache, hit_rate, hit_rates, hit_table, line_sets
from detect_caches.errors import InputError
from detect_caches.measure.launch import LaunchConfig
from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
from set_replacement import random_hit_rates, set_hit_rates, tree_plru_passes


@pytest.mark.parametrize("sets,ways", [(1, 8), (7, 2), (64, 4), (1000, 16), (1 << 20, 12)])
def test_lru_modulo_fills_sets_one_by_one(sets, ways):
    # n = sets x ways + m lines (0 <= m <= sets): m sets hold ways + 1 lines and miss every
    # time, the others hit every time: h = (sets - m) ways / n, 1 up to C, 0 from C (1 + 1/ways)
    cache = Cache(sets=sets, ways=ways, replacement="lru", indexing="modulo")
    m = np.array([0, 1, sets // 3, sets // 2, sets - 1, sets])
    lines = sets * ways + m
    assert np.allclose(hit_rates(cache, lines / (sets * ways)), (sets - m) * ways / lines)
    assert np.all(hit_rates(cache, [0.1, 0.5, 0.99, 1.0]) == 1.0)
    assert np.all(hit_rates(cache, [1 + 1 / ways, 1.5 + 1 / ways, 4.0]) == 0.0)


@pytest.mark.parametrize("indexing", ["modulo", "hashed", "page_coloured"])
def test_fully_associative_lru_is_a_cliff(indexing):
    # one set: no indexing can spread the lines, so the whole cache holds up to C and then nothing
    cache = Cache(sets=1, ways=1024, line_bytes=128, indexing=indexing, page_bytes=4096)
    capacity = cache.capacity_bytes
    assert hit_rate(cache, working_set_bytes=capacity) == 1.0
    assert hit_rate(cache, working_set_bytes=capacity + 128) == 0.0
    assert hit_rate(cache, working_set_bytes=capacity * 0.3) == 1.0


def fixed_point(ratio: float) -> float:
    """Random replacement's hit rate for large associativity: h = exp(-r (1 - h)), the root < 1."""
    return brentq(lambda h: h - math.exp(-ratio * (1 - h)), 0.0, 1.0 - 1e-12) if ratio > 1 else 1.0


def test_random_replacement_approaches_the_fixed_point():
    ratios = np.array([1.25, 1.5, 2.0, 3.0])
    gaps = {}
    for ways in (4, 32, 128):
        h = random_hit_rates(np.round(ratios * ways).astype(int), ways=ways)
        gaps[ways] = np.abs(h - [fixed_point(r) for r in np.round(ratios * ways) / ways]).max()
    assert gaps[128] < 0.006
    assert gaps[128] < gaps[32] < gaps[4]
    # a fully associative cache of 16 ways, through the cache-level path
    cache = Cache(sets=1, ways=16, replacement="random")
    got = hit_rates(cache, ratios)
    assert np.abs(got - [fixed_point(r) for r in ratios]).max() < 0.02


def exact_random(lines: int, ways: int) -> float:
    """Random replacement by its Markov chain: the state is the set of lines held when the sweep
    is at line 0; one pass maps it to a distribution over states; the stationary one gives h."""
    states = list(combinations(range(lines), ways))
    index = {s: i for i, s in enumerate(states)}
    # distribution over (held set) x expected hits, stepped line by line
    P = np.zeros((len(states), len(states)))
    hits = np.zeros(len(states))
    for i, start in enumerate(states):
        dist = {frozenset(start): (1.0, 0.0)}     # held -> (probability, expected hits x probability)
        for line in range(lines):
            nxt: dict = {}
            for held, (p, e) in dist.items():
                if line in held:
                    outcomes = [(held, p, e + p)]
                else:
                    outcomes = [((held - {v}) | {line}, p / ways, e / ways) for v in held]
                for h2, p2, e2 in outcomes:
                    q, f = nxt.get(h2, (0.0, 0.0))
                    nxt[h2] = (q + p2, f + e2)
            dist = nxt
        for held, (p, e) in dist.items():
            P[i, index[tuple(sorted(held))]] += p
            hits[i] += e
    w, v = np.linalg.eig(P.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    pi /= pi.sum()
    return float(pi @ hits) / lines


@pytest.mark.parametrize("lines,ways", [(3, 2), (4, 2), (5, 4), (6, 4), (8, 4)])
def test_random_replacement_matches_its_markov_chain(lines, ways):
    simulated = set_hit_rates(replacement="random", ways=ways, max_lines=lines)[lines]
    assert simulated == pytest.approx(exact_random(lines, ways), abs=0.01)


def test_tree_plru_five_lines_in_four_ways_as_traced_by_hand():
    # lines a..e = 0..4, ways filled cold in order. By hand: pass 1 fills a-d, e evicts a (way 0);
    # pass 2: a evicts c (way 2), b hits, c evicts d, d evicts e, e evicts a: held (d, b, e, c);
    # pass 3: every access misses (a evicts b, b c, c d, d e, e a): held (c, e, d, b); from there on
    # every pass misses, as LRU would, although pass 2 had a hit that LRU would not have
    passes = list(islice(tree_plru_passes(lines=5, ways=4), 4))
    assert [hits for _, hits in passes[:3]] == [0, 1, 0]
    assert passes[1][0][1] == (4, 1, 2, 3)
    assert passes[2][0][1] == (3, 1, 4, 2)
    assert passes[3][0][1] == (2, 4, 3, 1)
    assert set_hit_rates(replacement="tree_plru", ways=4, max_lines=5)[5] == 0.0


@pytest.mark.parametrize("ways", [2, 4, 8, 16])
def test_tree_plru_steady_state_equals_lru_under_a_cyclic_sweep(ways):
    # what the exact cycles show: once a set receives more lines than ways, tree-PLRU settles
    # into missing every access, for every load simulated (up to 8 lines per way)
    k = 8 * ways
    plru = set_hit_rates(replacement="tree_plru", ways=ways, max_lines=k)
    assert np.array_equal(plru, set_hit_rates(replacement="lru", ways=ways, max_lines=k))


def test_hashed_lru_is_binomial():
    # a line hits when its set got at most ways - 1 of the other lines: h = P[Bin(n - 1, 1/S) <= A - 1]
    cache = Cache(sets=4096, ways=16, replacement="lru", indexing="hashed", seed=7)
    ratios = np.array([0.4, 0.55, 0.8, 1.0, 1.3, 2.0])
    n = np.round(ratios * 4096 * 16)
    assert np.allclose(hit_rates(cache, ratios), binom.cdf(15, n - 1, 1 / 4096), atol=0.015)
    assert hit_rates(cache, [1.0])[0] == pytest.approx(0.5, abs=0.06)
    assert hit_rates(cache, [0.55])[0] > 0.95


def test_page_colouring_is_binomial_over_pages_and_modulo_with_big_pages():
    small = Cache(sets=1 << 16, ways=8, line_bytes=128, indexing="page_coloured", page_bytes=4096)
    colours = (1 << 16) * 128 // 4096
    ratios = np.array([0.5, 0.8, 1.0, 1.5])
    pages = np.round(ratios * colours * 8)
    assert np.allclose(hit_rates(small, ratios), binom.cdf(7, pages - 1, 1 / colours), atol=0.03)
    big = Cache(sets=2048, ways=8, line_bytes=128, indexing="page_coloured", page_bytes=2 << 20)
    modulo = Cache(sets=2048, ways=8, line_bytes=128, indexing="modulo")
    grid = np.geomspace(0.3, 3, 50)
    assert np.array_equal(hit_rates(big, grid), hit_rates(modulo, grid))


def direct_sweep(cache: Cache, lines: int, warm: int, timed: int, seed: int = 1) -> float:
    """The whole cache, line by line, each set its own replacement state."""
    sets = line_sets(cache, lines)
    rng = np.random.default_rng(seed)
    held = [OrderedDict() for _ in range(cache.sets)]      # LRU order / random: any order
    plru = [PlruSet(cache.ways) for _ in range(cache.sets)]
    hits = 0
    for p in range(warm + timed):
        for line in range(lines):
            s = int(sets[line])
            if cache.replacement == "tree_plru":
                hit = plru[s].access(line)
            else:
                hit = line in held[s]
                if hit and cache.replacement == "lru":
                    held[s].move_to_end(line)
                elif not hit:
                    if len(held[s]) == cache.ways:
                        victim = next(islice(held[s], 0 if cache.replacement == "lru"
                                             else int(rng.integers(cache.ways)), None))
                        del held[s][victim]
                    held[s][line] = True
            hits += hit and p >= warm
    return hits / (lines * timed)


class PlruSet:
    """Tree-PLRU as a tree of direction bits walked from the root (a second implementation)."""

    def __init__(self, ways: int):
        self.ways, self.lines, self.bits = ways, [None] * ways, {}

    def access(self, line) -> bool:
        hit = line in self.lines
        if hit:
            way = self.lines.index(line)
        elif None in self.lines:
            way = self.lines.index(None)
        else:
            lo, hi, node = 0, self.ways, 1
            while hi - lo > 1:
                right = self.bits.get(node, 0)
                lo, hi = (lo + hi) // 2 if right else lo, hi if right else (lo + hi) // 2
                node = 2 * node + right
            way = lo
        self.lines[way] = line
        lo, hi, node = 0, self.ways, 1
        while hi - lo > 1:                      # point each node on the path at the other half
            right = way >= (lo + hi) // 2
            self.bits[node] = 0 if right else 1
            lo, hi = ((lo + hi) // 2, hi) if right else (lo, (lo + hi) // 2)
            node = 2 * node + right
        return hit


@pytest.mark.parametrize("replacement", ["lru", "tree_plru", "random"])
@pytest.mark.parametrize("indexing,page_bytes", [("modulo", 4096), ("hashed", 4096), ("page_coloured", 256)])
def test_per_set_decomposition_matches_a_direct_simulation(replacement, indexing, page_bytes):
    cache = Cache(sets=16, ways=4, line_bytes=64, replacement=replacement, indexing=indexing,
                  page_bytes=page_bytes, seed=3)
    for lines in (40, 60, 64, 68, 80, 100, 140):
        fast = hit_rates(cache, [lines / 64])[0]
        if replacement == "random":
            assert direct_sweep(cache, lines, warm=10, timed=300) == pytest.approx(fast, abs=0.03)
        else:
            assert direct_sweep(cache, lines, warm=12, timed=8) == pytest.approx(fast, abs=1e-9)


def test_simulator_table_transition_is_the_harmonic_mix_of_the_table():
    cache = Cache(sets=256, ways=8, replacement="random", indexing="hashed", seed=5)
    table = hit_table(cache)
    capacity, fast, slow = cache.capacity_bytes, 3000.0, 800.0
    gpu = SimulatedGPU(parse_profile({"compute_units": 4, "levels": [
        {"name": "L2", "bandwidth_gbs": fast, "capacity_bytes": capacity, "transition": "table",
         "hit_table": [list(p) for p in table]},
        {"name": "HBM", "bandwidth_gbs": slow}]}))
    one_buffer = LaunchConfig(sweep="shared", programs=4, row_share=4)   # every program reads it
    log_r, h = np.log([r for r, _ in table]), np.array([x for _, x in table])
    for stream_bytes in (capacity // 100, capacity // 2, capacity - 4096, capacity + 4096,
                         int(capacity * 1.7), capacity * 20):
        ratio = stream_bytes / capacity
        hit = h[0] if ratio <= table[0][0] else h[-1] if ratio >= table[-1][0] else \
            np.interp(math.log(ratio), log_r, h)
        expected = 1 / (hit / fast + (1 - hit) / slow)
        assert gpu.bandwidth_gbs(one_buffer, stream_bytes) == pytest.approx(expected, rel=1e-9)
    assert gpu.bandwidth_gbs(one_buffer, capacity // 100) == pytest.approx(fast, rel=1e-9)


@pytest.mark.parametrize("table,says", [
    ([], "1 to 4096"), ([[1.0, 1.0]] * 4097, "1 to 4096"), ([[0.5, 1.0], [0.5, 0.2]], "must increase"),
    ([[-1.0, 1.0]], "> 0"), ([[1.0, 1.2]], "<= 1"), ([[1.0, math.inf]], "finite"), ([[1.0]], "pair"),
])
def test_profile_hit_table_is_validated(table, says):
    level = {"name": "L2", "bandwidth_gbs": 3000, "capacity_bytes": 1 << 20, "transition": "table",
             "hit_table": table}
    with pytest.raises(InputError, match=says):
        parse_profile({"compute_units": 4, "levels": [level, {"name": "HBM", "bandwidth_gbs": 800}]})
    level.update(transition="hashed", hit_table=[[1.0, 0.5]])
    with pytest.raises(InputError, match="only with transition table"):
        parse_profile({"compute_units": 4, "levels": [level, {"name": "HBM", "bandwidth_gbs": 800}]})
