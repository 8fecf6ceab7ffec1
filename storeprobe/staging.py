"""Staging: one large object's bytes in a local file, so memory holds only what is in flight.

An object of at least ``Probe.stage_above`` bytes (1 GiB by default), probed alone
(``count=1``), is not held in memory, whatever the stream count:

- **upload**: before the timed window the payload is written, 1 MiB at a time, to a
  staging file in the temporary directory (``TMPDIR``) and fsynced, so its pages sit
  clean in the kernel's page cache and no write-back of them overlaps the window. A split
  upload sends views of that file's pages as parts; a single-request upload hands the
  client the file (:class:`~storeprobe.request.StagedFile`), which it reads as it sends,
  :data:`CHUNK` at a time (clients that can only send a body held in memory, such as
  obstore, split the object into parts sent one at a time instead);
- **download**: a staging file of the object's size is written with zeros and fsynced
  before the window (its pages allocated); a split download's ranges land in views of
  it, a single-request download is written into it as the bytes arrive
  (:meth:`Staging.write`), and verification reads it back afterwards, 1 MiB at a time.

Once a part or range is done, its pages are unmapped from the process
(``madvise(MADV_DONTNEED)``; the file keeps the data), so the probe's resident memory
stays near the bytes in flight. What the window then includes besides the transfer:
reading the staged file from the page cache (or mapping its pages), and writing what
arrives into it: one memory copy of each byte more than a transfer held in memory
(``docs/benchmarks.md``, "Memory", measures what that costs). Where the page cache
cannot keep the file (less free memory than the object), reading it in the window
reads the local disk: ``TMPDIR`` should then point at a fast disk. The Result's
``strategy`` says when an object was staged.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Protocol

from storeprobe.errors import ConfigurationError
from storeprobe.units import MiB, format_size
from storeprobe.workload import Workload

__all__ = ["CHUNK", "Staging"]

#: bytes a client moves between a staging file and the wire at a time
CHUNK = 8 * MiB
_CHUNK = MiB
_PAGE = mmap.PAGESIZE


class Fills(Protocol):
    """What fills a staging file: the bytes of object ``index`` from ``start`` into ``out``
    (a :class:`~storeprobe.request.Payloads`)."""

    def fill(self, index: int, start: int, out: memoryview) -> None: ...


class Staging:
    """A temporary file of ``size`` bytes, mapped shared into memory, deleted on close."""

    def __init__(self, size: int, directory: str | None = None) -> None:
        directory = self.check_room(size, directory)
        self.size = size
        self._file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in close()
            prefix="storeprobe-staging-", dir=directory
        )
        self.path = self._file.name
        self.fd = self._file.fileno()
        os.ftruncate(self.fd, size)
        self._map = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED)
        self.view = memoryview(self._map)

    @staticmethod
    def check_room(size: int, directory: str | None = None) -> str:
        """The staging directory (``TMPDIR`` by default), once it has room for ``size``
        bytes and 64 MiB more; else :class:`ConfigurationError` saying what to do."""
        directory = directory or tempfile.gettempdir()
        free = shutil.disk_usage(directory).free
        if free < size + 64 * MiB:
            raise ConfigurationError(
                f"staging one object of {format_size(size)} needs that much free space in "
                f"{directory} ({format_size(free)} free): point TMPDIR at a larger disk, or "
                "use a smaller object"
            )
        return directory

    @classmethod
    def of_payload(cls, workload: Workload, index: int, directory: str | None = None) -> Staging:
        """A staging file holding object ``index``'s payload, written 1 MiB at a time."""
        return cls.of_payloads(workload, index, workload.size_of(index), directory)

    @classmethod
    def of_payloads(
        cls, payloads: Fills, index: int, size: int, directory: str | None = None
    ) -> Staging:
        """A staging file holding the first ``size`` bytes of object ``index`` of
        ``payloads``, written 1 MiB at a time (a backup's object larger than a window)."""
        staging = cls(size, directory)
        buffer = bytearray(_CHUNK)
        for start in range(0, size, _CHUNK):
            stop = min(start + _CHUNK, size)
            chunk = memoryview(buffer)[: stop - start]
            payloads.fill(index, start, chunk)
            staging.write(start, chunk)
        os.fsync(staging.fd)  # clean pages: no write-back of them during the window
        return staging

    @classmethod
    def blank(cls, size: int, directory: str | None = None) -> Staging:
        """A zeroed staging file whose pages are allocated in the page cache already."""
        staging = cls(size, directory)
        zeros = bytes(_CHUNK)
        for start in range(0, size, _CHUNK):
            staging.write(start, memoryview(zeros)[: min(_CHUNK, size - start)])
        os.fsync(staging.fd)  # clean pages: no write-back of them during the window
        return staging

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` into the file at ``offset`` (through the page cache, not the
        mapping); return its length. Bytes past the end grow the file (and are kept, so
        a longer answer than was written is seen)."""
        view = memoryview(data)
        size = len(view)
        while view:
            written = os.pwrite(self.fd, view, offset)
            view = view[written:]
            offset += written
        return size

    def part(self, start: int, stop: int) -> memoryview:
        """Bytes ``[start, stop)`` of the file, as a view of its mapping."""
        return self.view[start:stop]

    def release(self, start: int, stop: int) -> None:
        """Unmap the pages of ``[start, stop)`` from this process; the file keeps them."""
        first = start - start % _PAGE
        if stop > first and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED, first, min(stop, self.size) - first)

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of the whole file, 1 MiB at a time, read without the mapping."""
        for start in range(0, self.size, _CHUNK):
            yield start, os.pread(self.fd, min(_CHUNK, self.size - start), start)

    def close(self) -> None:
        """Unmap and delete the file (views still held elsewhere keep the map alive)."""
        self.view.release()
        with contextlib.suppress(BufferError):  # a client still holds a view: the map
            self._map.close()  # goes with it
        self._file.close()
