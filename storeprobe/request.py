"""The request model: what a plan asks of a storage, and what each request returned.

A :class:`Request` is one thing a client does against the storage: put, get, head,
list, delete or copy (server-side) one key, one step of a multipart upload, or (on file
systems) a hard link or a rename of one name to another. It names the key, the byte range
and the body it sends (a :class:`Part` of a workload's object: a reference, not the
bytes). A plan is an immutable sequence of phases; a phase is a tuple of requests
that may run concurrently (see :mod:`storeprobe.planning`).

A backend turns a request into a :class:`Job`: the request's kind and a call (a
coroutine function for asynchronous clients, a plain callable otherwise) that makes the
request and returns an :class:`Outcome`: the payload bytes sent and received, the clock
mark of the first byte where the client can tell, and the data a download returned.
The engine (:mod:`storeprobe.transfer`) times each call and records its kind.
"""

from __future__ import annotations

import enum
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple, Protocol

from attrs import frozen

__all__ = [
    "KINDS",
    "AsyncCall",
    "AsyncJob",
    "Body",
    "Buffer",
    "Kind",
    "Outcome",
    "Part",
    "Payloads",
    "Request",
    "StagedFile",
    "SyncCall",
    "SyncJob",
    "kind_index",
]

Buffer = bytes | bytearray | memoryview


class Payloads(Protocol):
    """Where bodies come from: bytes of numbered objects, reproducible (a Workload, or a
    dataset's files and chunks). Sizes and offsets in bytes."""

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of object ``index`` into ``out``."""

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        """Bytes ``[start, stop)`` of object ``index`` as a new bytearray."""

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of object ``index`` as bytes."""


@frozen
class StagedFile:
    """A body that is bytes ``[start, start + size)`` of a staged file (the whole file by
    default), read by the client itself as it sends (see staging)."""

    path: Path
    size: int
    start: int = 0


#: what a write sends, in the form its client takes best (made before the window)
Body = Buffer | io.BytesIO | StagedFile


class Kind(enum.StrEnum):
    """What one request does (new kinds are appended: a kind is recorded by position)."""

    PUT = "put"
    GET = "get"
    HEAD = "head"
    LIST = "list"
    DELETE = "delete"
    CREATE_MULTIPART = "create-multipart"
    PUT_PART = "put-part"
    COMPLETE_MULTIPART = "complete-multipart"
    #: a server-side copy of the object ``Request.source`` to ``Request.key`` (S3's PUT
    #: with ``x-amz-copy-source``; a hard link on a file system)
    COPY = "copy"
    #: a hard link: ``key`` made a second name of ``source`` (file systems only)
    LINK = "link"
    #: a rename: ``source`` moved to ``key``, replacing it (file systems only)
    RENAME = "rename"


#: the kinds in a fixed order: a request's kind is recorded as its index here
KINDS: tuple[Kind, ...] = tuple(Kind)
_KIND_INDEX = {kind: index for index, kind in enumerate(KINDS)}


def kind_index(kind: Kind) -> int:
    """The position of ``kind`` in :data:`KINDS` (how the engine records it)."""
    return _KIND_INDEX[kind]


@frozen
class Part:
    """Bytes ``[start, stop)`` of object ``index`` of a workload: a body, by reference."""

    index: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        """Length of the part in bytes."""
        return self.stop - self.start


@frozen(kw_only=True)
class Request:
    """One request of a plan: its kind, key, byte range and body.

    ``start``/``stop`` bound a ranged read or a part's place in the object (``stop`` is
    exclusive; both None for the whole object). ``body`` is the part a write sends.
    ``part_number`` is the 1-based number of a multipart step's part. A LIST with
    ``one_level`` lists one folder level (the objects and subfolders directly under
    ``key``, S3's ``delimiter=/``); without it, whatever the client's listing of ``key``
    is (everything under it on object stores). ``source`` is the existing name a
    :attr:`Kind.COPY` copies, a :attr:`Kind.LINK` links to or a :attr:`Kind.RENAME` moves.
    """

    kind: Kind
    key: str
    start: int | None = None
    stop: int | None = None
    body: Part | None = None
    part_number: int | None = None
    #: a put the client splits by itself into parts of this size (obstore's multipart)
    part_size: int | None = None
    #: parts such a put keeps in flight
    concurrency: int = 1
    #: a LIST of the objects and subfolders directly under ``key`` only
    one_level: bool = False
    #: the existing name a copy, link or rename starts from (a full key, like ``key``)
    source: str | None = None
    #: a DELETE of all these names in one request (S3's DeleteObjects); ``key`` is the
    #: first. Empty: ``key`` alone
    keys: tuple[str, ...] = ()

    @property
    def expected(self) -> int | None:
        """Payload bytes this request should move (None: not known from the plan)."""
        if self.body is not None:
            return self.body.size
        if self.start is not None and self.stop is not None:
            return self.stop - self.start
        return None


class Outcome(NamedTuple):
    """What one call returned: payload bytes sent and received, and what it read.

    ``first_byte_ns`` is the clock mark (ns) of the response's first byte, or -1 where
    the client cannot tell. ``data`` is what a read returned (a view of the buffer it
    was given, or the client's own buffer), None for writes. ``wire`` lists, for a call
    that makes several requests by itself (an obstore multipart upload), how many of
    each kind it made; empty means one request of the job's own kind.

    A NamedTuple rather than an attrs class: one is made per request inside the timed
    window, and a tuple is the cheapest value Python builds.
    """

    sent: int = 0
    received: int = 0
    first_byte_ns: int = -1
    data: Buffer | None = None
    wire: tuple[tuple[Kind, int], ...] = ()
    #: the object's size a HEAD reported, in bytes (-1: not a HEAD)
    size: int = -1


AsyncCall = Callable[[], Awaitable[Outcome]]
SyncCall = Callable[[], Outcome]


class AsyncJob(NamedTuple):
    """A request ready to run on an event loop: its kind and the coroutine function."""

    kind: Kind
    call: AsyncCall
    #: requests this job keeps in flight by itself (a client's own multipart upload)
    inner: int = 1


class SyncJob(NamedTuple):
    """A request ready to run on a thread: its kind and the callable."""

    kind: Kind
    call: SyncCall
    inner: int = 1
