"""How and where: push a workload through a filesystem, time it, verify it, clean up.

One probe call (``upload`` or ``download``) does, for each of ``repeats`` repetitions:

1. generate the payloads for fresh object names (untimed; each repeat has its own
   content, so no deduplicating store can flatter later repeats);
2. for a download, upload those objects first (untimed), evict caches, and ask the
   storage for each object's size (untimed; it must match what was written);
3. run the timed window: at most ``streams`` requests in flight, the window running
   from the first request's start to the last request's end;
4. verify (untimed): every downloaded byte is compared with the regenerated payload;
5. delete exactly the names this repeat wrote.

All names live under a fresh run prefix ``<root>/storeprobe-<utc>-<random>``; whatever
happens, a ``finally`` deletes every name the probe recorded and removes the prefix.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import fsspec
import numpy as np
from attrs import define, field
from fsspec.asyn import sync
from fsspec.callbacks import Callback

from storeprobe.backends import Backend
from storeprobe.environment import Environment, check_label
from storeprobe.errors import ConfigurationError, StoreProbeWarning, TargetUnreachableError
from storeprobe.report import ResultSet
from storeprobe.result import OPERATIONS, Operation, Result, Sample
from storeprobe.staging import Staging
from storeprobe.stats import stability_warnings
from storeprobe.target import Target
from storeprobe.transfer import Clock, Plan, Timings, run_async, run_sync
from storeprobe.units import GiB, MiB, format_size, parse_size
from storeprobe.workload import Workload

__all__ = ["MAX_STREAMS", "Probe"]

#: Most requests in flight a probe accepts.
MAX_STREAMS = 1024
#: Most repeats a probe accepts.
MAX_REPEATS = 1000
_MAX_PARTS = 10_000


def _in_range(low: int, high: int, hint: str) -> Callable[[Any, attrs.Attribute[int], int], None]:
    def check(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigurationError(
                f"{attribute.name} must be an int from {low} to {high}, not {value!r}: {hint}"
            )

    return check


def _check_timeout(_: Any, __: Any, value: float | None) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        raise ConfigurationError(
            f"timeout must be a positive number of seconds or None, not {value!r}"
        )


def _part_size(value: int | str | None) -> int | None:
    return None if value is None else parse_size(value)


def _check_part_size(_: Any, __: Any, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigurationError(f"part_size must be positive, not {value}")


def _check_stage_above(_: Any, __: Any, value: int) -> None:
    if value < 1:
        raise ConfigurationError(f"stage_above must be positive, not {value}")


@define
class Probe:
    """Measures uploads and downloads of a :class:`Workload` on one filesystem path.

    ``streams`` is the number of requests in flight: ``streams=1`` keeps exactly one at
    any moment; ``streams=N`` moves N objects at once, or N parts / byte ranges of a
    single object where the backend can split it (the Result's ``strategy`` and
    ``effective_streams`` say what was done). ``timeout`` bounds each request, in
    seconds. ``part_size`` (bytes or ``"16MiB"``) sets the part size when one object is
    split; by default about four parts per stream, at least the backend's minimum.
    A split object of at least ``stage_above`` bytes (default 1 GiB) is staged through a
    local file so that memory holds only the parts in flight (see
    :mod:`storeprobe.staging`). ``clock`` returns nanoseconds and is replaceable for
    tests. ``callback`` (an ``fsspec.callbacks.Callback``, e.g. ``TqdmCallback``) is told
    the bytes of each timed repeat (``set_size``) and of each request as it completes
    (``relative_update``).
    """

    fs: fsspec.AbstractFileSystem
    path: str
    streams: int = field(
        default=1, kw_only=True, validator=_in_range(1, MAX_STREAMS, "use e.g. 1, 4 or 16")
    )
    repeats: int = field(
        default=3, kw_only=True, validator=_in_range(1, MAX_REPEATS, "3 is the usual choice")
    )
    verify: bool = field(default=True, kw_only=True)
    timeout: float | None = field(default=300.0, kw_only=True, validator=_check_timeout)
    part_size: int | None = field(
        default=None, kw_only=True, converter=_part_size, validator=_check_part_size
    )
    stage_above: int = field(
        default=GiB, kw_only=True, converter=parse_size, validator=_check_stage_above
    )
    label: str | None = field(default=None, kw_only=True)
    clock: Clock = field(default=time.perf_counter_ns, kw_only=True, repr=False)
    callback: Callback | None = field(default=None, kw_only=True, repr=False)
    target: Target = field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        check_label(self.label)
        self.target = Target(self.fs, self.path)
        self.target.backend.clock = self.clock
        self._check_part_size()

    def _check_part_size(self) -> None:
        minimum = self.target.backend.min_part_size
        if self.part_size is not None and self.part_size < minimum:
            raise ConfigurationError(
                f"part_size {format_size(self.part_size)} is below the minimum of "
                f"{format_size(minimum)} for {self.target.backend.name}: use at least that"
            )

    @classmethod
    def from_url(
        cls,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        client: str = "auto",
        **options: Any,
    ) -> Probe:
        """A probe of ``url`` opened with fsspec; ``options`` are the probe's own
        (``streams``, ``repeats``, ...). ``client`` picks the S3 client for ``s3://``
        (``"auto"``, ``"obstore"`` or ``"s3fs"``: see :meth:`Target.from_url`)."""
        target = Target.from_url(url, storage_options, client=client)
        probe = cls(target.fs, target.root, **options)
        probe.target = target
        target.backend.clock = probe.clock
        probe._check_part_size()
        return probe

    # -- the four probes users name --------------------------------------------------
    def upload_small(self) -> Result:
        """Upload 256 × 16 KiB."""
        return self.upload(Workload.small())

    def download_small(self) -> Result:
        """Download 256 × 16 KiB."""
        return self.download(Workload.small())

    def upload_large(self) -> Result:
        """Upload 1 × 256 MiB."""
        return self.upload(Workload.large())

    def download_large(self) -> Result:
        """Download 1 × 256 MiB."""
        return self.download(Workload.large())

    def run(self, workloads: Sequence[Workload] | None = None) -> ResultSet:
        """Upload and download each workload (default: small, then large)."""
        chosen = list(workloads) if workloads is not None else [Workload.small(), Workload.large()]
        return ResultSet([self.measure(op, workload) for workload in chosen for op in OPERATIONS])

    def with_streams(self, streams: int) -> Probe:
        """The same probe (same target and options) with another stream count."""
        probe = attrs.evolve(self, streams=streams)  # every option carried over
        probe.target = self.target
        return probe

    def sweep(
        self,
        operation: Operation,
        workload: Workload,
        streams: Sequence[int] = (1, 2, 4, 8, 16, 32),
    ) -> ResultSet:
        """Run one probe at each stream count; ``.saturation()`` on the returned set
        names the smallest count reaching 95 % of the best throughput."""
        if not streams:
            raise ConfigurationError("sweep needs at least one stream count")
        probes = [self.with_streams(count) for count in streams]  # validates every count first
        return ResultSet([probe.measure(operation, workload) for probe in probes])

    def upload(self, workload: Workload) -> Result:
        """Time writing ``workload`` to fresh names."""
        return self.measure("upload", workload)

    def download(self, workload: Workload) -> Result:
        """Time reading ``workload`` back after an untimed upload."""
        return self.measure("download", workload)

    # -- the measurement -----------------------------------------------------------------
    def measure(self, operation: Operation, workload: Workload) -> Result:
        """Run ``operation`` on ``workload`` ``repeats`` times and return the Result."""
        if operation not in OPERATIONS:
            raise ConfigurationError(f"operation must be 'upload' or 'download', not {operation!r}")
        if not isinstance(workload, Workload):
            raise ConfigurationError(
                "workload must be a Workload (e.g. Workload.small()), "
                f"not {type(workload).__name__}"
            )
        target = self.target
        backend = target.backend
        shape = _Shape.choose(backend, workload, self.streams, self.part_size)
        can_stage = backend.splits_uploads if operation == "upload" else backend.reads_ranges
        shape.staged = shape.split and workload.size >= self.stage_above and can_stage
        if shape.staged:
            shape.strategy += " (staged through a local file)"
        _check_memory(workload, shape, backend)
        environment = Environment.capture(self.label)
        prefix = target.new_prefix()
        try:
            _bounded(lambda: backend.check_root(target.root), self.timeout)
            _bounded(lambda: backend.make_prefix(prefix), self.timeout)
        except Exception as exc:
            raise target.translate(exc, "preparing the run") from None

        written: list[str] = []
        deleted: set[str] = set()
        samples: list[Sample] = []
        errors: list[str] = []
        warnings: list[str] = []
        if operation == "download" and (warning := backend.cache_warning()):
            warnings.append(warning)
        try:
            for repeat in range(self.repeats):
                names = [f"{prefix}/r{repeat}-{index:07d}" for index in range(workload.count)]
                content = attrs.evolve(workload, seed=(workload.seed + repeat) % 2**63)
                written.extend(names)
                try:
                    samples.append(self._repeat(operation, content, names, shape))
                except Exception as exc:
                    errors.append(f"repeat {repeat + 1}: {target.describe_error(exc)}")
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
        warnings.extend(
            stability_warnings(
                samples,
                operation=operation,
                remote=target.protocol not in ("file", "local", "memory"),
            )
        )
        retried = sum(sample.retries or 0 for sample in samples)
        if retried:
            warnings.append(
                f"the client retried {retried} failed request(s) inside the timed windows: "
                "the figures include the failures and retry delays; check the storage's "
                "health or rate limits and run again"
            )
        if leftovers:
            warnings.append(
                f"cleanup could not delete {len(leftovers)} item(s) under {prefix}: "
                + ", ".join(leftovers[:5])
                + (" ..." if len(leftovers) > 5 else "")
                + ". Delete them by hand"
            )
        return Result(
            operation=operation,
            workload=workload,
            url=target.url,
            protocol=target.protocol,
            backend=backend.name,
            streams=self.streams,
            effective_streams=shape.effective_streams,
            strategy=shape.strategy,
            samples=tuple(samples),
            errors=tuple(errors),
            warnings=(*shape.warnings, *warnings),
            environment=environment,
        )

    def _repeat(
        self, operation: Operation, workload: Workload, names: list[str], shape: _Shape
    ) -> Sample:
        stagings: list[Staging] = []
        try:
            return self._repeat_staged(operation, workload, names, shape, stagings)
        finally:
            for staging in stagings:
                staging.close()

    def _repeat_staged(
        self,
        operation: Operation,
        workload: Workload,
        names: list[str],
        shape: _Shape,
        stagings: list[Staging],
    ) -> Sample:
        backend = self.target.backend
        plan = shape.upload_plan(
            backend, workload, names, timed=operation == "upload", stagings=stagings
        )
        if operation == "upload":
            backend.fs.invalidate_cache()
            retries_before = backend.retries
            timings = self._execute(plan, timed=True, total=workload.total_bytes)
            self._check_moved(timings, workload)
            return self._sample(
                timings, plan.inner_streams, _delta(backend.retries, retries_before)
            )
        self._execute(plan)  # untimed setup upload, same streams
        del plan
        for staging in stagings:
            staging.close()
        stagings.clear()
        backend.after_upload(names)
        confirms = [job for name in names if (job := backend.confirm(name, workload.size))]
        if confirms:
            self._execute(Plan(phases=(tuple(confirms),)))  # untimed, same streams
        backend.fs.invalidate_cache()
        if shape.split and backend.reads_ranges:  # a server that never answers fails here
            _bounded(lambda: backend.prepare_ranges(names[0]), self.timeout)
        plan, pieces = shape.download_plan(backend, workload, names, stagings=stagings)
        retries_before = backend.retries
        timings = self._execute(plan, timed=True, total=workload.total_bytes)
        self._check_moved(timings, workload)
        if self.verify:
            if stagings:
                _verify_staged(workload, stagings[0])
            else:
                _verify(workload, pieces)
        return self._sample(timings, plan.inner_streams, _delta(backend.retries, retries_before))

    def _execute(self, plan: Plan, *, timed: bool = False, total: int = 0) -> Timings:
        backend = self.target.backend
        progress = None
        if timed and self.callback is not None:
            self.callback.set_size(total)
            self.callback.absolute_update(0)
            progress = self.callback.relative_update
        try:
            if backend.is_async:
                with warnings.catch_warnings():
                    # aiohttp advises streaming bodies over 1 MiB; parts are sent whole on purpose
                    warnings.filterwarnings("ignore", message="Sending a large body directly")
                    return sync(  # type: ignore[no-any-return]
                        backend.fs.loop,
                        run_async,
                        plan,
                        self.streams,
                        self.clock,
                        self.timeout,
                        progress,
                    )
            return run_sync(plan, self.streams, self.clock, progress)
        except BaseException as exc:
            cause = exc.__cause__
            for hook in plan.on_failure:
                try:
                    if backend.is_async:
                        sync(backend.fs.loop, hook)
                    else:
                        hook()
                except Exception:
                    pass
            if type(exc).__name__ == "FSTimeoutError" and isinstance(cause, TimeoutError):
                raise cause from None  # fsspec's sync() drops the message; keep ours
            raise

    @staticmethod
    def _check_moved(timings: Timings, workload: Workload) -> None:
        moved = int(timings.nbytes.sum())
        if moved != workload.total_bytes:
            raise OSError(f"moved {moved} bytes where the workload has {workload.total_bytes}")

    @staticmethod
    def _sample(timings: Timings, inner_streams: int = 1, retries: int | None = None) -> Sample:
        opened = int(timings.start_ns.min())
        return Sample(
            nbytes=int(timings.nbytes.sum()),
            elapsed_ns=int(timings.end_ns.max()) - opened,
            latencies_ns=timings.end_ns - timings.start_ns,
            max_in_flight=timings.max_in_flight * inner_streams,
            retries=retries,
            offsets_ns=timings.start_ns - opened,
            request_bytes=timings.nbytes,
            workers=timings.worker,
            ttfb_ns=timings.ttfb_ns[timings.ttfb_ns >= 0],
            cpu_ns=timings.cpu_ns,
        )

    def _delete(self, names: Sequence[str]) -> list[str]:
        """Delete ``names`` (untimed, ≤ streams at once); return those that remain.

        Each name is deleted on its own (never a recursive or listing delete). Once the
        storage is unreachable, the remaining names are not attempted: they are reported.
        """
        backend = self.target.backend
        failed: list[str] = []
        unreachable: list[str] = []

        def record(name: str, exc: Exception) -> None:
            error = self.target.translate(exc, "deleting")
            if isinstance(error, TargetUnreachableError) or isinstance(exc, TimeoutError):
                unreachable.append(self.target.describe_error(exc))
            failed.append(f"{name} ({self.target.describe_error(exc)})")

        def skipped(name: str) -> bool:
            if unreachable:
                failed.append(f"{name} (not attempted: {unreachable[0]})")
                return True
            return False

        def tolerant(name: str) -> Any:
            job = backend.delete(name)
            if backend.is_async:

                async def run_async_job() -> int:
                    if skipped(name):
                        return 0
                    try:
                        await asyncio.wait_for(job(), self.timeout)
                    except FileNotFoundError:
                        pass
                    except Exception as exc:
                        record(name, exc)
                    return 0

                return run_async_job

            def run_sync_job() -> int:
                if skipped(name):
                    return 0
                try:
                    job()
                except FileNotFoundError:
                    pass
                except Exception as exc:
                    record(name, exc)
                return 0

            return run_sync_job

        if names:
            plan = Plan(phases=(tuple(tolerant(name) for name in names),))
            try:
                self._execute(plan)
            except Exception as exc:
                return [f"{name} ({self.target.describe_error(exc)})" for name in names]
            backend.fs.invalidate_cache()
        return failed


def _available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(workload: Workload, shape: _Shape, backend: Backend) -> None:
    """Refuse a workload the probe cannot hold: it keeps one repeat's payload in memory,
    or, for an object staged in both directions, twice the parts in flight."""
    available = _available_memory()
    staged = shape.staged and backend.splits_uploads  # a download's setup upload too
    needed = 2 * shape.effective_streams * shape.part_size if staged else workload.total_bytes
    if available is not None and needed > 0.8 * available:
        holds = "the parts in flight" if staged else "one repeat's payload"
        raise ConfigurationError(
            f"workload {workload.describe()} needs {format_size(needed)} of memory "
            f"(the probe holds {holds}); about {available / 1024**3:.1f} GiB is "
            "available: use fewer or smaller objects, or more streams so that one object "
            "is split and staged through a local file"
        )


def _delta(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else after - before


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


@define
class _Shape:
    """How a workload is cut into requests for a backend and a stream count."""

    split: bool
    part_size: int
    effective_streams: int
    strategy: str
    warnings: list[str]
    #: the one object is staged through a local file (see storeprobe.staging)
    staged: bool = False

    @classmethod
    def choose(
        cls, backend: Backend, workload: Workload, streams: int, part_size: int | None
    ) -> _Shape:
        too_big = backend.max_single_put is not None and workload.size > backend.max_single_put
        if too_big and workload.count > 1:
            raise ConfigurationError(
                f"objects over {format_size(backend.max_single_put or 0)} need a multipart "
                f"upload on {backend.name}: probe them one at a time (count=1)"
            )
        if workload.count > 1 or (streams == 1 and not too_big):
            effective = min(streams, workload.count)
            return cls(
                split=False,
                part_size=workload.size,
                effective_streams=effective,
                strategy=f"objects: one request per object, {effective} at a time",
                warnings=[]
                if effective == streams
                else [f"only {workload.count} objects: at most {effective} requests in flight"],
            )
        size = workload.size
        if part_size is None:
            part_size = max(backend.min_part_size, math.ceil(size / (4 * streams) / MiB) * MiB)
            part_size = max(part_size, math.ceil(size / _MAX_PARTS))
        elif part_size < backend.min_part_size:
            raise ConfigurationError(
                f"part_size {format_size(part_size)} is below this backend's minimum of "
                f"{format_size(backend.min_part_size)}"
            )
        parts = math.ceil(size / part_size)
        effective = min(streams, parts)
        warnings = []
        if effective < streams:
            warnings.append(
                f"one object of {format_size(size)} splits into only {parts} part(s) of "
                f"{format_size(part_size)}: at most {effective} requests in flight"
            )
        strategy = f"one object in {parts} parts of {format_size(part_size)}, {effective} at a time"
        return cls(
            split=parts > 1,
            part_size=part_size,
            effective_streams=effective,
            strategy=strategy,
            warnings=warnings,
        )

    def upload_plan(
        self,
        backend: Backend,
        workload: Workload,
        names: list[str],
        *,
        timed: bool = True,
        stagings: list[Staging] | None = None,
    ) -> Plan:
        if not self.split:
            return Plan(
                phases=(
                    tuple(
                        backend.put(name, backend.body(workload, index))
                        for index, name in enumerate(names)
                    ),
                )
            )
        if not backend.splits_uploads:
            if timed:
                self._cannot_split(backend, "upload")
            return Plan(phases=((backend.put(names[0], backend.body(workload, 0)),),))
        bounds = [
            (start, min(start + self.part_size, workload.size))
            for start in range(0, workload.size, self.part_size)
        ]
        if not (self.staged and stagings is not None):
            pieces = [(start, backend.body(workload, 0, start, stop)) for start, stop in bounds]
            return backend.split_upload(names[0], workload.size, pieces, self.effective_streams)
        staging = Staging.of_payload(workload, 0)
        stagings.append(staging)
        staged = [(start, backend.staged_body(staging, start, stop)) for start, stop in bounds]
        plan = backend.split_upload(names[0], workload.size, staged, self.effective_streams)
        if plan.part_phase is None:
            return plan
        phases = list(plan.phases)
        phases[plan.part_phase] = tuple(
            _releasing(backend, job, staging, start, stop, None)
            for job, (start, stop) in zip(phases[plan.part_phase], bounds, strict=True)
        )
        return attrs.evolve(plan, phases=tuple(phases))

    def _cannot_split(self, backend: Backend, operation: str) -> None:
        note = (
            f"the {backend.name} backend cannot split one object's {operation}: it was sent as "
            f"one request, so this {operation} is single-streamed whatever 'streams' says"
        )
        if note not in self.warnings:
            self.warnings.append(note)
            warnings.warn(note, StoreProbeWarning, stacklevel=5)
        self.effective_streams = 1
        self.strategy = f"one object in one request ({operation} cannot be split)"

    def download_plan(
        self,
        backend: Backend,
        workload: Workload,
        names: list[str],
        *,
        stagings: list[Staging] | None = None,
    ) -> tuple[Plan, list[tuple[int, int, list[Any], int]]]:
        """The plan and where each piece lands: (object index, offset, output list, slot)."""
        if self.split and not backend.reads_ranges:
            self._cannot_split(backend, "download")
        if not self.split or not backend.reads_ranges:
            out: list[Any] = [
                _prefaulted(workload.size) if backend.reads_into else None for _ in names
            ]
            jobs = tuple(backend.get(name, out, slot) for slot, name in enumerate(names))
            return Plan(phases=(jobs,)), [(slot, 0, out, slot) for slot in range(len(names))]
        if (note := backend.prepare_ranges(names[0])) and note not in self.warnings:
            self.warnings.append(note)
            self.strategy += " (ranges read with s3fs)"
        ranges = [
            (start, min(start + self.part_size, workload.size))
            for start in range(0, workload.size, self.part_size)
        ]
        if self.staged and stagings is not None:
            staging = Staging.blank(workload.size)
            stagings.append(staging)
            out = [staging.part(start, end) for start, end in ranges]
            jobs = tuple(
                _releasing(
                    backend,
                    backend.get_range(names[0], start, end, out, slot),
                    staging,
                    start,
                    end,
                    (out, slot),
                )
                for slot, (start, end) in enumerate(ranges)
            )
            return Plan(phases=(jobs,)), []
        out = [_prefaulted(end - start) if backend.reads_into else None for start, end in ranges]
        jobs = tuple(
            backend.get_range(names[0], start, end, out, slot)
            for slot, (start, end) in enumerate(ranges)
        )
        return Plan(phases=(jobs,)), [
            (0, start, out, slot) for slot, (start, _) in enumerate(ranges)
        ]


def _releasing(
    backend: Backend,
    job: Any,
    staging: Staging,
    start: int,
    stop: int,
    landing: tuple[list[Any], int] | None,
) -> Any:
    """``job``, then its bytes in the staging file and its pages unmapped (see staging).

    ``landing`` (download): the output slot; a client that returned its own buffer instead
    of filling the staged view has it copied into the file, then the buffer is dropped.
    """

    def settle() -> None:
        if landing is not None:
            out, slot = landing
            data = out[slot]
            if not (isinstance(data, memoryview) and data.obj is staging.view.obj):
                size = min(len(data), stop - start)
                staging.view[start : start + size] = memoryview(data)[:size]
            out[slot] = None
        staging.release(start, stop)

    if backend.is_async:

        async def async_job() -> Any:
            outcome = await job()
            settle()
            return outcome

        return async_job

    def sync_job() -> Any:
        outcome = job()
        settle()
        return outcome

    return sync_job


def _verify_staged(workload: Workload, staging: Staging) -> None:
    """Raise OSError if the staged object differs from the payload (read 1 MiB at a time)."""
    for offset, chunk in staging.chunks():
        bad = workload.mismatch(0, chunk, offset)
        if bad is not None:
            raise OSError(
                f"verification failed: object 0 differs from what was written at byte {bad}"
            )


def _prefaulted(size: int) -> bytearray:
    """A zeroed buffer whose pages are already mapped, so filling it costs no page faults."""
    buffer = bytearray(size)
    if size >= 4096:
        np.frombuffer(buffer, dtype=np.uint8)[::4096] = 0  # touch every page
    return buffer


def _verify(workload: Workload, pieces: list[tuple[int, int, list[Any], int]]) -> None:
    """Raise OSError naming the first object whose bytes differ from the payload."""
    lengths: dict[int, int] = {}
    for index, offset, out, slot in pieces:
        data = out[slot]
        if data is None:
            raise OSError(f"object {index}: no data was returned for offset {offset}")
        lengths[index] = lengths.get(index, 0) + len(data)
        bad = workload.mismatch(index, data, offset)
        if bad is not None:
            raise OSError(
                f"verification failed: object {index} differs from what was written at byte {bad}"
            )
    for index, length in lengths.items():
        if length != workload.size:
            raise OSError(
                f"verification failed: object {index} read back {length} bytes, "
                f"wrote {workload.size}"
            )
