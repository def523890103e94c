"""The Python API's checks over many results, on the command line's path: ``history`` (the runs
of each GPU in time order, each against its reference) and ``fleet`` (many GPUs of one model
side by side). Both write their files into a new folder when given ``out`` and return the
report the command line prints."""
from __future__ import annotations

from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.pipeline.api_analysis import _as_result, _tolerances


def _paths(paths) -> list[Path]:
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def history(paths, *, out=None, reference=None, capacity_tol=None, bandwidth_tol=None, latency_tol=None,
            fail_on: str = "worse"):
    """The runs of each GPU in ``paths`` (result.json files or folders searched for them) in
    time order, each judged against that GPU's reference (``reference``: ``first`` (None),
    ``previous`` (the run before each), ``median``, a result.json, or a date such as 2026-11-30:
    its last run on or before it). A
    reports.history.History: ``.drift`` (the newest run of some GPU fails), ``.skipped``
    (results that could not be read), ``.markdown()``, ``.to_dict()``. ``out``: a new folder
    for history.md, history.json and history.png."""
    from detect_caches.reports.history import Reference, build_history
    tolerances = _tolerances(capacity_tol, bandwidth_tol, latency_tol, fail_on)
    if not isinstance(reference, Reference):
        reference = Reference.parse(None if reference is None else str(reference))
    result = build_history(_paths(paths), reference=reference, **tolerances)
    if out is not None:
        from detect_caches.pipeline.outputs import claim_out_dir, release
        from detect_caches.reports.atomic import write_text_atomic
        from detect_caches.reports.history_plot import write_history_plot
        from detect_caches.reports.result_json import dumps
        folder = claim_out_dir(Path(out))
        try:
            write_text_atomic(folder / "history.md", result.markdown())
            write_text_atomic(folder / "history.json", dumps(result.to_dict()))
            write_history_plot(folder / "history.png", result)
        finally:
            release(folder)
    return result


def gather(results, said: list[str] | None = None) -> tuple[list[dict], list[str]]:
    """Results from Results, dicts, result.json paths or folders of them; and what could not be
    read (each a line), which a fleet report lists as GPUs it cannot speak for."""
    from detect_caches.reports.search import find_results
    items = [results] if isinstance(results, (str, Path, dict)) else list(results)
    found, paths, skipped, notes = [], [], [], []
    for item in items:
        if isinstance(item, (str, Path)):
            paths.append(Path(item))
        else:
            found.append(_as_result(item))
    for path, res in find_results(paths, skipped, notes, unique=False) if paths else []:
        res["source_path"] = str(path)
        found.append(res)
    if said is not None:
        said += [f"skipped {line}" for line in skipped[:5]] + notes
    return found, [f"unreadable {line}" for line in skipped]


def fleet(results, *, out=None, baseline=None, capacity_tol=None, bandwidth_tol=None, latency_tol=None,
          fail_on: str = "worse", force: bool = False, said: list[str] | None = None):
    """The fleet report over ``results`` (Results, dicts, result.json paths or folders of them;
    one GPU model; a GPU given twice counts with its newest result): outliers first, each
    level's distribution, the full table. ``baseline``: a result.json for every GPU, or a folder
    where each GPU's latest earlier run is taken. A reports.fleet_report.FleetReport
    (``.drift``, ``.failed``, ``.markdown()``, ``.to_dict()``, ``.csv()``). ``out``: a new folder
    for fleet.md, fleet.json, fleet.csv and fleet.png. What was skipped goes to ``said``."""
    from detect_caches.pipeline.fleet_run import build_fleet, write_fleet_files
    from detect_caches.reports.baseline import BaselineSource
    tolerances = _tolerances(capacity_tol, bandwidth_tol, latency_tol, fail_on)
    found, failed = gather(results, said)
    if not found and not failed:
        raise InputError("no results given")
    source = baseline if isinstance(baseline, BaselineSource) else BaselineSource.load(baseline)
    folder = None
    if out is not None:
        from detect_caches.pipeline.outputs import claim_out_dir
        folder = claim_out_dir(Path(out))
    try:
        report = build_fleet(found, failed, source=source, force=force, said=said, **tolerances)
        if folder is not None:
            write_fleet_files(report, folder)
        return report
    finally:
        if folder is not None:
            from detect_caches.pipeline.outputs import release
            release(folder)
