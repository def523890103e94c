"""The history of GPUs across driver and firmware updates: every result found under the given
files and folders, grouped by device model and GPU (reports.identity), each GPU's runs in time
order, each run judged against that GPU's reference with `compare`'s rule: its first run (the
default), a run the user names (``--reference FILE`` or ``DATE``: the GPU's last run on or
before it), the median of the runs before it, or the run before it (``previous``: a regression
that persists then passes from its second run on). Against the others a regression that persists
stays a regression until a new reference is chosen. The check fails (exit 1) when the newest run of a GPU fails
against its reference; a result that cannot be read makes it incomplete (exit 2)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.reports.compare import Comparison, compare_results, environment_changes
from detect_caches.reports.fmt import level_key
from detect_caches.reports.identity import gpu_key, gpu_label, identified, parse_when, run_time
from detect_caches.reports.search import find_results, show


@dataclass
class Reference:
    """How each GPU's reference run is chosen: ``first``, ``previous``, ``median``, a date, or files."""

    kind: str = "first"
    when: float | None = None
    files: list[tuple[Path, dict]] = field(default_factory=list)
    text: str = "first run"

    @classmethod
    def parse(cls, text: str | None) -> "Reference":
        from detect_caches.reports.result_json import read_result
        if text in (None, "", "first"):
            return cls()
        if text == "median":
            return cls("median", text="median of the earlier runs")
        if text == "previous":      # each run against the one before it: a regression that persists
            return cls("previous", text="previous run")     # passes from its second run on
        if Path(text).exists():
            return cls("file", files=[(Path(text), read_result(text))], text=show(text))
        when = parse_when(text)
        if when is None:
            raise InputError(f"--reference takes first, previous, median, a result.json or a date such as 2026-11-30, "
                             f"got {text!r}")
        return cls("date", when=when, text=f"last run on or before {text}")


@dataclass
class Run:
    path: Path
    result: dict
    verdict: str = "first run"
    comparison: Comparison | None = None
    changes: list[str] = field(default_factory=list)
    reference: str = ""             # which run (or median) it was judged against

    @property
    def failed(self) -> bool:
        return self.comparison is not None and self.comparison.failed


@dataclass
class History:
    models: dict[str, dict[str, list[Run]]]   # model -> GPU key -> runs in time order
    reference: Reference = field(default_factory=Reference)
    fail_on: str = "worse"
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def newest(self) -> list[Run]:
        return [runs[-1] for gpus in self.models.values() for runs in gpus.values()]

    @property
    def drift(self) -> bool:
        """The newest run of some GPU fails against that GPU's reference."""
        return any(run.failed for run in self.newest())

    def markdown(self) -> str:
        from detect_caches.reports.history_text import history_markdown
        return history_markdown(self)

    def to_dict(self) -> dict:
        gpus = []
        for model, by_gpu in self.models.items():
            for runs in by_gpu.values():
                last = runs[-1]
                gpus.append({"model": model, "gpu": gpu_label(last.result, last.path), "runs": len(runs),
                             "newest": show(last.path), "created": last.result.get("created") or None,
                             "verdict": last.verdict, "fails": last.failed, "reference": last.reference or None,
                             "comparison": last.comparison.to_dict() if last.comparison else None})
        return {"reference": self.reference.text, "fail_on": self.fail_on, "failed": self.drift,
                "incomplete": bool(self.skipped), "gpus": gpus, "skipped": self.skipped, "notes": self.notes}


