"""The command line's bytecode cache (pipeline/bytecode.py): used only for modules with no .pyc
beside their source when Python may not write one, never writing beside a source, stale when
the source changes, and harmless when it cannot be written or holds garbage."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from detect_caches.pipeline import bytecode

ROOT = Path(__file__).resolve().parents[1]

IMPORT = """
import sys, json
sys.path.insert(0, {root!r}); sys.path.insert(0, {lib!r})
from detect_caches.pipeline import bytecode
finder = bytecode.install()
import pkg.mod, pkg.compiled
assert bytecode.flush(10), "the cache files were not written in time"
print(json.dumps({{"installed": finder is not None, "x": pkg.mod.X, "y": pkg.compiled.Y,
                  "mod_loader": type(pkg.mod.__spec__.loader).__name__,
                  "compiled_loader": type(pkg.compiled.__spec__.loader).__name__,
                  "cached": pkg.mod.__spec__.cached}}))
"""


@pytest.fixture
def lib(tmp_path):
    pkg = tmp_path / "lib" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("X = 1\n")
    (pkg / "compiled.py").write_text("Y = 5\n")
    py_compile.compile(str(pkg / "compiled.py"), cfile=importlib.util.cache_from_source(str(pkg / "compiled.py")))
    return tmp_path / "lib"


def _run(lib: Path, cache: str, **env) -> dict:
    import json
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", bytecode.ENV)}
    environ.update(PYTHONDONTWRITEBYTECODE="1", **{bytecode.ENV: cache}, **env)
    proc = subprocess.run([sys.executable, "-c", IMPORT.format(root=str(ROOT), lib=str(lib))],
                          capture_output=True, text=True, env=environ, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_modules_without_bytecode_are_cached_outside_the_sources(lib, tmp_path):
    cache = tmp_path / "cache"
    first = _run(lib, str(cache))
    assert first["installed"] and first["x"] == 1 and first["y"] == 5
    assert first["mod_loader"] == "CachingLoader"
    assert first["compiled_loader"] == "SourceFileLoader"        # its .pyc beside the source is Python's
    cached = Path(first["cached"])
    assert cached.is_file() and cache in cached.parents
    assert cached.read_bytes()[:4] == importlib.util.MAGIC_NUMBER
    assert not (lib / "pkg" / "__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc").exists()
    assert sorted(p.name for p in (lib / "pkg").iterdir()) == ["__init__.py", "__pycache__", "compiled.py", "mod.py"]
    assert cache.stat().st_mode & 0o077 == 0                  # the user's own: no one else plants bytecode


def test_the_cached_bytecode_is_what_runs_until_the_source_changes(lib, tmp_path):
    cache = tmp_path / "cache"
    cached = Path(_run(lib, str(cache))["cached"])
    # same header, other code: a run that reads X = 2 read the cache, not the source
    header = cached.read_bytes()[:16]
    import marshal
    cached.write_bytes(header + marshal.dumps(compile("X = 2\n", str(lib / "pkg" / "mod.py"), "exec")))
    assert _run(lib, str(cache))["x"] == 2
    src = lib / "pkg" / "mod.py"
    src.write_text("X = 3  # longer\n")                 # another size: stale
    assert _run(lib, str(cache))["x"] == 3
    assert _run(lib, str(cache))["x"] == 3


def test_garbage_in_the_cache_or_an_unwritable_cache_only_means_compiling(lib, tmp_path):
    cache = tmp_path / "cache"
    cached = Path(_run(lib, str(cache))["cached"])
    cached.write_bytes(cached.read_bytes()[:20])        # cut short
    assert _run(lib, str(cache))["x"] == 1
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = _run(lib, str(blocker / "cache"))              # cannot be created: imports still work
    assert out["x"] == 1 and out["installed"]


@pytest.mark.parametrize("env, flag, prefix", [({bytecode.ENV: "0"}, True, None), ({}, False, None),
                                               ({}, True, "/tmp/somewhere")])
def test_off_when_asked_or_when_python_keeps_bytecode_itself(monkeypatch, env, flag, prefix):
    monkeypatch.setattr(sys, "dont_write_bytecode", flag)
    monkeypatch.setattr(sys, "pycache_prefix", prefix)
    assert bytecode.cache_root(env) is None
    before = list(sys.meta_path)
    assert bytecode.install(env) is None
    assert sys.meta_path == before


def test_root_follows_xdg_and_the_setting(monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert bytecode.cache_root({"XDG_CACHE_HOME": "/x"}).startswith("/x/detect-caches/bytecode/")
    assert bytecode.cache_root({bytecode.ENV: "rel"}) == os.path.abspath("rel")


def test_install_is_idempotent_and_sits_before_the_path_finder(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    a = bytecode.install({bytecode.ENV: str(tmp_path)})
    b = bytecode.install({bytecode.ENV: str(tmp_path)})
    assert a is b and sum(isinstance(f, bytecode.CachingFinder) for f in sys.meta_path) == 1
    assert sys.meta_path.index(a) + 1 == sys.meta_path.index(importlib.machinery.PathFinder)


def test_writes_wait_for_a_pause_in_the_imports_or_a_flush(tmp_path):
    import time
    writer = bytecode._Writer()
    writer.QUIET_S = 0.4
    code = compile("X = 1\n", "x.py", "exec")
    writer.put(str(tmp_path / "a.pyc"), b"h" * 16, code)
    time.sleep(0.1)
    assert not (tmp_path / "a.pyc").exists()          # imports may still be going on: not yet
    deadline = time.monotonic() + 10
    while not (tmp_path / "a.pyc").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    import marshal
    assert marshal.loads((tmp_path / "a.pyc").read_bytes()[16:]) == code
    writer.QUIET_S = 60.0
    writer.put(str(tmp_path / "sub" / "b.pyc"), b"h" * 16, code)
    assert writer.flush(10) and (tmp_path / "sub" / "b.pyc").exists()   # at exit: written at once
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []
