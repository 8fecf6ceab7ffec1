"""A backup scenario's access to its target: every call one timed window, every write kept.

A backup method (:mod:`storeprobe.backup.method`) never times, cleans up or verifies
anything: it asks a :class:`Session` to list, check, write, copy, read or delete (and, on
file systems, to hard-link or rename), and the
session runs each call as one timed window on the target's client (``streams`` requests
in flight), keeps the window's record for the step's Result, and remembers every name
written (and every folder made) under the scenario's fresh run prefix so the scenario's
end deletes exactly those (:meth:`Session.close` returns what could not be deleted as
typed :class:`Leftover` values).

A write or a read of many objects is split into windows of at most :data:`WINDOW_BUDGET`
bytes of bodies each (:meth:`Session.put`, :meth:`Session.get_windows`; an object larger
than the budget alone in its window), so a scenario holds about one window's bytes
whatever the dataset's size; the requests and their order do not change, and a step is
the sum of its windows' spans as before.

One whole object above :data:`STAGE_ABOVE` (64 MiB) goes through a staging file on
the clients that can (sent from it, or landed in it as it arrives; a ranged read above
it too where the caller asks, :meth:`Session.get_staged_windows`), and a multipart
upload above it sends its parts as views of one (:meth:`Session.put_parts`), so memory
holds what is in flight, not the object. A :class:`StepProgress` is told of each window
once it has closed, never while one is open.

On a client that reads into and sends from views (the local disk), a window's bodies
are made as slices of one buffer and a window's reads land in slices of one buffer
(:meth:`~storeprobe.backends.base.Backend.bodies`,
:meth:`~storeprobe.backends.base.Backend.landings`), made before the window:
:meth:`Session.get_each` and :meth:`Session.get_staged_by_window` hand out views of it
and release them before the next window is read. A buffer per object, each made and freed
in whichever thread touched it, scattered the freed memory over the malloc arenas of
the main and worker threads, and the process kept it (a tree of many small files).
What windows free in the C heap all the same (each request's objects, a client's own
buffers) is given back to the system before the next window once
:data:`GIVE_BACK_AFTER` has gone through windows since the last time
(:func:`storeprobe.heap.give_back`).

Untimed, outside the windows: making bodies (the bytes of the objects a window writes
are generated just before it), folders a write needs on a file system, evicting what
the backups wrote from the page cache before a restore (:meth:`Session.evict`), and the
space the target holds (:meth:`Session.usage`, hard links counted once, as ``du``).

Why one module (~900 lines, one class): :class:`Session` is the whole surface a backup
method sees, every request kind as a timed window and the untimed work around them; its
methods share the window bookkeeping and the record of names written, and a method's
author reads it as one API.
"""

from __future__ import annotations

import functools
import os
import posixpath
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import attrs
from attrs import define, field, frozen
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from storeprobe.arena import Arena
from storeprobe.backends import AsyncBackend, Capabilities, Landing, SyncBackend
from storeprobe.backends.attempts import Attempts, between, summed
from storeprobe.backup.objects import Blob, BlobPayloads, Read
from storeprobe.execution import (
    Leftover,
    bounded,
    bounded_each,
    delete_names,
    execute,
    remove_folders,
)
from storeprobe.heap import give_back
from storeprobe.jobs import EXISTENCE, release_parts, settling
from storeprobe.planning import Plan
from storeprobe.request import Body, Buffer, Kind, Outcome, Part, Request
from storeprobe.staging import Staging
from storeprobe.target import Target
from storeprobe.transfer import Clock, Run

__all__ = [
    "GIVE_BACK_AFTER",
    "STAGE_ABOVE",
    "WINDOW_BUDGET",
    "WINDOW_REQUESTS",
    "Leftover",
    "Session",
    "StepProgress",
    "StepRecord",
    "windows",
]

_T = TypeVar("_T")

#: protocols whose caches the client evicts itself (or that have none to evict)
_EVICTABLE = frozenset({"file", "local", "memory"})

Backend = AsyncBackend | SyncBackend

