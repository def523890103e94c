"""The seed benchmark's modes: `run` (one configuration) and `benchmark` (its fixed sweep), with
the seed's flags, each size-like one bounded."""
from __future__ import annotations

import argparse
from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.pipeline.cli_args import Parser, block, bounded, file_prefix, warps
from detect_caches.pipeline.console import say

EXIT_OK = 0


def _seed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", type=bounded(1 << 16), default=0, help="GPU index (default 0)")
    p.add_argument("--simulate", metavar="PROFILE", help="run against a simulated GPU instead")
    p.add_argument("--block-size", type=block, default=1024, help="elements each program loads per step (default 1024)")
    p.add_argument("--num-warps", type=warps, default=4, help="warps per program (default 4)")
    p.add_argument("--num-stages", type=bounded(8), default=1, help="software pipelining stages (default 1)")
    p.add_argument("--num-cu", type=bounded(100_000), help="SMs/CUs used to size the grid (default: the device's)")
    p.add_argument("--grid-multiplier", type=bounded(64), default=4, help="programs per SM/CU (default 4)")
    p.add_argument("--num-repeat", type=bounded(10_000), default=20, help="timed launches per point (default 20)")
    p.add_argument("--load-flavour", choices=("volatile", "cached", "l2only"), default="volatile",
                   help="volatile is the seed's (it skips L1 on NVIDIA)")


def run_arguments(p: argparse.ArgumentParser) -> None:
    _seed_arguments(p)
    p.add_argument("--stream-elements", type=bounded(1 << 34), default=1024,
                   help="float32 elements each program streams (a multiple of 256; default 1024)")
    p.add_argument("--load-iterations", type=bounded(1_000_000), default=10,
                   help="passes over its elements per launch, the largest of the regression (default 10)")


def benchmark_arguments(p: argparse.ArgumentParser) -> None:
    _seed_arguments(p)
    p.add_argument("--test-name", type=file_prefix, default="bw_test", help="the CSV files' name prefix (default bw_test)")
    p.add_argument("--results-dir", type=Path, default=Path("results"), help="where the CSV files go (default results)")


def _seed_device(args):
    if args.simulate:
        from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile
        return SimulatedGPU(load_profile(args.simulate))
    from detect_caches.measure.gpu.triton_gpu import TritonGPU
    return TritonGPU(args.gpu)


def cmd_run(args) -> int:
    """The seed's single configuration (``args``: run_arguments' namespace, or an argv list)."""
    if isinstance(args, list):
        p = Parser(prog="detect-caches run", description="The seed's single configuration.")
        run_arguments(p)
        args = p.parse_args(args)
    if args.load_iterations < 4:    # fewer gives fewer than four counts: a line through two points says r2=1
        raise InputError(f"--load-iterations must be at least 4 (the regression's four load-iteration counts are "
                         f"a quarter, half, three quarters and all of it), got {args.load_iterations}")
    if args.stream_elements % 256:
        raise InputError(f"--stream-elements must be a multiple of 256 (1 KiB), got {args.stream_elements}")
    from detect_caches.measure.launch import LaunchConfig
    from detect_caches.measure.seed import measure_seed_point
    device = _seed_device(args)
    cus = args.num_cu or device.facts.compute_units
    cfg = LaunchConfig("shared", cus * args.grid_multiplier, args.block_size, args.num_warps,
                       args.num_stages, args.load_flavour)
    total = device.facts.total_memory_bytes
    need = cfg.programs * args.stream_elements * 4
    if total and need > total:
        raise InputError(f"--stream-elements {args.stream_elements} x {cfg.programs} programs needs "
                         f"{need / 2**30:,.1f} GiB; the device has {total / 2**30:,.1f} GiB")
    iters = sorted({max(1, args.load_iterations * k // 4) for k in (1, 2, 3, 4)})
    pt = measure_seed_point(device, cfg, args.stream_elements, iters, args.num_repeat)
    say(f"grids={cfg.programs} stream_elems={args.stream_elements} block={cfg.block_size} "
           f"warps={cfg.num_warps} flavour={cfg.load_flavour}")
    for it, ms in zip(pt.load_iters, pt.avg_ms):
        say(f"load_iters={it:<6d} avg_ms={ms:.5f}")
    say(f"slope_ms={pt.slope_ms:.6f} intercept_ms={pt.intercept_ms:.6f} r2={pt.r2:.6f} "
           f"bandwidth={pt.bandwidth_gbs:,.1f} GB/s")
    return EXIT_OK


def cmd_benchmark(args) -> int:
    """The seed's fixed sweep (``args``: benchmark_arguments' namespace, or an argv list)."""
    if isinstance(args, list):
        p = Parser(prog="detect-caches benchmark", description="The seed's fixed sweep.")
        benchmark_arguments(p)
        args = p.parse_args(args)
    from detect_caches.measure.launch import LaunchConfig
    from detect_caches.measure.seed import run_benchmark
    device = _seed_device(args)
    cus = args.num_cu or device.facts.compute_units
    cfg = LaunchConfig("shared", cus * args.grid_multiplier, args.block_size, args.num_warps,
                       args.num_stages, args.load_flavour)

    def show(pt):
        say(f"stream_elems={pt.stream_elems:<9d} bandwidth={pt.bandwidth_gbs:>10,.1f} GB/s r2={pt.r2:.5f}",
               err=True)
    details, summary = run_benchmark(device, cfg, args.test_name, args.results_dir,
                                     num_repeat=args.num_repeat, on_point=show)
    say(f"details: {details}\nsummary: {summary}")
    return EXIT_OK
