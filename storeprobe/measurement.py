"""One measurement: a workload's upload or download, repeated, timed, verified, cleaned up.

For each of ``repeats`` repetitions a :class:`Measurement`

1. names fresh objects and derives their content from the workload's seed and the
   repeat (each repeat has its own bytes, so no deduplicating store flatters later ones);
2. for a download, uploads those objects first (untimed), evicts caches, and asks the
   storage for each object's size (untimed; it must match what was written);
3. runs the timed window: the plan's requests with at most ``streams`` in flight, from
   the first request's start to the last one's end;
4. verifies (untimed): every downloaded byte against the regenerated payload;
5. deletes exactly the names this repeat wrote.

The layout (how the workload is cut into requests) is decided once, before any I/O
(:func:`storeprobe.planning.choose`). All names live under a fresh run prefix; whatever
happens, a ``finally`` deletes every name the measurement recorded and removes the
prefix. Failures become error notices of the Result; cleanup that cannot finish becomes
a ``cleanup-incomplete`` warning naming what was left.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from attrs import frozen
from fsspec.asyn import sync
from fsspec.callbacks import Callback

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backends.base import Landing
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.environment import Environment
from storeprobe.errors import StoreProbeWarning, TargetUnreachableError
from storeprobe.notices import Code, Notice
from storeprobe.planning import (
    Layout,
    Plan,
    choose,
    delete_plan,
    download_plan,
    head_plan,
    upload_plan,
)
from storeprobe.progress import Pump
from storeprobe.request import AsyncJob, Body, Kind, Outcome, SyncJob
from storeprobe.result import Result, Sample
from storeprobe.staging import Staging
from storeprobe.stats import stability_notices
from storeprobe.target import Target
from storeprobe.transfer import Clock, Meter, Run, run_async, run_sync
from storeprobe.verification import (
    VerificationError,
    check_memory,
    check_sizes,
    prefaulted,
    verify_outcomes,
    verify_staged,
)
from storeprobe.workload import Workload

__all__ = ["Measurement"]

Backend = AsyncBackend | SyncBackend
#: called after a job with its plan position and outcome; returns the outcome to keep
Settle = Callable[[int, Outcome], Outcome]
_LOCAL = frozenset({"file", "local", "memory"})


@frozen(kw_only=True)
class Measurement:
    """One probe call's settings, bound to its target (see the module docstring)."""

    target: Target
    operation: Literal["upload", "download"]
    workload: Workload
    streams: int
    repeats: int
    verify: bool
    timeout: float | None
    part_size: int | None
    stage_above: int
    label: str | None
    clock: Clock
    callback: Callback | None

    # -- the plan's shape ------------------------------------------------------------------
    def _layout(self, operation: Literal["upload", "download"]) -> Layout:
        backend = self.target.backend
        return choose(
            backend.capabilities,
            backend.client,
            operation,
            self.workload,
            self.streams,
            part_size=self.part_size,
            stage_above=self.stage_above,
        )

    def run(self) -> Result:
        """Measure, and return the Result (errors and warnings included)."""
        target, backend, workload = self.target, self.target.backend, self.workload
        layout = self._layout(self.operation)
        setup = self._layout("upload") if self.operation == "download" else None
        writes = setup or layout
        if writes.staged:
            check_memory(workload, 2 * writes.effective_streams * writes.part_size, "the parts in flight")
        elif not layout.staged:
            check_memory(workload, workload.total_bytes, "one repeat's payload")
        environment = Environment.capture(self.label)
        prefix = target.new_prefix()
        try:
            _bounded(lambda: backend.check_root(target.root), self.timeout)
            _bounded(lambda: backend.make_prefix(prefix), self.timeout)
        except Exception as exc:
            raise target.translate(exc, "preparing the run") from None

        notices: list[Notice] = list(layout.notices)
        if self.operation == "download" and (suspect := backend.cache_suspect()):
            notices.append(
                Notice(code=Code.NO_CACHE_EVICTION, message=suspect, fix="treat it as an upper bound")
            )
        for notice in layout.notices:
            if notice.code is Code.CANNOT_SPLIT:
                warnings.warn(str(notice), StoreProbeWarning, stacklevel=4)
        written: list[str] = []
        deleted: set[str] = set()
        samples: list[Sample] = []
        errors: list[Notice] = []
        reader: Backend | None = None
        strategy = layout.strategy
        try:
            for repeat in range(self.repeats):
                names = [f"{prefix}/r{repeat}-{index:07d}" for index in range(workload.count)]
                content = workload.with_seed(((workload.seed or 0) + repeat) % 2**63)
                written.extend(names)
                try:
                    if self.operation == "upload":
                        samples.append(self._upload(layout, content, names))
                    else:
                        assert setup is not None
                        self._setup(setup, content, names)
                        if reader is None:
                            reader = self._reader(layout, names[0])
                            if reader is not backend:
                                strategy += " (ranges read with s3fs)"
                                notices.append(_RANGES_VIA_S3FS)
                        samples.append(self._download(layout, content, names, reader))
                except Exception as exc:
                    errors.append(self._error(exc, repeat + 1))
                finally:
                    remaining = {entry.split(" (", 1)[0] for entry in self._delete(names)}
                    deleted.update(name for name in names if name not in remaining)
        finally:
            leftovers = self._delete([name for name in written if name not in deleted])
            try:
                backend.remove_prefix(prefix)
            except FileNotFoundError:
                pass
            except Exception as exc:
                leftovers.append(f"{prefix} ({target.describe_error(exc)})")
        notices.extend(self._judge(samples))
        if leftovers:
            notices.append(
                Notice(
                    code=Code.CLEANUP_INCOMPLETE,
                    message=f"cleanup could not delete {len(leftovers)} item(s) under "
                    f"{prefix}: "
                    + ", ".join(leftovers[:5])
                    + (" ..." if len(leftovers) > 5 else ""),
                    fix="delete them by hand",
                )
            )
        return Result(
            operation=self.operation,
            workload=workload,
            url=target.url,
            protocol=target.protocol,
            backend=backend.client,
            streams=self.streams,
            effective_streams=layout.effective_streams,
            strategy=strategy,
            samples=tuple(samples),
            errors=tuple(errors),
            warnings=tuple(notices),
            environment=environment,
        )

    def _judge(self, samples: Sequence[Sample]) -> list[Notice]:
        import numpy as np

        found = stability_notices(
            np.array([s.bytes_per_s for s in samples], dtype=np.float64),
            np.array([s.elapsed_ns for s in samples], dtype=np.int64),
            np.array(
                [np.nan if s.cpu_fraction is None else s.cpu_fraction for s in samples],
                dtype=np.float64,
            ),
            operation=self.operation,
            remote=self.target.protocol not in _LOCAL,
        )
        retried = sum(sample.retries or 0 for sample in samples)
        if retried:
            found.append(
                Notice(
                    code=Code.RETRIED,
                    message=f"the client retried {retried} failed request(s) inside the timed "
                    "windows: the figures include the failures and retry delays",
                    fix="check the storage's health or rate limits and run again",
                )
            )
        return found

    def _error(self, exc: BaseException, repeat: int) -> Notice:
        text = self.target.describe_error(exc)
        if isinstance(exc, VerificationError):
            code = Code.VERIFICATION_FAILED
        elif isinstance(exc, _ShortTransfer):
            code = Code.SHORT_TRANSFER
        elif isinstance(exc, TimeoutError | asyncio.TimeoutError):
            code = Code.TIMEOUT
        else:
            code = Code.REQUEST_FAILED
        return Notice(code=code, message=text, repeat=repeat)

    # -- one repeat ------------------------------------------------------------------------
    @staticmethod
    def _bodies(
        backend: Backend, plan: Plan, workload: Workload, staging: Staging | None
    ) -> list[Body | None]:
        """Each request's body, made before the window (from the repeat's workload)."""
        bodies: list[Body | None] = []
        for request in plan.requests:
            part = request.body
            if part is None:
                bodies.append(None)
            elif staging is None:
                bodies.append(backend.body(workload, part))
            elif request.part_size is not None:
                bodies.append(backend.whole_staged_file(staging))
            else:
                bodies.append(backend.staged_body(staging, part))
        return bodies

    def _upload(self, layout: Layout, workload: Workload, names: list[str]) -> Sample:
        backend = self.target.backend
        plan = upload_plan(layout, workload, names)
        staging = Staging.of_payload(workload, 0) if layout.staged else None
        try:
            bodies = self._bodies(backend, plan, workload, staging)
            settle = _release_parts(plan, staging) if staging is not None else None
            backend.fs.invalidate_cache()
            before = backend.retries_seen()
            run = self._execute(backend, plan, bodies, None, timed=True, settle=settle)
            del bodies
        finally:
            if staging is not None:
                staging.close()
        self._check_moved(run, workload)
        return _sample(run, _delta(backend.retries_seen(), before))

    def _setup(self, layout: Layout, workload: Workload, names: list[str]) -> None:
        """The untimed upload before a download, then caches evicted and sizes confirmed."""
        backend = self.target.backend
        plan = upload_plan(layout, workload, names)
        staging = Staging.of_payload(workload, 0) if layout.staged else None
        try:
            bodies = self._bodies(backend, plan, workload, staging)
            settle = _release_parts(plan, staging) if staging is not None else None
            self._execute(backend, plan, bodies, None, settle=settle)
            del bodies
        finally:
            if staging is not None:
                staging.close()
        backend.after_upload(names)
        if backend.capabilities.confirms_size:
            heads = head_plan(names)
            run = self._execute(backend, heads, [None] * len(names), None)
            check_sizes(heads.requests, run.outcomes, workload.size)
        backend.fs.invalidate_cache()

    def _reader(self, layout: Layout, probe_key: str) -> Backend:
        """The backend that reads this download, decided once, untimed."""
        backend = self.target.backend
        if layout.split and isinstance(backend, ObstoreBackend):
            reader: list[Backend] = []
            _bounded(lambda: reader.append(backend.range_reader(probe_key)), self.timeout)
            return reader[0]
        return backend

    def _download(
        self, layout: Layout, workload: Workload, names: list[str], reader: Backend
    ) -> Sample:
        backend = self.target.backend
        plan = download_plan(layout, workload, names)
        requests = plan.requests
        staging = Staging.blank(workload.size) if layout.staged else None
        try:
            landings: list[Landing]
            if staging is not None:
                landings = [staging.part(r.start or 0, r.stop or workload.size) for r in requests]
            elif reader.capabilities.reads_into:
                landings = [prefaulted(r.expected or workload.size) for r in requests]
            else:
                landings = [None] * len(requests)
            settle = _land_ranges(plan, staging) if staging is not None else None
            before = backend.retries_seen()
            run = self._execute(
                reader, plan, [None] * len(requests), landings, timed=True, settle=settle
            )
            del landings
            self._check_moved(run, workload)
            if self.verify:
                if staging is not None:
                    verify_staged(workload, staging)
                else:
                    index_of = {name: index for index, name in enumerate(names)}
                    verify_outcomes(workload, requests, run.outcomes, index_of)
        finally:
            if staging is not None:
                staging.close()
        return _sample(run, _delta(backend.retries_seen(), before))

    def _check_moved(self, run: Run, workload: Workload) -> None:
        moved = int(run.timings.nbytes.sum())
        if moved != workload.total_bytes:
            raise _ShortTransfer(
                f"moved {moved} bytes where the workload has {workload.total_bytes}"
            )

    # -- the engine --------------------------------------------------------------------------
    def _execute(
        self,
        backend: Backend,
        plan: Plan,
        bodies: Sequence[Body | None],
        landings: Sequence[Landing] | None,
        *,
        timed: bool = False,
        settle: Settle | None = None,
        streams: int | None = None,
    ) -> Run:
        """Run ``plan`` on ``backend`` with ≤ streams in flight; abort it after a failure."""
        streams = streams or self.streams
        landings = landings if landings is not None else [None] * len(bodies)
        meter = Meter() if timed and self.callback is not None else None
        if meter is not None:
            meter.reset(plan.expected_bytes)
        if isinstance(backend, AsyncBackend):
            bound = backend.bind(plan.phases, bodies, landings, self.clock)
            phases = bound.phases if settle is None else _settled_async(bound.phases, settle)
            try:
                with _pumping(meter, self.callback), warnings.catch_warnings():
                    # aiohttp advises streaming bodies over 1 MiB; parts are sent whole on purpose
                    warnings.filterwarnings("ignore", message="Sending a large body directly")
                    return sync(  # type: ignore[no-any-return]
                        backend.fs.loop, run_async, phases, streams, self.clock, self.timeout, meter
                    )
            except BaseException as exc:
                if bound.abort is not None:
                    try:
                        sync(backend.fs.loop, bound.abort)
                    except Exception:
                        pass
                cause = exc.__cause__
                if type(exc).__name__ == "FSTimeoutError" and isinstance(cause, TimeoutError):
                    raise cause from None  # fsspec's sync() drops the message; keep ours
                raise
        sync_bound = backend.bind(plan.phases, bodies, landings, self.clock)
        sync_phases = (
            sync_bound.phases if settle is None else _settled_sync(sync_bound.phases, settle)
        )
        try:
            with _pumping(meter, self.callback):
                return run_sync(sync_phases, streams, self.clock, meter)
        except BaseException:
            if sync_bound.abort is not None:
                try:
                    sync_bound.abort()
                except Exception:
                    pass
            raise

    def _delete(self, names: Sequence[str]) -> list[str]:
        """Delete ``names`` (untimed, ≤ streams at once); return those that remain.

        Each name is deleted on its own (never a recursive or listing delete). Once the
        storage is unreachable, the remaining names are not attempted: they are reported.
        """
        if not names:
            return []
        backend = self.target.backend
        target = self.target
        failed: list[str] = []
        unreachable: list[str] = []
        plan = delete_plan(names)

        def tolerate(position: int, exc: BaseException | None) -> bool:
            """True when the job should go on; records ``exc``."""
            name = names[position]
            if exc is None:
                if unreachable:
                    failed.append(f"{name} (not attempted: {unreachable[0]})")
                    return False
                return True
            if isinstance(exc, FileNotFoundError):
                return True
            error = target.translate(exc, "deleting")
            if isinstance(error, TargetUnreachableError) or isinstance(exc, TimeoutError):
                unreachable.append(target.describe_error(exc))
            failed.append(f"{name} ({target.describe_error(exc)})")
            return True

        try:
            if isinstance(backend, AsyncBackend):
                bound = backend.bind(plan.phases, [None] * len(names), [None] * len(names), self.clock)
                phases = _tolerant_async(bound.phases, tolerate, self.timeout)
                sync(backend.fs.loop, run_async, phases, self.streams, self.clock, None, None)
            else:
                sync_bound = backend.bind(
                    plan.phases, [None] * len(names), [None] * len(names), self.clock
                )
                run_sync(_tolerant_sync(sync_bound.phases, tolerate), self.streams, self.clock)
        except Exception as exc:
            return [f"{name} ({target.describe_error(exc)})" for name in names]
        backend.fs.invalidate_cache()
        return failed


