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
    from measure.errors import DetectCachesError, DeviceError, InputError  # noqa: E402,F401  (DeviceError: API)
    from pipeline import api as _api  # noqa: E402
    from pipeline.api import Result, analyze, characterize, compare  # noqa: E402,F401  (the Python API)
    from pipeline.cli_args import Parser as _Parser, positive as _positive  # noqa: E402
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
__all__ = ["characterize", "analyze", "compare", "Result", "DetectCachesError", "InputError", "DeviceError", "main"]


def main_parser() -> argparse.ArgumentParser:
    """The whole command line: the main job's options and a subparser per command."""
    from pipeline.cli_parser import build_parser
    return build_parser()


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
                        (2**62 if mws else None), carveouts=args.carveouts)


def _finish(result: Result, args) -> int:
    from pipeline.commands import finish_run
    return finish_run(result, args)


def measure_one(args, gpu: int | None, profile: str | None, out: Path) -> dict:
    """One GPU of a node or fleet rank: measured into ``out``; returns result.json's content."""
    from pipeline.progress import Progress
    result = characterize(gpu, simulate=profile, out=out, options=_options(args),
                          progress=Progress(args.budget, quiet=True))
    return result.data


def cmd_main(args) -> int:
    from pipeline import node
    from pipeline.fleet_run import finish_fleet
    from pipeline.outputs import default_out
    from pipeline.progress import Progress
    if isinstance(args, list):
        args = main_parser().parse_args(args)
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


def cmd_analyze(args) -> int:
    out = args.out or args.csv.with_name(args.csv.stem + "-analysis")
    result = analyze(args.csv, args.device_json, vendor=args.vendor, out=out)
    return _finish(result, args)


def cmd_compare(args) -> int:
    from pipeline.commands import cmd_compare as run
    return run(args)


def cmd_history(args) -> int:
    from pipeline.commands import cmd_history as run
    return run(args)


def cmd_fleet(args) -> int:
    from pipeline.commands import cmd_fleet as run
    return run(args)


def cmd_run(args) -> int:
    from pipeline.seed_cli import cmd_run as run
    return run(args)


def cmd_benchmark(args) -> int:
    from pipeline.seed_cli import cmd_benchmark as run
    return run(args)


def _save_traceback(exc: BaseException) -> str:
    """The full traceback of an unexpected failure, in a file; returns its path."""
    fd, path = tempfile.mkstemp(prefix="detect-caches-error-", suffix=".log")
    with os.fdopen(fd, "w") as fh:
        fh.write(f"detect-caches {sys.argv[1:]!r}\n")
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
    return path


def _run(argv: list[str]) -> int:
    from pipeline.cli_log import setup_logging
    args = main_parser().parse_args(argv)
    setup_logging(args.verbose)
    if args.command is None:
        return cmd_main(args)
    if args.command not in ("run", "benchmark") and (args.gpu is not None or args.simulate is not None):
        raise InputError(f"--gpu and --simulate belong to the main job, not to `{args.command}` "
                         f"(see detect-caches {args.command} --help)")
    return globals()[f"cmd_{args.command}"](args)    # looked up here: tests replace a handler


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 ok, 1 drift (and nothing else), 2 any failure, with one line on stderr."""
    from pipeline import console
    from pipeline.outputs import CLI
    argv = list(sys.argv[1:] if argv is None else argv)
    cli_words = CLI.set(True)            # errors name the command line's flags
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
    finally:
        CLI.reset(cli_words)


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
