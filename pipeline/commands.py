"""The verdict subcommands: `compare`, `history` and `fleet`, and the options every check shares
(tolerances written 3% or 0.03, --fail-on worse|any, --json). Files are written before anything
is printed, so a reader that stops early never costs a file. Exit 0: no change the check fails
on; 1: drift (--fail-on worse: a capacity, line or sector size that changed, a level that
vanished or appeared, a bandwidth or latency that got worse; any: every change); 2: the check
itself failed or is incomplete (a result that cannot be read)."""
from __future__ import annotations

import argparse
from pathlib import Path

from measure.errors import InputError
from pipeline.console import say

EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2


def tolerance(text: str) -> float:
    from reports.verdict import parse_tolerance
    try:
        return parse_tolerance(text, "the tolerance")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_check_options(p: argparse.ArgumentParser, *, force: bool = True) -> None:
    from reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, DEFAULT_LATENCY_TOL
    p.add_argument("--capacity-tol", type=tolerance, default=DEFAULT_CAPACITY_TOL, metavar="TOL",
                   help=f"relative capacity change that counts as drift, when the runs' repeatabilities do not "
                        f"explain it: 3%% or 0.03 (default {DEFAULT_CAPACITY_TOL * 100:.0f}%%)")
    p.add_argument("--bandwidth-tol", type=tolerance, default=DEFAULT_BANDWIDTH_TOL, metavar="TOL",
                   help=f"the same for bandwidths (default {DEFAULT_BANDWIDTH_TOL * 100:.0f}%%)")
    p.add_argument("--latency-tol", type=tolerance, default=DEFAULT_LATENCY_TOL, metavar="TOL",
                   help=f"the same for latencies (default {DEFAULT_LATENCY_TOL * 100:.0f}%%)")
    p.add_argument("--fail-on", choices=("worse", "any"), default="worse",
                   help="worse (default): exit 1 on a changed capacity, line or sector, a level gained or lost, "
                        "a worse bandwidth or latency, and report improvements; any: exit 1 on every change")
    if force:
        p.add_argument("--force", action="store_true", help="compare results of different device models anyway")


def tolerances(args) -> dict:
    return dict(capacity_tol=args.capacity_tol, bandwidth_tol=args.bandwidth_tol, latency_tol=args.latency_tol,
                fail_on=args.fail_on)


def dumps(data) -> str:
    from reports.result_json import dumps as result_dumps
    return result_dumps(data).rstrip("\n")


def finish_run(result, args) -> int:
    """Print the result (its files are written already), its comparison, its doubts; the code."""
    from reports.markdown import summary_table
    if args.json:
        say(result.to_json().rstrip("\n"))
    else:
        say(summary_table(result.data))
        if result.out:
            say(f"report: {result.out / 'report.md'} (and report.html, bandwidth.png)")
    cmp = result.data.get("comparison")
    if cmp is not None:
        say(cmp["markdown"], err=args.json)
    doubts = result.data.get("doubts") or []
    for doubt in doubts:
        say(f"detect-caches: doubt: {doubt}", err=True)
    if doubts and not getattr(args, "accept_incomplete", False):
        where = f" (the files are in {result.out})" if result.out else ""
        raise InputError(f"result incomplete: {len(doubts)} doubt(s) above{where}; --accept-incomplete "
                         f"accepts it")
    if cmp is None:
        return EXIT_OK
    return EXIT_DRIFT if cmp["failed"] else EXIT_OK


def cmd_compare(args) -> int:
    """compare BASELINE CURRENT (pipeline.cli_parser defines its arguments)."""
    from pipeline.api import compare
    cmp = compare(args.baseline, args.current, force=args.force, **tolerances(args))
    say(dumps(cmp.to_dict()) if args.json else cmp.markdown().rstrip("\n"))
    return EXIT_DRIFT if cmp.failed else EXIT_OK


def cmd_history(args) -> int:
    """history PATHS... (pipeline.cli_parser defines its arguments)."""
    from reports.history import Reference, build_history
    history = build_history(args.paths, reference=Reference.parse(args.reference), **tolerances(args))
    text = history.markdown()
    if args.out:
        from pipeline.outputs import claim_out_dir, release
        from reports.atomic import write_text_atomic
        from reports.history_plot import write_history_plot
        out = claim_out_dir(args.out)
        try:
            write_text_atomic(out / "history.md", text)
            write_text_atomic(out / "history.json", dumps(history.to_dict()) + "\n")
            write_history_plot(out / "history.png", history)
        finally:
            release(out)
    say(dumps(history.to_dict()) if args.json else text.rstrip("\n"))
    if args.out:
        say(f"detect-caches: history: {args.out / 'history.md'}", err=True)
    return _skipped(history.skipped) or (EXIT_DRIFT if history.drift else EXIT_OK)


def _skipped(skipped: list[str]) -> int:
    """Unreadable results: each named on stderr (five at most); the check is incomplete (exit 2)."""
    for line in skipped[:5]:
        say(f"detect-caches: skipped {line}", err=True)
    if len(skipped) > 5:
        say(f"detect-caches: ... and {len(skipped) - 5} more result.json files that could not be read", err=True)
    if skipped:
        say(f"detect-caches: error: {len(skipped)} result(s) could not be read; the check is incomplete", err=True)
    return EXIT_ERROR if skipped else 0


def cmd_fleet(args) -> int:
    """fleet RESULTS... (pipeline.cli_parser defines its arguments)."""
    from pipeline.fleet_run import finish_fleet
    from reports.baseline import BaselineSource
    from reports.search import find_results
    skipped: list[str] = []
    notes: list[str] = []
    found = find_results(args.results, skipped, notes, unique=False)
    results = []
    for path, res in found:
        res["source_path"] = str(path)
        results.append(res)
    source = BaselineSource.load(args.baseline)
    for line in skipped[:5]:
        say(f"detect-caches: skipped {line}", err=True)
    for line in notes:
        say(f"detect-caches: {line}", err=True)
    out = None
    if args.out:
        from pipeline.outputs import claim_out_dir
        out = claim_out_dir(args.out)
    try:
        # an unreadable result is a GPU the report cannot speak for: listed, and exit 2, as in a node run
        return finish_fleet(results, args, out, [f"unreadable {line}" for line in skipped], source=source)
    finally:
        if out is not None:
            from pipeline.outputs import release
            release(out)

