"""``file://``: POSIX calls, create-only writes, fsync, and page-cache eviction.

An upload counts until the data is on disk: each object is written with
``O_CREAT | O_EXCL`` and fsynced inside the timed window. A link is ``os.link``, a
rename ``os.replace`` (a rename over an existing name replaces it, as ``rename(2)``).
Before a timed download the files are evicted from the page cache with
``posix_fadvise(POSIX_FADV_DONTNEED)``.
Reads fill the buffer the probe prepared before the window (a backup scenario's window
of reads: slices of one buffer, :meth:`LocalBackend.landings`). One object's upload is
split as create (open, size) → parts (``pwrite`` at their offsets) → complete (fsync).

A staged object (see :mod:`storeprobe.staging`) is never held whole. A single-request
upload copies the staging file (from the page cache) into the object inside the kernel,
``staging.CHUNK`` bytes per ``sendfile`` call: one memory copy per byte, as when the
object is held in memory (copied from the process's buffer into the page cache); where
``sendfile`` cannot write to a file (not Linux), through a reused buffer, one copy more.
A single-request download reads the object into one reused buffer of ``staging.CHUNK``
bytes and writes each buffer into the staging file: one copy per byte more than a read
into memory (measured faster than ``sendfile``, whose small splices read the object
with less read-ahead). Both buffers are allocated, their pages touched, before the
window.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Callable, Collection, Sequence

from storeprobe.arena import Arena
from storeprobe.backends.base import (
    Capabilities,
    Landing,
    SyncBackend,
    SyncUpload,
    sliced_bodies,
    sliced_landings,
    source_of,
)
from storeprobe.backends.registry import ClientSpec
from storeprobe.request import Body, Kind, Outcome, Part, Payloads, Request, StagedFile, SyncJob
from storeprobe.staging import CHUNK, Staging
from storeprobe.transfer import Clock

__all__ = ["SPEC", "LocalBackend", "evict_from_page_cache"]

_HEAD = 64 * 1024  # bytes read before the first-byte mark
#: sendfile copies between regular files (Linux since 2.6.33)
_SENDFILE = sys.platform.startswith("linux")


def _buffer(body: Body | None) -> memoryview:
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"the local backend writes bytes, not {type(body).__name__}")
    return memoryview(body)


def _write_all(fd: int, view: memoryview, offset: int | None = None) -> None:
    while view:
        written = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        view = view[written:]
        if offset is not None:
            offset += written


def _read_whole(path: str, into: bytearray | memoryview | None, clock: Clock) -> Outcome:
    with open(path, "rb", buffering=0) as handle:
        if into is None:
            head = handle.read(_HEAD)
            first_byte = clock()
            rest = handle.read()
            data = head + rest if rest else head
            return Outcome(received=len(data), first_byte_ns=first_byte, data=data)
        # the landing itself where it is a view (released after the window: see s3fs)
        view = into if isinstance(into, memoryview) else memoryview(into)
        filled = handle.readinto(view[:_HEAD]) or 0
        first_byte = clock()
        while filled < len(view):
            got = handle.readinto(view[filled:])
            if not got:
                break
            filled += got
        extra = handle.read()  # anything beyond what was written
    if extra:
        data = bytes(view[:filled]) + extra
        return Outcome(received=len(data), first_byte_ns=first_byte, data=data)
    return Outcome(received=filled, first_byte_ns=first_byte, data=view[:filled])


def _call(call: Callable[[str, str], None], source: str, path: str) -> Outcome:
    """``call(source, path)`` (``os.link``, ``os.replace``): one metadata request."""
    call(source, path)
    return Outcome()


def _chunk_buffer() -> memoryview:
    """A buffer of ``CHUNK`` bytes with its pages touched (made before the window)."""
    buffer = bytearray(CHUNK)
    buffer[::4096] = bytes(len(range(0, CHUNK, 4096)))
    return memoryview(buffer)


def _copy(source: int, target: int, offset: int, count: int, buffer: memoryview | None) -> int:
    """Copy up to ``count`` bytes from ``source`` at ``offset`` to ``target`` at its
    position (in the kernel, or through ``buffer``); return how many (0: end of file)."""
    if buffer is None:
        return os.sendfile(target, source, offset, count)
    got = os.preadv(source, [buffer[:count]], offset)
    _write_all(target, buffer[:got])
    return got


def _put_staged(path: str, staged: StagedFile, buffer: memoryview | None) -> Outcome:
    """Write the staged file to ``path`` (create-only, fsynced), a chunk at a time."""
    source = os.open(staged.path, os.O_RDONLY)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            sent = 0
            while got := _copy(source, fd, sent, CHUNK, buffer):
                sent += got
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        os.close(source)
    return Outcome(sent=sent)


def _read_staged(
    path: str,
    staging: Staging,
    buffer: memoryview,
    clock: Clock,
    start: int | None = None,
    stop: int | None = None,
) -> Outcome:
    """Read ``path`` (whole, or bytes ``[start, stop)``) into the staging file from its
    offset 0, one buffer at a time."""
    with open(path, "rb", buffering=0) as handle:
        left = -1 if start is None or stop is None else stop - start
        if start is not None:
            handle.seek(start)
        received = handle.readinto(buffer[: _HEAD if left < 0 else min(_HEAD, left)]) or 0
        first_byte = clock()
        staging.write(0, buffer[:received])
        while left < 0 or received < left:
            got = handle.readinto(buffer if left < 0 else buffer[: left - received])
            if not got:
                break
            received += staging.write(received, buffer[:got])
    return Outcome(received=received, first_byte_ns=first_byte)


def _read_range(path: str, start: int, stop: int, into: bytearray | memoryview | None) -> Outcome:
    if into is None:  # bytes read by the kernel into the object returned: never copied
        return _pread_range(path, start, stop)
    view = memoryview(into)
    fd = os.open(path, os.O_RDONLY)
    try:
        filled = 0
        while filled < len(view):
            got = os.preadv(fd, [view[filled:]], start + filled)
            if not got:
                break
            filled += got
    finally:
        os.close(fd)
    return Outcome(received=filled, data=view[:filled])


def _pread_range(path: str, start: int, stop: int) -> Outcome:
    """Bytes ``[start, stop)`` of ``path`` as one ``bytes`` (short reads, rare on a
    regular file, joined)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, stop - start, start)
        if data and len(data) < stop - start:
            pieces = [data]
            filled = len(data)
            while filled < stop - start and (
                more := os.pread(fd, stop - start - filled, start + filled)
            ):
                pieces.append(more)
                filled += len(more)
            data = b"".join(pieces)
    finally:
        os.close(fd)
    return Outcome(received=len(data), data=data)


