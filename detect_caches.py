"""detect-caches: find a GPU's cache hierarchy from Triton bandwidth and latency sweeps.

The thin command-line layer: parse arguments, call the pipeline (the same code the Python API
runs: `from detect_caches import characterize, analyze, compare`), map errors to one line on
stderr and exit code 2. Exit 1 means drift, only: any failure is 2, an unexpected one with its
traceback saved to a file named on stderr. `python -m detect_caches` works as well.
"""
from __future__ import annotations

import time

PROCESS_T0 = time.perf_counter()   # import of the CLI: close to process start

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

from measure.errors import DetectCachesError, DeviceError, InputError  # noqa: E402
from pipeline import api as _api  # noqa: E402
from pipeline.api import Result, analyze, characterize, compare  # noqa: E402,F401  (the Python API)

_api.T0 = PROCESS_T0
EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2
__all__ = ["characterize", "analyze", "compare", "Result", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise InputError(f"{message} (see {self.prog} --help)")


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (value > 0 and value < float("inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
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
        raise argparse.ArgumentTypeError(f"must be a fraction >= 0 (0.03 = 3%), got {text}")
    return value


def _add_compare_options(p: argparse.ArgumentParser) -> None:
    from reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL
    p.add_argument("--capacity-tol", type=_tolerance, default=DEFAULT_CAPACITY_TOL,
                   help=f"relative capacity change that counts as drift, when the runs' repeatabilities do "
                        f"not explain it (default {DEFAULT_CAPACITY_TOL})")
    p.add_argument("--bandwidth-tol", type=_tolerance, default=DEFAULT_BANDWIDTH_TOL,
                   help=f"relative bandwidth change that counts as drift, likewise (default {DEFAULT_BANDWIDTH_TOL})")
    p.add_argument("--force", action="store_true", help="compare results of different device models anyway")


def main_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="detect-caches", description=(
        "Characterize a GPU's cache hierarchy: adaptive bandwidth and latency sweeps, changepoint "
        "analysis, a report. Subcommands: analyze CSV, compare BASE CUR, history RESULTS..., fleet "
        "RESULTS..., run, benchmark (the seed's modes); `detect-caches SUBCOMMAND --help` for each."))
    src = p.add_mutually_exclusive_group()
    src.add_argument("--gpu", metavar="INDEX", help="measure this GPU; `all` or a list such as 0,2,5 "
                                                    "measures each at once and writes a node summary")
    src.add_argument("--simulate", metavar="PROFILE", help="a simulated GPU: h200, mi300x, a100, h100, v100, a40, "
                                                           "l40, mi100, mi210, rx6900xt or a profile JSON file; a "
                                                           "comma list simulates a node")
    p.add_argument("--sim-index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="output folder (must not exist yet, or be empty; default "
                                             "detect-caches-results/<device>-<time>)")
    p.add_argument("--baseline", type=Path, help="compare with this result.json, or with the latest earlier run of "
                                                  "the same GPU in this folder, after measuring; exit 1 on drift")
    p.add_argument("--json", action="store_true", help="print result.json to stdout instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.add_argument("--budget", type=_positive(int), default=400,
                   help="most kernel measurements, bandwidth and latency together (default 400)")
    p.add_argument("--grid-multiplier", type=_positive(int), default=4,
                   help="programs per SM/CU in the shared sweep (default 4, the seed's)")
    p.add_argument("--sweeps", default="private,shared", help="which sweeps to run (default private,shared)")
    p.add_argument("--max-working-set", type=_positive(float), metavar="MIB",
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
    _add_compare_options(p)
    return p


def _sweeps(text: str) -> tuple[str, ...]:
    sweeps = tuple(s.strip() for s in text.split(",") if s.strip())
    if not sweeps or any(s not in ("private", "shared") for s in sweeps):
        raise InputError(f"--sweeps takes private, shared or both, got {text!r}")
    return sweeps


def _options(args) -> "_api.Options":
    return _api.Options(budget=args.budget, latency=not args.no_latency, peaks=not args.no_peaks,
                        timing=args.timing, sweeps=_sweeps(args.sweeps), grid_multiplier=args.grid_multiplier,
                        max_working_set_bytes=int(args.max_working_set * 2**20) if args.max_working_set else None,
                        carveouts=args.carveouts)


def _print(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    if stream is not None:
        print(text, file=stream)


def _finish(result: Result, args) -> int:
    from reports.markdown import summary_table
    if args.json:
        _print(result.to_json().rstrip("\n"))
    else:
        _print(summary_table(result.data))
        if result.out:
            _print(f"report: {result.out / 'report.md'}")
    cmp = result.data.get("comparison")
    if cmp is None:
        return EXIT_OK
    _print(cmp["markdown"], err=args.json)
    return EXIT_DRIFT if cmp["drift"] else EXIT_OK


def measure_one(args, gpu: int | None, profile: str | None, out: Path) -> dict:
    """One GPU of a node or fleet rank: measured into ``out``; returns result.json's content."""
    from pipeline.progress import Progress
    result = characterize(gpu, simulate=profile, out=out, options=_options(args),
                          progress=Progress(args.budget, quiet=True))
    return result.data


def cmd_main(argv: list[str]) -> int:
    from pipeline import node
    from pipeline.outputs import default_out
    from pipeline.progress import Progress
    args = main_parser().parse_args(argv)
    options = _options(args)
    options.session()                       # bad option values fail before anything is opened
    if args.baseline is not None and not args.baseline.exists():
        raise InputError(f"{args.baseline}: no such file or folder")
    rank = node.distributed_rank()
    if rank is not None:
        return node.run_rank(args, rank, measure_one, _finish_fleet)
    if args.gpu is None and args.simulate is None:
        raise InputError("say what to measure: --gpu INDEX (or all, or 0,2,5), or --simulate PROFILE")
    targets = node.node_targets(args)
    if len(targets) > 1 or (args.gpu is not None and not args.gpu.strip().isdigit()):   # all, lists
        return node.run_node(args, targets, _finish_fleet)
    gpu_index, profile = targets[0]
    device = _api.open_device(gpu_index, profile, args.sim_index)
    baseline = _api.resolve_baseline(args.baseline, device.facts)   # before measuring, not after
    out = args.out or default_out(device.facts.name)
    result = characterize(device=device, out=out, options=options, baseline=baseline,
                          progress=Progress(args.budget, quiet=args.quiet),
                          capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol)
    return _finish(result, args)


def _finish_fleet(results: list[dict], args, out: Path | None, failed: list[str], *, same_time: bool = False) -> int:
    """Fleet report over ``results`` into ``out`` (fleet.md, fleet.json, fleet.csv, fleet.png);
    exit 1 on outliers."""
    from reports.atomic import write_text_atomic
    from reports.fleet import SAME_TIME_CONTEXT, build_fleet_report
    from reports.result_json import dumps, read_result
    if not results:
        raise DeviceError("no GPU produced a result: " + "; ".join(failed))
    baseline = read_result(args.baseline) if getattr(args, "baseline", None) else None
    report = build_fleet_report(results, capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol,
                                failed=failed, context=SAME_TIME_CONTEXT if same_time else "", baseline=baseline)
    if getattr(args, "json", False):
        _print(dumps(report.to_dict()).rstrip("\n"))
    else:
        _print(report.markdown())
    if out is not None:
        from reports.fleet_plot import write_fleet_plot
        write_text_atomic(out / "fleet.md", report.markdown())
        write_text_atomic(out / "fleet.json", dumps(report.to_dict()))
        write_text_atomic(out / "fleet.csv", report.csv())
        write_fleet_plot(out / "fleet.png", report)
        _print(f"fleet report: {out / 'fleet.md'}", err=getattr(args, "json", False))
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
    out = args.out or args.csv.with_name(args.csv.stem + "-analysis")
    result = analyze(args.csv, args.device_json, vendor=args.vendor, out=out)
    return _finish(result, args)


def cmd_compare(argv: list[str]) -> int:
    p = _Parser(prog="detect-caches compare", description=(
        "Regression check between two result.json files: a Markdown table on stdout; exit 0 if "
        "within tolerance and repeatability, 1 on drift, 2 on bad input."))
    p.add_argument("baseline", type=Path)
    p.add_argument("current", type=Path)
    _add_compare_options(p)
    args = p.parse_args(argv)
    cmp = compare(args.baseline, args.current, capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol,
                  force=args.force)
    _print(cmp.markdown().rstrip("\n"))
    return EXIT_DRIFT if cmp.drift else EXIT_OK


def cmd_history(argv: list[str]) -> int:
    p = _Parser(prog="detect-caches history", description=(
        "The runs of each GPU model in time order (folders searched for result.json): a Markdown "
        "table and a plot per level; exit 1 when the newest run of any GPU drifts from its previous run."))
    p.add_argument("paths", type=Path, nargs="+", help="result.json files or folders of runs")
    p.add_argument("--out", type=Path, help="write history.md and history.png into this new folder")
    _add_compare_options(p)
    args = p.parse_args(argv)
    from reports.history import build_history, write_history_plot
    history = build_history(args.paths, capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol)
    text = history.markdown()
    _print(text.rstrip("\n"))
    if args.out:
        from pipeline.outputs import claim_out_dir, release
        from reports.atomic import write_text_atomic
        out = claim_out_dir(args.out)
        try:
            write_text_atomic(out / "history.md", text)
            write_history_plot(out / "history.png", history)
        finally:
            release(out)
        _print(f"history: {out / 'history.md'}", err=True)
    return EXIT_DRIFT if history.drift else EXIT_OK


def cmd_fleet(argv: list[str]) -> int:
    p = _Parser(prog="detect-caches fleet", description=(
        "Fleet report from result.json files of GPUs of one model: outliers first, each level's "
        "distribution, the full table (fleet.csv); exit 0 if no outliers, 1 if any, 2 on bad input."))
    p.add_argument("results", type=Path, nargs="+", help="result.json files (one per GPU), or folders of them")
    p.add_argument("--out", type=Path, help="also write fleet.md, fleet.json, fleet.csv and fleet.png into this new folder")
    p.add_argument("--baseline", type=Path, help="also compare every GPU with this result.json")
    p.add_argument("--json", action="store_true", help="print fleet.json to stdout")
    _add_compare_options(p)
    args = p.parse_args(argv)
    from reports.history import find_results
    from reports.result_json import read_result
    skipped: list[str] = []
    found = find_results(args.results, skipped)
    for line in skipped[:5]:
        _print(f"detect-caches: skipped {line}", err=True)
    if len(skipped) > 5:
        _print(f"detect-caches: ... and {len(skipped) - 5} more result.json files that could not be read", err=True)
    results = [res for _, res in found]
    for path, res in found:
        if not res["device"].get("host"):   # results from before hosts were recorded
            res["device"]["host"] = str(path.parent)
    if args.baseline is not None:
        read_result(args.baseline)
    out = None
    if args.out:
        from pipeline.outputs import claim_out_dir
        out = claim_out_dir(args.out)
    try:
        # an unreadable result is a GPU the report cannot speak for: listed, and exit 2, as in a node run
        return _finish_fleet(results, args, out, [f"unreadable {line}" for line in skipped])
    finally:
        if out is not None:
            from pipeline.outputs import release
            release(out)


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


def _save_traceback(exc: BaseException) -> str:
    """The full traceback of an unexpected failure, in a file; returns its path."""
    fd, path = tempfile.mkstemp(prefix="detect-caches-error-", suffix=".log")
    with os.fdopen(fd, "w") as fh:
        fh.write(f"detect-caches {sys.argv[1:]!r}\n")
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
    return path


def _run(argv: list[str]) -> int:
    handlers = {"analyze": cmd_analyze, "compare": cmd_compare, "fleet": cmd_fleet, "history": cmd_history,
                "run": cmd_run, "benchmark": cmd_benchmark}
    if argv and argv[0] in handlers:
        return handlers[argv[0]](argv[1:])
    return cmd_main(argv)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 ok, 1 drift (and nothing else), 2 any failure, with one line on stderr."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:   # SIGTERM (a batch system's time limit, a node run stopping) ends a run as Ctrl-C does:
        signal.signal(signal.SIGTERM, _interrupt)   # what was measured is kept and named
    except ValueError:    # not the main thread (the Python API): leave signals alone
        pass
    try:
        code = _run(argv)
        if sys.stdout is not None:
            sys.stdout.flush()            # a full disk under stdout fails here, not at exit
        return code
    except DetectCachesError as exc:
        _print(f"detect-caches: error: {exc}", err=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        _print("detect-caches: interrupted", err=True)
        return EXIT_ERROR
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, AttributeError, ValueError):
            pass
        return EXIT_ERROR
    except OSError as exc:                 # a full disk, a closed stream, a vanished folder
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _print(f"detect-caches: error: {exc.strerror or exc}{where}", err=True)
        try:
            if sys.stdout is not None:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_ERROR
    except Exception as exc:               # never a traceback on the terminal, never exit 1
        try:
            saved = _save_traceback(exc)
        except OSError:
            saved = "nowhere: no temporary folder"
        _print(f"detect-caches: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
               f"(traceback saved in {saved}; please report it)", err=True)
        return EXIT_ERROR


def cli() -> None:
    """The console entry point: ``main``, then a quick exit. Everything is written and closed by
    then (files atomically, the measurements CSV synced); what is left is tearing down the CUDA
    context, Triton and the interpreter, 0.3 s and more after a GPU run, that a user waits on.
    Before anything heavy is imported, bytecode of modules Python keeps none of gets a cache
    (pipeline/bytecode.py: about 2 s of torch's import on hosts installed without it)."""
    from pipeline import bytecode
    bytecode.install()
    code = main()
    bytecode.flush()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):   # a full disk under stdout: the output is lost, say so
            if stream is sys.stdout and code == 0:
                code = EXIT_ERROR
    os._exit(code)


if __name__ == "__main__":
    cli()
