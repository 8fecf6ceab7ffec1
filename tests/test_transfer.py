"""The timing engine, with an injected clock and real concurrency limits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import fsspec
import pytest

from storeprobe.backends import LocalBackend, ObstoreBackend
from storeprobe.planning import choose, upload_plan
from storeprobe.request import KINDS, AsyncJob, Kind, Outcome, SyncJob
from storeprobe.transfer import Meter, Run, run_async, run_sync
from storeprobe.units import MiB
from storeprobe.workload import Workload
from tests.helpers import StepClock

MULTIPART = (
    (Kind.CREATE_MULTIPART, 1),
    (Kind.PUT_PART, 3),
    (Kind.COMPLETE_MULTIPART, 1),
)


def sync_job(kind: Kind, outcome: Outcome) -> SyncJob:
    return SyncJob(kind, lambda: outcome)


def async_job(kind: Kind, outcome: Outcome, delay: float | None = None) -> AsyncJob:
    async def call() -> Outcome:
        if delay is not None:
            await asyncio.sleep(delay)
        return outcome

    return AsyncJob(kind, call)


def gets(*sizes: int) -> tuple[SyncJob, ...]:
    return tuple(sync_job(Kind.GET, Outcome(received=size)) for size in sizes)


def run_on_loop(make: Callable[[], Coroutine[Any, Any, Run]]) -> Run:
    return asyncio.run(make())


def kinds(run: Run) -> list[Kind]:
    """Each record's kind, in plan order."""
    order = run.timings.position.argsort(kind="stable")
    return [KINDS[index] for index in run.timings.kind[order].tolist()]


# -- exact records -------------------------------------------------------------------------


def test_sync_engine_records_every_request_exactly() -> None:
    clock = StepClock()
    run = run_sync((gets(5, 7, 11),), 1, clock)
    timings = run.timings
    assert timings.start_ns.tolist() == [10, 30, 50]
    assert timings.end_ns.tolist() == [20, 40, 60]
    assert timings.nbytes.tolist() == [5, 7, 11]
    assert timings.received.tolist() == [5, 7, 11]
    assert timings.sent.tolist() == [0, 0, 0]
    assert timings.worker.tolist() == [0, 0, 0]
    assert timings.position.tolist() == [0, 1, 2]
    assert timings.ttfb_ns.tolist() == [-1, -1, -1]
    assert timings.kind.tolist() == [KINDS.index(Kind.GET)] * 3
    assert timings.max_in_flight == 1
    assert [outcome.received for outcome in run.outcomes] == [5, 7, 11]
    assert run.inner == 1


def test_async_engine_records_every_request_exactly() -> None:
    clock = StepClock()
    phases = (tuple(async_job(Kind.GET, Outcome(received=n)) for n in (5, 7, 11)),)
    run = run_on_loop(lambda: run_async(phases, 1, clock))
    timings = run.timings
    assert timings.start_ns.tolist() == [10, 30, 50]
    assert timings.end_ns.tolist() == [20, 40, 60]
    assert timings.nbytes.tolist() == [5, 7, 11]
    assert timings.worker.tolist() == [0, 0, 0]
    assert timings.position.tolist() == [0, 1, 2]
    assert timings.max_in_flight == 1


def test_async_engine_interleaves_workers_exactly() -> None:
    # two workers, each request yielding once to the loop: the clock is read in the order
    # begin 0, begin 1, end 0, begin 2, end 1, begin 3, end 2, end 3
    clock = StepClock()
    phases = (tuple(async_job(Kind.GET, Outcome(received=n), delay=0) for n in (1, 2, 3, 4)),)
    run = run_on_loop(lambda: run_async(phases, 2, clock))
    timings = run.timings
    order = timings.position.argsort()
    assert timings.start_ns[order].tolist() == [10, 20, 40, 60]
    assert timings.end_ns[order].tolist() == [30, 50, 70, 80]
    assert timings.worker[order].tolist() == [0, 1, 0, 1]
    assert timings.max_in_flight == 2
    assert [outcome.received for outcome in run.outcomes] == [1, 2, 3, 4]


