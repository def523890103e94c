"""The series history.png draws: for each level and figure (size, bandwidth, latency), each GPU's
runs in time order with the value, its reference, the band the check tolerates around it
(reference x (1 +- the smallest change the two runs could detect)) and the drift verdicts."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from detect_caches.reports.fmt import level_key
from detect_caches.reports.history import History, Run, level_keys
from detect_caches.reports.identity import run_time

FIGURES = (("capacity", "capacity_bytes"), ("bandwidth", "bandwidth_gbs"), ("latency", "latency_ns"))


@dataclass
class Point:
    when: datetime | int            # the run's time, or its place in time order when a run is undated
    value: float
    reference: float
    detectable: float | None        # relative half-width of the band (None: the reference run)
    drift: bool = False
    fails: bool = False
    change: float | None = None
    direction: str = ""
    newest: bool = False            # the GPU's newest run: the check's verdict is its


@dataclass
class Series:
    gpu: str                        # the GPU's label (reports.identity)
    points: list[Point] = field(default_factory=list)


def dated(history: History) -> bool:
    """Every run has its own time: the x axis is dates (else the runs' order)."""
    return all(run_time(r.result) is not None for r in all_runs(history))


def all_runs(history: History) -> list[Run]:
    return [r for gpus in history.models.values() for runs in gpus.values() for r in runs]


def _verdict(run: Run, key: str, quantity: str):
    if run.comparison is None:
        return None
    return next((v for v in run.comparison.verdicts if v.level == key and v.quantity == quantity), None)


def series(history: History, key: str, quantity: str, field_name: str) -> list[Series]:
    """Each GPU's points of one level's figure (GPUs without it are left out)."""
    use_dates = dated(history)
    order = {id(r): i for i, r in enumerate(sorted(all_runs(history), key=lambda r: (run_time(r.result) or 0.0)))}
    out = []
    for gpus in history.models.values():
        for label, runs in gpus.items():
            s = Series(label)
            for run in runs:
                lv = next((x for x in run.result["levels"] if level_key(x) == key), None)
                value = lv.get(field_name) if lv else None
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                when = datetime.fromtimestamp(run_time(run.result)) if use_dates else order[id(run)]
                v = _verdict(run, key, quantity)
                ref = v.baseline if v is not None and isinstance(v.baseline, (int, float)) else value
                s.points.append(Point(when, float(value), float(ref), v.detectable if v is not None else None,
                                      bool(v and v.drift), bool(v and v.fails(history.fail_on)),
                                      v.change if v is not None else None, v.direction if v is not None else "",
                                      run is runs[-1]))
            if s.points:
                out.append(s)
    return out


def panels(history: History) -> list[tuple[str, str, str, list[Series]]]:
    """(level key, quantity, field, series) for each level's figure that some run has."""
    keys = level_keys(all_runs(history))
    out = []
    for key in keys:
        for quantity, field_name in FIGURES:
            found = series(history, key, quantity, field_name)
            if found:
                out.append((key, quantity, field_name, found))
    return out
