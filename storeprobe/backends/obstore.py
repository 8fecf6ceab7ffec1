"""obstore's fsspec store (``obstore.fsspec.FsspecStore``), through its object store.

Its ``_pipe_file`` would upload anything above 5 MB as a multipart upload with 12 parts
in flight, so storeprobe calls the store itself: ``use_multipart=False`` for one
request, or ``use_multipart=True`` with ``max_concurrency=streams`` to split one object
(the parts run inside obstore, and the outcome counts them). The store is built once
before the timed window: concurrent first calls have been seen to fail inside its
constructor.

obstore refuses a ranged GET answered with ``200 OK`` (``rclone serve s3`` sends the
right bytes with 200 and a Content-Range). :meth:`ObstoreBackend.range_reader` checks
once, untimed, and names the backend that reads ranges: this one, or s3fs for the same
storage when ``range_fallback`` can build it.

obstore sends a single PUT's body only from memory (``use_multipart=False`` reads the
whole input first), so a staged object is uploaded through its multipart upload, parts
read from the staged file (one at a time at one stream; see :mod:`storeprobe.planning`).
A staged object's single GET is streamed: each chunk of ``staging.CHUNK`` bytes is written
into the staging file as it arrives, and dropped.
In a backup scenario's window, the bodies are slices of one buffer
(:func:`~storeprobe.backends.base.sliced_bodies`) and each whole-object GET streams into
its slice of one buffer made before the window, 64 KiB chunks at a time: a window of
many small objects allocates once instead of once per object in obstore's threads.

obstore's own retries leave no trace, so its stores retry nothing and storeprobe retries
each request itself, with obstore's policy, counting every retry
(:mod:`.obstore_retries`; ``Sample.retries``, the ``retried`` notice).

At interpreter exit, :func:`wait_for_foreign_threads` (registered with :mod:`atexit`) lets
obstore's threads finish handing over results before the interpreter finalizes: without
it a short script ends with SIGABRT now and then, after all its work is done.

Why one module (~490 lines): one backend class with a hook for every request kind it
makes and the exit guard only obstore needs; the stores it builds and its retry policy
are :mod:`.obstore_stores` and :mod:`.obstore_retries`.
"""

from __future__ import annotations

import atexit
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import fsspec

from storeprobe.arena import Arena
from storeprobe.backends.attempts import Attempts
from storeprobe.backends.base import (
    AsyncBackend,
    AsyncBound,
    Backend,
    Capabilities,
    Classified,
    Landing,
    check_bucket,
    sliced_bodies,
    sliced_landings,
    source_of,
)
from storeprobe.backends.bulk_delete import KeysNotDeletedError, refused_in
from storeprobe.backends.obstore_retries import Retrier
from storeprobe.backends.registry import ClientSpec
from storeprobe.errors import TargetNotFoundError, TargetPermissionError
from storeprobe.request import AsyncJob, Body, Kind, Outcome, Part, Payloads, Request, StagedFile
from storeprobe.staging import CHUNK, Staging
from storeprobe.transfer import Clock
from storeprobe.units import GiB, KiB, MiB

__all__ = ["SPEC", "ObstoreBackend", "RangesRefusedError", "wait_for_foreign_threads"]


#: the least bytes obstore gathers before handing a chunk of a read landing in a
#: window's buffer to Python (its buffers stay small: a chunk is copied and dropped)
_LANDING_CHUNK = 64 * KiB
#: keys in one page of an S3 listing (ListObjectsV2's maximum and default)
_S3_PAGE = 1000
#: keys one S3 DeleteObjects request may name: obstore's own batch for a list of paths
_DELETE_OBJECTS_KEYS = 1000


class RangesRefusedError(OSError):
    """The server answers ranged GETs with 200, which obstore refuses, and no fallback exists."""


