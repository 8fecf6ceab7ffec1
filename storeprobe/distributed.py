"""Many clients at once: one probe on many Dask workers, aggregated on one time base.

A :class:`Distributed` run of a probe (``probe.distributed(workers=4).upload_large()``)

1. opens one run prefix ``<root>/storeprobe-<utc>-<random>`` with a folder per worker
   (``w0``, ``w1``...) and measures each worker's clock against the coordinator's:
   several round trips through Dask, NTP-style, keeping the shortest (offset = the
   worker's reading minus the midpoint of the round trip; uncertainty = half of it);
2. sends each worker the probe's spec and the target's :class:`~storeprobe.target.Recipe`
   (credentials travel inside it; its ``repr`` hides them, and task keys are plain
   names, so neither Dask's logs nor its dashboard show a secret);
3. each worker rebuilds its filesystem, prepares a repeat untimed (generation; the
   upload before a download) and reports ready; when every worker is ready the
   coordinator names one start instant a little ahead on its own clock, and each worker
   opens its window at that instant on its clock (the instant plus its offset);
4. per repeat, the aggregate sample is the workers' total bytes over (latest end −
   earliest start) of their windows, every time moved onto the coordinator's clock.
   The start spread (latest actual start − earliest) is reported per sample, with a
   ``start-spread`` warning when it exceeds 5 % of the window, and a ``clock-uncertain``
   warning when the offsets' uncertainty exceeds 1 % of it;
5. a worker that fails a repeat or is lost (its process died) is a ``worker-failed``
   error of the aggregate: no aggregate figure is made without every worker. The
   coordinator waits for the others, then lists its own run prefix and deletes whatever
   is left (a lost worker cannot clean up after itself), and removes the folders.

Dask (``pip install 'storeprobe[distributed]'``) is imported only when a run starts.

Why ~660 lines: the worker's side (the barrier it waits at, its probe) and the
coordinator's (offsets, releases, loss detection, cleanup, the aggregate Result) are two
halves of one protocol and change together, so they stay on one page. The window
arithmetic they share is :func:`storeprobe.sampling.aggregate`.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np
from attrs import field, frozen

from storeprobe.errors import ConfigurationError, MissingDependencyError, TargetUnreachableError
from storeprobe.execution import (
    Leftover,
    cleanup_notice,
    clear_prefix,
    delete_names,
    hold_prefix,
    open_run,
    remove_folders,
)
from storeprobe.measurement import Measurement
from storeprobe.notices import Code, Notice
from storeprobe.result import OPERATIONS, Fleet, Member, Result, Sample
from storeprobe.resultset import ResultSet
from storeprobe.sampling import Window, aggregate, estimate_offset
from storeprobe.seeds import SeedProbes
from storeprobe.settings import Settings
from storeprobe.stats import stability_notices
from storeprobe.strategy import Shape, Strategy
from storeprobe.target import Recipe, Target
from storeprobe.transfer import Clock
from storeprobe.workload import Workload

if TYPE_CHECKING:
    Client = Any  # distributed.Client: Dask's API is untyped

__all__ = [
    "Distributed",
    "Spec",
    "Window",
    "aggregate",
    "cluster",
    "estimate_offset",
]

#: a start spread above this fraction of the window gets a ``start-spread`` warning
SPREAD_WARNING = 0.05
#: an offset uncertainty above this fraction of the window gets ``clock-uncertain``
UNCERTAINTY_WARNING = 0.01
#: how far ahead of the release the start instant is named, at least (ns)
LEAD_NS = 100_000_000
#: round trips per worker when measuring its clock offset
OFFSET_ROUNDS = 9
_POLL_S = 0.05
#: seconds to reach a ``--scheduler``: a TCP connect and Dask's handshake take a few round
#: trips, under a second even between continents (round trips up to ~0.3 s); Dask's own
#: default (``distributed.comm.timeouts.connect``, 30 s) is sized for a cluster under
#: load and would keep a mistyped or dead address waiting half a minute
SCHEDULER_CONNECT_TIMEOUT_S = 5.0
#: the workers' warnings that say what the aggregate did too
_PASSED_ON = (Code.CANNOT_SPLIT, Code.FEW_REQUESTS, Code.NO_CONDITIONAL_WRITE)


@frozen(kw_only=True)
class Spec:
    """What every worker runs: one probe call, the same on each (per-worker content)."""

    operation: Literal["upload", "download"]
    workload: Workload
    #: the probe's settings; ``streams`` is per worker
    settings: Settings


@frozen
class _Report:
    """What a worker sends back: its Result, and its windows on its own clock."""

    result: Result
    windows: dict[int, tuple[int, int]]
    abandoned: frozenset[int]
    #: the worker's whole run, from opening the target to its cleanup (ns)
    busy_ns: int


class _Barrier:
    """The worker's side of the start: report ready, wait for the instant, open."""

    def __init__(self, run: str, index: int, offset_ns: int, timeout: float | None) -> None:
        self.run, self.index, self.offset_ns = run, index, offset_ns
        self.timeout = timeout
        self.ready = _import_dask().Queue(f"{run}-ready")
        self.waited: set[int] = set()
        self.windows: dict[int, tuple[int, int]] = {}
        self.abandoned: set[int] = set()

    def wait(self, repeat: int) -> None:
        self.waited.add(repeat)
        self.ready.put((self.index, repeat, True))
        start = _import_dask().Variable(f"{self.run}-start-{repeat}")
        value = start.get(timeout=self.timeout)
        if not isinstance(value, int):
            raise _CalledOffError(str(value))
        target = value + self.offset_ns  # the instant on this worker's clock
        while (left := target - time.perf_counter_ns()) > 2_000_000:
            time.sleep((left - 1_000_000) / 1e9)
        while time.perf_counter_ns() < target:
            pass

    def opened(self, repeat: int, start_ns: int, end_ns: int) -> None:
        self.windows[repeat] = (start_ns, end_ns)

    def abandon(self, repeat: int) -> None:
        self.abandoned.add(repeat)
        if repeat not in self.waited:
            self.ready.put((self.index, repeat, False))