_RANGES_VIA_S3FS = Notice(
    code=Code.RANGES_VIA_S3FS,
    message="this server answers ranged GETs with 200 instead of 206 Partial Content, which "
    "obstore refuses: the byte ranges were read with s3fs",
    fix="compare split downloads from this server as s3fs figures",
)


class _ShortTransfer(OSError):
    """The window moved another number of bytes than the workload has."""


def _delta(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else after - before


def _sample(run: Run, retries: int | None) -> Sample:
    timings = run.timings
    opened = int(timings.start_ns.min())
    return Sample(
        nbytes=int(timings.nbytes.sum()),
        elapsed_ns=int(timings.end_ns.max()) - opened,
        latencies_ns=timings.end_ns - timings.start_ns,
        max_in_flight=timings.max_in_flight * run.inner,
        retries=retries,
        offsets_ns=timings.start_ns - opened,
        request_bytes=timings.nbytes,
        workers=timings.worker,
        ttfb_ns=timings.ttfb_ns[timings.ttfb_ns >= 0],
        cpu_ns=timings.cpu_ns,
        requests_by_kind=run.requests_by_kind(),
        bytes_sent=int(timings.sent.sum()),
        bytes_received=int(timings.received.sum()),
    )


class _pumping:  # noqa: N801 - used as a context manager
    """Progress from a separate thread while the window runs (nothing when no callback)."""

    def __init__(self, meter: Meter | None, callback: Callback | None) -> None:
        self.pump = Pump(meter, callback) if meter is not None and callback is not None else None

    def __enter__(self) -> None:
        if self.pump is not None:
            self.pump.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.pump is not None:
            self.pump.__exit__(None, None, None)


def _release_parts(plan: Plan, staging: Staging) -> Settle:
    """After each part of a staged upload: unmap its pages (the file keeps them)."""
    requests = plan.requests

    def settle(position: int, outcome: Outcome) -> Outcome:
        request = requests[position]
        if request.kind is Kind.PUT_PART and request.start is not None and request.stop is not None:
            staging.release(request.start, request.stop)
        return outcome

    return settle


def _land_ranges(plan: Plan, staging: Staging) -> Settle:
    """After each range of a staged download: its bytes in the file, its pages unmapped.

    A client that returned its own buffer instead of filling the staged view has it
    copied into the file; the outcome keeps no data (verification reads the file).
    """
    requests = plan.requests
    mapping = staging.view.obj

    def settle(position: int, outcome: Outcome) -> Outcome:
        request = requests[position]
        start = request.start or 0
        stop = request.stop if request.stop is not None else staging.size
        data = outcome.data
        if data is not None and not (isinstance(data, memoryview) and data.obj is mapping):
            size = min(len(data), stop - start)
            staging.view[start : start + size] = memoryview(data)[:size]
        staging.release(start, stop)
        return outcome._replace(data=None)

    return settle


def _settled_async(
    phases: tuple[tuple[AsyncJob, ...], ...], settle: Settle
) -> tuple[tuple[AsyncJob, ...], ...]:
    def wrap(job: AsyncJob, position: int) -> AsyncJob:
        call = job.call

        async def settled() -> Outcome:
            return settle(position, await call())

        return AsyncJob(job.kind, settled, job.inner)

    return _positioned(phases, wrap)


def _settled_sync(
    phases: tuple[tuple[SyncJob, ...], ...], settle: Settle
) -> tuple[tuple[SyncJob, ...], ...]:
    def wrap(job: SyncJob, position: int) -> SyncJob:
        call = job.call
        return SyncJob(job.kind, lambda: settle(position, call()), job.inner)

    return _positioned(phases, wrap)


_J = TypeVar("_J", AsyncJob, SyncJob)


def _positioned(
    phases: tuple[tuple[_J, ...], ...], wrap: Callable[[_J, int], _J]
) -> tuple[tuple[_J, ...], ...]:
    result: list[tuple[_J, ...]] = []
    position = 0
    for phase in phases:
        wrapped: list[_J] = []
        for job in phase:
            wrapped.append(wrap(job, position))
            position += 1
        result.append(tuple(wrapped))
    return tuple(result)


def _tolerant_async(
    phases: tuple[tuple[AsyncJob, ...], ...],
    tolerate: Callable[[int, BaseException | None], bool],
    timeout: float | None,
) -> tuple[tuple[AsyncJob, ...], ...]:
    def wrap(job: AsyncJob, position: int) -> AsyncJob:
        call = job.call

        async def tolerant() -> Outcome:
            if not tolerate(position, None):
                return Outcome()
            try:
                await asyncio.wait_for(call(), timeout)
            except Exception as exc:
                tolerate(position, exc)
            return Outcome()

        return AsyncJob(job.kind, tolerant)

    return _positioned(phases, wrap)


def _tolerant_sync(
    phases: tuple[tuple[SyncJob, ...], ...],
    tolerate: Callable[[int, BaseException | None], bool],
) -> tuple[tuple[SyncJob, ...], ...]:
    def wrap(job: SyncJob, position: int) -> SyncJob:
        call = job.call

        def tolerant() -> Outcome:
            if not tolerate(position, None):
                return Outcome()
            try:
                call()
            except Exception as exc:
                tolerate(position, exc)
            return Outcome()

        return SyncJob(job.kind, tolerant)

    return _positioned(phases, wrap)


def _bounded(call: Callable[[], object], timeout: float | None) -> None:
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
