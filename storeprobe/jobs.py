"""Job wrappers the measurement puts around a backend's jobs, outside the backend.

Each takes a job and its position in the plan and returns a job of the same kind; a
:class:`Wrapper` holds the asynchronous and the synchronous form of one:

- :func:`settling` runs a :data:`Settle` step after the call: a staged upload's part has
  its pages unmapped; a staged download's range is written into the staging file and
  its data dropped (:func:`release_parts`, :func:`land_ranges`);
- :func:`tolerating` (:func:`tolerant_async`, :func:`tolerant_sync`) records a failure
  instead of raising it (cleanup goes on after one delete failed) and skips the rest
  once the storage is unreachable;
- :data:`ABSENT` (:func:`absent_async`, :func:`absent_sync`) turns a HEAD into a check
  that the name does not exist (a storage without conditional writes);
- :data:`EXISTENCE` (:func:`exists_async`, :func:`exists_sync`) turns a HEAD or LIST of
  a missing name into an answer (size -1) instead of an error (a backup's existence
  checks).

:func:`positioned` applies a wrapper to every job of a plan's phases.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

from attrs import frozen

from storeprobe.planning import Plan
from storeprobe.request import AsyncJob, Kind, Outcome, SyncJob
from storeprobe.staging import Staging

__all__ = [
    "ABSENT",
    "EXISTENCE",
    "Settle",
    "Wrapper",
    "absent_async",
    "absent_sync",
    "exists_async",
    "exists_sync",
    "is_missing",
    "land_ranges",
    "positioned",
    "release_parts",
    "settling",
    "tolerant_async",
    "tolerant_sync",
    "tolerating",
]

#: called after a job with its plan position and outcome; returns the outcome to keep
Settle = Callable[[int, Outcome], Outcome]


def is_missing(exc: BaseException) -> bool:
    names = {klass.__name__ for klass in type(exc).__mro__}
    return isinstance(exc, FileNotFoundError) or "NotFoundError" in names


@contextlib.contextmanager
def _absent(position: int) -> Iterator[None]:
    """The check of :data:`ABSENT` around the request: a "missing" failure is the
    answer wanted (swallowed), any other failure is raised, and a success means the
    name exists (FileExistsError)."""
    try:
        yield
    except Exception as exc:
        if is_missing(exc):
            return
        raise
    raise FileExistsError(f"object {position} of this repeat already exists")


def absent_async(job: AsyncJob, position: int) -> AsyncJob:
    call = job.call

    async def absent() -> Outcome:
        with _absent(position):
            await call()
        return Outcome()

    return AsyncJob(job.kind, absent)


def absent_sync(job: SyncJob, position: int) -> SyncJob:
    call = job.call

    def absent() -> Outcome:
        with _absent(position):
            call()
        return Outcome()

    return SyncJob(job.kind, absent)


def release_parts(plan: Plan, staging: Staging) -> Settle:
    """After each part of a staged upload: unmap its pages (the file keeps them)."""
    requests = plan.requests

    def settle(position: int, outcome: Outcome) -> Outcome:
        request = requests[position]
        if request.kind is Kind.PUT_PART and request.start is not None and request.stop is not None:
            staging.release(request.start, request.stop)
        return outcome

    return settle


def land_ranges(plan: Plan, staging: Staging) -> Settle:
    """After each range of a staged download: its bytes in the file, its pages unmapped.

    A client that returned its own buffer instead of filling the staged view has it
    copied into the file; the outcome keeps no data (verification reads the file).
    """
    requests = plan.requests
    mapping = staging.view.obj

    def settle(position: int, outcome: Outcome) -> Outcome:
        request = requests[position]
        start = request.start or 0
        stop = request.stop if request.stop is not None else staging.size
        data = outcome.data
        if data is not None and not (isinstance(data, memoryview) and data.obj is mapping):
            size = min(len(data), stop - start)
            staging.view[start : start + size] = memoryview(data)[:size]
        staging.release(start, stop)
        return outcome._replace(data=None)

    return settle


_J = TypeVar("_J", AsyncJob, SyncJob)


def positioned(
    phases: tuple[tuple[_J, ...], ...], wrap: Callable[[_J, int], _J]
) -> tuple[tuple[_J, ...], ...]:
    result: list[tuple[_J, ...]] = []
    position = 0
    for phase in phases:
        wrapped: list[_J] = []
        for job in phase:
            wrapped.append(wrap(job, position))
            position += 1
        result.append(tuple(wrapped))
    return tuple(result)


def tolerant_async(
    job: AsyncJob,
    position: int,
    tolerate: Callable[[int, BaseException | None], bool],
    timeout: float | None,
) -> AsyncJob:
    """``job`` asking ``tolerate(position, None)`` first (False: skip it), and handing
    any failure to ``tolerate(position, exc)`` instead of raising; bounded by ``timeout``."""
    call = job.call

    async def tolerant() -> Outcome:
        if not tolerate(position, None):
            return Outcome()
        try:
            await asyncio.wait_for(call(), timeout)
        except Exception as exc:
            tolerate(position, exc)
        return Outcome()

    return AsyncJob(job.kind, tolerant)


def tolerant_sync(
    job: SyncJob, position: int, tolerate: Callable[[int, BaseException | None], bool]
) -> SyncJob:
    """The callable form of :func:`tolerant_async`."""
    call = job.call

    def tolerant() -> Outcome:
        if not tolerate(position, None):
            return Outcome()
        try:
            call()
        except Exception as exc:
            tolerate(position, exc)
        return Outcome()

    return SyncJob(job.kind, tolerant)


@frozen
class Wrapper:
    """One wrapper in both forms: for coroutine jobs and for callable jobs."""

    for_async: Callable[[AsyncJob, int], AsyncJob]
    for_sync: Callable[[SyncJob, int], SyncJob]


#: HEAD jobs that succeed when the name does not exist, and fail when it does
ABSENT = Wrapper(absent_async, absent_sync)


def settling(settle: Settle) -> Wrapper:
    """Jobs followed by ``settle`` (see :func:`release_parts`, :func:`land_ranges`)."""

    def for_async(job: AsyncJob, position: int) -> AsyncJob:
        call = job.call

        async def settled() -> Outcome:
            return settle(position, await call())

        return AsyncJob(job.kind, settled, job.inner)

    def for_sync(job: SyncJob, position: int) -> SyncJob:
        call = job.call
        return SyncJob(job.kind, lambda: settle(position, call()), job.inner)

    return Wrapper(for_async, for_sync)


def tolerating(
    tolerate: Callable[[int, BaseException | None], bool], timeout: float | None
) -> Wrapper:
    """Jobs whose failures go to ``tolerate`` (see :func:`tolerant_async`)."""
    return Wrapper(
        lambda job, position: tolerant_async(job, position, tolerate, timeout),
        lambda job, position: tolerant_sync(job, position, tolerate),
    )


def exists_async(job: AsyncJob, position: int) -> AsyncJob:
    call = job.call

    async def exists() -> Outcome:
        try:
            return await call()
        except Exception as exc:
            if is_missing(exc):
                return Outcome(size=-1)
            raise

    return AsyncJob(job.kind, exists)


def exists_sync(job: SyncJob, position: int) -> SyncJob:
    call = job.call

    def exists() -> Outcome:
        try:
            return call()
        except Exception as exc:
            if is_missing(exc):
                return Outcome(size=-1)
            raise

    return SyncJob(job.kind, exists)


#: HEADs answer ``size=-1`` for a missing object, LISTs of a missing prefix -1 entries
EXISTENCE = Wrapper(exists_async, exists_sync)
