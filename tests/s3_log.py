"""An S3 server on 127.0.0.1 that logs every request: moto's app behind a counting middleware.

:func:`logging_s3` serves moto's S3 WSGI app (``DomainDispatcherApplication``, in this
process, objects in memory) with werkzeug's threaded server on a free loopback port,
behind a middleware that records each request before its response is sent: method,
bucket, key, query, kind, status, body bytes in and out, Range, keys of a multi-object
delete (:class:`Request`). :class:`RequestLog` holds them; ``log.snapshot()`` is a frozen
:class:`Requests` with counts by kind, bytes, filters by bucket and key prefix, and the
request sequence grouped by folder (:meth:`Requests.runs`).

One kind per request (:func:`classify`):

=============  ===================================================================
kind           requests
=============  ===================================================================
``put``        PUT of a whole object in one request (no copy source, no part)
``part``       PUT of one part of a multipart upload (``?partNumber&uploadId``)
``multipart``  POST ``?uploads`` (create), POST ``?uploadId`` (complete),
               DELETE ``?uploadId`` (abort)
``copy``       PUT with ``x-amz-copy-source`` (server-side copy; rclone's moves)
``get``        GET of an object (``Request.range`` says whether it was ranged)
``head``       HEAD of an object (existence checks, metadata reads)
``list``       GET of a bucket without a bucket subresource (ListObjects v1 and
               v2, ``?uploads``), GET ``?uploadId`` (ListParts), GET ``/``
               (ListBuckets)
``delete``     DELETE of an object; POST ``?delete`` (one request,
               ``Request.deleted_keys`` keys)
``bucket``     requests about the bucket itself: HEAD bucket, GET ``?location``
               and other bucket subresources, PUT bucket (create), DELETE bucket
``other``      anything else (object ACLs, tagging, ...)
=============  ===================================================================

An object written by upload is one ``put``, or one multipart upload (a ``multipart``
create, its ``part`` requests, a ``multipart`` complete): :attr:`Requests.objects_written`
counts successful puts, completes and copies. To compare with storeprobe's own figures,
:attr:`Requests.by_storeprobe_kind` names the kinds as ``storeprobe.request.Kind`` does
(``put-part``, ``create-multipart``, ``complete-multipart``), and
:attr:`Requests.by_class` groups them as issue 23's tolerances do (writes, reads,
checks, listings, deletes, control).

Bytes are HTTP body bytes only, no headers: ``bytes_in`` is what the server received
(request bodies as sent, including any aws-chunked framing), ``payload_in`` the content
they carried (``x-amz-decoded-content-length`` when a body is aws-chunked, as restic's
are), ``bytes_out`` what it sent (response bodies; HEAD responses count 0). The
server's own bookkeeping (:meth:`LoggingS3.objects`, ``create_bucket``,
``delete_bucket``) carries a header that keeps it out of the log.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs
from attrs import define, field, frozen

if TYPE_CHECKING:
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from werkzeug.serving import BaseWSGIServer

__all__ = [
    "KINDS",
    "S3_KEY",
    "S3_SECRET",
    "Kind",
    "LoggingS3",
    "Request",
    "RequestLog",
    "Requests",
    "StoredObject",
    "classify",
    "logging_s3",
]

Kind = Literal[
    "put", "part", "multipart", "copy", "get", "head", "list", "delete", "bucket", "other"
]
#: every request kind, in the order tables show them
KINDS: tuple[Kind, ...] = (
    "put",
    "part",
    "multipart",
    "copy",
    "get",
    "head",
    "list",
    "delete",
    "bucket",
    "other",
)

S3_KEY = "testing"  # moto accepts any credentials; these are its documented test ones
S3_SECRET = "testing"
_UNTRACKED = "x-backup-tools-untracked"  # header of the server's own bookkeeping requests


# -- requests ------------------------------------------------------------------------


@frozen(kw_only=True)
class Request:
    """One request the S3 server answered; ``index`` numbers them as responses complete."""

    index: int
    method: str
    bucket: str  # "" for ListBuckets
    key: str  # "" for bucket-level requests and listings
    query: tuple[tuple[str, str], ...]  # decoded, in the order sent
    kind: Kind
    status: int
    bytes_in: int  # request body bytes received
    bytes_out: int  # response body bytes sent (0 for HEAD)
    #: the content the body carried: ``x-amz-decoded-content-length`` of an aws-chunked
    #: body (restic's minio-go streams signed chunks), else ``bytes_in``
    payload_in: int = 0
    range: str | None = None  # the Range header of a GET, as sent
    deleted_keys: int = 0  # a DELETE of a key: 1; POST ?delete: keys in its body

    @property
    def prefix(self) -> str:
        """The listing's ``prefix`` parameter, or "" (for a listing without one)."""
        return next((value for name, value in self.query if name == "prefix"), "")

    @property
    def storeprobe_kind(self) -> str:
        """The kind as storeprobe's request model names it (``storeprobe.request.Kind``):
        ``put-part``, ``create-multipart``, ``complete-multipart`` for the multipart steps;
        the kinds it lacks keep the harness's name (``copy``, ``bucket``, ``other``) and
        an abort is ``abort-multipart``."""
        if self.kind == "part":
            return "put-part"
        if self.kind == "multipart":
            if self.method == "DELETE":
                return "abort-multipart"
            return "create-multipart" if _has(self, "uploads") else "complete-multipart"
        return self.kind

    @property
    def subject(self) -> str:
        """The key, or for a listing its prefix: what a prefix filter matches."""
        return self.key or self.prefix

    def describe(self) -> str:
        """``"PUT restic/repo/keys/3f2a… [put] 455 B in, 0 B out (200)"``."""
        query = "&".join(f"{k}={v}" if v else k for k, v in self.query if k in _SHOWN)
        where = f"{self.bucket}/{self.subject}" + (f"?{query}" if query else "")
        ranged = f" {self.range}" if self.range else ""
        deleted = (
            f" ({self.deleted_keys} keys)"
            if self.method == "POST" and self.kind == "delete"
            else ""
        )
        return (
            f"{self.method} {where}{ranged}{deleted} [{self.kind}] "
            f"{self.bytes_in} B in, {self.bytes_out} B out ({self.status})"
        )


