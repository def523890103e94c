"""The first moments of a command-line process, before anything heavy is imported: the start
time, Ctrl-C as one line, and the working folder last on sys.path."""
from __future__ import annotations

import os
import signal
import sys
import time

T0 = time.perf_counter()   # first import of this module: close to process start
CLI = os.path.basename(sys.argv[0] if sys.argv else "") == "detect-caches"   # the console script


def _early_exit(signum, frame):
    """Ctrl-C or SIGTERM before main() takes over (imports): one line, exit 2, no traceback."""
    try:
        os.write(2, b"detect-caches: interrupted\n")
    finally:
        os._exit(2)


def _working_folder_last() -> None:
    """`python -m` puts the working folder first on sys.path: a user's numpy.py or torch/ there
    would shadow a dependency (this package's own modules are all under detect_caches). The
    working folder goes last, unless this package lives there (a checkout run in place)."""
    cwd = os.getcwd()
    if os.path.dirname(os.path.dirname(os.path.abspath(__file__))) == cwd:
        return
    local = [p for p in sys.path if p in ("", ".") or os.path.abspath(p) == cwd]
    sys.path[:] = [p for p in sys.path if p not in local] + local


def begin() -> None:
    """A command-line process starts: signals end it with one line until main() takes over."""
    global CLI
    CLI = True
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early_exit)
    _working_folder_last()


if CLI:
    begin()
