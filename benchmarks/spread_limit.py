"""How many seed pairs an efficient estimator would hold within 2% at the points the runs measured:
for each (GPU, level) of a generated set and each of two seeds, the Cramér-Rao bound of ln C for
the fall's leading model (benchmarks/information_limit.py's) at the sizes of its fit window and
the noise its fit read, beside the spread the tool's two readings showed. SIMULATED.

    python benchmarks/spread_limit.py --physics --gpus 300 --jobs 2

Three bounds a fall: every parameter of the model free (its C, both plateau speeds, its shape),
the speeds known, and C alone free (more generous each). Two readings each as wide as its bound,
Gaussian and unbiased, fall within 2% of each other with probability erf(0.02 / (sd sqrt 2)), sd
the two bounds combined (sqrt(sd1^2 + sd2^2)); summed over the pairs, that is the share an
efficient unbiased estimator would hold at those points, not a bound on every estimator (one that
snaps C to measured sizes can do better where its bias is small). Cliffs, modulo falls and split
levels have no smooth bound and count as always within. More points lower every bound.
"""
from __future__ import annotations

import argparse
import importlib
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

SMOOTH = ("hashed", "ways", "random_ways", "plru", "random")   # onset and split models have no finite bound
SPREAD_TARGET = 0.02    # two seeds' readings within this of each other (relative)
BOUNDS = ("all free", "speeds known", "C alone")


def _bounds(fit, sizes_bytes) -> tuple[float, float, float] | None:
    """1-sigma bounds of ln C for ``fit``'s leading model at ``sizes_bytes`` (BOUNDS' order)."""
    from information_limit import jacobian
    best = fit.best
    if best.model not in SMOOTH:
        return None
    params = np.array([0.0, best.hi_log, best.lo_log, *best.theta], dtype=float)
    jac = jacobian(best.model, params, np.asarray(sizes_bytes, dtype=float) / best.capacity_bytes)

    def bound(free: list[int]) -> float:
        sub = jac[:, free]
        if not np.all(np.isfinite(sub)):
            return math.nan     # a shape parameter at its table's edge: main() takes the next bound
        try:
            return fit.sigma * math.sqrt(float(np.linalg.pinv(sub.T @ sub)[0, 0]))
        except np.linalg.LinAlgError:
            return math.nan
    return bound(list(range(params.size))), bound([0] + list(range(3, params.size))), bound([0])


def run_one(args) -> dict:
    """One simulated run: each found level's error, its three bounds and its leading model."""
    gpu, seed, generator = args
    import detect_caches.detector.capacity as capacity
    from detect_caches.measure.session import SessionOptions
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    from detect_caches.records import MeasurementLog
    fit_fall = capacity.fit_fall

    def recording(sizes, y, **kw):
        fit = fit_fall(sizes, y, **kw)
        if fit is not None:
            fit.window_sizes_bytes = np.asarray(sizes, dtype=float)   # travels with the memo's copies
        return fit
    capacity.fit_fall = recording
    try:
        gen = importlib.import_module(generator)
        spec = dict(gen.draw_gpu(gpu), seed=seed)
        _, det, _ = sweep_and_detect(SimulatedGPU(parse_profile(spec)), MeasurementLog(None), SessionOptions(peak_budget=0))
    finally:
        capacity.fit_fall = fit_fall
    truth = dict(gen.expected_levels(spec))
    out = {}
    for level in det.levels:
        sweep = det.sweeps.get(level.sweep)
        if not truth.get(level.name) or sweep is None or level.capacity_bytes is None:
            continue
        k = next((i for i, p in enumerate(sweep.plateaus) if p.size_lo_bytes == level.plateau_lo_bytes), None)
        step = sweep.steps[k] if k is not None and k < len(sweep.steps) else None
        fit = getattr(getattr(step, "estimate", None), "fit", None)
        sizes = getattr(fit, "window_sizes_bytes", None)
        out[level.name] = (level.capacity_bytes / truth[level.name] - 1,
                           _bounds(fit, sizes) if sizes is not None else None, fit.best.model if fit is not None else "")
    return {"gpu": gpu, "seed": seed, "levels": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=300)
    ap.add_argument("--first-seed", type=int, default=1, help="seeds first-seed and first-seed + 1")
    ap.add_argument("--physics", action="store_true", help="GPUs whose falls come from simulated caches")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    if a.gpus < 1 or a.jobs < 1:
        ap.error("--gpus and --jobs take 1 or more")
    generator = "physics_generator" if a.physics else "gpu_generator"
    jobs = [(k, s, generator) for k in range(a.gpus) for s in (a.first_seed, a.first_seed + 1)]
    with ProcessPoolExecutor(a.jobs) as pool:
        runs = list(pool.map(run_one, jobs, chunksize=2))
    by: dict[tuple, list] = {}
    for r in runs:
        for name, v in r["levels"].items():
            by.setdefault((r["gpu"], name), []).append(v)
    pairs = [v for v in by.values() if len(v) == 2]
    expect = [0.0] * len(BOUNDS)
    past, unbounded, same_leader, substituted = 0, 0, 0, 0
    for v in pairs:
        (e1, b1, m1), (e2, b2, m2) = v
        apart = max(e1, e2) + 1 > (min(e1, e2) + 1) * (1 + SPREAD_TARGET)
        past += apart
        if b1 is None or b2 is None:
            unbounded += apart
            expect = [x + 1 for x in expect]
            continue
        same_leader += apart and m1 == m2
        for j in range(len(BOUNDS)):
            sd1, sd2 = (next((x for x in b[j:] if math.isfinite(x)), math.inf) for b in (b1, b2))
            substituted += not (math.isfinite(b1[j]) and math.isfinite(b2[j]))
            expect[j] += math.erf(SPREAD_TARGET / (math.hypot(sd1, sd2) * math.sqrt(2)))
    n = max(len(pairs), 1)
    print(f"SIMULATED: {a.gpus} {generator} GPUs x 2 seeds, {len(pairs)} (GPU, level) pairs found on both")
    print(f"  within {SPREAD_TARGET:.0%} of each other, seen: {1 - past / n:.1%} ({past} pairs past it: {unbounded} "
          f"with no smooth bound, {same_leader} read by the same leading model on both seeds)")
    for name, x in zip(BOUNDS, expect):
        print(f"  an efficient estimator, {name:12s}: {x / n:.1%}")
    if substituted:
        print(f"  ({substituted} pair bounds took the next one: a derivative not finite)")


if __name__ == "__main__":
    main()
