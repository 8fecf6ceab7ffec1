"""``storeprobe compare BASE NEW``: did the new run get slower than the base run?

Kept apart from :mod:`storeprobe.cli` (which registers it and maps errors to exit codes)
so that each reads in one sitting. It prints the comparison of
:func:`storeprobe.comparison.compare_results` (medians, ratio, interval, verdict, the
unmatched probes) on standard output and a one-line summary on standard error.

Exit codes: 0 no probe regressed beyond ``--fail-slower`` (or none was given), 1 at
least one did, 2 usage error (a bad threshold, an unreadable results file, or no probe
of NEW matching one of BASE: a gate that compared nothing must not pass).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storeprobe import render
from storeprobe.comparison import compare_results, parse_threshold
from storeprobe.result import load_results

__all__ = ["add_compare_command", "run_compare"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_compare_command(
    commands: Any, formatter: Callable[[str], argparse.HelpFormatter]
) -> argparse.ArgumentParser:
    """Register ``compare`` on the ``commands`` subparsers; returns its parser."""
    compare: argparse.ArgumentParser = commands.add_parser(
        "compare",
        help="compare a new run with a base run; exit 1 on a regression (--fail-slower)",
        formatter_class=formatter,
        description="Match the probes of two result files (target and client, operation, "
        "workload, streams, environment label; never the payload seed) and print, for "
        "each, the base and new medians, the ratio new ÷ base with its bootstrap 95 % "
        "interval, and a verdict: faster, slower, no significant difference, or "
        "inconclusive with fewer than 3 repeats on a side. Probes found in one file only "
        "are listed. With --fail-slower, exit 1 when a probe is slower by more than the "
        "threshold with its whole interval beyond it. Exit 2 when no probe matched.",
    )
    compare.add_argument("base", type=Path, metavar="BASE", help="results file of the base run")
    compare.add_argument("new", type=Path, metavar="NEW", help="results file of the new run")
    compare.add_argument(
        "--fail-slower",
        metavar="PCT",
        help="exit 1 when a probe is slower than this: '5%%' or '0.05' (default: never fail)",
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


def run_compare(args: argparse.Namespace) -> int:
    """Compare ``args.new`` with ``args.base``, print the report, return the exit code."""
    fail_slower = None if args.fail_slower is None else parse_threshold(args.fail_slower)
    base = load_results(args.base)
    new = load_results(args.new)
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
        print(
            f"storeprobe: {len(report.regressions)} of {len(report.rows)} probes slower by "
            f"more than {render.percent(fail_slower)}:",
            file=sys.stderr,
        )
        for row in report.regressions:
            print(f"  {row}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
