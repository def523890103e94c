"""Work of a GPU run's first launch, started before torch's import so that it overlaps it.

Triton computes its cache key once per process, on the first launch of any kernel: a SHA-256 of
its own sources and of libtriton (about 500 MB). On the H200 host that took 0.47 s of the main
thread, after torch's import (BENCHMARKS.md, 2026-11-30, fifth session); hashlib lets go of the
interpreter while it hashes, so in a thread started first it runs beside torch's import (which
holds the interpreter) nearly for free. NVML's initialisation (a C call) goes along.

The thread imports nothing. Two threads importing at once can hand one of them a module the
other is still executing (Python's answer to two imports waiting on each other): on a 2-core CI
host Triton's import failed so, "name 'sys' is not defined", beside torch's. So the main thread
imports first what the thread will touch (pynvml, Triton, and the packages whose sources the key
hashes: pkgutil imports each to list it); that import is interpreter-bound work the first launch
would do anyway, and only the file reading and hashing go to the thread.
"""
from __future__ import annotations

import threading
import time


def _triton_key():
    """Triton's lru-cached cache-key function, wherever this Triton version keeps it."""
    try:
        from triton.runtime.cache import triton_key      # Triton 3.4 and later
        return triton_key
    except ImportError:
        pass
    try:
        from triton.compiler.compiler import triton_key
        return triton_key
    except ImportError:
        return None


def _import_what_the_key_walks() -> None:
    """The packages Triton's key lists with pkgutil.walk_packages (which imports every package it
    meets), imported here in the calling thread; and sysconfig's lazily loaded data. A package
    that fails to import raises: the thread would try it again, beside torch's import."""
    import os
    import pkgutil
    import sysconfig
    import triton
    root = os.path.dirname(triton.__file__)
    failed: list[str] = []
    for sub in ("compiler", "backends", "language"):
        for _ in pkgutil.walk_packages([os.path.join(root, sub)], prefix=f"triton.{sub}.",
                                       onerror=failed.append):
            pass
    if failed:
        raise ImportError(f"{failed[0]} does not import")
    sysconfig.get_config_var("EXT_SUFFIX")


class EarlyStart:
    """A daemon thread doing the above; ``wait`` before the first launch, so that the launch
    does not compute the key a second time beside it (the cache has no lock)."""

    def __init__(self, *, nvml: bool = True):
        self.seconds: float | None = None
        self.import_seconds: float | None = None     # the main thread's share, before the thread
        self.error = ""
        self._done = threading.Event()
        self._nvml = None
        self._key = None
        t = time.perf_counter()
        try:
            if nvml:
                from detect_caches.measure.gpu.clocks import nvml_init
                try:
                    import pynvml  # noqa: F401  (here; the thread only initialises it)
                    self._nvml = nvml_init
                except ImportError:      # no NVML: nothing for the thread to start
                    pass
            self._key = _triton_key()
            if self._key is not None:
                _import_what_the_key_walks()
        except Exception as exc:   # the first launch does it instead, as without this
            self.error = _line(exc)
            self._key = None
        self.import_seconds = round(time.perf_counter() - t, 3)
        threading.Thread(target=self._work, name="detect-caches-early", daemon=True).start()

    def _work(self) -> None:
        t = time.perf_counter()
        try:
            if self._nvml is not None:
                self._nvml()
            if self._key is not None:
                self._key()
        except Exception as exc:
            self.error = _line(exc)
        finally:
            self.seconds = round(time.perf_counter() - t, 3)
            self._done.set()

    def wait(self, timeout: float = 60.0) -> bool:
        return self._done.wait(timeout)


def _line(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
