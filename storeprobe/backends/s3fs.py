"""s3fs: one PUT/GET per call, and the probe's own multipart steps for split uploads.

s3fs's ``_pipe_file`` sends up to ``max_concurrency`` parts in batches and ``_cat_file``
up to ``max_concurrency`` ranged GETs; storeprobe calls botocore's operations through
``fs._call_s3`` and makes the parts itself, so the number in flight is the probe's
``streams`` and nothing else. Writes are create-only (``If-None-Match: *``) unless the
storage refuses conditional writes (see :class:`NoConditionalWrites`). Reads stream
the response body into the buffer prepared before the window. Retries botocore makes
by itself, its answers and their pushback (503, 429) are counted through its
``needs-retry`` event, which botocore emits after every attempt.

A staged object (see :mod:`storeprobe.staging`) is never held whole: its single PUT,
and each part of its multipart upload, sends its bytes of the staged file, opened before
the window, as the body (aiohttp reads it 256 KiB at a time as it sends; over plain
HTTP botocore also reads it once to sign the payload), and its single GET writes each
chunk of the response into the staging file as it arrives.

Why one module (~470 lines): one backend class with the pieces only it uses (its
multipart upload object :class:`S3Upload`, the file slice a part sends as its body, the
test of a refused conditional write, the DeleteObjects batches), each written against
the botocore operation it calls and read with it.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import fsspec

from storeprobe.backends.attempts import CountsAttempts, Tally
from storeprobe.backends.base import (
    AsyncBackend,
    AsyncUpload,
    Capabilities,
    Classified,
    Landing,
    check_bucket,
    source_of,
)
from storeprobe.backends.bulk_delete import KeysNotDeletedError
from storeprobe.backends.registry import ClientSpec, no_listings_cache
from storeprobe.errors import TargetNotFoundError, TargetPermissionError
from storeprobe.payload import filled_buffer
from storeprobe.request import AsyncJob, Body, Kind, Outcome, Part, Payloads, Request, StagedFile
from storeprobe.staging import Staging
from storeprobe.transfer import Clock
from storeprobe.units import GiB, MiB

__all__ = ["DELETE_OBJECTS_KEYS", "SPEC", "S3Backend", "refuses_conditional_write"]

#: most keys one S3 DeleteObjects request may name (the API's limit)
DELETE_OBJECTS_KEYS = 1000

_NO_CREDENTIALS = (
    "no AWS credentials found: pass key and secret in storage_options, set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a profile (profile=...)"
)
_CHUNK = 1 << 20  # bytes asked of a response stream per read
_NOT_IMPLEMENTED = ("NotImplemented", "501")


def refuses_conditional_write(exc: BaseException) -> bool:
    """True when ``exc`` (or the botocore error it wraps) says the storage does not
    implement conditional writes: code NotImplemented or HTTP 501 (s3fs raises it as
    ``OSError(ENOSYS)`` from the ClientError). From codes only, never the message."""
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc and refuses_conditional_write(cause):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOSYS:
        return True
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if error.get("Code") in _NOT_IMPLEMENTED or status == 501:
            return True
    return False


class _FileSlice(io.RawIOBase):
    """Bytes ``[start, start + size)`` of a staged file as a seekable file (``pread``)."""

    def __init__(self, staged: StagedFile) -> None:
        super().__init__()
        self._fd = os.open(staged.path, os.O_RDONLY)
        self._start, self._size, self._position = staged.start, staged.size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")[: max(self._size - self._position, 0)]
        got = os.preadv(self._fd, [view], self._start + self._position) if view else 0
        self._position += got
        return got

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def _length(body: Body | None) -> int:
    if isinstance(body, io.BytesIO):
        with body.getbuffer() as view:
            return view.nbytes
    if isinstance(body, bytes | bytearray | memoryview):
        return len(body)
    if isinstance(body, StagedFile):
        return body.size
    raise TypeError(f"s3fs sends bytes or BytesIO, not {type(body).__name__}")


class S3Upload(AsyncUpload):
    """S3 multipart uploads of one plan: their upload ids and the parts' ETags."""

    def __init__(self, backend: AsyncBackend, requests: Sequence[Request], clock: Clock) -> None:
        super().__init__(backend, requests, clock)
        self.uploads: dict[str, str] = {}
        self.etags: dict[str, dict[int, str]] = {}
        conditional = not isinstance(backend, S3Backend) or backend.conditional
        self.condition = {"IfNoneMatch": "*"} if conditional else {}

    def create(self, request: Request, body: Body | None) -> AsyncJob:
        fs, path, uploads, etags = self.fs, request.key, self.uploads, self.etags
        bucket, key, _ = fs.split_path(path)

        async def create() -> Outcome:
            response = await fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key)
            uploads[path] = response["UploadId"]
            etags[path] = {}
            return Outcome()

        return AsyncJob(Kind.CREATE_MULTIPART, create)

    def part(self, request: Request, body: Body | None) -> AsyncJob:
        fs, path, uploads, etags = self.fs, request.key, self.uploads, self.etags
        bucket, key, _ = fs.split_path(path)
        number = request.part_number or 1
        size = _length(body)
        # a staged part is read from the staging file as it is sent, opened here
        part_body = _FileSlice(body) if isinstance(body, StagedFile) else body

        async def part() -> Outcome:
            sent: Any = part_body
            if isinstance(sent, memoryview):  # botocore takes bytes or files
                sent = io.BytesIO(sent)
            if isinstance(sent, io.BytesIO | _FileSlice):
                sent.seek(0)
            response = await fs._call_s3(
                "upload_part",
                Bucket=bucket,
                Key=key,
                UploadId=uploads[path],
                PartNumber=number,
                Body=sent,
            )
            etags[path][number] = response["ETag"]
            if isinstance(sent, _FileSlice):
                sent.close()
            return Outcome(sent=size)

        return AsyncJob(Kind.PUT_PART, part)

    def complete(self, request: Request, body: Body | None) -> AsyncJob:
        fs, path, uploads, etags = self.fs, request.key, self.uploads, self.etags
        bucket, key, _ = fs.split_path(path)
        condition = self.condition

        async def complete() -> Outcome:
            tags = etags[path]
            await fs._call_s3(
                "complete_multipart_upload",
                Bucket=bucket,
                Key=key,
                UploadId=uploads[path],
                MultipartUpload={
                    "Parts": [{"PartNumber": n, "ETag": tags[n]} for n in sorted(tags)]
                },
                **condition,
            )
            del uploads[path]
            return Outcome()

        return AsyncJob(Kind.COMPLETE_MULTIPART, complete)

    async def abort(self) -> None:
        for path, upload_id in list(self.uploads.items()):
            bucket, key, _ = self.fs.split_path(path)
            await self.fs._call_s3(
                "abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id
            )
            del self.uploads[path]


