"""Run a plan on a backend: bind its requests, drive the engine, abort after a failure.

:func:`execute` is the one place where a plan meets a client: the backend binds the
plan's requests to jobs (with the bodies and landing buffers made before the window),
an optional :class:`~storeprobe.jobs.Wrapper` wraps each job, and the engine runs them
on the client's event loop (asynchronous clients) or a thread pool (synchronous ones).
A failed plan is aborted (a half-done multipart upload, an open file) before the error
goes on. Progress, when asked, is pumped from another thread (:mod:`storeprobe.progress`).

:func:`open_run` prepares a run (environment, a fresh prefix, the root checked);
:func:`delete_names` deletes what a run wrote (in bulk where the client can), tolerating
failures;
:func:`clear_prefix` then lists the run prefix and deletes what is still listed under it;
:func:`remove_folders` removes the run's (empty) folders; what remains is a typed
:class:`Leftover`, named in one ``cleanup-incomplete`` warning (:func:`cleanup_notice`);
:func:`bounded` runs one synchronous preparation step with a deadline.

Why one module (~520 lines): a run's life on a backend (open it, run its plans, clean
up after it) shares one vocabulary (the target's error descriptions, the
:class:`Leftover` each cleanup step returns, the deadline of :func:`bounded`) and is read
in that order; the engine that times requests is :mod:`storeprobe.transfer`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import TypeVar

from attrs import frozen
from fsspec.asyn import sync
from fsspec.callbacks import Callback

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backends.base import Landing
from storeprobe.backends.bulk_delete import KeysNotDeletedError
from storeprobe.environment import Environment
from storeprobe.errors import TargetUnreachableError
from storeprobe.jobs import Wrapper, positioned, tolerating
from storeprobe.notices import Code, Notice
from storeprobe.planning import Plan, bulk_delete_plan, delete_plan
from storeprobe.progress import Pump
from storeprobe.request import Body
from storeprobe.target import Target
from storeprobe.transfer import Clock, Meter, Run, run_async, run_sync

__all__ = [
    "HOLD",
    "Leftover",
    "bounded",
    "bounded_each",
    "cleanup_notice",
    "clear_prefix",
    "delete_names",
    "execute",
    "hold_prefix",
    "open_run",
    "remove_folders",
    "remove_run",
]


@frozen(kw_only=True)
class Leftover:
    """A name a run wrote (or a folder it made) that cleanup could not delete, and why."""

    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


def cleanup_notice(prefix: str, leftovers: Sequence[Leftover]) -> Notice | None:
    """The ``cleanup-incomplete`` warning naming what remains under ``prefix`` (None when
    nothing does)."""
    if not leftovers:
        return None
    shown = ", ".join(str(left) for left in leftovers[:5]) + (" ..." if len(leftovers) > 5 else "")
    return Notice(
        code=Code.CLEANUP_INCOMPLETE,
        message=f"cleanup could not delete {len(leftovers)} item(s) under {prefix}: {shown}",
        fix="delete them by hand",
    )


def remove_folders(target: Target, folders: Sequence[str]) -> list[Leftover]:
    """Remove each (now empty) folder in order, never recursively; one already gone
    counts as removed; return those that remain, each with why (untimed)."""
    left: list[Leftover] = []
    for folder in folders:
        try:
            target.backend.remove_prefix(folder)
        except FileNotFoundError:
            pass
        except Exception as exc:
            left.append(Leftover(name=folder, reason=target.describe_error(exc)))
    return left


_T = TypeVar("_T")


@contextlib.contextmanager
def _pumping(meter: Meter | None, callback: Callback | None) -> Iterator[None]:
    if meter is None or callback is None:
        yield
        return
    with Pump(meter, callback):
        yield


def execute(
    backend: AsyncBackend | SyncBackend,
    plan: Plan,
    *,
    streams: int,
    clock: Clock,
    timeout: float | None,
    bodies: Sequence[Body | None] | None = None,
    landings: Sequence[Landing] | None = None,
    wrap: Wrapper | None = None,
    callback: Callback | None = None,
    total: int | None = None,
) -> Run:
    """Run ``plan`` on ``backend`` with ≤ ``streams`` requests in flight.

    ``bodies`` and ``landings`` follow the plan's requests (None: none). ``callback``
    gets the progress of the run's payload bytes (of ``total``, by default what the
    plan's bodies and ranges say), from another thread.
    """
    count = len(plan.requests)
    bodies = bodies if bodies is not None else [None] * count
    landings = landings if landings is not None else [None] * count
    meter = None
    if callback is not None:
        meter = Meter()
        meter.reset(plan.expected_bytes if total is None else total)
    if isinstance(backend, AsyncBackend):
        bound = backend.bind(plan.phases, bodies, landings, clock)
        phases = bound.phases if wrap is None else positioned(bound.phases, wrap.for_async)
        try:
            with _pumping(meter, callback), warnings.catch_warnings():
                # aiohttp advises streaming bodies over 1 MiB; parts are sent whole on purpose
                warnings.filterwarnings("ignore", message="Sending a large body directly")
                return _drive(backend.fs.loop, run_async(phases, streams, clock, timeout, meter))
        except BaseException:
            if bound.abort is not None:
                with contextlib.suppress(Exception):
                    sync(backend.fs.loop, bound.abort)
            raise
    sync_bound = backend.bind(plan.phases, bodies, landings, clock)
    sync_phases = (
        sync_bound.phases if wrap is None else positioned(sync_bound.phases, wrap.for_sync)
    )
    try:
        with _pumping(meter, callback):
            return run_sync(sync_phases, streams, clock, meter)
    except BaseException:
        if sync_bound.abort is not None:
            with contextlib.suppress(Exception):
                sync_bound.abort()
        raise


#: how long an interrupted run waits for its cancelled requests to end (seconds)
CANCEL_GRACE_S = 10.0


def _drive(loop: asyncio.AbstractEventLoop, coro: Coroutine[object, object, _T]) -> _T:
    """Run ``coro`` on the client's event loop (another thread) and wait for its result.

    Unlike fsspec's ``sync``, an interruption of the waiting thread (Ctrl-C raises
    KeyboardInterrupt there) calls the coroutine off and waits until it has ended (at
    most :data:`CANCEL_GRACE_S`): the requests of an interrupted window are called off
    before the caller's cleanup deletes what was written, instead of going on beside it.

    That holds wherever the interruption lands, even while the coroutine is being
    handed to the loop: the loop may start it and send its first requests before the
    hand-over returns (a busy machine gives the loop thread the GIL first), and an
    interruption there used to leave no handle to cancel it by, so the window went on
    writing while cleanup deleted (1 run in 11 under two CPU burners,
    ``test_cli_interrupted_by_a_signal_cleans_up``). So the start and the call-off are
    both callbacks on the loop, which runs them in the order they were handed over.
    """
    ended = threading.Event()
    outcome: concurrent.futures.Future[_T] = concurrent.futures.Future()
    started: list[asyncio.Task[_T]] = []
    called_off: list[bool] = []

    def finish(task: asyncio.Task[_T]) -> None:
        if task.cancelled():
            outcome.cancel()
        elif (failure := task.exception()) is not None:
            outcome.set_exception(failure)
        else:
            outcome.set_result(task.result())
        ended.set()

    def start() -> None:  # on the loop
        if called_off:
            return
        task = loop.create_task(coro)
        task.add_done_callback(finish)
        started.append(task)

    def call_off() -> None:  # on the loop, after start() if it was handed over
        called_off.append(True)
        for task in started:
            task.cancel()  # its requests with it (the engine lets those in flight drain)
        if not started:
            ended.set()

    try:
        loop.call_soon_threadsafe(start)
        while not ended.wait(1):  # a bounded wait, so a signal is handled on every platform
            pass
        return outcome.result()
    except BaseException:
        with contextlib.suppress(RuntimeError):  # a closed loop runs nothing more
            loop.call_soon_threadsafe(call_off)
            ended.wait(CANCEL_GRACE_S)
        raise
    finally:
        if not started and ended.is_set():
            coro.close()  # never started: no "never awaited" warning


def bounded(call: Callable[[], object], timeout: float | None) -> None:
    """Run a synchronous preparation step, giving up after ``timeout`` seconds.

    The step runs in a daemon thread: a server that accepts and never answers makes the
    probe fail with a clear error instead of hanging (the stuck call is abandoned).
    """
    if timeout is None:
        call()
        return
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller below
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, name="storeprobe-prepare", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise TimeoutError(f"no answer within {timeout:g} s")
    if outcome[0] is not None:
        raise outcome[0]


def bounded_each(calls: Sequence[Callable[[], object]], timeout: float | None) -> None:
    """Run synchronous preparation steps one after the other, giving up when any one of
    them takes longer than ``timeout`` seconds (as :func:`bounded`, in one daemon thread
    for all of them instead of one per step: a few thousand folders of a tree are made
    without a thread each). The first step that fails stops the rest; its error is
    raised here."""
    if timeout is None:
        for call in calls:
            call()
        return
    finished = threading.Semaphore(0)
    failed: list[BaseException] = []

    def target() -> None:
        for call in calls:
            try:
                call()
            except BaseException as exc:  # handed to the caller below
                failed.append(exc)
                finished.release()
                return
            finished.release()

    threading.Thread(target=target, name="storeprobe-prepare", daemon=True).start()
    for _ in calls:
        if not finished.acquire(timeout=timeout):
            raise TimeoutError(f"no answer within {timeout:g} s")
        if failed:
            raise failed[0]


def delete_names(
    target: Target, names: Sequence[str], *, streams: int, clock: Clock, timeout: float | None
) -> list[Leftover]:
    """Delete ``names`` (untimed, ≤ ``streams`` requests at once); return those that
    remain, each with why.

    Where the backend deletes in bulk (``capabilities.deletes_per_request`` > 1: S3's
    DeleteObjects, up to 1000 names a request), the names go in the fewest requests of
    at most that many, their sizes even (:func:`~storeprobe.planning.bulk_delete_plan`),
    ≤ ``streams`` of them at once; a name the storage answers it did not delete is
    reported with its own error, and the names of a request refused whole (a server
    without DeleteObjects, an answer that does not say which keys failed) are deleted
    again one by one. Otherwise each name is
    deleted on its own. Never a recursive or listing delete; a name already gone counts
    as deleted. Once the storage is unreachable, the remaining names are not attempted:
    they are reported.
    """
    if not names:
        return []
    failed: list[Leftover] = []
    unreachable: list[str] = []
    singly = list(names)
    per_request = target.backend.capabilities.deletes_per_request
    if per_request > 1 and len(names) > 1:
        try:
            singly = _delete_in_bulk(
                target, names, per_request, failed, unreachable, streams, clock, timeout
            )
        except Exception as exc:
            return [Leftover(name=name, reason=target.describe_error(exc)) for name in names]
    if singly:
        try:
            _delete_singly(target, singly, failed, unreachable, streams, clock, timeout)
        except Exception as exc:
            failed += [Leftover(name=name, reason=target.describe_error(exc)) for name in singly]
    target.backend.fs.invalidate_cache()
    order = {name: at for at, name in enumerate(names)}
    return sorted(failed, key=lambda left: order.get(left.name, len(order)))


def _note_unreachable(target: Target, exc: BaseException, unreachable: list[str]) -> bool:
    """True (and ``exc`` noted) when ``exc`` says the storage is out of reach."""
    error = target.translate(exc, "deleting")
    if isinstance(error, TargetUnreachableError) or isinstance(exc, TimeoutError):
        unreachable.append(target.describe_error(exc))
        return True
    return False


def _delete_in_bulk(
    target: Target,
    names: Sequence[str],
    per_request: int,
    failed: list[Leftover],
    unreachable: list[str],
    streams: int,
    clock: Clock,
    timeout: float | None,
) -> list[str]:
    """Bulk deletes of ``names`` (see :func:`delete_names`); return the names of the
    requests refused whole, to be deleted one by one."""
    plan = bulk_delete_plan(names, per_request)
    batches = [request.keys for request in plan.requests]
    refused: list[str] = []

    def tolerate(position: int, exc: BaseException | None) -> bool:
        """True when the job should go on; records ``exc``."""
        batch = batches[position]
        if exc is None:
            if unreachable:
                reason = f"not attempted: {unreachable[0]}"
                failed.extend(Leftover(name=name, reason=reason) for name in batch)
                return False
            return True
        if isinstance(exc, KeysNotDeletedError):
            failed.extend(
                Leftover(name=name, reason=target.describe_error(why)) for name, why in exc.failures
            )
        elif _note_unreachable(target, exc, unreachable):
            reason = target.describe_error(exc)
            failed.extend(Leftover(name=name, reason=reason) for name in batch)
        else:
            refused.extend(batch)
        return True

    execute(
        target.backend,
        plan,
        streams=streams,
        clock=clock,
        timeout=None,
        wrap=tolerating(tolerate, timeout),
    )
    return refused


def _delete_singly(
    target: Target,
    names: Sequence[str],
    failed: list[Leftover],
    unreachable: list[str],
    streams: int,
    clock: Clock,
    timeout: float | None,
) -> None:
    """One delete request per name (see :func:`delete_names`)."""

    def tolerate(position: int, exc: BaseException | None) -> bool:
        """True when the job should go on; records ``exc``."""
        name = names[position]
        if exc is None:
            if unreachable:
                failed.append(Leftover(name=name, reason=f"not attempted: {unreachable[0]}"))
                return False
            return True
        if isinstance(exc, FileNotFoundError):
            return True
        _note_unreachable(target, exc, unreachable)
        failed.append(Leftover(name=name, reason=target.describe_error(exc)))
        return True

    execute(
        target.backend,
        delete_plan(names),
        streams=streams,
        clock=clock,
        timeout=None,
        wrap=tolerating(tolerate, timeout),
    )


def clear_prefix(
    target: Target,
    prefix: str,
    left: Sequence[Leftover],
    *,
    streams: int,
    clock: Clock,
    timeout: float | None,
) -> list[Leftover]:
    """After a run's names were deleted (``left``: those that remain, as :func:`delete_names`
    reports them): list the run prefix, delete every name still
    listed under it, list again; return what remains, each with why.

    The run prefix is fresh and unique (``storeprobe-<time>-<random>``), so what it holds
    is the run's own. A storage may answer a delete as done and keep the object (``rclone
    serve s3`` does when its view of a folder has lost a file): a listing may show it. An
    entry of ``left`` stays unless the listing shows its name, and then the second attempt
    decides: a listing that does not show a name is no proof it is gone. A name listed
    again after its second delete is reported, and so is a listing that fails. Untimed;
    each listing is bounded by ``timeout``.
    """
    remain = list(left)
    try:
        listed = _listed(target, prefix, timeout)
        if not listed:
            return remain
        shown = set(listed)
        remain = [entry for entry in remain if entry.name not in shown]
        remain += delete_names(target, listed, streams=streams, clock=clock, timeout=timeout)
        reported = {entry.name for entry in remain}
        remain += [
            Leftover(name=name, reason="still listed after its delete")
            for name in _listed(target, prefix, timeout)
            if name not in reported
        ]
    except Exception as exc:
        remain.append(Leftover(name=prefix, reason=f"cannot list: {target.describe_error(exc)}"))
    return remain


def _listed(target: Target, prefix: str, timeout: float | None) -> list[str]:
    """Every name listed under ``prefix`` (none when it does not exist), by the
    backend's own listing (:meth:`~storeprobe.backends.base.Backend.listed`)."""
    found: list[dict[str, int]] = []
    bounded(lambda: found.append(target.backend.listed(prefix)), timeout)
    return sorted(found[0])