_SHOWN = frozenset({"uploads", "uploadId", "partNumber", "delete", "list-type", "location"})


def _has(request: Request, name: str) -> bool:
    return any(key == name for key, _ in request.query)


def _subject_under(request: Request, prefix: str) -> bool:
    # a request about the whole bucket (HEAD bucket, ?location) concerns every prefix in it
    return not request.subject or request.subject.startswith(prefix)


@frozen
class Requests:
    """Requests the server answered (a frozen snapshot of a :class:`RequestLog`).

    Counts, bytes and filters are derived; ``records`` keeps every request in order.
    """

    records: tuple[Request, ...] = ()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Request]:
        return iter(self.records)

    def __repr__(self) -> str:
        return f"<Requests {self.describe()}>"

    # -- filters --------------------------------------------------------------------

    def where(
        self,
        *,
        bucket: str | None = None,
        prefix: str | None = None,
        kind: Kind | None = None,
        method: str | None = None,
    ) -> Requests:
        """The requests matching every filter given.

        ``prefix`` matches a request's key, or a listing's ``prefix`` parameter;
        bucket-level requests (no key, no listing prefix) match any prefix.
        """
        return Requests(
            tuple(
                r
                for r in self.records
                if (bucket is None or r.bucket == bucket)
                and (prefix is None or _subject_under(r, prefix))
                and (kind is None or r.kind == kind)
                and (method is None or r.method == method)
            )
        )

    def after(self, other: Requests) -> Requests:
        """The requests that came after the last of ``other`` (a snapshot taken earlier)."""
        last = other.records[-1].index if other.records else -1
        return Requests(tuple(r for r in self.records if r.index > last))

    # -- figures --------------------------------------------------------------------

    @property
    def by_kind(self) -> Mapping[Kind, int]:
        """Requests of each kind (every kind present, zeros included), in :data:`KINDS` order."""
        counted = Counter(r.kind for r in self.records)
        return {kind: counted.get(kind, 0) for kind in KINDS}

    @property
    def by_storeprobe_kind(self) -> Mapping[str, int]:
        """Requests by :attr:`Request.storeprobe_kind` (only kinds present), to compare
        with a storeprobe Result's ``requests_by_kind``."""
        return dict(Counter(r.storeprobe_kind for r in self.records))

    @property
    def by_class(self) -> Mapping[str, int]:
        """Requests in the classes issue 23's tolerances name: ``writes`` (put, part,
        copy), ``reads`` (get), ``checks`` (head of an object), ``listings`` (list),
        ``deletes`` (delete requests, a multi-object delete once) and ``control`` (the
        multipart create/complete/abort, bucket-level and other requests)."""
        classes = {
            "put": "writes", "part": "writes", "copy": "writes", "get": "reads",
            "head": "checks", "list": "listings", "delete": "deletes",
        }  # fmt: skip
        counted = Counter(classes.get(r.kind, "control") for r in self.records)
        names = ("writes", "reads", "checks", "listings", "deletes", "control")
        return {name: counted.get(name, 0) for name in names}

    def count(self, kind: Kind) -> int:
        """Requests of ``kind``."""
        return sum(1 for r in self.records if r.kind == kind)

    @property
    def bytes_in(self) -> int:
        """Body bytes the server received (what the client sent)."""
        return sum(r.bytes_in for r in self.records)

    @property
    def bytes_out(self) -> int:
        """Body bytes the server sent (what the client received)."""
        return sum(r.bytes_out for r in self.records)

    @property
    def payload_in(self) -> int:
        """Content bytes the server received: ``bytes_in`` without aws-chunked framing."""
        return sum(r.payload_in for r in self.records)

    @property
    def objects_written(self) -> int:
        """Objects created: successful single PUTs, completed multipart uploads, copies."""
        return sum(1 for r in self.records if r.status < 300 and _creates_object(r))

    @property
    def keys_deleted(self) -> int:
        """Keys deleted by successful DELETEs and multi-object deletes."""
        return sum(r.deleted_keys for r in self.records if r.kind == "delete" and r.status < 300)

    @property
    def ranged_gets(self) -> int:
        """GETs of an object with a Range header."""
        return sum(1 for r in self.records if r.kind == "get" and r.range is not None)

    @property
    def failed(self) -> int:
        """Requests answered with a status of 400 or more (a HEAD of a missing key is one)."""
        return sum(1 for r in self.records if r.status >= 400)

    def describe(self) -> str:
        """``"8 put, 7 list, 3 get, 1 head, 1 delete; 5.1 MiB in, 2.0 KiB out"``."""
        counts = ", ".join(f"{n} {kind}" for kind, n in self.by_kind.items() if n)
        return f"{counts or 'no requests'}; {_size(self.bytes_in)} in, {_size(self.bytes_out)} out"

    def runs(self, *, strip: str = "", depth: int = 1) -> tuple[tuple[str, str, int], ...]:
        """Consecutive requests grouped by (method + kind, folder): the request sequence.

        The folder is the subject with ``strip`` removed from its front, cut to its first
        ``depth`` components (``"data/"``, ``"keys/"``; a key at the top is shown whole).
        ``(("GET [get]", "config", 1), ("PUT [put]", "data/", 3), ...)``.
        """
        out: list[tuple[str, str, int]] = []
        for r in self.records:
            subject = r.subject.removeprefix(strip) if strip else r.subject
            parts = subject.split("/")
            folder = "/".join(parts[:depth]) + "/" if len(parts) > depth else subject
            label = f"{r.method} [{r.kind}]"
            if out and out[-1][0] == label and out[-1][1] == folder:
                out[-1] = (label, folder, out[-1][2] + 1)
            else:
                out.append((label, folder, 1))
        return tuple(out)


