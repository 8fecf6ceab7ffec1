"""Backup and restore of an evolving dataset: each version backed up, then each restored.

A scenario takes the versions of a dataset (a :class:`~storeprobe.dataset.Tree` and its
``evolve``\\ d successors, or an :class:`~storeprobe.dataset.Image`) and, under a fresh run
prefix of its own, runs ``backup 1 … backup N`` then ``restore 1 … restore N``: restore
1 puts version 0 into an empty local directory, each next restore patches the previous
one into the next version, fetching only what changed. Every step is a Result.

Two methods model two families of tools:

- ``files`` (rsync, rclone): list what the target holds, upload the files that are new or
  changed, write a small manifest naming the version's files. A file is stored once per
  content generation (``files/<path>@<generation>``), so every version stays
  restorable, as with ``rclone --backup-dir`` or rsnapshot.
- ``chunks`` (restic, borg, kopia, duplicacy): split every file into content-defined
  chunks (FastCDC, through the ``fastcdc`` package; about 4 MiB on average by default),
  name each chunk by its hash (``chunks/<blake2b-128>``), ask the storage whether each
  chunk exists (one HEAD per chunk), upload the missing ones, write a manifest listing
  each file's chunks.

What is timed: the requests. A step is a few windows run one after the other (list or
existence checks, transfers, the manifest); the step's time is the sum of its windows.
Outside them: generating the dataset's bytes, chunking and hashing (CPU work a real tool
also does, but not the storage's), deciding what to send from the listing or the HEADs,
writing restored files to the local disk and verifying every byte of them. No
compression and no encryption are modelled (the content is incompressible anyway).

At about 480 lines: the scenario's steps, both methods' backup and restore, and their
Results read as one story; what a version stores is :mod:`storeprobe.manifest`, the
restored directory :mod:`storeprobe.restore`, the step's sample :mod:`storeprobe.sampling`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import attrs
from attrs import define, field

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.dataset import Dataset, Image, Tree
from storeprobe.environment import Environment
from storeprobe.errors import ConfigurationError
from storeprobe.execution import bounded, delete_names, execute, open_run
from storeprobe.jobs import EXISTENCE, Wrapper
from storeprobe.manifest import (
    Blobs,
    Chunking,
    Pieces,
    Stored,
    VersionMap,
    map_chunks,
    map_files,
)
from storeprobe.notices import Code, Notice
from storeprobe.planning import Plan
from storeprobe.request import Kind, Part, Request
from storeprobe.restore import assemble, verify_restore
from storeprobe.result import Result
from storeprobe.sampling import combine, seconds_by_kind
from storeprobe.step import Step
from storeprobe.target import Target
from storeprobe.transfer import Clock, Run
from storeprobe.workload import Workload

__all__ = ["METHODS", "Chunking", "Method", "backup_restore"]

Method = Literal["files", "chunks"]
METHODS: tuple[Method, ...] = ("files", "chunks")
_SCENARIO = "backup-restore"
Backend = AsyncBackend | SyncBackend


# -- job wrappers of the scenario ----------------------------------------------------------
# -- the scenario ---------------------------------------------------------------------------
@define
class _Scenario:
    target: Target
    versions: tuple[Dataset, ...]
    method: Method
    streams: int
    timeout: float | None
    clock: Clock
    chunking: Chunking
    verify: bool
    environment: Environment
    prefix: str
    #: every key the scenario wrote, deleted at the end
    written: set[str] = field(factory=set)

    # one window: a plan run on the backend, with nothing but the requests timed
    def _window(
        self,
        plan: Plan,
        payloads: Pieces | None = None,
        wrap: Wrapper | None = None,
    ) -> Run:
        backend = self.target.backend
        bodies = [
            None if r.body is None or payloads is None else backend.body(payloads, r.body)
            for r in plan.requests
        ]
        return execute(
            backend,
            plan,
            streams=self.streams,
            clock=self.clock,
            timeout=self.timeout,
            bodies=bodies,
            wrap=wrap,
        )

    def _put(self, entries: Sequence[Stored]) -> Run | None:
        if not entries:
            return None
        pieces = Pieces([entry.piece for entry in entries])
        plan = Plan(
            phases=(
                tuple(
                    Request(kind=Kind.PUT, key=entry.key, body=Part(index, 0, entry.size))
                    for index, entry in enumerate(entries)
                ),
            )
        )
        self.written.update(entry.key for entry in entries)
        return self._window(plan, pieces)

    def _put_manifest(self, version: VersionMap) -> Run:
        body = version.manifest()
        self.written.add(version.manifest_key)
        backend = self.target.backend
        plan = Plan(
            phases=(
                (Request(kind=Kind.PUT, key=version.manifest_key, body=Part(0, 0, len(body))),),
            )
        )
        return execute(
            backend,
            plan,
            streams=1,
            clock=self.clock,
            timeout=self.timeout,
            bodies=[backend.body(Blobs([body]), Part(0, 0, len(body)))],
        )

    def _get(self, keys: Sequence[str]) -> tuple[Run | None, dict[str, bytes]]:
        if not keys:
            return None, {}
        plan = Plan(phases=(tuple(Request(kind=Kind.GET, key=key) for key in keys),))
        run = self._window(plan)
        return run, {
            key: bytes(outcome.data or b"") for key, outcome in zip(keys, run.outcomes, strict=True)
        }

    def backup(self, number: int, version: VersionMap, stored: dict[str, int]) -> Result:
        """Back up ``version``; ``stored`` (key → size) is what the target holds."""
        runs: list[Run | None] = []
        if self.method == "files":
            listing = Plan(phases=((Request(kind=Kind.LIST, key=f"{self.prefix}/files"),),))
            run = self._window(listing, wrap=EXISTENCE)
            runs.append(run)
            listed = max(run.outcomes[0].size, 0)
            if listed != len(stored):
                raise OSError(
                    f"the listing shows {listed} objects where the probe stored {len(stored)}"
                )
            needed = [
                entry for key, entry in version.objects.items() if stored.get(key) != entry.size
            ]
        else:
            keys = list(version.objects)
            heads = Plan(phases=(tuple(Request(kind=Kind.HEAD, key=key) for key in keys),))
            run = self._window(heads, wrap=EXISTENCE)
            runs.append(run)
            needed = [
                version.objects[key]
                for key, outcome in zip(keys, run.outcomes, strict=True)
                if outcome.size != version.objects[key].size
            ]
        runs.append(self._put(needed))
        runs.append(self._put_manifest(version))
        for entry in needed:
            stored[entry.key] = entry.size
        previous = self.versions[version.dataset.version - 1] if version.dataset.version else None
        changed = _changed_bytes(version.dataset, previous)
        uploaded = sum(entry.size for entry in needed)
        dedup = None
        if self.method == "chunks":
            dedup = float("inf") if uploaded == 0 else version.dataset.total_bytes / uploaded
        return self._result(
            "backup", number, version, runs, changed, incremental=number > 1, dedup=dedup
        )

    def restore(
        self,
        number: int,
        version: VersionMap,
        previous: VersionMap | None,
        directory: Path,
    ) -> Result:
        """Restore ``version`` into ``directory`` (holding ``previous``, or empty)."""
        runs: list[Run | None] = []
        run, got = self._get([version.manifest_key])
        runs.append(run)
        manifest = json.loads(got[version.manifest_key])
        if manifest["version"] != version.dataset.version:
            raise OSError(f"manifest {version.manifest_key} names another version")
        have: set[str] = set()
        if previous is not None:
            unchanged = {
                path for path, keys in previous.layout.items() if version.layout.get(path) == keys
            }
            have = {key for path in previous.layout for key, _ in previous.layout[path]}
        else:
            unchanged = set()
        wanted: list[str] = []
        for path, keys in version.layout.items():
            if path in unchanged:
                continue
            for key, _ in keys:
                if key not in have and key not in wanted:
                    wanted.append(key)
        run, fetched = self._get(wanted)
        runs.append(run)
        assemble(version, previous, directory, unchanged, fetched)
        if self.verify:
            verify_restore(version.dataset, directory)
        changed = _changed_bytes(version.dataset, previous.dataset if previous else None)
        return self._result(
            "restore", number, version, runs, changed, incremental=previous is not None
        )

    def usage(self) -> tuple[int, int]:
        """(objects, bytes) the target holds under the scenario's prefix (untimed)."""
        fs = self.target.fs
        fs.invalidate_cache()
        found: list[tuple[int, int]] = []

        def walk() -> None:
            entries = fs.find(self.prefix, detail=True)
            found.append((len(entries), sum(int(e.get("size") or 0) for e in entries.values())))

        bounded(walk, self.timeout)
        return found[0]

    def _result(
        self,
        kind: Literal["backup", "restore"],
        number: int,
        version: VersionMap,
        runs: Sequence[Run | None],
        changed: int,
        *,
        incremental: bool,
        dedup: float | None = None,
    ) -> Result:
        done = [run for run in runs if run is not None and run.timings.start_ns.size]
        sample = combine(done)
        objects, space = self.usage()
        dataset = version.dataset
        step = Step(
            scenario=_SCENARIO,
            method=self.method,
            kind=kind,
            number=number,
            version=dataset.version,
            dataset=dataset.describe(),
            dataset_bytes=dataset.total_bytes,
            changed_bytes=changed,
            moved_bytes=sample.nbytes,
            incremental=incremental,
            space_used=space,
            objects_stored=objects,
            dedup_ratio=dedup,
            seconds_by_kind=seconds_by_kind(done),
        )
        return Result(
            operation=kind,
            workload=_summary(dataset),
            url=self.target.url,
            protocol=self.target.protocol,
            backend=self.target.client,
            streams=self.streams,
            effective_streams=self.streams,
            strategy=_STRATEGY[self.method][kind],
            samples=(sample,),
            environment=self.environment,
            step=step,
        )


