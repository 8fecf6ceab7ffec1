"""What every backend is: its capabilities, its untimed housekeeping, and how it binds a plan.

A backend knows one family of clients (fsspec implementations, or obstore). It declares

- ``name`` (reported in Results as the client that moved the bytes; the protocols it
  serves and the extra that installs it are in its client spec, see
  :mod:`storeprobe.backends.registry`);
- its :class:`Capabilities`, a frozen value decided by its class (never changed during
  a run): whether one object's upload can be split, whether it reads byte ranges,
  whether it reads into a buffer the probe prepared, part-size limits...;
- its untimed housekeeping: check the root, make and remove the run prefix, evict
  caches after a setup upload, make the bodies it sends best;
- how it maps its errors onto storeprobe's error tree (:meth:`Backend.classify`).

:class:`AsyncBackend` and :class:`SyncBackend` turn a plan's requests into jobs
(:meth:`bind`): coroutine functions for asynchronous clients, callables for
synchronous ones. Each job makes one request and returns an Outcome. Two tables say
which code makes which request:

- :data:`HOOKS`: kind → the backend's method (``put``, ``get``, ``head``, ``listing``,
  ``delete``, ``copy``, ``link``, ``rename``). A backend defines only the hooks of the
  requests it makes; the others raise :class:`~storeprobe.errors.ConfigurationError`.
- :data:`STEPS`: the kinds of a multipart upload → the method of the plan's upload object
  (``create``, ``part``, ``complete``), an :class:`AsyncUpload` / :class:`SyncUpload`
  subclass named by the backend's ``upload``. One is made per plan, so the state its
  steps share (an upload id, the parts' tags, an open file, a block list) lives there
  and nowhere else; its ``abort`` undoes a half-done upload after a failure.

Nothing a backend holds changes during a run.

Why one module (~530 lines): this is the contract a new client's author reads (the
capabilities, the two tables, binding a plan into jobs, the housekeeping helpers every
backend shares); split, the tables and the code that reads them would sit in separate
files.
"""

from __future__ import annotations

import itertools
from abc import ABC
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar, Generic, NoReturn, TypeVar

import fsspec
from attrs import frozen

from storeprobe.arena import Arena
from storeprobe.backends.attempts import Attempts
from storeprobe.errors import ConfigurationError, TargetError, TargetNotFoundError
from storeprobe.request import (
    AsyncJob,
    Body,
    Buffer,
    Kind,
    Part,
    Payloads,
    Request,
    StagedFile,
    SyncJob,
)
from storeprobe.staging import Staging
from storeprobe.transfer import Clock

__all__ = [
    "HOOKS",
    "STEPS",
    "AsyncBackend",
    "AsyncBound",
    "AsyncUpload",
    "Backend",
    "Capabilities",
    "Classified",
    "Landing",
    "SyncBackend",
    "SyncBound",
    "SyncUpload",
    "arrange",
    "check_bucket",
    "check_directory",
    "sliced_bodies",
    "sliced_landings",
    "source_of",
    "unsupported",
]

#: how a backend maps one of its errors: storeprobe's error class and what to do
Classified = tuple[type[TargetError], str]
#: where a read lands: a buffer the probe prepared before the window, a staging file the
#: client writes a whole object into as it arrives (see storeprobe.staging), or None
Landing = bytearray | memoryview | Staging | None


def sliced_bodies(
    workload: Payloads, parts: Sequence[Part], arena: Arena | None = None
) -> list[Body]:
    """The bodies of a window's ``parts`` as slices of one buffer, each part generated
    straight into its slice (before the window): one allocation for the window, freed
    whole, instead of one per object (see :meth:`Backend.bodies`); the buffer is
    ``arena``'s where one is given (a probe call's repeats reuse it)."""
    total = sum(part.size for part in parts)
    buffer = memoryview(bytearray(total)) if arena is None else arena.take(total)
    views: list[Body] = []
    for part, end in zip(parts, itertools.accumulate(p.size for p in parts), strict=True):
        view = buffer[end - part.size : end]
        workload.fill(part.index, part.start, view)
        views.append(view)
    return views


def sliced_landings(sizes: Sequence[int], arena: Arena | None = None) -> list[Landing]:
    """Where a window of reads of ``sizes`` bytes lands: slices of one zeroed buffer
    (its pages touched), made before the window (see :meth:`Backend.landings`); the
    buffer is ``arena``'s where one is given, zeroed."""
    total = sum(sizes)
    buffer = memoryview(bytearray(total)) if arena is None else arena.zeroed(total)
    ends = itertools.accumulate(sizes)
    return [buffer[end - size : end] for size, end in zip(sizes, ends, strict=True)]


