"""The timing engine: run planned requests with at most N in flight and time each one.

A :class:`Plan` is a list of phases run one after the other (an S3 multipart upload is
create → parts → complete); each phase is a list of jobs, and each job performs exactly
one request and returns the payload bytes it moved. The engine starts at most
``streams`` jobs at once, records ``(start_ns, end_ns, nbytes)`` for every job from an
injectable nanosecond clock, and stops launching new jobs after the first failure.

Jobs of an asynchronous fsspec filesystem are coroutine functions driven on the
filesystem's own event loop; jobs of a synchronous filesystem are plain callables
driven by a thread pool.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from attrs import field, frozen

__all__ = ["AsyncJob", "Clock", "Plan", "SyncJob", "Timings", "run_async", "run_sync"]

Clock = Callable[[], int]
#: a job returns the payload bytes it moved, or (bytes, clock ns of its first byte)
AsyncJob = Callable[[], Awaitable[int | tuple[int, int]]]
SyncJob = Callable[[], int | tuple[int, int]]


@frozen(kw_only=True)
class Plan:
    """Phases of jobs for one timed window; ``on_failure`` runs (untimed) after an error."""

    phases: tuple[tuple[Any, ...], ...]
    on_failure: tuple[Callable[[], Any], ...] = ()
    #: requests one job keeps in flight by itself (a backend's own multipart upload)
    inner_streams: int = 1
    #: index of the phase holding one job per part, in part order (a split upload)
    part_phase: int | None = None

    @property
    def requests(self) -> int:
        """Number of requests the plan makes."""
        return sum(len(phase) for phase in self.phases)


@frozen(kw_only=True)
class Timings:
    """Start, end (clock nanoseconds) and payload bytes of every request, in completion order."""

    start_ns: np.ndarray = field(eq=False)
    end_ns: np.ndarray = field(eq=False)
    nbytes: np.ndarray = field(eq=False)
    #: which worker (stream) made each request, 0 .. streams-1
    worker: np.ndarray = field(eq=False)
    #: time to first byte of each request in ns (-1 where the backend cannot tell)
    ttfb_ns: np.ndarray = field(eq=False)
    max_in_flight: int
    #: CPU time (user + system) this process spent from first start to last end, in ns
    cpu_ns: int = 0

    @classmethod
    def from_records(
        cls, records: Sequence[tuple[int, int, int, int, int]], max_in_flight: int, cpu_ns: int = 0
    ) -> Timings:
        array = np.asarray(records, dtype=np.int64).reshape(-1, 5)
        return cls(
            start_ns=array[:, 0].copy(),
            end_ns=array[:, 1].copy(),
            nbytes=array[:, 2].copy(),
            worker=array[:, 3].copy(),
            ttfb_ns=array[:, 4].copy(),
            max_in_flight=max_in_flight,
            cpu_ns=cpu_ns,
        )


class _Tracker:
    """Records request timings and the largest number of requests in flight at once."""

    def __init__(self, clock: Clock, progress: Callable[[int], None] | None = None) -> None:
        self.clock = clock
        self.progress = progress
        self.records: list[tuple[int, int, int, int, int]] = []
        self.cpu_start = time.process_time_ns()
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    def begin(self) -> int:
        with self.lock:
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
        return self.clock()

    def end(self, start: int, outcome: int | tuple[int, int], worker: int = 0) -> None:
        """Record a finished request; ``outcome`` is bytes, or (bytes, first-byte clock ns)."""
        end = self.clock()
        if isinstance(outcome, tuple):
            nbytes, first_byte = outcome
            ttfb = first_byte - start
        else:
            nbytes, ttfb = outcome, -1
        self.records.append((start, end, nbytes, worker, ttfb))  # atomic under the GIL
        with self.lock:
            self.in_flight -= 1
        if self.progress is not None and nbytes:
            self.progress(nbytes)

    def timings(self) -> Timings:
        cpu = time.process_time_ns() - self.cpu_start
        return Timings.from_records(self.records, self.max_in_flight, cpu)

    def abandon(self) -> None:
        with self.lock:
            self.in_flight -= 1


async def _run_phase_async(
    jobs: Sequence[AsyncJob], streams: int, tracker: _Tracker, timeout: float | None
) -> None:
    """Run ``jobs`` on ≤ ``streams`` workers; a request running ``timeout`` s is cancelled.

    The deadline is kept by one watchdog task per phase rather than a timer per request:
    ``asyncio.timeout``/``wait_for`` cost 6–25 µs per request here, the watchdog's bookkeeping
    well under one. It wakes every ``timeout / 20`` s (at most every second), so a request
    is cancelled between ``timeout`` and ``1.05 × timeout`` seconds after it started.
    """
    queue: Iterator[AsyncJob] = iter(jobs)
    loop = asyncio.get_running_loop()
    workers = min(streams, len(jobs))
    began: list[float | None] = [None] * workers  # loop time the current request started
    expired: set[int] = set()

    async def worker(number: int) -> None:
        for job in queue:
            start = tracker.begin()
            began[number] = loop.time()
            try:
                nbytes = await job()
            except asyncio.CancelledError:
                tracker.abandon()
                if number in expired:
                    raise TimeoutError(f"a request got no answer within {timeout:g} s") from None
                raise
            except BaseException:
                tracker.abandon()
                raise
            began[number] = None
            tracker.end(start, nbytes, number)

    tasks = [asyncio.ensure_future(worker(n)) for n in range(workers)]

    async def watchdog(limit: float) -> None:
        period = min(limit / 20, 1.0)
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for number, since in enumerate(began):
                if since is not None and now - since >= limit and number not in expired:
                    expired.add(number)
                    tasks[number].cancel()

    guard = asyncio.ensure_future(watchdog(timeout)) if timeout is not None else None
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if guard is not None:
            guard.cancel()
            await asyncio.gather(guard, return_exceptions=True)


async def run_async(
    plan: Plan,
    streams: int,
    clock: Clock,
    timeout: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> Timings:
    """Run ``plan`` (coroutine jobs) on the running loop with ≤ ``streams`` in flight.

    ``progress`` is called with the payload bytes of each request as it completes.
    """
    tracker = _Tracker(clock, progress)
    for phase in plan.phases:
        await _run_phase_async(phase, streams, tracker, timeout)
    return tracker.timings()


def _run_phase_sync(jobs: Sequence[SyncJob], streams: int, tracker: _Tracker) -> None:
    queue = iter(jobs)
    queue_lock = threading.Lock()
    failed = threading.Event()

    def worker(number: int = 0) -> None:
        while not failed.is_set():
            with queue_lock:
                job = next(queue, None)
            if job is None:
                return
            start = tracker.begin()
            try:
                nbytes = job()
            except BaseException:
                tracker.abandon()
                failed.set()
                raise
            tracker.end(start, nbytes, number)

    workers = min(streams, len(jobs))
    if workers == 1:
        worker()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="storeprobe") as pool:
        futures = [pool.submit(worker, n) for n in range(workers)]
    errors = [future.exception() for future in futures if future.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]


def run_sync(
    plan: Plan, streams: int, clock: Clock, progress: Callable[[int], None] | None = None
) -> Timings:
    """Run ``plan`` (plain callables) in a thread pool with ≤ ``streams`` in flight."""
    tracker = _Tracker(clock, progress)
    for phase in plan.phases:
        _run_phase_sync(phase, streams, tracker)
    return tracker.timings()