class LocalUpload(SyncUpload):
    """A split upload on the local disk: its steps share one open file per object."""

    def __init__(self, backend: SyncBackend, requests: Sequence[Request], clock: Clock) -> None:
        super().__init__(backend, requests, clock)
        self.opened: dict[str, int] = {}

    def create(self, request: Request, body: Body | None) -> SyncJob:
        path, opened = request.key, self.opened
        size = request.stop or 0  # a create names the object's whole extent

        def create() -> Outcome:
            opened[path] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.ftruncate(opened[path], size)
            return Outcome()

        return SyncJob(Kind.CREATE_MULTIPART, create)

    def part(self, request: Request, body: Body | None) -> SyncJob:
        path, opened = request.key, self.opened
        view = _buffer(body)
        offset = request.start or 0

        def part() -> Outcome:
            _write_all(opened[path], view, offset)
            return Outcome(sent=len(view))

        return SyncJob(Kind.PUT_PART, part)

    def complete(self, request: Request, body: Body | None) -> SyncJob:
        path, opened = request.key, self.opened

        def complete() -> Outcome:
            fd = opened.pop(path)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            return Outcome()

        return SyncJob(Kind.COMPLETE_MULTIPART, complete)

    def abort(self) -> None:
        for path in list(self.opened):
            os.close(self.opened.pop(path))


