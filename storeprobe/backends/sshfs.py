"""sshfs, through asyncssh's SFTP client on the filesystem's channel pool.

One stream is one SFTP file transfer on one channel; asyncssh pipelines the READ and
WRITE packets of that transfer, as OpenSSH's ``sftp`` does. Writes are create-only
(``FXF_EXCL``). A split upload creates the file, then writes parts at their offsets over
N channels; a split download reads ranges with ``read(size, offset)`` (sshfs's own
``cat_file`` ignores ranges and returns the whole file). A link is one
``hardlink@openssh.com`` request (asyncssh's ``SFTPClient.link``), a rename one
``posix-rename@openssh.com`` (``posix_rename``: replaces an existing name, as
``rename(2)``); both are OpenSSH extensions, which other SFTP servers may lack.
"""

from __future__ import annotations

from typing import Any

from storeprobe.backends.base import AsyncBackend, Capabilities, Landing
from storeprobe.backends.fsspec import unsupported
from storeprobe.request import AsyncJob, Body, Kind, Outcome, Part, Payloads, Request
from storeprobe.transfer import Clock

__all__ = ["SFTPBackend"]


class SFTPBackend(AsyncBackend):
    """sshfs (see the module docstring)."""

    name = "sshfs"
    protocols = ("sftp", "ssh")
    extra = "ssh"
    capabilities = Capabilities(splits_uploads=True, multipart_complete=False)

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

    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        import asyncssh

        pool: Any = self.fs._pool
        path = request.key
        kind = request.kind
        if kind in (Kind.PUT, Kind.PUT_PART):
            if not isinstance(body, bytes | bytearray | memoryview):
                raise TypeError(f"sshfs writes bytes, not {type(body).__name__}")
            data = body
            offset = request.start or 0
            flags = asyncssh.FXF_WRITE
            if kind is Kind.PUT:
                flags |= asyncssh.FXF_CREAT | asyncssh.FXF_EXCL

            async def put() -> Outcome:
                async with pool.get() as channel, channel.open(path, flags, encoding=None) as fh:
                    await fh.write(data, offset)
                return Outcome(sent=len(data))

            return AsyncJob(kind, put)
        if kind is Kind.CREATE_MULTIPART:
            create_flags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_EXCL

            async def create() -> Outcome:
                async with pool.get() as channel, channel.open(path, create_flags, encoding=None):
                    pass
                return Outcome()

            return AsyncJob(kind, create)
        if kind is Kind.GET:
            start, stop = request.start, request.stop

            async def get() -> Outcome:
                async with pool.get() as channel, channel.open(path, "rb") as handle:
                    if start is not None and stop is not None:
                        data = await handle.read(stop - start, start)
                    else:
                        data = await handle.read()
                return Outcome(received=len(data), data=data)

            return AsyncJob(kind, get)
        if kind is Kind.HEAD:

            async def head() -> Outcome:
                try:
                    async with pool.get() as channel:
                        attributes = await channel.stat(path)
                except asyncssh.SFTPNoSuchFile as exc:
                    raise FileNotFoundError(path) from exc
                return Outcome(size=int(attributes.size or 0))

            return AsyncJob(kind, head)
        if kind is Kind.LIST:

            async def listing() -> Outcome:
                try:
                    async with pool.get() as channel:
                        names = await channel.listdir(path)
                except asyncssh.SFTPNoSuchFile as exc:
                    raise FileNotFoundError(path) from exc
                return Outcome(size=len([n for n in names if n not in (".", "..")]))

            return AsyncJob(kind, listing)
        if kind is Kind.DELETE:

            async def delete() -> Outcome:
                try:
                    async with pool.get() as channel:
                        await channel.remove(path)
                except asyncssh.SFTPNoSuchFile as exc:
                    raise FileNotFoundError(path) from exc
                return Outcome()

            return AsyncJob(kind, delete)
        if kind in (Kind.COPY, Kind.LINK, Kind.RENAME) and request.source is not None:
            source = request.source
            # a copy is a hard link too: OpenSSH's hardlink@openssh.com, no bytes move
            linking = kind is not Kind.RENAME

            async def relink() -> Outcome:
                try:
                    async with pool.get() as channel:
                        if linking:
                            await channel.link(source, path)
                        else:
                            await channel.posix_rename(source, path)
                except asyncssh.SFTPNoSuchFile as exc:
                    raise FileNotFoundError(source) from exc
                return Outcome()

            return AsyncJob(kind, relink)
        raise unsupported(self.name, request)
