"""-v / --verbose: the package's log ("detect_caches") on stderr, one line a record. The
Python API configures nothing: a program that imports it decides where its log goes."""
from __future__ import annotations

import logging
import sys

LOGGER = "detect_caches"


def setup_logging(verbose: int) -> None:
    """Nothing below a warning without -v; each step with -v; debugging details with -vv."""
    log = logging.getLogger(LOGGER)
    for h in [h for h in log.handlers if getattr(h, "detect_caches_cli", False)]:
        log.removeHandler(h)
    if not verbose:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.detect_caches_cli = True
    handler.setFormatter(logging.Formatter("detect-caches: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    log.propagate = False


def get(name: str) -> logging.Logger:
    """The logger of one module of this tool (a child of "detect_caches")."""
    return logging.getLogger(f"{LOGGER}.{name}")
