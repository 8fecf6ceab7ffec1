"""sshfs, through asyncssh's SFTP client on the filesystem's channel pool.

One stream is one SFTP file transfer on one channel; asyncssh pipelines the READ and
WRITE packets of that transfer, as OpenSSH's ``sftp`` does. Writes are create-only
(``FXF_EXCL``). A split upload creates the file, then writes parts at their offsets over
N channels; a split download reads ranges with ``read(size, offset)`` (sshfs's own
``cat_file`` ignores ranges and returns the whole file). A read that lands in a staging
file (a whole object or a range above the staging threshold) writes each block there as
it arrives (``read_parallel``), so it is never held whole. A link is one
``hardlink@openssh.com`` request (asyncssh's ``SFTPClient.link``), a rename one
``posix-rename@openssh.com`` (``posix_rename``: replaces an existing name, as
``rename(2)``); both are OpenSSH extensions, which other SFTP servers may lack.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from storeprobe.backends.base import AsyncBackend, AsyncUpload, Capabilities, Landing, source_of
from storeprobe.backends.registry import ClientSpec
from storeprobe.request import AsyncJob, Body, Kind, Outcome, Part, Payloads, Request
from storeprobe.staging import Staging
from storeprobe.transfer import Clock

__all__ = ["SPEC", "SFTPBackend"]


class SFTPUpload(AsyncUpload):
    """A split upload over SFTP: create the file, then write parts at their offsets (no
    state is shared: each part opens the file on its own channel; nothing completes)."""

    def create(self, request: Request, body: Body | None) -> AsyncJob:
        import asyncssh

        pool: Any = self.fs._pool
        path = request.key
        flags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_EXCL

        async def create() -> Outcome:
            async with pool.get() as channel, channel.open(path, flags, encoding=None):
                pass
            return Outcome()

        return AsyncJob(Kind.CREATE_MULTIPART, create)

    def part(self, request: Request, body: Body | None) -> AsyncJob:
        return _write(self.fs._pool, request, body, 0)


class SFTPBackend(AsyncBackend):
    """sshfs (see the module docstring)."""

    name = "sshfs"
    capabilities = Capabilities(splits_uploads=True, multipart_complete=False, lands_in_file=True)
    upload = SFTPUpload

    def body(self, workload: Payloads, part: Part) -> Body:
        """``bytes`` made before the window: asyncssh writes bytes, so no copy is timed."""
        return workload.payload_bytes(part.index, part.start, part.stop)

    def make_prefix(self, prefix: str) -> None:
        from fsspec.asyn import sync

        sync(self.fs.loop, self.fs._mkdir, prefix, create_parents=False)

    def remove_prefix(self, prefix: str) -> None:
        # fsspec's sync ``rmdir`` is a no-op here: call the coroutine
        import asyncssh
        from fsspec.asyn import sync

        try:
            sync(self.fs.loop, self.fs._rmdir, prefix)
        except asyncssh.SFTPNoSuchFile as exc:
            raise FileNotFoundError(prefix) from exc

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        import asyncssh

        return _write(self.fs._pool, request, body, asyncssh.FXF_CREAT | asyncssh.FXF_EXCL)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        pool: Any = self.fs._pool
        path, start, stop = request.key, request.start, request.stop

        async def get() -> Outcome:
            async with pool.get() as channel, channel.open(path, "rb") as handle:
                if isinstance(into, Staging):
                    return Outcome(received=await _land(handle, into, start, stop))
                if start is not None and stop is not None:
                    data = await handle.read(stop - start, start)
                else:
                    data = await handle.read()
            return Outcome(received=len(data), data=data)

        return AsyncJob(Kind.GET, get)

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        return _request(self.fs._pool, Kind.HEAD, request.key, "stat", (request.key,), _size)

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        return _request(self.fs._pool, Kind.LIST, request.key, "listdir", (request.key,), _entries)

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        return _request(self.fs._pool, Kind.DELETE, request.key, "remove", (request.key,), _nothing)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        # a copy is a hard link too: OpenSSH's hardlink@openssh.com, no bytes move
        return self._relink(Kind.COPY, request, "link")

    def link(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        return self._relink(Kind.LINK, request, "link")

    def rename(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        return self._relink(Kind.RENAME, request, "posix_rename")

    def _relink(self, kind: Kind, request: Request, method: str) -> AsyncJob:
        """One OpenSSH extension request (``link`` or ``posix_rename``) of source to key."""
        source = source_of(self.name, request)
        return _request(self.fs._pool, kind, source, method, (source, request.key), _nothing)


def _request(
    pool: Any,
    kind: Kind,
    missing: str,
    method: str,
    args: tuple[str, ...],
    outcome: Callable[[Any], Outcome],
) -> AsyncJob:
    """One SFTP request, the channel's ``method(*args)``, on a channel of ``pool``;
    asyncssh's "no such file" raised as FileNotFoundError of ``missing``. The answer
    becomes the Outcome (``outcome(answer)``) once the channel is back in the pool."""

    async def sftp_request() -> Outcome:
        async with _missing(missing), pool.get() as channel:
            answer = await getattr(channel, method)(*args)
        return outcome(answer)

    return AsyncJob(kind, sftp_request)


def _size(attributes: Any) -> Outcome:
    """A HEAD's Outcome: the size of the stat answer's attributes."""
    return Outcome(size=int(attributes.size or 0))


def _entries(names: list[str]) -> Outcome:
    """A LIST's Outcome: how many names the directory holds (not "." and "..")."""
    return Outcome(size=len([n for n in names if n not in (".", "..")]))


