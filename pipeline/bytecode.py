"""A bytecode cache of its own for the command line's process, where Python keeps none.

Where packages were installed without compiled bytecode (uv does not compile by default) and
Python may not write it (PYTHONDONTWRITEBYTECODE=1, common in containers), every process compiles
each module it imports from source again. On the project's H200 host that is torch (2,141 sources,
no .pyc) and Triton: about 2 s of every run's start (BENCHMARKS.md, 2026-11-30, fifth session).
This keeps the bytecode of such modules, and only those (no .pyc beside the source), in
detect-caches' cache folder; nothing is ever written beside a source, as the setting asks.
Python's own rules decide when a cached file is stale (the source's modification time and size,
the interpreter's magic number).

Only the command line installs it (``install``); the Python API leaves a user's interpreter as it
is. DETECT_CACHES_BYTECODE_CACHE=0 turns it off, =PATH puts it elsewhere; a PYTHONPYCACHEPREFIX
the user set is left to Python.
"""
from __future__ import annotations

import collections
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import threading
import time
import types

from detect_caches.pipeline.bytecode_safety import make_private_root, read_trusted, write_private

ENV = "DETECT_CACHES_BYTECODE_CACHE"


def cache_root(environ=os.environ) -> str | None:
    """The folder for cached bytecode, or None when the cache is off or not needed."""
    setting = environ.get(ENV, "")
    if setting == "0" or not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    if setting:
        return os.path.abspath(setting)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "detect-caches", "bytecode", sys.implementation.cache_tag or "python")


def _header(mtime: float, size: int) -> bytes:
    """A timestamp-based .pyc header (PEP 552): magic, flags 0, source mtime and size."""
    return (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
            + (int(mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little"))


class CachingLoader(importlib.machinery.SourceFileLoader):
    """A source loader that reads and writes its bytecode under ``root`` (the source's absolute
    path below it), not beside the source."""

    root = ""

    def cache_path(self, source_path: str) -> str:
        stem = os.path.splitext(os.path.abspath(source_path))[0].lstrip(os.sep)
        return os.path.join(self.root, f"{stem}.pyc")

    def get_code(self, fullname):
        source_path = self.get_filename(fullname)
        try:
            st = self.path_stats(source_path)
        except OSError:
            return super().get_code(fullname)
        header = _header(st["mtime"], st["size"])
        cached = self.cache_path(source_path)
        data = read_trusted(cached)        # none of someone else's, nor through a link
        if data is not None and data[:16] == header:
            try:
                code = marshal.loads(memoryview(data)[16:])
                if isinstance(code, types.CodeType):
                    return code
            except Exception:   # cut short or damaged: compiled again, and the entry replaced
                pass
        code = self.source_to_code(self.get_data(source_path), source_path)
        _WRITER.put(cached, header, code)
        return code


class _Writer:
    """Writes cache files in a thread, once imports pause: on an empty cache, writing them on
    the main thread slowed a first run on the H200 host, and writing them beside torch's import
    still did (both want the interpreter). After a quiet ``QUIET_S`` (torch's import is over:
    the CUDA context, the GPU waits leave the interpreter free) or when flushed. Each file is
    whole or absent (a temporary file, then a rename), since two processes of a node may write
    the same one; a cache that cannot be written only means compiling next time."""

    QUIET_S = 0.25

    def __init__(self):
        self._cond = threading.Condition()
        self._items: collections.deque[tuple[str, bytes, object]] = collections.deque()
        self._busy = False
        self._now = False           # flush asked: write without waiting for a pause
        self._last_put = 0.0
        self._dirs: set[str] = set()
        self._thread: threading.Thread | None = None

    def put(self, path: str, header: bytes, code) -> None:
        with self._cond:
            self._items.append((path, header, code))
            self._last_put = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="detect-caches-bytecode", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._items:
                        self._busy = False
                        self._cond.notify_all()
                        self._cond.wait()
                        continue
                    quiet = time.monotonic() - self._last_put
                    if self._now or quiet >= self.QUIET_S:
                        break
                    self._cond.wait(self.QUIET_S - quiet)
                self._busy = True
                path, header, code = self._items.popleft()
            self._write(path, header + marshal.dumps(code))

    def _write(self, path: str, data: bytes) -> None:
        folder = os.path.dirname(path)
        try:
            if folder not in self._dirs:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                self._dirs.add(folder)
            write_private(path, data)
        except OSError:     # a cache that cannot be written only means compiling next time
            pass

    def flush(self, timeout: float) -> bool:
        """Write every file given so far now (within ``timeout`` s); True when done."""
        with self._cond:
            self._now = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: not self._items and not self._busy, timeout)


_WRITER = _Writer()


def flush(timeout: float = 2.0) -> bool:
    """Called by the command line before it exits at once (os._exit), so that no file is lost."""
    return _WRITER.flush(timeout)


class CachingFinder:
    """Finds modules as Python's path finder does; a source module with no bytecode beside it
    gets a CachingLoader. Sits just before the path finder on sys.meta_path."""

    def __init__(self, root: str):
        self.loader_cls = type("CachingLoader", (CachingLoader,), {"root": root})

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not spec.origin:
            return spec
        try:
            if os.path.exists(importlib.util.cache_from_source(spec.origin)):
                return spec     # Python's own bytecode is there: Python reads it
        except (NotImplementedError, ValueError):
            return spec
        loader = self.loader_cls(fullname, spec.origin)
        spec.loader = loader
        spec.cached = loader.cache_path(spec.origin)
        return spec

    @staticmethod
    def invalidate_caches():
        importlib.machinery.PathFinder.invalidate_caches()


_REFUSED: list[str] = []


def install(environ=os.environ) -> CachingFinder | None:
    """Put the finder on sys.meta_path when Python keeps no bytecode of its own; idempotent. A
    cache folder that others could write to is refused, once, with one line on stderr."""
    root = cache_root(environ)
    if root is None:
        return None
    for finder in sys.meta_path:
        if isinstance(finder, CachingFinder):
            return finder
    why = make_private_root(root)
    if why:
        if root not in _REFUSED:
            _REFUSED.append(root)
            line = f"detect-caches: not using the bytecode cache {root}: {why} (code read from it would run as you)"
            try:
                sys.stderr.write(line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
            except (OSError, ValueError, AttributeError):
                pass
        return None
    finder = CachingFinder(root)
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, finder)
    return finder
