"""Any fsspec filesystem, through its own API: the generic asynchronous and synchronous
backends, and ``memory://``.

These cannot split one object's upload (fsspec has no parallel write of one file), so
such an upload is sent as one request and the Result says so; ranged reads work
everywhere (``cat_file(start=, end=)``).
"""

from __future__ import annotations

import inspect
import threading

import fsspec

from storeprobe.backends.base import AsyncBackend, Capabilities, Landing, SyncBackend
from storeprobe.errors import ConfigurationError
from storeprobe.request import (
    AsyncJob,
    Body,
    Buffer,
    Kind,
    Outcome,
    Part,
    Payloads,
    Request,
    SyncJob,
)
from storeprobe.transfer import Clock

__all__ = ["FsspecAsyncBackend", "FsspecSyncBackend", "MemoryBackend", "unsupported"]


def unsupported(backend: str, request: Request) -> ConfigurationError:
    """The error for a request kind a backend does not make."""
    return ConfigurationError(
        f"the {backend} backend cannot make {request.kind.value} requests: "
        "plan them only where the backend's capabilities allow"
    )


def _sized(body: Body | None) -> Buffer:
    if body is None or not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"this backend sends bytes, not {type(body).__name__}")
    return body


class FsspecAsyncBackend(AsyncBackend):
    """Any asynchronous fsspec filesystem, through its coroutine API."""

    name = "generic"

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        super().__init__(fs)
        parameters = inspect.signature(fs._pipe_file).parameters
        self._create_kw: dict[str, str] = {"mode": "create"} if "mode" in parameters else {}

    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs = self.fs
        path = request.key
        kind = request.kind
        if kind is Kind.PUT:
            data = _sized(body)
            size = len(data)
            create = self._create_kw

            async def put() -> Outcome:
                await fs._pipe_file(path, data, **create)
                return Outcome(sent=size)

            return AsyncJob(kind, put)
        if kind is Kind.GET:
            start, stop = request.start, request.stop

            async def get() -> Outcome:
                data = await fs._cat_file(path, start=start, end=stop)
                return Outcome(received=len(data), data=data)

            return AsyncJob(kind, get)
        if kind is Kind.HEAD:

            async def head() -> Outcome:
                info = await fs._info(path)
                return Outcome(size=int(info["size"]))

            return AsyncJob(kind, head)
        if kind is Kind.LIST:

            async def listing() -> Outcome:
                return Outcome(size=len(await fs._ls(path, detail=False)))

            return AsyncJob(kind, listing)
        if kind is Kind.DELETE:

            async def delete() -> Outcome:
                await fs._rm_file(path)
                return Outcome()

            return AsyncJob(kind, delete)
        if kind is Kind.COPY and request.source is not None:
            source = request.source

            async def copy() -> Outcome:
                await fs._cp_file(source, path)
                return Outcome()

            return AsyncJob(kind, copy)
        raise unsupported(self.client, request)


class FsspecSyncBackend(SyncBackend):
    """Any synchronous fsspec filesystem, through a thread pool."""

    name = "generic"

    def body(self, workload: Payloads, part: Part) -> Body:
        """``bytes`` made before the window, so ``pipe_file`` gets them without a timed copy."""
        return workload.payload_bytes(part.index, part.start, part.stop)

    def check_root(self, root: str) -> None:
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        if root in ("", "/") or "memory" in protocols:
            return  # memory directories are implicit
        super().check_root(root)

    def make_prefix(self, prefix: str) -> None:
        self.fs.makedirs(prefix, exist_ok=True)

    def _put(self, path: str, data: Buffer) -> None:
        self.fs.pipe_file(path, data, mode="create")

    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs = self.fs
        path = request.key
        kind = request.kind
        if kind is Kind.PUT:
            data = _sized(body)
            size = len(data)
            write = self._put

            def put() -> Outcome:
                write(path, data)
                return Outcome(sent=size)

            return SyncJob(kind, put)
        if kind is Kind.GET:
            start, stop = request.start, request.stop

            def get() -> Outcome:
                data = fs.cat_file(path, start=start, end=stop)
                return Outcome(received=len(data), data=data)

            return SyncJob(kind, get)
        if kind is Kind.HEAD:

            def head() -> Outcome:
                return Outcome(size=int(fs.info(path)["size"]))

            return SyncJob(kind, head)
        if kind is Kind.LIST:

            def listing() -> Outcome:
                return Outcome(size=len(fs.ls(path, detail=False)))

            return SyncJob(kind, listing)
        if kind is Kind.DELETE:

            def delete() -> Outcome:
                fs.rm_file(path)
                return Outcome()

            return SyncJob(kind, delete)
        if kind is Kind.COPY and request.source is not None:
            source = request.source

            def copy() -> Outcome:
                fs.cp_file(source, path)
                return Outcome()

            return SyncJob(kind, copy)
        raise unsupported(self.client, request)


class MemoryBackend(FsspecSyncBackend):
    """fsspec's ``memory://``: create-only writes without its O(n) existence check.

    ``pipe_file(mode="create")`` on a MemoryFileSystem scans every stored key to decide
    whether the path exists, which makes N uploads cost O(N²). The store is a dict in
    this process, so the check is a dict lookup under a lock, then the write.
    """

    name = "generic"
    protocols = ("memory",)
    capabilities = Capabilities()
    _lock = threading.Lock()

    def check_root(self, root: str) -> None:
        return None  # memory directories are implicit

    def _put(self, path: str, data: Buffer) -> None:
        stored = self.fs._strip_protocol(path)
        with self._lock:
            if stored in self.fs.store:
                raise FileExistsError(path)
            self.fs.pipe_file(stored, data)
