"""The ``storeprobe`` command line: its commands (``run``, ``report``, ``sweep``,
``backup``, ``compare``) and the exit code each error maps to. With the other ``cli_``
modules (:mod:`storeprobe.cli_parser`, the arguments; :mod:`storeprobe.cli_probes`, what
``run`` and ``sweep`` make of them; :mod:`storeprobe.cli_backup`,
:mod:`storeprobe.cli_compare`, :mod:`storeprobe.cli_output`), the only modules that print
or exit.

Exit codes: 0 every probe succeeded, 1 a probe failed or the target refused (``compare``:
a probe slower beyond ``--fail-slower``; 3 an inconclusive one with
``--fail-inconclusive``), 2 usage error (bad arguments, options or workloads), 130
interrupted (SIGINT), 143 terminated (SIGTERM; the same cleanup first), 141 standard
output closed early (``storeprobe report FILE | head``).

Why one module (~440 lines): the commands' entry points and the printing and exit rules
they share (signals, notices, refused targets, a closed standard output) are the CLI's
contract with a shell, read together; parsing and each command's work are the other
``cli_`` modules.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from storeprobe import render
from storeprobe.cli_backup import run_backup
from storeprobe.cli_compare import run_compare
from storeprobe.cli_output import check_output, save
from storeprobe.cli_parser import PLAIN_CROWN, PLAIN_TIE, build_parser
from storeprobe.cli_probes import S3_MIN_PART as S3_MIN_PART
from storeprobe.cli_probes import (
    Bars,
    Chosen,
    check_counts,
    check_part_size,
    choose_targets,
    open_probes,
    parse_options,
    probe_keywords,
    progress_wanted,
    storage_options,
)
from storeprobe.distributed import cluster
from storeprobe.environment import check_label
from storeprobe.errors import ConfigurationError, ResultFormatError, StoreProbeError, TargetError
from storeprobe.mounts import memory_notice
from storeprobe.notices import Notice
from storeprobe.probe import Probe
from storeprobe.render import CROWN, TIE
from storeprobe.result import OPERATIONS, Result, Transfer
from storeprobe.resultset import ResultSet
from storeprobe.units import parse_size
from storeprobe.workload import Workload

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: standard output was closed early (``| head``): 128 + SIGPIPE, as shells report it
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so a terminated run (a CI
    job cancelled, ``timeout``, ``kill``) calls off its window and cleans up as an
    interrupted one does."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread while the command runs
    (left alone where SIGTERM is not at its default, or off the main thread)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@attrs.frozen
class _Default:
    """The target of ``storeprobe run`` without a URL: a fresh temporary directory."""

    directory: str
    chosen: Chosen
    #: the target's name across runs (``file://$TMPDIR``): the directory is new each time
    target_name: str
    #: a ``memory-tmpdir`` notice when the directory is in RAM (tmpfs), not on a disk
    on_memory: Notice | None

    @classmethod
    def make(cls, args: argparse.Namespace) -> _Default:
        """Create the directory and say where it is (on standard error)."""
        directory = tempfile.mkdtemp(prefix="storeprobe-local-")
        common, scoped = parse_options(args.option)
        chosen = Chosen(
            directory, directory, {**common, **scoped.get(1, {})}, args.client, args.label
        )
        on_memory = memory_notice(directory)
        where = "in memory (tmpfs)" if on_memory is not None else "on the local disk"
        print(f"probing a temporary directory {where}: {directory}", file=sys.stderr)
        return cls(directory, chosen, f"file://{Path(directory).parent}", on_memory)

    def mark(self, result: Result) -> Result:
        """``result`` with the target's name across runs, and the tmpfs notice if any."""
        result = attrs.evolve(result, target_name=self.target_name)
        if self.on_memory is not None:
            result = attrs.evolve(result, warnings=(*result.warnings, self.on_memory))
        return result


def _run(args: argparse.Namespace) -> int:
    workloads, chosen = _run_arguments(args)
    bars = Bars() if progress_wanted(args) else None
    default = _Default.make(args) if not chosen else None
    if default is not None:
        chosen = [default.chosen]
    results: list[Result] = []
    refused: dict[int, str] = {}  # index of a URL whose target refused → its redacted URL
    fleet = args.workers is not None or args.scheduler is not None
    if fleet:
        bars = None  # workers draw no progress: each runs in its own process
    try:
        probes = open_probes(args, chosen, bars, refused)
        _measure_targets(args, probes, workloads, fleet, bars, default, refused, results)
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
        if default is not None:
            shutil.rmtree(default.directory, ignore_errors=True)
    _print_run(args, results)
    if refused:
        _print_refused(args, refused, len(chosen), results)
        return EXIT_FAILED
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def _run_arguments(args: argparse.Namespace) -> tuple[list[Workload], list[Chosen]]:
    """``run``'s workloads and targets, every argument checked before anything is created
    (a temporary directory, a probe); no target: an empty list."""
    check_counts(args.streams, args.repeats, args.prep_streams, args.warmup)
    check_label(args.label)
    workloads = [Workload.parse(spec) for spec in (args.workload or ["small", "large"])]
    chosen = choose_targets(args, [*args.urls, *args.target])
    check_part_size(args.part_size, [target.url for target in chosen])
    parse_size(args.stage_above)
    if args.workers is not None and args.workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, not {args.workers}")
    if args.json is not None:
        check_output(args.json, "--json", "results")
    return workloads, chosen


