"""The ``storeprobe`` command line. With :mod:`storeprobe.cli_backup` and
:mod:`storeprobe.cli_compare`, the only modules that print or exit.

Exit codes: 0 every probe succeeded, 1 a probe failed or the target refused (``compare``:
a probe slower beyond ``--fail-slower``; 3 an inconclusive one with
``--fail-inconclusive``), 2 usage error (bad arguments, options or workloads), 130
interrupted, 141 standard output closed
early (``storeprobe report FILE | head``).

Over 400 lines because half of it is the argparse definitions with a help text for
every option.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from storeprobe import render
from storeprobe._version import __version__
from storeprobe.backends.client_choice import CLIENTS
from storeprobe.cli_backup import add_backup_command, run_backup
from storeprobe.cli_compare import add_compare_command, run_compare
from storeprobe.cli_output import check_output, save
from storeprobe.distributed import cluster
from storeprobe.environment import check_label
from storeprobe.errors import ConfigurationError, ResultFormatError, StoreProbeError, TargetError
from storeprobe.mounts import memory_notice
from storeprobe.named_targets import resolve
from storeprobe.notices import Notice
from storeprobe.probe import MAX_REPEATS, MAX_STREAMS, Probe
from storeprobe.progress import RateBar
from storeprobe.rclone_config import RcloneConfig
from storeprobe.redaction import redact_url
from storeprobe.render import CROWN, FORMATS, RATE_UNITS, TIE
from storeprobe.result import Result
from storeprobe.resultset import ResultSet
from storeprobe.settings import DEFAULT_PREP_STREAMS, MAX_PART_SIZE
from storeprobe.targets_file import TargetsFile
from storeprobe.units import MiB, format_size, parse_size
from storeprobe.workload import Workload

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: standard output was closed early (``| head``): 128 + SIGPIPE, as shells report it
EXIT_BROKEN_PIPE = 141
PLAIN_CROWN, PLAIN_TIE = "*", "~"
#: S3's smallest part (every part of a multipart upload but the last), in bytes
S3_MIN_PART = 5 * MiB


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where the help already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    return _HelpFormatter(prog, max_help_position=32)


def _unit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unit",
        choices=RATE_UNITS,
        default="auto",
        help="rate unit of tables and text: auto (by magnitude: KiB/s, MiB/s or GiB/s, so a "
        "figure has at most 4 digits before the point), workload (KiB/s for objects under "
        "1 MiB, MiB/s otherwise), KiB/s, MiB/s, GiB/s or Mibit/s (all 1024-based); figures "
        "show 3 to 4 significant digits",
    )


def _latency_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--latency",
        action="store_true",
        help="also print objects/s and per-request latency and time to first byte "
        "(p50, p90, p99 in ms) of each result",
    )


def _prep_streams_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prep-streams",
        type=int,
        default=DEFAULT_PREP_STREAMS,
        metavar="N",
        help="requests in flight for the untimed work around the timed windows (uploads "
        "before a download, size checks, deletes, cleanup); the windows keep --streams",
    )


def _probe_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by run and sweep: storage, client, label, seed, progress."""
    parser.add_argument(
        "--repeats", type=int, default=3, help="repetitions per probe; the best is reported"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        metavar="N",
        help="warm-up repetitions run first, exactly as the measured ones, and counted in no "
        "figure (1 pays the first connections' TCP and TLS handshakes outside the figures)",
    )
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="[N:]KEY=VALUE",
        help="a storage option for the fsspec filesystem (VALUE parsed as JSON if it can be); "
        "repeatable. KEY=VALUE applies to every target; N:KEY=VALUE only to the N-th "
        "(counted from 1: the URLs in order, then each --target), over KEY=VALUE and the "
        "options of a named target. Secrets are never printed or written",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the file of named targets ([targets.NAME] tables; default: storeprobe.toml in "
        "the working directory, else [tool.storeprobe] of its pyproject.toml)",
    )
    parser.add_argument(
        "--rclone-config",
        type=Path,
        metavar="FILE",
        help="rclone's configuration file, for targets written NAME:PATH (default: the file "
        "rclone reads: RCLONE_CONFIG, else ~/.config/rclone/rclone.conf)",
    )
    parser.add_argument(
        "--client",
        choices=["auto", "obstore", "s3fs", "gcsfs", "adlfs"],
        default="auto",
        help="client for s3://, gs:// and Azure URLs: auto (s3:// and Azure: obstore when "
        "installed and the options translate, else s3fs or adlfs; gs://: gcsfs), obstore, "
        "s3fs, gcsfs or adlfs (each URL of another protocol keeps auto)",
    )
    parser.add_argument("--label", help="a name for this environment, e.g. home-laptop")
    parser.add_argument(
        "--part-size",
        metavar="SIZE",
        help="bytes per part (or byte range) when one object is split across --streams, "
        "e.g. 5MiB or 64MiB; S3 takes 5 MiB to 5 GiB per part, every part but the last at "
        "least 5 MiB (default: about a quarter of the object per stream)",
    )
    _prep_streams_option(parser)
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the payload bytes, to reproduce a run's bytes exactly (default: a fresh "
        "random seed per measurement, recorded in the results)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw a progress bar on standard error, at most 10 times a second and never "
        "from inside the timed window (default: when standard error is a terminal)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the results as JSON, each as its probe ends (an interrupt or a "
        "failing target keeps what was measured); results already in FILE are kept",
    )
    _unit_option(parser)
    _latency_option(parser)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="storeprobe",
        description="Measure how fast a storage uploads and downloads, through fsspec.",
    )
    parser.add_argument("--version", action="version", version=f"storeprobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="probe a storage (default: a temporary directory on the local disk)",
        formatter_class=_help_formatter,
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
        help="fsspec URLs (s3://bucket/dir, /mnt/disk), rclone remote paths (wasabi:bench/dir) "
        "or names of storeprobe.toml targets; several print a target column (default: a "
        "temporary local directory)",
    )
    run.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME",
        help="a named target of storeprobe.toml (or an rclone remote path), after the URLs; "
        "repeatable",
    )
    run.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=[1],
        metavar="N",
        help="requests in flight; several values run one probe each",
    )
    run.add_argument(
        "--workload",
        action="append",
        metavar="SPEC",
        help="small (256 × 16 KiB), large (1 × 256 MiB), COUNTxSIZE such as 1000x4KiB, or "
        "COUNTxSIZES with sizes drawn from the seed: 1000xlognormal:16KiB,1.5 (median, "
        "sigma[, maximum]) or 1000xuniform:4KiB-1MiB; repeatable (default: small and large)",
    )
    run.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    run.add_argument(
        "--stage-above",
        default="1GiB",
        metavar="SIZE",
        help="stage one object at least this large through a local file in TMPDIR, at any "
        "stream count, so memory holds only what is in flight",
    )
    run.add_argument("--no-verify", action="store_true", help="skip checking downloaded bytes")
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run each probe on N Dask workers at once (a LocalCluster of N processes, or "
        "the first N workers of --scheduler); --streams is per worker; needs "
        "storeprobe[distributed]",
    )
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run each probe on every worker (or --workers N of them) of this Dask "
        "scheduler, e.g. tcp://10.0.0.1:8786",
    )
    run.add_argument(
        "--per-worker",
        action="store_true",
        help="with --workers or --scheduler, also print each worker's own figure",
    )
    _probe_options(run)

    report = commands.add_parser(
        "report",
        help="comparison tables (and a chart) from saved results",
        formatter_class=_help_formatter,
        description="Read result files written by 'run --json' and print comparison tables. "
        "Each (target, environment) keeps its own figure; the fastest of a column is "
        "crowned only when significantly faster than the runner-up, else marked as a tie.",
    )
    report.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="result files (JSON) to compare"
    )
    report.add_argument(
        "--format", choices=FORMATS, default="markdown", help="how to print the tables"
    )
    report.add_argument(
        "--by",
        choices=["environment", "probe"],
        default="environment",
        help="environment: one table per probe, environments as columns; probe: one table, "
        "one row per target and environment, probes as columns with each stream count "
        "side by side",
    )
    report.add_argument(
        "--plain",
        action="store_true",
        help=f"mark winners with {PLAIN_CROWN} and ties with {PLAIN_TIE}, not {CROWN} and {TIE}",
    )
    report.add_argument(
        "--plot", type=Path, metavar="IMAGE", help="also save a bar chart (.png or .svg)"
    )
    report.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write one self-contained HTML report (tables, charts, environments, "
        "warnings, the command that reproduces the run) that works offline",
    )
    _unit_option(report)
    _latency_option(report)

    sweep = commands.add_parser(
        "sweep",
        help="throughput against the number of streams",
        formatter_class=_help_formatter,
        description="Run one probe at several stream counts and name the saturation point: "
        "the fewest streams reaching 95 % of the best throughput.",
    )
    sweep.add_argument(
        "url",
        metavar="URL",
        help="the fsspec URL to probe, an rclone remote path or a storeprobe.toml target",
    )
    sweep.add_argument(
        "--operation",
        choices=["upload", "download"],
        default="download",
        help="which transfer to sweep",
    )
    sweep.add_argument(
        "--workload",
        default="small",
        metavar="SPEC",
        help="small (256 × 16 KiB), large (1 × 256 MiB), COUNTxSIZE such as 1000x4KiB, or "
        "COUNTxSIZES such as 1000xlognormal:16KiB,1.5 or 1000xuniform:4KiB-1MiB",
    )
    sweep.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=[1, 2, 4, 8, 16, 32],
        metavar="N",
        help="the stream counts to try",
    )
    sweep.add_argument(
        "--plot",
        type=Path,
        metavar="IMAGE",
        help="also save a chart of throughput per stream count",
    )
    _probe_options(sweep)
    add_backup_command(commands, _help_formatter)
    add_compare_command(commands, _help_formatter)
    return parser


