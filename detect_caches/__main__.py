"""`python -m detect_caches ...` and the `detect-caches` script: the command line
(detect_caches.cli). Before that module and its imports load: Ctrl-C or SIGTERM end the process
with one line, a module of the working folder cannot shadow a dependency, and a broken install
is one line and exit 2, not a traceback and exit 1."""
import os
import signal
import sys
import time

from detect_caches import _early_exit

T0 = time.perf_counter()   # close to process start


def _working_folder_last() -> None:
    """`python -m` puts the working folder first on sys.path: a user's numpy.py or torch/ there
    would shadow a dependency (this package's own modules are all under detect_caches). The
    working folder goes last, unless this package lives there (a checkout run in place)."""
    cwd = os.getcwd()
    if os.path.dirname(os.path.dirname(os.path.abspath(__file__))) == cwd:
        return
    local = [p for p in sys.path if p in ("", ".") or os.path.abspath(p) == cwd]
    sys.path[:] = [p for p in sys.path if p not in local] + local


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early_exit)
    _working_folder_last()
    try:
        from detect_caches.cli import cli
    except ImportError as exc:
        sys.stderr.write(f"detect-caches: error: cannot import {exc.name or 'a module'} ({exc}); reinstall "
                         f"detect-caches\n")
        sys.stderr.flush()
        os._exit(2)
    cli(T0)


if __name__ == "__main__":
    main()
