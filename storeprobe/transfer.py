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
from typing import TypeVar

import numpy as np
from attrs import field, frozen

from storeprobe.request import KINDS, AsyncJob, Outcome, SyncJob, kind_index

__all__ = ["Clock", "Meter", "Run", "Timings", "run_async", "run_sync"]

Clock = Callable[[], int]


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
        cls, records: Sequence[tuple[int, int, Outcome, int, int, int]], cpu_ns: int = 0
    ) -> Timings:
        """Arrays from the engine's records: (start, end, outcome, worker, kind, position).

        The most requests in flight is counted from the records afterwards: at each
        request's start, the requests started by then minus those ended by then (a request
        ending at the very nanosecond another starts is not counted as overlapping).
        """
        count = len(records)
        start = np.fromiter((r[0] for r in records), np.int64, count)
        end = np.fromiter((r[1] for r in records), np.int64, count)
        first_byte = np.fromiter((r[2][2] for r in records), np.int64, count)
        starts, ends = np.sort(start), np.sort(end)
        in_flight = np.searchsorted(starts, starts, side="right") - np.searchsorted(
            ends, starts, side="right"
        )
        return cls(
            start_ns=start,
            end_ns=end,
            sent=np.fromiter((r[2][0] for r in records), np.int64, count),
            received=np.fromiter((r[2][1] for r in records), np.int64, count),
            worker=np.fromiter((r[3] for r in records), np.int64, count),
            ttfb_ns=np.where(first_byte >= 0, first_byte - start, -1),
            kind=np.fromiter((r[4] for r in records), np.int64, count),
            position=np.fromiter((r[5] for r in records), np.int64, count),
            max_in_flight=int(in_flight.max()) if count else 0,
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


#: a record of the engine: (start ns, end ns, outcome, worker, kind number, position)
_Record = tuple[int, int, Outcome, int, int, int]
_J = TypeVar("_J", AsyncJob, SyncJob)


def _ready(phases: Sequence[Sequence[_J]]) -> list[list[tuple[int, int, _J]]]:
    """Each job with its position in the plan and its kind number, worked out before the
    window opens: (position, kind number, job)."""
    ready: list[list[tuple[int, int, _J]]] = []
    position = 0
    for phase in phases:
        ready.append([(position + i, kind_index(job.kind), job) for i, job in enumerate(phase)])
        position += len(phase)
    return ready


def _run(records: list[_Record], size: int, cpu_start: int, inner: int) -> Run:
    """The Run of finished records (outside the window)."""
    cpu = time.process_time_ns() - cpu_start
    outcomes: list[Outcome | None] = [None] * size
    for record in records:
        outcomes[record[5]] = record[2]
    missing = sum(outcome is None for outcome in outcomes)
    if missing:  # pragma: no cover - every job ran or the run raised
        raise RuntimeError(f"{missing} job(s) did not report an outcome")
    return Run(
        timings=Timings.from_records(records, cpu),
        outcomes=tuple(o for o in outcomes if o is not None),
        inner=inner,
    )


async def _run_phase_async(
    jobs: list[tuple[int, int, AsyncJob]],
    streams: int,
    clock: Clock,
    records: list[_Record],
    meter: Meter | None,
    timeout: float | None,
) -> None:
    """Run ``jobs`` on ≤ ``streams`` workers; a request running ``timeout`` s is cancelled.

    The deadline is kept by one watchdog task per phase rather than a timer per request:
    ``asyncio.timeout``/``wait_for`` cost 6–25 µs per request here, the watchdog's bookkeeping
    well under one. It wakes every ``timeout / 20`` s (at most every second), so a request
    is cancelled between ``timeout`` and ``1.05 × timeout`` seconds after it started.
    """
    queue: Iterator[tuple[int, int, AsyncJob]] = iter(jobs)
    loop = asyncio.get_running_loop()
    record = records.append
    workers = min(streams, len(jobs))
    began: list[float | None] = [None] * workers  # loop time the current request started
    expired: set[int] = set()

    async def worker(number: int) -> None:
        for position, kind, job in queue:
            began[number] = loop.time()
            start = clock()
            try:
                outcome = await job.call()
            except asyncio.CancelledError:
                if number in expired:
                    raise TimeoutError(f"a request got no answer within {timeout:g} s") from None
                raise
            record((start, clock(), outcome, number, kind, position))
            began[number] = None
            if meter is not None:
                meter.done += outcome[0] + outcome[1]

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
    ready = _ready(phases)
    records: list[_Record] = []
    cpu_start = time.process_time_ns()
    for phase in ready:
        await _run_phase_async(phase, streams, clock, records, meter, timeout)
    return _run(records, sum(map(len, ready)), cpu_start, _inner(phases))


def _run_phase_sync(
    jobs: list[tuple[int, int, SyncJob]],
    streams: int,
    clock: Clock,
    records: list[_Record],
    meter: Meter | None,
) -> None:
    queue = iter(jobs)
    queue_lock = threading.Lock()
    failed = threading.Event()
    record = records.append  # list.append is atomic under the GIL

    def worker(number: int = 0) -> None:
        while not failed.is_set():
            with queue_lock:
                item = next(queue, None)
            if item is None:
                return
            position, kind, job = item
            start = clock()
            try:
                outcome = job.call()
            except BaseException:
                failed.set()
                raise
            record((start, clock(), outcome, number, kind, position))
            if meter is not None:
                meter.done += outcome[0] + outcome[1]

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
    ready = _ready(phases)
    records: list[_Record] = []
    cpu_start = time.process_time_ns()
    for phase in ready:
        _run_phase_sync(phase, streams, clock, records, meter)
    return _run(records, sum(map(len, ready)), cpu_start, _inner(phases))
