"""``storeprobe backup``: back up and restore an evolving dataset on one or more targets.

Kept apart from :mod:`storeprobe.cli` (which registers it and prints for it) so that each
reads in one sitting. It prints the table in the shape backup comparisons publish: one
row per target and stream count, one column per step in seconds, and the space used.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from storeprobe import render
from storeprobe.backup import METHODS
from storeprobe.cost import load_prices, price_sheet_names
from storeprobe.dataset import Image, Tree
from storeprobe.errors import ConfigurationError, TargetError
from storeprobe.probe import MAX_STREAMS, Probe
from storeprobe.progress import StepBar
from storeprobe.result import Result
from storeprobe.resultset import ResultSet
from storeprobe.settings import DEFAULT_PREP_STREAMS

__all__ = ["add_backup_command", "dataset_versions", "run_backup"]

EXIT_OK, EXIT_FAILED = 0, 1


def add_backup_command(
    commands: Any, formatter: Callable[[str], argparse.HelpFormatter]
) -> argparse.ArgumentParser:
    """Register ``backup`` on the ``commands`` subparsers; returns its parser."""
    backup: argparse.ArgumentParser = commands.add_parser(
        "backup",
        help="back up and restore an evolving dataset (a source tree, a disk image, a DIR)",
        formatter_class=formatter,
        description="Back up every version of a dataset, then restore every version (the "
        "first into an empty directory, the next ones incrementally), verifying every "
        "byte; print seconds per step and the space used, one row per target and stream "
        "count.",
    )
    backup.add_argument("urls", nargs="+", metavar="URL", help="fsspec URLs of the targets")
    _dataset_options(backup)
    _run_options(backup)
    _output_options(backup)
    return backup


def _dataset_options(backup: argparse.ArgumentParser) -> None:
    """What is backed up and how: the dataset, its versions, the methods, the restores."""
    backup.add_argument(
        "--dataset",
        default="tree",
        metavar="tree|image|DIR",
        help="tree: shaped like the Linux source tree; image: one disk image changing in "
        "small places; DIR: the sizes and layout of a real directory (never its content)",
    )
    backup.add_argument(
        "--size",
        metavar="SIZE",
        help="the dataset's size, e.g. 64MiB (default: 256 MiB for a tree, 1 GiB for an image)",
    )
    backup.add_argument(
        "--versions", type=int, default=None, help="versions (default: 6 for trees, 3 for images)"
    )
    backup.add_argument(
        "--method", choices=METHODS, nargs="+", default=["files"], help="backup methods to run"
    )
    backup.add_argument(
        "--restore",
        type=int,
        nargs="+",
        metavar="V",
        help="versions to restore, in order, from 0 (default: every version, oldest first); "
        "the first into an empty directory, each next one over the one before",
    )
    backup.add_argument(
        "--chunk-size",
        default=None,
        metavar="SIZE",
        help="average chunk size of a chunking method (default: the method's own)",
    )


def _run_options(backup: argparse.ArgumentParser) -> None:
    """How each step runs: streams, seed, timeout, storage options, client, label."""
    backup.add_argument(
        "--streams", type=int, nargs="+", default=[1], metavar="N", help="requests in flight"
    )
    backup.add_argument(
        "--prep-streams",
        type=int,
        default=DEFAULT_PREP_STREAMS,
        metavar="N",
        help="requests in flight for the untimed cleanup; the steps keep --streams",
    )
    backup.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the dataset's content, to reproduce a run's bytes (default: a fresh "
        "random seed, recorded in the results as the workload's seed)",
    )
    backup.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    backup.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage option (VALUE parsed as JSON if it can be); repeatable",
    )
    backup.add_argument(
        "--client", choices=["auto", "obstore", "s3fs"], default="auto", help="S3 client"
    )
    backup.add_argument("--label", help="a name for this environment, e.g. home-laptop")


def _output_options(backup: argparse.ArgumentParser) -> None:
    """What is shown, checked and written: the table's format, verification, progress,
    prices, JSON."""
    backup.add_argument(
        "--format", choices=render.FORMATS, default="markdown", help="how to print the table"
    )
    backup.add_argument("--no-verify", action="store_true", help="skip checking restored bytes")
    backup.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw each step's progress on standard error (bytes moved, bytes chunked), only "
        "between its timed windows (default: when standard error is a terminal)",
    )
    backup.add_argument(
        "--prices",
        metavar="NAME|FILE.toml",
        help="add what the steps cost at a provider's list prices: a shipped price sheet ("
        + ", ".join(price_sheet_names())
        + ") or your own TOML file (see the Backup page)",
    )
    backup.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the results as JSON, each scenario as it ends; results already in "
        "FILE are kept",
    )


def dataset_versions(
    spec: str, size: str | None, versions: int | None, seed: int
) -> list[Tree | Image]:
    """The dataset named by ``spec`` and its next versions (each ``evolve()`` of the last)."""
    dataset: Tree | Image
    if spec == "tree":
        dataset = Tree.source_tree(size=size, seed=seed) if size else Tree.source_tree(seed=seed)
        count = 6 if versions is None else versions
    elif spec == "image":
        dataset = Image.create(size or "1GiB", seed=seed)
        count = 3 if versions is None else versions
    elif Path(spec).is_dir():
        if size is not None:
            raise ConfigurationError("--size applies to tree and image, not to a directory")
        dataset = Tree.from_directory(spec, seed=seed)
        count = 6 if versions is None else versions
    else:
        raise ConfigurationError(f"--dataset {spec!r} is not tree, image or an existing directory")
    if not 1 <= count <= 100:
        raise ConfigurationError(f"--versions {count} is out of range: use 1 to 100")
    chain: list[Tree | Image] = [dataset]
    for _ in range(count - 1):
        chain.append(chain[-1].evolve())
    return chain


def run_backup(
    args: argparse.Namespace,
    options: dict[str, Any],
    *,
    record: Callable[[Sequence[Result]], None] | None = None,
) -> tuple[int, ResultSet]:
    """Run the scenario on every target, method and stream count; print the tables.

    ``record`` receives the steps of each scenario as it ends (the CLI saves them), so
    an interrupt or a later target that fails keeps what was measured. A target that
    refuses (a :class:`TargetError`) is reported and skipped; the others still run.
    """
    _check_streams(args)
    prices = None if args.prices is None else load_prices(args.prices)
    seed = secrets.randbits(63) if args.seed is None else args.seed
    chain = dataset_versions(args.dataset, args.size, args.versions, seed)
    print(f"dataset: {chain[0].describe()}, {len(chain)} versions", file=sys.stderr)
    probes = _open_probes(args, options)
    results, refused = _run_targets(args, probes, chain, record)
    collected = ResultSet(results)
    if results:
        print(render.render_tables(render.backup_tables(results, prices), args.format))
    if refused:
        if len(args.urls) > 1:  # one target: its error said it all
            print(
                f"storeprobe: {len(refused)} of {len(args.urls)} targets refused and were "
                f"skipped: {', '.join(refused)}",
                file=sys.stderr,
            )
        return EXIT_FAILED, collected
    return (EXIT_OK if all(r.ok for r in results) else EXIT_FAILED), collected


def _check_streams(args: argparse.Namespace) -> None:
    for count in args.streams:
        if not 1 <= count <= MAX_STREAMS:
            raise ConfigurationError(f"--streams {count} is out of range: use 1 to {MAX_STREAMS}")
    if not 1 <= args.prep_streams <= MAX_STREAMS:
        raise ConfigurationError(
            f"--prep-streams {args.prep_streams} is out of range: use 1 to {MAX_STREAMS} "
            f"(default {DEFAULT_PREP_STREAMS})"
        )


def _open_probes(args: argparse.Namespace, options: dict[str, Any]) -> dict[tuple[str, int], Probe]:
    """A probe per target and stream count: every URL opened before anything is written,
    so a bad one is refused first."""
    return {
        (url, streams): Probe.from_url(
            url,
            options,
            client=args.client if url.startswith(("s3://", "s3a://")) else "auto",
            streams=streams,
            prep_streams=args.prep_streams,
            timeout=args.timeout,
            label=args.label,
            verify=not args.no_verify,
        )
        for url in args.urls
        for streams in args.streams
    }


def _run_targets(
    args: argparse.Namespace,
    probes: dict[tuple[str, int], Probe],
    chain: list[Tree | Image],
    record: Callable[[Sequence[Result]], None] | None,
) -> tuple[list[Result], list[str]]:
    """Every scenario, target by target: the steps measured, and the URLs of the targets
    that refused (each reported, the others still run)."""
    results: list[Result] = []
    refused: list[str] = []
    wanted = sys.stderr.isatty() if args.progress is None else bool(args.progress)
    bar = StepBar(file=sys.stderr) if wanted else None
    for url in args.urls:
        try:
            for method in args.method:
                for streams in args.streams:
                    steps = probes[url, streams].backup_restore(
                        chain[0],
                        versions=chain,
                        method=method,
                        chunk_size=args.chunk_size,
                        restore=args.restore,
                        progress=bar,
                    )
                    for result in steps:
                        print(f"  {render.result_line(result)}", file=sys.stderr)
                    results.extend(steps)
                    if record is not None:
                        record(list(steps))
        except TargetError as exc:  # this target refused: the others still run
            refused.append(probes[url, args.streams[0]].target.url)
            print(f"storeprobe: error: {exc}", file=sys.stderr)
    return results, refused
