"""The penalty search's exact breakpoint counts (detector.segment) against brute force."""
import itertools

import numpy as np

from detect_caches.detector.segment import MIN_SIZE, _counts, best_costs, segment


def _brute(y, k):
    """The least L2 cost over every placement of k breakpoints (segments of at least MIN_SIZE)."""
    n, best = y.size, np.inf
    for bk in itertools.combinations(range(MIN_SIZE, n - MIN_SIZE + 1), k):
        edges = [0, *bk, n]
        if all(b - a >= MIN_SIZE for a, b in zip(edges, edges[1:])):
            best = min(best, sum(((y[a:b] - y[a:b].mean()) ** 2).sum() for a, b in zip(edges, edges[1:])))
    return best


def test_best_costs_are_the_exhaustive_minimum():
    rng = np.random.default_rng(7)
    for _ in range(25):
        n = int(rng.integers(4, 13))
        y = np.repeat(rng.normal(0, 0.3, 4), 4)[:n] + rng.normal(0, 0.03, n)
        costs = best_costs(y, 3)
        for k in range(4):
            want = _brute(y, k)
            assert (np.isinf(want) and np.isinf(costs[k])) or abs(costs[k] - want) < 1e-9, (n, k, costs[k], want)


def test_counts_take_the_least_penalised_cost():
    """The count at each penalty is the exhaustive optimum's. ruptures' Pelt prunes some short
    signals to a costlier answer (2 breakpoints at 0.5108 where 1 costs 0.5085 at one penalty),
    and the recursive segmentation hands it many short signals."""
    rng = np.random.default_rng(1)
    for _ in range(40):
        n = int(rng.integers(6, 12))
        y = np.repeat(rng.normal(0, 0.3, 8), n // 8 + 1)[:n] + rng.normal(0, rng.uniform(0.002, 0.05), n)
        total = float(((y - y.mean()) ** 2).sum())
        pens = np.geomspace(total / 50, total * 1.01, 12)
        exact = np.array([_brute(y, k) for k in range(n // MIN_SIZE)])
        for pen, k in zip(pens, _counts(y, pens)):
            assert exact[k] + pen * k <= np.min(exact + pen * np.arange(exact.size)) + 1e-12, (n, pen, k)


def test_three_plateaus_are_found():
    rng = np.random.default_rng(3)
    y = np.concatenate([np.full(30, 4.5), np.full(40, 3.9), np.full(30, 3.6)]) + rng.normal(0, 0.005, 100)
    seg = segment(y)
    assert seg.breakpoints == [30, 70] and seg.cross_checked
