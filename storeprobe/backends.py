"""How one request is made on each kind of filesystem.

A :class:`Backend` knows the single-request primitives of one family of fsspec
filesystems — write one object, read one object, read one byte range, split one
object's upload into parts — and the settings that keep exactly one request per call
(s3fs ``max_concurrency=1``, no block cache). The probe combines these primitives
into plans; the backend never decides how many run at once.

=================  =============================  ===========================  =============
backend            one object, upload             one object, download         byte ranges
=================  =============================  ===========================  =============
``s3``             multipart, parts in parallel   ranged GETs in parallel      yes
``local``          ``pwrite`` of parts, fsync     ``pread`` of ranges          yes
``async``          one request (cannot split)     ranged reads in parallel     yes
``sync``           one request (cannot split)     ranged reads in parallel     yes
=================  =============================  ===========================  =============
"""

from __future__ import annotations

import inspect
import io
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem, sync

from storeprobe.errors import TargetNotFoundError
from storeprobe.staging import Staging
from storeprobe.transfer import Plan
from storeprobe.units import GiB, MiB
from storeprobe.workload import Workload, filled_buffer

__all__ = [
    "AsyncBackend",
    "AzureBackend",
    "Backend",
    "BucketBackend",
    "GCSBackend",
    "LocalBackend",
    "MemoryBackend",
    "ObstoreBackend",
    "S3Backend",
    "SFTPBackend",
    "SyncBackend",
    "backend_for",
]

Buffer = bytes | bytearray | memoryview
_CHUNK = 1 << 20  # bytes asked of a response stream per read


class Backend:
    """Single-request primitives of a filesystem family; subclasses fill them in."""

    name = "generic"
    #: True when jobs are coroutine functions to run on ``fs.loop``.
    is_async = False
    #: True when one object's upload can be split into parts sent in parallel.
    splits_uploads = False
    #: True when a byte range of an object can be read on its own.
    reads_ranges = True
    #: Smallest part of a split upload, in bytes (except the last part).
    min_part_size = 1
    #: Largest object sent in one request; larger ones are split even at one stream.
    max_single_put: int | None = None
    #: True when ``get``/``get_range`` fill a buffer the probe prepared (``out[slot]``, a
    #: bytearray of the expected length, its pages touched before the timed window), so
    #: no memory is allocated or page-faulted inside the window
    reads_into = False

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs
        #: failed attempts the client retried on its own, when the backend can see them
        self.retries: int | None = None
        #: the probe's clock (ns), for first-byte marks
        self.clock: Callable[[], int] = time.perf_counter_ns
        if self.name in ("generic", "async", "sync"):
            self.name = type(fs).__name__

    # --- untimed housekeeping (called outside the window, synchronously) ---------
    def check_root(self, root: str) -> None:
        """Raise if ``root`` cannot hold the run prefix."""
        if not self.fs.isdir(root):
            if self.fs.exists(root):
                raise TargetNotFoundError(f"{root!r} exists but is not a directory")
            raise TargetNotFoundError(
                f"root directory {root!r} does not exist: create it or choose another path"
            )

    def make_prefix(self, prefix: str) -> None:
        """Create the run prefix (a no-op for object stores)."""
        self.fs.makedirs(prefix, exist_ok=False)

    def remove_prefix(self, prefix: str) -> None:
        """Remove the (now empty) run prefix; never recursive."""
        self.fs.rmdir(prefix)

    def after_upload(self, paths: Sequence[str]) -> None:
        """Untimed step between a setup upload and a timed download (evict caches)."""
        self.fs.invalidate_cache()

    def confirm(self, path: str, size: int) -> Any | None:
        """An untimed job that asks the storage for ``path``'s metadata before a download.

        Object stores answer with the object's size, which must be ``size``: the setup
        upload is complete and visible before the window opens. Servers that compute an
        object's checksum lazily (``rclone serve s3`` over a disk) do that work here, on
        the metadata request, not inside the timed transfer. ``None``: nothing to ask.
        """
        return None

    def prepare_ranges(self, path: str) -> str | None:
        """Untimed: make sure byte ranges of ``path`` can be read; a note for the Result
        when they are read some other way than the backend's own client."""
        return None

    def cache_warning(self) -> str | None:
        """A warning for the Result when a download might be served from a cache."""
        return None

    def body(self, workload: Workload, index: int, start: int = 0, stop: int | None = None) -> Any:
        """Bytes ``[start, stop)`` of object ``index`` in the form ``put`` sends best."""
        return workload.payload(index, start, stop)

    def staged_body(self, staging: Staging, start: int, stop: int) -> Any:
        """A part of a staged object for ``split_upload``: a view of the staging file."""
        return staging.part(start, stop)

    # --- one request each ---------------------------------------------------------
    def put(self, path: str, data: Buffer) -> Any:
        raise NotImplementedError

    def get(self, path: str, out: list[Any], slot: int) -> Any:
        raise NotImplementedError

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        raise NotImplementedError

    def delete(self, path: str) -> Any:
        raise NotImplementedError

    def split_upload(
        self, path: str, size: int, parts: Sequence[tuple[int, Any]], streams: int
    ) -> Plan:
        raise NotImplementedError