#: the object a run whose workers write side by side keeps under its prefix until cleanup
HOLD = ".storeprobe-run"


def hold_prefix(target: Target, prefix: str, timeout: float | None) -> str:
    """Write one small object, :data:`HOLD`, under ``prefix`` and return its name (untimed).

    A server keeping objects as files (``rclone serve s3``) removes a folder, and each
    emptied parent, when its last object is deleted. Workers writing side by side under
    one run prefix then race: one deleting its last object removes the run prefix while
    another creates its folder in it, and that worker's PUT fails with a 500 (seen once in
    25 distributed downloads under load). The held object keeps the prefix from ever being
    empty until the run's cleanup deletes it; on an object store it is one small object
    more under the run's own prefix.
    """
    name = f"{prefix}/{HOLD}"
    backend = target.backend
    try:
        bounded(lambda: backend.fs.pipe_file(name, b"storeprobe run in progress\n"), timeout)
    except Exception as exc:
        raise target.translate(exc, "preparing the run") from None
    return name


def open_run(
    target: Target, label: str | None, timeout: float | None, folders: Sequence[str] = ()
) -> tuple[Environment, str]:
    """Capture the environment and make a fresh run prefix (and ``folders`` under it)
    after checking the root; storage errors become storeprobe's, scrubbed of secrets.

    Untimed, each step bounded by ``timeout``. Returns (environment, prefix).
    """
    backend = target.backend
    environment = Environment.capture(label, endpoint=target.endpoint)
    prefix = target.new_prefix()
    made = False
    try:
        bounded(lambda: backend.check_root(target.root), timeout)
        bounded(lambda: backend.make_prefix(prefix), timeout)
        made = True
        for folder in folders:
            bounded(functools.partial(backend.make_prefix, f"{prefix}/{folder}"), timeout)
    except Exception as exc:
        if made:
            remove_run(target, prefix, folders)
        raise target.translate(exc, "preparing the run") from None
    return environment, prefix


def remove_run(target: Target, prefix: str, folders: Sequence[str] = ()) -> None:
    """Remove ``folders`` under a run prefix, then the prefix (never recursive), each
    step's failure ignored: a run that stops before it starts leaves nothing it made."""
    for folder in (*folders, ""):
        with contextlib.suppress(Exception):
            target.backend.remove_prefix(f"{prefix}/{folder}".rstrip("/"))
