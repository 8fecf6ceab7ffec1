"""storeprobe.execution on real filesystems (the local disk and memory://): a plan run on
a backend, the run prefix opened, and cleanup deleting exactly what a run wrote and
naming what remains, with why."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import fsspec
import pytest
from fsspec.callbacks import Callback

from storeprobe import Workload
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.errors import TargetNotFoundError
from storeprobe.execution import (
    HOLD,
    Leftover,
    _drive,
    bounded,
    bounded_each,
    cleanup_notice,
    clear_prefix,
    delete_names,
    execute,
    hold_prefix,
    open_run,
    remove_folders,
)
from storeprobe.jobs import Wrapper
from storeprobe.notices import Code
from storeprobe.planning import Plan, head_plan
from storeprobe.request import Kind, Outcome, Part, Request, SyncJob
from storeprobe.target import Target
from tests.conftest import s3_options
from tests.helpers import StepClock
from tests.servers import free_port


@pytest.fixture
def disk(tmp_path: Path) -> Target:
    return Target.from_url(str(tmp_path))


@pytest.fixture
def memory() -> Iterator[Target]:
    fs = fsspec.filesystem("memory", skip_instance_cache=True)
    root = f"/execution-{uuid.uuid4().hex}"
    yield Target(fs, root)
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.fixture
def nobody() -> Target:
    """S3 through obstore on a loopback port nothing listens on: every request fails to
    connect (the storage is unreachable)."""
    return Target.from_url(
        "s3://bench/execution", s3_options(f"http://127.0.0.1:{free_port()}"), client="obstore"
    )


def _write(target: Target, *names: str) -> None:
    for name in names:
        target.fs.pipe_file(name, b"x")


class _Drawn(Callback):  # type: ignore[misc]  # fsspec ships no type hints
    """Records what a progress callback is told."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.values: list[int] = []

    def set_size(self, size: int) -> None:
        self.sizes.append(size)
        super().set_size(size)

    def absolute_update(self, value: int) -> None:
        self.values.append(value)
        super().absolute_update(value)


# -- execute ------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["disk", "memory"])
def test_execute_runs_every_request_of_the_plan_and_reports_its_bytes(
    where: str, request: pytest.FixtureRequest
) -> None:
    target: Target = request.getfixturevalue(where)
    workload = Workload(count=3, size="4KiB", seed=7)
    prefix = f"{target.root}/run"
    target.backend.make_prefix(prefix)
    names = [f"{prefix}/{index}" for index in range(3)]
    plan = Plan(
        phases=(
            tuple(
                Request(kind=Kind.PUT, key=name, body=Part(index, 0, 4096))
                for index, name in enumerate(names)
            ),
        )
    )
    drawn = _Drawn()
    run = execute(
        target.backend,
        plan,
        streams=2,
        clock=StepClock(),
        timeout=None,
        bodies=[workload.payload_bytes(index) for index in range(3)],
        callback=drawn,
    )
    assert run.requests_by_kind() == {"put": 3}
    assert int(run.timings.nbytes.sum()) == 3 * 4096
    assert run.timings.max_in_flight <= 2
    for index, name in enumerate(names):
        assert target.fs.cat_file(name) == workload.payload_bytes(index)
    # progress: the plan's bytes as the size, 0 first, every byte by the end
    assert drawn.sizes == [3 * 4096]
    assert drawn.values[0] == 0
    assert drawn.values[-1] == 3 * 4096

    heads = execute(target.backend, head_plan(names), streams=1, clock=StepClock(), timeout=None)
    assert [outcome.size for outcome in heads.outcomes] == [4096, 4096, 4096]


def test_execute_raises_the_first_failure_of_the_plan(disk: Target) -> None:
    missing = f"{disk.root}/never-written"
    with pytest.raises(FileNotFoundError):
        execute(disk.backend, head_plan([missing]), streams=1, clock=StepClock(), timeout=None)


def test_a_failed_plan_is_aborted_before_its_error_goes_on(disk: Target) -> None:
    """A split upload to the local disk holds its file open between parts: a part that
    fails makes the abort close it, and the part's error is what the caller sees."""
    path = f"{disk.root}/split"
    size = 2 * 4096
    payload = Workload(count=1, size=size, seed=3).payload_bytes(0)
    plan = Plan(
        phases=(
            (Request(kind=Kind.CREATE_MULTIPART, key=path, start=0, stop=size),),
            (
                Request(kind=Kind.PUT_PART, key=path, start=0, stop=4096, part_number=1),
                Request(kind=Kind.PUT_PART, key=path, start=4096, stop=size, part_number=2),
            ),
            (Request(kind=Kind.COMPLETE_MULTIPART, key=path),),
        )
    )

    def refused() -> Outcome:
        raise ConnectionResetError("part 2 refused")

    def second_part_fails(job: SyncJob, position: int) -> SyncJob:
        return SyncJob(job.kind, refused) if position == 2 else job

    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ConnectionResetError, match="part 2 refused"):
        execute(
            disk.backend,
            plan,
            streams=1,
            clock=StepClock(),
            timeout=None,
            bodies=[None, payload[:4096], payload[4096:], None],
            wrap=Wrapper(lambda job, position: job, second_part_fails),
        )
    assert len(os.listdir("/proc/self/fd")) == open_before  # the file was closed