class S3Backend(CountsAttempts, AsyncBackend):
    """s3fs (see the module docstring). ``conditional=False`` puts without If-None-Match."""

    name = "s3fs"
    capabilities = Capabilities(
        splits_uploads=True,
        reads_into=True,
        checks_conditional_writes=True,
        sends_from_file=True,
        lands_in_file=True,
        min_part_size=5 * MiB,
        max_single_put=5 * GiB,
        confirms_size=True,
        counts_retries=True,
        deletes_per_request=DELETE_OBJECTS_KEYS,
    )
    upload = S3Upload

    def __init__(self, fs: fsspec.AbstractFileSystem, *, conditional: bool = True) -> None:
        super().__init__(fs)
        self.conditional = conditional

    def writer(self, path: str) -> S3Backend:
        """This backend, or a twin putting without If-None-Match if the storage refuses it.

        One conditional PUT of an empty object at ``path`` (untimed), deleted after."""
        bucket, key, _ = self.fs.split_path(path)
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"", IfNoneMatch="*")
        except Exception as exc:
            if not refuses_conditional_write(exc):
                raise
            twin = S3Backend(self.fs, conditional=False)
            twin._tally = self._tally
            return twin
        self.fs.rm_file(path)
        return self

    def _hook(self, tally: Tally) -> None:
        """Count each answer botocore received (``needs-retry`` follows every attempt),
        its pushback (503, 429) and the attempts it retries (5xx, throttling, dropped
        connections), on the client s3fs connected."""

        def count(response: Any = None, caught_exception: Any = None, **_: Any) -> None:
            status = None
            if response is not None:
                status = response[1].get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status is not None:
                tally.answered(int(status))
            if caught_exception is not None or (
                status is not None and (status >= 500 or status == 429)
            ):
                tally.retried()

        self.fs._s3.meta.events.register_first("needs-retry.s3", count)

    def check_root(self, root: str) -> None:
        check_bucket(root, self.fs.info, "bucket", "s3://BUCKET[/PREFIX]")
        if getattr(self.fs, "_s3", None) is not None:
            self._watch()  # the client exists once the first call connected

    def make_prefix(self, prefix: str) -> None:
        return None

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()

    def classify(self, exc: BaseException) -> Classified | None:
        """By botocore's error class (its error codes: :data:`SPEC`)."""
        if type(exc).__name__ == "NoCredentialsError":
            return TargetPermissionError, _NO_CREDENTIALS
        return None

    def body(self, workload: Payloads, part: Part) -> Body:
        """A BytesIO filled in place: aiohttp streams it in chunks instead of one huge write."""
        return filled_buffer(part.size, lambda view: workload.fill(part.index, part.start, view))

    def staged_body(self, staging: Staging, part: Part) -> Body:
        """A part of a staged object: its bytes of the staging file, read as they are sent."""
        return StagedFile(path=Path(staging.path), size=part.size, start=part.start)

    def _get(self, bucket: str, key: str, into: Landing, clock: Clock, **extra: Any) -> AsyncJob:
        fs = self.fs

        async def get() -> Outcome:
            response = await fs._call_s3("get_object", Bucket=bucket, Key=key, **extra)
            first_byte = clock()  # the response head has arrived
            body = response["Body"]
            try:
                if into is None:
                    data = await body.read()
                    return Outcome(received=len(data), first_byte_ns=first_byte, data=data)
                if isinstance(into, Staging):
                    received = 0
                    while chunk := await body.read(_CHUNK):
                        received += into.write(received, chunk)
                    return Outcome(received=received, first_byte_ns=first_byte)
                # the landing itself, not a view of it: released after the window, its
                # buffer is freed whatever still names this frame
                view = into if isinstance(into, memoryview) else memoryview(into)
                filled = 0
                while chunk := await body.read(_CHUNK):
                    end = filled + len(chunk)
                    if end > len(view):  # longer than written: keep it all for the check
                        data = bytes(view[:filled]) + chunk + await body.read()
                        return Outcome(received=len(data), first_byte_ns=first_byte, data=data)
                    view[filled:end] = chunk
                    filled = end
                return Outcome(received=filled, first_byte_ns=first_byte, data=view[:filled])
            finally:
                body.close()

        return AsyncJob(Kind.GET, get)

    def _put_staged(self, bucket: str, key: str, staged: StagedFile) -> AsyncJob:
        """One PUT whose body is the staged file, opened here (before the window)."""
        fs = self.fs
        condition = {"IfNoneMatch": "*"} if self.conditional else {}
        handle = open(staged.path, "rb")  # noqa: SIM115 - closed when the put ends

        async def put() -> Outcome:
            try:
                await fs._call_s3(
                    "put_object",
                    Bucket=bucket,
                    Key=key,
                    Body=handle,
                    ContentLength=staged.size,
                    **condition,
                )
            finally:
                handle.close()
            return Outcome(sent=staged.size)

        return AsyncJob(Kind.PUT, put)

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs = self.fs
        bucket, key, _ = fs.split_path(request.key)
        if isinstance(body, StagedFile):
            return self._put_staged(bucket, key, body)
        size = _length(body)
        condition = {"IfNoneMatch": "*"} if self.conditional else {}
        sent = body

        async def put() -> Outcome:
            assert isinstance(sent, io.BytesIO | bytes | bytearray)
            if isinstance(sent, io.BytesIO):
                sent.seek(0)
            await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=sent, **condition)
            return Outcome(sent=size)

        return AsyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        bucket, key, _ = self.fs.split_path(request.key)
        if request.start is not None and request.stop is not None:
            byte_range = f"bytes={request.start}-{request.stop - 1}"
            return self._get(bucket, key, into, clock, Range=byte_range)
        return self._get(bucket, key, into, clock)

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs = self.fs
        bucket, key, _ = fs.split_path(request.key)

        async def head() -> Outcome:
            response = await fs._call_s3("head_object", Bucket=bucket, Key=key)
            return Outcome(size=int(response["ContentLength"]))

        return AsyncJob(Kind.HEAD, head)

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs = self.fs
        bucket, key, _ = fs.split_path(request.key)
        prefix = key.rstrip("/") + "/" if key else ""  # the keys below a directory
        level = {"Delimiter": "/"} if request.one_level else {}

        async def listing() -> Outcome:
            # every page (≤ 1000 keys on S3), each continuing the last: Outcome.wire
            # counts the LIST requests, Outcome.size the keys (and, one level only,
            # the subfolders: S3's KeyCount counts its common prefixes too)
            found, pages = 0, 0
            more: dict[str, str] = {}
            while True:
                response = await fs._call_s3(
                    "list_objects_v2", Bucket=bucket, Prefix=prefix, **level, **more
                )
                found += int(response.get("KeyCount", 0))
                pages += 1
                if not response.get("IsTruncated"):
                    return Outcome(size=found, wire=((Kind.LIST, pages),))
                more = {"ContinuationToken": response["NextContinuationToken"]}

        return AsyncJob(Kind.LIST, listing)

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key
        if request.keys:
            return AsyncJob(Kind.DELETE, _delete_objects(fs, request.keys))

        async def delete() -> Outcome:
            await fs._rm_file(path)
            return Outcome()

        return AsyncJob(Kind.DELETE, delete)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs = self.fs
        bucket, key, _ = fs.split_path(request.key)
        source_bucket, source_key, _ = fs.split_path(source_of(self.name, request))
        copied = {"Bucket": source_bucket, "Key": source_key}

        async def copy() -> Outcome:
            await fs._call_s3("copy_object", Bucket=bucket, Key=key, CopySource=copied)
            return Outcome()

        return AsyncJob(Kind.COPY, copy)


