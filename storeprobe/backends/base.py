"""What every backend is: its capabilities, its untimed housekeeping, and how it binds a plan.

A backend knows one family of clients (fsspec implementations, or obstore). It declares

- ``name`` (reported in Results as the client that moved the bytes), the ``protocols``
  it serves and the ``extra`` that installs it;
- its :class:`Capabilities`, a frozen value decided by its class (never changed during
  a run): whether one object's upload can be split, whether it reads byte ranges,
  whether it reads into a buffer the probe prepared, part-size limits...;
- its untimed housekeeping: check the root, make and remove the run prefix, evict
  caches after a setup upload, make the bodies it sends best;
- how it maps its errors onto storeprobe's error tree (:meth:`Backend.classify`).

:class:`AsyncBackend` and :class:`SyncBackend` turn a plan's requests into jobs
(:meth:`bind`): coroutine functions for asynchronous clients, callables for
synchronous ones. Each job makes one request and returns an Outcome. Nothing a backend
holds changes during a run; per-plan state (an open file, a multipart upload id) lives
in the jobs ``bind`` returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

import fsspec
from attrs import frozen

from storeprobe.backends.attempts import Attempts
from storeprobe.errors import TargetError, TargetNotFoundError
from storeprobe.request import AsyncJob, Body, Buffer, Part, Payloads, Request, StagedFile, SyncJob
from storeprobe.staging import Staging
from storeprobe.transfer import Clock

__all__ = [
    "AsyncBackend",
    "AsyncBound",
    "Backend",
    "Capabilities",
    "Classified",
    "Landing",
    "SyncBackend",
    "SyncBound",
    "arrange",
    "check_bucket",
    "check_directory",
]

#: how a backend maps one of its errors: storeprobe's error class and what to do
Classified = tuple[type[TargetError], str]
#: where a read lands: a buffer the probe prepared before the window, a staging file the
#: client writes a whole object into as it arrives (see storeprobe.staging), or None
Landing = bytearray | memoryview | Staging | None


@frozen(kw_only=True)
class Capabilities:
    """What a backend can do, decided by its class."""

    #: one object's upload can be split into parts sent in parallel
    splits_uploads: bool = False
    #: a split upload is one call to the client's own multipart upload (obstore), not
    #: create / part / complete requests made by the probe
    client_multipart: bool = False
    #: a split upload begins with a create request (S3 multipart, a local or SFTP file)
    multipart_create: bool = True
    #: a split upload ends with a complete request (S3 multipart, Azure's block list)
    multipart_complete: bool = True
    #: a byte range of an object can be read on its own
    reads_ranges: bool = True
    #: reads fill a buffer the probe prepared (its pages touched before the window), so
    #: nothing is allocated or page-faulted inside the window
    reads_into: bool = False
    #: smallest part of a split upload, in bytes (except the last part)
    min_part_size: int = 1
    #: largest object sent in one request, in bytes; larger ones are split even at 1 stream
    max_single_put: int | None = None
    #: the storage is asked each object's size (HEAD) before a timed download
    confirms_size: bool = False
    #: the client's own retries, its HTTP answers and their pushback are counted
    #: (reported on each sample)
    counts_retries: bool = False
    #: whether the storage takes conditional (create-only) writes is checked before the
    #: first window (:meth:`Backend.writer`): some S3 providers refuse If-None-Match
    checks_conditional_writes: bool = False
    #: one request's body can be a staged file (:class:`~storeprobe.request.StagedFile`)
    #: that the client reads as it sends, so a whole-object upload is never held in memory
    sends_from_file: bool = False
    #: a whole-object read can land in a :class:`~storeprobe.staging.Staging` file, written
    #: as the bytes arrive, so a whole-object download is never held in memory
    lands_in_file: bool = False


@frozen(kw_only=True)
class AsyncBound:
    """A plan bound to an asynchronous client: phases of jobs, and an abort for failures."""

    phases: tuple[tuple[AsyncJob, ...], ...]
    #: undoes a half-done plan (aborts a multipart upload), run untimed after a failure
    abort: Callable[[], Awaitable[None]] | None = None


@frozen(kw_only=True)
class SyncBound:
    """A plan bound to a synchronous client: phases of jobs, and an abort for failures."""

    phases: tuple[tuple[SyncJob, ...], ...]
    abort: Callable[[], None] | None = None


class Backend:
    """The housekeeping and capabilities of one client family (see the module docstring)."""

    name: ClassVar[str] = "generic"
    #: fsspec protocols this backend serves (informative; the registry picks by class)
    protocols: ClassVar[tuple[str, ...]] = ()
    #: the storeprobe extra that installs this client (None: core dependencies)
    extra: ClassVar[str | None] = None
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs

    @property
    def client(self) -> str:
        """The name the Result reports: the backend's, or the fsspec class's for generics."""
        return type(self.fs).__name__ if self.name == "generic" else self.name

    # --- untimed housekeeping ----------------------------------------------------------
    def check_root(self, root: str) -> None:
        """Raise :class:`TargetNotFoundError` if ``root`` cannot hold the run prefix."""
        check_directory(self.fs, root)

    def make_prefix(self, prefix: str) -> None:
        """Create the run prefix (a no-op for object stores)."""
        self.fs.makedirs(prefix, exist_ok=False)

    def remove_prefix(self, prefix: str) -> None:
        """Remove the (now empty) run prefix; never recursive."""
        self.fs.rmdir(prefix)

    def after_upload(self, paths: Sequence[str]) -> None:
        """Untimed step between a setup upload and a timed download (evict caches)."""
        self.fs.invalidate_cache()

    def cache_suspect(self) -> str | None:
        """Why a download might be served from a cache on this platform, or None."""
        return None

    def attempts_seen(self) -> Attempts | None:
        """Retries, HTTP answers and pushback (503, 429) the client has seen so far
        (None: not observable; see :mod:`storeprobe.backends.attempts`).

        Running totals kept by hooks in the client's own retry machinery; the probe reads
        them before and after each window.
        """
        return None

    def retries_seen(self) -> int | None:
        """Failed attempts the client has retried so far (None: not observable)."""
        seen = self.attempts_seen()
        return None if seen is None else seen.retries

    def writer(self, path: str) -> Backend:
        """The backend that writes to this storage: this one, unless a check (untimed,
        once per measurement, writing and deleting ``path``) finds the storage refuses
        conditional writes; then a twin that puts without the condition."""
        return self

    def range_reader(self, path: str) -> Backend:
        """The backend that reads byte ranges of this storage: this one, unless a check of
        ``path`` (untimed, once per measurement) finds the client cannot (see obstore)."""
        return self

    def classify(self, exc: BaseException) -> Classified | None:
        """The error class for ``exc`` and what to do, when this client's errors say more
        than their type (an error code, a class of its own); None: map by type."""
        return None

    def body(self, workload: Payloads, part: Part) -> Body:
        """The bytes of ``part`` in the form this client sends best, made before the window."""
        return workload.payload(part.index, part.start, part.stop)

    def staged_body(self, staging: Staging, part: Part) -> Body:
        """A part of a staged object: a view of the staging file."""
        return staging.part(part.start, part.stop)

    def whole_staged_file(self, staging: Staging) -> Body:
        """A staged object as a file the client reads by itself."""
        return StagedFile(path=Path(staging.path), size=staging.size)


class AsyncBackend(Backend, ABC):
    """A client driven through coroutines on its event loop (``fs.loop``)."""

    @abstractmethod
    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        """The job for one request that needs no state shared with other requests."""

    def bind(
        self,
        phases: Sequence[Sequence[Request]],
        bodies: Sequence[Body | None],
        landings: Sequence[Landing],
        clock: Clock,
    ) -> AsyncBound:
        """Jobs for ``phases``; ``bodies`` and ``landings`` follow the requests in order."""
        return AsyncBound(
            phases=arrange(
                phases, bodies, landings, lambda r, body, into: self.job(r, body, into, clock)
            )
        )


class SyncBackend(Backend, ABC):
    """A client driven through plain calls on a thread pool."""

    @abstractmethod
    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        """The job for one request that needs no state shared with other requests."""

    def bind(
        self,
        phases: Sequence[Sequence[Request]],
        bodies: Sequence[Body | None],
        landings: Sequence[Landing],
        clock: Clock,
    ) -> SyncBound:
        """Jobs for ``phases``; ``bodies`` and ``landings`` follow the requests in order."""
        return SyncBound(
            phases=arrange(
                phases, bodies, landings, lambda r, body, into: self.job(r, body, into, clock)
            )
        )


_J = TypeVar("_J", AsyncJob, SyncJob)


def arrange(
    phases: Sequence[Sequence[Request]],
    bodies: Sequence[Body | None],
    landings: Sequence[Landing],
    make: Callable[[Request, Body | None, Landing], _J],
) -> tuple[tuple[_J, ...], ...]:
    """``make(request, body, landing)`` for every request, grouped in the plan's phases
    (``bodies`` and ``landings`` follow the requests, phase after phase)."""
    requests = (request for phase in phases for request in phase)
    jobs = iter([make(*each) for each in zip(requests, bodies, landings, strict=True)])
    return tuple(tuple(next(jobs) for _ in phase) for phase in phases)


def check_directory(fs: fsspec.AbstractFileSystem, root: str) -> None:
    """Raise unless ``root`` is an existing directory of ``fs``."""
    if not fs.isdir(root):
        if fs.exists(root):
            raise TargetNotFoundError(f"{root!r} exists but is not a directory")
        raise TargetNotFoundError(
            f"root directory {root!r} does not exist: create it or choose another path"
        )


def check_bucket(root: str, exists: Callable[[str], object], what: str, url_form: str) -> str:
    """Raise unless ``root`` names a bucket that ``exists`` can see; return the bucket.

    ``exists(bucket)`` raises FileNotFoundError for a bucket that is missing or hidden.
    """
    bucket = root.split("/", 1)[0]
    if not bucket:
        raise TargetNotFoundError(f"a {what} target needs a {what} name: use {url_form}")
    try:
        exists(bucket)
    except FileNotFoundError:
        raise TargetNotFoundError(
            f"{what} {bucket!r} does not exist or is not visible with these credentials: "
            "create it or choose another"
        ) from None
    return bucket


def fill_into(view: memoryview, filled: int, chunk: Buffer) -> int:
    """Copy ``chunk`` into ``view`` at ``filled``; return the new fill level."""
    end = filled + len(chunk)
    view[filled:end] = chunk
    return end
