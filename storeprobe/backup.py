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
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import attrs
import numpy as np
from attrs import define, field, frozen

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.dataset import Dataset, File, Image, Tree
from storeprobe.environment import Environment, endpoint_of
from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.execution import bounded, delete_names, execute
from storeprobe.jobs import Wrapper
from storeprobe.notices import Code, Notice
from storeprobe.planning import Plan
from storeprobe.request import AsyncJob, Kind, Outcome, Part, Request, SyncJob
from storeprobe.result import Result, Sample
from storeprobe.step import Step
from storeprobe.target import Target
from storeprobe.transfer import Clock, Run
from storeprobe.units import MiB, parse_size
from storeprobe.workload import Workload

__all__ = ["METHODS", "Chunking", "Method", "backup_restore"]

Method = Literal["files", "chunks"]
METHODS: tuple[Method, ...] = ("files", "chunks")
_SCENARIO = "backup-restore"
Backend = AsyncBackend | SyncBackend


@frozen(kw_only=True)
class Chunking:
    """Content-defined chunk sizes for the ``chunks`` method, in bytes.

    ``average`` is FastCDC's target; chunks are at least ``average / 4`` and at most
    ``average × 4`` bytes (the end of a file makes a shorter last chunk).
    """

    average: int = 4 * MiB

    def __attrs_post_init__(self) -> None:
        if self.average < 256 or self.average > 256 * MiB:
            raise ConfigurationError(
                f"chunk average must be from 256 B to 256 MiB, not {self.average}"
            )

    @classmethod
    def of(cls, average: int | str) -> Chunking:
        """``Chunking.of("1MiB")``."""
        return cls(average=parse_size(average))

    def cut(self, data: bytes) -> list[tuple[int, int]]:
        """(offset, length) of each chunk of ``data``."""
        try:
            from fastcdc import fastcdc
        except ImportError:
            raise MissingDependencyError(
                "the chunks method needs fastcdc, which is not installed: "
                "pip install 'storeprobe[backup]'"
            ) from None
        if not data:
            return [(0, 0)]
        return [
            (chunk.offset, chunk.length)
            for chunk in fastcdc(
                data,
                min_size=max(64, self.average // 4),
                avg_size=self.average,
                max_size=self.average * 4,
                fat=False,
            )
        ]


# -- where the bytes come from ---------------------------------------------------------
@frozen
class _Piece:
    """Bytes ``[offset, offset + length)`` of one file of one dataset version."""

    dataset: Dataset
    file: File
    offset: int
    length: int


class _Pieces:
    """A :class:`~storeprobe.request.Payloads` over pieces of dataset files."""

    def __init__(self, pieces: Sequence[_Piece]) -> None:
        self.pieces = list(pieces)

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        piece = self.pieces[index]
        piece.dataset.fill(piece.file, piece.offset + start, out)

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        return bytearray(self.payload_bytes(index, start, stop))

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        piece = self.pieces[index]
        stop = piece.length if stop is None else stop
        return piece.dataset.payload(piece.file, piece.offset + start, piece.offset + stop)


# -- the two methods ---------------------------------------------------------------------
@frozen(kw_only=True)
class _Entry:
    """One stored object a version needs: its key, size, and where its bytes come from."""

    key: str
    size: int
    piece: _Piece


@frozen(kw_only=True)
class _Version:
    """What one version needs on the target, per method: its objects and each file's."""

    dataset: Dataset
    #: every object the version needs, by key (a file, or a distinct chunk)
    objects: dict[str, _Entry]
    #: each file's objects in order: (key, length)
    layout: dict[str, list[tuple[str, int]]]
    manifest_key: str

    def manifest(self) -> bytes:
        """The manifest object: each file's size and objects (JSON)."""
        return json.dumps(
            {
                "version": self.dataset.version,
                "files": {
                    file.path: {"size": file.size, "objects": self.layout[file.path]}
                    for file in self.dataset.files
                },
            },
            sort_keys=True,
        ).encode()


def _file_key(prefix: str, file: File) -> str:
    return f"{prefix}/files/{quote(file.path, safe='')}@{file.generation}"


def _layout_files(prefix: str, dataset: Dataset) -> _Version:
    objects: dict[str, _Entry] = {}
    layout: dict[str, list[tuple[str, int]]] = {}
    for file in dataset.files:
        key = _file_key(prefix, file)
        objects[key] = _Entry(key=key, size=file.size, piece=_Piece(dataset, file, 0, file.size))
        layout[file.path] = [(key, file.size)]
    return _Version(
        dataset=dataset,
        objects=objects,
        layout=layout,
        manifest_key=f"{prefix}/manifests/v{dataset.version:04d}.json",
    )


def _layout_chunks(prefix: str, dataset: Dataset, chunking: Chunking) -> _Version:
    objects: dict[str, _Entry] = {}
    layout: dict[str, list[tuple[str, int]]] = {}
    for file in dataset.files:
        data = dataset.payload(file)
        keys: list[tuple[str, int]] = []
        for offset, length in chunking.cut(data):
            digest = hashlib.blake2b(data[offset : offset + length], digest_size=16).hexdigest()
            key = f"{prefix}/chunks/{digest}"
            if key not in objects:
                objects[key] = _Entry(
                    key=key, size=length, piece=_Piece(dataset, file, offset, length)
                )
            keys.append((key, length))
        layout[file.path] = keys
    return _Version(
        dataset=dataset,
        objects=objects,
        layout=layout,
        manifest_key=f"{prefix}/manifests/v{dataset.version:04d}.json",
    )


# -- job wrappers of the scenario ----------------------------------------------------------
def _exists_async(job: AsyncJob, position: int) -> AsyncJob:
    call = job.call

    async def exists() -> Outcome:
        try:
            return await call()
        except Exception as exc:
            if _missing(exc):
                return Outcome(size=-1)
            raise

    return AsyncJob(job.kind, exists)


def _exists_sync(job: SyncJob, position: int) -> SyncJob:
    call = job.call

    def exists() -> Outcome:
        try:
            return call()
        except Exception as exc:
            if _missing(exc):
                return Outcome(size=-1)
            raise

    return SyncJob(job.kind, exists)


def _missing(exc: BaseException) -> bool:
    names = {klass.__name__ for klass in type(exc).__mro__}
    return isinstance(exc, FileNotFoundError) or "NotFoundError" in names


#: HEADs answer size -1 for a missing object; LISTs of a missing prefix count 0 entries
_TOLERATE_MISSING = Wrapper(_exists_async, _exists_sync)


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
        payloads: _Pieces | None = None,
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

    def _put(self, entries: Sequence[_Entry]) -> Run | None:
        if not entries:
            return None
        pieces = _Pieces([entry.piece for entry in entries])
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

    def _put_manifest(self, version: _Version) -> Run:
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
            bodies=[backend.body(_Bytes([body]), Part(0, 0, len(body)))],
        )

    def _get(self, keys: Sequence[str]) -> tuple[Run | None, dict[str, bytes]]:
        if not keys:
            return None, {}
        plan = Plan(phases=(tuple(Request(kind=Kind.GET, key=key) for key in keys),))
        run = self._window(plan)
        return run, {
            key: bytes(outcome.data or b"") for key, outcome in zip(keys, run.outcomes, strict=True)
        }

    def backup(self, number: int, version: _Version, stored: dict[str, int]) -> Result:
        """Back up ``version``; ``stored`` (key → size) is what the target holds."""
        runs: list[Run | None] = []
        if self.method == "files":
            listing = Plan(phases=((Request(kind=Kind.LIST, key=f"{self.prefix}/files"),),))
            run = self._window(listing, wrap=_TOLERATE_MISSING)
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
            run = self._window(heads, wrap=_TOLERATE_MISSING)
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
        version: _Version,
        previous: _Version | None,
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
        _assemble(version, previous, directory, unchanged, fetched)
        if self.verify:
            _verify(version.dataset, directory)
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
        version: _Version,
        runs: Sequence[Run | None],
        changed: int,
        *,
        incremental: bool,
        dedup: float | None = None,
    ) -> Result:
        done = [run for run in runs if run is not None and run.timings.start_ns.size]
        sample = _combine(done)
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
            seconds_by_kind=_seconds_by_kind(done),
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


