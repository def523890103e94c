"""How many seed pairs any estimator could hold within 2% at the points the runs measured: for each
(GPU, level) of a generated set and each seed, the Cramér-Rao bound of ln C for the fall's leading
model (benchmarks/information_limit.py's) at the sizes of its fit window and the noise its fit read,
beside the spread the tool's two readings showed. SIMULATED.

    python benchmarks/spread_limit.py --physics --gpus 300 --seeds 2 --jobs 2

Two bounds per fall: the speeds known and the shape parameters free ("shape free"), and everything
but C known ("C alone", more generous still). A fall's chance of two readings within 2% is then
erf(0.02 / (2 sd)) for the two seeds' sd combined; the sum over pairs bounds the share of pairs
any unbiased estimator holds within 2% at those points (cliffs and split levels, which have no
smooth bound, counted as always within). More points (a larger budget) lower every bound.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

SMOOTH = ("hashed", "ways", "random_ways", "plru", "random")   # models whose C has a finite bound
TARGET = 0.02


def _bounds(fit, sizes) -> tuple[float, float] | None:
    """(shape free, C alone): 1-sigma bounds of ln C for ``fit``'s leading model at ``sizes``."""
    from information_limit import predicted
    best = fit.best
    if best.model not in SMOOTH:
        return None
    params = np.array([0.0, best.hi_log, best.lo_log, *best.theta], dtype=float)
    ratios = np.asarray(sizes, dtype=float) / best.capacity_bytes
    step = 1e-4
    jac = np.empty((ratios.size, params.size))
    for i in range(params.size):
        d = np.zeros(params.size)
        d[i] = step
        jac[:, i] = (predicted(best.model, params + d, ratios) - predicted(best.model, params - d, ratios)) / (2 * step)
    free = [0] + list(range(3, params.size))        # C and the shape parameters; the speeds known
    fisher = jac[:, free].T @ jac[:, free]
    shape_free = fit.sigma * math.sqrt(float(np.linalg.pinv(fisher)[0, 0]))
    c_alone = fit.sigma / math.sqrt(max(float(jac[:, 0] @ jac[:, 0]), 1e-300))
    return shape_free, c_alone


def _key(fit) -> tuple:
    return (round(float(fit.capacity_bytes), 3), round(float(fit.sigma), 12), len(fit.fits))


def run_one(args) -> dict:
    k, seed, generator = args
    import detect_caches.detector.capacity as capacity
    from detect_caches.measure.session import SessionOptions
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    from detect_caches.pipeline.sweep_detect import sweep_and_detect
    from detect_caches.records import MeasurementLog
    windows: dict[tuple, np.ndarray] = {}   # a fit's window, by its figures (the memo hands copies on)
    fit_fall = capacity.fit_fall

    def recording(sizes, y, **kw):
        fit = fit_fall(sizes, y, **kw)
        if fit is not None:
            windows[_key(fit)] = np.asarray(sizes, dtype=float)
        return fit
    capacity.fit_fall = recording
    gen = importlib.import_module(generator)
    spec = dict(gen.draw_gpu(k), seed=seed)
    _, det, _ = sweep_and_detect(SimulatedGPU(parse_profile(spec)), MeasurementLog(None), SessionOptions(peak_budget=0))
    truth = dict(gen.expected_levels(spec))
    out = {}
    for lv in det.levels:
        an = det.sweeps.get(lv.sweep)
        if not truth.get(lv.name) or an is None or lv.capacity_bytes is None:
            continue
        k_plat = next((i for i, p in enumerate(an.plateaus) if p.size_lo_bytes == lv.plateau_lo_bytes), None)
        st = an.steps[k_plat] if k_plat is not None and k_plat < len(an.steps) else None
        fit = getattr(getattr(st, "estimate", None), "fit", None)
        b = _bounds(fit, windows[_key(fit)]) if fit is not None and _key(fit) in windows else None
        out[lv.name] = (lv.capacity_bytes / truth[lv.name] - 1, b, fit.best.model if fit is not None else "")
    return {"gpu": k, "seed": seed, "levels": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--physics", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    generator = "physics_generator" if a.physics else "gpu_generator"
    jobs = [(k, s, generator) for k in range(a.gpus) for s in range(a.first_seed, a.first_seed + a.seeds)]
    with ProcessPoolExecutor(a.jobs) as pool:
        runs = list(pool.map(run_one, jobs, chunksize=2))
    by: dict[tuple, list] = {}
    for r in runs:
        for name, v in r["levels"].items():
            by.setdefault((r["gpu"], name), []).append(v)
    pairs = [v for v in by.values() if len(v) == a.seeds]
    seen = sum(max(e for e, _, _ in v) - min(e for e, _, _ in v) <= TARGET * (1 + min(e for e, _, _ in v)) for v in pairs)
    expect = [0.0, 0.0]
    bounded = 0
    for v in pairs:
        if all(b is not None for _, b, _ in v):
            bounded += 1
            for j in (0, 1):
                sd = math.sqrt(sum(b[j] ** 2 for _, b, _ in v))
                expect[j] += math.erf(TARGET / (sd * math.sqrt(2)))
        else:
            expect[0] += 1
            expect[1] += 1
    n = max(len(pairs), 1)
    print(f"SIMULATED: {a.gpus} {generator} GPUs x {a.seeds} seeds, {len(pairs)} (GPU, level) pairs, "
          f"{bounded} of them smooth falls with a bound")
    print(f"  spread within 2%, seen:                        {seen / n:.1%}")
    print(f"  at most, any unbiased estimator, shape free:   {expect[0] / n:.1%}")
    print(f"  at most, any unbiased estimator, C alone:      {expect[1] / n:.1%}")


if __name__ == "__main__":
    main()
