"""The argument parser of the ``storeprobe`` command line: ``run``, ``report`` and
``sweep`` defined here with a help text for every option, ``backup`` and ``compare``
registered from :mod:`storeprobe.cli_backup` and :mod:`storeprobe.cli_compare`.

The commands themselves are :mod:`storeprobe.cli`; what ``run`` and ``sweep`` turn their
arguments into, :mod:`storeprobe.cli_probes`. ``docs/cli.md`` is checked against this
parser (tests/test_docs.py): every option it defines is documented there. Each command's
options are added in the order ``--help`` shows them, one small function per group of
related options (``_probe_options`` and ``_add_run`` call theirs in that order).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from storeprobe._version import __version__
from storeprobe.cli_backup import add_backup_command
from storeprobe.cli_compare import add_compare_command
from storeprobe.render import CROWN, FORMATS, RATE_UNITS, TIE
from storeprobe.settings import DEFAULT_PREP_STREAMS

__all__ = ["PLAIN_CROWN", "PLAIN_TIE", "build_parser"]

#: the marks of ``report --plain``: a winner, a tie
PLAIN_CROWN, PLAIN_TIE = "*", "~"


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
    """Options shared by run and sweep: repeats, storage, label, how a probe runs, output."""
    _repeat_options(parser)
    _storage_options(parser)
    parser.add_argument("--label", help="a name for this environment, e.g. home-laptop")
    _transfer_options(parser)
    _output_options(parser)


def _repeat_options(parser: argparse.ArgumentParser) -> None:
    """How many times a probe runs: measured and warm-up repetitions."""
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


def _storage_options(parser: argparse.ArgumentParser) -> None:
    """What the storage is opened with: options, named targets, rclone remotes, client."""
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


def _transfer_options(parser: argparse.ArgumentParser) -> None:
    """How a probe's requests are made: part size, streams of the untimed work, seed."""
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


def _output_options(parser: argparse.ArgumentParser) -> None:
    """What a probe shows and writes: progress, JSON, the rate unit, latencies."""
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


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``storeprobe``: ``run``, ``report``, ``sweep``, ``backup``, ``compare``."""
    parser = argparse.ArgumentParser(
        prog="storeprobe",
        description="Measure how fast a storage uploads and downloads, through fsspec.",
    )
    parser.add_argument("--version", action="version", version=f"storeprobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands)
    _add_report(commands)
    _add_sweep(commands)
    add_backup_command(commands, _help_formatter)
    add_compare_command(commands, _help_formatter)
    return parser


def _add_run(commands: Any) -> None:
    """``storeprobe run URL...``: its targets, workloads, streams and Dask workers."""
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
    _run_targets(run)
    _run_workloads(run)
    _run_workers(run)
    _probe_options(run)


def _run_targets(run: argparse.ArgumentParser) -> None:
    """``run``'s named targets, after its URLs."""
    run.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME",
        help="a named target of storeprobe.toml (or an rclone remote path), after the URLs; "
        "repeatable",
    )


def _run_workloads(run: argparse.ArgumentParser) -> None:
    """What ``run`` measures and how: streams, workloads, timeout, staging, verification."""
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


def _run_workers(run: argparse.ArgumentParser) -> None:
    """``run`` on Dask workers: how many, which scheduler, each worker's own figure."""
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


def _add_report(commands: Any) -> None:
    """``storeprobe report FILE...``: tables, a chart and an HTML report of saved results."""
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


def _add_sweep(commands: Any) -> None:
    """``storeprobe sweep URL``: one probe at several stream counts."""
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
