"""Many clients on Dask against one process (named fleet.py: a benchmarks/distributed.py
would shadow the dask package when run as a script): aggregate throughput, start spread, overhead.

Part 1 (the issue's figure): on a local S3 server (``rclone serve s3``, started here), a
LocalCluster of 2 process workers × 4 streams against one process × 8 streams, large
objects (one object per worker, split into parts), upload and download, in interleaved
rounds (one process, fleet, one process, fleet...), medians of each round's best-of-
``--repeats``. The fleet moves twice the bytes in each window (one object per worker):
throughput is bytes over the common window either way.

A third column, 2 plain processes × 4 streams started together by a multiprocessing
barrier (no Dask, same window arithmetic), tells what Dask costs from what two client
processes on this machine can do.

Part 2: the start spread and the coordinator's overhead against the worker count
(LocalClusters of 1, 2, 4 and 8 process workers) on the local disk, small objects.

    python benchmarks/fleet.py [--size 256MiB] [--rounds 5] [--workers 1 2 4 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe, Workload
from storeprobe.distributed import Window, aggregate, cluster
from storeprobe.measurement import Measurement
from storeprobe.settings import Settings
from storeprobe.units import format_rate
from tests.servers import S3_KEY, S3_SECRET, rclone_s3


class _BarrierGate:
    """A Gate for plain processes on one machine: a multiprocessing barrier per window,
    windows recorded on the shared monotonic clock."""

    def __init__(self, barrier: Any) -> None:
        self.barrier = barrier
        self.windows: dict[int, tuple[int, int]] = {}

    def wait(self, repeat: int) -> None:
        self.barrier.wait()

    def opened(self, repeat: int, start_ns: int, end_ns: int) -> None:
        self.windows[repeat] = (start_ns, end_ns)

    def abandon(self, repeat: int) -> None:
        self.barrier.abort()


def _plain_worker(
    url: str,
    options: dict[str, Any],
    operation: str,
    size: str,
    repeats: int,
    index: int,
    barrier: Any,
    out: Any,
) -> None:
    gate = _BarrierGate(barrier)
    target = Probe.from_url(url + f"/p{index}", options).target
    result = Measurement(
        target=target,
        operation=operation,  # type: ignore[arg-type]
        workload=Workload(count=1, size=size, seed=index + 1),
        settings=Settings(streams=4, repeats=repeats, timeout=300.0, stage_above=1 << 30),
        clock=time.perf_counter_ns,
        callback=None,
        gate=gate,
    ).run()
    out.put((index, result.samples, gate.windows))


def plain_processes(
    url: str, options: dict[str, Any], operation: str, size: str, repeats: int
) -> float:
    """Best aggregate rate of 2 plain processes × 4 streams (no Dask), bytes/s."""
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    processes = [
        context.Process(
            target=_plain_worker, args=(url, options, operation, size, repeats, i, barrier, out)
        )
        for i in range(2)
    ]
    for process in processes:
        process.start()
    reports = {index: (samples, windows) for index, samples, windows in (out.get(), out.get())}
    for process in processes:
        process.join()
    rates = []
    for repeat in range(repeats):
        parts = [reports[i][0][repeat] for i in range(2)]
        windows = [Window(*reports[i][1][repeat]) for i in range(2)]
        rates.append(aggregate(parts, windows)[0].bytes_per_s)
    return max(rates)


def part_one(size: str, rounds: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as root, rclone_s3(Path(root)) as server:
        options = {
            "key": S3_KEY,
            "secret": S3_SECRET,
            "client_kwargs": {"endpoint_url": server.endpoint, "region_name": "us-east-1"},
        }
        workload = Workload(count=1, size=size)
        single = Probe.from_url("s3://bench/single", options, streams=8, repeats=repeats)
        pair = Probe.from_url("s3://bench/fleet", options, streams=4, repeats=repeats)
        figures: dict[tuple[str, str], list[float]] = {}
        spreads: list[int] = []
        overheads: list[int] = []
        with cluster(2) as client:
            fleet = pair.distributed(2, client=client)
            for number in range(rounds):
                for operation in ("upload", "download"):
                    one = single.measure(operation, workload)
                    many = fleet.measure(operation, workload)
                    figures.setdefault((operation, "2 processes × 4"), []).append(
                        plain_processes("s3://bench/plain", options, operation, size, repeats)
                    )
                    for name, result in (("1 process × 8", one), ("2 workers × 4", many)):
                        if not result.ok:
                            raise SystemExit(f"{name} {operation} failed: {result.errors}")
                        figures.setdefault((operation, name), []).append(result.bytes_per_s)
                    assert many.fleet is not None
                    spreads.extend(many.fleet.start_spread_ns)
                    overheads.append(many.fleet.coordinator_ns)
                print(f"round {number + 1}/{rounds} done", file=sys.stderr)
        print(f"\n## {size} per object on rclone serve s3, {rounds} interleaved rounds")
        print(
            "| operation | 1 process × 8 streams | 2 Dask workers × 4 | ratio | "
            "2 plain processes × 4 (no Dask) | ratio |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for operation in ("upload", "download"):
            solo = statistics.median(figures[(operation, "1 process × 8")])
            dask = statistics.median(figures[(operation, "2 workers × 4")])
            plain = statistics.median(figures[(operation, "2 processes × 4")])
            print(
                f"| {operation} | {format_rate(solo, 'MiB/s')} | {format_rate(dask, 'MiB/s')} "
                f"| {dask / solo:.2f}× | {format_rate(plain, 'MiB/s')} | {plain / solo:.2f}× |"
            )
        print(
            f"\nstart spread over {len(spreads)} windows: median "
            f"{statistics.median(spreads) / 1e6:.2f} ms, max {max(spreads) / 1e6:.2f} ms; "
            f"coordinator overhead per probe: median {statistics.median(overheads) / 1e9:.2f} s"
        )


def part_two(worker_counts: list[int], repeats: int) -> None:
    print("\n## start spread and coordinator overhead against worker count (local disk)")
    print("| workers | start spread median | max | coordinator overhead | clock ± (max) |")
    print("|---:|---:|---:|---:|---:|")
    workload = Workload(count=64, size="64KiB")
    for count in worker_counts:
        with tempfile.TemporaryDirectory() as root, cluster(count) as client:
            probe = Probe.from_url(f"file://{root}", streams=2, repeats=repeats)
            result = probe.distributed(count, client=client).download(workload)
            if not result.ok or result.fleet is None:
                raise SystemExit(f"{count} workers failed: {result.errors}")
            fleet = result.fleet
            spread = fleet.start_spread_ns
            print(
                f"| {count} | {statistics.median(spread) / 1e6:.2f} ms | "
                f"{max(spread) / 1e6:.2f} ms | {fleet.coordinator_ns / 1e9:.2f} s | "
                f"{fleet.max_uncertainty_ns / 1e6:.2f} ms |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="256MiB", help="object size per worker")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--skip-s3", action="store_true", help="only part 2")
    args = parser.parse_args()
    if not args.skip_s3:
        part_one(args.size, args.rounds, args.repeats)
    part_two(args.workers, args.repeats)


if __name__ == "__main__":
    main()