def test_positions_run_on_across_phases() -> None:
    clock = StepClock()
    run = run_sync((gets(1, 2), gets(3), gets(4, 5)), 1, clock)
    assert run.timings.position.tolist() == [0, 1, 2, 3, 4]
    assert run.timings.start_ns.tolist() == [10, 30, 50, 70, 90]
    assert [outcome.received for outcome in run.outcomes] == [1, 2, 3, 4, 5]


# -- kinds, bytes, first bytes -------------------------------------------------------------

MULTIPART_PLAN = (
    (Kind.CREATE_MULTIPART,),
    (Kind.PUT_PART, Kind.PUT_PART, Kind.PUT_PART),
    (Kind.COMPLETE_MULTIPART,),
)


@pytest.mark.parametrize("engine", ["sync", "async"])
def test_each_record_carries_its_kind(engine: str) -> None:
    flat = [kind for phase in MULTIPART_PLAN for kind in phase] + [Kind.HEAD, Kind.DELETE]
    shape = (*MULTIPART_PLAN, (Kind.HEAD, Kind.DELETE))
    if engine == "sync":
        run = run_sync(
            tuple(tuple(sync_job(k, Outcome()) for k in p) for p in shape), 2, StepClock()
        )
    else:
        phases = tuple(tuple(async_job(k, Outcome()) for k in p) for p in shape)
        run = run_on_loop(lambda: run_async(phases, 2, StepClock()))
    assert kinds(run) == flat
    assert all(0 <= index < len(KINDS) for index in run.timings.kind.tolist())
    assert run.requests_by_kind() == {
        "create-multipart": 1,
        "put-part": 3,
        "complete-multipart": 1,
        "head": 1,
        "delete": 1,
    }


def test_sent_and_received_are_kept_apart() -> None:
    phases = (
        (
            sync_job(Kind.PUT, Outcome(sent=5)),
            sync_job(Kind.GET, Outcome(received=7)),
            sync_job(Kind.HEAD, Outcome(size=99)),
        ),
    )
    run = run_sync(phases, 1, StepClock())
    assert run.timings.sent.tolist() == [5, 0, 0]
    assert run.timings.received.tolist() == [0, 7, 0]
    assert run.timings.nbytes.tolist() == [5, 7, 0]
    assert run.outcomes[2].size == 99  # a HEAD's reported size is not payload


@pytest.mark.parametrize("engine", ["sync", "async"])
def test_first_byte_marks_become_ttfb(engine: str) -> None:
    clock = StepClock()

    def read_with_mark() -> Outcome:
        mark = clock()  # the first byte arrives one clock step after the request starts
        clock()  # ... and the rest one step later
        return Outcome(received=3, first_byte_ns=mark)

    async def read_with_mark_async() -> Outcome:
        return read_with_mark()

    if engine == "sync":
        phases_s = ((SyncJob(Kind.GET, read_with_mark), sync_job(Kind.GET, Outcome(received=1))),)
        run = run_sync(phases_s, 1, clock)
    else:
        phases_a = (
            (AsyncJob(Kind.GET, read_with_mark_async), async_job(Kind.GET, Outcome(received=1))),
        )
        run = run_on_loop(lambda: run_async(phases_a, 1, clock))
    # start 10, first byte 20, (30), end 40; then start 50, end 60 without a mark
    assert run.timings.start_ns.tolist() == [10, 50]
    assert run.timings.end_ns.tolist() == [40, 60]
    assert run.timings.ttfb_ns.tolist() == [10, -1]
    assert run.outcomes[0].first_byte_ns == 20


@pytest.mark.parametrize("engine", ["sync", "async"])
def test_meter_done_is_the_bytes_moved(engine: str) -> None:
    outcomes = [Outcome(sent=5), Outcome(received=7), Outcome(), Outcome(sent=11, received=13)]
    meter = Meter()
    meter.reset(36)
    if engine == "sync":
        phases_s = (
            tuple(sync_job(Kind.GET, o) for o in outcomes[:2]),
            tuple(sync_job(Kind.GET, o) for o in outcomes[2:]),
        )
        run = run_sync(phases_s, 3, time.perf_counter_ns, meter)
    else:
        phases_a = (tuple(async_job(Kind.GET, o, delay=0) for o in outcomes),)
        run = run_on_loop(lambda: run_async(phases_a, 3, time.perf_counter_ns, None, meter))
    assert meter.done == int(run.timings.nbytes.sum()) == 36
    assert meter.total == 36
    meter.reset(10)
    assert (meter.done, meter.total) == (0, 10)


