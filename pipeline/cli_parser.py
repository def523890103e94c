"""The command line's parser: the main job's options, then one subcommand each for analyze,
compare, history, fleet, run and benchmark (argparse subparsers: the usage lists them, and every
argument says what it does). Errors are one line and exit 2 (pipeline.cli_args.Parser)."""
from __future__ import annotations

import argparse
from pathlib import Path

from detect_caches.pipeline.cli_args import Parser, positive
from detect_caches.pipeline.options import DEFAULT_BUDGET

DESCRIPTION = ("Characterize a GPU's cache hierarchy: adaptive bandwidth and latency sweeps, changepoint "
               "analysis, a report (report.md, report.html, result.json, measurements.csv, bandwidth.png). "
               "Without a command it measures: --gpu INDEX, or --simulate PROFILE without a GPU.")
EPILOG = "`detect-caches COMMAND --help` explains each command."


def verbose(p: argparse.ArgumentParser, default=0) -> None:
    p.add_argument("-v", "--verbose", action="count", default=default,
                   help="say more on stderr: -v each step, -vv details for debugging")


def main_options(p: argparse.ArgumentParser) -> None:
    from detect_caches.pipeline.commands import add_check_options
    src = p.add_mutually_exclusive_group()
    src.add_argument("--gpu", metavar="INDEX", help="measure this GPU; `all` or a list such as 0,2,5 "
                                                    "measures each at once and writes a node summary")
    src.add_argument("--simulate", metavar="PROFILE", help="a simulated GPU: h200, mi300x, a100, h100, v100, a40, "
                                                           "l40, mi100, mi210, rx6900xt or a profile JSON file; a "
                                                           "comma list simulates a node")
    p.add_argument("--sim-index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="output folder (must not exist yet, or be empty; default "
                                             "detect-caches-results/<device>-<time>)")
    p.add_argument("--baseline", type=Path, help="compare with this result.json, or with each GPU's latest earlier "
                                                  "run in this folder (checked before measuring); exit 1 on drift")
    p.add_argument("--accept-incomplete", action="store_true",
                   help="accept a result with doubts (a level missing, a sweep the budget cut short, a level of "
                        "low confidence): exit 0 or 1 instead of 2")
    p.add_argument("--json", action="store_true", help="print result.json to stdout instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress")
    verbose(p)
    p.add_argument("--budget", type=positive(int), default=DEFAULT_BUDGET,
                   help=f"most kernel measurements, bandwidth and latency together (default {DEFAULT_BUDGET}, at least 60)")
    p.add_argument("--grid-multiplier", type=positive(int), default=4,
                   help="programs per SM/CU in the shared sweep (default 4, the seed's; at most 64)")
    p.add_argument("--sweeps", default="private,shared", help="which sweeps to run (default private,shared)")
    p.add_argument("--max-working-set", type=positive(float), metavar="MIB",
                   help="cap the largest working set (MiB, at least 16)")
    p.add_argument("--timing", choices=("events", "device"), default="events",
                   help="events: CUDA events and the load-iteration regression (default); device: "
                        "warm-up then a timed phase read from an in-kernel clock (one wave only)")
    p.add_argument("--no-peaks", action="store_true",
                   help="skip the peak probes (tuned launches inside each plateau)")
    p.add_argument("--no-latency", action="store_true",
                   help="skip the pointer-chase latency sweep and its sector and line probes")
    p.add_argument("--carveouts", nargs="?", const="all", metavar="all|LIST",
                   help="NVIDIA (sm_70 on): after the run, the L1 again under each shared-memory carveout the GPU "
                        "offers (all, the default) or those listed in KiB (0,32,100,228), and the unified "
                        "L1/shared array they share")
    add_check_options(p)


def _analyze(p: argparse.ArgumentParser) -> None:
    p.add_argument("csv", type=Path, help="a measurements.csv")
    p.add_argument("--vendor", choices=("nvidia", "amd"), help="the hardware's vendor (default nvidia)")
    p.add_argument("--device-json", type=Path, help="device facts (a result.json works too)")
    p.add_argument("--out", type=Path, help="output folder (default: <csv name>-analysis beside the CSV)")
    p.add_argument("--json", action="store_true", help="print result.json to stdout")


def _compare(p: argparse.ArgumentParser) -> None:
    from detect_caches.pipeline.commands import add_check_options
    p.add_argument("baseline", type=Path, help="the earlier result.json (the reference)")
    p.add_argument("current", type=Path, help="the result.json to judge against it")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    add_check_options(p)


def _history(p: argparse.ArgumentParser) -> None:
    from detect_caches.pipeline.commands import add_check_options
    p.add_argument("paths", type=Path, nargs="+", help="result.json files or folders of runs")
    p.add_argument("--out", type=Path, help="write history.md, history.json and history.png into this new folder")
    p.add_argument("--reference", metavar="first|previous|median|FILE|DATE",
                   help="each GPU's reference: its first run (default: a regression stays one until the "
                        "reference moves), the run before each (previous), the median of its earlier runs, "
                        "a result.json, or its last run on or before a date such as 2026-11-30")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    add_check_options(p, force=False)


def _fleet(p: argparse.ArgumentParser) -> None:
    from detect_caches.pipeline.commands import add_check_options
    p.add_argument("results", type=Path, nargs="+", help="result.json files (one per GPU), or folders of them")
    p.add_argument("--out", type=Path, help="also write fleet.md, fleet.json, fleet.csv and fleet.png into this new folder")
    p.add_argument("--baseline", type=Path, help="also compare every GPU with this result.json, or with its own "
                                                 "latest earlier run in this folder")
    p.add_argument("--json", action="store_true", help="print fleet.json to stdout")
    p.add_argument("--accept-incomplete", action="store_true", help="accept results that carry doubts")
    add_check_options(p)


COMMANDS = (
    ("analyze", _analyze, "detect levels in recorded measurements (no GPU, no torch)",
     "Detect levels in recorded measurements and write the report (no GPU, no torch)."),
    ("compare", _compare, "regression check between two result.json files (exit 1 on drift)",
     "Regression check between two result.json files: a Markdown table on stdout (or --json); exit 0 if "
     "within tolerance and repeatability, 1 on drift, 2 on bad input."),
    ("history", _history, "the runs of each GPU in time order, each against its reference",
     "The runs of each GPU in time order (folders searched for result.json): a Markdown table and a plot "
     "per level and figure; exit 1 when the newest run of a GPU fails against its reference, 2 when a "
     "result cannot be read."),
    ("fleet", _fleet, "many GPUs of one model side by side, outliers first",
     "Fleet report from result.json files of GPUs of one model: outliers first, each level's distribution, "
     "the full table (fleet.csv); exit 0 if no outliers, 1 if any, 2 on bad or unreadable input."),
    ("run", None, "the seed benchmark's single configuration", "The seed's single configuration."),
    ("benchmark", None, "the seed benchmark's fixed sweep (CSV files)", "The seed's fixed sweep; CSVs under --results-dir."),
)


def build_parser() -> argparse.ArgumentParser:
    from detect_caches.pipeline.seed_cli import benchmark_arguments, run_arguments
    from detect_caches._version import __version__
    p = Parser(prog="detect-caches", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("-V", "--version", action="version", version=f"detect-caches {__version__}")
    main_options(p)
    sub = p.add_subparsers(dest="command", parser_class=Parser,
                           title="commands (none: measure a GPU, as the options above say)")
    for name, add, short, long in COMMANDS:
        q = sub.add_parser(name, help=short, description=long, prog=f"detect-caches {name}")
        add = add or {"run": run_arguments, "benchmark": benchmark_arguments}[name]
        add(q)
        verbose(q, default=argparse.SUPPRESS)     # -v after the command adds to one before it
    return p
