"""detect-caches: find a GPU's cache hierarchy from Triton bandwidth and latency sweeps.

The thin command-line layer: parse arguments, call the pipeline (the same code the Python API
runs: `from detect_caches import characterize, analyze, compare`), map errors to one line on
stderr and exit code 2. Exit 1 means drift, only: any failure is 2, an unexpected one with its
traceback saved to a file named on stderr. `python -m detect_caches` works as well.
"""
from __future__ import annotations

import os
import signal
import sys
import time

PROCESS_T0 = time.perf_counter()   # import of the CLI: close to process start
AS_CLI = __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "detect-caches"


def _early_exit(signum, frame):
    """Ctrl-C or SIGTERM before main() takes over (imports): one line, exit 2, no traceback."""
    try:
        os.write(2, b"detect-caches: interrupted\n")
    finally:
        os._exit(2)


def _own_modules_first() -> None:
    """`python -m` puts the working folder first on sys.path: a user's reports.py or pipeline/
    there would shadow this tool's own modules. The working folder goes last (unless it is where
    this file lives)."""
    here = os.path.dirname(os.path.abspath(__file__))
    cwd = os.getcwd()
    if here == cwd:
        return
    local = [p for p in sys.path if p in ("", ".") or os.path.abspath(p) == cwd]
    sys.path[:] = [p for p in sys.path if p not in local] + local


if AS_CLI:
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, _early_exit)
    _own_modules_first()

import argparse  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

try:
    from measure.errors import DetectCachesError, DeviceError, InputError  # noqa: E402
    from pipeline import api as _api  # noqa: E402
    from pipeline.api import Result, analyze, characterize, compare  # noqa: E402,F401  (the Python API)
    from pipeline.console import say as _print  # noqa: E402
except ImportError as _exc:           # a broken install: one line and exit 2, not a traceback and 1
    if not AS_CLI:
        raise
    sys.stderr.write(f"detect-caches: error: cannot import {_exc.name or 'a module'} ({_exc}); reinstall "
                     f"detect-caches\n")
    sys.stderr.flush()
    os._exit(2)

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


def _add_compare_options(p: argparse.ArgumentParser) -> None:
    from pipeline.commands import add_check_options
    add_check_options(p)


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
    p.add_argument("--baseline", type=Path, help="compare with this result.json, or with each GPU's latest earlier "
                                                  "run in this folder (checked before measuring); exit 1 on drift")
    p.add_argument("--accept-incomplete", action="store_true",
                   help="accept a result with doubts (a level missing, a sweep the budget cut short, a level of "
                        "low confidence): exit 0 or 1 instead of 2")
    p.add_argument("--json", action="store_true", help="print result.json to stdout instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.add_argument("--budget", type=_positive(int), default=400,
                   help="most kernel measurements, bandwidth and latency together (default 400, at least 60)")
    p.add_argument("--grid-multiplier", type=_positive(int), default=4,
                   help="programs per SM/CU in the shared sweep (default 4, the seed's; at most 64)")
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
    _add_compare_options(p)
    return p


def _sweeps(text: str) -> tuple[str, ...]:
    sweeps = tuple(s.strip() for s in text.split(",") if s.strip())
    if not sweeps or any(s not in ("private", "shared") for s in sweeps):
        raise InputError(f"--sweeps takes private, shared or both, got {text!r}")
    return sweeps


def _options(args) -> "_api.Options":
    mws = args.max_working_set
    return _api.Options(budget=args.budget, latency=not args.no_latency, peaks=not args.no_peaks,
                        timing=args.timing, sweeps=_sweeps(args.sweeps), grid_multiplier=args.grid_multiplier,
                        max_working_set_bytes=int(mws * 2**20) if mws and mws * 2**20 < 2**62 else
                        (2**62 if mws else None))


def _finish(result: Result, args) -> int:
    """Print the result (its files are written already), its comparison, its doubts; the code."""
    from reports.markdown import summary_table
    if args.json:
        _print(result.to_json().rstrip("\n"))
    else:
        _print(summary_table(result.data))
        if result.out:
            _print(f"report: {result.out / 'report.md'}")
    cmp = result.data.get("comparison")
    if cmp is not None:
        _print(cmp["markdown"], err=args.json)
    doubts = result.data.get("doubts") or []
    for doubt in doubts:
        _print(f"detect-caches: doubt: {doubt}", err=True)
    if doubts and not getattr(args, "accept_incomplete", False):
        where = f" (the files are in {result.out})" if result.out else ""
        raise InputError(f"result incomplete: {len(doubts)} doubt(s) above{where}; --accept-incomplete "
                         f"accepts it")
    if cmp is None:
        return EXIT_OK
    return EXIT_DRIFT if cmp["failed"] else EXIT_OK


def measure_one(args, gpu: int | None, profile: str | None, out: Path) -> dict:
    """One GPU of a node or fleet rank: measured into ``out``; returns result.json's content."""
    from pipeline.progress import Progress
    result = characterize(gpu, simulate=profile, out=out, options=_options(args),
                          progress=Progress(args.budget, quiet=True))
    return result.data