_STRATEGY = {
    "files": {
        "backup": "files: list the target, upload new and changed files, write a manifest",
        "restore": "files: read the manifest, download the files that changed",
    },
    "chunks": {
        "backup": "chunks: HEAD every chunk, upload the missing ones, write a manifest",
        "restore": "chunks: read the manifest, download the chunks not held locally",
    },
}


def _changed_bytes(dataset: Dataset, previous: Dataset | None) -> int:
    if previous is None:
        return dataset.total_bytes
    if isinstance(dataset, Tree) and isinstance(previous, Tree):
        return dataset.diff(previous).changed_bytes
    if isinstance(dataset, Image) and isinstance(previous, Image):
        return dataset.diff(previous).changed_bytes
    return dataset.total_bytes


def _summary(dataset: Dataset) -> Workload:
    """The dataset as a Workload: its file count and mean file size, named after it."""
    count = max(1, len(dataset.files))
    mean = max(1, -(-dataset.total_bytes // count))
    kind = "image" if isinstance(dataset, Image) else "tree"
    return Workload(count=count, size=mean, seed=dataset.seed, name=f"{kind} v{dataset.version}")


def backup_restore(
    target: Target,
    versions: Sequence[Dataset],
    *,
    method: Method,
    streams: int,
    timeout: float | None,
    clock: Clock,
    label: str | None = None,
    chunking: Chunking | None = None,
    verify: bool = True,
    restore: Sequence[int] | None = None,
) -> list[Result]:
    """Back up every version, then restore versions; one Result per step.

    ``restore`` lists the versions to restore, in order (default: every version, oldest
    first): the first into an empty directory, each next one over the one before it.

    The first failure stops the scenario (later steps depend on it): its Result holds
    the error, later steps are Results with a ``not-run`` error. Everything written is
    deleted at the end, whatever happened.
    """
    if method not in METHODS:
        raise ConfigurationError(f"method must be 'files' or 'chunks', not {method!r}")
    if not versions:
        raise ConfigurationError("a backup scenario needs at least one dataset version")
    for expected, dataset in enumerate(versions):
        if dataset.version != expected:
            raise ConfigurationError(
                "versions must be a dataset and its successive evolve() results "
                f"(version {expected} at position {expected}, found {dataset.version})"
            )
    order = list(range(len(versions))) if restore is None else list(restore)
    for index in order:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(versions):
            raise ConfigurationError(
                f"restore names version {index!r}: use versions 0 to {len(versions) - 1}"
            )
    chunking = chunking or Chunking()
    backend = target.backend
    environment, prefix = open_run(target, label, timeout, _FOLDERS)
    scenario = _Scenario(
        target=target,
        versions=tuple(versions),
        method=method,
        streams=streams,
        timeout=timeout,
        clock=clock,
        chunking=chunking,
        verify=verify,
        environment=environment,
        prefix=prefix,
    )
    laid = [
        map_files(prefix, dataset) if method == "files" else map_chunks(prefix, dataset, chunking)
        for dataset in versions
    ]
    steps: list[tuple[Literal["backup", "restore"], int, int, int | None]] = [
        ("backup", number, number - 1, None) for number in range(1, len(versions) + 1)
    ] + [
        ("restore", number, index, order[number - 2] if number > 1 else None)
        for number, index in enumerate(order, start=1)
    ]
    results: list[Result] = []
    directory = Path(tempfile.mkdtemp(prefix="storeprobe-restore-"))
    stored: dict[str, int] = {}
    failed: Notice | None = None
    try:
        for kind, number, index, before in steps:
            if failed is not None:
                results.append(_not_run(scenario, kind, number, laid[index], failed))
                continue
            try:
                if kind == "backup":
                    results.append(scenario.backup(number, laid[index], stored))
                else:
                    previous = None if before is None else laid[before]
                    results.append(scenario.restore(number, laid[index], previous, directory))
            except Exception as exc:
                failed = Notice(
                    code=Code.TIMEOUT if isinstance(exc, TimeoutError) else Code.REQUEST_FAILED,
                    message=target.describe_error(exc),
                    repeat=1,
                )
                results.append(_failed(scenario, kind, number, laid[index], failed))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        leftovers = delete_names(
            target, sorted(scenario.written), streams=streams, clock=clock, timeout=timeout
        )
        for folder in (*_FOLDERS, ""):
            try:
                backend.remove_prefix(f"{prefix}/{folder}".rstrip("/"))
            except FileNotFoundError:
                pass
            except Exception as exc:
                leftovers.append(f"{prefix}/{folder} ({target.describe_error(exc)})")
    if leftovers and results:
        notice = Notice(
            code=Code.CLEANUP_INCOMPLETE,
            message=f"cleanup could not delete {len(leftovers)} item(s) under {prefix}: "
            + ", ".join(leftovers[:5]),
            fix="delete them by hand",
        )
        last = results[-1]
        results[-1] = attrs.evolve(last, warnings=(*last.warnings, notice))
    return results


_FOLDERS = ("files", "chunks", "manifests")


def _failed(
    scenario: _Scenario,
    kind: Literal["backup", "restore"],
    number: int,
    version: VersionMap,
    error: Notice,
) -> Result:
    dataset = version.dataset
    return Result(
        operation=kind,
        workload=_summary(dataset),
        url=scenario.target.url,
        protocol=scenario.target.protocol,
        backend=scenario.target.client,
        streams=scenario.streams,
        effective_streams=scenario.streams,
        strategy=_STRATEGY[scenario.method][kind],
        samples=(),
        errors=(error,),
        environment=scenario.environment,
        step=Step(
            scenario=_SCENARIO,
            method=scenario.method,
            kind=kind,
            number=number,
            version=dataset.version,
            dataset=dataset.describe(),
            dataset_bytes=dataset.total_bytes,
            changed_bytes=0,
            moved_bytes=0,
            incremental=number > 1,
        ),
    )


def _not_run(
    scenario: _Scenario,
    kind: Literal["backup", "restore"],
    number: int,
    version: VersionMap,
    cause: Notice,
) -> Result:
    notice = Notice(
        code=Code.NOT_RUN,
        message=f"not run: an earlier step failed ({cause.code.value})",
        fix="fix the first failing step and run again",
    )
    return _failed(scenario, kind, number, version, notice)