def _measure_targets(
    args: argparse.Namespace,
    probes: Sequence[tuple[int, Probe]],
    workloads: Sequence[Workload],
    fleet: bool,
    bars: Bars | None,
    default: _Default | None,
    refused: dict[int, str],
    results: list[Result],
) -> None:
    """Every workload's upload and download with each probe (on one Dask cluster for all of
    them with ``fleet``); a target that refuses is reported, put in ``refused`` and left,
    and the others still run."""
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(cluster(args.workers, args.scheduler)) if fleet else None
        for index, probe in probes:
            if index in refused:
                continue
            try:
                for workload in workloads:
                    for operation in OPERATIONS:
                        _measure(args, probe, operation, workload, client, bars, default, results)
            except TargetError as exc:  # this target refused: the others still run
                if bars is not None:
                    bars.close()
                refused[index] = probe.target.url
                print(f"storeprobe: error: {exc}", file=sys.stderr)


def _measure(
    args: argparse.Namespace,
    probe: Probe,
    operation: Transfer,
    workload: Workload,
    client: Any,
    bars: Bars | None,
    default: _Default | None,
    results: list[Result],
) -> None:
    """One probe of ``run``, on Dask's ``client`` when given: its Result appended to
    ``results`` and saved (``--json``) as soon as measured, its line on standard error."""
    if bars is not None:
        bars.start(f"{operation} {workload.label} ({probe.target.url})")
    if client is not None:
        many = probe.distributed(args.workers, client=client)
        result = many.measure(operation, workload)
    else:
        result = probe.measure(operation, workload)
    if default is not None:
        result = default.mark(result)
    results.append(result)
    if args.json is not None:  # on disk as soon as measured
        save([result], args.json)
    if bars is not None:
        bars.close()
    print(f"  {render.result_line(result, args.unit)}", file=sys.stderr)


def _print_run(args: argparse.Namespace, results: list[Result]) -> None:
    """The table of ``run`` (and latencies, each worker's own figures), then the notices."""
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


def _print_refused(
    args: argparse.Namespace, refused: dict[int, str], targets: int, results: list[Result]
) -> None:
    """Which of several targets refused and were skipped (one target: its error said it
    all), and where the results measured are."""
    if targets > 1:
        kept = (
            f"; the {len(results)} results measured are in {args.json}"
            if args.json and results
            else ""
        )
        print(
            f"storeprobe: {len(refused)} of {targets} targets refused and were skipped: "
            f"{', '.join(refused.values())}{kept}",
            file=sys.stderr,
        )


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
        _save_charts(args, probes, steps)
    if args.html is not None:
        _write_html(args, results, probes, crown, tie)
    return EXIT_OK


def _save_charts(args: argparse.Namespace, probes: ResultSet, steps: list[Result]) -> None:
    """``report --plot IMAGE``: the probes' bar chart, and the backup steps' chart beside
    it (``IMAGE-backup``), or the one there is."""
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


def _write_html(
    args: argparse.Namespace, results: ResultSet, probes: ResultSet, crown: str, tie: str
) -> None:
    """``report --html FILE``: one self-contained HTML report of ``results``."""
    from storeprobe.html_report import html_report, run_command

    command = run_command(results) if len(probes) else None
    document = html_report(
        results, command=command, unit=args.unit, by=args.by, crown=crown, tie=tie, cli=True
    )
    args.html.write_text(document, encoding="utf-8")
    print(f"HTML report written to {args.html}", file=sys.stderr)


def _sweep(args: argparse.Namespace) -> int:
    check_counts(args.streams, args.repeats, args.prep_streams, args.warmup)
    workload = Workload.parse(args.workload)
    if args.json is not None:
        check_output(args.json, "--json", "results")
    if args.plot is not None:
        check_output(args.plot, "--plot", "image")
    (target,) = choose_targets(args, [args.url])
    check_part_size(args.part_size, [target.url])
    bars = Bars() if progress_wanted(args) else None
    measured: list[Result] = []
    try:
        probe = Probe.from_url(
            target.url,
            target.options,
            client=target.client,
            callback=bars.callback if bars is not None else None,
            **{**probe_keywords(args), "label": target.label},
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
        storage_options(args.option),
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
    parser = build_parser()
    args = parser.parse_args(argv)
    commands = {
        "run": _run,
        "report": _report,
        "sweep": _sweep,
        "backup": _backup,
        "compare": run_compare,
    }
    try:
        with _terminate_as_interrupt():
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
    except KeyboardInterrupt as exc:
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"storeprobe: {how}; cleanup ran for what was written", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
