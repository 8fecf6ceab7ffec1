"""``storeprobe compare BASE... NEW``: did the new run get slower than the base runs?

Kept apart from :mod:`storeprobe.cli` (which registers it and maps errors to exit codes)
so that each reads in one sitting. Every result file but the last (and every ``*.json``
of ``--baseline DIR``) holds base runs, the last the new run; each Result is one run. It
prints the comparison of :func:`storeprobe.comparison.compare_results` (levels, runs,
ratio, interval, verdict, the unmatched probes) on standard output and the summary on
standard error.

Exit codes: 0 no probe is slower beyond ``--fail-slower`` (or none was given), also when
some are inconclusive (named on standard error); 1 at least one is slower; 2 usage error
(a bad threshold, an unreadable results file, fewer than two files, or no probe of NEW
matching one of BASE: a gate that compared nothing must not pass); 3 some probe is
inconclusive and ``--fail-inconclusive`` was given (and none is slower).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from storeprobe import render
from storeprobe.comparison import compare_results, parse_threshold
from storeprobe.errors import ConfigurationError
from storeprobe.result import load_results

__all__ = ["add_compare_command", "run_compare"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3


def add_compare_command(
    commands: Any, formatter: Callable[[str], argparse.HelpFormatter]
) -> argparse.ArgumentParser:
    """Register ``compare`` on the ``commands`` subparsers; returns its parser."""
    compare: argparse.ArgumentParser = commands.add_parser(
        "compare",
        help="compare a new run with base runs; exit 1 on a regression (--fail-slower)",
        formatter_class=formatter,
        description="Match the probes of result files (target and client, operation, "
        "workload, streams, environment label; never the payload seed): every file but the "
        "last, and every *.json of --baseline DIR, holds base runs, the last file the new "
        "run; each result is one run. For each probe: the base and new levels (medians of "
        "the runs), the ratio new ÷ base with a 95 %% interval as wide as the runs differ "
        "from one another, and a verdict: slower, not slower, or inconclusive, which says "
        "how many runs would decide it. One base run against one new run is always "
        "inconclusive: keep several base runs (e.g. the last 5 runs of main). With "
        "--fail-slower, exit 1 when a probe is slower by more than the threshold (its "
        "whole interval below 1 − threshold); inconclusive probes exit 0 with a message, "
        "or 3 with --fail-inconclusive. Exit 2 when no probe matched.",
    )
    compare.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="results files: base runs first, the new run last (BASE... NEW)",
    )
    compare.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="a directory whose *.json results files are all base runs (then FILE may be "
        "the new run alone)",
    )
    compare.add_argument(
        "--fail-slower",
        metavar="PCT",
        help="exit 1 when a probe is slower than this: '5%%' or '0.05' (default: never fail)",
    )
    compare.add_argument(
        "--fail-inconclusive",
        action="store_true",
        help="exit 3 when a probe's verdict is inconclusive (default: exit 0 and say so)",
    )
    compare.add_argument(
        "--format",
        choices=render.REGRESSION_FORMATS,
        default="markdown",
        help="how to print the comparison",
    )
    compare.add_argument(
        "--unit",
        choices=render.RATE_UNITS,
        default="workload",
        help="rate unit: workload (KiB/s for objects under 1 MiB, MiB/s otherwise), auto "
        "(by magnitude), KiB/s, MiB/s or Mibit/s (all 1024-based); ops/s for head, list, "
        "delete",
    )
    return compare


def _base_files(args: argparse.Namespace) -> list[Path]:
    files: list[Path] = list(args.files[:-1])
    if args.baseline is not None:
        if not args.baseline.is_dir():
            raise ConfigurationError(
                f"--baseline {str(args.baseline)!r} is not a directory: give the directory "
                "that holds the base runs' results files (*.json)"
            )
        found = sorted(args.baseline.glob("*.json"))
        if not found:
            raise ConfigurationError(
                f"--baseline {str(args.baseline)!r} holds no *.json results file: save base "
                "runs there with 'storeprobe run ... --json DIR/NAME.json'"
            )
        files += found
    if not files:
        raise ConfigurationError(
            "compare needs base runs and a new run: 'storeprobe compare BASE... NEW' or "
            "'storeprobe compare --baseline DIR NEW'"
        )
    return files


def run_compare(args: argparse.Namespace) -> int:
    """Compare ``args.files[-1]`` with the base runs, print the report, return the exit code."""
    fail_slower = None if args.fail_slower is None else parse_threshold(args.fail_slower)
    base = [result for path in _base_files(args) for result in load_results(path)]
    new = load_results(args.files[-1])
    report = compare_results(base, new, fail_slower=fail_slower)
    print(render.render_regressions(report, args.format, args.unit))
    if not report.rows:
        steps = (
            f" ({report.excluded_steps} backup steps are never compared: one sample each)"
            if report.excluded_steps
            else ""
        )
        print(
            f"storeprobe: error: no probe of NEW matches one of BASE, 0 compared{steps}: "
            "check that both files hold the same probes (target URL and client, workloads, "
            "streams, environment labels), e.g. with 'storeprobe report BASE NEW'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if report.failed:
        assert fail_slower is not None
        _tell(
            f"storeprobe: {len(report.regressions)} of {len(report.rows)} probes slower by "
            f"more than {render.percent(fail_slower)}:",
            report.regressions,
        )
        return EXIT_FAILED
    if report.inconclusive:
        what = "failing (--fail-inconclusive)" if args.fail_inconclusive else "not failing"
        _tell(
            f"storeprobe: {len(report.inconclusive)} of {len(report.rows)} probes inconclusive, "
            f"{what}: too little evidence of how much runs differ to call them slower or not",
            report.inconclusive,
        )
        return EXIT_INCONCLUSIVE if args.fail_inconclusive else EXIT_OK
    return EXIT_OK


def _tell(heading: str, rows: Iterable[object]) -> None:
    """``heading`` on stderr, then the probes it is about, one indented line each."""
    print(heading, file=sys.stderr)
    for row in rows:
        print(f"  {row}", file=sys.stderr)