# ------------------------------------------------------------------------ async ----
class AsyncBackend(Backend):
    """Any asynchronous fsspec filesystem, through its coroutine API."""

    name = "async"
    is_async = True

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        super().__init__(fs)
        parameters = inspect.signature(fs._pipe_file).parameters
        self._create_kw: dict[str, Any] = {"mode": "create"} if "mode" in parameters else {}

    def put(self, path: str, data: Buffer) -> Callable[[], Any]:
        async def job() -> int:
            await self.fs._pipe_file(path, data, **self._create_kw)
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], Any]:
        async def job() -> int:
            out[slot] = await self.fs._cat_file(path)
            return len(out[slot])

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        async def job() -> int:
            out[slot] = await self.fs._cat_file(path, start=start, end=end)
            return len(out[slot])

        return job

    def delete(self, path: str) -> Callable[[], Any]:
        async def job() -> int:
            await self.fs._rm_file(path)
            return 0

        return job


class S3Backend(AsyncBackend):
    """s3fs: one PUT/GET per call (``max_concurrency=1``), own multipart for split uploads.

    s3fs's ``_pipe_file`` sends up to ``max_concurrency`` parts in batches and
    ``_cat_file`` up to ``max_concurrency`` ranged GETs; storeprobe passes 1 and makes
    the parts itself, so the number in flight is the probe's ``streams`` and nothing else.
    """

    name = "s3fs"
    splits_uploads = True
    reads_into = True
    min_part_size = 5 * MiB
    max_single_put = 5 * GiB

    def check_root(self, root: str) -> None:
        bucket = root.split("/", 1)[0]
        if not bucket:
            raise TargetNotFoundError("an S3 target needs a bucket: use s3://BUCKET[/PREFIX]")
        try:
            self.fs.info(bucket)
        except FileNotFoundError:
            raise TargetNotFoundError(
                f"bucket {bucket!r} does not exist or is not visible with these credentials: "
                "create it or choose another"
            ) from None
        self._watch_retries()

    def _watch_retries(self) -> None:
        """Count the attempts botocore retries (5xx, throttling, dropped connections)."""
        if self.retries is not None:
            return
        client = getattr(self.fs, "s3", None)
        if client is None:
            return
        self.retries = 0

        def count(response: Any = None, caught_exception: Any = None, **_: Any) -> None:
            status = None
            if response is not None:
                status = response[1].get("ResponseMetadata", {}).get("HTTPStatusCode")
            if caught_exception is not None or (
                status is not None and (status >= 500 or status == 429)
            ):
                self.retries = (self.retries or 0) + 1

        client.meta.events.register_first("needs-retry.s3", count)

    def make_prefix(self, prefix: str) -> None:
        return None

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()

    def body(self, workload: Workload, index: int, start: int = 0, stop: int | None = None) -> Any:
        """A BytesIO filled in place: aiohttp streams it in chunks instead of one huge write."""
        stop = workload.size if stop is None else stop
        return filled_buffer(stop - start, lambda view: workload.fill(index, start, view))

    def put(self, path: str, data: Any) -> Callable[[], Any]:
        bucket, key, _ = self.fs.split_path(path)
        size = _length(data)

        async def job() -> int:
            data.seek(0)
            await self.fs._call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            self.fs.invalidate_cache(path)
            return size

        return job

    def _get_object(self, path: str, out: list[Any], slot: int, **extra: Any) -> Any:
        bucket, key, _ = self.fs.split_path(path)

        async def job() -> tuple[int, int]:
            response = await self.fs._call_s3("get_object", Bucket=bucket, Key=key, **extra)
            first_byte = self.clock()  # the response head has arrived
            body = response["Body"]
            try:
                buffer = out[slot]
                if isinstance(buffer, bytearray | memoryview):
                    view = memoryview(buffer)
                    filled = 0
                    while chunk := await body.read(_CHUNK):
                        end = filled + len(chunk)
                        if end > len(buffer):  # longer than written: keep it all for the check
                            out[slot] = bytes(view[:filled]) + chunk + await body.read()
                            return len(out[slot]), first_byte
                        view[filled:end] = chunk
                        filled = end
                    out[slot] = view[:filled] if filled < len(buffer) else buffer
                    return filled, first_byte
                out[slot] = await body.read()
            finally:
                body.close()
            return len(out[slot]), first_byte

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Any:
        return self._get_object(path, out, slot)

    def confirm(self, path: str, size: int) -> Any:
        bucket, key, _ = self.fs.split_path(path)

        async def job() -> int:
            response = await self.fs._call_s3("head_object", Bucket=bucket, Key=key)
            _check_size(path, response["ContentLength"], size)
            return 0

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        return self._get_object(path, out, slot, Range=f"bytes={start}-{end - 1}")

    def split_upload(
        self, path: str, size: int, parts: Sequence[tuple[int, Any]], streams: int
    ) -> Plan:
        bucket, key, _ = self.fs.split_path(path)
        state: dict[str, Any] = {}
        etags: dict[int, str] = {}

        async def create() -> int:
            response = await self.fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key)
            state["upload_id"] = response["UploadId"]
            return 0

        def part(number: int, body: Any) -> Callable[[], Any]:
            size = _length(body)

            async def job() -> int:
                # a staged part is a view of the staging file: botocore takes bytes or
                # files, not views, so it is copied here (inside the window, and said so)
                sent = io.BytesIO(body) if isinstance(body, memoryview) else body
                sent.seek(0)
                response = await self.fs._call_s3(
                    "upload_part",
                    Bucket=bucket,
                    Key=key,
                    UploadId=state["upload_id"],
                    PartNumber=number,
                    Body=sent,
                )
                etags[number] = response["ETag"]
                return size

            return job

        async def complete() -> int:
            await self.fs._call_s3(
                "complete_multipart_upload",
                Bucket=bucket,
                Key=key,
                UploadId=state["upload_id"],
                MultipartUpload={
                    "Parts": [{"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]
                },
                IfNoneMatch="*",
            )
            return 0

        async def abort() -> None:
            if "upload_id" in state:
                await self.fs._call_s3(
                    "abort_multipart_upload", Bucket=bucket, Key=key, UploadId=state["upload_id"]
                )

        return Plan(
            phases=(
                (create,),
                tuple(part(number, body) for number, (_, body) in enumerate(parts, start=1)),
                (complete,),
            ),
            on_failure=(abort,),
            part_phase=1,
        )


class BucketBackend(AsyncBackend):
    """An object store whose first path component is a bucket or container."""

    def check_root(self, root: str) -> None:
        bucket = root.split("/", 1)[0]
        if not bucket:
            raise TargetNotFoundError(
                f"a {self.name} target needs a bucket or container: use PROTOCOL://BUCKET[/PREFIX]"
            )
        try:
            self.fs.info(bucket)
        except FileNotFoundError:
            raise TargetNotFoundError(
                f"bucket or container {bucket!r} does not exist or is not visible with these "
                "credentials: create it or choose another"
            ) from None

    def make_prefix(self, prefix: str) -> None:
        return None

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()


class GCSBackend(BucketBackend):
    """gcsfs: one upload request per object (resumable uploads send their chunks in order,
    so one object cannot be split); ranged GETs for split downloads; ``mode="create"``
    (``ifGenerationMatch=0``) on writes."""

    name = "gcsfs"

    def put(self, path: str, data: Buffer) -> Callable[[], Any]:
        async def job() -> int:
            await self.fs._pipe_file(path, data, mode="create")
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], Any]:
        async def job() -> int:
            out[slot] = await self.fs._cat_file(path, concurrency=1)
            return len(out[slot])

        return job