def cmd_main(argv: list[str]) -> int:
    from pipeline import node
    from pipeline.fleet_run import finish_fleet
    from pipeline.outputs import default_out
    from pipeline.progress import Progress
    args = main_parser().parse_args(argv)
    options = _options(args)
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
    device = _api.open_device(gpu_index, profile, args.sim_index)
    from pipeline.options import check_against_device
    from reports.baseline import BaselineSource, device_of
    check_against_device(options, device.facts)
    source = BaselineSource.load(args.baseline)          # before measuring, not after
    pick = source.pick(device_of(device.facts), force=args.force) if source else None
    if pick is not None and not args.quiet:
        _print(f"detect-caches: baseline: {pick.how}", err=True)
    for line in (source.skipped[:3] + source.notes) if source and not args.quiet else []:
        _print(f"detect-caches: baseline folder: {'skipped ' if line in source.skipped else ''}{line}", err=True)
    out = args.out or default_out(device.facts.name)
    result = characterize(device=device, out=out, options=options, baseline=pick,
                          progress=Progress(args.budget, quiet=args.quiet), force=args.force,
                          capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol,
                          latency_tol=args.latency_tol, fail_on=args.fail_on)
    return _finish(result, args)


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
    from pipeline.commands import cmd_compare as run
    return run(argv, _Parser)


def cmd_history(argv: list[str]) -> int:
    from pipeline.commands import cmd_history as run
    return run(argv, _Parser)


def cmd_fleet(argv: list[str]) -> int:
    from pipeline.commands import cmd_fleet as run
    return run(argv, _Parser)


def _bounded(hi: int):
    """A whole number from 1 to ``hi`` (a size-like option of the seed's modes)."""
    def parse(text: str) -> int:
        value = _positive(int)(text)
        if value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi}, got {text}")
        return value
    return parse


def _seed_parser(prog: str, desc: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description=desc)
    p.add_argument("--gpu", type=_bounded(1 << 16), default=0, help="GPU index (default 0)")
    p.add_argument("--simulate", metavar="PROFILE", help="run against a simulated GPU instead")
    p.add_argument("--block-size", type=_block, default=1024)
    p.add_argument("--num-warps", type=_bounded(32), default=4)
    p.add_argument("--num-stages", type=_bounded(8), default=1)
    p.add_argument("--num-cu", type=_bounded(100_000), help="SMs/CUs used to size the grid (default: the device's)")
    p.add_argument("--grid-multiplier", type=_bounded(64), default=4)
    p.add_argument("--num-repeat", type=_bounded(10_000), default=20)
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
    p.add_argument("--stream-elements", type=_bounded(1 << 34), default=1024)
    p.add_argument("--load-iterations", type=_bounded(1_000_000), default=10)
    args = p.parse_args(argv)
    if args.stream_elements % 256:
        raise InputError(f"--stream-elements must be a multiple of 256 (1 KiB), got {args.stream_elements}")
    from measure.launch import LaunchConfig
    from measure.seed import measure_seed_point
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
    if len(iters) < 2:
        iters = [args.load_iterations, 2 * args.load_iterations]
    pt = measure_seed_point(device, cfg, args.stream_elements, iters, args.num_repeat)
    _print(f"grids={cfg.programs} stream_elems={args.stream_elements} block={cfg.block_size} "
           f"warps={cfg.num_warps} flavour={cfg.load_flavour}")
    for it, ms in zip(pt.load_iters, pt.avg_ms):
        _print(f"load_iters={it:<6d} avg_ms={ms:.5f}")
    _print(f"slope_ms={pt.slope_ms:.6f} intercept_ms={pt.intercept_ms:.6f} r2={pt.r2:.6f} "
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
        _print(f"stream_elems={pt.stream_elems:<9d} bandwidth={pt.bandwidth_gbs:>10,.1f} GB/s r2={pt.r2:.5f}",
               err=True)
    details, summary = run_benchmark(device, cfg, args.test_name, args.results_dir,
                                     num_repeat=args.num_repeat, on_point=show)
    _print(f"details: {details}\nsummary: {summary}")
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
    from pipeline import console
    argv = list(sys.argv[1:] if argv is None else argv)
    try:   # SIGTERM (a batch system's time limit, a node run stopping) ends a run as Ctrl-C does:
        signal.signal(signal.SIGTERM, _interrupt)   # what was measured is kept and named
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:    # not the main thread (the Python API): leave signals alone
        pass
    try:
        code = _run(argv)
        console.flush_stdout()            # a full disk under stdout fails here, not at exit
        return code
    except DetectCachesError as exc:
        _print(f"detect-caches: error: {exc}", err=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        _print("detect-caches: interrupted", err=True)
        return EXIT_ERROR
    except BrokenPipeError:               # a closed stdout the printing did not see: say so
        console.close_stdout()
        _print("detect-caches: error: stdout was closed before the output was complete", err=True)
        return EXIT_ERROR
    except OSError as exc:                 # a full disk, a closed stream, a vanished folder
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _print(f"detect-caches: error: {exc.strerror or exc}{where}", err=True)
        console.close_stdout()
        return EXIT_ERROR
    except ImportError as exc:             # a module of this tool shadowed or missing
        _print(f"detect-caches: error: cannot import {exc.name or 'a module'} ({exc}): is a file or folder of "
               f"that name in the working folder or on PYTHONPATH?", err=True)
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
    from pipeline import bytecode, console
    console.prepare()
    bytecode.install()
    code = main()
    bytecode.flush()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:         # the reader went away: the verdict stands
            pass
        except (OSError, ValueError):   # a full disk under stdout: the output is lost, say so
            if stream is sys.stdout and code == 0:
                code = EXIT_ERROR
    os._exit(code)


if __name__ == "__main__":
    cli()
