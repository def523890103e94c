"""Work of a GPU run's first launch, started before torch's import so that it overlaps it.

Triton computes its cache key once per process, on the first launch of any kernel: a SHA-256 of
its own sources and of libtriton (about 500 MB). On the H200 host that took 0.47 s of the main
thread, after torch's import (BENCHMARKS.md, 2026-11-30, fifth session); hashlib lets go of the
interpreter while it hashes, so in a thread started first it runs beside torch's import (which
holds the interpreter) nearly for free. NVML's initialisation (a C call) goes along. Neither
package imports the other, so the two imports cannot wait on each other.
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


class EarlyStart:
    """A daemon thread doing the above; ``wait`` before the first launch, so that the launch
    does not compute the key a second time beside it (the cache has no lock)."""

    def __init__(self, *, nvml: bool = True):
        self.seconds: float | None = None
        self.error = ""
        self._done = threading.Event()
        self._nvml = nvml
        threading.Thread(target=self._work, name="detect-caches-early", daemon=True).start()

    def _work(self) -> None:
        t = time.perf_counter()
        try:
            if self._nvml:
                from detect_caches.measure.gpu.clocks import nvml_init
                nvml_init()
            key = _triton_key()
            if key is not None:
                key()
        except Exception as exc:   # the first launch does it instead, as without this
            self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        finally:
            self.seconds = round(time.perf_counter() - t, 3)
            self._done.set()

    def wait(self, timeout: float = 60.0) -> bool:
        return self._done.wait(timeout)