class _CalledOffError(Exception):
    """The coordinator called a repeat off (another worker failed or was lost)."""


def _clock_reading() -> int:
    return time.perf_counter_ns()


def _work(spec: Spec, recipe: Recipe, index: int, offset_ns: int, run: str) -> _Report:
    """One worker's probe (runs on the worker)."""
    began = time.perf_counter_ns()
    target = recipe.open()
    gate = _Barrier(run, index, offset_ns, spec.settings.timeout)
    seed = ((spec.workload.seed or 0) + 1_000_003 * (index + 1)) % 2**63
    result = Measurement(
        target=target,
        operation=spec.operation,
        workload=spec.workload.with_seed(seed),
        settings=spec.settings,
        clock=time.perf_counter_ns,
        callback=None,
        gate=gate,
    ).run()
    busy = time.perf_counter_ns() - began
    return _Report(result, dict(gate.windows), frozenset(gate.abandoned), busy)


def _addresses(dask_scheduler: Any) -> list[str]:
    return sorted(dask_scheduler.workers)


@frozen(kw_only=True)
class Distributed(SeedProbes):
    """A probe run on many Dask workers at once (see the module docstring).

    ``workers`` is how many take part. With ``client`` (a ``distributed.Client``) or
    ``scheduler`` (an address such as ``tcp://10.0.0.1:8786``) the run uses that
    cluster's first ``workers`` workers (all of them when ``workers`` is None);
    otherwise a ``LocalCluster`` of ``workers`` process workers (one thread each) is
    started for each call and closed after it. ``streams`` is per worker; the aggregate
    Result's ``streams`` is their sum. ``clock`` (ns) is the coordinator's.
    """

    target: Target
    workers: int | None = None
    client: Client | None = None
    scheduler: str | None = None
    settings: Settings = field(factory=Settings)
    clock: Clock = field(default=time.perf_counter_ns, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1
        ):
            raise ConfigurationError(f"workers must be a positive int, not {self.workers!r}")
        if self.client is not None and self.scheduler is not None:
            raise ConfigurationError("give client or scheduler, not both")
        if self.workers is None and self.client is None and self.scheduler is None:
            raise ConfigurationError(
                "say how many workers (workers=4 starts a LocalCluster), or give client= "
                "or scheduler= to use an existing Dask cluster"
            )
        if self.target.recipe is None:
            raise ConfigurationError(
                "a distributed probe needs a target made from a URL (Probe.from_url): "
                "each worker opens the storage again from its URL and options"
            )
        if self.target.protocol == "memory":
            raise ConfigurationError(
                "memory:// lives inside one process: workers cannot share it; use a "
                "storage every worker reaches (s3://, gs://, a shared file:// path...)"
            )
        _import_dask()

    # -- the probes users name ------------------------------------------------------------
    def upload(self, workload: Workload) -> Result:
        """Every worker writes ``workload`` (its own content) at the same instant."""
        return self.measure("upload", workload)

    def download(self, workload: Workload) -> Result:
        """Every worker reads its own copy of ``workload`` back at the same instant."""
        return self.measure("download", workload)

    def run(self, workloads: Sequence[Workload] | None = None) -> ResultSet:
        """Upload and download each workload (default: small, then large) on every
        worker; one cluster session for all of them."""
        chosen = list(workloads) if workloads is not None else [Workload.small(), Workload.large()]
        with self._session() as client:
            fixed = attrs.evolve(self, client=client)
            return ResultSet(
                [fixed.measure(op, workload) for workload in chosen for op in OPERATIONS]
            )

    def measure(self, operation: Literal["upload", "download"], workload: Workload) -> Result:
        """Run ``operation`` of ``workload`` on every worker at once; the aggregate Result,
        each worker's own Result in ``result.fleet.members``."""
        if operation not in ("upload", "download"):
            raise ConfigurationError(f"operation must be 'upload' or 'download', not {operation!r}")
        if workload.seed is None:
            seed = self.settings.seed
            workload = workload.with_seed(seed if seed is not None else secrets.randbits(63))
        spec = Spec(operation=operation, workload=workload, settings=self.settings)
        with self._session() as client:
            return _Coordinator(self, client, spec).run()

    @contextlib.contextmanager
    def _session(self) -> Iterator[Client]:
        if self.client is not None:
            yield self.client
            return
        with cluster(self.workers, self.scheduler) as client:
            yield client


