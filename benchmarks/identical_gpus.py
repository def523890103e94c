"""Identical GPUs never flag each other (issue 28, point 3): SIMULATED verdicts on generated GPUs.

    python benchmarks/identical_gpus.py --nodes 100 --pairs 200 [--physics] [--keyed-noise] [--jobs 2]

A node: one generated GPU (tests/gpu_generator.py, or tests/physics_generator.py) run with 8 seeds,
each its own card (UUID, host, index); the fleet report must name no outlier. A pair: the same
GPU on two seeds; `compare` must report no drift. Each run goes through the simulator (sweeps
only) and the detector, as benchmarks/accuracy.py does. Model figures, not hardware claims.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def result_of(args) -> dict:
    k, seed, generator, *keyed = args
    from sim_runs import result_of as run   # the tests' seeded simulator run, as result.json content
    spec = dict(importlib.import_module(generator).draw_gpu(k), seed=seed)
    if keyed and keyed[0]:
        spec["noise_keyed"] = True     # measure.sim.simulated.SimulatedGPU._stream
    res = run(spec)
    res["device"].update(host=f"node{k:03d}", index=seed - 1, uuid=f"GPU-SIM-{k:04d}-{seed}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100, help="nodes of 8 identical GPUs")
    ap.add_argument("--pairs", type=int, default=200, help="GPUs compared on two seeds")
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--physics", action="store_true", help="GPUs whose falls come from simulated caches")
    ap.add_argument("--keyed-noise", action="store_true", help="each point's noise keyed to its launch (accuracy.py's)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    from detect_caches.pipeline.api_checks import fleet
    from detect_caches.reports.compare import compare_results
    generator = "physics_generator" if a.physics else "gpu_generator"
    t = time.perf_counter()
    gpus = max(a.nodes, a.pairs)
    jobs = [(k, s, generator) for k in range(gpus) for s in range(1, (a.per_node if k < a.nodes else 2) + 1)]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = dict(zip(jobs, pool.map(result_of, [(*j, a.keyed_noise) for j in jobs], chunksize=4)))
    flagged, drifted = [], []
    for k in range(a.nodes):
        report = fleet([results[(k, s, generator)] for s in range(1, a.per_node + 1)], force=True)
        outliers = report.to_dict().get("outliers", {})
        if outliers:
            flagged.append((k, outliers))
    for k in range(a.pairs):
        cmp = compare_results(results[(k, 1, generator)], results[(k, 2, generator)])
        if cmp.drifted:
            drifted.append((k, cmp.drifted))
    summary = {"generator": generator, "keyed_noise": a.keyed_noise, "nodes": a.nodes, "per_node": a.per_node, "nodes_with_outliers": len(flagged),
               "pairs": a.pairs, "pairs_with_drift": len(drifted), "seconds": round(time.perf_counter() - t)}
    if a.json:
        a.json.write_text(json.dumps({"summary": summary, "flagged": flagged, "drifted": drifted}, default=str))
    print(f"SIMULATED: {a.nodes} nodes of {a.per_node} identical GPUs ({generator}{', keyed noise' if a.keyed_noise else ''}): {len(flagged)} with an "
          f"outlier; {a.pairs} GPUs on two seeds: {len(drifted)} with a drift ({summary['seconds']} s)")
    for k, what in flagged[:10]:
        print("  node", k, what)
    for k, what in drifted[:10]:
        print("  pair", k, what)


if __name__ == "__main__":
    main()
