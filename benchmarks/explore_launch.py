"""Measure launch candidates per level on a real GPU, to choose the sweeps' defaults, and the
in-kernel clock beside the event regression at the same points.

L1: private sweep (cached loads, 16 KiB per SM); L2: shared sweep (l2only) at several aggregate
sizes; HBM: shared sweep at 2 GiB. Candidates vary warps, block size, programs per SM, the row
layout (contiguous or interleaved) and how many programs share a row. Prints a table, writes JSON.
    python3 benchmarks/explore_launch.py --gpu 0 --out explore.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detect_caches.measure.gpu.triton_gpu import TritonGPU  # noqa: E402
from detect_caches.measure.launch import LaunchConfig  # noqa: E402
from detect_caches.measure.point import PointMeter  # noqa: E402


def l2_cases(cus: int) -> list[tuple[str, LaunchConfig, int]]:
    cases = []
    for total_mib in (8, 16, 24, 40):
        for per_sm, warps, block, inter, share in (
                (4, 8, 1024, False, 1), (4, 8, 1024, True, 1), (4, 16, 1024, True, 1),
                (8, 8, 1024, True, 1), (4, 8, 2048, True, 1), (4, 8, 1024, False, 4),
                (4, 8, 1024, True, 4), (8, 8, 1024, True, 8), (4, 4, 2048, True, 1)):
            cfg = LaunchConfig("shared", cus * per_sm, block, warps, 1, "l2only", False, inter, share)
            stream = max(1024, (total_mib << 20) // cfg.rows(cus) // 1024 * 1024)
            cases.append((f"L2@{total_mib}MiB", cfg, stream))
    return cases


def hbm_cases(cus: int) -> list[tuple[str, LaunchConfig, int]]:
    cases = []
    # where gpu-l2-cache reads memory fastest on an H200 (4.62 TB/s at 0.1-0.7 GB)
    for total, label in ((256 << 20, "HBM@256MiB"), (512 << 20, "HBM@512MiB")):
        for per_sm in (2, 4, 8):
            for warps in (8, 16, 32):
                for block in (1024, 2048, 4096, 8192):
                    if per_sm * warps > 64 or block < warps * 32 * 4:
                        continue
                    cfg = LaunchConfig("shared", cus * per_sm, block, warps, 1, "l2only")
                    cases.append((label, cfg, total // cfg.programs // 1024 * 1024))
    return cases


def device_timing(gpu: TritonGPU, cfg: LaunchConfig, stream: int, events_gbs: float) -> dict:
    bytes_per_pass = cfg.programs * stream
    iters = max(2, math.ceil(0.4e-3 * events_gbs * 1e9 / bytes_per_pass))
    ct = gpu.time_in_kernel(cfg, stream // 4, 2, iters, 5)
    bws = [bytes_per_pass * iters / ns for ns in ct.longest_ns]
    return {"device_gbs": float(sorted(bws)[len(bws) // 2]), "device_gbs_all": bws,
            "start_spread_ns": [float(v) for v in ct.start_spread_ns],
            "longest_ns": [float(v) for v in ct.longest_ns], "load_iters": iters,
            "programs_per_cu": ct.programs_per_cu, "clock": ct.clock}


def clock_resolution_ns(gpu: TritonGPU) -> dict:
    """Distinct clock readings of many programs that start together: the smallest step seen."""
    import numpy as np
    import torch
    from detect_caches.measure.gpu.kernel import stream_load_timed_kernel
    progs = gpu.facts.compute_units * 4
    x = torch.rand(progs * 256, device="cuda")
    y = torch.empty(progs * 1024, device="cuda")
    t = torch.zeros(2 * progs, dtype=torch.int64, device="cuda")
    steps = []
    for _ in range(5):
        stream_load_timed_kernel[(progs,)](x, y, t, 256, 0, 1, progs, BLOCK_SIZE=1024, LOAD=2, CLOCK=0,
                                           num_warps=4)
        v = np.unique(t.cpu().numpy())
        d = np.diff(v)
        if d.size:
            steps.append(int(d[d > 0].min()))
    return {"min_step_ns": min(steps) if steps else None, "steps": steps}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--out", default="explore.json")
    ap.add_argument("--levels", default="L1,L2,HBM", help="which levels' candidates to measure")
    ap.add_argument("--no-device-timing", action="store_true")
    args = ap.parse_args()
    wanted = set(args.levels.split(","))
    gpu = TritonGPU(args.gpu)
    meter = PointMeter(gpu)
    cus = gpu.facts.compute_units
    l1 = LaunchConfig("private", cus * 4, 2048, 4, 1, "cached", True)
    cases = [("L1@16KiB", l1, 16 * 1024), ("L1@128KiB", l1, 128 * 1024)] + l2_cases(cus) + hbm_cases(cus)
    cases = [c for c in cases if c[0].split("@")[0] in wanted]
    rows = []
    t0 = time.perf_counter()
    for level, cfg, stream in cases:
        m = meter.measure(cfg, stream, phase="coarse")
        row = {"level": level, **cfg.to_dict(), "stream_bytes": stream, "working_set_bytes": m.working_set_bytes,
               "bandwidth_gbs": m.bandwidth_gbs, "r2": m.r2, "flags": m.flags}
        try:
            if not args.no_device_timing:
                row.update(device_timing(gpu, cfg, stream, m.bandwidth_gbs))
        except Exception as exc:   # exploration: record and go on
            row["device_error"] = str(exc).splitlines()[0]
        rows.append(row)
        print(f"{level:10s} progs={cfg.programs:5d} block={cfg.block_size:5d} warps={cfg.num_warps:3d} "
              f"inter={int(cfg.interleave)} share={cfg.row_share} stream={stream:>9d} "
              f"events={m.bandwidth_gbs:8,.0f} device={row.get('device_gbs', float('nan')):8,.0f} GB/s "
              f"r2={m.r2:.5f} spread={min(row.get('start_spread_ns', [math.nan])):8.0f}ns {m.flags}"
              f"{row.get('device_error', '')}", flush=True)
    res = {} if args.no_device_timing else clock_resolution_ns(gpu)
    print(f"clock resolution: {res}; {time.perf_counter() - t0:.1f} s")
    Path(args.out).write_text(json.dumps({"device": gpu.facts.to_dict(), "rows": rows,
                                          "clock_resolution": res}, indent=2))
    for level in sorted({r["level"] for r in rows}):
        best = max((r for r in rows if r["level"] == level), key=lambda r: r["bandwidth_gbs"])
        print(f"best {level}: {best['bandwidth_gbs']:,.0f} GB/s programs={best['programs']} "
              f"block={best['block_size']} warps={best['num_warps']} interleave={best['interleave']} "
              f"row_share={best['row_share']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
