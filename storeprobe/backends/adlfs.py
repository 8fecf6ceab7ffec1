"""adlfs: one request per call (``max_concurrency=1``), staged blocks for split uploads.

A split upload is ``Put Block`` × N in flight, then ``Put Block List`` (create-only:
``If-None-Match: *``). Whole-object writes are create-only (``overwrite=False``).

Retries are the Azure SDK's own: adlfs's ``BlobServiceClient`` has one retry policy
(``azure.storage.blob``'s ``ExponentialRetry``: 5xx, 408, 429 and connection errors, 3
retries of each kind, 10 in all, sleeping 15 s ± 3 s, then 18 s ± 3 s, ...) shared by
every blob and container client it makes. storeprobe counts through that policy's own
seams: ``configure_retries`` installs the SDK's per-request ``retry_hook`` (called once
for each retry, with the answer that caused it or the error), and ``send`` sees the
answer of each request's last attempt. Every attempt's status is an answer, 503 and 429
the pushback (:mod:`.attempts`); a retry after a connection error is a retry without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storeprobe.backends.attempts import CountsAttempts, Tally
from storeprobe.backends.base import (
    AsyncBackend,
    AsyncUpload,
    Capabilities,
    Landing,
    check_bucket,
)
from storeprobe.backends.fsspec import FsspecAsyncBackend
from storeprobe.backends.registry import ClientSpec, no_listings_cache
from storeprobe.errors import TargetNotFoundError, TargetPermissionError
from storeprobe.request import AsyncJob, Body, Kind, Outcome, Part, Payloads, Request
from storeprobe.transfer import Clock
from storeprobe.units import MiB

__all__ = ["SPEC", "AzureBackend"]


def _bytes(body: Body | None) -> bytes | bytearray | memoryview:
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"adlfs sends bytes, not {type(body).__name__}")
    return body


class AzureUpload(AsyncUpload):
    """Staged blocks of one plan: each part a Put Block, then a Put Block List naming them."""

    def __init__(self, backend: AsyncBackend, requests: Sequence[Request], clock: Clock) -> None:
        super().__init__(backend, requests, clock)
        self.blocks: dict[str, list[str]] = {}
        for request in requests:
            if request.kind is Kind.PUT_PART:
                self.blocks.setdefault(request.key, []).append(_block_id(request))

    def part(self, request: Request, body: Body | None) -> AsyncJob:
        service = self.fs.service_client
        container, blob, _ = self.fs.split_path(request.key)
        data, block_id = _bytes(body), _block_id(request)

        async def stage() -> Outcome:
            # the SDK takes bytes, not views: a staged part is copied here (in the window)
            sent = bytes(data) if isinstance(data, memoryview) else data
            async with service.get_blob_client(container, blob) as client:
                await client.stage_block(block_id, sent, length=len(sent))
            return Outcome(sent=len(data))

        return AsyncJob(Kind.PUT_PART, stage)

    def complete(self, request: Request, body: Body | None) -> AsyncJob:
        service = self.fs.service_client
        container, blob, _ = self.fs.split_path(request.key)
        names = self.blocks[request.key]

        async def commit() -> Outcome:
            from azure.core import MatchConditions

            async with service.get_blob_client(container, blob) as client:
                await client.commit_block_list(names, match_condition=MatchConditions.IfMissing)
            return Outcome()

        return AsyncJob(Kind.COMPLETE_MULTIPART, commit)


def _block_id(request: Request) -> str:
    """The block id of a part: its number, 8 digits, hex-encoded."""
    return f"{request.part_number or 1:08d}".encode().hex()


class AzureBackend(CountsAttempts, FsspecAsyncBackend):
    """adlfs (see the module docstring): its own puts and gets (one request each, create-only
    puts); HEAD, LIST, DELETE and COPY through fsspec's API, as every fsspec client."""

    name = "adlfs"
    capabilities = Capabilities(
        splits_uploads=True, multipart_create=False, min_part_size=1 * MiB, counts_retries=True
    )
    upload = AzureUpload

    def _hook(self, tally: Tally) -> None:
        """Count through the SDK's retry policy (see the module docstring)."""
        policy = self.fs.service_client._config.retry_policy
        configure, send = policy.configure_retries, policy.send

        def configure_retries(request: Any) -> Any:
            settings = configure(request)
            asked = settings["hook"]  # a retry_hook the caller passed, kept

            def retrying(**kwargs: Any) -> None:
                tally.retried()
                response = kwargs.get("response")
                if response is not None:
                    tally.answered(int(response.status_code))
                if asked is not None:
                    asked(**kwargs)

            settings["hook"] = retrying
            return settings

        async def last_attempt(request: Any) -> Any:
            response = await send(request)
            tally.answered(int(response.http_response.status_code))
            return response

        policy.configure_retries = configure_retries
        policy.send = last_attempt

    def check_root(self, root: str) -> None:
        self._watch()
        check_bucket(root, self.fs.info, "container", "abfs://CONTAINER[/PREFIX]")

    def make_prefix(self, prefix: str) -> None:
        return None

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()

    def body(self, workload: Payloads, part: Part) -> Body:
        """``bytes``: the Azure SDK cannot upload a bytearray."""
        return workload.payload_bytes(part.index, part.start, part.stop)

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path, data = self.fs, request.key, _bytes(body)

        async def put() -> Outcome:
            await fs._pipe_file(path, data, overwrite=False, max_concurrency=1)
            return Outcome(sent=len(data))

        return AsyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        fs, path = self.fs, request.key
        start, stop = request.start, request.stop

        async def get() -> Outcome:
            data = await fs._cat_file(path, start=start, end=stop, max_concurrency=1)
            return Outcome(received=len(data), data=data)

        return AsyncJob(Kind.GET, get)


def _options(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """The listings cache off for Blob URLs (Data Lake Gen1's ``adl://`` as given)."""
    return options if protocol == "adl" else no_listings_cache(protocol, options)


_REFUSED = (TargetPermissionError, "check the credentials and their permissions")
#: adlfs, the fsspec implementation of Azure Blob URLs (``adl://``: its Data Lake Gen1)
SPEC = ClientSpec(
    name="adlfs",
    backend=AzureBackend,
    modules=("adlfs",),
    protocols=("abfs", "abfss", "az", "adl"),
    implements=("abfs", "abfss", "az", "adl"),
    extra="azure",
    open_options=_options,
    codes={
        "ContainerNotFound": (TargetNotFoundError, "check the container and path exist"),
        "BlobNotFound": (TargetNotFoundError, "check the container and path exist"),
        "AuthenticationFailed": _REFUSED,
        "AuthorizationFailure": _REFUSED,
        "AuthorizationPermissionMismatch": _REFUSED,
    },
)
