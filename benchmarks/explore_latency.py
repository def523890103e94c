"""Latency chase on a real GPU, point by point: ns per hop (regression and device timer), cycles,
and what each point costs in wall time, at sizes inside each level of an H200-like part.

    python3 benchmarks/explore_latency.py --gpu 0 > latency.log
"""
from __future__ import annotations

import argparse
import json
import time

from detect_caches.measure.gpu.triton_gpu import TritonGPU
from detect_caches.measure.latency import CHASE_CONFIG, LatencyMeter, ProbeTarget, probe_chains


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    gpu = TritonGPU(args.gpu)
    meter = LatencyMeter(gpu)
    rows = []
    sizes_kib = [16, 64, 128, 200, 216, 220, 222, 224, 256, 384, 1024, 8192, 20480, 26624, 32768, 40960,
                 49152, 57344, 65536, 131072, 262144]
    for kib in sizes_kib:
        t = time.perf_counter()
        m = meter.measure(CHASE_CONFIG, kib * 1024, phase="coarse")
        wall = time.perf_counter() - t
        rows.append({"kib": kib, "ns": m.latency_ns, "cycles": m.latency_cycles, "timing": m.timing,
                     "flags": m.flags, "wall_s": round(wall, 4), "sm_mhz": m.sm_clock_mhz})
        print(f"{kib:8d} KiB {m.latency_ns:8.2f} ns {m.latency_cycles:8.1f} cyc {m.timing:6s} {m.flags:8s} "
              f"wall {wall * 1000:7.1f} ms", flush=True)
    for target in (ProbeTarget("L1", 221 * 1024), ProbeTarget("L2", 57 << 20, l2only=True, cold=True)):
        for phase, spec in probe_chains(target):
            t = time.perf_counter()
            m = meter.measure_chain(spec, phase=phase, target=target.level)
            wall = time.perf_counter() - t
            rows.append({"probe": phase, "level": target.level, "slot": spec.slot_bytes, "elements": spec.elements,
                         "ns": m.latency_ns, "wall_s": round(wall, 4)})
            print(f"{target.level} {phase:6s} slot {spec.slot_bytes:4d} n {spec.elements:9d} {m.latency_ns:8.2f} ns "
                  f"wall {wall * 1000:7.1f} ms", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