def _creates_object(request: Request) -> bool:
    return request.kind in ("put", "copy") or request.storeprobe_kind == "complete-multipart"


def classify(method: str, bucket: str, key: str, query: Mapping[str, str], copy: bool) -> Kind:
    """The kind of one S3 request (see the module docstring's table).

    ``copy`` is whether it carries an ``x-amz-copy-source`` header.
    """
    if not bucket:
        return "list" if method == "GET" else "other"
    if method == "PUT":
        if not key:
            return "bucket"
        if "partNumber" in query and "uploadId" in query:
            return "part"
        if set(query) & _OBJECT_SUBRESOURCES:
            return "other"
        return "copy" if copy else "put"
    if method == "POST":
        if "delete" in query:
            return "delete"
        if key and ("uploads" in query or "uploadId" in query):
            return "multipart"
        return "other"
    if method == "DELETE":
        if not key:
            return "bucket"
        return "multipart" if "uploadId" in query else "delete"
    if method == "HEAD":
        return "head" if key else "bucket"
    if method == "GET":
        if not key:
            return "bucket" if set(query) & _BUCKET_SUBRESOURCES else "list"
        if "uploadId" in query:
            return "list"
        return "other" if set(query) & _OBJECT_SUBRESOURCES else "get"
    return "other"


