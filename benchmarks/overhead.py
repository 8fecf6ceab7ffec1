"""storeprobe's own overhead above the backend calls it wraps.

The probe's timed window runs a plan of request jobs through its engine (≤ N in flight,
a deadline per request, per-request clock marks and bookkeeping). This benchmark runs the
*same* jobs two ways, alternately, on the same event loop or thread pool:

- **bare**: the jobs awaited (or called) by N plain workers — nothing else — timed from
  before the first job to after the last, on the event loop (or the calling thread);
- **engine**: storeprobe's engine (``run_async`` / ``run_sync``) as a probe runs them,
  timed as the probe reports it: from the first request's start to the last one's end.

Fresh objects are written for every run (uploads are create-only) and local files are
evicted from the page cache before every download run. Each of ``--pairs`` pairs runs
bare and engine back to back in alternating order; the overhead is the median over the
pairs of (engine ÷ bare − 1), so slow drifts of the machine cancel out. The per-request
figure is (engine − bare) ÷ requests.

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

from fsspec.asyn import sync

from storeprobe import Probe, Workload
from storeprobe.probe import _Shape
from storeprobe.transfer import Plan, run_async, run_sync
from tests.conftest import s3_options
from tests.servers import rclone_s3

WORKLOADS = [
    ("upload", Workload.small()),
    ("download", Workload.small()),
    ("upload", Workload(count=1, size="64MiB")),
    ("download", Workload(count=1, size="64MiB")),
]


async def _bare_worker(queue: Iterator[Any]) -> None:
    for job in queue:
        await job()


async def _bare_async(phases: Sequence[Sequence[Any]], streams: int) -> int:
    start = time.perf_counter_ns()  # on the loop: the hop into it is not counted
    for phase in phases:
        queue = iter(phase)
        await asyncio.gather(*(_bare_worker(queue) for _ in range(min(streams, len(phase)))))
    return time.perf_counter_ns() - start


def _bare_thread(queue: Iterator[Any], lock: threading.Lock) -> None:
    while True:
        with lock:
            job = next(queue, None)
        if job is None:
            return
        job()


def _bare_sync(phases: Sequence[Sequence[Any]], streams: int) -> int:
    start = time.perf_counter_ns()
    for phase in phases:
        queue, lock = iter(phase), threading.Lock()
        threads = [
            threading.Thread(target=_bare_thread, args=(queue, lock))
            for _ in range(min(streams, len(phase)) - 1)
        ]
        for thread in threads:
            thread.start()
        _bare_thread(queue, lock)
        for thread in threads:
            thread.join()
    return time.perf_counter_ns() - start


class Runner:
    """Builds fresh plans for one probe and times them bare or through the engine."""

    def __init__(self, probe: Probe, operation: str, workload: Workload, streams: int) -> None:
        self.probe = probe
        self.backend = probe.target.backend
        self.operation = operation
        self.workload = workload
        self.streams = streams
        self.shape = _Shape.choose(self.backend, workload, streams, None)
        self.prefix = probe.target.new_prefix()
        self.backend.make_prefix(self.prefix)
        self.runs = 0
        self.names: list[str] = []  # objects downloads read
        self.written: list[str] = []  # objects the last upload run wrote

    def _plan(self) -> Plan:
        self.runs += 1
        names = [f"{self.prefix}/{self.runs}-{i}" for i in range(self.workload.count)]
        upload = self.shape.upload_plan(self.backend, self.workload, names, timed=False)
        if self.operation == "upload":
            self.written = names
            return upload
        if not self.names:  # objects to read, written once
            self._execute_bare(upload)
            self.names = names
        self.backend.after_upload(self.names)
        plan, _ = self.shape.download_plan(self.backend, self.workload, self.names)
        return plan

    def _execute_bare(self, plan: Plan) -> int:
        """Nanoseconds from before the first job to after the last, on the loop or thread."""
        if self.backend.is_async:
            return int(sync(self.backend.fs.loop, _bare_async, plan.phases, self.streams))
        return _bare_sync(plan.phases, self.streams)

    def _execute_engine(self, plan: Plan) -> int:
        """The window storeprobe reports: first request's start to last request's end."""
        clock = time.perf_counter_ns
        if self.backend.is_async:
            timings = sync(self.backend.fs.loop, run_async, plan, self.streams, clock, 300.0)
        else:
            timings = run_sync(plan, self.streams, clock)
        return int(timings.end_ns.max() - timings.start_ns.min())

    def time(self, engine: bool) -> float:
        plan = self._plan()  # built before the clock starts, as the probe does
        seconds = (self._execute_engine if engine else self._execute_bare)(plan) / 1e9
        self._delete(self.written)
        self.written = []
        return seconds

    def _delete(self, names: Sequence[str]) -> None:
        for name in names:
            with contextlib.suppress(Exception):
                job = self.backend.delete(name)
                if self.backend.is_async:
                    sync(self.backend.fs.loop, job)
                else:
                    job()

    def requests(self) -> int:
        plan = self._plan()
        self._delete(self.written)
        return sum(len(phase) for phase in plan.phases)

    def cleanup(self) -> None:
        self._delete([*self.names, *self.written])
        with contextlib.suppress(Exception):
            self.backend.remove_prefix(self.prefix)


def _noop_jobs(count: int, is_async: bool) -> tuple[Any, ...]:
    async def async_job() -> int:
        return 0

    def sync_job() -> int:
        return 0

    return tuple(async_job if is_async else sync_job for _ in range(count))


def engine_cost_ns(is_async: bool, streams: int, count: int = 20_000, rounds: int = 5) -> float:
    """The engine's own nanoseconds per request, over jobs that do nothing."""
    jobs = _noop_jobs(count, is_async)
    plan = Plan(phases=(jobs,))
    bare, engine = [], []
    for _ in range(rounds):
        if is_async:
            bare.append(asyncio.run(_bare_async(plan.phases, streams)))
            timings = asyncio.run(run_async(plan, streams, time.perf_counter_ns, 300.0))
        else:
            bare.append(_bare_sync(plan.phases, streams))
            timings = run_sync(plan, streams, time.perf_counter_ns)
        engine.append(int(timings.end_ns.max() - timings.start_ns.min()))
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
                    cost = costs[(probe.target.backend.is_async, streams)]
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