class LocalBackend(SyncBackend):
    """The local disk through POSIX calls (see the module docstring)."""

    name = "local"
    capabilities = Capabilities(
        splits_uploads=True, reads_into=True, sends_from_file=True, lands_in_file=True
    )
    upload = LocalUpload

    def make_prefix(self, prefix: str) -> None:
        os.mkdir(prefix)

    def remove_prefix(self, prefix: str) -> None:
        os.rmdir(prefix)

    def after_upload(self, paths: Sequence[str], *, synced: Collection[str] = ()) -> None:
        # a PUT here fsyncs what it wrote: only other files are flushed before eviction
        # (the kernel does not drop dirty pages)
        known = frozenset(synced)
        for path in paths:
            evict_from_page_cache(path, flush=path not in known)

    def cache_suspect(self) -> str | None:
        if not hasattr(os, "posix_fadvise"):
            return (
                "this platform has no posix_fadvise: downloads from file:// may be served "
                "from the page cache and read faster than the disk"
            )
        return None

    def bodies(
        self, workload: Payloads, parts: Sequence[Part], arena: Arena | None = None
    ) -> list[Body]:
        return sliced_bodies(workload, parts, arena)  # one buffer for the window

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path = request.key
        if isinstance(body, StagedFile):
            staged, buffer = body, None if _SENDFILE else _chunk_buffer()
            return SyncJob(Kind.PUT, lambda: _put_staged(path, staged, buffer))
        view = _buffer(body)

        def put() -> Outcome:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                _write_all(fd, view)
                os.fsync(fd)
            finally:
                os.close(fd)
            return Outcome(sent=len(view))

        return SyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path = request.key
        start, stop = request.start, request.stop
        if isinstance(into, Staging):
            staging, buffer = into, _chunk_buffer()
            return SyncJob(
                Kind.GET, lambda: _read_staged(path, staging, buffer, clock, start, stop)
            )
        buffer_into = into
        if start is not None and stop is not None:
            return SyncJob(Kind.GET, lambda: _read_range(path, start, stop, buffer_into))
        return SyncJob(Kind.GET, lambda: _read_whole(path, buffer_into, clock))

    def landings(self, sizes: Sequence[int], arena: Arena | None = None) -> list[Landing]:
        return sliced_landings(sizes, arena)  # one buffer for the window, each read its slice

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path = request.key
        return SyncJob(Kind.HEAD, lambda: Outcome(size=os.stat(path).st_size))

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path = request.key
        return SyncJob(Kind.LIST, lambda: Outcome(size=len(os.listdir(path))))

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path = request.key

        def delete() -> Outcome:
            os.unlink(path)
            return Outcome()

        return SyncJob(Kind.DELETE, delete)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path, source = request.key, source_of(self.name, request)
        return SyncJob(Kind.COPY, lambda: _link(source, path))

    def link(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path, source = request.key, source_of(self.name, request)
        return SyncJob(Kind.LINK, lambda: _call(os.link, source, path))

    def rename(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path, source = request.key, source_of(self.name, request)
        return SyncJob(Kind.RENAME, lambda: _call(os.replace, source, path))


def _link(source: str, path: str) -> Outcome:
    """A COPY on the local disk: a hard link (a copy of the bytes where links fail)."""
    try:
        os.link(source, path)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copyfile(source, path)
    return Outcome()


def evict_from_page_cache(path: str, *, flush: bool = True) -> None:
    """Ask the kernel to drop ``path`` from the page cache (no-op where unsupported);
    ``flush``: write its dirty pages first (the kernel keeps dirty pages; without it,
    only a file already on the disk is dropped whole)."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if flush:
            os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


#: ``file://`` through POSIX calls
SPEC = ClientSpec(
    name="local",
    backend=LocalBackend,
    modules=("fsspec.implementations.local",),
    protocols=("file", "local"),
    implements=("file", "local"),
)
