"""Cost per object stays constant as the object count grows: counted, never timed.

Wall time on a shared machine cannot tell linear from quadratic reliably; these tests
count what makes it: clock reads per request (an injected clock), keys of the memory
store visited per object (an O(n) scan per object is what made N uploads O(N²)), the
bytes the engine's per-request record holds, and that the objects alive before a window
are kept out of the garbage collector's passes inside it.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import Probe, Workload, transfer
from storeprobe.request import AsyncJob, Kind, Outcome, SyncJob
from tests.helpers import StepClock

COUNTS = (100, 1000)


class _CountingStore(dict[str, object]):
    """A memory store counting every key it hands out by iteration (a scan)."""

    visits = 0

    def __iter__(self) -> Iterator[str]:
        for key in super().__iter__():
            self.visits += 1
            yield key

    def items(self) -> Any:  # ls() walks the whole store through items()
        self.visits += len(self)
        return super().items()


def _memory() -> tuple[MemoryFileSystem, _CountingStore]:
    fs = MemoryFileSystem(skip_instance_cache=True)
    store = _CountingStore()
    fs.store = store  # this instance's own store, not the class-wide one
    fs.pseudo_dirs = [""]
    return fs, store


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_window_reads_the_clock_twice_per_object_at_any_count(
    operation: Literal["upload", "download"],
) -> None:
    for count in COUNTS:
        fs, _ = _memory()
        probe = Probe(fs, "/scale", repeats=1, clock=StepClock(10))
        result = probe.measure(operation, Workload(count=count, size="4KiB", seed=1))
        assert result.ok
        # one stream: start and end of each request, one after another
        assert result.samples[0].elapsed_ns == (2 * count - 1) * 10


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_no_step_scans_the_store_per_object(operation: Literal["upload", "download"]) -> None:
    for count in COUNTS:
        fs, store = _memory()
        result = Probe(fs, "/scale", repeats=1).measure(
            operation, Workload(count=count, size="4KiB", seed=1)
        )
        assert result.ok
        assert store.visits == 0, f"{store.visits} keys visited for {count} objects"


def _held_per_request(count: int) -> float:
    """Bytes the engine holds per request at the end of a window of ``count`` no-ops."""
    outcome = Outcome(sent=1)
    jobs = tuple(SyncJob(Kind.PUT, lambda: outcome) for _ in range(count))
    held: list[int] = []
    finish = transfer._run

    def spy(*args: object) -> transfer.Run:
        held.append(tracemalloc.get_traced_memory()[0])
        return finish(*args)  # type: ignore[arg-type]

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(transfer, "_run", spy)
            transfer.run_sync((jobs,), 1, time.perf_counter_ns)
    finally:
        tracemalloc.stop()
    return (held[0] - base) / count


def test_the_record_is_a_few_bytes_per_request_at_any_count() -> None:
    small, large = _held_per_request(1_000), _held_per_request(20_000)
    # start and end (8 B each), worker (4 B) and the outcome's list slot (8 B)
    assert 20 <= large <= 32
    assert abs(small - large) < 4


@pytest.mark.parametrize("engine", ["sync", "async"])
def test_objects_alive_before_the_window_are_frozen_out_of_gc_passes_in_it(engine: str) -> None:
    # a full collection inside the window would walk the plan's O(N) objects
    seen: list[int] = []

    def call() -> Outcome:
        seen.append(gc.get_freeze_count())
        return Outcome(sent=1)

    async def acall() -> Outcome:
        return call()

    if engine == "sync":
        transfer.run_sync(((SyncJob(Kind.PUT, call),),), 1, time.perf_counter_ns)
    else:
        asyncio.run(transfer.run_async(((AsyncJob(Kind.PUT, acall),),), 1, time.perf_counter_ns))
    assert seen[0] > 0
    assert gc.get_freeze_count() == 0
