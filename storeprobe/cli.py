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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fsspec.callbacks import Callback

from storeprobe.errors import ConfigurationError, ResultFormatError, StoreProbeError
from storeprobe.probe import Probe
from storeprobe.report import CROWN, ResultSet
from storeprobe.result import Result
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
    run.add_argument(
        "urls",
        nargs="*",
        metavar="URL",
        help="fsspec URLs, e.g. s3://bucket/dir or /mnt/disk (default: a temporary local dir)",
    )
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
    run.add_argument(
        "--client",
        choices=["auto", "obstore", "s3fs"],
        default="auto",
        help="S3 client for s3:// URLs: auto (obstore when installed and the options "
        "translate, else s3fs), obstore or s3fs (default: auto)",
    )
    run.add_argument("--label", help="a name for this environment, e.g. home-laptop")
    run.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per request (default: 300)"
    )
    run.add_argument(
        "--stage-above",
        default="1GiB",
        metavar="SIZE",
        help="stage one split object at least this large through a local file in TMPDIR, "
        "so memory holds only the parts in flight (default: 1GiB)",
    )
    run.add_argument("--no-verify", action="store_true", help="skip checking downloaded bytes")
    run.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the results as JSON; results already in FILE are kept",
    )

    report = commands.add_parser(
        "report",
        help="comparison tables (and a chart) from saved results",
        description="Read result files written by 'run --json' and print comparison tables.",
    )
    report.add_argument("files", nargs="+", type=Path, metavar="FILE")
    report.add_argument("--format", choices=["markdown", "csv"], default="markdown")
    report.add_argument(
        "--by",
        choices=["environment", "probe"],
        default="environment",
        help="environment: one table per probe, environments as columns, winner crowned; "
        "probe: one table, targets × probes with each stream count side by side",
    )
    report.add_argument("--plain", action="store_true", help="mark winners with * not 👑")
    report.add_argument(
        "--plot", type=Path, metavar="IMAGE", help="also save a bar chart (.png or .svg)"
    )

    sweep = commands.add_parser(
        "sweep",
        help="throughput against the number of streams",
        description="Run one probe at several stream counts and name the saturation point: "
        "the fewest streams reaching 95 %% of the best throughput.",
    )
    sweep.add_argument("url", metavar="URL")
    sweep.add_argument("--operation", choices=["upload", "download"], default="download")
    sweep.add_argument("--workload", default="small", metavar="SPEC")
    sweep.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32], metavar="N")
    sweep.add_argument("--repeats", type=int, default=3)
    sweep.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE")
    sweep.add_argument("--client", choices=["auto", "obstore", "s3fs"], default="auto")
    sweep.add_argument("--label")
    sweep.add_argument("--json", type=Path, metavar="FILE")
    sweep.add_argument("--plot", type=Path, metavar="IMAGE")
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


class _Progress(Callback):  # type: ignore[misc]  # fsspec ships no type hints
    """A one-line progress display on standard error (terminals only)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""
        self.started = time.monotonic()

    def set_size(self, size: int | None) -> None:
        super().set_size(size)
        self.started = time.monotonic()

    def call(self, *args: Any, **kwargs: Any) -> None:
        if not self.size:
            return
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.value / elapsed / 1024**2
        percent = 100 * self.value / self.size
        print(f"\r  {self.name}: {percent:5.1f} % {rate:9.2f} MiB/s", end="", file=sys.stderr)
        if self.value >= self.size:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)


def _progress() -> _Progress | None:
    return _Progress() if sys.stderr.isatty() else None


def _run(args: argparse.Namespace) -> int:
    workloads = [Workload.parse(spec) for spec in (args.workload or ["small", "large"])]
    options = _options(args.option)
    temporary: str | None = None
    urls = list(args.urls)
    if not urls:
        temporary = tempfile.mkdtemp(prefix="storeprobe-local-")
        urls = [temporary]
        print(f"probing a temporary directory on the local disk: {temporary}", file=sys.stderr)
    progress = _progress()
    results = ResultSet()
    try:
        probes = [
            Probe.from_url(
                url,
                options,
                client=args.client if url.startswith(("s3://", "s3a://")) else "auto",
                streams=streams,
                repeats=args.repeats,
                timeout=args.timeout,
                stage_above=args.stage_above,
                verify=not args.no_verify,
                label=args.label,
                callback=progress,
            )
            for url in urls
            for streams in args.streams
        ]
        for probe in probes:
            for workload in workloads:
                for operation in ("upload", "download"):
                    if progress is not None:
                        progress.name = f"{operation} {workload.label} ({probe.target.url})"
                    result = probe.measure(operation, workload)
                    results.add(result)
                    print(f"  {result}", file=sys.stderr)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    print(render_table(list(results)))
    _print_problems(results)
    if args.json is not None:
        results.save(args.json)
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def _print_problems(results: ResultSet) -> None:
    for result in results:
        for warning in result.warnings:
            print(f"warning: {result.probe}: {warning}", file=sys.stderr)
        for error in result.errors:
            print(f"error: {result.probe}: {error}", file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    results = ResultSet.load(*args.files)
    if not len(results):
        raise ConfigurationError("the result files hold no results")
    crown = "*" if args.plain else CROWN
    print(results.table(by=args.by, format=args.format, crown=crown))
    if args.plot is not None:
        from storeprobe.plot import plot_probes

        plot_probes(results).savefig(args.plot)
        print(f"chart written to {args.plot}", file=sys.stderr)
    return EXIT_OK


def _sweep(args: argparse.Namespace) -> int:
    workload = Workload.parse(args.workload)
    probe = Probe.from_url(
        args.url,
        _options(args.option),
        client=args.client,
        repeats=args.repeats,
        label=args.label,
        callback=_progress(),
    )
    results = probe.sweep(args.operation, workload, streams=args.streams)
    print(render_table(list(results)))
    _print_problems(results)
    saturation = results.saturation()
    if saturation is not None:
        print(f"saturation: {saturation} stream(s) reach 95 % of the best throughput")
    if args.json is not None:
        results.save(args.json)
    if args.plot is not None:
        from storeprobe.plot import plot_streams

        plot_streams(results).savefig(args.plot)
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``storeprobe`` and ``python -m storeprobe``; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    commands = {"run": _run, "report": _report, "sweep": _sweep}
    try:
        return commands[args.command](args)
    except (ConfigurationError, ResultFormatError) as exc:
        print(f"storeprobe: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreProbeError as exc:
        print(f"storeprobe: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except FileNotFoundError as exc:
        if args.command != "report":
            raise
        print(f"storeprobe: error: no such results file: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("storeprobe: interrupted; cleanup ran for what was written", file=sys.stderr)
        return 130