_OBJECT_SUBRESOURCES = frozenset({"acl", "tagging", "retention", "legal-hold", "attributes"})
# GET of a bucket with one of these is about the bucket, not a listing of its keys
_BUCKET_SUBRESOURCES = frozenset(
    {
        "accelerate",
        "acl",
        "analytics",
        "cors",
        "encryption",
        "intelligent-tiering",
        "inventory",
        "lifecycle",
        "location",
        "logging",
        "metrics",
        "notification",
        "object-lock",
        "ownershipControls",
        "policy",
        "policyStatus",
        "publicAccessBlock",
        "replication",
        "requestPayment",
        "tagging",
        "versioning",
        "website",
    }
)


class RequestLog:
    """Every request the logging server answered; thread-safe (the server is threaded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[Request] = []
        self._next = 0

    def add(self, request: Request) -> None:
        """Append one request, numbered in the order responses complete (its ``index`` is
        replaced)."""
        with self._lock:
            self._records.append(attrs.evolve(request, index=self._next))
            self._next += 1

    def reset(self) -> None:
        """Forget every request so far (indices keep counting up)."""
        with self._lock:
            self._records.clear()

    def mark(self) -> int:
        """The index the next request will get: pass it to :meth:`snapshot` later."""
        with self._lock:
            return self._next

    def snapshot(self, since: int = 0) -> Requests:
        """The requests so far (those numbered ``since`` or later), frozen."""
        with self._lock:
            if since <= 0:
                return Requests(tuple(self._records))
            return Requests(tuple(r for r in self._records if r.index >= since))


def _size(nbytes: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor:
            return f"{nbytes / factor:.1f} {unit}"
    return f"{nbytes} B"


# -- the logging S3 server -------------------------------------------------------------


def _logging_middleware(app: WSGIApplication, log: RequestLog) -> WSGIApplication:
    """Wrap a WSGI app: read each request body (counted), forward it, count the response."""

    def middleware(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        stream = environ["wsgi.input"]
        length = environ.get("CONTENT_LENGTH") or ""
        if length.isdigit():
            body = stream.read(int(length)) if int(length) else b""
        elif environ.get("wsgi.input_terminated") or "chunked" in environ.get(
            "HTTP_TRANSFER_ENCODING", ""
        ):
            body = stream.read()
        else:
            body = b""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ["wsgi.input_terminated"] = False
        untracked = bool(environ.pop("HTTP_" + _UNTRACKED.upper().replace("-", "_"), None))
        method = environ["REQUEST_METHOD"]
        raw_path = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace")
        bucket, _, key = raw_path.lstrip("/").partition("/")
        query = tuple(
            urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        )
        kind = classify(method, bucket, key, dict(query), "HTTP_X_AMZ_COPY_SOURCE" in environ)
        deleted = 1 if kind == "delete" and method == "DELETE" else 0
        if kind == "delete" and method == "POST":
            deleted = _count_delete_keys(body)
        status: list[int] = [0]

        def recording_start(
            status_line: str, headers: list[tuple[str, str]], exc_info: OptExcInfo | None = None
        ) -> Callable[[bytes], object]:
            status[0] = int(status_line.split(" ", 1)[0])
            return start_response(status_line, headers, exc_info)

        # the whole response is drained and the request logged before a byte of it is
        # sent: once the client has its answer, the log already has the request (a record
        # added after the response could land after the step that caused it was read)
        result = app(environ, recording_start)
        try:
            chunks = list(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if not untracked:
            log.add(
                Request(
                    index=-1,
                    method=method,
                    bucket=bucket,
                    key=key,
                    query=query,
                    kind=kind,
                    status=status[0],
                    bytes_in=len(body),
                    payload_in=_decoded_length(environ, len(body)),
                    bytes_out=0 if method == "HEAD" else sum(len(chunk) for chunk in chunks),
                    range=environ.get("HTTP_RANGE") if kind == "get" else None,
                    deleted_keys=deleted,
                )
            )
        return chunks

    return middleware


def _decoded_length(environ: WSGIEnvironment, received: int) -> int:
    decoded = environ.get("HTTP_X_AMZ_DECODED_CONTENT_LENGTH", "")
    return int(decoded) if decoded.isdigit() else received


def _count_delete_keys(body: bytes) -> int:
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return 0
    return sum(1 for element in root.iter() if element.tag.rsplit("}", 1)[-1] == "Key")


@frozen(kw_only=True)
class StoredObject:
    """One object in a bucket, as a listing shows it."""

    key: str
    size: int


@define
class LoggingS3:
    """moto's S3 on ``127.0.0.1:port``, every request logged in ``log``.

    Start it with :func:`logging_s3`. Its own bookkeeping (``create_bucket``,
    ``objects``, ``delete_bucket``) goes through the same server with a header that keeps
    it out of the log.
    """

    port: int
    log: RequestLog
    _server: BaseWSGIServer = field(repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _client(self) -> _S3Client:
        import boto3
        from botocore.config import Config

        client: _S3Client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )

        def untracked(request: Any, **_: object) -> None:
            request.headers[_UNTRACKED] = "1"

        client.meta.events.register("before-send.s3", untracked)
        return client

    def buckets(self) -> tuple[str, ...]:
        """The buckets' names (untracked)."""
        return tuple(sorted(b["Name"] for b in self._client().list_buckets().get("Buckets", ())))

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (untracked)."""
        self._client().create_bucket(Bucket=name)

    def objects(self, bucket: str, prefix: str = "") -> tuple[StoredObject, ...]:
        """The objects under ``bucket/prefix``, by key (untracked)."""
        client = self._client()
        found: list[StoredObject] = []
        token: dict[str, str] = {}
        while True:
            page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, **token)
            found.extend(
                StoredObject(key=str(item["Key"]), size=int(item["Size"]))
                for item in page.get("Contents", ())
            )
            if not page.get("IsTruncated"):
                return tuple(sorted(found, key=lambda o: o.key))
            token = {"ContinuationToken": str(page["NextContinuationToken"])}

    def delete_bucket(self, name: str) -> None:
        """Delete every object of bucket ``name``, then the bucket (untracked)."""
        client = self._client()
        keys = [o.key for o in self.objects(name)]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            client.delete_objects(Bucket=name, Delete={"Objects": batch})
        client.delete_bucket(Bucket=name)


class _S3Client(Protocol):
    """The few boto3 S3 client calls the server's bookkeeping uses (boto3 is untyped)."""

    meta: Any

    def list_buckets(self) -> dict[str, Any]: ...
    def create_bucket(self, *, Bucket: str) -> object: ...  # noqa: N803
    def list_objects_v2(self, *, Bucket: str, Prefix: str, **token: str) -> dict[str, Any]: ...  # noqa: N803
    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> object: ...  # noqa: N803
    def delete_bucket(self, *, Bucket: str) -> object: ...  # noqa: N803


@contextlib.contextmanager
def logging_s3() -> Iterator[LoggingS3]:
    """Start moto's S3 app behind the logging middleware on a free loopback port.

    Runs in this process (werkzeug's threaded server in a daemon thread); stopped, and
    its thread joined, on exit. moto keeps objects in memory.
    """
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            pass

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    log = RequestLog()
    app = _logging_middleware(DomainDispatcherApplication(create_backend_app), log)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="logging-s3", daemon=True)
    thread.start()
    try:
        yield LoggingS3(port=server.server_address[1], log=log, server=server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
