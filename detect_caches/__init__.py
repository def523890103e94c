"""detect-caches: find a GPU's cache hierarchy from Triton bandwidth and latency sweeps.

    from detect_caches import characterize, analyze, compare

This folder is the package's ground floor: the vocabulary every layer shares (errors, device
facts, measurement records, readers, validation) and the command line. The repository's
``measure/``, ``detector/``, ``reports/`` and ``pipeline/`` folders are its subpackages
``detect_caches.measure`` and so on: an install maps them in (``package-dir`` in
pyproject.toml); a checkout run in place finds them beside this folder (below).
"""
from __future__ import annotations

import os as _os   # loaded with the interpreter: nothing to read while a signal may come


def _early_exit(signum, frame):
    """Ctrl-C or SIGTERM before the command line takes over: one line, exit 2, no traceback."""
    try:
        _os.write(2, b"detect-caches: interrupted\n")
    finally:
        _os._exit(2)


def _started_as_command() -> bool:
    """`python -m detect_caches`: runpy imports this package before it reads __main__.py."""
    import sys
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[:1] == ["-m"] and any(a == "-m" and b == __name__ for a, b in zip(argv, argv[1:]))


if _started_as_command():
    # a Ctrl-C while runpy reads __main__.py would otherwise be a traceback and a signal exit
    import _signal   # built in: nothing to load while a signal may come
    for _sig in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(_sig, _early_exit)

# after the handlers: a Ctrl-C while this first file of the package is read was a traceback (a
# loaded CI machine, 0.05 s after the start)
from detect_caches._version import __version__  # noqa: E402

# Run from a checkout (tests, `PYTHONPATH=$PWD python3 -m detect_caches` on a GPU host): the
# subpackages are folders beside this one, so the repository's root joins the package's path.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (not _os.path.isdir(_os.path.join(__path__[0], "measure"))
        and _os.path.isfile(_os.path.join(_root, "measure", "__init__.py"))):
    __path__.append(_root)

from detect_caches.errors import DetectCachesError, DeviceError, InputError  # noqa: E402

_API = ("characterize", "analyze", "compare", "history", "fleet", "Result")
__all__ = [*_API, "main", "main_parser", "DetectCachesError", "DeviceError", "InputError", "__version__"]


def __getattr__(name: str):
    """The API's names, imported when first asked for: `python -m detect_caches` and the
    console script import this package before they can take over Ctrl-C, so it stays light."""
    if name in ("history", "fleet"):
        from detect_caches.pipeline import api_checks
        return getattr(api_checks, name)
    if name in _API:
        from detect_caches.pipeline import api
        return getattr(api, name)
    if name in ("main", "main_parser"):
        from detect_caches import cli
        return getattr(cli, name)
    raise AttributeError(f"module 'detect_caches' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