class _Bytes:
    """A :class:`~storeprobe.request.Payloads` over bytes already made (a manifest)."""

    def __init__(self, items: Sequence[bytes]) -> None:
        self.items = list(items)

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        out[:] = self.items[index][start : start + len(out)]

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        return bytearray(self.payload_bytes(index, start, stop))

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        return self.items[index][start:stop]


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


def _combine(runs: Sequence[Run]) -> Sample:
    """One sample for a step of several windows: their times added, their records kept."""
    if not runs:
        return Sample(nbytes=0, elapsed_ns=0, latencies_ns=np.zeros(0, np.int64))
    elapsed = 0
    offsets: list[np.ndarray] = []
    kinds: dict[str, int] = {}
    for run in runs:
        timings = run.timings
        opened = int(timings.start_ns.min())
        offsets.append(timings.start_ns - opened + elapsed)
        elapsed += int(timings.end_ns.max()) - opened
        for kind, count in run.requests_by_kind().items():
            kinds[kind] = kinds.get(kind, 0) + count
    every = [run.timings for run in runs]
    ttfb = np.concatenate([t.ttfb_ns for t in every])
    return Sample(
        nbytes=int(sum(int(t.nbytes.sum()) for t in every)),
        elapsed_ns=elapsed,
        latencies_ns=np.concatenate([t.end_ns - t.start_ns for t in every]),
        max_in_flight=max(t.max_in_flight * run.inner for t, run in zip(every, runs, strict=True)),
        offsets_ns=np.concatenate(offsets),
        request_bytes=np.concatenate([t.nbytes for t in every]),
        workers=np.concatenate([t.worker for t in every]),
        ttfb_ns=ttfb[ttfb >= 0],
        cpu_ns=sum(t.cpu_ns for t in every),
        requests_by_kind=kinds,
        bytes_sent=int(sum(int(t.sent.sum()) for t in every)),
        bytes_received=int(sum(int(t.received.sum()) for t in every)),
    )


