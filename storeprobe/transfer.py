"""The timing engine: run a plan's jobs with at most N in flight and time each one.

A plan's jobs come in phases run one after the other (an S3 multipart upload is
create → parts → complete); the jobs of one phase may run concurrently. Each job makes
exactly one request (see :mod:`storeprobe.request`) and returns an :class:`Outcome`.
The engine starts at most ``streams`` jobs at once, records for every job its start and
end from an injectable nanosecond clock, the payload bytes sent and received, the
worker (stream) that ran it, its first-byte mark and its kind, keeps each outcome in
the plan's order, and stops launching new jobs after the first failure.

Inside the timed window the engine does its bookkeeping and, for progress, one integer
add on a :class:`Meter`; whoever draws progress reads the meter from another thread.

Jobs of an asynchronous client are coroutine functions driven on the client's event
loop (:func:`run_async`); jobs of a synchronous client are plain callables driven by a
thread pool (:func:`run_sync`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from attrs import field, frozen

from storeprobe.request import KINDS, AsyncJob, Outcome, SyncJob, kind_index

__all__ = ["Clock", "Meter", "Run", "Timings", "run_async", "run_sync"]

Clock = Callable[[], int]
_RECORD = 8  # start, end, sent, received, worker, first-byte mark, kind, position


class Meter:
    """Payload bytes done so far in the current window: the engine adds, a drawer reads.

    ``total`` is set before the window; ``done`` grows by one integer add per request.
    """

    __slots__ = ("done", "total")

    def __init__(self) -> None:
        self.done = 0
        self.total = 0

    def reset(self, total: int) -> None:
        """Start a new window of ``total`` bytes (outside the window)."""
        self.total = total
        self.done = 0


@frozen(kw_only=True)
class Timings:
    """Per-request records of one window, in completion order (clock nanoseconds, bytes)."""

    start_ns: np.ndarray = field(eq=False)
    end_ns: np.ndarray = field(eq=False)
    #: payload bytes each request sent
    sent: np.ndarray = field(eq=False)
    #: payload bytes each request received
    received: np.ndarray = field(eq=False)
    #: which worker (stream) made each request, 0 .. streams-1
    worker: np.ndarray = field(eq=False)
    #: time to first byte of each request in ns (-1 where the client cannot tell)
    ttfb_ns: np.ndarray = field(eq=False)
    #: each request's kind, as its index in ``storeprobe.request.KINDS``
    kind: np.ndarray = field(eq=False)
    #: each request's position in its plan (phase after phase)
    position: np.ndarray = field(eq=False)
    max_in_flight: int
    #: CPU time (user + system) this process spent from first start to last end, in ns
    cpu_ns: int = 0

    @property
    def nbytes(self) -> np.ndarray:
        """Payload bytes each request moved (sent + received)."""
        return self.sent + self.received  # type: ignore[no-any-return]

    @classmethod
    def from_records(
        cls, records: Sequence[tuple[int, ...]], max_in_flight: int, cpu_ns: int = 0
    ) -> Timings:
        array = np.asarray(records, dtype=np.int64).reshape(-1, _RECORD)
        first_byte = array[:, 5]
        return cls(
            start_ns=array[:, 0].copy(),
            end_ns=array[:, 1].copy(),
            sent=array[:, 2].copy(),
            received=array[:, 3].copy(),
            worker=array[:, 4].copy(),
            ttfb_ns=np.where(first_byte >= 0, first_byte - array[:, 0], -1),
            kind=array[:, 6].copy(),
            position=array[:, 7].copy(),
            max_in_flight=max_in_flight,
            cpu_ns=cpu_ns,
        )


@frozen(kw_only=True)
class Run:
    """What a plan's run returned: the timings and each job's outcome in plan order."""

    timings: Timings
    #: one per job, phase after phase, in the order the plan lists them
    outcomes: tuple[Outcome, ...]
    #: the most requests one job kept in flight by itself (a client's multipart upload)
    inner: int = 1

    def requests_by_kind(self) -> dict[str, int]:
        """Requests made, by kind; a job that made several (``Outcome.wire``) counts each."""
        kinds = self.timings.kind[np.argsort(self.timings.position, kind="stable")]
        counts: Counter[str] = Counter()
        for index, outcome in zip(kinds.tolist(), self.outcomes, strict=True):
            if outcome.wire:
                for kind, count in outcome.wire:
                    counts[kind.value] += count
            else:
                counts[KINDS[index].value] += 1
        return dict(counts)


class _Tracker:
    """Records request timings and the largest number of requests in flight at once."""

    def __init__(self, clock: Clock, size: int, meter: Meter | None) -> None:
        self.clock = clock
        self.meter = meter
        self.records: list[tuple[int, ...]] = []
        self.outcomes: list[Outcome | None] = [None] * size
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

    def end(self, start: int, outcome: Outcome, worker: int, kind: int, position: int) -> None:
        end = self.clock()
        self.records.append(  # list.append is atomic under the GIL
            (start, end, outcome[0], outcome[1], worker, outcome[2], kind, position)
        )
        self.outcomes[position] = outcome
        with self.lock:
            self.in_flight -= 1
        if self.meter is not None:
            self.meter.done += outcome[0] + outcome[1]

    def abandon(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def run(self, inner: int) -> Run:
        cpu = time.process_time_ns() - self.cpu_start
        timings = Timings.from_records(self.records, self.max_in_flight, cpu)
        missing = [i for i, outcome in enumerate(self.outcomes) if outcome is None]
        if missing:  # pragma: no cover - every job ran or the run raised
            raise RuntimeError(f"{len(missing)} job(s) did not report an outcome")
        return Run(
            timings=timings,
            outcomes=tuple(o for o in self.outcomes if o is not None),
            inner=inner,
        )


async def _run_phase_async(
    jobs: Sequence[AsyncJob], first: int, streams: int, tracker: _Tracker, timeout: float | None
) -> None:
    """Run ``jobs`` on ≤ ``streams`` workers; a request running ``timeout`` s is cancelled.

    The deadline is kept by one watchdog task per phase rather than a timer per request:
    ``asyncio.timeout``/``wait_for`` cost 6–25 µs per request here, the watchdog's bookkeeping
    well under one. It wakes every ``timeout / 20`` s (at most every second), so a request
    is cancelled between ``timeout`` and ``1.05 × timeout`` seconds after it started.
    """
    queue: Iterator[tuple[int, AsyncJob]] = enumerate(jobs, first)
    loop = asyncio.get_running_loop()
    workers = min(streams, len(jobs))
    began: list[float | None] = [None] * workers  # loop time the current request started
    expired: set[int] = set()

    async def worker(number: int) -> None:
        for position, (kind, call, _) in queue:
            kind_number = kind_index(kind)
            start = tracker.begin()
            began[number] = loop.time()
            try:
                outcome = await call()
            except asyncio.CancelledError:
                tracker.abandon()
                if number in expired:
                    raise TimeoutError(f"a request got no answer within {timeout:g} s") from None
                raise
            except BaseException:
                tracker.abandon()
                raise
            began[number] = None
            tracker.end(start, outcome, number, kind_number, position)

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


def _inner(phases: Sequence[Sequence[AsyncJob | SyncJob]]) -> int:
    return max((job.inner for phase in phases for job in phase), default=1)


async def run_async(
    phases: Sequence[Sequence[AsyncJob]],
    streams: int,
    clock: Clock,
    timeout: float | None = None,
    meter: Meter | None = None,
) -> Run:
    """Run ``phases`` of coroutine jobs on the running loop with ≤ ``streams`` in flight.

    ``meter.done`` grows by each request's payload bytes as it completes.
    """
    tracker = _Tracker(clock, sum(len(phase) for phase in phases), meter)
    first = 0
    for phase in phases:
        await _run_phase_async(phase, first, streams, tracker, timeout)
        first += len(phase)
    return tracker.run(_inner(phases))


def _run_phase_sync(jobs: Sequence[SyncJob], first: int, streams: int, tracker: _Tracker) -> None:
    queue = enumerate(jobs, first)
    queue_lock = threading.Lock()
    failed = threading.Event()

    def worker(number: int = 0) -> None:
        while not failed.is_set():
            with queue_lock:
                item = next(queue, None)
            if item is None:
                return
            position, (kind, call, _) = item
            kind_number = kind_index(kind)
            start = tracker.begin()
            try:
                outcome = call()
            except BaseException:
                tracker.abandon()
                failed.set()
                raise
            tracker.end(start, outcome, number, kind_number, position)

    workers = min(streams, len(jobs))
    if workers == 0:
        return
    if workers == 1:
        worker()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="storeprobe") as pool:
        futures = [pool.submit(worker, n) for n in range(workers)]
    errors = [error for future in futures if (error := future.exception()) is not None]
    if errors:
        raise errors[0]


def run_sync(
    phases: Sequence[Sequence[SyncJob]],
    streams: int,
    clock: Clock,
    meter: Meter | None = None,
) -> Run:
    """Run ``phases`` of plain callables in a thread pool with ≤ ``streams`` in flight."""
    tracker = _Tracker(clock, sum(len(phase) for phase in phases), meter)
    first = 0
    for phase in phases:
        _run_phase_sync(phase, first, streams, tracker)
        first += len(phase)
    return tracker.run(_inner(phases))
