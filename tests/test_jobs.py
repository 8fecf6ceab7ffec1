"""storeprobe.jobs: the wrappers put around a backend's jobs, on the jobs the local disk's
backend binds (synchronous) and on coroutine jobs (the asynchronous form)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storeprobe import Workload
from storeprobe.backends import SyncBackend
from storeprobe.jobs import (
    ABSENT,
    EXISTENCE,
    is_missing,
    land_ranges,
    positioned,
    release_parts,
    settling,
    tolerating,
)
from storeprobe.planning import Plan, head_plan
from storeprobe.request import AsyncJob, Kind, Outcome, Request, SyncJob
from storeprobe.staging import Staging
from storeprobe.target import Target
from tests.helpers import StepClock


@pytest.fixture
def disk(tmp_path: Path) -> Target:
    (tmp_path / "there").write_bytes(b"12345")
    return Target.from_url(str(tmp_path))


def _heads(target: Target, *names: str) -> list[SyncJob]:
    """The local disk backend's HEAD jobs for ``names`` (one phase)."""
    plan = head_plan([f"{target.root}/{name}" for name in names])
    assert isinstance(target.backend, SyncBackend)  # the local disk's client is synchronous
    bound = target.backend.bind(plan.phases, [None] * len(names), [None] * len(names), StepClock())
    (phase,) = bound.phases
    return list(phase)


def _run(job: AsyncJob) -> Outcome:
    """Await one coroutine job on a fresh event loop."""

    async def call() -> Outcome:
        return await job.call()

    return asyncio.run(call())


def _coroutine_job(result: Outcome | BaseException, delay: float = 0.0) -> AsyncJob:
    async def call() -> Outcome:
        await asyncio.sleep(delay)
        if isinstance(result, BaseException):
            raise result
        return result

    return AsyncJob(Kind.HEAD, call)


# -- is_missing ---------------------------------------------------------------------------
class NotFoundError(Exception):
    """Named as obstore names its missing-object error."""


def test_is_missing_knows_file_not_found_and_a_client_not_found_error() -> None:
    assert is_missing(FileNotFoundError("gone"))
    assert is_missing(NotFoundError("gone"))
    assert not is_missing(PermissionError("denied"))
    assert not is_missing(OSError("reset"))


# -- ABSENT -------------------------------------------------------------------------------
def test_absent_succeeds_for_a_missing_name_and_fails_naming_an_existing_one(
    disk: Target,
) -> None:
    missing, there = _heads(disk, "missing", "there")
    assert ABSENT.for_sync(missing, 0).call() == Outcome()
    with pytest.raises(FileExistsError, match="object 7 of this repeat already exists"):
        ABSENT.for_sync(there, 7).call()


def test_absent_passes_on_an_error_that_is_not_a_missing_name() -> None:
    job = ABSENT.for_async(_coroutine_job(PermissionError("denied")), 0)
    with pytest.raises(PermissionError, match="denied"):
        _run(job)
    assert _run(ABSENT.for_async(_coroutine_job(FileNotFoundError()), 0)) == Outcome()
    with pytest.raises(FileExistsError, match="object 2 "):
        _run(ABSENT.for_async(_coroutine_job(Outcome(size=5)), 2))


# -- EXISTENCE ----------------------------------------------------------------------------
def test_existence_answers_size_minus_one_for_a_missing_name(disk: Target) -> None:
    missing, there = _heads(disk, "missing", "there")
    assert EXISTENCE.for_sync(missing, 0).call().size == -1
    assert EXISTENCE.for_sync(there, 1).call().size == 5
    assert _run(EXISTENCE.for_async(_coroutine_job(NotFoundError()), 0)).size == -1
    assert _run(EXISTENCE.for_async(_coroutine_job(Outcome(size=9)), 0)).size == 9
    with pytest.raises(PermissionError):
        _run(EXISTENCE.for_async(_coroutine_job(PermissionError()), 0))


# -- tolerating ---------------------------------------------------------------------------
def test_tolerating_records_failures_instead_of_raising_and_skips_when_told(
    disk: Target,
) -> None:
    asked: list[tuple[int, str | None]] = []

    def tolerate(position: int, exc: BaseException | None) -> bool:
        asked.append((position, None if exc is None else type(exc).__name__))
        return position != 2  # the job at position 2 is skipped

    wrapper = tolerating(tolerate, timeout=None)
    missing, there, skipped = _heads(disk, "missing", "there", "there")
    assert wrapper.for_sync(missing, 0).call() == Outcome()  # the failure is not raised
    assert wrapper.for_sync(there, 1).call() == Outcome()
    assert wrapper.for_sync(skipped, 2).call() == Outcome()
    assert asked == [(0, None), (0, "FileNotFoundError"), (1, None), (2, None)]


