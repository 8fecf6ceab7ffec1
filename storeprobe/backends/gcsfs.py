"""gcsfs: one upload request per object, ranged GETs, create-only writes.

A resumable upload sends its chunks in order, so gcsfs cannot split one object's upload:
such an upload is one request and the Result says so. Writes use ``mode="create"``
(``ifGenerationMatch=0``); reads ask for one connection (``concurrency=1``).
"""

from __future__ import annotations

from storeprobe.backends.base import Capabilities, Landing, check_bucket
from storeprobe.backends.fsspec import FsspecAsyncBackend
from storeprobe.request import AsyncJob, Body, Kind, Outcome, Request
from storeprobe.transfer import Clock

__all__ = ["GCSBackend"]


class GCSBackend(FsspecAsyncBackend):
    """gcsfs (see the module docstring)."""

    name = "gcsfs"
    protocols = ("gs", "gcs")
    extra = "gcs"
    capabilities = Capabilities()

    def check_root(self, root: str) -> None:
        check_bucket(root, self.fs.info, "bucket", "gs://BUCKET[/PREFIX]")

    def make_prefix(self, prefix: str) -> None:
        return None

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()

    def job(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        if request.kind is Kind.GET and request.start is None:
            fs, path = self.fs, request.key

            async def get() -> Outcome:
                data = await fs._cat_file(path, concurrency=1)
                return Outcome(received=len(data), data=data)

            return AsyncJob(Kind.GET, get)
        return super().job(request, body, into, clock)
