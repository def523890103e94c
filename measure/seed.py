"""The seed benchmark's two modes, kept: `run` (one configuration) and `benchmark` (a fixed sweep
writing results/<name>_details_<timestamp>.csv and results/<name>_summary_<timestamp>.csv)."""
from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect_caches.errors import InputError
from detect_caches.measure.launch import LaunchConfig, TimingDevice
from detect_caches.measure.regression import fit_load_iterations

# The seed sweeps stream_elems over powers of two; 256 elements (1 KiB) to 4 Mi elements (16 MiB)
SEED_STREAM_ELEMS = [2 ** k for k in range(8, 23)]
SEED_LOAD_ITERS = [1, 2, 4, 8, 16]


@dataclass
class SeedPoint:
    stream_elems: int
    load_iters: list[int]
    avg_ms: list[float]
    slope_ms: float
    intercept_ms: float
    r2: float
    bandwidth_gbs: float


def measure_seed_point(device: TimingDevice, config: LaunchConfig, stream_elems: int,
                       load_iters: list[int], num_repeat: int) -> SeedPoint:
    ms = device.time_launches(config, stream_elems, load_iters, num_repeat)
    avg = [float(np.mean(row)) for row in ms]   # the seed averages its repeats
    fit = fit_load_iterations(load_iters, avg)
    bw = fit.bandwidth_gbs(config.programs * stream_elems * 4)
    return SeedPoint(stream_elems, list(load_iters), avg, fit.slope_ms, fit.intercept_ms, fit.r2, bw)


def run_benchmark(device: TimingDevice, config: LaunchConfig, test_name: str, out_dir: Path,
                  *, num_repeat: int = 20, stream_elems: list[int] | None = None,
                  load_iters: list[int] | None = None, on_point=None) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d_%H%M%S")
    # two runs started in the same second get a suffix, never each other's files
    for n in range(1000):
        tag = stamp if n == 0 else f"{stamp}_{n}"
        details = out_dir / f"{test_name}_details_{tag}.csv"
        summary = out_dir / f"{test_name}_summary_{tag}.csv"
        try:
            fd = open(details, "x", newline="")
        except FileExistsError:
            continue
        try:
            fs = open(summary, "x", newline="")
        except FileExistsError:
            fd.close()
            details.unlink()
            continue
        break
    else:
        raise InputError(f"could not name new result files in {out_dir}")
    load_iters = load_iters or SEED_LOAD_ITERS
    cap = device.max_working_set_bytes()
    with fd, fs:
        wd, ws = csv.writer(fd), csv.writer(fs)
        wd.writerow(["stream_elems", "load_iters", "grids", "block_size", "num_warps", "load_flavour",
                     "avg_ms", "load_bytes", "store_bytes", "bandwidth_gbs"])
        ws.writerow(["stream_elems", "stream_bytes", "working_set_bytes", "grids", "load_ms_per_iter",
                     "intercept_ms", "r2", "bandwidth_gbs"])
        for elems in stream_elems or SEED_STREAM_ELEMS:
            if config.programs * elems * 4 > cap:
                break
            p = measure_seed_point(device, config, elems, load_iters, num_repeat)
            for it, avg in zip(p.load_iters, p.avg_ms):
                load_b = elems * 4 * it * config.programs
                store_b = config.block_size * 4 * config.programs
                wd.writerow([elems, it, config.programs, config.block_size, config.num_warps,
                             config.load_flavour, f"{avg:.6f}", load_b, store_b,
                             f"{(load_b + store_b) / (avg * 1e-3) / 1e9:.1f}"])
            ws.writerow([elems, elems * 4, elems * 4 * config.programs, config.programs,
                         f"{p.slope_ms:.6f}", f"{p.intercept_ms:.6f}", f"{p.r2:.6f}", f"{p.bandwidth_gbs:.1f}"])
            fd.flush()
            fs.flush()
            if on_point:
                on_point(p)
    return details, summary