# -- open_run, hold_prefix ----------------------------------------------------------------
def test_open_run_makes_a_fresh_prefix_and_its_folders(disk: Target) -> None:
    environment, prefix = open_run(disk, "lab", None, folders=("a", "b"))
    assert environment.label == "lab"
    assert prefix.startswith(f"{disk.root}/storeprobe-")
    assert Path(prefix, "a").is_dir()
    assert Path(prefix, "b").is_dir()
    _, second = open_run(disk, None, None)
    assert second != prefix


def test_open_run_on_a_missing_root_names_it_and_leaves_nothing(tmp_path: Path) -> None:
    target = Target.from_url(str(tmp_path / "absent"))
    with pytest.raises(TargetNotFoundError, match="absent"):
        open_run(target, None, None, folders=("a",))
    assert not (tmp_path / "absent").exists()


def test_open_run_that_fails_in_its_folders_removes_what_it_made(disk: Target) -> None:
    # a folder under a folder not made first: the prefix and the folders made are removed
    with pytest.raises(OSError, match="preparing the run"):
        open_run(disk, None, None, folders=("a", "missing/b"))
    assert list(Path(disk.root).iterdir()) == []


def test_hold_prefix_writes_one_small_object_under_the_prefix(memory: Target) -> None:
    prefix = f"{memory.root}/run"
    name = hold_prefix(memory, prefix, timeout=5.0)
    assert name == f"{prefix}/{HOLD}"
    assert memory.fs.cat_file(name) == b"storeprobe run in progress\n"


# -- delete_names -------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["disk", "memory"])
def test_delete_names_deletes_exactly_the_names_given(
    where: str, request: pytest.FixtureRequest
) -> None:
    target: Target = request.getfixturevalue(where)
    prefix = f"{target.root}/run"
    target.backend.make_prefix(prefix)
    written = [f"{prefix}/{index}" for index in range(5)]
    other = f"{prefix}/not-ours"
    _write(target, *written, other)
    left = delete_names(target, written, streams=3, clock=StepClock(), timeout=5.0)
    assert left == []
    assert sorted(target.fs.find(prefix)) == [target.fs._strip_protocol(other)]


def test_delete_names_counts_a_name_already_gone_as_deleted(disk: Target) -> None:
    present = f"{disk.root}/present"
    _write(disk, present)
    left = delete_names(
        disk, [f"{disk.root}/gone", present], streams=1, clock=StepClock(), timeout=None
    )
    assert left == []
    assert not Path(present).exists()


def test_delete_names_reports_each_name_it_could_not_delete_with_why(disk: Target) -> None:
    folder = Path(disk.root, "a-folder")
    folder.mkdir()
    deleted = f"{disk.root}/deleted"
    _write(disk, deleted)
    left = delete_names(disk, [str(folder), deleted], streams=1, clock=StepClock(), timeout=None)
    assert [entry.name for entry in left] == [str(folder)]
    assert "IsADirectoryError" in left[0].reason
    assert folder.is_dir()  # a name is never deleted recursively
    assert not Path(deleted).exists()  # the failure did not stop the rest


class _Batches(ObstoreBackend):
    """obstore on S3 with bulk deletes of at most 2 names a request."""

    capabilities = attrs.evolve(ObstoreBackend.capabilities, deletes_per_request=2)


class _OneByOne(ObstoreBackend):
    """obstore on S3 deleting one name a request (as on GCS, Azure, a disk)."""

    capabilities = attrs.evolve(ObstoreBackend.capabilities, deletes_per_request=1)