def _seconds_by_kind(runs: Sequence[Run]) -> dict[str, float]:
    from storeprobe.request import KINDS

    seconds: dict[str, float] = {}
    for run in runs:
        timings = run.timings
        for index, latency in zip(
            timings.kind.tolist(), (timings.end_ns - timings.start_ns).tolist(), strict=True
        ):
            name = KINDS[index].value
            seconds[name] = seconds.get(name, 0.0) + latency / 1e9
    return seconds


def _assemble(
    version: _Version,
    previous: _Version | None,
    directory: Path,
    unchanged: set[str],
    fetched: dict[str, bytes],
) -> None:
    """Write the restored version into ``directory`` (untimed): new and changed files from
    the fetched objects (chunks held locally read from the previous version's files),
    files gone from this version deleted."""
    local: dict[str, tuple[str, int, int]] = {}  # key -> (path, offset, length) on disk
    if previous is not None:
        for path, keys in previous.layout.items():
            offset = 0
            for key, length in keys:
                local.setdefault(key, (path, offset, length))
                offset += length
    for path, keys in version.layout.items():
        if path in unchanged:
            continue
        parts: list[bytes] = []
        for key, length in keys:
            if key in fetched:
                parts.append(fetched[key])
            else:
                source, offset, size = local[key]
                with open(directory / source, "rb") as handle:
                    handle.seek(offset)
                    parts.append(handle.read(size))
                if size != length:
                    raise OSError(f"object {key} has {size} bytes locally, expected {length}")
        destination = directory / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.with_name(destination.name + ".storeprobe-part")
        temporary.write_bytes(b"".join(parts))
        os.replace(temporary, destination)
    if previous is not None:
        for path in set(previous.layout) - set(version.layout):
            (directory / path).unlink()


def _verify(dataset: Dataset, directory: Path) -> None:
    """Raise unless ``directory`` holds exactly ``dataset``'s files, byte for byte."""
    expected = {file.path: file for file in dataset.files}
    found = {
        str(path.relative_to(directory)).replace(os.sep, "/")
        for path in directory.rglob("*")
        if path.is_file()
    }
    if found != set(expected):
        extra, missing = sorted(found - set(expected)), sorted(set(expected) - found)
        raise OSError(f"restore differs: {len(extra)} extra, {len(missing)} missing files")
    for path, file in expected.items():
        data = (directory / path).read_bytes()
        if len(data) != file.size or (bad := dataset.mismatch(file, data)) is not None:
            where = "its length" if len(data) != file.size else f"byte {bad}"
            raise OSError(
                f"verification failed: {path} differs from version {dataset.version} at {where}"
            )


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
) -> list[Result]:
    """Back up every version, then restore every version; one Result per step.

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
    chunking = chunking or Chunking()
    backend = target.backend
    environment = Environment.capture(label, endpoint=endpoint_of(target.url, target.options))
    prefix = target.new_prefix()
    try:
        bounded(lambda: backend.check_root(target.root), timeout)
        bounded(lambda: backend.make_prefix(prefix), timeout)
        for folder in _FOLDERS:
            bounded(_making(backend, f"{prefix}/{folder}"), timeout)
    except Exception as exc:
        raise target.translate(exc, "preparing the run") from None
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
        _layout_files(prefix, dataset)
        if method == "files"
        else _layout_chunks(prefix, dataset, chunking)
        for dataset in versions
    ]
    steps: list[tuple[Literal["backup", "restore"], int, int]] = [
        ("backup", number, number - 1) for number in range(1, len(versions) + 1)
    ] + [("restore", number, number - 1) for number in range(1, len(versions) + 1)]
    results: list[Result] = []
    directory = Path(tempfile.mkdtemp(prefix="storeprobe-restore-"))
    stored: dict[str, int] = {}
    failed: Notice | None = None
    try:
        for kind, number, index in steps:
            if failed is not None:
                results.append(_not_run(scenario, kind, number, laid[index], failed))
                continue
            try:
                if kind == "backup":
                    results.append(scenario.backup(number, laid[index], stored))
                else:
                    previous = laid[index - 1] if index else None
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


def _making(backend: Backend, folder: str) -> Callable[[], None]:
    return lambda: backend.make_prefix(folder)


def _failed(
    scenario: _Scenario,
    kind: Literal["backup", "restore"],
    number: int,
    version: _Version,
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
    version: _Version,
    cause: Notice,
) -> Result:
    notice = Notice(
        code=Code.NOT_RUN,
        message=f"not run: an earlier step failed ({cause.code.value})",
        fix="fix the first failing step and run again",
    )
    return _failed(scenario, kind, number, version, notice)
