"""The main job's command line (`detect-caches --gpu 0`, `--simulate`, `--gpu all`, a torchrun
rank) and `analyze`: arguments in, the API's characterize and analyze called, the result printed
and its exit code (detect_caches.cli dispatches here)."""
from __future__ import annotations

import argparse
from pathlib import Path

from detect_caches._version import __version__
from detect_caches.errors import InputError
from detect_caches.pipeline import api
from detect_caches.pipeline.cli_args import Parser, positive
from detect_caches.pipeline.commands import add_check_options, finish_run
from detect_caches.pipeline.console import say


def main_parser() -> argparse.ArgumentParser:
    p = Parser(prog="detect-caches", description=(
        "Characterize a GPU's cache hierarchy: adaptive bandwidth and latency sweeps, changepoint "
        "analysis, a report. Subcommands: analyze CSV, compare BASE CUR, history RESULTS..., fleet "
        "RESULTS..., run, benchmark (the seed's modes); `detect-caches SUBCOMMAND --help` for each."))
    p.add_argument("-V", "--version", action="version", version=f"detect-caches {__version__}")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--gpu", metavar="INDEX", help="measure this GPU; `all` or a list such as 0,2,5 "
                                                    "measures each at once and writes a node summary")
    src.add_argument("--simulate", metavar="PROFILE", help="a simulated GPU: h200, mi300x, a100, h100, v100, a40, "
                                                           "l40, mi100, mi210, rx6900xt or a profile JSON file; a "
                                                           "comma list simulates a node")
    p.add_argument("--sim-index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="output folder (must not exist yet, or be empty; default "
                                             "detect-caches-results/<device>-<time>)")
    p.add_argument("--baseline", type=Path, help="compare with this result.json, or with each GPU's latest earlier "
                                                  "run in this folder (checked before measuring); exit 1 on drift")
    p.add_argument("--accept-incomplete", action="store_true",
                   help="accept a result with doubts (a level missing, a sweep the budget cut short, a level of "
                        "low confidence): exit 0 or 1 instead of 2")
    p.add_argument("--json", action="store_true", help="print result.json to stdout instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.add_argument("--budget", type=positive(int), default=400,
                   help="most kernel measurements, bandwidth and latency together (default 400, at least 60)")
    p.add_argument("--grid-multiplier", type=positive(int), default=4,
                   help="programs per SM/CU in the shared sweep (default 4, the seed's; at most 64)")
    p.add_argument("--sweeps", default="private,shared", help="which sweeps to run (default private,shared)")
    p.add_argument("--max-working-set", type=positive(float), metavar="MIB",
                   help="cap the largest working set (MiB, at least 16)")
    p.add_argument("--timing", choices=("events", "device"), default="events",
                   help="events: CUDA events and the load-iteration regression (default); device: "
                        "warm-up then a timed phase read from an in-kernel clock (one wave only)")
    p.add_argument("--no-peaks", action="store_true",
                   help="skip the peak probes (tuned launches inside each plateau)")
    p.add_argument("--no-latency", action="store_true",
                   help="skip the pointer-chase latency sweep and its sector and line probes")
    p.add_argument("--carveouts", nargs="?", const="all", metavar="all|LIST",
                   help="NVIDIA (sm_70 on): after the run, the L1 again under each shared-memory carveout the GPU "
                        "offers (all, the default) or those listed in KiB (0,32,100,228), and the unified "
                        "L1/shared array they share")
    add_check_options(p)
    return p


def sweeps_from(text: str) -> tuple[str, ...]:
    sweeps = tuple(s.strip() for s in text.split(",") if s.strip())
    if not sweeps or any(s not in ("private", "shared") for s in sweeps):
        raise InputError(f"--sweeps takes private, shared or both, got {text!r}")
    return sweeps


def options_from(args) -> api.Options:
    mws = args.max_working_set
    return api.Options(budget=args.budget, latency=not args.no_latency, peaks=not args.no_peaks,
                        timing=args.timing, sweeps=sweeps_from(args.sweeps), grid_multiplier=args.grid_multiplier,
                        max_working_set_bytes=int(mws * 2**20) if mws and mws * 2**20 < 2**62 else
                        (2**62 if mws else None), carveouts=args.carveouts)


def measure_one(args, gpu: int | None, profile: str | None, out: Path) -> dict:
    """One GPU of a node or fleet rank: measured into ``out``; returns result.json's content."""
    from detect_caches.pipeline.progress import Progress
    result = api.characterize(gpu, simulate=profile, out=out, options=options_from(args),
                          progress=Progress(args.budget, quiet=True))
    return result.data


def cmd_main(argv: list[str]) -> int:
    """`detect-caches --gpu ...` / `--simulate ...`: one GPU, a node of them, or a fleet rank."""
    from detect_caches.pipeline import node
    from detect_caches.pipeline.fleet_run import finish_fleet
    from detect_caches.pipeline.outputs import default_out
    from detect_caches.pipeline.progress import Progress
    args = main_parser().parse_args(argv)
    options = options_from(args)
    options.session()                       # bad option values fail before anything is opened
    if args.baseline is not None and not args.baseline.exists():
        raise InputError(f"{args.baseline}: no such file or folder")
    rank = node.distributed_rank()
    if rank is not None:
        return node.run_rank(args, rank, measure_one, finish_fleet)
    if args.gpu is None and args.simulate is None:
        raise InputError("say what to measure: --gpu INDEX (or all, or 0,2,5), or --simulate PROFILE")
    targets = node.node_targets(args)
    if len(targets) > 1 or (args.gpu is not None and not args.gpu.strip().isdigit()):   # all, lists
        return node.run_node(args, targets, finish_fleet)
    gpu_index, profile = targets[0]
    device = api.open_device(gpu_index, profile, args.sim_index)
    from detect_caches.pipeline.options import check_against_device
    from detect_caches.reports.baseline import BaselineSource, device_of
    check_against_device(options, device.facts)
    source = BaselineSource.load(args.baseline)          # before measuring, not after
    pick = source.pick(device_of(device.facts), force=args.force) if source else None
    if pick is not None and not args.quiet:
        say(f"detect-caches: baseline: {pick.how}", err=True)
    for line in (source.skipped[:3] + source.notes) if source and not args.quiet else []:
        say(f"detect-caches: baseline folder: {'skipped ' if line in source.skipped else ''}{line}", err=True)
    out = args.out or default_out(device.facts.name)
    result = api.characterize(device=device, out=out, options=options, baseline=pick,
                          progress=Progress(args.budget, quiet=args.quiet), force=args.force,
                          capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol,
                          latency_tol=args.latency_tol, fail_on=args.fail_on)
    return finish_run(result, args)


def cmd_analyze(argv: list[str]) -> int:
    """`detect-caches analyze CSV`: detection and reports on recorded measurements."""
    p = Parser(prog="detect-caches analyze", description="Detect levels in recorded measurements (no GPU, no torch).")
    p.add_argument("csv", type=Path, help="a measurements.csv")
    p.add_argument("--vendor", choices=("nvidia", "amd"), help="the hardware's vendor (default nvidia)")
    p.add_argument("--device-json", type=Path, help="device facts (a result.json works too)")
    p.add_argument("--out", type=Path, help="output folder (default: <csv name>-analysis beside the CSV)")
    p.add_argument("--json", action="store_true", help="print result.json to stdout")
    args = p.parse_args(argv)
    out = args.out or args.csv.with_name(args.csv.stem + "-analysis")
    result = api.analyze(args.csv, args.device_json, vendor=args.vendor, out=out)
    return finish_run(result, args)