# -- outcomes in plan order ---------------------------------------------------------------


def test_async_outcomes_come_back_in_plan_order() -> None:
    # the first job finishes last, the last first: records are in completion order,
    # outcomes in the plan's
    delays = [0.05, 0.04, 0.03, 0.02, 0.01]
    phases = (
        tuple(async_job(Kind.GET, Outcome(received=i + 1), delay=d) for i, d in enumerate(delays)),
        (async_job(Kind.HEAD, Outcome(size=42)),),
    )
    run = run_on_loop(lambda: run_async(phases, 5, time.perf_counter_ns))
    assert run.timings.position.tolist()[:5] == [4, 3, 2, 1, 0]
    assert run.timings.received.tolist()[:5] == [5, 4, 3, 2, 1]
    assert [outcome.received for outcome in run.outcomes] == [1, 2, 3, 4, 5, 0]
    assert run.outcomes[5].size == 42


def test_sync_outcomes_come_back_in_plan_order() -> None:
    def later(seconds: float, outcome: Outcome) -> SyncJob:
        def call() -> Outcome:
            time.sleep(seconds)
            return outcome

        return SyncJob(Kind.GET, call)

    delays = [0.2, 0.15, 0.1, 0.05, 0.0]
    phases = (tuple(later(d, Outcome(received=i + 1)) for i, d in enumerate(delays)),)
    run = run_sync(phases, 5, time.perf_counter_ns)
    # records in completion order: [4, 3, 2, 1, 0] unless a loaded machine starts a
    # thread more than 50 ms late, so the order is checked against the end marks
    ends = run.timings.end_ns.tolist()
    assert ends == sorted(ends)
    assert sorted(run.timings.position.tolist()) == [0, 1, 2, 3, 4]
    assert [outcome.received for outcome in run.outcomes] == [1, 2, 3, 4, 5]


# -- requests by kind ------------------------------------------------------------------------


def test_requests_by_kind_counts_what_a_job_made_by_itself() -> None:
    # a client's own multipart upload (one job: create 1, put-part 3, complete 1) that
    # finishes after the GET beside it: each outcome is counted with its own job's kind
    async def multipart() -> Outcome:
        await asyncio.sleep(0.02)
        return Outcome(sent=30, wire=MULTIPART)

    phases = (
        (AsyncJob(Kind.PUT, multipart, 3), async_job(Kind.GET, Outcome(received=4))),
        (async_job(Kind.HEAD, Outcome(size=30)),),
    )
    run = run_on_loop(lambda: run_async(phases, 2, time.perf_counter_ns))
    assert run.timings.position.tolist() == [1, 0, 2]  # the GET finished first
    assert run.requests_by_kind() == {
        "create-multipart": 1,
        "put-part": 3,
        "complete-multipart": 1,
        "get": 1,
        "head": 1,
    }
    assert kinds(run) == [Kind.PUT, Kind.GET, Kind.HEAD]
    assert run.inner == 3
    assert int(run.timings.nbytes.sum()) == 34


class _MemoryStores:
    """The two methods of obstore's FsspecStore the obstore backend calls, on memory."""

    def __init__(self) -> None:
        from obstore.store import MemoryStore

        self.store = MemoryStore()

    def _split_path(self, path: str) -> tuple[str, str]:
        bucket, _, key = path.partition("/")
        return bucket, key

    def _construct_store(self, bucket: str) -> Any:
        return self.store


def test_requests_by_kind_counts_obstore_multipart_parts() -> None:
    pytest.importorskip("obstore")
    backend = ObstoreBackend(_MemoryStores())
    workload = Workload(count=1, size=12 * MiB, seed=1)
    layout = choose(backend.capabilities, backend.client, "upload", workload, 2)
    assert layout.split
    assert layout.parts == 3
    plan = upload_plan(layout, workload, ["bench/object"])
    bodies = [backend.body(workload, r.body) if r.body else None for r in plan.requests]
    bound = backend.bind(plan.phases, bodies, [None], time.perf_counter_ns)
    meter = Meter()
    meter.reset(plan.expected_bytes)
    run = run_on_loop(lambda: run_async(bound.phases, 2, time.perf_counter_ns, 30.0, meter))
    assert kinds(run) == [Kind.PUT]  # one job...
    assert run.requests_by_kind() == {  # ... that made five requests
        "create-multipart": 1,
        "put-part": 3,
        "complete-multipart": 1,
    }
    assert run.inner == 2  # its parts in flight at once
    assert meter.done == run.timings.sent.sum() == 12 * MiB