class AzureBackend(BucketBackend):
    """adlfs: ``max_concurrency=1`` on every call; split uploads are staged blocks
    (``Put Block`` × N in flight, then ``Put Block List``); create-only writes."""

    name = "adlfs"
    splits_uploads = True
    min_part_size = 1 * MiB

    def body(self, workload: Workload, index: int, start: int = 0, stop: int | None = None) -> Any:
        """``bytes``: the Azure SDK cannot upload a bytearray."""
        return workload.payload_bytes(index, start, stop)

    def put(self, path: str, data: Buffer) -> Callable[[], Any]:
        async def job() -> int:
            await self.fs._pipe_file(path, data, overwrite=False, max_concurrency=1)
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], Any]:
        async def job() -> int:
            out[slot] = await self.fs._cat_file(path, max_concurrency=1)
            return len(out[slot])

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        async def job() -> int:
            out[slot] = await self.fs._cat_file(path, start=start, end=end, max_concurrency=1)
            return len(out[slot])

        return job

    def split_upload(
        self, path: str, size: int, parts: Sequence[tuple[int, Any]], streams: int
    ) -> Plan:
        container, blob, _ = self.fs.split_path(path)
        block_ids = [f"{number:08d}".encode().hex() for number in range(len(parts))]

        def stage(block_id: str, body: Any) -> Callable[[], Any]:
            async def job() -> int:
                # the SDK takes bytes, not views: a staged part is copied here (in the window)
                sent = bytes(body) if isinstance(body, memoryview) else body
                async with self.fs.service_client.get_blob_client(container, blob) as client:
                    await client.stage_block(block_id, sent, length=len(sent))
                return len(body)

            return job

        async def commit() -> int:
            from azure.core import MatchConditions

            async with self.fs.service_client.get_blob_client(container, blob) as client:
                await client.commit_block_list(block_ids, match_condition=MatchConditions.IfMissing)
            return 0

        return Plan(
            phases=(
                tuple(
                    stage(block_id, body)
                    for block_id, (_, body) in zip(block_ids, parts, strict=True)
                ),
                (commit,),
            ),
            part_phase=0,
        )