#: the backend's method that makes each kind of request (outside a multipart upload)
HOOKS: Mapping[Kind, str] = MappingProxyType(
    {
        Kind.PUT: "put",
        Kind.GET: "get",
        Kind.HEAD: "head",
        Kind.LIST: "listing",
        Kind.DELETE: "delete",
        Kind.COPY: "copy",
        Kind.LINK: "link",
        Kind.RENAME: "rename",
    }
)
#: the upload object's method that makes each step of a multipart upload
STEPS: Mapping[Kind, str] = MappingProxyType(
    {
        Kind.CREATE_MULTIPART: "create",
        Kind.PUT_PART: "part",
        Kind.COMPLETE_MULTIPART: "complete",
    }
)


def unsupported(backend: str, request: Request) -> ConfigurationError:
    """The error for a request kind a backend does not make."""
    return ConfigurationError(
        f"the {backend} backend cannot make {request.kind.value} requests: "
        "plan them only where the backend's capabilities allow"
    )


def source_of(backend: str, request: Request) -> str:
    """The name a copy, link or rename starts from; a request without one is refused."""
    if request.source is None:
        raise unsupported(backend, request)
    return request.source


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
    #: most names one delete request can carry (S3's DeleteObjects: 1000); 1: one
    #: request per name. A bulk delete is a DELETE whose ``Request.keys`` are its names
    deletes_per_request: int = 1


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

    def after_upload(self, paths: Sequence[str], *, synced: Collection[str] = ()) -> None:
        """Untimed step between a setup upload and a timed download (evict caches).

        ``synced``: those of ``paths`` whose bytes are known to be on the storage already
        (written by this client's own PUT, which flushes them, or only read since), so
        a client that must flush a file before dropping it from a cache need not."""
        self.fs.invalidate_cache()

    def listed(self, prefix: str) -> dict[str, int]:
        """Every object under the folder ``prefix`` (at any depth) and its size in bytes,
        from a fresh listing (untimed; empty when nothing is there). The default asks
        fsspec (``find``); a client with a cheaper native listing overrides it."""
        self.fs.invalidate_cache()
        try:
            found = self.fs.find(prefix, detail=True)
        except FileNotFoundError:
            return {}
        inside = prefix.rstrip("/") + "/"
        return {name: int(info["size"]) for name, info in found.items() if name.startswith(inside)}

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

    def landings(self, sizes: Sequence[int], arena: Arena | None = None) -> list[Landing]:
        """Where a window of reads of ``sizes`` bytes each lands, made before the window
        (untimed). The default: None for each, the client returning each object in a
        buffer of its own; a client that reads into a prepared buffer (the local disk)
        lands them in slices of one buffer (``arena``'s where given), so a window of many
        small reads allocates once, not once per read in whichever thread made it."""
        return [None] * len(sizes)

    def body(self, workload: Payloads, part: Part) -> Body:
        """The bytes of ``part`` in the form this client sends best, made before the window."""
        return workload.payload(part.index, part.start, part.stop)

    def bodies(
        self, workload: Payloads, parts: Sequence[Part], arena: Arena | None = None
    ) -> list[Body]:
        """The bodies of a window's ``parts``, made before it: :meth:`body` each by
        default (``arena`` unused: such a client may keep what it is handed); a client
        that sends from a view (the local disk, obstore) makes them as slices of one
        buffer, ``arena``'s where given, so a window of many small writes allocates once
        and a probe call's repeats reuse the same pages."""
        return [self.body(workload, part) for part in parts]

    def staged_body(self, staging: Staging, part: Part) -> Body:
        """A part of a staged object: a view of the staging file."""
        return staging.part(part.start, part.stop)

    def whole_staged_file(self, staging: Staging) -> Body:
        """A staged object as a file the client reads by itself."""
        return StagedFile(path=Path(staging.path), size=staging.size)


_J = TypeVar("_J", AsyncJob, SyncJob)


