"""A bare obstore loop: the requests storeprobe's window sends, and nothing around them.

What the latency accuracy tests (``tests/test_accuracy.py``) and ``benchmarks/latency.py``
compare storeprobe with. For ``n`` objects of one size it sends, inside one timed window,
the requests storeprobe sends for them: create-only PUTs (``mode="create"``, storeprobe's
``If-None-Match: *``) of whole objects in one request each, or whole-object GETs whose
bodies are read into memory; one after another at one stream, ``streams`` at once on an
asyncio semaphore otherwise, in an event loop started before the window. Before a
download's window (untimed) the objects are uploaded and each is asked for once (HEAD,
as storeprobe confirms sizes: ``rclone serve s3`` hashes an object on its first access);
before an upload's, one listing opens a connection (storeprobe's bucket check does).
Every object is deleted after.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from attrs import frozen

from tests.servers import S3_KEY, S3_SECRET

__all__ = ["BareObstore", "Window"]

Operation = Literal["upload", "download"]
#: requests in flight for the untimed uploads, HEADs and deletes around a window
_PREP = 32


@frozen(kw_only=True)
class Window:
    """One timed window: its length and each request's latency, in seconds."""

    seconds: float
    latencies: tuple[float, ...]


class BareObstore:
    """obstore's ``S3Store`` on ``endpoint`` (bucket ``bench``); ``ca``: a PEM CA to trust."""

    def __init__(self, endpoint: str, *, ca: Path | None = None, bucket: str = "bench") -> None:
        from obstore.store import S3Store

        options: Any = {}  # obstore's ClientConfig, a TypedDict
        if endpoint.startswith("http://"):
            options["allow_http"] = True
        if ca is not None:
            options["root_certificate"] = ca.read_text()
        self.store: Any = S3Store(
            bucket,
            config={
                "access_key_id": S3_KEY,
                "secret_access_key": S3_SECRET,
                "endpoint": endpoint,
                "region": "us-east-1",
            },
            client_options=options,
        )
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        self.loop.close()

    def _gather(self, calls: list[Any], streams: int) -> list[tuple[float, float]]:
        """Run the coroutine factories ``calls``, ``streams`` at once; each one's start
        and end (``time.perf_counter``)."""

        async def run() -> list[tuple[float, float]]:
            semaphore = asyncio.Semaphore(streams)

            async def one(call: Any) -> tuple[float, float]:
                async with semaphore:
                    start = time.perf_counter()
                    await call()
                    return start, time.perf_counter()

            if streams == 1:  # a plain loop: one request, then the next
                return [await one(call) for call in calls]
            return list(await asyncio.gather(*(one(call) for call in calls)))

        return self.loop.run_until_complete(run())

    def put_and_head(self, names: list[str], payloads: list[bytes]) -> None:
        """Untimed: write ``payloads`` to ``names`` and ask for each once (HEAD)."""
        store = self.store
        puts = [
            lambda n=n, b=b: store.put_async(n, b, use_multipart=False)
            for n, b in zip(names, payloads, strict=True)
        ]
        self._gather(puts, _PREP)
        self._gather([lambda n=n: store.head_async(n) for n in names], _PREP)

    def delete(self, names: list[str]) -> None:
        """Untimed: delete ``names``."""
        self._gather([lambda n=n: self.store.delete_async(n) for n in names], _PREP)

    def window(self, operation: Operation, payloads: list[bytes], streams: int = 1) -> Window:
        """Upload ``payloads`` to fresh names, or download them after an untimed upload,
        ``streams`` requests at once; the timed window and each request's latency."""
        store = self.store
        names = [f"bare-obstore-{uuid.uuid4().hex}/{i:07d}" for i in range(len(payloads))]

        async def get_one(name: str) -> None:
            response = await store.get_async(name)
            await response.bytes_async()

        calls: list[Any]
        try:
            if operation == "download":
                self.put_and_head(names, payloads)
                calls = [lambda n=n: get_one(n) for n in names]
            else:
                self._gather([lambda: store.list_with_delimiter_async(None)], 1)
                calls = [
                    lambda n=n, b=b: store.put_async(n, b, mode="create", use_multipart=False)
                    for n, b in zip(names, payloads, strict=True)
                ]
            spans = self._gather(calls, streams)
        finally:
            self.delete(names)
        # as storeprobe's: from the first request's start to the last one's end
        seconds = max(end for _, end in spans) - min(start for start, _ in spans)
        return Window(seconds=seconds, latencies=tuple(end - start for start, end in spans))