def test_requests_by_kind_of_a_probe_made_multipart_upload(tmp_path: Path) -> None:
    # the local disk's split upload: create → 3 parts → complete, each its own job
    backend = LocalBackend(fsspec.filesystem("file"))
    workload = Workload(count=1, size=3 * MiB, seed=2)
    layout = choose(backend.capabilities, backend.client, "upload", workload, 2, part_size=MiB)
    path = str(tmp_path / "object")
    plan = upload_plan(layout, workload, [path])
    bodies = [backend.body(workload, r.body) if r.body else None for r in plan.requests]
    bound = backend.bind(plan.phases, bodies, [None] * len(bodies), time.perf_counter_ns)
    meter = Meter()
    meter.reset(plan.expected_bytes)
    run = run_sync(bound.phases, 2, time.perf_counter_ns, meter)
    assert kinds(run) == [Kind.CREATE_MULTIPART, *[Kind.PUT_PART] * 3, Kind.COMPLETE_MULTIPART]
    assert run.requests_by_kind() == {"create-multipart": 1, "put-part": 3, "complete-multipart": 1}
    assert run.timings.sent.tolist()[0] == 0
    assert sorted(run.timings.sent.tolist()[1:4]) == [MiB] * 3
    assert meter.done == int(run.timings.nbytes.sum()) == 3 * MiB
    assert Path(path).read_bytes() == workload.payload_bytes(0)


# -- concurrency ---------------------------------------------------------------------------


@pytest.mark.parametrize("streams", [1, 3, 8])
def test_sync_engine_keeps_at_most_streams_in_flight(streams: int) -> None:
    active = 0
    peak = 0
    started = 0
    lock = threading.Lock()
    # the first `streams` calls wait for each other: the engine must have them all in
    # flight at once (a wait for a state, not a sleep that hopes threads overlap); a
    # later call that ran beside them would raise the peak above `streams`
    together = threading.Barrier(streams, timeout=30)

    def call() -> Outcome:
        nonlocal active, peak, started
        with lock:
            active += 1
            peak = max(peak, active)
            started += 1
            first = started <= streams
        if first:
            together.wait()
        with lock:
            active -= 1
        return Outcome(received=1)

    phases = (tuple(SyncJob(Kind.GET, call) for _ in range(24)),)
    run = run_sync(phases, streams, time.perf_counter_ns)
    assert peak == streams
    assert run.timings.max_in_flight == streams
    assert int(run.timings.nbytes.sum()) == 24
    assert set(run.timings.worker.tolist()) <= set(range(streams))


@pytest.mark.parametrize("streams", [1, 4])
def test_async_engine_keeps_at_most_streams_in_flight(streams: int) -> None:
    active = 0
    peak = 0

    async def call() -> Outcome:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.002)
        active -= 1
        return Outcome(sent=2)

    phases = (tuple(AsyncJob(Kind.PUT, call) for _ in range(20)), (AsyncJob(Kind.PUT, call),))
    run = run_on_loop(lambda: run_async(phases, streams, time.perf_counter_ns))
    assert peak == streams
    assert run.timings.max_in_flight == streams
    assert int(run.timings.nbytes.sum()) == 42
    assert len(run.timings.start_ns) == 21
    assert len(run.outcomes) == 21
    assert set(run.timings.worker.tolist()) == set(range(streams))


def test_inner_is_the_most_a_job_keeps_in_flight() -> None:
    phases = ((SyncJob(Kind.PUT, lambda: Outcome(sent=1), 4), *gets(1)),)
    assert run_sync(phases, 1, StepClock()).inner == 4


# -- failures and deadlines ----------------------------------------------------------------