@contextlib.contextmanager
def cluster(
    workers: int | None = None,
    scheduler: str | None = None,
    *,
    connect_timeout: float = SCHEDULER_CONNECT_TIMEOUT_S,
) -> Iterator[Client]:
    """A Dask client for distributed probes, closed on exit: connected to ``scheduler``
    (an address such as ``tcp://10.0.0.1:8786``), or to a new LocalCluster of
    ``workers`` process workers with one thread each on 127.0.0.1 (closed with it).

    A scheduler that refuses the connection fails at once, one that does not answer
    within ``connect_timeout`` seconds (``SCHEDULER_CONNECT_TIMEOUT_S``) then:
    :class:`TargetUnreachableError` naming the address; an address Dask cannot parse
    is a :class:`ConfigurationError`."""
    dask = _import_dask()
    if scheduler is not None:
        with _connect(dask, scheduler, connect_timeout) as client:
            yield client
        return
    if workers is None:
        raise ConfigurationError("say how many workers the LocalCluster starts, or a scheduler")
    with (
        dask.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # a free port: never clash with another cluster
            host="127.0.0.1",
        ) as local,
        dask.Client(local) as client,
    ):
        yield client


def _connect(dask: Any, address: str, timeout: float) -> Client:
    """A client of the scheduler at ``address``, or a clear error within ``timeout`` s.

    For ``tcp://`` and ``tls://`` a plain TCP connect comes first: Dask retries a refused
    connection until its timeout, where the socket says "refused" at once. On ``tcp://``
    it then waits for the scheduler's first bytes (a scheduler sends its handshake as
    it accepts): Dask waits for that handshake without a timeout, so a port held by
    something that is not a scheduler would hang it. The scheduler logs the probe
    connection at INFO level ("closed before handshake completed")."""
    fix = (
        "check the address (e.g. tcp://10.0.0.1:8786), that 'dask scheduler' runs there "
        "and that the network lets you reach it"
    )
    try:
        scheme, location = dask.comm.parse_address(address)
        host, port = dask.comm.addressing.parse_host_port(location, default_port=8786)
    except ValueError as exc:
        raise ConfigurationError(
            f"--scheduler {address!r} is not a Dask address ({exc}): write "
            "tcp://HOST:PORT, e.g. tcp://10.0.0.1:8786"
        ) from None
    if scheme in ("tcp", "tls"):
        step = "connect"
        try:
            with socket.create_connection((host, port), timeout=timeout) as probe:
                step = "handshake"
                if scheme == "tcp" and not probe.recv(1, socket.MSG_PEEK):
                    raise ConnectionResetError("closed the connection")
        except OSError as exc:
            silent = isinstance(exc, TimeoutError)
            reason = f"no answer within {timeout:g} s" if silent else str(exc) or type(exc).__name__
            what = "reach" if step == "connect" else "get a Dask handshake from"
            raise TargetUnreachableError(
                f"cannot {what} the Dask scheduler at {address} ({reason}): {fix}"
            ) from None
    try:
        client: Client = dask.Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:  # Dask: "Timed out trying to connect to ..."
        raise TargetUnreachableError(
            f"cannot connect to the Dask scheduler at {address} ({exc}): {fix}"
        ) from None
    return client


