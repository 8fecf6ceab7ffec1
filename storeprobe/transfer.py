"""The timing engine: run a plan's jobs with at most N in flight and time each one.

A plan's jobs come in phases run one after the other (an S3 multipart upload is
create → parts → complete); the jobs of one phase may run concurrently. Each job makes
exactly one request (see :mod:`storeprobe.request`) and returns an :class:`Outcome`.
The engine starts at most ``streams`` jobs at once, records for every job its start and
end from an injectable nanosecond clock, the payload bytes sent and received, the
worker (stream) that ran it, its first-byte mark and its kind, keeps each outcome in
the plan's order, and stops launching new jobs after the first failure.

Inside the timed window the engine's bookkeeping per request is four stores into a
:class:`Record` allocated for the whole plan before the window (start, end, worker and
outcome at the request's position) and, for progress, one integer add on a
:class:`Meter`; whoever draws progress reads the meter from another thread. Kinds,
bytes and first-byte marks are read from the plan and the outcomes afterwards.

Jobs of an asynchronous client are coroutine functions driven on the client's event
loop (:func:`run_async`); jobs of a synchronous client are plain callables driven by a
thread pool (:func:`run_sync`).

Why one module (~430 lines): the engine is the timed window itself (what it records per
request; how the asynchronous and the threaded driver start, drain and call off
requests), and the two drivers sit side by side so their timing rules read as one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import cast

import numpy as np
from attrs import field, frozen

from storeprobe.request import KINDS, AsyncJob, Outcome, SyncJob, kind_index

__all__ = ["Clock", "Meter", "Record", "Run", "Timings", "run_async", "run_sync"]

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
    def from_record(
        cls, record: Record, outcomes: Sequence[Outcome], kinds: np.ndarray, cpu_ns: int = 0
    ) -> Timings:
        """Arrays from the engine's record of a plan, in completion order (by end mark).

        ``outcomes`` and ``kinds`` follow the plan. The most requests in flight is counted
        from the records afterwards: at each request's start, the requests started by then
        minus those ended by then (a request ending at the very nanosecond another starts
        is not counted as overlapping).
        """
        start, end, worker = record.arrays()
        count = start.size
        order = np.argsort(end, kind="stable")
        first_byte = np.fromiter((o[2] for o in outcomes), np.int64, count)[order]
        start, end = start[order], end[order]
        starts, ends = np.sort(start), end
        in_flight = np.searchsorted(starts, starts, side="right") - np.searchsorted(
            ends, starts, side="right"
        )
        return cls(
            start_ns=start,
            end_ns=end,
            sent=np.fromiter((o[0] for o in outcomes), np.int64, count)[order],
            received=np.fromiter((o[1] for o in outcomes), np.int64, count)[order],
            worker=worker[order].astype(np.int64),
            ttfb_ns=np.where(first_byte >= 0, first_byte - start, -1),
            kind=kinds[order],
            position=order.astype(np.int64),
            max_in_flight=int(in_flight.max()) if count else 0,
            cpu_ns=cpu_ns,
        )


class Record:
    """The engine's per-request record of one plan, preallocated before the window.

    One slot per request, at the request's position in the plan: its start and end
    marks (int64 ns) and its worker (int32) in typed memoryviews over zeroed buffers,
    and its outcome in a list. Recording a request inside the window is four stores into
    memory allocated before it: 20 bytes of record per request (plus the outcome's list
    slot), where a tuple per request held about 260 bytes of new objects
    (``benchmarks/scale.py``). A memoryview store converts the int in place; it costs
    fewer instructions than a store into an ``array.array`` or a numpy array.
    """

    __slots__ = ("end", "outcomes", "start", "worker")

    def __init__(self, size: int) -> None:
        self.start = memoryview(bytearray(8 * size)).cast("q")
        self.end = memoryview(bytearray(8 * size)).cast("q")
        self.worker = memoryview(bytearray(4 * size)).cast("i")
        self.outcomes: list[Outcome | None] = [None] * size

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, worker) as numpy arrays over the record's memory (no copy)."""
        return (
            np.frombuffer(self.start, np.int64),
            np.frombuffer(self.end, np.int64),
            np.frombuffer(self.worker, np.int32),
        )

    @property
    def nbytes(self) -> int:
        """Bytes the record holds: the three arrays and the outcome slots."""
        return self.start.nbytes + self.end.nbytes + self.worker.nbytes + 8 * len(self.outcomes)


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


