"""The main job's command line (`detect-caches --gpu 0`, `--simulate`, `--gpu all`, a torchrun
rank) and `analyze`: arguments in, the API's characterize and analyze called, the result printed
and its exit code (detect_caches.cli dispatches here)."""
from __future__ import annotations

from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.pipeline import api
from detect_caches.pipeline.commands import finish_run
from detect_caches.pipeline.console import say


def sweeps_from(text: str) -> tuple[str, ...]:
    sweeps = tuple(s.strip() for s in text.split(",") if s.strip())
    if not sweeps or any(s not in ("private", "shared") for s in sweeps) or len(set(sweeps)) < len(sweeps):
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


def cmd_main(args) -> int:
    """`detect-caches --gpu ...` / `--simulate ...`: one GPU, a node of them, or a fleet rank."""
    from detect_caches.pipeline import node
    from detect_caches.pipeline.fleet_run import finish_fleet
    from detect_caches.pipeline.outputs import default_out
    from detect_caches.pipeline.progress import Progress
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


def cmd_analyze(args) -> int:
    """`detect-caches analyze CSV`: detection and reports on recorded measurements."""
    out = args.out or args.csv.with_name(args.csv.stem + "-analysis")
    result = api.analyze(args.csv, args.device_json, vendor=args.vendor, out=out)
    return finish_run(result, args)
