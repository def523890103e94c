"""What no estimator can do: the generated physics GPUs whose levels have a twin, a cache of the
generator's own kinds with a capacity past a target, whose bandwidth curve the run's noise hides.

    python benchmarks/twins.py --gpus 300 [--first 0] [--points 400] [--target 0.2] [--json out.json]

For each (GPU, level) of tests/physics_generator.py: every cache the generator could have drawn
in its place (LRU, tree-PLRU or random replacement; hashed sets for a device level, address-bit
sets for a per-SM/CU one; the ways it draws), at every capacity more than ``--target`` off the
truth, with the same plateau speeds either side (so the two GPUs differ only along this fall);
the twin is the one whose curve lies nearest the truth's where they part most (max |diff| of log10
bandwidth, both from tests/cache_physics.py). N measurements at the profile's noise (sigma =
noise / ln 10 in log10 bandwidth, independent from point to point) tell the two GPUs apart by at
most D = sqrt(N) max|diff| / sigma sigmas (all N points where they part most; the plateau speeds
known): any estimator reads one of the two past the target with odds of at least Phi(-D / 2) on
average over the pair (the Bayes error of two equally likely hypotheses). A level whose twin has
a small D cannot be read within the target on every seed, whatever the analysis does.

SIMULATED: the curves are cache_physics', the noise the profile's. Levels of a split L2 (a far
half of its own speed) are left out: their twins would need the split's speeds too.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

RATIOS = np.geomspace(1 / 16, 16.0, 1500)     # W / C of the truth where the curves are compared
TWIN_CAPS = 181                               # twin capacities tried, in ln C, either side of the band
TWIN_SPAN = 1.6                               # ... out to this factor past the band's edge


def _curve(h: np.ndarray, hi_gbs: float, lo_gbs: float) -> np.ndarray:
    """log10 bandwidth of a fall with hit rates ``h`` between two plateau speeds."""
    return -np.log10(h / hi_gbs + (1 - h) / lo_gbs)


def twin_families(level: dict, per_cu: bool):
    """(description, Cache) for each kind of cache the generator draws for this level's scope."""
    from cache_physics import Cache
    from physics_generator import DEVICE_WAYS, PER_CU_WAYS, TREE_WAYS
    line = int(level.get("line_bytes", 128))
    for replacement in ("lru", "tree_plru", "random"):
        ways_all = TREE_WAYS if replacement == "tree_plru" else (PER_CU_WAYS if per_cu else DEVICE_WAYS)
        for ways in ways_all:
            if not per_cu and ways < 8:
                continue
            if per_cu:
                sets = max(1, round(level["capacity_bytes"] / (ways * line)))
                yield f"{replacement} modulo {ways}w", Cache(sets=sets, ways=ways, line_bytes=line,
                                                             replacement=replacement, indexing="modulo")
            else:
                yield f"{replacement} hashed {ways}w", Cache(sets=4096, ways=ways, line_bytes=line,
                                                             replacement=replacement, indexing="hashed", seed=7)


@functools.lru_cache(maxsize=None)
def _table(cache) -> tuple[np.ndarray, np.ndarray]:
    """The cache's hit rate on a fine grid of ln(W / C) (a hashed cache's is the same for any
    number of sets: one table serves every capacity)."""
    from cache_physics import hit_rates
    lnr = np.linspace(math.log(1 / 40), math.log(40.0), 6000)
    return lnr, hit_rates(cache, np.exp(lnr))


def nearest_twin(level: dict, next_gbs: float, per_cu: bool, target: float) -> dict:
    """The twin past ``target`` whose curve lies nearest the truth's (max |diff|, log10)."""
    tab = np.asarray(level["hit_table"], dtype=float)
    truth = np.interp(np.log(RATIOS), np.log(tab[:, 0]), tab[:, 1], left=1.0, right=float(tab[-1, 1]))
    hi, lo = float(level["bandwidth_gbs"]), float(next_gbs)
    y_truth = _curve(truth, hi, lo)
    caps = np.concatenate([np.geomspace((1 - target) / TWIN_SPAN, 1 - target, TWIN_CAPS),
                           np.geomspace(1 + target, (1 + target) * TWIN_SPAN, TWIN_CAPS)])
    best = {"max_diff_log10": math.inf}
    for name, cache in twin_families(level, per_cu):
        # the twin's hit rate at the truth's ratios, for each twin capacity c (in truth capacities)
        lnr, table = _table(cache)
        h = np.interp(np.log(RATIOS[None, :] / caps[:, None]), lnr, table, left=1.0, right=float(table[-1]))
        diff = np.max(np.abs(_curve(h, hi, lo) - y_truth[None, :]), axis=1)
        i = int(np.argmin(diff))
        if diff[i] < best["max_diff_log10"]:
            best = {"twin": name, "twin_capacity_ratio": float(caps[i]), "max_diff_log10": float(diff[i])}
    return best


def assess(args) -> list[dict]:
    k, target, points = args
    from physics_generator import draw_gpu
    spec = draw_gpu(k)
    sigma = spec["noise"] / math.log(10)
    out = []
    levels = spec["levels"]
    for i, level in enumerate(levels[:-1]):
        if level.get("capacity_bytes") is None:
            continue
        row = {"gpu": k, "level": level["name"], "physics": level.get("physics", ""),
               "ratio": level["bandwidth_gbs"] / levels[i + 1]["bandwidth_gbs"], "noise": spec["noise"]}
        if level.get("far_bandwidth_gbs"):
            out.append(dict(row, skipped="split level"))
            continue
        twin = nearest_twin(level, levels[i + 1]["bandwidth_gbs"], level.get("scope") == "per_cu", target)
        d = math.sqrt(points) * twin["max_diff_log10"] / sigma
        out.append(dict(row, **twin, separation_sigmas=d, error_at_least=float(norm.cdf(-d / 2))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=300)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--points", type=int, default=400, help="measurements given to this one fall (the run's whole budget: 400)")
    ap.add_argument("--target", type=float, default=0.2, help="the twin's capacity lies past this (0.2: 20%%)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with ProcessPoolExecutor(a.jobs) as pool:
        rows = [r for rs in pool.map(assess, [(k, a.target, a.points) for k in range(a.first, a.first + a.gpus)])
                for r in rs]
    judged = [r for r in rows if "skipped" not in r]
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    # two seeds of each level: the odds that an ideal estimator reads one of them past the target
    two_seeds = [1 - (1 - r["error_at_least"]) ** 2 for r in judged]
    print(f"SIMULATED: {len(judged)} levels of {a.gpus} physics GPUs ({len(rows) - len(judged)} split levels left out), "
          f"twins past {a.target:.0%}, {a.points} points each")
    for p in (0.2, 0.05, 0.01):
        print(f"  levels an ideal estimator misreads on one of two seeds with odds >= {p:.0%}: "
              f"{sum(t >= p for t in two_seeds)}")
    print(f"  expected levels misread on one of two seeds, at least: {sum(two_seeds):.1f}")
    print("nearest twins:")
    for r in sorted(judged, key=lambda r: r["separation_sigmas"])[:15]:
        print(f"  GPU {r['gpu']:3d} {r['level']:15s} {r['physics']:52s} ratio {r['ratio']:.2f} noise {r['noise']:.4f}: "
              f"{r['twin']} at {r['twin_capacity_ratio']:.2f} C, max diff {r['max_diff_log10'] * math.log(10):.2%}, "
              f"D {r['separation_sigmas']:.1f}, misread odds >= {r['error_at_least']:.1%}")


if __name__ == "__main__":
    main()
