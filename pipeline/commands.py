"""The verdict subcommands: `compare`, `history` and `fleet`, and the options every check shares
(tolerances written 3% or 0.03, --fail-on worse|any, --json). Files are written before anything
is printed, so a reader that stops early never costs a file. Exit 0: no change the check fails
on; 1: drift (--fail-on worse: a capacity, line or sector size that changed, a level that
vanished or appeared, a bandwidth or latency that got worse; any: every change); 2: the check
itself failed or is incomplete (a result that cannot be read)."""
from __future__ import annotations

import argparse

from detect_caches.errors import InputError
from detect_caches.pipeline.console import say

EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2


def tolerance(text: str) -> float:
    from detect_caches.reports.verdict import parse_tolerance
    try:
        return parse_tolerance(text, "the tolerance")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_check_options(p: argparse.ArgumentParser, *, force: bool = True) -> None:
    from detect_caches.reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, DEFAULT_LATENCY_TOL
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
    from detect_caches.reports.result_json import dumps as result_dumps
    return result_dumps(data).rstrip("\n")


def finish_run(result, args) -> int:
    """Print the result (its files are written already), its comparison, its doubts; the code."""
    from detect_caches.reports.markdown import summary_table
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
    from detect_caches.pipeline.api import compare
    cmp = compare(args.baseline, args.current, force=args.force, **tolerances(args))
    say(dumps(cmp.to_dict()) if args.json else cmp.markdown().rstrip("\n"))
    return EXIT_DRIFT if cmp.failed else EXIT_OK


def cmd_history(args) -> int:
    """history PATHS... (pipeline.cli_parser defines its arguments)."""
    from detect_caches.pipeline.api_checks import history
    result = history(args.paths, out=args.out, reference=args.reference, **tolerances(args))
    say(dumps(result.to_dict()) if args.json else result.markdown().rstrip("\n"))
    if args.out:
        say(f"detect-caches: history: {args.out / 'history.md'}", err=True)
    return _skipped(result.skipped) or (EXIT_DRIFT if result.drift else EXIT_OK)


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
    from detect_caches.pipeline.api_checks import fleet
    from detect_caches.pipeline.fleet_run import print_fleet
    said: list[str] = []
    try:
        # an unreadable result is a GPU the report cannot speak for: listed, and exit 2, as in a node run
        report = fleet(args.results, out=args.out, baseline=args.baseline, force=args.force, said=said,
                       **tolerances(args))
    finally:
        for line in said:
            say(f"detect-caches: {line}", err=True)
    return print_fleet(report, args, args.out)