def _nothing(answer: object) -> Outcome:
    """The Outcome of a request whose answer carries no figure (a delete, a link)."""
    return Outcome()


async def _land(handle: Any, into: Staging, start: int | None, stop: int | None) -> int:
    """Read the file (or its bytes ``start``..``stop``) into the staging file, each block
    written at its place as it arrives: asyncssh's ``read_parallel`` pipelines the READs
    as ``read`` does, but hands each block over instead of joining them into one
    ``bytes``, so memory holds the blocks in flight, not the object. The bytes received."""
    first = 0 if start is None else start
    size = -1 if stop is None else stop - first
    received = 0
    async for offset, data in await handle.read_parallel(size, first):
        received += into.write(offset - first, data)
    return received


def _write(pool: Any, request: Request, body: Body | None, flags: int) -> AsyncJob:
    """A write of ``body`` at ``request.start`` (a PUT with create flags, or a part)."""
    import asyncssh

    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"sshfs writes bytes, not {type(body).__name__}")
    data, path = body, request.key
    offset = request.start or 0
    mode = asyncssh.FXF_WRITE | flags
    kind = Kind.PUT if flags else Kind.PUT_PART

    async def put() -> Outcome:
        async with pool.get() as channel, channel.open(path, mode, encoding=None) as fh:
            await fh.write(data, offset)
        return Outcome(sent=len(data))

    return AsyncJob(kind, put)


@contextlib.asynccontextmanager
async def _missing(path: str) -> AsyncIterator[None]:
    """asyncssh's "no such file" as the builtin FileNotFoundError."""
    import asyncssh

    try:
        yield
    except asyncssh.SFTPNoSuchFile as exc:
        raise FileNotFoundError(path) from exc


def _known_hosts(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """sshfs's options with ``known_hosts`` set: ``~/.ssh/known_hosts``, or no known hosts
    at all, never trusting an unknown host key (sshfs alone would pass
    ``known_hosts=None`` to asyncssh, which accepts any host key)."""
    if "known_hosts" in options:
        return options
    path = os.path.expanduser("~/.ssh/known_hosts")
    if os.path.exists(path):
        return {**options, "known_hosts": path}
    try:
        import asyncssh
    except ImportError:
        return {**options, "known_hosts": None}  # sshfs is missing too: the error says so
    return {**options, "known_hosts": asyncssh.import_known_hosts("")}


#: sshfs, the fsspec implementation of ``sftp://``
SPEC = ClientSpec(
    name="sshfs",
    backend=SFTPBackend,
    modules=("sshfs",),
    protocols=("sftp", "ssh"),
    implements=("sftp", "ssh"),
    extra="ssh",
    open_options=_known_hosts,
)
