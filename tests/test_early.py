"""measure/early.py: Triton's cache key computed in a thread started before torch's import, so
that the first launch finds it done; failures stay in the thread."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from detect_caches.measure.gpu import early

ROOT = Path(__file__).resolve().parents[1]


def test_the_key_is_computed_once_in_the_thread_and_the_first_launch_finds_it():
    triton_key = early._triton_key()
    if triton_key is None:
        pytest.skip("Triton is not installed")
    triton_key.cache_clear()
    start = early.EarlyStart(nvml=False)
    assert start.wait(120)
    info = triton_key.cache_info()
    assert start.error == "" and start.seconds > 0
    assert (info.currsize, info.misses) == (1, 1)
    triton_key()                                  # what Triton's first launch calls
    assert triton_key.cache_info().hits == info.hits + 1 and triton_key.cache_info().misses == 1


def test_a_failure_stays_in_the_thread(monkeypatch):
    def broken():
        raise RuntimeError("no libtriton here\nsecond line")
    monkeypatch.setattr(early, "_triton_key", lambda: broken)
    monkeypatch.setattr(early, "_import_what_the_key_walks", lambda: None)
    start = early.EarlyStart(nvml=False)
    assert start.wait(10)
    assert start.error == "RuntimeError: no libtriton here"


def _python(code: str) -> str:
    """``code`` run in a fresh interpreter (an import order of its own): its stdout."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_it_runs_beside_torchs_import_without_waiting_on_it():
    pytest.importorskip("torch")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from detect_caches.measure.gpu.early import EarlyStart\n"
            "s = EarlyStart(nvml=False)\n"
            "import torch\n"
            "assert s.wait(120), 'the early thread did not finish'\n"
            "print(repr(s.error), 'triton' in sys.modules)\n") % str(ROOT)
    assert _python(code).startswith("''")


def test_the_thread_imports_nothing_so_it_cannot_race_torchs_import():
    # Two threads importing at once can hand one a module the other is still executing: on CI
    # Triton's import in the thread failed so ("name 'sys' is not defined") beside torch's.
    if early._triton_key() is None:
        pytest.skip("Triton is not installed")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import detect_caches.measure.gpu.early as e\n"
            "seen = {}\n"
            "work = e.EarlyStart._work\n"
            "def watched(self):\n"
            "    seen['before'] = set(sys.modules); work(self)\n"
            "e.EarlyStart._work = watched\n"
            "s = e.EarlyStart(nvml=True)\n"
            "assert s.wait(120)\n"
            "print(repr(s.error), sorted(set(sys.modules) - seen['before']))\n") % str(ROOT)
    assert _python(code).strip() == "'' []"


def test_a_package_that_fails_to_import_keeps_the_key_out_of_the_thread(monkeypatch):
    # pkgutil would hand the failure to onerror and the thread's walk would import it again
    if early._triton_key() is None:
        pytest.skip("Triton is not installed")
    import pkgutil

    def walk(path, prefix="", onerror=None):
        onerror(prefix + "bad")
        return iter(())
    monkeypatch.setattr(pkgutil, "walk_packages", walk)
    called = []
    monkeypatch.setattr(early, "_triton_key", lambda: lambda: called.append(1))
    start = early.EarlyStart(nvml=False)
    assert start.wait(10)
    assert start.error == "ImportError: triton.compiler.bad does not import" and called == []
