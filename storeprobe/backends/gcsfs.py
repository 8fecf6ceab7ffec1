"""gcsfs: one upload request per object, a parallel composite upload for one split
object, ranged GETs, create-only writes.

gcsfs sends a resumable upload's chunks in order, so it cannot split one object's upload
by itself. storeprobe splits it the way ``gcloud storage`` does a *parallel composite
upload*: each part is uploaded as a temporary object of its own (``<key>.part-NNNNN``,
beside the object), N at once, then one ``compose`` request (at most 32 sources each;
more parts are composed 32 at a time into the object) makes the object, and the
temporary parts are deleted. The compose and the deletions are the plan's last step and
are timed: an upload is not done while its parts remain. After a failure the parts are
deleted untimed (the plan's abort).

The object GCS makes is a *composite object*: it has a CRC32C but no MD5 hash, and in a
bucket of a storage class with a minimum storage duration (Nearline, Coldline, Archive)
its deleted parts are billed as early deletions. Parts may be of any size; storeprobe
asks for at least 1 MiB.

Writes use ``mode="create"`` (``ifGenerationMatch=0``, also on the compose); reads ask
for one connection (``concurrency=1``).

Retries are gcsfs's own: every request goes through ``GCSFileSystem._request``, which
``gcsfs.retry.retry_request`` retries (5xx, 408, 429 and dropped connections, up to
``retries`` = 6 attempts, sleeping 1-2 s, then 2-3 s, ...). storeprobe puts its counter
inside that loop: the filesystem's ``_request`` becomes ``retry_request`` (gcsfs's, with
gcsfs's limit) around one attempt of the class's own undecorated ``_request``, counted:
every attempt after a request's first is a retry, every status line an answer, 503 and
429 the pushback (:mod:`.attempts`). gcsfs raises an answer's status as an exception
type (``validate_response``: 404 ``FileNotFoundError``, 412 ``FileExistsError``, 403
``OSError``, 502 ``ProxyError``, other codes ``HttpError.code``); aiohttp's connection
errors and timeouts are attempts without an answer.

An ``https://`` endpoint (``endpoint_url``, ``STORAGE_EMULATOR_HOST`` or Google's) is
checked against the CAs gcsfs trusts: gcsfs (aiohttp) verifies with OpenSSL's default
context, whose roots ``SSL_CERT_FILE`` (or ``SSL_CERT_DIR``) names when it is set as the
process starts (aiohttp builds that context on import); gcsfs has no option of its own
for a CA. gcsfs retries an untrusted certificate like a lost connection (six attempts,
about 30 s of back-off), so before the run :func:`check_certificate` makes one TLS
handshake with that same default context (untimed; skipped when ``session_kwargs``
brings a ``connector`` of its own): a certificate it does not trust fails at once, as
a TLS error naming ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from storeprobe.backends.attempts import CountsAttempts, Tally
from storeprobe.backends.base import AsyncBackend, AsyncUpload, Capabilities, Landing, check_bucket
from storeprobe.backends.fsspec import FsspecAsyncBackend
from storeprobe.backends.registry import ClientSpec, no_listings_cache
from storeprobe.errors import TargetNotFoundError, TargetPermissionError
from storeprobe.request import AsyncCall, AsyncJob, Body, Kind, Outcome, Request
from storeprobe.transfer import Clock
from storeprobe.units import MiB

__all__ = ["SPEC", "GCSBackend", "check_certificate", "part_name"]

#: most source objects one compose request takes (GCS's limit)
COMPOSE_LIMIT = 32


def _answer(exc: BaseException) -> tuple[bool, int | None]:
    """Whether a failed gcsfs attempt had an answer, and its status where gcsfs kept it
    (``gcsfs.retry.validate_response`` turns a status into an exception type)."""
    import aiohttp
    import requests
    from gcsfs.retry import HttpError

    if isinstance(exc, HttpError):
        return True, int(exc.code) if str(exc.code).isdigit() else None
    if isinstance(exc, aiohttp.ClientResponseError):
        return True, exc.status
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | ConnectionError):
        return False, None
    if isinstance(exc, requests.exceptions.ProxyError):
        return True, 502
    if isinstance(exc, FileNotFoundError):
        return True, 404
    if isinstance(exc, FileExistsError):
        return True, 412
    if isinstance(exc, OSError | ValueError):  # 403 Forbidden, 400 Bad Request
        return True, None
    return False, None


#: seconds the certificate check waits for a connection and a handshake
CHECK_TIMEOUT_S = 10.0


def check_certificate(location: str, session_kwargs: Mapping[str, Any]) -> None:
    """Raise :class:`ssl.SSLCertVerificationError` when the ``https://`` ``location`` shows
    a certificate that gcsfs's default SSL context does not trust (one handshake, no
    request). Nothing is checked for ``http://``, for a session with a ``connector`` of
    its own, or when the server cannot be reached (gcsfs's requests then say so)."""
    parts = urllib.parse.urlsplit(location)
    if parts.scheme != "https" or parts.hostname is None or "connector" in session_kwargs:
        return
    context = ssl.create_default_context()  # aiohttp's verified default, read afresh
    context.set_alpn_protocols(("http/1.1",))
    try:
        with (
            socket.create_connection((parts.hostname, parts.port or 443), CHECK_TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname=parts.hostname),
        ):
            pass
    except ssl.SSLCertVerificationError:
        raise
    except OSError:
        return


def part_name(key: str, number: int) -> str:
    """The temporary object that holds part ``number`` of ``key`` until it is composed."""
    return f"{key}.part-{number:05d}"


class GCSUpload(AsyncUpload):
    """A parallel composite upload: each part an object of its own, then a compose of
    them into the object (the parts deleted after); an abort deletes the parts."""

    def __init__(self, backend: AsyncBackend, requests: Sequence[Request], clock: Clock) -> None:
        super().__init__(backend, requests, clock)
        self.parts: dict[str, list[str]] = {}
        for request in requests:
            if request.kind is Kind.PUT_PART:
                name = part_name(request.key, request.part_number or 1)
                self.parts.setdefault(request.key, []).append(name)

    def part(self, request: Request, body: Body | None) -> AsyncJob:
        named = Request(kind=Kind.PUT, key=part_name(request.key, request.part_number or 1))
        put = self.backend.put(named, body, None, self.clock)
        return AsyncJob(Kind.PUT_PART, put.call)

    def complete(self, request: Request, body: Body | None) -> AsyncJob:
        return AsyncJob(
            Kind.COMPLETE_MULTIPART, _compose(self.fs, request.key, self.parts[request.key])
        )

    async def abort(self) -> None:
        for name in (name for names in self.parts.values() for name in names):
            with contextlib.suppress(FileNotFoundError):
                await self.fs._rm_file(name)


class GCSBackend(CountsAttempts, FsspecAsyncBackend):
    """gcsfs (see the module docstring)."""

    name = "gcsfs"
    capabilities = Capabilities(
        splits_uploads=True, multipart_create=False, min_part_size=1 * MiB, counts_retries=True
    )
    upload = GCSUpload

    def _hook(self, tally: Tally) -> None:
        """Count each attempt inside gcsfs's own retry loop (see the module docstring)."""
        from gcsfs.retry import retry_request

        fs = self.fs
        once = type(fs)._request.__wrapped__  # one attempt: the undecorated method
        limit = int(fs.retries)

        async def request(*args: Any, **kwargs: Any) -> Any:
            attempts = 0

            async def attempt(*args: Any, **kwargs: Any) -> Any:
                nonlocal attempts
                if attempts:
                    tally.retried()
                attempts += 1
                try:
                    answer = await once(fs, *args, **kwargs)
                except Exception as exc:
                    answered, status = _answer(exc)
                    if answered:
                        tally.answered(status)
                    raise
                tally.answered(int(answer[0]))
                return answer

            return await retry_request(attempt, limit)(*args, **kwargs)

        fs._request = request

    def check_root(self, root: str) -> None:
        check_certificate(str(self.fs._location), getattr(self.fs, "session_kwargs", None) or {})
        self._watch()
        check_bucket(root, self.fs.info, "bucket", "gs://BUCKET[/PREFIX]")

    def make_prefix(self, prefix: str) -> None:
        return None

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        if request.start is not None:
            return super().get(request, body, into, clock)
        fs, path = self.fs, request.key

        async def get() -> Outcome:
            data = await fs._cat_file(path, concurrency=1)
            return Outcome(received=len(data), data=data)

        return AsyncJob(Kind.GET, get)


def _compose(fs: Any, key: str, names: list[str]) -> AsyncCall:
    """The coroutine function that composes ``names`` into ``key``, then deletes them."""
    bucket, target, _ = fs.split_path(key)
    sources = [fs.split_path(name)[1] for name in names]
    batches = [sources[:COMPOSE_LIMIT]]
    rest = sources[COMPOSE_LIMIT:]
    while rest:  # the object so far, then up to 31 more parts
        batches.append([target, *rest[: COMPOSE_LIMIT - 1]])
        rest = rest[COMPOSE_LIMIT - 1 :]

    async def compose() -> Outcome:
        for number, batch in enumerate(batches):
            # create-only: the first compose must not replace an object; the later
            # ones extend the object the first made
            condition = {"ifGenerationMatch": 0} if number == 0 else {}
            await fs._call(
                "POST",
                "b/{}/o/{}/compose",
                bucket,
                target,
                headers={"Content-Type": "application/json"},
                json={
                    "kind": "storage#composeRequest",
                    "sourceObjects": [{"name": source} for source in batch],
                    "destination": {"name": target, "bucket": bucket},
                },
                **condition,
            )
        for name in names:
            await fs._rm_file(name)
        return Outcome(wire=((Kind.COMPLETE_MULTIPART, len(batches)), (Kind.DELETE, len(names))))

    return compose


#: gcsfs, the fsspec implementation (and the default client) of ``gs://``
SPEC = ClientSpec(
    name="gcsfs",
    backend=GCSBackend,
    modules=("gcsfs",),
    protocols=("gs", "gcs"),
    implements=("gs", "gcs"),
    extra="gcs",
    default_for=("gs", "gcs"),
    open_options=no_listings_cache,
    codes={
        "http:404": (TargetNotFoundError, "check the bucket and path exist"),
        "http:401": (TargetPermissionError, "check the credentials and their permissions"),
        "http:403": (TargetPermissionError, "check the credentials and their permissions"),
    },
)
