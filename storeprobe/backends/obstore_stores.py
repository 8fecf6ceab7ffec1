"""obstore's stores as storeprobe opens them, and its GCS and Azure backends.

:func:`open_store` opens obstore's fsspec store for any protocol the way every
measurement needs it. :class:`ObstoreGCSBackend` (``GCSStore``, GCS's XML API) and
:class:`ObstoreAzureBackend` (``AzureStore``, block blobs) are :class:`.ObstoreBackend`
with the limits and names of their storage:

- GCS: a split upload is an XML multipart upload (create, parts of at least 5 MiB,
  complete), as on S3; listings page by 1000 keys;
- Azure: a split upload is ``Put Block`` × N then ``Put Block List``, with no create
  request; blocks of at least 1 MiB (as storeprobe asks of adlfs, so both clients split
  alike); one ``Put Blob`` holds at most 5000 MiB; listings page by 5000 blobs.

Both put create-only (``x-goog-if-generation-match: 0`` on GCS, ``If-None-Match: *`` on
Azure) and read ranges with ranged GETs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import attrs
import fsspec

from storeprobe.backends.base import Landing, check_bucket
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.request import AsyncCall, AsyncJob, Body, Kind, Outcome, Request
from storeprobe.transfer import Clock
from storeprobe.units import MiB

__all__ = ["CLIENT_TIMEOUT_S", "ObstoreAzureBackend", "ObstoreGCSBackend", "open_store"]


#: Seconds a client may wait for an answer by its own clock: a day, so that the probe's
#: ``timeout`` (per request and per untimed step, :mod:`storeprobe.transfer`'s watchdog)
#: governs on every client, not obstore's 30 s or s3fs's 15 s, after which each would
#: resend the request by itself.
CLIENT_TIMEOUT_S = 86_400


def open_store(
    protocol: str,
    config: dict[str, Any],
    *,
    client_options: Mapping[str, Any] | None = None,
    **extra: Any,
) -> fsspec.AbstractFileSystem:
    """obstore's fsspec store for ``protocol`` (``s3``, ``gs``, ``az``...) and ``config``,
    set up as every measurement needs it: the probe's timeout governs (obstore's own
    30 s is lifted), no retries inside obstore (storeprobe retries each request itself,
    4 times at most as botocore's default, and counts them: :mod:`.obstore_retries`;
    obstore alone would retry 10 times for 3 minutes, uncounted), plain HTTP allowed for
    an ``http://`` endpoint, and no fsspec instance cache. ``client_options``: more of
    obstore's (``root_certificate``...); ``extra``: a ``credential_provider``."""
    from obstore.fsspec import FsspecStore

    options: dict[str, Any] = {"timeout": f"{CLIENT_TIMEOUT_S}s", **(client_options or {})}
    endpoint = config.get("endpoint") or config.get("base_url") or ""
    if str(endpoint).startswith("http://"):
        options["allow_http"] = True
    store_class: Any = FsspecStore  # its overloads do not know fsspec's instance-cache switch
    fs: fsspec.AbstractFileSystem = store_class(
        protocol,
        config=config,
        client_options=options,
        retry_config={"max_retries": 0, "retry_timeout": dt.timedelta(seconds=60)},
        skip_instance_cache=True,
        **extra,
    )
    return fs


class _Cloud(ObstoreBackend):
    """What GCS and Azure share: their names in errors, and a twin without conditions."""

    #: what the storage calls its top level, and a URL's form, in errors
    bucket_word = "bucket"
    url_form = "gs://BUCKET[/PREFIX]"

    def check_root(self, root: str) -> None:
        from obstore import list as list_objects

        def exists(bucket: str) -> None:
            store = self.fs._construct_store(bucket)  # built once, before any timed request
            self.retrier.run(lambda: next(iter(list_objects(store, chunk_size=1)), None))

        check_bucket(root, exists, self.bucket_word, self.url_form)

    def writer(self, path: str) -> ObstoreBackend:
        """This backend, or a twin of the same class putting without a condition."""
        found = super().writer(path)
        if found is self:
            return self
        return type(self)(
            self.fs, range_fallback=self.range_fallback, conditional=False, retrier=self.retrier
        )


class ObstoreGCSBackend(_Cloud):
    """obstore's GCS store (see the module docstring)."""

    name = "obstore"
    # as on S3 (XML multipart parts of at least 5 MiB), without S3's 5 GiB single-PUT limit
    # obstore deletes a list of paths on GCS one request each (10 at once): no bulk delete
    capabilities = attrs.evolve(
        ObstoreBackend.capabilities, max_single_put=None, deletes_per_request=1
    )


class ObstoreAzureBackend(_Cloud):
    """obstore's Azure store (see the module docstring)."""

    name = "obstore"
    capabilities = attrs.evolve(
        ObstoreBackend.capabilities,
        multipart_create=False,  # Put Block × N, then Put Block List
        min_part_size=1 * MiB,
        max_single_put=5000 * MiB,  # Put Blob's limit
        # obstore would send Blob Batch requests (256 names each): not checked against
        # Azurite here, so one DELETE per name
        deletes_per_request=1,
    )
    bucket_word = "container"
    url_form = "abfs://CONTAINER[/PREFIX]"

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        found = super().listing(request, body, into, clock)
        return AsyncJob(Kind.LIST, _pages_of(found, 5000), found.inner)

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        found = super().put(request, body, into, clock)
        if request.part_size is None:
            return found
        return AsyncJob(Kind.PUT, _without_create(found), found.inner)


def _pages_of(job: AsyncJob, page: int) -> AsyncCall:
    """The listing ``job``, its requests counted at ``page`` keys a page."""

    async def listing() -> Outcome:
        outcome = await job.call()
        return outcome._replace(wire=((Kind.LIST, max(1, -(-outcome.size // page))),))

    return listing


def _without_create(job: AsyncJob) -> AsyncCall:
    """obstore's multipart ``job``, counted as Azure makes it: blocks, then the list."""

    async def put() -> Outcome:
        outcome = await job.call()
        wire = tuple(each for each in outcome.wire if each[0] is not Kind.CREATE_MULTIPART)
        return outcome._replace(wire=wire)

    return put