def _pick(runs: list[Run], i: int, ref: Reference) -> tuple[dict | None, str]:
    """The reference result for run ``i`` of one GPU, and what it is."""
    first = runs[0]
    if ref.kind == "median":
        if i == 0:
            return None, ""
        from detect_caches.reports.fleet import fleet_median
        return fleet_median([r.result for r in runs[:i]]), f"median of {i} earlier run(s)"
    if ref.kind == "previous":
        return (None, "") if i == 0 else (runs[i - 1].result, f"previous run, {runs[i - 1].result.get('created') or show(runs[i - 1].path)}")
    if ref.kind == "date":
        dated = [r for r in runs if (run_time(r.result) or 0.0) and run_time(r.result) <= ref.when]
        chosen = dated[-1] if dated else first
        note = "" if dated else " (none on or before the date: its first run)"
        return (None if chosen is runs[i] else chosen.result), f"{chosen.result.get('created') or show(chosen.path)}{note}"
    if ref.kind == "file":
        key = gpu_key(first.result, first.path)
        own = [f for f in ref.files if gpu_key(f[1], f[0]) == key]
        model = [f for f in ref.files if f[1]["device"].get("name") == first.result["device"].get("name")]
        if own or model:
            path, res = (own or model)[0]
            same = Path(path).resolve() == Path(runs[i].path).resolve()
            return (None if same else res), show(path)
    return (None if i == 0 else first.result), f"first run, {first.result.get('created') or show(first.path)}"


def _order(item: tuple[Path, dict]) -> tuple:
    when = run_time(item[1])
    return (when is not None, when or 0.0, str(item[0]))


def build_history(paths: list[Path], *, capacity_tol: float, bandwidth_tol: float, latency_tol: float | None = None,
                  reference: Reference | None = None, fail_on: str = "worse") -> History:
    skipped: list[str] = []
    notes: list[str] = []
    found = find_results(paths, skipped, notes)
    ref = reference or Reference()
    models: dict[str, dict[str, list[Run]]] = {}
    for path, res in sorted(found, key=_order):
        key = gpu_key(res, path)
        models.setdefault(res["device"].get("name", "?"), {}).setdefault(key, []).append(Run(path, res))
    undated = sum(1 for _, r in found if run_time(r) is None)
    if undated:
        notes.append(f"{undated} run(s) carry no time of their own (schema 1): their time is unknown; they are "
                     f"placed before the dated runs of their GPU, in path order (never by file time)")
    strangers = sum(1 for _, r in found if not identified(r))
    if strangers:
        notes.append(f"{strangers} run(s) name neither a UUID nor a host: each is kept apart as a GPU of its own")
    if ref.kind == "file":
        covered = {f[1]["device"].get("name") for f in ref.files}
        others = [m for m in models if m not in covered]
        if others:
            notes.append(f"the reference {ref.text} is a run of {', '.join(sorted(map(show, covered)))}: the GPUs "
                         f"of {', '.join(map(show, others))} are judged against their first runs")
    if ref.kind == "date":
        early = [gpu_label(runs[0].result, runs[0].path) for by_gpu in models.values() for runs in by_gpu.values()
                 if not any(0.0 < (run_time(r.result) or 0.0) <= ref.when for r in runs)]
        if early:
            notes.append(f"no run of {', '.join(early)} is on or before the reference date: judged against its first run")
    tols = dict(capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol, latency_tol=latency_tol, fail_on=fail_on)
    for by_gpu in models.values():
        for runs in by_gpu.values():
            for i, run in enumerate(runs):
                base, what = _pick(runs, i, ref)
                if base is None:
                    run.verdict = "first run" if ref.kind in ("median", "previous") else \
                        "reference" + (" (first run)" if i == 0 else "")
                    continue
                cmp = compare_results(base, run.result, **tols)
                cmp.baseline_label = what
                run.comparison, run.changes, run.reference = cmp, environment_changes(base, run.result), what
                drifting = [v for v in cmp.verdicts if v.drift]
                said = run.changes + cmp.explained + [f"{d}: {'drift, ' if v.fails(fail_on) else ''}{v.direction}"
                                                      for d, v in zip(cmp.drifted, drifting)]
                run.verdict = ("DRIFT" if cmp.failed else "ok") + (f" ({'; '.join(said)})" if said else "")
    return History(models, ref, fail_on, skipped, notes)


def level_keys(runs: list[Run]) -> list[str]:
    keys: list[str] = []
    for run in runs:
        keys += [level_key(lv) for lv in run.result["levels"] if level_key(lv) not in keys]
    return keys
