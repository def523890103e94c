"""Measure a few launch configurations per level on a real GPU, to choose the sweeps' defaults:
L1 (private, cached loads, 16 KiB per SM), L2 (shared, l2only, 16 MiB), HBM (shared, l2only, 2 GiB).
Prints a table and writes JSON.  python3 benchmarks/explore_launch.py --gpu 0 --out explore.json"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure.gpu import TritonGPU  # noqa: E402
from measure.launch import LaunchConfig  # noqa: E402
from measure.point import PointMeter  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--out", default="explore.json")
    args = ap.parse_args()
    gpu = TritonGPU(args.gpu)
    meter = PointMeter(gpu)
    cus = gpu.facts.compute_units
    rows = []
    cases = []
    for warps in (4, 8, 16):
        for block in (1024, 2048):
            for per_sm in (1, 2, 4):
                cases.append(("L1", LaunchConfig("private", cus * per_sm, block, warps, 1, "cached"), 16 * 1024))
    for warps in (4, 8, 16):
        for block in (1024, 2048):
            for gm in (2, 4, 8):
                for level, total in (("L2", 16 << 20), ("HBM", 2 << 30)):
                    stream = max(1024, total // (cus * gm) // 1024 * 1024)
                    cases.append((level, LaunchConfig("shared", cus * gm, block, warps, 1, "l2only"), stream))
    for level, cfg, stream in cases:
        m = meter.measure(cfg, stream, phase="coarse")
        rows.append({"level": level, **cfg.to_dict(), "stream_bytes": stream,
                     "bandwidth_gbs": m.bandwidth_gbs, "r2": m.r2, "flags": m.flags})
        print(f"{level:4s} programs={cfg.programs:5d} block={cfg.block_size:5d} warps={cfg.num_warps:3d} "
              f"stream={stream:>10d} bw={m.bandwidth_gbs:10,.0f} GB/s r2={m.r2:.5f} {m.flags}", flush=True)
    Path(args.out).write_text(json.dumps({"device": gpu.facts.to_dict(), "rows": rows}, indent=2))
    for level in ("L1", "L2", "HBM"):
        best = max((r for r in rows if r["level"] == level), key=lambda r: r["bandwidth_gbs"])
        print(f"best {level}: {best['bandwidth_gbs']:,.0f} GB/s with programs={best['programs']} "
              f"block={best['block_size']} warps={best['num_warps']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
