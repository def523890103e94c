"""What the command line prints. A reader that stops reading (``| head`` closing the pipe) costs
nothing: stdout is pointed at /dev/null from then on, the lines for stderr still go out, and
the exit code stays the verdict's (under ``set -o pipefail`` a drift still reads as drift, not
as an error). Text that is not UTF-8 (file names' bytes, lone surrogates from a JSON file) is
shown escaped, never a crash."""
from __future__ import annotations

import os
import sys

STATE = {"stdout_closed": False}


def prepare() -> None:
    """The command line's streams: escaped, never failing, on text they cannot encode."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass


def close_stdout() -> None:
    """The reader went away: later output goes nowhere."""
    STATE["stdout_closed"] = True
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, AttributeError, ValueError):
        pass


def say(text: str, *, err: bool = False) -> None:
    """One block of text and a newline, on stdout (or stderr)."""
    stream = sys.stderr if err else sys.stdout
    if stream is None or (not err and STATE["stdout_closed"]):
        return
    try:
        stream.write(text + "\n")
        if err:
            stream.flush()
    except BrokenPipeError:
        if not err:
            close_stdout()
    except UnicodeEncodeError:
        stream.write(text.encode("ascii", "backslashreplace").decode("ascii") + "\n")


def flush_stdout() -> None:
    """Flush stdout now: a full disk under it fails here (an error); a closed pipe does not."""
    if sys.stdout is None or STATE["stdout_closed"]:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        close_stdout()