class ObstoreBackend(BucketBackend):
    """obstore's fsspec store (``obstore.fsspec.FsspecStore``), through its object store.

    Its ``_pipe_file`` would upload anything above 5 MB as a multipart upload with 12
    parts in flight, so storeprobe calls the store itself: ``use_multipart=False`` for
    one request, or ``use_multipart=True`` with ``max_concurrency=streams`` to split one
    object (the parts run inside obstore). The store is built once before the timed
    window: concurrent first calls have been seen to fail inside its constructor.
    """

    name = "obstore"
    splits_uploads = True
    min_part_size = 5 * MiB
    max_single_put = 5 * GiB

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        super().__init__(fs)
        #: builds an s3fs backend for the same storage, for servers whose ranged GETs
        #: obstore refuses (set by ``Target.from_url``; None: no fallback)
        self.range_fallback: Callable[[], Backend] | None = None
        self._range_reader: Backend | None = None
        self._ranges_checked = False

    def prepare_ranges(self, path: str) -> str | None:
        """One untimed 1-byte ranged GET; fall back to s3fs where the server answers 200.

        obstore refuses a ranged GET answered with ``200 OK`` (``rclone serve s3`` sends
        the right bytes with 200 and a Content-Range); s3fs accepts it.
        """
        note = (
            "this server answers ranged GETs with 200 instead of 206 Partial Content, which "
            "obstore refuses: the byte ranges were read with s3fs"
        )
        if self._ranges_checked:
            return note if self._range_reader is not None else None
        store, key = self._store(path)
        from obstore import get_range

        try:
            get_range(store, key, start=0, end=1)
        except Exception as exc:
            if "non-partial response" not in str(exc):
                raise
            if self.range_fallback is None:
                raise OSError(
                    "this server answers ranged GETs with 200 instead of 206 Partial Content, "
                    "which obstore refuses: download one object with streams=1, or open the "
                    "URL with client='s3fs'"
                ) from None
            self._range_reader = self.range_fallback()
            self._range_reader.clock = self.clock
            self.reads_into = self._range_reader.reads_into
        self._ranges_checked = True
        return note if self._range_reader is not None else None

    def _store(self, path: str) -> tuple[Any, str]:
        bucket, key = self.fs._split_path(path)
        return self.fs._construct_store(bucket), key

    def check_root(self, root: str) -> None:
        bucket = root.split("/", 1)[0]
        if not bucket:
            raise TargetNotFoundError("an S3 target needs a bucket: use s3://BUCKET[/PREFIX]")
        store = self.fs._construct_store(bucket)  # built once, before any timed request
        from obstore import list as list_objects

        try:
            next(iter(list_objects(store, chunk_size=1)), None)
        except FileNotFoundError:
            raise TargetNotFoundError(
                f"bucket {bucket!r} does not exist or is not visible with these credentials: "
                "create it or choose another"
            ) from None

    def body(self, workload: Workload, index: int, start: int = 0, stop: int | None = None) -> Any:
        return workload.payload_bytes(index, start, stop)

    def put(self, path: str, data: Any) -> Callable[[], Any]:
        store, key = self._store(path)

        async def job() -> int:
            await store.put_async(key, data, use_multipart=False, mode="create")
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], Any]:
        store, key = self._store(path)

        async def job() -> tuple[int, int]:
            response = await store.get_async(key)
            first_byte = self.clock()
            out[slot] = await response.bytes_async()  # Rust-owned buffer: no copy in Python
            return len(out[slot]), first_byte

        return job

    def staged_body(self, staging: Staging, start: int, stop: int) -> Any:
        """The staging file's path: obstore's multipart reads it in parts by itself."""
        return _StagedFile(Path(staging.path), stop - start)

    def confirm(self, path: str, size: int) -> Any:
        store, key = self._store(path)

        async def job() -> int:
            meta = await store.head_async(key)
            _check_size(path, meta["size"], size)
            return 0

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        if self._range_reader is not None:
            return self._range_reader.get_range(path, start, end, out, slot)
        store, key = self._store(path)

        async def job() -> int:
            out[slot] = await store.get_range_async(key, start=start, end=end)
            return len(out[slot])

        return job

    def delete(self, path: str) -> Callable[[], Any]:
        store, key = self._store(path)

        async def job() -> int:
            await store.delete_async(key)
            return 0

        return job

    def split_upload(
        self, path: str, size: int, parts: Sequence[tuple[int, Any]], streams: int
    ) -> Plan:
        store, key = self._store(path)
        first = parts[0][1]
        part_size = len(first)
        if isinstance(first, _StagedFile):  # obstore reads the staging file itself
            data: Any = first.path
        else:
            data = b"".join(body for _, body in parts)

        async def job() -> int:
            await store.put_async(
                key,
                data,
                use_multipart=True,
                chunk_size=part_size,
                max_concurrency=streams,
            )
            return size

        return Plan(phases=((job,),), inner_streams=min(streams, len(parts)))


