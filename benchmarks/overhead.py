"""storeprobe's own overhead above the backend calls it wraps.

The probe's timed window runs a plan of request jobs through its engine (≤ N in flight,
a deadline per request, per-request clock marks and bookkeeping). This benchmark runs the
*same* jobs two ways, alternately, on the same event loop or thread pool:

- **bare**: the jobs awaited (or called) by N plain workers — nothing else but keeping
  each job's outcome, as the probe must (a download's outcome holds the bytes it read,
  which verification checks after the window; dropping them at once would let the
  allocator hand the same memory back to the next read) — timed from before the first
  job to after the last, on the event loop (or the calling thread);
- **engine**: storeprobe's engine (``run_async`` / ``run_sync``) as a probe runs them,
  timed as the probe reports it: from the first request's start to the last one's end.

Fresh objects are written for every run (uploads are create-only) and local files are
evicted from the page cache before every download run. Each of ``--pairs`` pairs runs
bare and engine back to back in alternating order; the overhead is the median over the
pairs of (engine ÷ bare − 1), so slow drifts of the machine cancel out. The per-request
figure is (engine − bare) ÷ requests, counting the jobs the engine runs (a client's own
multipart upload, obstore's, is one job however many parts it sends).

Targets: memory:// (calls of a few µs: the worst case), a local disk, and S3 on
``rclone serve s3`` on 127.0.0.1 through obstore (the default S3 client) and through s3fs.

Windows of a few milliseconds vary by several per cent from run to run on a shared VM,
more than the effect sought. So the engine's own cost is also measured where nothing
else varies: 20 000 jobs that do nothing, run bare and through the engine (best of 5).
That cost per request, times the requests of a workload, divided by the workload's bare
time, bounds the overhead from above (it assumes none of the engine's work overlaps a
request's wait for the network); the last column shows it.

    python benchmarks/overhead.py [--pairs 9] [--streams 1 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import warnings

from fsspec.asyn import sync

from storeprobe import Probe, Workload
from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backends.base import Landing
from storeprobe.planning import Layout, Plan, choose, delete_plan, download_plan, upload_plan
from storeprobe.request import AsyncJob, Body, Kind, Outcome, SyncJob
from storeprobe.transfer import Run, run_async, run_sync
from storeprobe.verification import prefaulted
from tests.conftest import s3_options
from tests.servers import rclone_s3

WORKLOADS = [
    ("upload", Workload.small()),
    ("download", Workload.small()),
    ("upload", Workload(count=1, size="64MiB")),
    ("download", Workload(count=1, size="64MiB")),
]

Backend = AsyncBackend | SyncBackend
Phases = tuple[tuple[Any, ...], ...]  # of AsyncJob or of SyncJob


async def _bare_worker(queue: Iterator[AsyncJob], kept: list[Outcome]) -> None:
    for job in queue:
        kept.append(await job.call())


async def _bare_async(phases: Sequence[Sequence[AsyncJob]], streams: int) -> int:
    kept: list[Outcome] = []  # the outcomes, held until the window closes
    start = time.perf_counter_ns()  # on the loop: the hop into it is not counted
    for phase in phases:
        queue = iter(phase)
        workers = min(streams, len(phase))
        await asyncio.gather(*(_bare_worker(queue, kept) for _ in range(workers)))
    return time.perf_counter_ns() - start


def _bare_thread(queue: Iterator[SyncJob], lock: threading.Lock, kept: list[Outcome]) -> None:
    while True:
        with lock:
            job = next(queue, None)
        if job is None:
            return
        kept.append(job.call())  # list.append is atomic under the GIL


def _bare_sync(phases: Sequence[Sequence[SyncJob]], streams: int) -> int:
    kept: list[Outcome] = []
    start = time.perf_counter_ns()
    for phase in phases:
        queue, lock = iter(phase), threading.Lock()
        threads = [
            threading.Thread(target=_bare_thread, args=(queue, lock, kept))
            for _ in range(min(streams, len(phase)) - 1)
        ]
        for thread in threads:
            thread.start()
        _bare_thread(queue, lock, kept)
        for thread in threads:
            thread.join()
    return time.perf_counter_ns() - start


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        # aiohttp advises streaming bodies over 1 MiB; the probe sends parts whole on purpose
        warnings.filterwarnings("ignore", message="Sending a large body directly")
        yield


class Runner:
    """Binds fresh plans for one probe and times them bare or through the engine.

    The plan is laid out as the probe lays it out (:func:`storeprobe.planning.choose`,
    with the probe's part size and staging threshold) and bound to the backend's jobs
    before the clock starts, as the probe does; a download reads through the backend the
    probe would pick (obstore's s3fs fallback for servers that answer ranges with 200)
    into buffers prepared before the window.
    """

    def __init__(self, probe: Probe, operation: str, workload: Workload, streams: int) -> None:
        self.probe = probe
        self.backend: Backend = probe.target.backend
        self.operation = operation
        self.workload = workload
        self.streams = streams
        self.layout = self._layout(operation)
        self.setup = self._layout("upload")  # the untimed upload before downloads
        if self.layout.staged or self.setup.staged:
            raise SystemExit(f"{workload.describe()} would be staged: not measured here")
        self.reader: Backend = self.backend
        self.prefix = probe.target.new_prefix()
        self.backend.make_prefix(self.prefix)
        self.runs = 0
        self.names: list[str] = []  # objects downloads read
        self.written: list[str] = []  # objects the last upload run wrote

    def _layout(self, operation: Any) -> Layout:
        return choose(
            self.backend.capabilities,
            self.backend.client,
            operation,
            self.workload,
            self.streams,
            part_size=self.probe.part_size,
            stage_above=self.probe.stage_above,
        )

    @staticmethod
    def _bind(backend: Backend, plan: Plan, workload: Workload | None = None) -> Phases:
        """The plan's jobs on ``backend``: bodies made, read buffers prepared."""
        requests = plan.requests
        bodies: list[Body | None] = [
            None if r.body is None or workload is None else backend.body(workload, r.body)
            for r in requests
        ]
        landings: list[Landing] = [None] * len(requests)
        if backend.capabilities.reads_into:
            landings = [
                prefaulted(r.expected or (workload.size if workload else 0))
                if r.kind is Kind.GET
                else None
                for r in requests
            ]
        clock = time.perf_counter_ns
        return backend.bind(plan.phases, bodies, landings, clock).phases

    def _phases(self) -> tuple[Backend, Phases]:
        """A fresh run's jobs (fresh names for uploads) and the backend they run on."""
        self.runs += 1
        names = [f"{self.prefix}/{self.runs}-{i}" for i in range(self.workload.count)]
        if self.operation == "upload":
            self.written = names
            self.backend.fs.invalidate_cache()
            plan = upload_plan(self.layout, self.workload, names)
            return self.backend, self._bind(self.backend, plan, self.workload)
        if not self.names:  # objects to read, written once
            plan = upload_plan(self.setup, self.workload, names)
            self._execute_bare(self.backend, self._bind(self.backend, plan, self.workload))
            self.names = names
            if self.layout.split:  # untimed, as the probe asks: obstore's fallback is s3fs
                reader = self.backend.range_reader(names[0])
                assert isinstance(reader, AsyncBackend | SyncBackend)
                self.reader = reader
        self.backend.after_upload(self.names)
        plan = download_plan(self.layout, self.workload, self.names)
        return self.reader, self._bind(self.reader, plan, self.workload)

    def _execute_bare(self, backend: Backend, phases: Phases) -> int:
        """Nanoseconds from before the first job to after the last, on the loop or thread."""
        if isinstance(backend, AsyncBackend):
            with _quiet():
                return int(sync(backend.fs.loop, _bare_async, phases, self.streams))
        return _bare_sync(phases, self.streams)

    def _execute_engine(self, backend: Backend, phases: Phases) -> int:
        """The window storeprobe reports: first request's start to last request's end."""
        clock = time.perf_counter_ns
        run: Run
        if isinstance(backend, AsyncBackend):
            with _quiet():
                run = sync(
                    backend.fs.loop, run_async, phases, self.streams, clock, self.probe.timeout
                )
        else:
            run = run_sync(phases, self.streams, clock)
        moved = int(run.timings.nbytes.sum())
        if moved != self.workload.total_bytes:
            raise RuntimeError(f"moved {moved} bytes of {self.workload.total_bytes}")
        return int(run.timings.end_ns.max() - run.timings.start_ns.min())

    def time(self, engine: bool) -> float:
        backend, phases = self._phases()  # bound before the clock starts, as the probe does
        execute = self._execute_engine if engine else self._execute_bare
        seconds = execute(backend, phases) / 1e9
        self._delete(self.written)
        self.written = []
        return seconds

    def _delete(self, names: Sequence[str]) -> None:
        jobs = self._bind(self.backend, delete_plan(names))
        for job in (job for phase in jobs for job in phase):
            with contextlib.suppress(Exception):
                if isinstance(self.backend, AsyncBackend):
                    sync(self.backend.fs.loop, job.call)
                else:
                    job.call()

    def requests(self) -> int:
        """The jobs the engine runs for one run (a client's own multipart upload is one)."""
        _, phases = self._phases()
        self._delete(self.written)
        self.written = []
        return sum(len(phase) for phase in phases)

    def cleanup(self) -> None:
        self._delete([*self.names, *self.written])
        with contextlib.suppress(Exception):
            self.backend.remove_prefix(self.prefix)


def _noop_jobs(count: int, is_async: bool) -> Phases:
    async def async_call() -> Outcome:
        return Outcome()

    def sync_call() -> Outcome:
        return Outcome()

    if is_async:
        return (tuple(AsyncJob(Kind.GET, async_call) for _ in range(count)),)
    return (tuple(SyncJob(Kind.GET, sync_call) for _ in range(count)),)


def engine_cost_ns(is_async: bool, streams: int, count: int = 20_000, rounds: int = 5) -> float:
    """The engine's own nanoseconds per request, over jobs that do nothing."""
    phases = _noop_jobs(count, is_async)
    bare, engine = [], []
    for _ in range(rounds):
        if is_async:
            bare.append(asyncio.run(_bare_async(phases, streams)))
            run = asyncio.run(run_async(phases, streams, time.perf_counter_ns, 300.0))
        else:
            bare.append(_bare_sync(phases, streams))
            run = run_sync(phases, streams, time.perf_counter_ns)
        engine.append(int(run.timings.end_ns.max() - run.timings.start_ns.min()))
    return (min(engine) - min(bare)) / count


def measure(
    probe: Probe, operation: str, workload: Workload, streams: int, pairs: int
) -> dict[str, float]:
    runner = Runner(probe, operation, workload, streams)
    try:
        runner.time(engine=True)  # warm-up: connections, caches of the client
        runner.time(engine=False)
        ratios, bare_times, engine_times = [], [], []
        for pair in range(pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)
            times = {engine: runner.time(engine) for engine in order}
            bare_times.append(times[False])
            engine_times.append(times[True])
            ratios.append(times[True] / times[False] - 1)
        requests = runner.requests()
        return {
            "bare_s": statistics.median(bare_times),
            "engine_s": statistics.median(engine_times),
            "overhead": statistics.median(ratios),
            "per_request_us": 1e6
            * (statistics.median(engine_times) - statistics.median(bare_times))
            / requests,
            "requests": requests,
        }
    finally:
        runner.cleanup()


@contextlib.contextmanager
def targets(work: Path) -> Iterator[list[tuple[str, Callable[[int], Probe]]]]:
    local = work / "disk"
    local.mkdir()
    with rclone_s3(work / "s3root") as server:
        options = s3_options(server.endpoint)
        yield [
            ("memory", lambda n: Probe.from_url("memory://overhead", streams=n)),
            ("local disk", lambda n: Probe.from_url(str(local), streams=n)),
            (
                "S3 obstore",
                lambda n: Probe.from_url("s3://bench/o", options, client="obstore", streams=n),
            ),
            (
                "S3 s3fs",
                lambda n: Probe.from_url("s3://bench/o", options, client="s3fs", streams=n),
            ),
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    costs = {
        (is_async, streams): engine_cost_ns(is_async, streams)
        for is_async in (True, False)
        for streams in args.streams
    }
    print("| engine | streams | own cost per request |")
    print("|---|---:|---:|")
    for (is_async, streams), cost in costs.items():
        kind = "async (event loop)" if is_async else "sync (threads)"
        print(f"| {kind} | {streams} | {cost / 1000:.2f} µs |")
    print()
    print(
        "| target | probe | streams | bare (s) | engine (s) | paired overhead | per request "
        "| bound from engine cost |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work, targets(Path(work)) as chosen:
        for name, make in chosen:
            for streams in args.streams:
                probe = make(streams)
                for operation, workload in WORKLOADS:
                    row = measure(probe, operation, workload, streams, args.pairs)
                    cost = costs[(isinstance(probe.target.backend, AsyncBackend), streams)]
                    row["bound"] = row["requests"] * cost / 1e9 / row["bare_s"]
                    key = f"{name} | {operation} {workload.describe()} | {streams}"
                    figures[key] = row
                    print(
                        f"| {key} | {row['bare_s']:.4f} | {row['engine_s']:.4f} | "
                        f"{100 * row['overhead']:+.2f} % | {row['per_request_us']:+.1f} µs | "
                        f"{100 * row['bound']:.2f} % |",
                        flush=True,
                    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
