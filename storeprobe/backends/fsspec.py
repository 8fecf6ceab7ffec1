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

from storeprobe.backends.base import (
    AsyncBackend,
    Capabilities,
    Landing,
    SyncBackend,
    source_of,
    unsupported,
)
from storeprobe.backends.registry import ClientSpec, no_listings_cache
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

__all__ = [
    "HTTP",
    "MEMORY",
    "FsspecAsyncBackend",
    "FsspecSyncBackend",
    "MemoryBackend",
    "unsupported",
]


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

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key
        data = _sized(body)
        size = len(data)
        create = self._create_kw

        async def put() -> Outcome:
            await fs._pipe_file(path, data, **create)
            return Outcome(sent=size)

        return AsyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key
        start, stop = request.start, request.stop

        async def get() -> Outcome:
            data = await fs._cat_file(path, start=start, end=stop)
            return Outcome(received=len(data), data=data)

        return AsyncJob(Kind.GET, get)

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key

        async def head() -> Outcome:
            info = await fs._info(path)
            return Outcome(size=int(info["size"]))

        return AsyncJob(Kind.HEAD, head)

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key

        async def listing() -> Outcome:
            return Outcome(size=len(await fs._ls(path, detail=False)))

        return AsyncJob(Kind.LIST, listing)

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key

        async def delete() -> Outcome:
            await fs._rm_file(path)
            return Outcome()

        return AsyncJob(Kind.DELETE, delete)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path, source = self.fs, request.key, source_of(self.client, request)

        async def copy() -> Outcome:
            await fs._cp_file(source, path)
            return Outcome()

        return AsyncJob(Kind.COPY, copy)


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

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        path, data, write = request.key, _sized(body), self._put
        size = len(data)

        def put() -> Outcome:
            write(path, data)
            return Outcome(sent=size)

        return SyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, path = self.fs, request.key
        start, stop = request.start, request.stop

        def get() -> Outcome:
            data = fs.cat_file(path, start=start, end=stop)
            return Outcome(received=len(data), data=data)

        return SyncJob(Kind.GET, get)

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, path = self.fs, request.key
        return SyncJob(Kind.HEAD, lambda: Outcome(size=int(fs.info(path)["size"])))

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, path = self.fs, request.key
        return SyncJob(Kind.LIST, lambda: Outcome(size=len(fs.ls(path, detail=False))))

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, path = self.fs, request.key

        def delete() -> Outcome:
            fs.rm_file(path)
            return Outcome()

        return SyncJob(Kind.DELETE, delete)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, path, source = self.fs, request.key, source_of(self.client, request)

        def copy() -> Outcome:
            fs.cp_file(source, path)
            return Outcome()

        return SyncJob(Kind.COPY, copy)


class MemoryBackend(FsspecSyncBackend):
    """fsspec's ``memory://``: create-only writes without its O(n) existence check.

    ``pipe_file(mode="create")`` on a MemoryFileSystem scans every stored key to decide
    whether the path exists, which makes N uploads cost O(N²). The store is a dict in
    this process, so the check is a dict lookup under a lock, then the write.
    """

    name = "generic"
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


#: fsspec's ``memory://``
MEMORY = ClientSpec(
    name="memory",
    backend=MemoryBackend,
    modules=("fsspec.implementations.memory",),
    protocols=("memory",),
    implements=("memory",),
)
#: fsspec's ``http://``: the generic asynchronous backend, listings cache off
HTTP = ClientSpec(
    name="http",
    backend=FsspecAsyncBackend,
    modules=("fsspec.implementations.http",),
    protocols=("http", "https"),
    implements=("http", "https"),
    open_options=no_listings_cache,
)