class SFTPBackend(AsyncBackend):
    """sshfs, through asyncssh's SFTP client on the filesystem's channel pool.

    One stream is one SFTP file transfer on one channel; asyncssh pipelines the READ and
    WRITE packets of that transfer, as OpenSSH's ``sftp`` does. Writes are create-only
    (``FXF_EXCL``). A split upload writes parts at their offsets over N channels; a split
    download reads ranges with ``read(size, offset)`` (sshfs's own ``cat_file`` ignores
    ranges and returns the whole file).
    """

    name = "sshfs"
    splits_uploads = True

    def body(self, workload: Workload, index: int, start: int = 0, stop: int | None = None) -> Any:
        """``bytes`` made before the window: asyncssh writes bytes, so no copy is timed."""
        return workload.payload_bytes(index, start, stop)

    def make_prefix(self, prefix: str) -> None:
        sync(self.fs.loop, self.fs._mkdir, prefix, create_parents=False)

    def remove_prefix(self, prefix: str) -> None:
        # fsspec's sync ``rmdir`` is a no-op here: call the coroutine
        import asyncssh

        try:
            sync(self.fs.loop, self.fs._rmdir, prefix)
        except asyncssh.SFTPNoSuchFile as exc:
            raise FileNotFoundError(prefix) from exc

    def put(self, path: str, data: Buffer) -> Callable[[], Any]:
        import asyncssh

        flags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_EXCL

        async def job() -> int:
            async with (
                self.fs._pool.get() as channel,
                channel.open(path, flags, encoding=None) as handle,
            ):
                await handle.write(data, 0)
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], Any]:
        async def job() -> int:
            async with self.fs._pool.get() as channel, channel.open(path, "rb") as handle:
                out[slot] = await handle.read()
            return len(out[slot])

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        async def job() -> int:
            async with self.fs._pool.get() as channel, channel.open(path, "rb") as handle:
                out[slot] = await handle.read(end - start, start)
            return len(out[slot])

        return job

    def delete(self, path: str) -> Callable[[], Any]:
        import asyncssh

        async def job() -> int:
            try:
                async with self.fs._pool.get() as channel:
                    await channel.remove(path)
            except asyncssh.SFTPNoSuchFile as exc:
                raise FileNotFoundError(path) from exc
            return 0

        return job

    def split_upload(
        self, path: str, size: int, parts: Sequence[tuple[int, Any]], streams: int
    ) -> Plan:
        import asyncssh

        async def create() -> int:
            flags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_EXCL
            async with self.fs._pool.get() as channel, channel.open(path, flags, encoding=None):
                pass
            return 0

        def part(offset: int, body: Any) -> Callable[[], Any]:
            async def job() -> int:
                async with (
                    self.fs._pool.get() as channel,
                    channel.open(path, asyncssh.FXF_WRITE, encoding=None) as handle,
                ):
                    await handle.write(body, offset)
                return len(body)

            return job

        return Plan(
            phases=((create,), tuple(part(offset, body) for offset, body in parts)), part_phase=1
        )


