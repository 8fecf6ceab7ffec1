"""What ``storeprobe run`` and ``sweep`` turn their arguments into, before any probe runs.

Each target of the command line resolved (a URL, a ``storeprobe.toml`` target, an rclone
remote) with its storage options (the named target's, then ``-o KEY=VALUE``, then
``-o N:KEY=VALUE`` for the N-th); stream, repeat and warm-up counts and ``--part-size``
checked, each bad one a :class:`~storeprobe.errors.ConfigurationError` naming the fix;
one :class:`~storeprobe.probe.Probe` per target and stream count; the progress bars on
standard error. Part of the command line: it prints where a named target came from and
a target that refused as it opened.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from storeprobe.backends.client_choice import CLIENTS
from storeprobe.errors import ConfigurationError, TargetError
from storeprobe.named_targets import resolve
from storeprobe.probe import MAX_REPEATS, MAX_STREAMS, Probe
from storeprobe.progress import RateBar
from storeprobe.rclone_config import RcloneConfig
from storeprobe.redaction import redact_url
from storeprobe.settings import DEFAULT_PREP_STREAMS, MAX_PART_SIZE
from storeprobe.targets_file import TargetsFile
from storeprobe.units import MiB, format_size, parse_size

__all__ = [
    "S3_MIN_PART",
    "Bars",
    "Chosen",
    "check_counts",
    "check_part_size",
    "choose_targets",
    "open_probes",
    "parse_options",
    "probe_keywords",
    "progress_wanted",
    "storage_options",
]

#: S3's smallest part (every part of a multipart upload but the last), in bytes
S3_MIN_PART = 5 * MiB
_SCOPED = re.compile(r"^(\d+):(.+)$")


def parse_options(pairs: Sequence[str]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
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


def storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``-o`` pairs of a command whose options hold for every target (``backup``): a
    ``N:KEY=VALUE`` is refused."""
    common, scoped = parse_options(pairs)
    if scoped:
        raise ConfigurationError(
            f"-o {min(scoped)}:KEY=VALUE names one target, which only run and sweep take: "
            "write -o KEY=VALUE"
        )
    return common


@attrs.frozen
class Chosen:
    """One target of the command line: the URL opened, its options, client and label."""

    spec: str  # as written
    url: str
    options: dict[str, Any] = attrs.field(repr=False)
    client: str
    label: str | None


def choose_targets(args: argparse.Namespace, specs: Sequence[str]) -> list[Chosen]:
    """Each target of the command line resolved (a URL, a storeprobe.toml target, an rclone
    remote) with its options: the named target's, then ``-o KEY=VALUE``, then ``-o N:...``.
    Raises :class:`ConfigurationError` before anything runs."""
    common, scoped = parse_options(args.option)
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

    chosen: list[Chosen] = []
    for index, spec in enumerate(specs, start=1):
        named = resolve(spec, targets, rclone)
        if named is None:
            chosen.append(
                Chosen(spec, spec, {**common, **scoped.get(index, {})}, args.client, args.label)
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
        chosen.append(Chosen(spec, named.url, options, client, label))
    return chosen


def check_counts(streams: Sequence[int], repeats: int, prep_streams: int, warmup: int = 0) -> None:
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


def probe_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of ``run`` and ``sweep`` every probe shares, as keywords of
    :meth:`storeprobe.probe.Probe.from_url` (seed and part size only when given)."""
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


def check_part_size(text: str | None, urls: Sequence[str]) -> None:
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


def progress_wanted(args: argparse.Namespace) -> bool:
    """``--progress``, ``--no-progress``, or by default whether standard error is a terminal."""
    return bool(sys.stderr.isatty()) if args.progress is None else bool(args.progress)


class Bars:
    """One bar per measurement on standard error (:class:`storeprobe.progress.RateBar`:
    1024-based units, the window's own rate), fed from outside the timed window."""

    def __init__(self) -> None:
        self.callback = RateBar(file=sys.stderr)

    def start(self, description: str) -> None:
        self.callback.start(description)

    def close(self) -> None:
        self.callback.close()


def open_probes(
    args: argparse.Namespace,
    targets: Sequence[Chosen],
    bars: Bars | None,
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
                        **{**probe_keywords(args), "label": target.label},
                    ),
                )
                for streams in args.streams
            ]
        except TargetError as exc:
            refused[index] = redact_url(url)
            print(f"storeprobe: error: {exc}", file=sys.stderr)
    return probes
