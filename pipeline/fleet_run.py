"""The end of every route that yields many results (a node run, a torchrun fleet, the `fleet`
subcommand): each GPU's own baseline picked, the fleet report built, its files written, then
printed, and the exit code: 2 when a GPU has no result or a result carries doubts (unless
accepted), 1 when the check fails, else 0."""
from __future__ import annotations

from pathlib import Path

from detect_caches.errors import DeviceError
from detect_caches.pipeline.console import say

EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2


def build_fleet(results: list[dict], failed: list[str], *, source=None, same_time: bool = False, force: bool = False,
                said: list[str] | None = None, capacity_tol: float, bandwidth_tol: float,
                latency_tol: float | None = None, fail_on: str = "worse"):
    """The fleet report over ``results``, each GPU against its own baseline from ``source`` (a
    reports.baseline.BaselineSource, or None); ``failed``: GPUs without a result, each a line."""
    from detect_caches.reports.fleet import SAME_TIME_CONTEXT, build_fleet_report
    from detect_caches.reports.identity import gpu_label
    if not results:
        raise DeviceError("no GPU produced a result: " + "; ".join(failed))
    picks = {}
    if source is not None:
        for res in results:
            picks[gpu_label(res, res.get("source_path"))] = source.pick(res, force=force)
        if said is not None:
            said += [f"baseline folder: skipped {line}" for line in source.skipped[:3]]
    return build_fleet_report(results, capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol,
                              latency_tol=latency_tol, failed=failed,
                              context=SAME_TIME_CONTEXT if same_time else "", baselines=picks,
                              fail_on=fail_on, force=force)


def write_fleet_files(report, out: Path) -> None:
    """fleet.md, fleet.json, fleet.csv and fleet.png into ``out`` (claimed by the caller)."""
    from detect_caches.reports.atomic import write_text_atomic
    from detect_caches.reports.fleet_plot import write_fleet_plot
    from detect_caches.reports.result_json import dumps_rows
    write_text_atomic(out / "fleet.md", report.markdown())
    write_text_atomic(out / "fleet.json", dumps_rows(report.to_dict()))
    write_text_atomic(out / "fleet.csv", report.csv())
    write_fleet_plot(out / "fleet.png", report)


def finish_fleet(results: list[dict], args, out: Path | None, failed: list[str], *, same_time: bool = False,
                 source=None) -> int:
    """Fleet report over ``results`` into ``out`` (claimed already), printed; the exit code."""
    said: list[str] = []
    report = build_fleet(results, failed, source=source, same_time=same_time,
                         force=bool(getattr(args, "force", False)), said=said,
                         capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol,
                         latency_tol=getattr(args, "latency_tol", None), fail_on=getattr(args, "fail_on", "worse"))
    for line in said:
        say(f"detect-caches: {line}", err=True)
    if out is not None:
        write_fleet_files(report, out)
    return print_fleet(report, args, out)


def print_fleet(report, args, out: Path | None) -> int:
    """The report on stdout (its files are written already), doubts on stderr; the exit code."""
    from detect_caches.reports.identity import gpu_label
    from detect_caches.reports.result_json import dumps_rows
    json_out = getattr(args, "json", False)
    say(dumps_rows(report.to_dict()).rstrip("\n") if json_out else report.markdown())
    if out is not None:
        say(f"fleet report: {out / 'fleet.md'}", err=json_out)
    doubtful = [(gpu_label(r, r.get("source_path")), d) for r in report.results for d in r.get("doubts", [])]
    for label, doubt in doubtful:
        say(f"detect-caches: {label}: doubt: {doubt}", err=True)
    if report.failed:
        say(f"detect-caches: error: {len(report.failed)} GPU(s) without a result; the check is incomplete", err=True)
        return EXIT_ERROR
    if doubtful and not getattr(args, "accept_incomplete", False):
        say(f"detect-caches: error: result incomplete: {len({d[0] for d in doubtful})} GPU(s) carry doubts "
            f"(above); --accept-incomplete accepts them", err=True)
        return EXIT_ERROR
    return EXIT_DRIFT if report.drift else EXIT_OK