def test_tolerating_bounds_a_coroutine_job_by_its_timeout() -> None:
    failures: list[BaseException] = []

    def tolerate(position: int, exc: BaseException | None) -> bool:
        if exc is not None:
            failures.append(exc)
        return True

    slow = tolerating(tolerate, timeout=0.05).for_async(_coroutine_job(Outcome(), delay=30), 0)
    assert asyncio.run(asyncio.wait_for(slow.call(), 10)) == Outcome()
    (failure,) = failures
    assert isinstance(failure, TimeoutError)


# -- positioned, settling -----------------------------------------------------------------
def test_positioned_numbers_jobs_across_phases_in_plan_order() -> None:
    seen: list[tuple[str, int]] = []

    def wrap(job: SyncJob, position: int) -> SyncJob:
        seen.append((job.kind.value, position))
        return job

    phases = (
        (SyncJob(Kind.CREATE_MULTIPART, Outcome),),
        (SyncJob(Kind.PUT_PART, Outcome), SyncJob(Kind.PUT_PART, Outcome)),
        (SyncJob(Kind.COMPLETE_MULTIPART, Outcome),),
    )
    wrapped = positioned(phases, wrap)
    assert [len(phase) for phase in wrapped] == [1, 2, 1]
    assert seen == [
        ("create-multipart", 0),
        ("put-part", 1),
        ("put-part", 2),
        ("complete-multipart", 3),
    ]


def test_settling_hands_each_outcome_and_its_position_to_the_settle_step(
    disk: Target,
) -> None:
    settled: list[tuple[int, int]] = []

    def settle(position: int, outcome: Outcome) -> Outcome:
        settled.append((position, outcome.size))
        return outcome._replace(size=outcome.size * 10)

    wrapper = settling(settle)
    (there,) = _heads(disk, "there")
    assert wrapper.for_sync(there, 4).call().size == 50
    assert _run(wrapper.for_async(_coroutine_job(Outcome(size=3)), 6)).size == 30
    assert settled == [(4, 5), (6, 3)]


# -- release_parts, land_ranges -----------------------------------------------------------
def test_release_parts_keeps_the_staged_bytes_and_the_outcome() -> None:
    workload = Workload(count=1, size="64KiB", seed=3)
    staging = Staging.of_payload(workload, 0)
    try:
        plan = Plan(
            phases=(
                (Request(kind=Kind.CREATE_MULTIPART, key="k", start=0, stop=65536),),
                tuple(
                    Request(kind=Kind.PUT_PART, key="k", start=start, stop=start + 16384)
                    for start in range(0, 65536, 16384)
                ),
            )
        )
        settle = release_parts(plan, staging)
        outcome = Outcome(sent=16384)
        for position in range(5):
            assert settle(position, outcome) is outcome
        assert b"".join(chunk for _, chunk in staging.chunks()) == workload.payload_bytes(0)
    finally:
        staging.close()


def test_land_ranges_copies_a_clients_own_buffer_into_the_staging_file() -> None:
    size = 3 * 4096
    staging = Staging.blank(size)
    try:
        plan = Plan(
            phases=(
                tuple(
                    Request(kind=Kind.GET, key="k", start=start, stop=start + 4096)
                    for start in range(0, size, 4096)
                ),
            )
        )
        settle = land_ranges(plan, staging)
        # range 0 arrives in the client's own buffer; range 1 was read into the staged
        # view itself; range 2's answer is longer than asked (the rest is not written)
        staging.view[4096:8192] = b"b" * 4096
        landed = [
            settle(0, Outcome(received=4096, data=b"a" * 4096)),
            settle(1, Outcome(received=4096, data=staging.part(4096, 8192))),
            settle(2, Outcome(received=4096, data=b"c" * 5000)),
        ]
        assert [outcome.data for outcome in landed] == [None, None, None]
        assert [outcome.received for outcome in landed] == [4096, 4096, 4096]
        assert b"".join(chunk for _, chunk in staging.chunks()) == (
            b"a" * 4096 + b"b" * 4096 + b"c" * 4096
        )
    finally:
        staging.close()