def _import_dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise MissingDependencyError(
            "a distributed probe needs Dask: pip install 'storeprobe[distributed]'"
        ) from None
    return distributed


class _Coordinator:
    """One distributed probe call, from the run prefix to the aggregate Result."""

    def __init__(self, fleet: Distributed, client: Client, spec: Spec) -> None:
        self.fleet, self.client, self.spec = fleet, client, spec
        self.target = fleet.target
        self.clock = fleet.clock
        self.run_id = f"storeprobe-{secrets.token_hex(8)}"
        self.slowest_ns = 0  # half the longest of the workers' best round trips

    def _workers(self) -> list[str]:
        wanted = self.fleet.workers
        if wanted is not None:
            self.client.wait_for_workers(wanted, timeout=self.spec.settings.timeout)
        present: list[str] = self.client.run_on_scheduler(_addresses)
        return present[:wanted] if wanted is not None else present

    def _offset(self, address: str) -> tuple[int, int]:
        readings = []
        for _ in range(OFFSET_ROUNDS):
            sent = self.clock()
            value = self.client.run(_clock_reading, workers=[address])[address]
            readings.append((sent, int(value), self.clock()))
        return estimate_offset(readings)

    def run(self) -> Result:
        began = self.clock()
        addresses = self._workers()
        count = len(addresses)
        folders = [f"w{index}" for index in range(count)]
        environment, prefix = open_run(
            self.target, self.spec.settings.label, self.spec.settings.timeout, folders
        )
        try:
            held = hold_prefix(self.target, prefix, self.spec.settings.timeout)
        except Exception:
            remove_folders(self.target, [*(f"{prefix}/{folder}" for folder in folders), prefix])
            raise
        recipe = self.target.recipe
        assert recipe is not None
        offsets = [self._offset(address) for address in addresses]
        self.slowest_ns = max(uncertainty for _, uncertainty in offsets)
        futures = [
            self.client.submit(
                _work,
                self.spec,
                recipe.at(f"{prefix}/{folder}"),
                index,
                offsets[index][0],
                self.run_id,
                key=f"{self.run_id}-{folder}",
                workers=[address],
                allow_other_workers=False,
                pure=False,
            )
            for index, (folder, address) in enumerate(zip(folders, addresses, strict=True))
        ]
        errors: list[Notice] = []
        reports: list[_Report | None] = [None] * count
        lost: dict[int, str] = {}
        try:
            self._release(addresses, futures, lost)
            self._collect(addresses, futures, reports, lost, errors)
        finally:
            for index in lost:
                with contextlib.suppress(Exception):
                    futures[index].cancel()
            leftovers = self._clean(prefix, folders, held)
        drifts = [
            None if index in lost else self._drift(address, offsets[index][0])
            for index, address in enumerate(addresses)
        ]
        members = tuple(
            Member(
                name=folders[index],
                address=addresses[index],
                offset_ns=offsets[index][0],
                uncertainty_ns=offsets[index][1],
                drift_ns=drifts[index],
                result=None if report is None else report.result,
            )
            for index, report in enumerate(reports)
        )
        return self._result(
            members, reports, offsets, errors, leftovers, prefix, environment, began
        )

    # -- the barrier -------------------------------------------------------------------------
    def _lost(self, addresses: Sequence[str], futures: Sequence[Any], lost: dict[int, str]) -> None:
        """Record workers whose process is gone or whose task failed outside a repeat."""
        present = set(self.client.run_on_scheduler(_addresses))
        for index, (address, future) in enumerate(zip(addresses, futures, strict=True)):
            if index in lost:
                continue
            if address not in present:
                lost[index] = f"worker w{index} ({address}) was lost: its process died or left"
            elif future.status == "error":
                lost[index] = f"worker w{index} failed: {self._describe(future)}"
            elif future.status == "cancelled":
                lost[index] = f"worker w{index}'s task was cancelled"

    def _describe(self, future: Any) -> str:
        try:
            exc = future.exception(timeout=5)
        except Exception as error:  # the reason is only reported
            exc = error
        return self.target.describe_error(exc) if exc is not None else "unknown error"

    def _release(
        self,
        addresses: Sequence[str],
        futures: Sequence[Any],
        lost: dict[int, str],
    ) -> None:
        """Per repeat: wait until every worker is ready, then name the start instant."""
        dask = _import_dask()
        ready = dask.Queue(f"{self.run_id}-ready", client=self.client)
        count = len(addresses)
        early: list[tuple[int, int, bool]] = []
        deadline = None if self.spec.settings.timeout is None else 4 * self.spec.settings.timeout
        for repeat in range(self.spec.settings.repeats):
            seen: dict[int, bool] = {}
            waited_since = time.monotonic()
            for index, at, ok in early:
                if at == repeat:
                    seen[index] = ok
            early = [e for e in early if e[1] != repeat]
            last_check = 0.0
            while len(seen) < count:
                for index, at, ok in ready.get(batch=True):
                    if at == repeat:
                        seen[index] = ok
                    else:
                        early.append((index, at, ok))
                if len(seen) < count:
                    time.sleep(_POLL_S / 5)
                if time.monotonic() - last_check > 0.25:
                    last_check = time.monotonic()
                    self._lost(addresses, futures, lost)
                    if lost:
                        break
                if deadline is not None and time.monotonic() - waited_since > deadline:
                    missing = sorted(set(range(count)) - set(seen))
                    for index in missing:
                        lost[index] = f"worker w{index} was not ready within {deadline:g} s"
                    break
            if lost:
                reason = "; ".join(lost.values())
                for later in range(repeat, self.spec.settings.repeats):
                    dask.Variable(f"{self.run_id}-start-{later}", client=self.client).set(
                        f"called off: {reason}"
                    )
                return
            # far enough ahead for the slowest worker to hear of it: 8 of its round trips
            lead = max(LEAD_NS, 16 * self.slowest_ns)
            dask.Variable(f"{self.run_id}-start-{repeat}", client=self.client).set(
                self.clock() + lead
            )

    def _collect(
        self,
        addresses: Sequence[str],
        futures: Sequence[Any],
        reports: list[_Report | None],
        lost: dict[int, str],
        errors: list[Notice],
    ) -> None:
        """Wait for every worker still alive; a lost one is recorded, never waited for."""
        pending = {i for i in range(len(futures)) if i not in lost}
        last_check = 0.0
        while pending:
            for index in list(pending):
                future = futures[index]
                if future.status == "finished":
                    reports[index] = future.result()
                    pending.discard(index)
            if time.monotonic() - last_check > 0.25:
                last_check = time.monotonic()
                self._lost(addresses, futures, lost)
                pending -= set(lost)
            if pending:
                time.sleep(_POLL_S)
        for _, reason in sorted(lost.items()):
            errors.append(
                Notice(
                    code=Code.WORKER_FAILED,
                    message=reason + ": no aggregate figure is made without every worker",
                    fix="check the worker's logs and memory, then run again",
                )
            )

    def _drift(self, address: str, before: int) -> int | None:
        try:
            after, _ = self._offset(address)
        except Exception:  # a worker gone after the run: drift unknown
            return None
        return after - before

    # -- cleanup ---------------------------------------------------------------------------
    def _clean(self, prefix: str, folders: Sequence[str], held: str) -> list[Leftover]:
        """Delete the held object (:func:`~storeprobe.execution.hold_prefix`), then whatever
        remains under the run prefix (a lost worker's objects: the prefix is fresh and the
        run's own), then the folders and the prefix; return what could not be removed."""
        settings = self.spec.settings
        left = delete_names(
            self.target, [held], streams=1, clock=self.clock, timeout=settings.timeout
        )
        leftovers = clear_prefix(
            self.target,
            prefix,
            left,
            streams=settings.prep_streams,
            clock=self.clock,
            timeout=settings.timeout,
        )
        return leftovers + remove_folders(
            self.target, [*(f"{prefix}/{folder}" for folder in folders), prefix]
        )

    # -- the aggregate ---------------------------------------------------------------------
    def _result(
        self,
        members: tuple[Member, ...],
        reports: Sequence[_Report | None],
        offsets: Sequence[tuple[int, int]],
        errors: list[Notice],
        leftovers: list[Leftover],
        prefix: str,
        environment: Any,
        began: int,
    ) -> Result:
        spec, count = self.spec, len(members)
        samples: list[Sample] = []
        spreads: list[int] = []
        warnings: list[Notice] = []
        for repeat in range(spec.settings.repeats):
            parts: list[Sample] = []
            windows: list[Window] = []
            failed: list[str] = []
            for index, report in enumerate(reports):
                sample = None if report is None else _sample_of(report, repeat)
                if sample is None or report is None:
                    failed.append(_why(members[index], report, repeat))
                    continue
                start, end = report.windows[repeat]
                shift = offsets[index][0]
                parts.append(sample)
                windows.append(Window(start - shift, end - shift))
            if failed:
                if not any(e.code is Code.WORKER_FAILED and e.repeat is None for e in errors):
                    errors.append(
                        Notice(
                            code=Code.WORKER_FAILED,
                            message="; ".join(failed) + ": no aggregate figure for this repeat",
                            fix="see that worker's Result in result.fleet.members",
                            repeat=repeat + 1,
                        )
                    )
                continue
            sample, spread = aggregate(parts, windows)
            samples.append(sample)
            spreads.append(spread)
            if spread > SPREAD_WARNING * sample.elapsed_ns:
                warnings.append(
                    Notice(
                        code=Code.START_SPREAD,
                        message=f"the workers' windows started {spread / 1e6:.1f} ms apart, "
                        f"{100 * spread / max(1, sample.elapsed_ns):.0f} % of the "
                        f"{sample.elapsed_ns / 1e6:.1f} ms window: the aggregate is "
                        "partly a sum of solo runs",
                        fix="use a larger workload, so each window lasts seconds",
                        repeat=repeat + 1,
                    )
                )
        fleet = Fleet(
            members=members,
            streams_per_worker=spec.settings.streams,
            start_spread_ns=tuple(spreads),
            coordinator_ns=self.clock()
            - began
            - max((r.busy_ns for r in reports if r is not None), default=0),
        )
        if samples:
            shortest = min(s.elapsed_ns for s in samples)
            if fleet.max_uncertainty_ns > UNCERTAINTY_WARNING * shortest:
                warnings.append(
                    Notice(
                        code=Code.CLOCK_UNCERTAIN,
                        message=f"the workers' clock offsets are known to ±"
                        f"{fleet.max_uncertainty_ns / 1e6:.2f} ms, more than 1 % of the "
                        f"{shortest / 1e6:.1f} ms window",
                        fix="use a larger workload, or a network closer to the scheduler",
                    )
                )
        first = next((r for r in reports if r is not None), None)
        for report in reports:
            if report is not None:
                for notice in report.result.warnings:
                    if notice.code in _PASSED_ON and notice not in warnings:
                        warnings.append(notice)
        warnings.extend(
            stability_notices(
                np.array([s.bytes_per_s for s in samples], dtype=np.float64),
                np.array([s.elapsed_ns for s in samples], dtype=np.int64),
                np.full(len(samples), np.nan),
                operation=spec.operation,
                remote=self.target.protocol not in ("file", "local", "memory"),
            )
        )
        if (cleanup := cleanup_notice(prefix, leftovers)) is not None:
            warnings.append(cleanup)
        workload = spec.workload
        name = f"{count} workers × {workload.label}"
        return Result(
            operation=spec.operation,
            workload=Workload(
                count=workload.count * count,
                size=workload.size,
                sizes=workload.sizes,
                seed=workload.seed,
                name=name,
            ),
            url=self.target.url,
            protocol=self.target.protocol,
            backend=first.result.backend if first is not None else self.target.client,
            streams=spec.settings.streams * count,
            effective_streams=sum(r.result.effective_streams for r in reports if r is not None),
            strategy=attrs.evolve(
                first.result.strategy
                if first is not None
                else Strategy(shape=Shape.STREAMS, in_flight=spec.settings.streams),
                workers=count,
            ),
            samples=tuple(samples),
            errors=tuple(errors),
            warnings=tuple(warnings),
            environment=environment,
            fleet=fleet,
        )


def _sample_of(report: _Report, repeat: int) -> Sample | None:
    """The worker's sample of ``repeat``, or None when that repeat failed there."""
    good = [r for r in sorted(report.windows) if r not in report.abandoned]
    if repeat not in good or len(good) != len(report.result.samples):
        return None
    return report.result.samples[good.index(repeat)]


def _why(member: Member, report: _Report | None, repeat: int) -> str:
    if report is None:
        return f"{member.name} did not finish"
    for notice in report.result.errors:
        if notice.repeat == repeat + 1:
            return f"{member.name} failed ({notice.code.value}: {notice.message})"
    return f"{member.name} has no sample"