class ObstoreBackend(AsyncBackend):
    """obstore (see the module docstring)."""

    name = "obstore"
    capabilities = Capabilities(
        splits_uploads=True,
        client_multipart=True,
        checks_conditional_writes=True,
        min_part_size=5 * MiB,
        max_single_put=5 * GiB,
        confirms_size=True,
        lands_in_file=True,
        counts_retries=True,
        deletes_per_request=_DELETE_OBJECTS_KEYS,
    )

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        *,
        range_fallback: Callable[[], AsyncBackend] | None = None,
        conditional: bool = True,
        retrier: Retrier | None = None,
    ) -> None:
        super().__init__(fs)
        #: retries every request (obstore's stores retry nothing) and counts the retries
        self.retrier = Retrier() if retrier is None else retrier
        #: puts are create-only (``mode="create"``: If-None-Match); see :meth:`writer`
        self.conditional = conditional
        #: builds an s3fs backend for the same storage, for servers whose ranged GETs
        #: obstore refuses (None: no fallback)
        self.range_fallback = range_fallback

    def attempts_seen(self) -> Attempts | None:
        return self.retrier.tally.seen()

    def bind(
        self,
        phases: Sequence[Sequence[Request]],
        bodies: Sequence[Body | None],
        landings: Sequence[Landing],
        clock: Clock,
    ) -> AsyncBound:
        """The jobs of :meth:`job`, each retried by :attr:`retrier`."""
        bound = super().bind(phases, bodies, landings, clock)
        wrap = self.retrier.wrap
        # a create-only PUT is the one request object_store does not count idempotent
        once = Kind.PUT if self.conditional else None
        return attrs.evolve(
            bound,
            phases=tuple(
                tuple(
                    job._replace(
                        call=wrap(
                            job.call, idempotent=job.kind is not once, read=job.kind is Kind.GET
                        )
                    )
                    for job in phase
                )
                for phase in bound.phases
            ),
        )

    def _store(self, path: str) -> tuple[Any, str]:
        bucket, key = self.fs._split_path(path)
        return self.fs._construct_store(bucket), key

    def check_root(self, root: str) -> None:
        from obstore import list as list_objects

        def exists(bucket: str) -> None:
            store = self.fs._construct_store(bucket)  # built once, before any timed request
            self.retrier.run(lambda: next(iter(list_objects(store, chunk_size=1)), None))

        check_bucket(root, exists, "bucket", "s3://BUCKET[/PREFIX]")

    def make_prefix(self, prefix: str) -> None:
        return None

    def listed(self, prefix: str) -> dict[str, int]:
        """One ListObjectsV2 a thousand keys (fsspec's ``find`` of an emptied prefix adds a
        HEAD and a listing with a delimiter: three round trips where one will do)."""
        from obstore import list as list_objects

        bucket, key = self.fs._split_path(prefix)
        store = self.fs._construct_store(bucket)
        inside = key.rstrip("/") + "/"

        def listing() -> dict[str, int]:
            return {
                f"{bucket}/{meta['path']}": int(meta["size"])
                for chunk in list_objects(store, prefix=inside)
                for meta in chunk
            }

        return self.retrier.run(listing)

    def remove_prefix(self, prefix: str) -> None:
        self.fs.invalidate_cache()

    def classify(self, exc: BaseException) -> Classified | None:
        """By obstore's exception classes."""
        names = {klass.__name__ for klass in type(exc).__mro__}
        if "NotFoundError" in names:
            return TargetNotFoundError, "check the bucket and path exist"
        if names & {"PermissionDeniedError", "UnauthenticatedError"}:
            return TargetPermissionError, "check the credentials and their permissions"
        return None

    def body(self, workload: Payloads, part: Part) -> Body:
        return workload.payload_bytes(part.index, part.start, part.stop)

    def bodies(
        self, workload: Payloads, parts: Sequence[Part], arena: Arena | None = None
    ) -> list[Body]:
        # a scenario's window: slices of one buffer (obstore sends from a view)
        return sliced_bodies(workload, parts, arena)

    def landings(self, sizes: Sequence[int], arena: Arena | None = None) -> list[Landing]:
        # a scenario's window of reads: each streamed into its slice of one buffer
        return sliced_landings(sizes, arena)

    def writer(self, path: str) -> ObstoreBackend:
        """This backend, or a twin putting without If-None-Match if the storage refuses it.

        One conditional PUT of an empty object at ``path`` (untimed), deleted after."""
        from obstore import delete, put

        store, key = self._store(path)
        try:
            self.retrier.run(lambda: put(store, key, b"", mode="create"), idempotent=False)
        except Exception as exc:
            # obstore's errors carry no code or status (a GenericError): its message is
            # all there is to read (s3fs's refusal is read from codes instead)
            text = str(exc)
            if "NotImplemented" not in text and "501" not in text:
                raise
            return ObstoreBackend(
                self.fs,
                range_fallback=self.range_fallback,
                conditional=False,
                retrier=self.retrier,
            )
        self.retrier.run(lambda: delete(store, key))
        return self

    def range_reader(self, path: str) -> AsyncBackend:
        """The backend that reads byte ranges of this storage, checked once with one
        untimed 1-byte ranged GET of ``path``: this one, or the s3fs fallback."""
        store, key = self._store(path)
        from obstore import get_range

        try:
            self.retrier.run(lambda: get_range(store, key, start=0, end=1))
        except Exception as exc:
            if "non-partial response" not in str(exc):  # obstore's message; no code
                raise
            if self.range_fallback is None:
                raise RangesRefusedError(
                    "this server answers ranged GETs with 200 instead of 206 Partial Content, "
                    "which obstore refuses: download one object with streams=1, or open the "
                    "URL with client='s3fs'"
                ) from None
            return self.range_fallback()
        return self

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        store, key = self._store(request.key)
        if request.part_size is not None:
            return self._multipart(store, key, request, body)
        if not isinstance(body, bytes | bytearray | memoryview):
            raise TypeError(f"obstore puts bytes here, not {type(body).__name__}")
        data = body
        mode = "create" if self.conditional else "overwrite"

        async def put() -> Outcome:
            await store.put_async(key, data, use_multipart=False, mode=mode)
            return Outcome(sent=len(data))

        return AsyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        store, key = self._store(request.key)
        if request.start is not None and request.stop is not None:
            start, stop = request.start, request.stop

            staged = into if isinstance(into, Staging) else None

            async def get_range() -> Outcome:
                data = await store.get_range_async(key, start=start, end=stop)
                if staged is not None:  # a staged range: in the file, its buffer let go
                    return Outcome(received=staged.write(0, data))
                return Outcome(received=len(data), data=data)

            return AsyncJob(Kind.GET, get_range)
        if isinstance(into, Staging):
            staging = into

            async def get_staged() -> Outcome:
                response = await store.get_async(key)
                first_byte = clock()
                received = 0
                async for chunk in response.stream(min_chunk_size=CHUNK):
                    received += staging.write(received, chunk)
                return Outcome(received=received, first_byte_ns=first_byte)

            return AsyncJob(Kind.GET, get_staged)

        if isinstance(into, memoryview):
            view = into

            async def get_into() -> Outcome:
                # a scenario's read: its chunks copied into the window's buffer as they
                # arrive (as bytes_async joins them into one), and dropped
                response = await store.get_async(key)
                first_byte = clock()
                filled, extra = 0, list[bytes]()
                async for chunk in response.stream(min_chunk_size=_LANDING_CHUNK):
                    if extra or filled + len(chunk) > len(view):  # more than was written
                        extra.append(bytes(chunk))
                        continue
                    view[filled : filled + len(chunk)] = chunk
                    filled += len(chunk)
                data = bytes(view[:filled]) + b"".join(extra) if extra else view[:filled]
                return Outcome(received=len(data), first_byte_ns=first_byte, data=data)

            return AsyncJob(Kind.GET, get_into)

        async def get() -> Outcome:
            response = await store.get_async(key)
            first_byte = clock()
            data = await response.bytes_async()  # Rust-owned buffer: no copy in Python
            return Outcome(received=len(data), first_byte_ns=first_byte, data=data)

        return AsyncJob(Kind.GET, get)

    def head(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        store, key = self._store(request.key)

        async def head() -> Outcome:
            meta = await store.head_async(key)
            return Outcome(size=int(meta["size"]))

        return AsyncJob(Kind.HEAD, head)

    def listing(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        store, key = self._store(request.key)
        if request.one_level:
            folder = key.rstrip("/") + "/" if key else None

            async def listing_level() -> Outcome:
                from obstore import list_with_delimiter_async

                level = await list_with_delimiter_async(store, folder)
                found = len(level["objects"]) + len(level["common_prefixes"])
                # as below: S3 answers at most 1000 entries a page
                pages = max(1, -(-found // _S3_PAGE))
                return Outcome(size=found, wire=((Kind.LIST, pages),))

            return AsyncJob(Kind.LIST, listing_level)

        async def listing() -> Outcome:
            from obstore import list as list_objects

            found = 0
            async for chunk in list_objects(store, prefix=key):
                found += len(chunk)
            # obstore pages by itself and does not say how often: S3 answers at most
            # 1000 keys a page, so a listing of n keys made ceil(n / 1000) requests
            pages = max(1, -(-found // _S3_PAGE))
            return Outcome(size=found, wire=((Kind.LIST, pages),))

        return AsyncJob(Kind.LIST, listing)

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        store, key = self._store(request.key)
        if request.keys:
            named = {self._store(name)[1]: name for name in request.keys}
            keys = list(named)

            async def delete_objects() -> Outcome:
                # a list of ≤ 1000 paths is one DeleteObjects request on S3. obstore
                # raises one error for any key refused, whose text holds the answer: the
                # keys it names become KeysNotDeletedError; any other failure goes on
                # (the caller then deletes these names one by one: storeprobe.execution)
                from obstore import delete_async

                try:
                    await delete_async(store, keys)
                except Exception as exc:
                    refused = refused_in(str(exc))
                    if not refused:
                        raise
                    failed = KeysNotDeletedError.of(refused, named)
                    if failed is not None:
                        raise failed from exc
                    # every key it names was already gone: all deleted
                return Outcome()

            return AsyncJob(Kind.DELETE, delete_objects)

        async def delete() -> Outcome:
            await store.delete_async(key)
            return Outcome()

        return AsyncJob(Kind.DELETE, delete)

    def copy(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> AsyncJob:
        store, key = self._store(request.key)
        source = self._store(source_of(self.name, request))[1]

        async def copy() -> Outcome:
            await store.copy_async(source, key, overwrite=True)
            return Outcome()

        return AsyncJob(Kind.COPY, copy)

    def _multipart(self, store: Any, key: str, request: Request, body: Body | None) -> AsyncJob:
        """One put that obstore splits into parts of ``request.part_size`` by itself."""
        part_size = request.part_size or 1
        data: Any = body.path if isinstance(body, StagedFile) else body
        size = body.size if isinstance(body, StagedFile) else len(data)
        parts = math.ceil(size / part_size)
        concurrency = min(request.concurrency, parts)
        wire = (
            (Kind.CREATE_MULTIPART, 1),
            (Kind.PUT_PART, parts),
            (Kind.COMPLETE_MULTIPART, 1),
        )

        async def put() -> Outcome:
            await store.put_async(
                key, data, use_multipart=True, chunk_size=part_size, max_concurrency=concurrency
            )
            return Outcome(sent=size, wire=wire)

        return AsyncJob(Kind.PUT, put, concurrency)


def is_obstore(backend: Backend) -> bool:
    """True for an obstore backend (its ranged reads may need a fallback)."""
    return isinstance(backend, ObstoreBackend)


#: the longest interpreter exit waits for threads foreign to :mod:`threading` to leave Python
EXIT_GRACE_S = 2.0


def wait_for_foreign_threads(grace: float = EXIT_GRACE_S) -> bool:
    """Wait, at most ``grace`` seconds, until no thread foreign to :mod:`threading` is
    running Python code; True if none is (any more).

    Registered with :mod:`atexit`, so it runs while the interpreter is still whole. obstore
    hands each result of an ``*_async`` call to the event loop from one of its tokio threads
    (pyo3-async-runtimes), with ``loop.call_soon_threadsafe``: the callback is queued
    *before* the wake-up byte is written, and ``socket.send`` releases the GIL. So the loop
    may already have run the callback, the probe returned and the script ended while that
    thread still waits to take the GIL back. Once ``Py_FinalizeEx`` has begun, CPython ends
    such a thread with ``pthread_exit``, whose forced unwinding cannot cross the Rust frames
    below it: ``abort()``, exit status -6 with nothing on stderr (4 runs in 100 of
    ``examples/s3_streams.py`` on a loaded machine; the core shows the tokio thread in
    ``asyncio``'s ``_write_to_self``, the main thread in ``Py_FinalizeEx``). Sleeping here
    hands the GIL over, so such a thread returns to Rust before finalization starts.

    Such a thread runs Python only between taking the GIL and handing back a result, so a
    thread with a Python frame that :mod:`threading` did not start (its stand-ins for
    foreign threads count as foreign) is one to wait for; threads that wait for an answer
    hold no frame. Not covered: a result whose awaiting was cancelled (a timeout) is
    handed over later, by a thread without a Python frame until then. Upstream:
    https://github.com/PyO3/pyo3-async-runtimes/issues/40 (no shutdown of the runtime at
    exit); the same race elsewhere:
    https://github.com/moq-dev/moq/pull/3766, https://github.com/lancedb/lancedb/pull/4175;
    CPython documents the thread termination: https://github.com/python/cpython/pull/12820.
    """
    me = threading.get_ident()
    deadline = time.monotonic() + grace
    while True:
        started = {
            thread.ident
            for thread in threading.enumerate()
            if not isinstance(thread, threading._DummyThread)
        }
        if all(ident == me or ident in started for ident in sys._current_frames()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)  # releases the GIL


atexit.register(wait_for_foreign_threads)


#: obstore, through its fsspec store (S3 here; GCS and Azure in :mod:`.obstore_stores`):
#: the default for ``s3://`` and Azure, chosen by :mod:`.client_choice`. Its errors come
#: as classes of its own, with no code (see :meth:`ObstoreBackend.classify`).
SPEC = ClientSpec(
    name="obstore",
    backend=ObstoreBackend,
    modules=("obstore",),
    protocols=("s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"),
    extra="obstore",
    default_for=("s3", "s3a", "abfs", "abfss", "az"),
)