class _Hooks(Backend, Generic[_J]):
    """The per-kind hooks of :data:`HOOKS`: each makes the job for one request that
    shares no state with other requests. A hook a backend does not define refuses."""

    def _refuse(self, request: Request) -> NoReturn:
        raise unsupported(self.client, request)

    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """The job for ``request``, made by the hook :data:`HOOKS` names for its kind."""
        name = HOOKS.get(request.kind)
        if name is None or len(request.keys) > self.capabilities.deletes_per_request:
            self._refuse(request)
        hook: Callable[[Request, Body | None, Landing, Clock], _J] = getattr(self, name)
        return hook(request, body, into, clock)

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """One whole object written from ``body``."""
        self._refuse(request)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """One object, or its byte range, read (into ``into`` where the client can)."""
        self._refuse(request)

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """One object's size asked (``Outcome.size``)."""
        self._refuse(request)

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """The names under ``request.key`` listed (``Outcome.size``: how many)."""
        self._refuse(request)

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """One object deleted; with ``request.keys``, those names in one bulk request
        (only where ``capabilities.deletes_per_request`` allows), raising
        :class:`~storeprobe.backends.bulk_delete.KeysNotDeletedError` for the names the
        storage answers it did not delete."""
        self._refuse(request)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """``request.source`` copied to ``request.key`` on the storage's side."""
        self._refuse(request)

    def link(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """``request.key`` made a hard link to ``request.source`` (file systems)."""
        self._refuse(request)

    def rename(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> _J:
        """``request.source`` renamed to ``request.key``, replacing it (file systems)."""
        self._refuse(request)


class _Upload(Generic[_J]):
    """The multipart uploads of one plan (see the module docstring): made by ``bind``
    with the backend, every request of the plan and the clock, before the window."""

    def __init__(self, backend: _Hooks[_J], requests: Sequence[Request], clock: Clock) -> None:
        self.backend: _Hooks[_J] = backend
        self.fs = backend.fs
        self.clock = clock

    def step(self, request: Request, body: Body | None) -> _J:
        """The job for one step, made by the method :data:`STEPS` names for its kind."""
        made: Callable[[Request, Body | None], _J] = getattr(self, STEPS[request.kind])
        return made(request, body)

    def create(self, request: Request, body: Body | None) -> _J:
        """Begin the upload of ``request.key`` (``request.stop``: its whole size)."""
        raise unsupported(self.backend.client, request)

    def part(self, request: Request, body: Body | None) -> _J:
        """Send part ``request.part_number``: bytes ``[start, stop)`` from ``body``."""
        raise unsupported(self.backend.client, request)

    def complete(self, request: Request, body: Body | None) -> _J:
        """Make the parts of ``request.key`` one object."""
        raise unsupported(self.backend.client, request)


class AsyncUpload(_Upload[AsyncJob]):
    """The multipart uploads of one plan on an asynchronous client."""

    async def abort(self) -> None:
        """Undo what a failed plan left half done (untimed)."""


class SyncUpload(_Upload[SyncJob]):
    """The multipart uploads of one plan on a synchronous client."""

    def abort(self) -> None:
        """Undo what a failed plan left half done (untimed)."""


def _steps(
    backend: _Hooks[_J], upload: _Upload[_J] | None, clock: Clock
) -> Callable[[Request, Body | None, Landing], _J]:
    """How ``bind`` makes each job: multipart steps by ``upload``, the rest by the hooks."""

    def make(request: Request, body: Body | None, into: Landing) -> _J:
        if request.kind in STEPS:
            if upload is None:
                backend._refuse(request)
            return upload.step(request, body)
        return backend.job(request, body, into, clock)

    return make


_U = TypeVar("_U", AsyncUpload, SyncUpload)


def _bind(
    backend: _Hooks[_J],
    made: Callable[[_Hooks[_J], Sequence[Request], Clock], _U] | None,
    phases: Sequence[Sequence[Request]],
    bodies: Sequence[Body | None],
    landings: Sequence[Landing],
    clock: Clock,
) -> tuple[tuple[tuple[_J, ...], ...], _U | None]:
    """What ``bind`` returns, for either kind of client: the jobs of the plan's phases,
    and its upload object (made by ``made`` with every request of the plan when one of
    them is a multipart step; else None)."""
    requests = [request for phase in phases for request in phase]
    upload = None
    if made is not None and any(r.kind in STEPS for r in requests):
        upload = made(backend, requests, clock)
    return arrange(phases, bodies, landings, _steps(backend, upload, clock)), upload


class AsyncBackend(_Hooks[AsyncJob], ABC):
    """A client driven through coroutines on its event loop (``fs.loop``)."""

    #: the multipart upload object of one plan (None: no upload is made in steps)
    upload: ClassVar[type[AsyncUpload] | None] = None

    def bind(
        self,
        phases: Sequence[Sequence[Request]],
        bodies: Sequence[Body | None],
        landings: Sequence[Landing],
        clock: Clock,
    ) -> AsyncBound:
        """Jobs for ``phases``; ``bodies`` and ``landings`` follow the requests in order."""
        jobs, upload = _bind(self, self.upload, phases, bodies, landings, clock)
        return AsyncBound(phases=jobs, abort=None if upload is None else upload.abort)


class SyncBackend(_Hooks[SyncJob], ABC):
    """A client driven through plain calls on a thread pool."""

    upload: ClassVar[type[SyncUpload] | None] = None

    def bind(
        self,
        phases: Sequence[Sequence[Request]],
        bodies: Sequence[Body | None],
        landings: Sequence[Landing],
        clock: Clock,
    ) -> SyncBound:
        """Jobs for ``phases``; ``bodies`` and ``landings`` follow the requests in order."""
        jobs, upload = _bind(self, self.upload, phases, bodies, landings, clock)
        return SyncBound(phases=jobs, abort=None if upload is None else upload.abort)


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