@contextlib.contextmanager
def _young_heap() -> Iterator[None]:
    """The objects alive before the window kept out of the garbage collector's passes in
    it (``gc.freeze``), so a collection inside the window walks only what the window made.

    A plan of N requests makes O(N) objects before its window (requests, bodies, jobs; the
    data a memory store holds): a full collection inside the window walked them all, and
    the time per object of a 100 000-object download on memory:// was 1.4–1.7× that of
    10 000 objects (``benchmarks/scale.py``). Garbage made in the window is collected as
    before; the frozen objects go back to the oldest generation after the window.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _kinds(phases: Sequence[Sequence[AsyncJob | SyncJob]]) -> np.ndarray:
    """Each job's kind number, in plan order (worked out outside the window)."""
    return np.fromiter(
        (kind_index(job.kind) for phase in phases for job in phase),
        np.int64,
        sum(map(len, phases)),
    )


def _run(record: Record, phases: Sequence[Sequence[AsyncJob | SyncJob]], cpu_start: int) -> Run:
    """The Run of a finished record (outside the window)."""
    cpu = time.process_time_ns() - cpu_start
    outcomes = record.outcomes
    missing = sum(outcome is None for outcome in outcomes)
    if missing:  # pragma: no cover - every job ran or the run raised
        raise RuntimeError(f"{missing} job(s) did not report an outcome")
    done = cast("list[Outcome]", outcomes)
    return Run(
        timings=Timings.from_record(record, done, _kinds(phases), cpu),
        outcomes=tuple(done),
        inner=_inner(phases),
    )


async def _run_phase_async(
    jobs: Sequence[AsyncJob],
    offset: int,
    streams: int,
    clock: Clock,
    record: Record,
    meter: Meter | None,
    timeout: float | None,
) -> None:
    """Run ``jobs`` on ≤ ``streams`` workers; a request running ``timeout`` s is cancelled.

    The deadline is kept by one watchdog task per phase rather than a timer per request:
    ``asyncio.timeout``/``wait_for`` cost 6–25 µs per request here, the watchdog's bookkeeping
    well under one. It wakes every ``timeout / 20`` s (at most every second), so a request
    is cancelled between ``timeout`` and ``1.05 × timeout`` seconds after it started.
    """
    queue: Iterator[tuple[int, AsyncJob]] = enumerate(jobs, offset)
    loop = asyncio.get_running_loop()
    starts, ends, numbers, outcomes = record.start, record.end, record.worker, record.outcomes
    workers = min(streams, len(jobs))
    began: list[float | None] = [None] * workers  # loop time the current request started
    expired: set[int] = set()

    stopping: list[bool] = []  # set once the window is called off: no request starts

    async def worker(number: int) -> None:
        for position, job in queue:
            if stopping:
                return
            began[number] = loop.time()
            start = clock()
            try:
                outcome = await job.call()
            except asyncio.CancelledError:
                if number in expired:
                    raise TimeoutError(f"a request got no answer within {timeout:g} s") from None
                raise
            ends[position] = clock()
            starts[position] = start
            numbers[position] = number
            outcomes[position] = outcome
            began[number] = None
            if meter is not None:
                meter.done += outcome[0] + outcome[1]

    tasks = [asyncio.ensure_future(worker(n)) for n in range(workers)]
    await _supervise(tasks, stopping, timeout, loop, began, expired)


async def _watchdog(
    limit: float,
    loop: asyncio.AbstractEventLoop,
    began: list[float | None],
    expired: set[int],
    tasks: Sequence[asyncio.Future[None]],
) -> None:
    """Every ``limit / 20`` s (at most every second), cancel the worker whose request
    started (``began``, loop time) ``limit`` s ago or more, marking it ``expired``."""
    period = min(limit / 20, 1.0)
    while True:
        await asyncio.sleep(period)
        now = loop.time()
        for number, since in enumerate(began):
            if since is not None and now - since >= limit and number not in expired:
                expired.add(number)
                tasks[number].cancel()