def test_async_engine_stops_on_first_error_and_times_out() -> None:
    started = 0

    async def fail() -> Outcome:
        raise OSError("boom")

    async def slow() -> Outcome:
        nonlocal started
        started += 1
        await asyncio.sleep(10)
        return Outcome(received=1)

    phases = ((AsyncJob(Kind.PUT, fail), *(AsyncJob(Kind.GET, slow) for _ in range(50))),)
    with pytest.raises(OSError, match="boom"):
        run_on_loop(lambda: run_async(phases, 1, time.perf_counter_ns))
    assert started == 0
    with pytest.raises(TimeoutError):
        run_on_loop(
            lambda: run_async(((AsyncJob(Kind.GET, slow),),), 1, time.perf_counter_ns, 0.01)
        )


def test_async_engine_cancels_the_jobs_in_flight_after_an_error() -> None:
    started = 0
    finished = 0

    async def fail() -> Outcome:
        await asyncio.sleep(0.01)
        raise OSError("boom")

    async def slow() -> Outcome:
        nonlocal started, finished
        started += 1
        await asyncio.sleep(10)
        finished += 1
        return Outcome(received=1)

    phases = (
        (AsyncJob(Kind.PUT, fail), *(AsyncJob(Kind.GET, slow) for _ in range(50))),
        (AsyncJob(Kind.GET, slow),),
    )
    began = time.perf_counter()
    with pytest.raises(OSError, match="boom"):
        run_on_loop(lambda: run_async(phases, 3, time.perf_counter_ns))
    assert time.perf_counter() - began < 5
    assert started == 2  # one per other worker, none after the failure
    assert finished == 0


def test_the_deadline_is_per_request_not_per_phase() -> None:
    # 30 requests of 20 ms one after another take 0.6 s, three times the 0.2 s deadline:
    # each request is within it, so all finish; one request that sleeps 10 s is cancelled
    async def quick() -> Outcome:
        await asyncio.sleep(0.02)
        return Outcome(received=1)

    async def stuck() -> Outcome:
        await asyncio.sleep(10)
        return Outcome(received=1)

    fine = (tuple(AsyncJob(Kind.GET, quick) for _ in range(30)),)
    run = run_on_loop(lambda: run_async(fine, 1, time.perf_counter_ns, 0.2))
    assert len(run.timings.nbytes) == 30
    assert len(run.outcomes) == 30
    jam = (
        (
            *(AsyncJob(Kind.GET, quick) for _ in range(5)),
            AsyncJob(Kind.GET, stuck),
            *(AsyncJob(Kind.GET, quick) for _ in range(5)),
        ),
    )
    began = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"no answer within 0\.2 s"):
        run_on_loop(lambda: run_async(jam, 2, time.perf_counter_ns, 0.2))
    assert time.perf_counter() - began < 2


def test_sync_engine_stops_launching_after_an_error() -> None:
    calls = []

    def fail() -> Outcome:
        calls.append("fail")
        raise OSError("boom")

    def ok() -> Outcome:
        calls.append("ok")
        return Outcome(received=1)

    phases = (
        (
            SyncJob(Kind.GET, ok),
            SyncJob(Kind.GET, fail),
            *(SyncJob(Kind.GET, ok) for _ in range(10)),
        ),
        (SyncJob(Kind.GET, ok),),
    )
    with pytest.raises(OSError, match="boom"):
        run_sync(phases, 1, time.perf_counter_ns)
    assert calls == ["ok", "fail"]


def test_sync_engine_stops_every_worker_after_an_error() -> None:
    calls = []
    lock = threading.Lock()

    def fail() -> Outcome:
        with lock:
            calls.append("fail")
        raise OSError("boom")

    def ok() -> Outcome:
        with lock:
            calls.append("ok")
        time.sleep(0.05)
        return Outcome(received=1)

    phases = (
        (SyncJob(Kind.GET, fail), *(SyncJob(Kind.GET, ok) for _ in range(30))),
        (SyncJob(Kind.GET, ok),),
    )
    with pytest.raises(OSError, match="boom"):
        run_sync(phases, 3, time.perf_counter_ns)
    assert calls.count("fail") == 1
    assert calls.count("ok") <= 2  # at most one per other worker, none after the failure


def test_empty_phases_run_to_an_empty_run() -> None:
    for run in (
        run_sync(((),), 4, StepClock()),
        asyncio.run(run_async(((),), 4, StepClock())),
    ):
        assert run.outcomes == ()
        assert run.timings.start_ns.size == 0
        assert run.requests_by_kind() == {}
