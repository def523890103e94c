"""How evenly the programs of one in-kernel-timed launch finish: per-program timed-phase
durations (percentiles, longest / median) at a few points of each sweep. The article's method
divides by the longest program, so an uneven finish lowers its figure.
    python3 benchmarks/clock_spread.py --gpu 0"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detect_caches.measure.gpu.triton_gpu import TritonGPU  # noqa: E402
from detect_caches.measure.kernel_meta import DEVICE_CLOCKS, flavour_code  # noqa: E402
from detect_caches.measure.launch import LaunchConfig  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    args = ap.parse_args()
    import torch
    from detect_caches.measure.gpu.kernel import stream_load_timed_kernel
    gpu = TritonGPU(args.gpu)
    cus = gpu.facts.compute_units
    cases = [("L1 16 KiB/SM", LaunchConfig("private", cus * 4, 2048, 4, 1, "cached", True), 16 << 10, 400),
             ("L1 128 KiB/SM", LaunchConfig("private", cus * 4, 2048, 4, 1, "cached", True), 128 << 10, 60),
             ("L1 224 KiB/SM (partial hits)", LaunchConfig("private", cus * 4, 2048, 4, 1, "cached", True), 224 << 10, 40),
             ("L2 16 MiB", LaunchConfig("shared", cus * 4, 1024, 8, 1, "l2only"), (16 << 20) // (cus * 4), 60),
             ("HBM 960 MiB", LaunchConfig("shared", cus * 4, 1024, 8, 1, "l2only"), (960 << 20) // (cus * 4) // 1024 * 1024, 3)]
    clock = DEVICE_CLOCKS[gpu.facts.vendor]
    for name, cfg, stream, iters in cases:
        x, y = gpu._buffers(cfg, stream // 4)
        t = torch.zeros(3 * cfg.programs, dtype=torch.int64, device="cuda")
        sync = torch.zeros(1, dtype=torch.int32, device="cuda")
        durs = []
        for _ in range(5):
            sync.zero_()
            stream_load_timed_kernel[(cfg.programs,)](
                x, y, t, sync, stream // 4, 2, iters, cfg.rows(cus), BLOCK_SIZE=cfg.block_size,
                LOAD=flavour_code(cfg.load_flavour, gpu.facts.vendor), CLOCK=clock["code"],
                ROW_BY_SM=cfg.row_by_sm, num_warps=cfg.num_warps)
            r = t.view(cfg.programs, 3).cpu().numpy().astype(float)
            durs.append((r[:, 1] - r[:, 0]) * clock["ns_per_tick"])
        d = np.concatenate(durs)
        p = np.percentile(d, [0, 10, 50, 90, 100])
        print(f"{name:30s} per-program phase us: min {p[0] / 1e3:8.1f} p10 {p[1] / 1e3:8.1f} median {p[2] / 1e3:8.1f} "
              f"p90 {p[3] / 1e3:8.1f} max {p[4] / 1e3:8.1f}  longest/median {p[4] / p[2]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
