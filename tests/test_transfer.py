"""The timing engine, with an injected clock and real concurrency limits."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from storeprobe.transfer import Plan, run_async, run_sync
from tests.helpers import StepClock


def test_sync_engine_records_every_request_exactly() -> None:
    clock = StepClock()
    plan = Plan(phases=(tuple((lambda n=n: n) for n in (5, 7, 11)),))
    timings = run_sync(plan, 1, clock)
    assert timings.start_ns.tolist() == [10, 30, 50]
    assert timings.end_ns.tolist() == [20, 40, 60]
    assert timings.nbytes.tolist() == [5, 7, 11]
    assert timings.max_in_flight == 1


@pytest.mark.parametrize("streams", [1, 3, 8])
def test_sync_engine_keeps_at_most_streams_in_flight(streams: int) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def job() -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.005)
        with lock:
            active -= 1
        return 1

    timings = run_sync(Plan(phases=(tuple(job for _ in range(24)),)), streams, time.perf_counter_ns)
    assert peak == streams
    assert timings.max_in_flight == streams
    assert int(timings.nbytes.sum()) == 24


@pytest.mark.parametrize("streams", [1, 4])
def test_async_engine_keeps_at_most_streams_in_flight(streams: int) -> None:
    active = 0
    peak = 0

    async def job() -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.002)
        active -= 1
        return 2

    plan = Plan(phases=(tuple(job for _ in range(20)), (job,)))
    timings = asyncio.run(run_async(plan, streams, time.perf_counter_ns))
    assert peak == streams
    assert int(timings.nbytes.sum()) == 42
    assert len(timings.start_ns) == 21


def test_async_engine_stops_on_first_error_and_times_out() -> None:
    started = 0

    async def fail() -> int:
        raise OSError("boom")

    async def slow() -> int:
        nonlocal started
        started += 1
        await asyncio.sleep(10)
        return 1

    with pytest.raises(OSError, match="boom"):
        asyncio.run(run_async(Plan(phases=((fail,) + (slow,) * 50,)), 1, time.perf_counter_ns))
    assert started == 0
    with pytest.raises(TimeoutError):
        asyncio.run(run_async(Plan(phases=((slow,),)), 1, time.perf_counter_ns, timeout=0.01))


def test_the_deadline_is_per_request_not_per_phase() -> None:
    # 30 requests of 20 ms one after another take 0.6 s, three times the 0.2 s deadline:
    # each request is within it, so all finish; one request that sleeps 10 s is cancelled
    async def quick() -> int:
        await asyncio.sleep(0.02)
        return 1

    async def stuck() -> int:
        await asyncio.sleep(10)
        return 1

    timings = asyncio.run(
        run_async(Plan(phases=((quick,) * 30,)), 1, time.perf_counter_ns, timeout=0.2)
    )
    assert len(timings.nbytes) == 30
    with pytest.raises(TimeoutError, match=r"no answer within 0\.2 s"):
        asyncio.run(
            run_async(
                Plan(phases=((quick,) * 5 + (stuck,) + (quick,) * 5,)),
                2,
                time.perf_counter_ns,
                timeout=0.2,
            )
        )


def test_sync_engine_stops_launching_after_an_error() -> None:
    calls = []

    def fail() -> int:
        calls.append("fail")
        raise OSError("boom")

    def ok() -> int:
        calls.append("ok")
        return 1

    with pytest.raises(OSError, match="boom"):
        run_sync(Plan(phases=((ok, fail) + (ok,) * 10,)), 1, time.perf_counter_ns)
    assert calls == ["ok", "fail"]
