"""detect-caches: find a GPU's cache hierarchy from a Triton streaming-load sweep.

The thin command-line layer: parse arguments, run measure -> detector -> reports, map errors
to one line on stderr and exit code 2. `python -m detect_caches` works as well.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from measure.errors import DetectCachesError, DeviceError, InputError

PROCESS_T0 = time.perf_counter()   # import of the CLI: close to process start
EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2
SUBCOMMANDS = ("analyze", "compare", "fleet", "run", "benchmark")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise InputError(f"{message} (see {self.prog} --help)")


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def _block(text: str) -> int:
    from measure.kernel_meta import check_block_size
    value = _positive(int)(text)
    try:
        check_block_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"must be a fraction >= 0 (0.05 = 5%), got {text}")
    return value


def _add_compare_options(p: argparse.ArgumentParser) -> None:
    from reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL
    p.add_argument("--capacity-tol", type=_tolerance, default=DEFAULT_CAPACITY_TOL,
                   help=f"relative capacity change that counts as drift when the intervals do not "
                        f"overlap (default {DEFAULT_CAPACITY_TOL})")
    p.add_argument("--bandwidth-tol", type=_tolerance, default=DEFAULT_BANDWIDTH_TOL,
                   help=f"relative bandwidth change that counts as drift when the plateau spreads do "
                        f"not overlap (default {DEFAULT_BANDWIDTH_TOL})")
    p.add_argument("--force", action="store_true",
                   help="compare results of different device models anyway")


def main_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="detect-caches", description=(
        "Characterize a GPU's cache hierarchy: adaptive bandwidth sweeps, changepoint analysis, "
        "a report. Subcommands: analyze CSV, compare BASE CUR, run, benchmark (the seed's modes); "
        "`detect-caches SUBCOMMAND --help` for each."))
    src = p.add_mutually_exclusive_group()
    src.add_argument("--gpu", metavar="INDEX", help="measure this GPU; `all` or a list such as 0,2,5 "
                                                    "measures each at once and writes a node summary")
    src.add_argument("--simulate", metavar="PROFILE", help="a simulated GPU: h200, mi300x or a profile "
                                                           "JSON file; a comma list simulates a node")
    p.add_argument("--sim-index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="output folder (must not exist yet; default "
                                             "detect-caches-results/<device>-<time>)")
    p.add_argument("--baseline", type=Path, help="compare with this result.json after measuring; exit 1 on drift")
    p.add_argument("--json", action="store_true", help="print result.json to stdout instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--budget", type=_positive(int), default=400,
                   help="most kernel measurements, bandwidth and latency together (default 400)")
    p.add_argument("--grid-multiplier", type=_positive(int), default=4,
                   help="programs per SM/CU in the shared sweep (default 4, the seed's)")
    p.add_argument("--sweeps", default="private,shared", help="which sweeps to run (default private,shared)")
    p.add_argument("--max-working-set", type=_positive(float), metavar="MIB",
                   help="cap the largest working set (MiB)")
    p.add_argument("--timing", choices=("events", "device"), default="events",
                   help="events: CUDA events and the load-iteration regression (default); device: "
                        "warm-up then a timed phase read from an in-kernel clock (one wave only)")
    p.add_argument("--no-peaks", action="store_true",
                   help="skip the peak probes (tuned launches inside each plateau)")
    p.add_argument("--no-latency", action="store_true",
                   help="skip the pointer-chase latency sweep and its sector and line probes")
    _add_compare_options(p)
    return p


def _out_dir(path: Path | None, device_name: str) -> Path:
    if path is None:
        slug = "".join(ch if ch.isalnum() else "-" for ch in device_name.lower()).strip("-")
        path = Path("detect-caches-results") / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}"
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InputError(f"{path} already exists; choose another --out (results are never overwritten)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def _write_outputs(out: Path, detection, facts, *, measurements: int, elapsed: float,
                   method: dict, warnings: list[str]) -> dict:
    from reports.markdown import render_report
    from reports.plot import write_plot
    from reports.result_json import build_result, write_result
    from reports.atomic import write_text_atomic
    result = build_result(detection, facts, measurements=measurements, elapsed_s=elapsed,
                          method=method, extra_warnings=warnings)
    title = facts.name if facts.name.startswith("simulated") or not facts.simulated else f"{facts.name} (simulated)"
    write_plot(out / "bandwidth.png", detection, title)
    write_result(out / "result.json", result)
    write_text_atomic(out / "report.md", render_report(result))
    return result


def _finish(result: dict, args, out: Path) -> int:
    from reports.markdown import summary_table
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(summary_table(result))
        print(f"report: {out / 'report.md'}")
    code = EXIT_OK
    if getattr(args, "baseline", None):
        from reports.compare import check_comparable, compare_results
        from reports.result_json import read_result
        base = read_result(args.baseline)
        check_comparable(base, result, force=args.force)
        cmp = compare_results(base, result, capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol)
        print(cmp.markdown(), file=sys.stderr if args.json else sys.stdout)
        code = EXIT_DRIFT if cmp.drift else EXIT_OK
    return code


def _progress(args, total: int):
    if args.quiet:
        return None, None
    from tqdm import tqdm
    bar = tqdm(total=total, unit="pt", file=sys.stderr, desc="measuring", leave=False)

    def on_point(m):
        bar.set_postfix_str(f"{m.sweep} {m.working_set_bytes / 2**20:.2f} MiB {m.bandwidth_gbs:,.0f} GB/s")
        bar.update(1)
    return bar, on_point


def _sweeps(args) -> tuple[str, ...]:
    sweeps = tuple(s.strip() for s in args.sweeps.split(",") if s.strip())
    if not sweeps or any(s not in ("private", "shared") for s in sweeps):
        raise InputError(f"--sweeps takes private, shared or both, got {args.sweeps!r}")
    return sweeps


def _open_device(args, gpu_index: int | None, profile: str | None):
    if profile is not None:
        from measure.simulated import SimulatedGPU, load_profile
        device = SimulatedGPU(load_profile(profile))
        device.facts.index = args.sim_index if gpu_index is None else gpu_index
        return device
    from measure.gpu import TritonGPU
    return TritonGPU(gpu_index)


def characterize_one(args, device, out: Path) -> dict:
    """Sweeps, peak probes, analysis and reports for one device; returns result.json's content."""
    from measure.records import MeasurementLog
    from measure.session import (SessionOptions, characterize, measure_latency, probe_latency_lines,
                                 probe_level_peaks)
    from detector.analyze import detect_levels
    from detector.latency import attach_lines, probe_targets
    from detector.peaks import attach_peaks
    t0 = time.perf_counter()
    latency = 0 if args.no_latency else min(84, args.budget // 4)
    opts = SessionOptions(sweeps=_sweeps(args), grid_multiplier=args.grid_multiplier, budget=args.budget,
                          max_working_set_bytes=int(args.max_working_set * 2**20) if args.max_working_set else None,
                          timing=args.timing, peak_budget=0 if args.no_peaks else min(24, args.budget // 5),
                          latency_budget=latency)
    bar, on_point = _progress(args, args.budget)
    log = MeasurementLog(out / "measurements.csv")
    try:
        session = characterize(device, log, opts, on_point=on_point)
        if latency:
            measure_latency(session, device, log, opts, on_point)
        t = time.perf_counter()
        detection = detect_levels(session.records, device.facts)
        analysis_s = time.perf_counter() - t
        if opts.peak_budget:
            probe_level_peaks(session, detection.levels, log, opts, on_point)
        if latency:
            probe_latency_lines(session, probe_targets(detection.levels), log, opts, on_point)
    except KeyboardInterrupt:
        log.close()
        raise InputError(f"interrupted; the {len(log.records)} measurements taken are kept in "
                         f"{out / 'measurements.csv'} (`detect-caches analyze` reports on them)") from None
    except DetectCachesError as exc:
        log.close()
        raise type(exc)(f"{exc}; the {len(log.records)} measurements taken are kept in "
                        f"{out / 'measurements.csv'}") from None
    finally:
        if bar is not None:
            bar.close()
    log.close()
    # the peak, sector and line probes are not part of any curve: only their levels' figures change
    attach_peaks(detection.levels, session.records)
    attach_lines(detection.levels, session.records)
    session.method["timing"] = args.timing
    session.method["analysis_seconds"] = round(analysis_s, 3)
    session.method["process_seconds_before_measuring"] = round(t0 - PROCESS_T0, 3)
    return _write_outputs(out, detection, device.facts, measurements=len(session.records),
                          elapsed=time.perf_counter() - t0, method=session.method,
                          warnings=session.warnings)


def cmd_main(argv: list[str]) -> int:
    from measure import fleet
    args = main_parser().parse_args(argv)
    _sweeps(args)
    if args.baseline is not None:
        from reports.result_json import read_result
        read_result(args.baseline)   # fail before measuring, not after
    rank = fleet.distributed_rank()
    if rank is not None:
        return fleet.run_rank(args, rank, characterize_one, _open_device, _finish_fleet)
    if args.gpu is None and args.simulate is None:
        raise InputError("say what to measure: --gpu INDEX (or all, or 0,2,5), or --simulate PROFILE")
    targets = fleet.node_targets(args)
    if len(targets) > 1 or (args.gpu is not None and not args.gpu.strip().isdigit()):   # all, lists
        return fleet.run_node(args, targets, _finish_fleet)
    gpu_index, profile = targets[0]
    if gpu_index is not None and gpu_index < 0:
        raise InputError(f"--gpu takes an index >= 0, got {gpu_index}")
    device = _open_device(args, gpu_index, profile)
    out = _out_dir(args.out, device.facts.name)
    return _finish(characterize_one(args, device, out), args, out)


def _finish_fleet(results: list[dict], args, out: Path, failed: list[str], *, same_time: bool = False) -> int:
    """Fleet report over ``results`` into ``out`` (fleet.md, fleet.json); exit 1 on outliers."""
    from reports.atomic import write_text_atomic
    from reports.fleet import SAME_TIME_CONTEXT, build_fleet_report
    if not results:
        raise DeviceError("no GPU produced a result: " + "; ".join(failed))
    from reports.result_json import read_result
    baseline = read_result(args.baseline) if getattr(args, "baseline", None) else None
    report = build_fleet_report(results, capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol,
                                failed=failed, context=SAME_TIME_CONTEXT if same_time else "",
                                baseline=baseline)
    if getattr(args, "json", False):
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.markdown())
    if out is not None:
        write_text_atomic(out / "fleet.md", report.markdown())
        write_text_atomic(out / "fleet.json", json.dumps(report.to_dict(), indent=2) + "\n")
        print(f"fleet report: {out / 'fleet.md'}", file=sys.stderr if getattr(args, "json", False) else sys.stdout)
    if failed:
        return EXIT_ERROR
    return EXIT_DRIFT if report.drift else EXIT_OK


def cmd_analyze(argv: list[str]) -> int:
    p = _Parser(prog="detect-caches analyze", description="Detect levels in recorded measurements (no GPU, no torch).")
    p.add_argument("csv", type=Path, help="a measurements.csv")
    p.add_argument("--vendor", choices=("nvidia", "amd"), help="the hardware's vendor (default nvidia)")
    p.add_argument("--device-json", type=Path, help="device facts (a result.json works too)")
    p.add_argument("--out", type=Path, help="output folder (default: <csv name>-analysis beside the CSV)")
    p.add_argument("--json", action="store_true", help="print result.json to stdout")
    args = p.parse_args(argv)
    from measure.device import DeviceFacts, load_device_json
    from measure.reader import read_measurements
    from detector.analyze import detect_levels
    t0 = time.perf_counter()
    records = read_measurements(args.csv)
    facts = load_device_json(args.device_json) if args.device_json else DeviceFacts(name=args.csv.stem)
    if args.vendor:
        facts.vendor = args.vendor
    detection = detect_levels(records, facts)
    out = _out_dir(args.out or args.csv.with_name(args.csv.stem + "-analysis"), facts.name)
    result = _write_outputs(out, detection, facts, measurements=len(records),
                            elapsed=time.perf_counter() - t0, method={"source": str(args.csv)}, warnings=[])
    return _finish(result, args, out)


def cmd_compare(argv: list[str]) -> int:
    p = _Parser(prog="detect-caches compare", description=(
        "Regression check between two result.json files: a Markdown table on stdout; exit 0 if "
        "within tolerance, 1 on drift, 2 on bad input."))
    p.add_argument("baseline", type=Path)
    p.add_argument("current", type=Path)
    _add_compare_options(p)
    args = p.parse_args(argv)
    from reports.compare import check_comparable, compare_results
    from reports.result_json import read_result
    base, cur = read_result(args.baseline), read_result(args.current)
    check_comparable(base, cur, force=args.force)
    cmp = compare_results(base, cur, capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol)
    print(cmp.markdown())
    return EXIT_DRIFT if cmp.drift else EXIT_OK


def cmd_fleet(argv: list[str]) -> int:
    p = _Parser(prog="detect-caches fleet", description=(
        "Fleet report from result.json files of GPUs of one model: the table, the fleet median, the "
        "outliers; exit 0 if none, 1 if any, 2 on bad input."))
    p.add_argument("results", type=Path, nargs="+", help="result.json files (one per GPU)")
    p.add_argument("--out", type=Path, help="also write fleet.md and fleet.json into this new folder")
    p.add_argument("--baseline", type=Path, help="also compare every GPU with this result.json")
    _add_compare_options(p)
    args = p.parse_args(argv)
    from reports.result_json import read_result
    results = [read_result(path) for path in args.results]
    for path, res in zip(args.results, results):
        if not res["device"].get("host"):   # results from before hosts were recorded
            res["device"]["host"] = str(path.parent)
    if args.baseline is not None:
        read_result(args.baseline)
    out = _out_dir(args.out, "fleet") if args.out else None
    return _finish_fleet(results, args, out, [])


def _seed_parser(prog: str, desc: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description=desc)
    p.add_argument("--gpu", type=int, default=0, help="GPU index (default 0)")
    p.add_argument("--simulate", metavar="PROFILE", help="run against a simulated GPU instead")
    p.add_argument("--block-size", type=_block, default=1024)
    p.add_argument("--num-warps", type=_positive(int), default=4)
    p.add_argument("--num-stages", type=_positive(int), default=1)
    p.add_argument("--num-cu", type=_positive(int), help="SMs/CUs used to size the grid (default: the device's)")
    p.add_argument("--grid-multiplier", type=_positive(int), default=4)
    p.add_argument("--num-repeat", type=_positive(int), default=20)
    p.add_argument("--load-flavour", choices=("volatile", "cached", "l2only"), default="volatile",
                   help="volatile is the seed's (it skips L1 on NVIDIA)")
    return p


def _seed_device(args):
    if args.simulate:
        from measure.simulated import SimulatedGPU, load_profile
        return SimulatedGPU(load_profile(args.simulate))
    from measure.gpu import TritonGPU
    return TritonGPU(args.gpu)


def cmd_run(argv: list[str]) -> int:
    p = _seed_parser("detect-caches run", "The seed's single configuration.")
    p.add_argument("--stream-elements", type=_positive(int), default=1024)
    p.add_argument("--load-iterations", type=_positive(int), default=10)
    args = p.parse_args(argv)
    if args.stream_elements % 256:
        raise InputError(f"--stream-elements must be a multiple of 256 (1 KiB), got {args.stream_elements}")
    from measure.launch import LaunchConfig
    from measure.seed import measure_seed_point
    device = _seed_device(args)
    cus = args.num_cu or device.facts.compute_units
    cfg = LaunchConfig("shared", cus * args.grid_multiplier, args.block_size, args.num_warps,
                       args.num_stages, args.load_flavour)
    iters = sorted({max(1, args.load_iterations * k // 4) for k in (1, 2, 3, 4)})
    if len(iters) < 2:
        iters = [args.load_iterations, 2 * args.load_iterations]
    pt = measure_seed_point(device, cfg, args.stream_elements, iters, args.num_repeat)
    print(f"grids={cfg.programs} stream_elems={args.stream_elements} block={cfg.block_size} "
          f"warps={cfg.num_warps} flavour={cfg.load_flavour}")
    for it, ms in zip(pt.load_iters, pt.avg_ms):
        print(f"load_iters={it:<6d} avg_ms={ms:.5f}")
    print(f"slope_ms={pt.slope_ms:.6f} intercept_ms={pt.intercept_ms:.6f} r2={pt.r2:.6f} "
          f"bandwidth={pt.bandwidth_gbs:,.1f} GB/s")
    return EXIT_OK


def cmd_benchmark(argv: list[str]) -> int:
    p = _seed_parser("detect-caches benchmark", "The seed's fixed sweep; CSVs under --results-dir.")
    p.add_argument("--test-name", default="bw_test")
    p.add_argument("--results-dir", type=Path, default=Path("results"))
    args = p.parse_args(argv)
    from measure.launch import LaunchConfig
    from measure.seed import run_benchmark
    device = _seed_device(args)
    cus = args.num_cu or device.facts.compute_units
    cfg = LaunchConfig("shared", cus * args.grid_multiplier, args.block_size, args.num_warps,
                       args.num_stages, args.load_flavour)

    def show(pt):
        print(f"stream_elems={pt.stream_elems:<9d} bandwidth={pt.bandwidth_gbs:>10,.1f} GB/s r2={pt.r2:.5f}",
              file=sys.stderr)
    details, summary = run_benchmark(device, cfg, args.test_name, args.results_dir,
                                     num_repeat=args.num_repeat, on_point=show)
    print(f"details: {details}\nsummary: {summary}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    handlers = {"analyze": cmd_analyze, "compare": cmd_compare, "fleet": cmd_fleet, "run": cmd_run,
                "benchmark": cmd_benchmark}
    try:
        if argv and argv[0] in handlers:
            return handlers[argv[0]](argv[1:])
        return cmd_main(argv)
    except DetectCachesError as exc:
        print(f"detect-caches: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("detect-caches: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