def _delete_objects(fs: Any, names: Sequence[str]) -> Callable[[], Awaitable[Outcome]]:
    """One DeleteObjects request for ``names`` (one bucket, ≤ 1000 names), quiet: S3
    answers only the keys it did not delete, each with its code, raised as
    :class:`~storeprobe.backends.bulk_delete.KeysNotDeletedError` (s3fs's own
    ``_bulk_delete`` drops them). A key already gone is deleted."""
    split = [fs.split_path(name) for name in names]
    buckets = sorted({bucket for bucket, _, _ in split})
    bucket = buckets[0]
    named = {key: name for name, (_, key, _) in zip(names, split, strict=True)}
    objects = [{"Key": key} for key in named]

    async def delete_objects() -> Outcome:
        if len(buckets) != 1:  # refused as it runs: the caller deletes these one by one
            raise ValueError(f"one DeleteObjects request is for one bucket, not {buckets}")
        answer = await fs._call_s3(
            "delete_objects", Bucket=bucket, Delete={"Objects": objects, "Quiet": True}
        )
        refusals = [
            (str(e.get("Key", "")), str(e.get("Code", "")), str(e.get("Message", "")))
            for e in answer.get("Errors", [])
        ]
        failed = KeysNotDeletedError.of(refusals, named)
        if failed is not None:
            raise failed
        return Outcome()

    return delete_objects


_MISSING = (TargetNotFoundError, "check the bucket and path exist")
_REFUSED = (TargetPermissionError, "check the credentials and their permissions")
#: s3fs, the fsspec implementation of ``s3://``
SPEC = ClientSpec(
    name="s3fs",
    backend=S3Backend,
    modules=("s3fs",),
    protocols=("s3", "s3a"),
    implements=("s3", "s3a"),
    extra="s3",
    open_options=no_listings_cache,
    codes={
        "NoSuchBucket": _MISSING,
        "NoSuchKey": _MISSING,
        "AccessDenied": _REFUSED,
        "InvalidAccessKeyId": _REFUSED,
        "SignatureDoesNotMatch": _REFUSED,
    },
)