_SCOPED = re.compile(r"^(\d+):(.+)$")


def _parse_options(pairs: Sequence[str]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """``-o`` pairs: those for every target, and those scoped to target N (``N:KEY=VALUE``)."""
    common: dict[str, Any] = {}
    scoped: dict[int, dict[str, Any]] = {}
    for pair in pairs:
        key, separator, text = pair.partition("=")
        if not separator or not key:
            raise ConfigurationError(
                f"storage option {key!r} must be KEY=VALUE (or N:KEY=VALUE for target N)"
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        match = _SCOPED.match(key)
        if match is None:
            common[key] = value
        else:
            scoped.setdefault(int(match[1]), {})[match[2]] = value
    return common, scoped


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    common, scoped = _parse_options(pairs)
    if scoped:
        raise ConfigurationError(
            f"-o {min(scoped)}:KEY=VALUE names one target, which only run and sweep take: "
            "write -o KEY=VALUE"
        )
    return common


@attrs.frozen
class _Chosen:
    """One target of the command line: the URL opened, its options, client and label."""

    spec: str  # as written
    url: str
    options: dict[str, Any] = attrs.field(repr=False)
    client: str
    label: str | None


def _choose_targets(args: argparse.Namespace, specs: Sequence[str]) -> list[_Chosen]:
    """Each target of the command line resolved (a URL, a storeprobe.toml target, an rclone
    remote) with its options: the named target's, then ``-o KEY=VALUE``, then ``-o N:...``.
    Raises :class:`ConfigurationError` before anything runs."""
    common, scoped = _parse_options(args.option)
    count = max(len(specs), 1)
    for index in scoped:
        if not 1 <= index <= count:
            raise ConfigurationError(
                f"-o {index}:KEY=VALUE names target {index}, but {len(specs)} "
                f"{'target was' if len(specs) == 1 else 'targets were'} given: count from 1, "
                "the URLs in order, then each --target"
            )
    targets = TargetsFile.load(args.config)
    loaded: list[RcloneConfig] = []

    def rclone() -> RcloneConfig:
        if not loaded:
            loaded.append(RcloneConfig.load(args.rclone_config))
        return loaded[0]

    chosen: list[_Chosen] = []
    for index, spec in enumerate(specs, start=1):
        named = resolve(spec, targets, rclone)
        if named is None:
            chosen.append(
                _Chosen(spec, spec, {**common, **scoped.get(index, {})}, args.client, args.label)
            )
            continue
        print(
            f"target {spec}: {redact_url(named.url)} (from {named.source})",
            file=sys.stderr,
        )
        for note in named.notes:
            print(f"  {note}", file=sys.stderr)
        client = named.client if args.client == "auto" else args.client
        options = {**named.options, **common, **scoped.get(index, {})}
        label = args.label if args.label is not None else named.label
        chosen.append(_Chosen(spec, named.url, options, client, label))
    return chosen


def _check_counts(streams: Sequence[int], repeats: int, prep_streams: int, warmup: int = 0) -> None:
    """Refuse bad counts before anything is created (a temporary directory, a probe)."""
    for count in streams:
        if not 1 <= count <= MAX_STREAMS:
            raise ConfigurationError(
                f"--streams {count} is out of range: use 1 to {MAX_STREAMS}, e.g. 1, 4 or 16"
            )
    if not 1 <= prep_streams <= MAX_STREAMS:
        raise ConfigurationError(
            f"--prep-streams {prep_streams} is out of range: use 1 to {MAX_STREAMS} "
            f"(default {DEFAULT_PREP_STREAMS})"
        )
    if repeats < 1:
        raise ConfigurationError(f"--repeats {repeats} is out of range: use 1 or more, e.g. 3")
    if not 0 <= warmup <= MAX_REPEATS:
        raise ConfigurationError(
            f"--warmup {warmup} is out of range: use 0 (no warm-up repeat) to {MAX_REPEATS}, e.g. 1"
        )


def _probe_keywords(args: argparse.Namespace) -> dict[str, Any]:
    keywords: dict[str, Any] = {
        "repeats": args.repeats,
        "warmup": args.warmup,
        "label": args.label,
        "prep_streams": args.prep_streams,
    }
    if args.seed is not None:
        keywords["seed"] = args.seed
    if args.part_size is not None:
        keywords["part_size"] = args.part_size
    return keywords


def _check_part_size(text: str | None, urls: Sequence[str]) -> None:
    """Refuse a ``--part-size`` that is not a size, or one S3 would refuse, before any
    probe opens (S3: 5 MiB to 5 GiB per part, every part but the last at least 5 MiB)."""
    if text is None:
        return
    try:
        size = parse_size(text)
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"--part-size {text!r} is not a size ({exc}): write it like 5MiB or 64MiB"
        ) from None
    if size > MAX_PART_SIZE:
        raise ConfigurationError(
            f"--part-size {text} is above {format_size(MAX_PART_SIZE)}, the largest part S3 "
            "accepts: use at most 5GiB"
        )
    if size < S3_MIN_PART and any(url.startswith(("s3://", "s3a://")) for url in urls):
        raise ConfigurationError(
            f"--part-size {text} is below S3's minimum of 5 MiB per part (every part but "
            "the last must be at least 5 MiB): use --part-size 5MiB or more"
        )
    if size < 1:
        raise ConfigurationError(f"--part-size {text} must be at least 1 byte, e.g. 5MiB")


def _progress_wanted(args: argparse.Namespace) -> bool:
    return bool(sys.stderr.isatty()) if args.progress is None else bool(args.progress)


class _Bars:
    """One bar per measurement on standard error (:class:`storeprobe.progress.RateBar`:
    1024-based units, the window's own rate), fed from outside the timed window."""

    def __init__(self) -> None:
        self.callback = RateBar(file=sys.stderr)

    def start(self, description: str) -> None:
        self.callback.start(description)

    def close(self) -> None:
        self.callback.close()


def _open_probes(
    args: argparse.Namespace,
    targets: Sequence[_Chosen],
    bars: _Bars | None,
    refused: dict[int, str],
) -> list[tuple[int, Probe]]:
    """A probe per target and stream count, each with its target's index. A bad URL raises
    here, before anything runs; a target that refuses as it opens (an sftp server that is
    down) is reported, put in ``refused`` (index → redacted URL) and skipped."""
    probes: list[tuple[int, Probe]] = []
    for index, target in enumerate(targets):
        url = target.url
        protocol = url.split("://", 1)[0]
        client = target.client if target.client in CLIENTS.get(protocol, ()) else "auto"
        try:
            probes += [
                (
                    index,
                    Probe.from_url(
                        url,
                        target.options,
                        client=client,
                        streams=streams,
                        timeout=args.timeout,
                        stage_above=args.stage_above,
                        verify=not args.no_verify,
                        callback=bars.callback if bars is not None else None,
                        **{**_probe_keywords(args), "label": target.label},
                    ),
                )
                for streams in args.streams
            ]
        except TargetError as exc:
            refused[index] = redact_url(url)
            print(f"storeprobe: error: {exc}", file=sys.stderr)
    return probes


def _run(args: argparse.Namespace) -> int:
    _check_counts(args.streams, args.repeats, args.prep_streams, args.warmup)
    check_label(args.label)
    workloads = [Workload.parse(spec) for spec in (args.workload or ["small", "large"])]
    chosen = _choose_targets(args, [*args.urls, *args.target])
    _check_part_size(args.part_size, [target.url for target in chosen])
    parse_size(args.stage_above)
    if args.workers is not None and args.workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, not {args.workers}")
    if args.json is not None:
        check_output(args.json, "--json", "results")
    bars = _Bars() if _progress_wanted(args) else None
    temporary: str | None = None
    target_name: str | None = None  # the default local target's name across runs
    on_memory: Notice | None = None  # the default local target is RAM (tmpfs), not a disk
    urls = [target.url for target in chosen]
    if not urls:
        temporary = tempfile.mkdtemp(prefix="storeprobe-local-")
        urls = [temporary]
        common, scoped = _parse_options(args.option)
        chosen = [
            _Chosen(temporary, temporary, {**common, **scoped.get(1, {})}, args.client, args.label)
        ]
        target_name = f"file://{Path(temporary).parent}"
        on_memory = memory_notice(temporary)
        where = "in memory (tmpfs)" if on_memory is not None else "on the local disk"
        print(f"probing a temporary directory {where}: {temporary}", file=sys.stderr)
    results: list[Result] = []
    refused: dict[int, str] = {}  # index of a URL whose target refused → its redacted URL
    fleet = args.workers is not None or args.scheduler is not None
    if fleet:
        bars = None  # workers draw no progress: each runs in its own process
    try:
        probes = _open_probes(args, chosen, bars, refused)
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(cluster(args.workers, args.scheduler)) if fleet else None
            for index, probe in probes:
                if index in refused:
                    continue
                try:
                    for workload in workloads:
                        for operation in ("upload", "download"):
                            if bars is not None:
                                bars.start(f"{operation} {workload.label} ({probe.target.url})")
                            if client is not None:
                                many = probe.distributed(args.workers, client=client)
                                result = many.measure(operation, workload)
                            else:
                                result = probe.measure(operation, workload)
                            if target_name is not None:
                                result = attrs.evolve(result, target_name=target_name)
                            if on_memory is not None:
                                result = attrs.evolve(
                                    result, warnings=(*result.warnings, on_memory)
                                )
                            results.append(result)
                            if args.json is not None:  # on disk as soon as measured
                                save([result], args.json)
                            if bars is not None:
                                bars.close()
                            print(f"  {render.result_line(result, args.unit)}", file=sys.stderr)
                except TargetError as exc:  # this target refused: the others still run
                    if bars is not None:
                        bars.close()
                    refused[index] = probe.target.url
                    print(f"storeprobe: error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        if args.json is not None and results:
            print(
                f"storeprobe: the {len(results)} results measured are in {args.json}",
                file=sys.stderr,
            )
        raise
    finally:
        if bars is not None:
            bars.close()
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    collected = ResultSet(results)
    if results:
        print(render.render_tables([render.results_table(results, args.unit)]))
        if args.latency:
            print("\n" + render.render_tables([render.latency_table(results)]))
    if args.per_worker:
        members = [
            member.result
            for result in results
            if result.fleet is not None
            for member in result.fleet.members
            if member.result is not None
        ]
        if members:
            print("\neach worker (its own window, its own clock):")
            print(render.render_tables([render.results_table(members, args.unit)]))
    _print_notices(collected)
    if refused:
        if len(urls) > 1:  # one target: its error said it all
            kept = (
                f"; the {len(results)} results measured are in {args.json}"
                if args.json and results
                else ""
            )
            print(
                f"storeprobe: {len(refused)} of {len(urls)} targets refused and were skipped: "
                f"{', '.join(refused.values())}{kept}",
                file=sys.stderr,
            )
        return EXIT_FAILED
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def _print_notices(results: ResultSet) -> None:
    for result in results:
        for line in render.notice_lines(result, cli=True):
            print(line, file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    if args.plot is not None:
        check_output(args.plot, "--plot", "image")
    if args.html is not None:
        check_output(args.html, "--html", "html")
    results = ResultSet.load(*args.files)
    if not len(results):
        raise ConfigurationError("the result files hold no results")
    crown, tie = (PLAIN_CROWN, PLAIN_TIE) if args.plain else (CROWN, TIE)
    steps = [result for result in results if result.step is not None]
    probes = results.filter(lambda result: result.step is None) if steps else results
    if steps:  # scenario steps: the table backup comparisons publish
        print(render.render_tables(render.backup_tables(steps), args.format))
    if len(probes):
        print(probes.table(by=args.by, format=args.format, unit=args.unit, crown=crown, tie=tie))
        busy = render.busy_table(list(probes))
        if busy is not None:
            print("\n" + render.render_tables([busy], args.format))
        if args.latency:
            print("\n" + render.render_tables([render.latency_table(list(probes))], args.format))
    if args.plot is not None:
        from storeprobe.plot import plot_backup, plot_probes

        charts = []
        if any(r.samples for r in probes):
            by: Literal["streams", "environment"] = (
                "environment" if args.by == "environment" else "streams"
            )
            charts.append(plot_probes(probes, unit=args.unit, by=by))
        if any(r.samples for r in steps):
            charts.append(plot_backup(steps))
        for index, chart in enumerate(charts):
            path = args.plot
            if index:  # a second chart (backup steps beside probes) beside the first
                path = args.plot.with_name(f"{args.plot.stem}-backup{args.plot.suffix}")
            chart.savefig(path)
            print(f"chart written to {path}", file=sys.stderr)
    if args.html is not None:
        from storeprobe.html_report import html_report, run_command

        command = run_command(results) if len(probes) else None
        document = html_report(
            results, command=command, unit=args.unit, by=args.by, crown=crown, tie=tie, cli=True
        )
        args.html.write_text(document, encoding="utf-8")
        print(f"HTML report written to {args.html}", file=sys.stderr)
    return EXIT_OK


def _sweep(args: argparse.Namespace) -> int:
    _check_counts(args.streams, args.repeats, args.prep_streams, args.warmup)
    workload = Workload.parse(args.workload)
    if args.json is not None:
        check_output(args.json, "--json", "results")
    if args.plot is not None:
        check_output(args.plot, "--plot", "image")
    (target,) = _choose_targets(args, [args.url])
    _check_part_size(args.part_size, [target.url])
    bars = _Bars() if _progress_wanted(args) else None
    measured: list[Result] = []
    try:
        probe = Probe.from_url(
            target.url,
            target.options,
            client=target.client,
            callback=bars.callback if bars is not None else None,
            **{**_probe_keywords(args), "label": target.label},
        )
        if bars is not None:
            bars.start(f"{args.operation} {workload.label} sweep ({probe.target.url})")
        for count in args.streams:  # Probe.sweep, saving each stream count as it ends
            measured.append(probe.with_streams(count).measure(args.operation, workload))
            if args.json is not None:
                save(measured[-1:], args.json)
    finally:
        if bars is not None:
            bars.close()
    results = ResultSet(measured)
    print(render.render_tables([render.results_table(measured, args.unit)]))
    if args.latency:
        print("\n" + render.render_tables([render.latency_table(measured)]))
    _print_notices(results)
    saturation = results.sweep_saturation()
    if saturation is not None:
        print(saturation)
    if args.plot is not None:
        from storeprobe.plot import plot_streams

        plot_streams(results, unit=args.unit).savefig(args.plot)
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def _backup(args: argparse.Namespace) -> int:
    check_label(args.label)
    output: Path | None = args.json
    if output is not None:
        check_output(output, "--json", "results")
    code, results = run_backup(
        args,
        _options(args.option),
        record=None if output is None else lambda steps: save(steps, output),
    )
    _print_notices(results)
    return code


def _silence_stdout() -> None:
    """After a closed pipe (``storeprobe report FILE | head``): send further output nowhere,
    so the interpreter's final flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a file (captured)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``storeprobe`` and ``python -m storeprobe``; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    commands = {
        "run": _run,
        "report": _report,
        "sweep": _sweep,
        "backup": _backup,
        "compare": run_compare,
    }
    try:
        return commands[args.command](args)
    except (ConfigurationError, ResultFormatError) as exc:
        print(f"storeprobe: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreProbeError as exc:
        print(f"storeprobe: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except FileNotFoundError as exc:
        if args.command not in ("report", "compare"):
            raise
        print(f"storeprobe: error: no such results file: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("storeprobe: interrupted; cleanup ran for what was written", file=sys.stderr)
        return 130
