"""The one baseline resolver of every route (one GPU, a node, a torchrun fleet, `fleet`, the
Python API): a result (a dict, or a result.json given by name, or a folder holding one), or a
folder of runs searched for the latest earlier run of each GPU. Loaded and checked before
anything is measured; each GPU then gets its own pick.

A GPU is its UUID, else its host, index and model (reports.identity). A GPU with no earlier run
of its own is compared with the newest earlier run of its model, and the pick says so. "Earlier"
is the result's own time; a run without one (schema 1) counts as older than any dated run."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.reports.compare import check_comparable
from detect_caches.reports.identity import gpu_key, gpu_label, run_time
from detect_caches.reports.search import find_results, show


@dataclass
class Pick:
    """The baseline of one GPU: the result, where it came from, and how it was chosen."""

    result: dict
    path: Path | None
    how: str                  # one sentence: which run, and why


def _age(item: tuple[Path, dict]) -> tuple:
    when = run_time(item[1])
    return (when is not None, when or 0.0, str(item[0]))


@dataclass
class BaselineSource:
    """A baseline as given: one result for every GPU, or a folder of runs to pick from."""

    given: str
    single: dict | None = None
    single_path: Path | None = None
    runs: list[tuple[Path, dict]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # unreadable results in the folder
    notes: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, spec) -> "BaselineSource | None":
        """``spec``: None, a result dict, an object with ``.data`` (the API's Result), or a path."""
        from detect_caches.reports.result_json import read_result, validate_result
        if spec is None:
            return None
        data = getattr(spec, "data", spec)
        if isinstance(data, dict):
            import json
            try:
                copy = json.loads(json.dumps(data, allow_nan=False, default=str))
            except (ValueError, TypeError, RecursionError) as exc:
                raise InputError(f"the baseline is not a result: {exc}") from None
            return cls("the baseline given", single=validate_result(copy, "the baseline"))
        if not isinstance(spec, (str, Path)):
            raise InputError(f"the baseline must be a result, a result.json or a folder of runs, got "
                             f"{type(spec).__name__}")
        path = Path(spec)
        if path.is_dir() and not (path / "result.json").exists():
            src = cls(show(path))
            src.runs = find_results([path], src.skipped, src.notes)
            return src
        if not path.exists():
            raise InputError(f"the baseline {show(path)}: no such file or folder")
        return cls(show(path), single=read_result(path), single_path=path)

    def pick(self, current: dict, *, force: bool = False) -> Pick:
        """The baseline for ``current`` (a result, or ``{"device": {...}}`` before measuring)."""
        if self.single is not None:
            check_comparable(self.single, current, force=force)
            where = show(self.single_path) if self.single_path else self.given
            return Pick(self.single, self.single_path, f"{where} ({_when(self.single)})")
        model = current["device"].get("name")
        before = run_time(current) if current.get("created") else None
        mine = current.get("source_path")
        earlier = [(p, r) for p, r in self.runs if r["device"].get("name") == model
                   and (before is None or (run_time(r) or 0.0) < before)
                   and (mine is None or Path(p).resolve() != Path(mine).resolve())]
        if not earlier:
            raise InputError(f"{self.given} holds no earlier result of a {model}")
        key = gpu_key(current)
        own = [(p, r) for p, r in earlier if gpu_key(r, p) == key]
        if own:
            path, res = max(own, key=_age)
            return Pick(res, path, f"{show(path)} ({_when(res)}), the latest earlier run of this GPU")
        path, res = max(earlier, key=_age)
        return Pick(res, path, f"{show(path)} ({_when(res)}) of {gpu_label(res, path)}: no earlier run of "
                               f"this GPU under {self.given}, so the newest of its model")


def _when(res: dict) -> str:
    return str(res.get("created") or "") or "time unknown"


def device_of(facts) -> dict:
    """A live device's facts as the part of a result that identifies it."""
    return {"device": {"name": getattr(facts, "name", "?"), "uuid": getattr(facts, "uuid", ""),
                       "host": getattr(facts, "host", ""), "index": getattr(facts, "index", None)}}