@pytest.mark.parametrize(("backend", "per_request"), [(_OneByOne, 1), (_Batches, 2), (None, 1000)])
def test_once_the_storage_is_unreachable_the_other_names_are_not_attempted(
    nobody: Target, backend: type[ObstoreBackend] | None, per_request: int
) -> None:
    if backend is not None:
        nobody = Target(nobody.fs, nobody.root, backend=backend(nobody.fs))
    assert nobody.backend.capabilities.deletes_per_request == per_request
    names = [f"{nobody.root}/run/{index}" for index in range(4)]
    left = delete_names(nobody, names, streams=1, clock=StepClock(), timeout=5.0)
    assert [entry.name for entry in left] == names  # every name reported, in order
    first = left[0].reason
    assert "error sending request" in first
    # the names of the first request carry its error; those of the others were not sent
    expected = [first if at < per_request else f"not attempted: {first}" for at in range(4)]
    assert [entry.reason for entry in left] == expected


def test_delete_names_of_nothing_deletes_nothing(disk: Target) -> None:
    assert delete_names(disk, [], streams=4, clock=StepClock(), timeout=None) == []


# -- clear_prefix -------------------------------------------------------------------------
def test_clear_prefix_deletes_what_is_still_listed_under_the_run_prefix(memory: Target) -> None:
    prefix = f"{memory.root}/run"
    stray = [f"{prefix}/x/1", f"{prefix}/y"]
    _write(memory, *stray)
    outside = f"{memory.root}/run-other/keep"  # shares the prefix's text, not its folder
    _write(memory, outside)
    left = clear_prefix(memory, prefix, [], streams=2, clock=StepClock(), timeout=5.0)
    assert left == []
    assert memory.fs.find(prefix) == []
    assert memory.fs.exists(outside)


def test_clear_prefix_keeps_a_leftover_the_listing_does_not_show(memory: Target) -> None:
    """A listing that does not show a name is no proof it is gone."""
    prefix = f"{memory.root}/run"
    earlier = Leftover(name=f"{prefix}/unlisted", reason="ConnectionError: reset")
    assert clear_prefix(memory, prefix, [earlier], streams=1, clock=StepClock(), timeout=5.0) == [
        earlier
    ]


def test_clear_prefix_drops_a_leftover_its_second_delete_removed(memory: Target) -> None:
    prefix = f"{memory.root}/run"
    name = f"{prefix}/retried"
    _write(memory, name)
    earlier = Leftover(name=memory.fs._strip_protocol(name), reason="TimeoutError: slow")
    left = clear_prefix(memory, prefix, [earlier], streams=1, clock=StepClock(), timeout=5.0)
    assert left == []
    assert not memory.fs.exists(name)


def test_clear_prefix_names_the_prefix_when_it_cannot_list(nobody: Target) -> None:
    prefix = f"{nobody.root}/run"
    (left,) = clear_prefix(nobody, prefix, [], streams=1, clock=StepClock(), timeout=5.0)
    assert left.name == prefix
    assert left.reason.startswith("cannot list: ")
    assert "error sending request" in left.reason


# -- remove_folders -----------------------------------------------------------------------
def test_remove_folders_removes_empty_folders_in_order_and_names_the_rest(disk: Target) -> None:
    root = Path(disk.root)
    (root / "run" / "inner").mkdir(parents=True)
    (root / "full").mkdir()
    (root / "full" / "file").write_bytes(b"x")
    folders = [
        str(root / "run" / "inner"),
        str(root / "run"),
        str(root / "gone"),
        str(root / "full"),
    ]
    left = remove_folders(disk, folders)
    assert [entry.name for entry in left] == [str(root / "full")]
    not_empty = f"OSError: [Errno {errno.ENOTEMPTY}] {os.strerror(errno.ENOTEMPTY)}"
    assert left[0].reason.startswith(not_empty)
    assert not (root / "run").exists()
    assert (root / "full" / "file").exists()  # never recursive


# -- cleanup_notice, Leftover -------------------------------------------------------------
def test_a_leftover_reads_name_then_why() -> None:
    assert str(Leftover(name="bench/run/0", reason="PermissionError: denied")) == (
        "bench/run/0 (PermissionError: denied)"
    )


def test_cleanup_notice_is_none_when_nothing_remains() -> None:
    assert cleanup_notice("bench/run", []) is None


def test_cleanup_notice_counts_every_leftover_and_names_the_first_five() -> None:
    leftovers = [Leftover(name=f"bench/run/{index}", reason="denied") for index in range(7)]
    notice = cleanup_notice("bench/run", leftovers)
    assert notice is not None
    assert notice.code is Code.CLEANUP_INCOMPLETE
    assert "7 item(s) under bench/run" in notice.message
    assert "bench/run/4 (denied)" in notice.message
    assert "bench/run/5" not in notice.message
    assert notice.message.endswith(" ...")
    assert notice.fix == "delete them by hand"
    few = cleanup_notice("bench/run", leftovers[:2])
    assert few is not None
    assert not few.message.endswith(" ...")


