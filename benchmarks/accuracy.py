"""Capacities on generated GPUs (tests/gpu_generator.py): the accuracy figures of BENCHMARKS.md.

    python benchmarks/accuracy.py --gpus 300 --seeds 2 [--first 0] [--first-seed 1] [--jobs 2] [--json out.json] [--physics]
    python benchmarks/accuracy.py --builtins --seeds 8      # the built-in profiles (--simulate NAME)
    python benchmarks/accuracy.py ... --keyed-noise         # each point's noise keyed to its launch (A/B of two trees)
    python benchmarks/accuracy.py ... --chase               # the latency sweep too (detector.joint)

--physics draws the GPUs from tests/physics_generator.py instead: the same kind of GPUs, with each
cache level's fall from a simulated cache (sets x ways, LRU / tree-PLRU / random replacement,
modulo / hashed / page-coloured indexing) rather than from the simulator's formulas.

Each GPU is run through the simulator (sweeps only: the capacities do not use the probes) and the
detector, on each seed; the figures: (GPU, level) pairs within 3% / 10% / 20% of the truth on every
seed, runs that found the right list of levels, intervals that miss the truth, seed-to-seed spread,
and that spread against the repeatabilities the runs said: seed pairs apart by more than twice what
theirs give, and, of the pairs whose repeatabilities promise 95% of reruns within 2%, those within 2%.
SIMULATED: these are model figures, not hardware claims.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def builtin_spec(k: int) -> dict:
    """The profile JSON of built-in simulated GPU number ``k`` (measure.sim.profile.BUILTIN_PROFILES)."""
    from detect_caches.measure.sim.profile import BUILTIN_PROFILES
    return json.loads((ROOT / "measure" / "sim" / "profiles" / f"{BUILTIN_PROFILES[k]}.json").read_text())


def run_one(args) -> dict:
    k, seed, generator, keyed, chase = (tuple(args) + (False, False))[:5]
    from detect_caches.pipeline.api import sweep_and_detect
    from detect_caches.records import MeasurementLog
    from detect_caches.measure.session import SessionOptions, measure_latency
    from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
    gen = importlib.import_module("gpu_generator" if generator == "builtin" else generator)
    spec = dict(builtin_spec(k) if generator == "builtin" else gen.draw_gpu(k), seed=seed)
    if keyed:
        spec["noise_keyed"] = True     # measure.sim.simulated.SimulatedGPU._stream
    prof = parse_profile(spec)
    log, device, opts = MeasurementLog(None), SimulatedGPU(prof), SessionOptions(peak_budget=0)
    t = time.perf_counter()
    # with the latency sweep, as a run on a GPU has it: its knees share the per-SM/CU capacities
    # (detector.joint); without it, the bandwidth sweeps alone
    chase_first = (lambda session: measure_latency(session, device, log, opts)) if chase else None
    _, det, analysis_s = sweep_and_detect(device, log, opts, before_detect=chase_first)
    t_measure = time.perf_counter() - t - analysis_s
    return {"gpu": k, "seed": seed, "truth": gen.expected_levels(spec),
            "found": [(lv.name, lv.capacity_bytes, lv.capacity_low_bytes, lv.capacity_high_bytes, lv.fall_shape,
                       lv.capacity_repeatability, lv.transition_width_octaves) for lv in det.levels],
            "profile": spec["name"] if generator == "builtin" else None, "points": len(log.records), "analysis_s": analysis_s, "measure_s": t_measure,
            "shapes": {lv["name"]: lv.get("physics", lv.get("transition", ""))
                       + (" split" if lv.get("far_bandwidth_gbs") else "")
                       for lv in spec["levels"]}}


SAID_SIGMAS = 2.0          # two seeds' readings further apart than this many of the repeatabilities
                           # they said (about 5% of seed pairs where those are true) ...
PRECISE = 0.02 / 1.96      # ... and seed pairs whose repeatabilities said 95% of reruns within 2%


def _seed_pairs(found: list) -> list[tuple[float, float]]:
    """(how far apart, ln; the 1-sigma of that the two runs' repeatabilities say) for each two seeds
    of one level."""
    return [(abs(math.log(a[1] / b[1])), math.hypot(a[5] or 0.0, b[5] or 0.0))
            for i, a in enumerate(found) for b in found[i + 1:]]


def summarize(runs: list[dict]) -> dict:
    by_gpu: dict[int, list[dict]] = {}
    for r in runs:
        by_gpu.setdefault(r["gpu"], []).append(r)
    pairs, right_lists, intervals, missed, spreads, said, worst = [], 0, 0, 0, [], [], []
    for k, rs in sorted(by_gpu.items()):
        for r in rs:
            names = [n for n, *_ in r["found"]]
            right = names == [n for n, _ in r["truth"]]
            right_lists += right
        for name, truth in rs[0]["truth"]:
            if truth is None:
                continue
            errs, readings = [], []
            for r in rs:
                got = next((f for f in r["found"] if f[0] == name), None)
                if got is None or got[1] is None:
                    errs.append(math.inf)
                    continue
                errs.append(abs(got[1] / truth - 1))
                readings.append(got)
                intervals += 1
                missed += not (got[2] <= truth <= got[3])
            err = max(errs)
            pairs.append(err)
            if len(readings) >= 2:
                ests = [got[1] for got in readings]
                spreads.append(max(ests) / min(ests) - 1)
                said += _seed_pairs(readings)
            worst.append((err, rs[0].get("profile") or k, name, rs[0]["shapes"].get(name, ""), [round(e, 3) for e in errs]))
    n = len(pairs)
    share = lambda tol: sum(e <= tol for e in pairs) / max(n, 1)  # noqa: E731
    precise = [apart for apart, rep in said if rep <= PRECISE]
    spreads.sort()
    return {"gpus": len(by_gpu), "runs": len(runs), "pairs": n, "within_3pct": share(0.03),
            "within_10pct": share(0.10), "beyond_20pct": sum(e > 0.20 for e in pairs),
            "right_levels": right_lists / max(len(runs), 1), "intervals_missing": missed / max(intervals, 1),
            "spread_95th": spreads[int(0.95 * (len(spreads) - 1))] if spreads else 0.0,
            "spread_within_2pct": sum(s <= 0.02 for s in spreads) / max(len(spreads), 1),
            "spread_beyond_said": sum(apart > SAID_SIGMAS * rep for apart, rep in said) / max(len(said), 1),
            "said_precise": len(precise) / max(len(said), 1),
            "precise_within_2pct": sum(apart <= math.log1p(0.02) for apart in precise) / max(len(precise), 1),
            "analysis_s_max": max(r["analysis_s"] for r in runs),
            "worst": sorted(worst, reverse=True)[:25]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=300)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--first-seed", type=int, default=1, help="seeds first-seed .. first-seed + seeds - 1 (others than the done-when's 1 and 2: a check held out)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--physics", action="store_true", help="GPUs whose falls come from simulated caches")
    ap.add_argument("--builtins", action="store_true", help="the built-in profiles (--simulate NAME) instead")
    ap.add_argument("--chase", action="store_true",
                    help="run the latency sweep too, as detect-caches --gpu does (its knees share the per-SM/CU capacities)")
    ap.add_argument("--keyed-noise", action="store_true",
                    help="each point's noise from its launch, size and repeat, not one stream (common random "
                         "numbers: two trees compared differ by what they do, not by a shifted stream)")
    a = ap.parse_args()
    t = time.perf_counter()
    generator = "builtin" if a.builtins else "physics_generator" if a.physics else "gpu_generator"
    if a.builtins:
        from detect_caches.measure.sim.profile import BUILTIN_PROFILES
        a.first, a.gpus = 0, len(BUILTIN_PROFILES)
    jobs = [(k, s, generator, a.keyed_noise, a.chase) for k in range(a.first, a.first + a.gpus) for s in range(a.first_seed, a.first_seed + a.seeds)]
    with ProcessPoolExecutor(a.jobs) as pool:
        runs = list(pool.map(run_one, jobs, chunksize=2))
    s = summarize(runs)
    s["keyed_noise"], s["chase"] = a.keyed_noise, a.chase
    if a.json:
        a.json.write_text(json.dumps({"summary": s, "runs": runs}, default=str))
    print(f"SIMULATED: {s['gpus']} generated GPUs ({generator}{', keyed noise' if a.keyed_noise else ''}{', latency sweep' if a.chase else ''}) x {a.seeds} seeds ({s['pairs']} level pairs) in "
          f"{time.perf_counter() - t:.0f} s")
    for key in ("within_3pct", "within_10pct", "beyond_20pct", "right_levels", "intervals_missing",
                "spread_within_2pct", "spread_95th", "spread_beyond_said", "said_precise", "precise_within_2pct",
                "analysis_s_max"):
        v = s[key]
        print(f"  {key:20s} {v:.3f}" if isinstance(v, float) else f"  {key:20s} {v}")
    print("worst:")
    for w in s["worst"][:15]:
        print("  ", w)


if __name__ == "__main__":
    main()
