"""The command line: `detect-caches SUBCOMMAND ...` dispatched to the pipeline's commands (which
call the same functions as the Python API: `from detect_caches import characterize, analyze,
compare, history, fleet`), every error mapped to one line on stderr and exit code 2. Exit 1 means
drift, only: any failure is 2, an unexpected one with its traceback saved to a file named on
stderr. The `detect-caches` script and `python -m detect_caches` start here through
detect_caches/__main__.py, which takes Ctrl-C and a broken install before this module loads.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
import traceback

from detect_caches._version import __version__
from detect_caches.errors import DetectCachesError, InputError
from detect_caches.pipeline import api as _api
from detect_caches.pipeline.console import say as _print

EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2
__all__ = ["main", "cli", "main_parser"]


def main_parser():
    """The whole command line: the main job's options and a subparser per command."""
    from detect_caches.pipeline.cli_parser import build_parser
    return build_parser()


def cmd_main(args) -> int:
    from detect_caches.pipeline.cmd_measure import cmd_main as run
    return run(args)


def cmd_analyze(args) -> int:
    from detect_caches.pipeline.cmd_measure import cmd_analyze as run
    return run(args)


def cmd_compare(args) -> int:
    from detect_caches.pipeline.commands import cmd_compare as run
    return run(args)


def cmd_history(args) -> int:
    from detect_caches.pipeline.commands import cmd_history as run
    return run(args)


def cmd_fleet(args) -> int:
    from detect_caches.pipeline.commands import cmd_fleet as run
    return run(args)


def cmd_run(args) -> int:
    from detect_caches.pipeline.seed_cli import cmd_run as run
    return run(args)


def cmd_benchmark(args) -> int:
    from detect_caches.pipeline.seed_cli import cmd_benchmark as run
    return run(args)


def _save_traceback(exc: BaseException) -> str:
    """The full traceback of an unexpected failure, in a file; returns its path."""
    fd, path = tempfile.mkstemp(prefix="detect-caches-error-", suffix=".log")
    with os.fdopen(fd, "w") as fh:
        fh.write(f"detect-caches {sys.argv[1:]!r}\n")
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
    return path


def _run(argv: list[str]) -> int:
    from detect_caches.pipeline.cli_log import setup_logging
    from detect_caches.pipeline.cli_parser import build_parser
    if argv[:1] in (["--version"], ["-V"]):
        _print(f"detect-caches {__version__}")
        return EXIT_OK
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    if args.command is None:
        return cmd_main(args)
    if args.command not in ("run", "benchmark") and (args.gpu is not None or args.simulate is not None):
        raise InputError(f"--gpu and --simulate belong to the main job, not to `{args.command}` "
                         f"(see detect-caches {args.command} --help)")
    return globals()[f"cmd_{args.command}"](args)    # looked up here: tests replace a handler


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _from_interrupt(exc: BaseException) -> bool:
    """Did a Ctrl-C cause ``exc``? Python wraps one that lands while a class is being built (a
    dataclass field's __set_name__, during an import) in a RuntimeError."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 ok, 1 drift (and nothing else), 2 any failure, with one line on stderr."""
    from detect_caches.pipeline import console
    from detect_caches.pipeline.outputs import CLI
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
        if _from_interrupt(exc):           # or a compiled module's start cut by Ctrl-C ("initialization failed")
            _print("detect-caches: interrupted", err=True)
            return EXIT_ERROR
        _print(f"detect-caches: error: cannot import {exc.name or 'a module'} ({exc}): is a file or folder of "
               f"that name in the working folder or on PYTHONPATH?", err=True)
        return EXIT_ERROR
    except Exception as exc:               # never a traceback on the terminal, never exit 1
        if _from_interrupt(exc):
            _print("detect-caches: interrupted", err=True)
            return EXIT_ERROR
        try:
            saved = _save_traceback(exc)
        except OSError:
            saved = "nowhere: no temporary folder"
        _print(f"detect-caches: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
               f"(traceback saved in {saved}; please report it)", err=True)
        return EXIT_ERROR
    finally:
        CLI.reset(cli_words)


def cli(t0: float | None = None) -> None:
    """The command line's process: ``main``, then a quick exit. Everything is written and closed
    by then (files atomically, the measurements CSV synced); what is left is tearing down the
    CUDA context, Triton and the interpreter, which a user would wait on (BENCHMARKS.md,
    2026-11-30, "exit at once"). Before anything heavy is imported, bytecode of modules Python
    keeps none of gets a cache (pipeline/bytecode.py; what it saves: BENCHMARKS.md, 2026-11-30,
    fifth session). ``t0``: when the process started (the run reports its start-up)."""
    from detect_caches.pipeline import bytecode, console
    if t0 is not None:
        _api.T0 = t0
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