#: the most bytes of bodies one window of writes or reads holds (128 MiB: with the
#: chunker's 64 MiB window, one object's copy and the interpreter, a scenario stays near
#: 256 MiB plus what is in flight)
WINDOW_BUDGET = 128 * 1024 * 1024
#: the most requests in one window of HEADs, listings, copies, links, renames or deletes
#: (8 192): each request's Request and bound job take about 1.1 KB until its window closes
WINDOW_REQUESTS = 8192
#: one whole object larger than this (64 MiB) is staged in a local file both ways, on the
#: clients that can (a write sent from the file, a read landing in it), not made or held
#: in memory: a window of a few such objects holds only what is in flight
STAGE_ABOVE = 64 * 1024 * 1024
#: the C heap's free memory is given back before a window once this much (16 MiB) has
#: gone through windows since the last time: the bytes the windows moved plus
#: :data:`REQUEST_WEIGHT` a request (an idle ``malloc_trim`` costs about 2 ms here, one
#: after 340 MiB freed 34 ms)
GIVE_BACK_AFTER = 16 * 1024 * 1024
#: what a request counts towards :data:`GIVE_BACK_AFTER` beside its bytes (4 KiB: its
#: Python objects, about 1.1 KB, and a client's own request and response buffers)
REQUEST_WEIGHT = 4096


def windows(sizes: Sequence[int], budget: int = WINDOW_BUDGET) -> list[range]:
    """Consecutive runs of indexes into ``sizes`` (bytes) whose sizes add up to at most
    ``budget`` bytes each; an item larger than ``budget`` is a run of its own."""
    runs: list[range] = []
    start, total = 0, 0
    for index, size in enumerate(sizes):
        if index > start and total + size > budget:
            runs.append(range(start, index))
            start, total = index, 0
        total += size
    if start < len(sizes):
        runs.append(range(start, len(sizes)))
    return runs


#: request kinds that change nothing on the target (its space is as it was)
_READS = frozenset({Kind.GET, Kind.HEAD, Kind.LIST})

#: the outcome a step keeps of a request that made one request of its own kind
_PLAIN = Outcome()


def _let_go(run: Run | None, buffers: Sequence[object]) -> None:
    """Release each memoryview of a window's ``buffers`` (its bodies, its landings) once
    it has run, but those ``run`` hands out (its outcomes' data), so the window's one buffer is
    freed as soon as the views handed out are, whatever still names these: through
    obstore a read's finished coroutine frame, and with it its landing, outlives the
    window now and then (not a reference cycle: what keeps it was not traced), and the
    next window's buffer was allocated beside it (a 1 GiB image restored, 4 streams:
    +125 MiB of peak RSS in one run out of two)."""
    keep = set() if run is None else {id(o.data) for o in run.outcomes if o is not None}
    for buffer in buffers:
        if isinstance(buffer, memoryview) and id(buffer) not in keep:
            try:
                buffer.release()
            except BufferError:  # a client still holds it: freed when the client lets go
                continue


def _kept(run: Run) -> Run:
    """What a step keeps of a window until it ends: its timings and, of each outcome,
    only how many requests of which kind it made (what ``Run.requests_by_kind`` reads).
    Not the bytes read (a restore's reads would all stay in memory until the step ends),
    nor a tuple of sizes per request: 8 bytes per request instead of about 150."""
    return attrs.evolve(
        run, outcomes=tuple(Outcome(wire=o.wire) if o.wire else _PLAIN for o in run.outcomes)
    )


