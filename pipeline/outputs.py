"""The output folder: claimed atomically before anything is written (two runs never both get
one folder), and the files of a result written whole, checked before the first is written."""
from __future__ import annotations

import contextvars
import errno
import json
import os
import time
from pathlib import Path

from detect_caches.errors import InputError

CLAIM = ".detect-caches-claim"
RESULT_FILES = ("result.json", "report.md", "report.html", "bandwidth.png", "measurements.csv")
# who asked: the command line names its flag (--out), the Python API its arguments
CLI = contextvars.ContextVar("detect_caches_cli", default=False)


def _another() -> str:
    return "choose another --out" if CLI.get() else "pass another out="


def _replace(path: Path) -> None:
    """overwrite=True: remove an earlier result's files, and refuse a folder holding anything else."""
    others = sorted(p.name for p in path.iterdir() if p.name not in RESULT_FILES and p.name != CLAIM)
    if others:
        raise InputError(f"{path} holds files detect-caches did not write ({', '.join(others[:3])}"
                         f"{', ...' if len(others) > 3 else ''}); overwrite replaces a result folder only")
    for name in RESULT_FILES:
        try:
            (path / name).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise InputError(f"cannot replace {path / name}: {exc.strerror or exc}") from None


def default_out(device_name: str, prefix: str = "") -> Path:
    slug = "".join(ch if ch.isalnum() else "-" for ch in device_name.lower()).strip("-") or "gpu"
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    return Path("detect-caches-results") / f"{prefix}{slug}-{stamp}"


def claim_out_dir(path: Path, *, overwrite: bool = False) -> Path:
    """Create ``path`` for this run alone, or take it if it is an empty folder nobody else has
    claimed; refuse anything else with one sentence. Never overwrites, unless ``overwrite`` (the
    Python API's, for a notebook cell run again): then an earlier result's files there go."""
    path = Path(path)
    for up in path.parents:                 # a file where a folder must be: say which
        if up.exists():
            if not up.is_dir():
                raise InputError(f"{up} is not a folder; {_another()}")
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {path.parent}: {exc.strerror or exc}") from None
    try:
        os.mkdir(path)                      # atomic: one of two racing runs wins
    except FileExistsError:
        if not path.is_dir():
            raise InputError(f"{path} exists and is not a folder; {_another()}") from None
        if overwrite and not (path / CLAIM).exists():
            _replace(path)
        elif any(p.name != CLAIM for p in path.iterdir()):
            more = "" if CLI.get() else " or overwrite=True"
            raise InputError(f"{path} already exists; {_another()}{more} (results are never "
                             f"overwritten)") from None
    except NotADirectoryError:
        raise InputError(f"{path.parent} is not a folder; {_another()}") from None
    except OSError as exc:
        raise InputError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        fd = os.open(path / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        os.write(fd, f"{os.getpid()} {time.time()}\n".encode())
        os.close(fd)
    except FileExistsError:
        raise InputError(f"{path} is being written by another detect-caches run; {_another()}") from None
    except OSError as exc:
        raise InputError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def release(path: Path) -> None:
    """The run is over: drop the claim marker (the folder is no longer empty, so it stays ours)."""
    try:
        (Path(path) / CLAIM).unlink()
    except OSError:
        pass


def write_result_files(out: Path, result: dict, detection, plot_title: str, *, plot_future=None) -> None:
    """result.json, report.md, report.html and bandwidth.png, each whole; the result is checked
    before any is written. ``plot_future``: the plot rendered in the background already (its PNG bytes)."""
    from detect_caches.reports.atomic import write_bytes_atomic, write_text_atomic
    from detect_caches.reports.markdown import render_report
    from detect_caches.reports.result_json import dumps, validate_result
    png = None
    if plot_future is not None:     # the run's split: how long the plot took, and was waited on
        t = time.perf_counter()
        png = plot_future.result()
        result.setdefault("method", {})["plot"] = {"render_seconds": getattr(plot_future, "render_seconds", None),
                                                   "waited_seconds": round(time.perf_counter() - t, 3)}
    text = dumps(result)
    validate_result(json.loads(text), "the result")    # an internal fault, if it fails (not the user's)
    report = render_report(result)
    try:
        if png is None:
            from detect_caches.reports.plot import render_plot
            png = render_plot(detection, plot_title, vendor=result["device"].get("vendor"))
        from detect_caches.reports.html import render_html
        page = render_html(result, png)
        write_text_atomic(out / "result.json", text)
        write_text_atomic(out / "report.md", report)
        write_text_atomic(out / "report.html", page)
        write_bytes_atomic(out / "bandwidth.png", png)
        from detect_caches.pipeline.cli_log import get
        get("outputs").info("wrote result.json, report.md, report.html and bandwidth.png into %s", out)
    except OSError as exc:
        raise OSError(exc.errno or errno.EIO, f"cannot write the result into {out}: {exc.strerror or exc}") from None