# -- bounded ------------------------------------------------------------------------------
def test_bounded_runs_the_step_and_hands_back_its_error() -> None:
    done: list[int] = []
    bounded(lambda: done.append(1), timeout=None)
    bounded(lambda: done.append(2), timeout=5.0)
    assert done == [1, 2]

    def fails() -> None:
        raise PermissionError("denied")

    with pytest.raises(PermissionError, match="denied"):
        bounded(fails, timeout=5.0)


def test_bounded_gives_up_on_a_step_that_never_answers() -> None:
    release = threading.Event()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"no answer within 0\.2 s"):
            bounded(release.wait, timeout=0.2)
    finally:
        release.set()  # the abandoned step ends
    assert time.monotonic() - started < 5.0


def test_bounded_each_runs_the_steps_in_order_in_one_thread() -> None:
    threads: list[int] = []
    done: list[int] = []

    def step(number: int) -> None:
        threads.append(threading.get_ident())
        done.append(number)

    bounded_each([lambda n=n: step(n) for n in range(50)], timeout=5.0)  # type: ignore[misc]
    assert done == list(range(50))
    assert len(set(threads)) == 1
    assert threads[0] != threading.get_ident()
    bounded_each([lambda: step(50)], timeout=None)  # no timeout: here, in this thread
    assert done[-1] == 50
    assert threads[-1] == threading.get_ident()


def test_bounded_each_stops_at_the_first_failing_step() -> None:
    done: list[int] = []

    def fails() -> None:
        raise PermissionError("denied")

    with pytest.raises(PermissionError, match="denied"):
        bounded_each([lambda: done.append(1), fails, lambda: done.append(3)], timeout=5.0)
    assert done == [1]


def test_bounded_each_gives_up_on_one_step_that_never_answers() -> None:
    release = threading.Event()
    done: list[int] = []
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"no answer within 0\.2 s"):
            bounded_each([lambda: done.append(1), release.wait, lambda: done.append(3)], 0.2)
    finally:
        release.set()  # the abandoned step ends
    assert done[:1] == [1]
    assert time.monotonic() - started < 5.0


# --- an interruption while a window is handed to the client's loop ---------------------
@pytest.fixture
def client_loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def _interrupt_on_hand_over(loop: asyncio.AbstractEventLoop, after: threading.Event | None) -> None:
    """Make the next hand-over to ``loop`` raise KeyboardInterrupt in the calling thread,
    as a Ctrl-C does when it lands there: once ``after`` is set (the loop already runs
    the coroutine), or before anything was handed over (None)."""
    original = loop.call_soon_threadsafe

    def interrupted(callback: Any, *args: Any, **kwargs: Any) -> Any:
        loop.call_soon_threadsafe = original  # type: ignore[method-assign]
        if after is None:
            raise KeyboardInterrupt
        original(callback, *args, **kwargs)
        assert after.wait(10)
        raise KeyboardInterrupt

    loop.call_soon_threadsafe = interrupted  # type: ignore[method-assign,assignment]


def test_an_interrupt_while_a_window_is_handed_over_calls_it_off(
    client_loop: asyncio.AbstractEventLoop,
) -> None:
    """The loop ran the window before the hand-over returned (a busy machine), and Ctrl-C
    landed then: the window is called off before the interruption goes on to cleanup
    (it went on writing beside cleanup's deletes before)."""
    began = threading.Event()
    events: list[str] = []

    async def window() -> None:
        began.set()
        try:
            await asyncio.sleep(30)  # a request that has no answer yet
        except asyncio.CancelledError:
            events.append("called off")
            raise

    _interrupt_on_hand_over(client_loop, began)
    with pytest.raises(KeyboardInterrupt):
        _drive(client_loop, window())
    assert events == ["called off"]  # before _drive gave the interruption back


def test_an_interrupt_before_the_hand_over_starts_nothing(
    client_loop: asyncio.AbstractEventLoop, recwarn: pytest.WarningsRecorder
) -> None:
    events: list[str] = []

    async def window() -> None:
        events.append("started")

    _interrupt_on_hand_over(client_loop, None)
    with pytest.raises(KeyboardInterrupt):
        _drive(client_loop, window())
    time.sleep(0.05)  # the loop runs what it was handed, if anything
    assert events == []
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_a_window_driven_to_its_end_gives_its_result_or_its_error(
    client_loop: asyncio.AbstractEventLoop,
) -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    async def failing() -> None:
        raise OSError("refused")

    assert _drive(client_loop, value()) == 7
    with pytest.raises(OSError, match="refused"):
        _drive(client_loop, failing())