async def _supervise(
    tasks: Sequence[asyncio.Future[None]],
    stopping: list[bool],
    timeout: float | None,
    loop: asyncio.AbstractEventLoop,
    began: list[float | None],
    expired: set[int],
) -> None:
    """Wait for a phase's worker ``tasks`` under the watchdog (none without a
    ``timeout``); called off or failed, start no more requests (``stopping``) and let
    those in flight drain (called off) or cancel them (failed) before raising."""
    guard = (
        asyncio.ensure_future(_watchdog(timeout, loop, began, expired, tasks))
        if timeout is not None
        else None
    )
    gathered = _gathered(tasks)
    try:
        # shielded: a cancellation of this window (Ctrl-C, in _drive) reaches the except
        # below instead of cancelling every request at once
        await asyncio.shield(gathered)
    except asyncio.CancelledError:
        # called off (Ctrl-C): no request starts, and those in flight may finish first
        await _call_off(tasks, drain=DRAIN_S, stopping=stopping)
        raise
    except BaseException:
        await _call_off(tasks, drain=0.0, stopping=stopping)
        raise
    finally:
        if guard is not None:
            guard.cancel()
            await asyncio.gather(guard, return_exceptions=True)


#: how long the requests in flight of a window called off may finish before they are
#: cancelled (seconds; below execution's CANCEL_GRACE_S, which waits for this)
DRAIN_S = 5.0


def _gathered(tasks: Sequence[asyncio.Future[None]]) -> asyncio.Future[list[None]]:
    """The tasks gathered, their failure retrieved even when nobody awaits it (a window
    called off awaits the tasks, not the gathering)."""
    gathered = asyncio.gather(*tasks)
    gathered.add_done_callback(lambda done: done.cancelled() or done.exception())
    return gathered


async def _call_off(
    tasks: Sequence[asyncio.Future[None]], *, drain: float, stopping: list[bool]
) -> None:
    """Start no more requests (``stopping``); let those in flight finish for ``drain``
    seconds, then cancel the rest and wait for them. A window called off by Ctrl-C
    drains (a write the server already has lands before the cleanup that deletes it, not
    after it: a cancelled PUT whose body was sent still lands); a failed one (a refused
    request, a timeout) does not."""
    stopping.append(True)
    if drain > 0:
        await asyncio.wait(tasks, timeout=drain)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


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
    record = Record(sum(map(len, phases)))
    cpu_start = time.process_time_ns()
    offset = 0
    with _young_heap():
        for phase in phases:
            await _run_phase_async(phase, offset, streams, clock, record, meter, timeout)
            offset += len(phase)
    return _run(record, phases, cpu_start)


def _run_phase_sync(
    jobs: Sequence[SyncJob],
    offset: int,
    streams: int,
    clock: Clock,
    record: Record,
    meter: Meter | None,
) -> None:
    queue = enumerate(jobs, offset)
    queue_lock = threading.Lock()
    failed: list[bool] = []  # a failure appends: a list test is cheaper than Event.is_set
    # each request's slot is its own: workers never store into the same one
    starts, ends, numbers, outcomes = record.start, record.end, record.worker, record.outcomes

    def worker(number: int = 0) -> None:
        while not failed:
            with queue_lock:
                item = next(queue, None)
            if item is None:
                return
            position, job = item
            start = clock()
            try:
                outcome = job.call()
            except BaseException:
                failed.append(True)
                raise
            ends[position] = clock()
            starts[position] = start
            numbers[position] = number
            outcomes[position] = outcome
            if meter is not None:
                meter.done += outcome[0] + outcome[1]

    workers = min(streams, len(jobs))
    if workers == 0:
        return
    if workers == 1:
        worker()
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="storeprobe")
    futures: list[Future[None]] = []
    try:
        for number in range(workers):
            futures.append(pool.submit(worker, number))
        pending = set(futures)
        while pending:  # a bounded wait, so a signal is handled on every platform
            pending = wait(pending, timeout=1).not_done
    except BaseException:
        # interrupted (Ctrl-C): the workers stop after their current request, and the
        # caller's cleanup starts only once they have
        failed.append(True)
        raise
    finally:
        pool.shutdown(wait=True)
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
    record = Record(sum(map(len, phases)))
    cpu_start = time.process_time_ns()
    offset = 0
    with _young_heap():
        for phase in phases:
            _run_phase_sync(phase, offset, streams, clock, record, meter)
            offset += len(phase)
    return _run(record, phases, cpu_start)
