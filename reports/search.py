"""Finding results: result.json files given by name, or searched for in folders (recursively,
without following links, to a bounded depth). What is passed over is said: a result.json that
cannot be read (named in ``skipped``: a check that cannot read a result cannot vouch for it), a
linked folder or one too deep (in ``notes``)."""
from __future__ import annotations

import os
from pathlib import Path

from detect_caches.errors import DetectCachesError, InputError
from detect_caches.reports.result_json import read_result

MAX_FILES = 20000
MAX_DEPTH = 16


def show(path) -> str:
    """A path as text that any terminal takes: bytes that are not UTF-8 shown escaped."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def find_results(paths: list[Path], skipped: list[str], notes: list[str] | None = None, *,
                 unique: bool = True) -> list[tuple[Path, dict]]:
    """Every readable result.json under ``paths`` (each file once, however often given, unless
    not ``unique``: a fleet report counts a GPU given twice once, and says so); files that are
    not results are named in ``skipped``, folders passed over in ``notes``."""
    found: list[tuple[Path, dict]] = []
    seen: set[Path] = set()
    notes = [] if notes is None else notes

    def add(p: Path, res: dict) -> None:
        real = p.resolve()
        if real not in seen or not unique:
            seen.add(real)
            found.append((p, res))
    for path in map(Path, paths):
        if path.is_file():
            add(path, read_result(path))     # given by name: it must be a result
            continue
        if not path.is_dir():
            if path.exists() or path.is_symlink():
                raise InputError(f"{show(path)} is not a regular file or a folder (a pipe, device, socket or "
                                 f"broken link); give result.json files or folders of them")
            raise InputError(f"{show(path)}: no such file or folder")
        base = len(path.parts)
        deep, links = 0, []
        for root, dirs, files in os.walk(path, followlinks=False):
            dirs.sort()
            links += [Path(root) / d for d in dirs if os.path.islink(os.path.join(root, d))]
            if len(Path(root).parts) - base >= MAX_DEPTH:
                deep += len(dirs)
                dirs[:] = []
            if "result.json" in files:
                p = Path(root) / "result.json"
                try:
                    add(p, read_result(p))
                except DetectCachesError as exc:
                    skipped.append(f"{show(p)}: {exc}")
                if len(found) > MAX_FILES:
                    raise InputError(f"more than {MAX_FILES} results under {show(path)}; give a narrower folder")
        if links:
            notes.append(f"{len(links)} linked folder(s) under {show(path)} were not followed (first: "
                         f"{show(links[0])}); give them by name to include them")
        if deep:
            notes.append(f"{deep} folder(s) more than {MAX_DEPTH} levels below {show(path)} were not searched")
    if not found:
        where = ", ".join(show(p) for p in paths)
        raise InputError(f"no readable result.json found in {where}" if skipped else f"no result.json found in {where}")
    return found