# ------------------------------------------------------------------------- sync ----
class SyncBackend(Backend):
    """Any synchronous fsspec filesystem (memory, ...), through a thread pool."""

    name = "sync"

    def body(self, workload: Workload, index: int, start: int = 0, stop: int | None = None) -> Any:
        """``bytes`` made before the window, so ``pipe_file`` gets them without a timed copy."""
        return workload.payload_bytes(index, start, stop)

    def check_root(self, root: str) -> None:
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        if root in ("", "/") or "memory" in protocols:
            return  # memory directories are implicit
        super().check_root(root)

    def make_prefix(self, prefix: str) -> None:
        self.fs.makedirs(prefix, exist_ok=True)

    def put(self, path: str, data: Buffer) -> Callable[[], int]:
        def job() -> int:
            self.fs.pipe_file(path, data, mode="create")
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], int]:
        def job() -> int:
            out[slot] = self.fs.cat_file(path)
            return len(out[slot])

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        def job() -> int:
            out[slot] = self.fs.cat_file(path, start=start, end=end)
            return len(out[slot])

        return job

    def delete(self, path: str) -> Callable[[], int]:
        def job() -> int:
            self.fs.rm_file(path)
            return 0

        return job


class MemoryBackend(SyncBackend):
    """fsspec's ``memory://``: create-only writes without its O(n) existence check.

    ``pipe_file(mode="create")`` on a MemoryFileSystem scans every stored key to decide
    whether the path exists, which makes N uploads cost O(N²). The store is a dict in
    this process, so the check is a dict lookup under a lock, then the write.
    """

    _lock = threading.Lock()

    def put(self, path: str, data: Buffer) -> Callable[[], int]:
        stored = self.fs._strip_protocol(path)

        def job() -> int:
            with self._lock:
                if stored in self.fs.store:
                    raise FileExistsError(path)
                self.fs.pipe_file(stored, data)
            return len(data)

        return job


