"""The ``storeprobe`` command line. The only module that prints or exits.

Exit codes: 0 every probe succeeded, 1 a probe failed or the target refused, 2 usage
error (bad arguments, options or workloads).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from storeprobe.errors import ConfigurationError, StoreProbeError
from storeprobe.probe import Probe
from storeprobe.result import Result, dump_results
from storeprobe.units import format_size
from storeprobe.workload import Workload

__all__ = ["main", "render_table"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    from storeprobe import __version__

    parser = argparse.ArgumentParser(
        prog="storeprobe",
        description="Measure how fast a storage uploads and downloads, through fsspec.",
    )
    parser.add_argument("--version", action="version", version=f"storeprobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="probe a storage (default: a temporary directory on the local disk)",
        description=(
            "Upload and download each workload and print a table of best-of-N throughput "
            "in 1024-based units (KiB/s for objects under 1 MiB, MiB/s otherwise). Without "
            "a URL, a fresh temporary directory on the local disk is probed."
        ),
    )
    run.add_argument("url", nargs="?", help="fsspec URL, e.g. s3://bucket/dir or /mnt/disk")
    run.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=[1],
        metavar="N",
        help="requests in flight; several values run one probe each (default: 1)",
    )
    run.add_argument("--repeats", type=int, default=3, help="repetitions per probe (default: 3)")
    run.add_argument(
        "--workload",
        action="append",
        metavar="SPEC",
        help="small (256 × 16 KiB), large (1 × 256 MiB) or COUNTxSIZE such as 1000x4KiB; "
        "repeatable (default: small and large)",
    )
    run.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage option for the fsspec filesystem (VALUE parsed as JSON if it can be); "
        "repeatable. Secrets are never printed or written",
    )
    run.add_argument("--label", help="a name for this environment, e.g. home-laptop")
    run.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per request (default: 300)"
    )
    run.add_argument("--no-verify", action="store_true", help="skip checking downloaded bytes")
    run.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    return parser


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise ConfigurationError(f"storage option {key!r} must be KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def render_table(results: Sequence[Result]) -> str:
    """A markdown table: probe, streams, best and median throughput, unit, repeats."""
    rows = [("probe", "workload", "streams", "best", "median", "unit", "ok/repeats")]
    for result in results:
        unit = result.rate_unit
        if result.samples:
            scale = 1024 if unit == "KiB/s" else 1024**2
            best = f"{result.bytes_per_s / scale:.2f}"
            median = f"{result.median_bytes_per_s / scale:.2f}"
        else:
            best = median = "failed"
        streams = str(result.streams)
        if result.effective_streams != result.streams:
            streams += f" ({result.effective_streams} effective)"
        rows.append(
            (
                result.probe,
                f"{result.workload.count} × {format_size(result.workload.size)}",
                streams,
                best,
                median,
                unit,
                f"{len(result.samples)}/{len(result.samples) + len(result.errors)}",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    numeric = {2, 3, 4, 6}

    def line(row: Sequence[str]) -> str:
        cells = [
            cell.rjust(width) if index in numeric else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(cells) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (width + 1) + ":") if index in numeric else ("-" * (width + 2))
            for index, width in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([line(rows[0]), rule, *(line(row) for row in rows[1:])])


def _run(args: argparse.Namespace) -> int:
    workloads = [Workload.parse(spec) for spec in (args.workload or ["small", "large"])]
    options = _options(args.option)
    temporary: str | None = None
    url = args.url
    if url is None:
        temporary = tempfile.mkdtemp(prefix="storeprobe-local-")
        url = temporary
        print(f"probing a temporary directory on the local disk: {temporary}", file=sys.stderr)
    results: list[Result] = []
    try:
        for streams in args.streams:
            probe = Probe.from_url(
                url,
                options,
                streams=streams,
                repeats=args.repeats,
                timeout=args.timeout,
                verify=not args.no_verify,
                label=args.label,
            )
            for workload in workloads:
                for operation in ("upload", "download"):
                    result = probe.measure(operation, workload)
                    results.append(result)
                    print(f"  {result}", file=sys.stderr)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    print(render_table(results))
    for result in results:
        for warning in result.warnings:
            print(f"warning: {result.probe}: {warning}", file=sys.stderr)
        for error in result.errors:
            print(f"error: {result.probe}: {error}", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(dump_results(results) + "\n")
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``storeprobe`` and ``python -m storeprobe``; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ConfigurationError as exc:
        print(f"storeprobe: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreProbeError as exc:
        print(f"storeprobe: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("storeprobe: interrupted; cleanup ran for what was written", file=sys.stderr)
        return 130