def _scanned(folder: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every file under ``folder`` (the local disk), with what fsspec's ``info`` says of
    its size, inode and link count (a symbolic link: its own inode, its target's size, 0
    when dangling), one at a time."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                yield from _scanned(entry.path)
                continue
            own = entry.stat(follow_symlinks=False)
            size = own.st_size
            if entry.is_symlink():
                try:
                    size = entry.stat(follow_symlinks=True).st_size
                except OSError:  # a dangling link, as fsspec counts it
                    size = 0
            yield entry.path, {"size": size, "ino": own.st_ino, "nlink": own.st_nlink}


def _multipart_plan(
    key: str, size: int, part_size: int, concurrency: int, capabilities: Capabilities
) -> Plan:
    """The plan of one multipart upload of ``size`` bytes to ``key``: one PUT of the whole
    body for a client that splits it itself, else create (where the client has one),
    the parts of ``part_size`` bytes, complete (where it has one)."""
    if capabilities.client_multipart:
        whole = Part(0, 0, size)
        return Plan(
            phases=(
                (
                    Request(
                        kind=Kind.PUT,
                        key=key,
                        body=whole,
                        part_size=part_size,
                        concurrency=concurrency,
                    ),
                ),
            )
        )
    parts = tuple(
        Request(
            kind=Kind.PUT_PART,
            key=key,
            start=start,
            stop=min(start + part_size, size),
            body=Part(0, start, min(start + part_size, size)),
            part_number=number,
        )
        for number, start in enumerate(range(0, size, part_size), start=1)
    )
    phases: list[tuple[Request, ...]] = []
    if capabilities.multipart_create:
        phases.append((Request(kind=Kind.CREATE_MULTIPART, key=key, start=0, stop=size),))
    phases.append(parts)
    if capabilities.multipart_complete:
        phases.append((Request(kind=Kind.COMPLETE_MULTIPART, key=key),))
    return Plan(phases=tuple(phases))


@frozen
class StepRecord:
    """The windows of one step and what the client's retry machinery saw in them."""

    runs: tuple[Run, ...]
    #: the windows' retries, answers and pushback summed (None: not observable)
    attempts: Attempts | None


class StepProgress(Protocol):
    """What a session tells about a step's progress (:class:`storeprobe.progress.StepBar`),
    always between windows: never while one is open."""

    def start(self, description: str) -> None:
        """A step begins (its label)."""

    def close(self) -> None:
        """The scenario has ended."""

    def window(self, moved: int) -> None:
        """A window closed, having moved ``moved`` bytes (sent + received)."""

    def work(self, what: str, done: int) -> None:
        """``done`` more bytes of untimed work ``what`` (chunking, hashing)."""


@define
class Session:
    """The windows of one scenario on ``target`` under ``prefix`` (a fresh run prefix)."""

    target: Target
    prefix: str
    streams: int
    #: requests in flight for the untimed cleanup (:meth:`close`)
    prep_streams: int
    timeout: float | None
    clock: Clock
    #: the client that reads byte ranges (decided once, before the first step)
    reader: Backend
    #: folders under the prefix made when the run opened (the method's own)
    premade: frozenset[str] = frozenset()
    #: the windows of the step under way
    runs: list[Run] = field(factory=list)
    #: what the client's retry machinery saw in each of them (None: not observable)
    attempts: list[Attempts | None] = field(factory=list)
    #: every name written and not deleted since, in order
    written: dict[str, int] = field(factory=dict)
    #: folders made for writes on a file system, in the order made
    folders: list[str] = field(factory=list)
    #: names the session hard-linked → the number of their file (one per inode)
    links: dict[str, int] = field(factory=dict)
    #: files numbered in ``links`` so far
    linked_files: int = 0
    #: names written or read since the last eviction (what the page cache may hold)
    touched: set[str] = field(factory=set)
    #: of those, names whose bytes no PUT of this client flushed (copies, their links)
    unflushed: set[str] = field(factory=set)
    #: what :meth:`usage` found, until a window writes, moves or deletes something
    used: tuple[int, int] | None = None
    #: the most bytes of bodies one window of :meth:`put` or :meth:`get_windows` holds
    budget: int = field(factory=lambda: WINDOW_BUDGET)
    #: told after each window and of untimed work (None: no progress shown)
    progress: StepProgress | None = None
    #: bytes (and :data:`REQUEST_WEIGHT` a request) through windows since the C heap's
    #: free memory was last given back
    unreturned: int = 0
    #: the buffer consecutive windows of writes take their bodies from (see
    #: :mod:`storeprobe.arena`), let go before a window of reads (their landings are
    #: their own), so a window never holds more than before
    arena: Arena = field(factory=Arena)

    # -- the step ----------------------------------------------------------------------
    def take_step(self) -> StepRecord:
        """The windows run since the last call (the step's), and start a new step."""
        record = StepRecord(runs=tuple(self.runs), attempts=summed(self.attempts))
        self.runs, self.attempts = [], []
        return record

    def _window(
        self,
        plan: Plan,
        payloads: BlobPayloads | None = None,
        *,
        existence: bool = False,
        streams: int | None = None,
        landings: Sequence[Landing] | None = None,
    ) -> Run:
        backend: Backend = self.target.backend
        if any(r.kind is Kind.GET and r.start is not None for r in plan.requests):
            backend = self.reader
        stagings: list[Staging] = []

        def staged(request: Request) -> bool:
            return (
                request.kind is Kind.PUT
                and request.body is not None
                and request.body.size > self.stage_above
                and backend.capabilities.sends_from_file
                and request.part_size is None
            )

        def body(request: Request) -> Body | None:
            part = request.body
            if part is None or payloads is None:
                return None
            if staged(request):
                # larger than a window: staged on the local disk, sent from there
                stagings.append(Staging.of_payloads(payloads, part.index, part.stop))
                return backend.whole_staged_file(stagings[-1])
            return next(made)

        self.used = None if any(r.kind not in _READS for r in plan.requests) else self.used
        self._before(plan, landings)
        bodies: list[Body | None] = []
        run: Run | None = None
        try:
            # the window's other bodies made together (the local disk: views of one buffer)
            parts = [r.body for r in plan.requests if r.body is not None and not staged(r)]
            made = iter([] if payloads is None else backend.bodies(payloads, parts, self.arena))
            bodies = [body(r) for r in plan.requests]
            before = backend.attempts_seen()
            run = execute(
                backend,
                plan,
                streams=self.streams if streams is None else streams,
                clock=self.clock,
                timeout=self.timeout,
                bodies=bodies,
                landings=landings,
                wrap=EXISTENCE if existence else None,
            )
        finally:
            for staging in stagings:
                staging.close()
            _let_go(run, [*bodies, *(landings or ())])
        self._record(run, between(before, backend.attempts_seen()))
        self.unreturned += int(run.timings.nbytes.sum()) + REQUEST_WEIGHT * len(plan.requests)
        return run

    def _before(self, plan: Plan, landings: Sequence[Landing] | None) -> None:
        """Before a window allocates: the arena let go if it reads (its landings or the
        client's buffers take the memory instead), and what the windows before freed
        given back (:func:`give_back`) once ``GIVE_BACK_AFTER`` has gone through them
        since the last time."""
        if landings is not None or any(r.kind is Kind.GET for r in plan.requests):
            self.arena.release()
        if self.unreturned >= GIVE_BACK_AFTER:
            give_back()
            self.unreturned = 0

    def _record(self, run: Run, attempts: Attempts | None) -> None:
        """Keep the window's record and what the client's retry machinery saw in it;
        tell the progress it closed (after it, untimed)."""
        self.runs.append(_kept(run))
        self.attempts.append(attempts)
        if self.progress is not None:
            self.progress.window(sum(o.sent + o.received for o in run.outcomes))

    def worked(self, what: str, done: int) -> None:
        """Tell the progress of ``done`` more bytes of untimed work ``what``."""
        if self.progress is not None:
            self.progress.work(what, done)

    # -- what a method asks -------------------------------------------------------------
    def key(self, *parts: str) -> str:
        """The full key of ``parts`` under the scenario's prefix."""
        return posixpath.join(self.prefix, *parts)

    def listing(self, folders: Sequence[str], *, one_level: bool = False) -> list[int]:
        """One listing per folder (a key under the prefix), paged as the client pages
        it; the entries each shows (-1 where the folder does not exist). ``one_level``:
        only the objects and subfolders directly under each (S3's ``delimiter=/``)."""
        return self._windows_of(
            folders, lambda f: Request(kind=Kind.LIST, key=f, one_level=one_level), existence=True
        )

    def head(self, keys: Sequence[str]) -> list[int]:
        """One HEAD per key; each object's size in bytes, or -1 where it does not exist."""
        return self._windows_of(keys, lambda k: Request(kind=Kind.HEAD, key=k), existence=True)

    def _windows_of(
        self, items: Sequence[_T], make: Callable[[_T], Request], *, existence: bool = False
    ) -> list[int]:
        """One request per item (``make``) in windows of at most :data:`WINDOW_REQUESTS`
        requests each, in order; each outcome's size. A request and its bound job take
        about 1.1 KB (obstore, tracemalloc): a tree's 58 000 HEADs in one window, 58 MiB."""
        sizes: list[int] = []
        for start in range(0, len(items), WINDOW_REQUESTS):
            some = items[start : start + WINDOW_REQUESTS]
            plan = Plan(phases=(tuple(make(item) for item in some),))
            sizes.extend(o.size for o in self._window(plan, existence=existence).outcomes)
        return sizes

    def put(self, blobs: Sequence[Blob]) -> None:
        """One PUT per blob, ≤ ``streams`` at once, in windows of at most ``budget``
        bytes (the folders a file system needs are made first, untimed)."""
        if not blobs:
            return
        self._make_folders(blob.key for blob in blobs)
        for run in windows([blob.size for blob in blobs], self.budget):
            some = [blobs[i] for i in run]
            plan = Plan(
                phases=(
                    tuple(
                        Request(kind=Kind.PUT, key=blob.key, body=Part(index, 0, blob.size))
                        for index, blob in enumerate(some)
                    ),
                )
            )
            for blob in some:
                self.written[blob.key] = blob.size
                self.touched.add(blob.key)
            self._window(plan, BlobPayloads(some))

    def get(self, reads: Sequence[Read]) -> list[bytes]:
        """One GET per read (ranged where it says), ≤ ``streams`` at once, in windows of
        at most ``budget`` bytes; the bytes of every read (held together: a restore that
        can write as it reads uses :meth:`get_windows`)."""
        return [body for bodies in self.get_windows(reads) for body in bodies]

    def read_through(self, reads: Sequence[Read]) -> None:
        """The reads of :meth:`get` whose bytes the method does not keep (a signature's
        read of a file, say): each window's bytes dropped before the next runs, and a
        whole object larger than the budget landed in a staging file and dropped with it
        (:meth:`get_staged_windows`), never held in memory."""
        for bodies in self.get_staged_windows(reads):
            for body in bodies:
                if isinstance(body, Staging):
                    body.close()

    def get_windows(self, reads: Sequence[Read]) -> Iterator[list[bytes]]:
        """The reads of :meth:`get`, one window at a time: each window's bytes, in order,
        before the next window runs (so the caller holds one window's bytes: the list
        handed out is emptied before the next window is read, so a ``for bodies in
        get_windows(...)`` loop does not keep it through the next read). A read's size is
        its range, or the size this session wrote under its key."""
        for run in windows(self._sizes(reads), self.budget):
            bodies = self._get([reads[i] for i in run])
            yield bodies
            bodies.clear()

    def get_each(self, reads: Sequence[Read]) -> Iterator[bytes | memoryview]:
        """The bytes of each read of :meth:`get_windows`, one at a time and in order, a
        window at a time (:meth:`get_staged_by_window` without staging files); a view is
        valid until the next body is asked for after its window's last, a ``bytes`` let
        go as the caller lets it go."""
        for bodies in self._by_window(reads, stage=False):
            bodies.reverse()
            while bodies:
                body = bodies.pop()
                assert not isinstance(body, Staging)
                yield body
                del body

    def get_staged_by_window(
        self, reads: Sequence[Read]
    ) -> Iterator[list[bytes | memoryview | Staging]]:
        """Each read of :meth:`get_staged_windows` (whole objects above
        :attr:`stage_above` landing in staging files), a window at a time: the window's
        bodies in a list, in order, so the caller can write them at once (untimed, on
        threads of its own).

        On a client that reads into a buffer made before the window (the local disk:
        :meth:`~storeprobe.backends.base.Backend.landings`), a window's reads fill slices
        of one buffer, each handed out as a memoryview of it, so a window of many small
        reads allocates once (a buffer per read, made in whichever worker thread read
        it, scatters what is freed over the threads' malloc arenas, and the process
        keeps it). The views and staging files are valid until the next window is asked
        for: the session then releases the views, closes the staging files and empties
        the list, so the buffer is freed before the next window is read, whatever still
        names them (a caller's loop variable). Other clients' reads are ``bytes``."""
        yield from self._by_window(reads, stage=True)

    def _by_window(
        self, reads: Sequence[Read], *, stage: bool
    ) -> Iterator[list[bytes | memoryview | Staging]]:
        """The reads a window at a time (through staging files where ``stage``); what
        the window handed out released before the next window is read."""
        sizes = self._sizes(reads)
        for run in windows(sizes, self.budget):
            staged = self._stagings(reads, sizes, run, ranges=False) if stage else [None] * len(run)
            bodies = self._landed([reads[i] for i in run], [sizes[i] for i in run], staged)
            del staged
            handed = [b for b in bodies if isinstance(b, memoryview | Staging)]
            try:
                yield bodies
            finally:  # a staging file the caller closed already is closed again harmlessly
                bodies.clear()
                for body in handed:
                    if isinstance(body, memoryview):
                        body.release()
                    else:
                        body.close()
                del handed

    def _landed(
        self,
        reads: Sequence[Read],
        sizes: Sequence[int],
        staged: Sequence[Staging | None],
        *,
        views: bool = True,
    ) -> list[bytes | memoryview | Staging]:
        """One window of ``reads`` (``sizes`` bytes each): a read with a staging file in
        ``staged`` lands in it (and is handed back so), the others where the client's
        :meth:`~storeprobe.backends.base.Backend.landings` says (handed back as views of
        them; not ``views``: nowhere) or in buffers of the client's own (copied to
        ``bytes``, one at a time, as :meth:`get`)."""
        ranged = any(read.start is not None for read in reads)
        backend = self.reader if ranged else self.target.backend
        try:
            held = [n for n, s in zip(sizes, staged, strict=True) if s is None]
            self.arena.release()  # the writes' buffer: not beside the reads' landings
            slices = iter(backend.landings(held) if views else [None] * len(held))
            landings: list[Landing] = [next(slices) if s is None else s for s in staged]
            del slices
            received = self._received(reads, landings)
        except BaseException:
            for staging in staged:
                if staging is not None:
                    staging.close()
            raise
        bodies: list[bytes | memoryview | Staging] = []
        for index, (landing, staging) in enumerate(zip(landings, staged, strict=True)):
            data, received[index] = received[index], None
            if staging is not None:
                if data:  # the client returned it in its own buffer
                    staging.write(0, data)
                bodies.append(staging)
            elif landing is not None and isinstance(data, memoryview):
                bodies.append(data)
            else:
                bodies.append(bytes(data or b""))
        return bodies

    def get_staged_windows(
        self, reads: Sequence[Read], *, ranges: bool = False
    ) -> Iterator[list[bytes | Staging]]:
        """:meth:`get_windows`, but a whole object larger than :attr:`stage_above`, on a
        client that lands a read in a file (``lands_in_file``: the local disk, S3), lands
        in a :class:`~storeprobe.staging.Staging` file written as its bytes arrive (one
        GET as in memory; the file is zeroed and fsynced before its window, as a probe's
        staged download). ``ranges``: a ranged read larger than :attr:`stage_above` too
        (a pack's range, a run of copied blocks), on the client that reads ranges; its
        file holds the range's bytes from offset 0. The caller reads it and closes it.
        As with :meth:`get_windows`, the list handed out is emptied before the next
        window runs."""
        sizes = self._sizes(reads)
        for run in windows(sizes, self.budget):
            staged = self._stagings(reads, sizes, run, ranges=ranges)
            some = [reads[i] for i in run]
            bodies: list[bytes | Staging] = [  # not views: bytes already (no copy made)
                b if isinstance(b, bytes | Staging) else bytes(b)
                for b in self._landed(some, [sizes[i] for i in run], staged, views=False)
            ]
            del staged
            yield bodies
            # the caller's loop variable still names this list while the next window is
            # read: emptied, it holds none of this window's bytes
            bodies.clear()

    def _stagings(
        self, reads: Sequence[Read], sizes: Sequence[int], run: range, *, ranges: bool
    ) -> list[Staging | None]:
        """A staging file for each read of ``run`` above :attr:`stage_above` that lands in
        one (see :meth:`get_staged_windows`), None for the others."""
        whole_lands = self.target.backend.capabilities.lands_in_file
        range_lands = ranges and self.reader.capabilities.lands_in_file
        return [
            Staging.blank(sizes[i])
            if (whole_lands if reads[i].start is None else range_lands)
            and sizes[i] > self.stage_above
            else None
            for i in run
        ]

    @property
    def stage_above(self) -> int:
        """Bytes above which one whole object is staged in a local file instead of held
        in memory (:data:`STAGE_ABOVE`, or the budget when it is smaller)."""
        return min(self.budget, STAGE_ABOVE)

    def _sizes(self, reads: Sequence[Read]) -> list[int]:
        return [
            r.stop - r.start
            if r.start is not None and r.stop is not None
            else self.written.get(r.key, 0)
            for r in reads
        ]

    def _get(self, reads: Sequence[Read], landings: Sequence[Landing] | None = None) -> list[bytes]:
        if not reads:
            return []
        received = self._received(reads, landings)
        bodies: list[bytes] = []
        for index, data in enumerate(received):  # one copy at a time: a window, not two
            received[index] = None
            bodies.append(bytes(data or b""))
        return bodies

    def _received(
        self, reads: Sequence[Read], landings: Sequence[Landing] | None
    ) -> list[Buffer | None]:
        """What one window of GETs of ``reads`` returned, read by read (a view of its
        landing where the client read into one)."""
        plan = Plan(
            phases=(
                tuple(
                    Request(kind=Kind.GET, key=read.key, start=read.start, stop=read.stop)
                    for read in reads
                ),
            )
        )
        run = self._window(plan, landings=landings)
        self.touched.update(read.key for read in reads)
        received: list[Buffer | None] = [outcome.data for outcome in run.outcomes]
        del run  # the step keeps its record without the bytes read (see _kept)
        return received

    def put_parts(self, blob: Blob, part_size: int, concurrency: int) -> None:
        """One multipart upload of ``blob`` in parts of ``part_size`` bytes, at most
        ``concurrency`` (and ``streams``) in flight: create, parts, complete (a client
        that splits uploads by itself, obstore, is handed the whole blob and the part
        size). One PUT where the client cannot split an upload.

        One window, whatever the blob's size. A blob larger than the budget is not made
        in memory: before the window it is written to a staging file 1 MiB at a time and
        fsynced (:meth:`Staging.of_payloads`, untimed), each part is sent as a view of
        the file's pages and unmapped once sent (:func:`~storeprobe.jobs.release_parts`),
        so memory holds the parts in flight; what the window then includes besides the
        transfer is the read of each part from the page cache, as a probe's staged split
        upload. Parts are not made while the window runs (a producer filling a pool
        beside the requests would put their making, CPU the storage never sees, into the
        timed span). obstore is handed the whole blob, held in memory."""
        capabilities = self.target.backend.capabilities
        if not capabilities.splits_uploads:
            self.put([blob])
            return
        self._make_folders([blob.key])
        size, key = blob.size, blob.key
        plan = _multipart_plan(key, size, part_size, concurrency, capabilities)
        self.written[key] = size
        self.touched.add(key)
        self.unflushed.add(key)
        streams = min(concurrency, self.streams)
        if capabilities.client_multipart or size <= self.stage_above:
            self._window(plan, BlobPayloads([blob]), streams=streams)
            return
        self._put_staged(plan, blob, streams)

    def _put_staged(self, plan: Plan, blob: Blob, streams: int) -> None:
        """The parts of ``plan``, an object larger than a window, staged, then sent as
        views of the file (see :meth:`put_parts`)."""
        staging = Staging.of_payloads(BlobPayloads([blob]), 0, blob.size)
        backend = self.target.backend
        self.used = None
        before = backend.attempts_seen()
        try:
            bodies = [
                None if r.body is None else self.target.backend.staged_body(staging, r.body)
                for r in plan.requests
            ]
            run = execute(
                self.target.backend,
                plan,
                streams=streams,
                clock=self.clock,
                timeout=self.timeout,
                bodies=bodies,
                wrap=settling(release_parts(plan, staging)),
            )
            del bodies
        finally:
            staging.close()
        self._record(run, between(before, backend.attempts_seen()))

    def copy(self, pairs: Sequence[tuple[str, str]]) -> None:
        """One server-side COPY per ``(source, key)``, ≤ ``streams`` at once (the folders
        a file system needs are made first, untimed); no bytes go through the client."""
        if not pairs:
            return
        self._make_folders(key for _, key in pairs)
        self._windows_of(pairs, lambda pair: Request(kind=Kind.COPY, key=pair[1], source=pair[0]))
        for source, key in pairs:
            self.written[key] = self.written.get(source, 0)
            self.touched.add(key)
            self.unflushed.add(key)

    def delete(self, keys: Sequence[str]) -> None:
        """One DELETE per key, ≤ ``streams`` at once."""
        self._windows_of(keys, lambda k: Request(kind=Kind.DELETE, key=k))
        for key in keys:
            self.written.pop(key, None)
            self.links.pop(key, None)
            self.touched.discard(key)
            self.unflushed.discard(key)

    def link(self, pairs: Sequence[tuple[str, str]]) -> None:
        """One hard link per ``(name, existing)`` pair, ≤ ``streams`` at once: ``name``
        becomes a second name of the file ``existing`` (file systems only; the folders
        the names need are made first, untimed). The new names count as written."""
        if not pairs:
            return
        self._make_folders(name for name, _ in pairs)
        for name, existing in pairs:
            self.written[name] = self.written.get(existing, 0)
            if existing not in self.links:
                self.links[existing] = self.linked_files
                self.linked_files += 1
            self.links[name] = self.links[existing]
            self.touched.add(name)
            if existing in self.unflushed:
                self.unflushed.add(name)
        self._windows_of(pairs, lambda pair: Request(kind=Kind.LINK, key=pair[0], source=pair[1]))

    def rename(self, pairs: Sequence[tuple[str, str]]) -> None:
        """One rename per ``(name, existing)`` pair, ≤ ``streams`` at once: ``existing``
        (a file, or a folder with everything in it) moves to ``name``, replacing the
        file ``name`` was (file systems only)."""
        if not pairs:
            return
        self._make_folders(name for name, _ in pairs)
        for name, existing in pairs:
            if existing in self.written:
                self.written[name] = self.written.pop(existing)
                self.links.pop(name, None)
                if existing in self.links:
                    self.links[name] = self.links.pop(existing)
                self.touched.discard(existing)
                self.touched.add(name)
                self.unflushed.discard(name)
                if existing in self.unflushed:
                    self.unflushed.discard(existing)
                    self.unflushed.add(name)
            else:
                self._move_folder(existing, name)
        self._windows_of(pairs, lambda pair: Request(kind=Kind.RENAME, key=pair[0], source=pair[1]))

    def _move_folder(self, old: str, new: str) -> None:
        """Keep the names under folder ``old`` (written, linked, made) under ``new``."""
        inside = old + "/"

        def moved(key: str) -> str:
            return new + key[len(old) :] if key == old or key.startswith(inside) else key

        self.written = {moved(key): size for key, size in self.written.items()}
        self.links = {moved(key): group for key, group in self.links.items()}
        self.folders = [moved(folder) for folder in self.folders]
        self.touched = {moved(key) for key in self.touched}
        self.unflushed = {moved(key) for key in self.unflushed}

    # -- untimed housekeeping -----------------------------------------------------------
    def _make_folders(self, keys: object) -> None:
        backend = self.target.backend
        made = {*self.folders, *(self.key(f) for f in self.premade)}
        needed: list[str] = []
        for key in keys:  # type: ignore[attr-defined]
            parents: list[str] = []
            folder = posixpath.dirname(key)
            while folder != self.prefix and folder.startswith(self.prefix + "/"):
                if folder in made:
                    break
                parents.append(folder)
                folder = posixpath.dirname(folder)
            parents.reverse()
            made.update(parents)
            needed.extend(parents)

        def make(folder: str) -> None:
            backend.make_prefix(folder)
            self.folders.append(folder)  # made: the scenario's end removes it

        # parents before children, in one thread (see bounded_each)
        bounded_each([functools.partial(make, folder) for folder in needed], self.timeout)

    def evict(self) -> None:
        """Drop what the scenario wrote or read since the last eviction from the caches
        the client can reach (the page cache for ``file://``), so a restore reads the
        storage (untimed). Names only a PUT of this client wrote, or that were only read
        since, are not flushed again (the local disk's PUT fsyncs)."""
        touched = sorted(name for name in self.touched if name in self.written)
        synced = self.touched - self.unflushed
        self.target.backend.after_upload(touched, synced=synced)
        self.touched, self.unflushed = set(), set()

    def cache_suspect(self) -> str | None:
        """Why a restore may still be served from a cache here, or None: the client's own
        reason (a platform without page-cache eviction), or, on a remote storage, the
        server's cache, which no client can evict (memory:// has nothing to evict)."""
        reason = self.target.backend.cache_suspect()
        protocol = self.target.protocol
        if reason is None and protocol not in _EVICTABLE:
            reason = (
                f"restores from {protocol}:// read objects the backups just wrote; the "
                "server's own cache (its page cache, an object store's read cache) may "
                "still hold them and no client can evict it, so a restore may read faster "
                "than a cold one"
            )
        return reason

    def usage(self) -> tuple[int, int]:
        """(objects, bytes) the target holds under the prefix (untimed): objects by name,
        bytes as ``du -b`` counts them (a hard-linked file once).

        A file's inode comes from fsspec's ``info`` where it has one (``ino`` and
        ``nlink``: the local disk); where it has none (SFTP version 3, which sshfs
        speaks, reports no inode or link count) the links this session made tell which
        names share a file.

        After a step that only read, listed and HEADed (a restore), the figure is the
        one found before it: nothing under the prefix changed, and the walk is not
        repeated."""
        if self.used is not None:
            return self.used
        found: list[tuple[int, int]] = []

        def walk() -> None:
            seen: set[object] = set()
            total = count = 0
            for name, entry in self._listed():
                count += 1
                inode = entry.get("ino")
                same: object = None
                if inode is not None:
                    if int(entry.get("nlink") or 1) > 1:
                        same = ("inode", inode)
                elif name in self.links:
                    same = ("link", self.links[name])
                if same is not None:
                    if same in seen:
                        continue
                    seen.add(same)
                total += int(entry.get("size") or 0)
            found.append((count, total))

        bounded(walk, self.timeout)
        self.used = found[0]
        return self.used

    def _listed(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every file under the prefix and its fsspec ``info``, one at a time."""
        fs = self.target.fs
        fs.invalidate_cache()
        # a client whose find is fsspec's own (a walk, folder by folder: the local disk,
        # SFTP) is walked here folder by folder, so one folder's entries are held at a
        # time instead of the whole tree's (the same listings, the same entries)
        if isinstance(fs, LocalFileSystem):
            # the local disk: each entry's stat as it is scanned (its ls holds a folder's
            # info dicts at once, about 1 KB each: a chunk store's one folder)
            yield from _scanned(fs._strip_protocol(self.prefix))
            return
        if type(fs).find is not AbstractFileSystem.find:
            yield from fs.find(self.prefix, detail=True).items()
            return
        for _, _, files in fs.walk(self.prefix, detail=True):
            # keyed by base name: the entry holds the full name, as find gives it
            yield from ((entry["name"], entry) for entry in files.values())

    def close(self, folders: Sequence[str]) -> list[Leftover]:
        """Delete every name still written, then the folders made and ``folders``
        (deepest first) and the prefix itself; return what could not be deleted (untimed,
        ``prep_streams`` deletes at once)."""
        left = delete_names(
            self.target,
            list(self.written),
            streams=self.prep_streams,
            clock=self.clock,
            timeout=self.timeout,
        )
        made = {*self.folders, *(self.key(f) for f in folders)}
        return left + remove_folders(
            self.target, [*sorted(made, key=lambda f: (-f.count("/"), f)), self.prefix]
        )