class LocalBackend(Backend):
    """``file://``: POSIX calls, create-only writes, fsync, and page-cache eviction.

    An upload counts until the data is on disk: each object is written with
    ``O_CREAT | O_EXCL`` and fsynced inside the timed window. Before a timed download
    the files are evicted from the page cache with ``posix_fadvise(POSIX_FADV_DONTNEED)``.
    """

    name = "local"
    splits_uploads = True
    reads_into = True

    def put(self, path: str, data: Buffer) -> Callable[[], int]:
        def job() -> int:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            return len(data)

        return job

    def get(self, path: str, out: list[Any], slot: int) -> Callable[[], tuple[int, int]]:
        def job() -> tuple[int, int]:
            buffer = out[slot]
            with open(path, "rb", buffering=0) as handle:
                if not isinstance(buffer, bytearray):
                    head = handle.read(64 * 1024)
                    first_byte = self.clock()
                    rest = handle.read()
                    out[slot] = head + rest if rest else head
                    return len(out[slot]), first_byte
                view = memoryview(buffer)
                filled = handle.readinto(view[: 64 * 1024]) or 0
                first_byte = self.clock()
                while filled < len(buffer):
                    got = handle.readinto(view[filled:])
                    if not got:
                        break
                    filled += got
                extra = handle.read()  # anything beyond what was written
            if extra:
                out[slot] = bytes(view[:filled]) + extra
                return len(out[slot]), first_byte
            out[slot] = view[:filled] if filled < len(buffer) else buffer
            return filled, first_byte

        return job

    def get_range(self, path: str, start: int, end: int, out: list[Any], slot: int) -> Any:
        def job() -> int:
            buffer = out[slot]
            if not isinstance(buffer, bytearray | memoryview) or len(buffer) != end - start:
                buffer = bytearray(end - start)
            view = memoryview(buffer)
            fd = os.open(path, os.O_RDONLY)
            try:
                filled = 0
                while filled < len(buffer):
                    got = os.preadv(fd, [view[filled:]], start + filled)
                    if not got:
                        break
                    filled += got
            finally:
                os.close(fd)
            out[slot] = view[:filled] if filled < len(buffer) else buffer
            return filled

        return job

    def delete(self, path: str) -> Callable[[], int]:
        def job() -> int:
            os.unlink(path)
            return 0

        return job

    def make_prefix(self, prefix: str) -> None:
        os.mkdir(prefix)

    def remove_prefix(self, prefix: str) -> None:
        os.rmdir(prefix)

    def after_upload(self, paths: Sequence[str]) -> None:
        for path in paths:
            evict_from_page_cache(path)

    def cache_warning(self) -> str | None:
        if not hasattr(os, "posix_fadvise"):
            return (
                "this platform has no posix_fadvise: downloads from file:// may be served "
                "from the page cache and read faster than the disk"
            )
        return None

    def split_upload(
        self, path: str, size: int, parts: Sequence[tuple[int, Any]], streams: int
    ) -> Plan:
        state: dict[str, int] = {}

        def create() -> int:
            state["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.ftruncate(state["fd"], size)
            return 0

        def part(offset: int, body: Buffer) -> Callable[[], int]:
            def job() -> int:
                view = memoryview(body)
                position = offset
                while view:
                    written = os.pwrite(state["fd"], view, position)
                    view = view[written:]
                    position += written
                return len(body)

            return job

        def complete() -> int:
            os.fsync(state["fd"])
            os.close(state.pop("fd"))
            return 0

        def close() -> None:
            if "fd" in state:
                os.close(state.pop("fd"))

        return Plan(
            phases=((create,), tuple(part(offset, body) for offset, body in parts), (complete,)),
            on_failure=(close,),
            part_phase=1,
        )


class _StagedFile:
    """A part of a staged object for obstore: the staging file's path and the part size."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size

    def __len__(self) -> int:
        return self.size


def _check_size(path: str, found: int, expected: int) -> None:
    if found != expected:
        raise OSError(
            f"{path} holds {found} bytes after the setup upload, expected {expected}: "
            "the storage did not keep what was written"
        )


def _length(body: Any) -> int:
    if isinstance(body, io.BytesIO):
        with body.getbuffer() as view:
            return view.nbytes
    return len(body)


def evict_from_page_cache(path: str) -> None:
    """Ask the kernel to drop ``path`` from the page cache (no-op where unsupported)."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def backend_for(fs: fsspec.AbstractFileSystem) -> Backend:
    """Pick the backend for ``fs`` by its class (s3fs, local, any async, any sync)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    module = type(fs).__module__
    if module.startswith("s3fs"):
        return S3Backend(fs)
    if module.startswith("obstore"):
        return ObstoreBackend(fs)
    if module.startswith("gcsfs"):
        return GCSBackend(fs)
    if module.startswith("adlfs"):
        return AzureBackend(fs)
    if module.startswith("sshfs"):
        return SFTPBackend(fs)
    if "file" in protocols and module.startswith("fsspec.implementations.local"):
        return LocalBackend(fs)
    if module.startswith("fsspec.implementations.memory"):
        return MemoryBackend(fs)
    if isinstance(fs, AsyncFileSystem):
        return AsyncBackend(fs)
    return SyncBackend(fs)
