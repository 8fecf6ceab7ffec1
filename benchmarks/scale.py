"""Scale and memory: time per object as the object count grows, and peak RSS.

Each case runs in its own process (so peak RSS is its own), one repeat:

- 1 000, 10 000 and 100 000 objects of 4 KiB (``--counts``), upload and download at one
  stream, ``--rounds`` processes per case taken round-robin over the counts (medians),
  on memory:// (storeprobe's own per-object cost) and on a local disk: seconds per
  object in the timed window and its ratio to the 1 000-object figure (linear cost
  keeps the ratio near 1), the whole ``measure`` call per object (the untimed steps
  too: naming, bodies, setup, verification, cleanup) and its ratio, and the process's
  peak RSS (``VmHWM``) beside its RSS after imports. A bare loop of the same system calls
  on the same disk (O_EXCL write + fsync; read after eviction) is the reference for what
  the file system itself does as a directory grows;
- the engine's per-request record: bytes it holds per request at the end of a window of
  100 000 no-op requests (tracemalloc), and the peak of the whole engine call;
- with ``--large``: one object of 2 GiB, upload and download at 1 and 8 streams, on a
  local disk and on S3 (``rclone serve s3`` on 127.0.0.1, storeprobe's default client):
  peak RSS against the bound ``2 × bytes in flight + 64 MiB`` (at 1 stream the whole
  object is in flight; at 8 streams, 8 parts — the object is staged through a local
  file).

    python benchmarks/scale.py [--counts 1000 10000 100000] [--rounds 3]
        [--targets memory local] [--large] [--before OTHER_CHECKOUT] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
CASE = """
import json, sys, tempfile, time
sys.path.insert(0, {root!r})
from storeprobe import Probe, Workload
from storeprobe.planning import choose
def high_water_mib():  # VmHWM: this process image's peak RSS (ru_maxrss survives exec)
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM")) / 1024
workload = Workload.parse({spec!r})
url, options = {url!r}, {options!r}
with tempfile.TemporaryDirectory(dir="/var/tmp") as directory:
    probe = Probe.from_url(url or directory, options, streams={streams}, repeats=1)
    backend = probe.target.backend
    layout = choose(backend.capabilities, backend.client, {operation!r}, workload, {streams},
                    part_size=probe.part_size, stage_above=probe.stage_above)
    in_flight = layout.effective_streams * layout.part_size if layout.split else workload.size
    baseline = high_water_mib()
    began = time.perf_counter()
    result = probe.measure({operation!r}, workload)
    whole = time.perf_counter() - began
print(json.dumps({{
    "ok": result.ok,
    "errors": [str(error) for error in result.errors],
    "requests_by_kind": result.requests_by_kind,
    "strategy": str(result.strategy),
    "client": result.backend,
    "seconds": result.best_seconds if result.samples else None,
    "whole_seconds": whole,
    "per_object_us": result.best_seconds / workload.count * 1e6 if result.samples else None,
    "whole_per_object_us": whole / workload.count * 1e6,
    "mib_per_s": result.mib_per_s if result.samples else None,
    "baseline_rss_mib": baseline,
    "peak_rss_mib": high_water_mib(),
    "in_flight_mib": in_flight / 1024**2,
}}))
"""

RECORD = """
import json, sys, time, tracemalloc
sys.path.insert(0, {root!r})
from storeprobe import transfer
from storeprobe.request import Kind, Outcome, SyncJob
count = {count}
outcome = Outcome(sent=4096)
jobs = tuple(SyncJob(Kind.PUT, lambda: outcome) for _ in range(count))
held = []
finish = transfer._run
def spy(*args, **kwargs):  # the engine's state at the window's end, before any array
    held.append(tracemalloc.get_traced_memory()[0])
    return finish(*args, **kwargs)
transfer._run = spy
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
tracemalloc.reset_peak()
run = transfer.run_sync((jobs,), 1, time.perf_counter_ns)
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({{"held": (held[0] - base) / count, "peak": (peak - base) / count}}))
"""


def run(
    url: str, options: dict[str, object], spec: str, operation: str, streams: int
) -> dict[str, Any]:
    code = CASE.format(
        root=str(ROOT), url=url, options=options, spec=spec, operation=operation, streams=streams
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{operation} {spec} at {streams} streams failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["seconds"] is None:
        raise RuntimeError(f"{operation} {spec} on {url or 'a local disk'}: {figures['errors']}")
    return figures


def record_bytes(root: Path, count: int = 100_000) -> dict[str, float]:
    """Bytes per request the engine holds at the window's end, and its peak, for the
    checkout at ``root`` (this one, or another to compare with)."""
    code = RECORD.format(root=str(root), count=count)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def bare_local(count: int, size: int = 4096) -> tuple[float, float]:
    """µs per file of a plain loop: O_EXCL write + fsync, then evict and read back."""
    data = os.urandom(size)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as directory:
        paths = [os.path.join(directory, f"{i:07d}") for i in range(count)]
        start = time.perf_counter()
        for path in paths:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
        upload = time.perf_counter() - start
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        start = time.perf_counter()
        for path in paths:
            with open(path, "rb", buffering=0) as handle:
                handle.read()
        download = time.perf_counter() - start
    return upload / count * 1e6, download / count * 1e6


def counts_table(
    counts: list[int], rounds: int, targets: list[str], rows: list[dict[str, Any]]
) -> None:
    """Each case ``rounds`` times, round-robin over the counts (a drift of the machine
    hits every count alike); medians of the per-object figures, the highest peak RSS."""
    import statistics

    print(
        "| target | objects | operation | µs per object (window) | ÷ 1 000 "
        "| µs per object (whole call) | ÷ 1 000 | peak RSS (MiB) | after imports (MiB) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, url in (("memory", "memory://scale"), ("local", "")):
        if name not in targets:
            continue
        for operation in ("upload", "download"):
            runs: dict[int, list[dict[str, Any]]] = {count: [] for count in counts}
            for _ in range(rounds):
                for count in counts:
                    runs[count].append(run(url, {}, f"{count}x4KiB", operation, 1))
            first: tuple[float, float] | None = None
            for count in counts:
                window = statistics.median(f["per_object_us"] for f in runs[count])
                whole = statistics.median(f["whole_per_object_us"] for f in runs[count])
                peak = max(f["peak_rss_mib"] for f in runs[count])
                baseline = max(f["baseline_rss_mib"] for f in runs[count])
                first = first or (window, whole)
                rows.append(
                    {"target": name, "count": count, "op": operation, "rounds": runs[count]}
                )
                print(
                    f"| {name} | {count:,} | {operation} | {window:.1f} | {window / first[0]:.2f} "
                    f"| {whole:.1f} | {whole / first[1]:.2f} | {peak:.0f} "
                    f"| {baseline:.0f} |".replace(",", " "),
                    flush=True,
                )
    if "local" not in targets:
        return
    print()
    print("| bare loop, local | objects | µs per file upload | ÷ 1 000 | download | ÷ 1 000 |")
    print("|---|---:|---:|---:|---:|---:|")
    bare: dict[int, list[tuple[float, float]]] = {count: [] for count in counts}
    for _ in range(rounds):
        for count in counts:
            bare[count].append(bare_local(count))
    reference: tuple[float, float] | None = None
    for count in counts:
        up = statistics.median(u for u, _ in bare[count])
        down = statistics.median(d for _, d in bare[count])
        reference = reference or (up, down)
        rows.append({"target": "bare local loop", "count": count, "up": up, "down": down})
        print(
            f"| bare loop | {count:,} | {up:.1f} | {up / reference[0]:.2f} | {down:.1f} "
            f"| {down / reference[1]:.2f} |".replace(",", " "),
            flush=True,
        )


def large_table(rows: list[dict[str, Any]]) -> None:
    from tests.conftest import s3_options
    from tests.servers import rclone_s3

    print(
        "| target | operation | streams | MiB/s | in flight (MiB) | bound (MiB) "
        "| peak RSS (MiB) | after imports (MiB) | within bound |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work, rclone_s3(Path(work)) as server:
        s3 = ("s3://bench/scale", s3_options(server.endpoint))
        for name, (url, options) in (("local", ("", {})), ("S3", s3)):
            for streams in (1, 8):
                for operation in ("upload", "download"):
                    f = run(url, options, "1x2GiB", operation, streams)
                    bound = 2 * f["in_flight_mib"] + 64
                    rows.append({"target": name, "spec": "1x2GiB", "op": operation, **f})
                    print(
                        f"| {name} ({f['client']}) | {operation} | {streams} "
                        f"| {f['mib_per_s']:.0f} | {f['in_flight_mib']:.0f} | {bound:.0f} "
                        f"| {f['peak_rss_mib']:.0f} | {f['baseline_rss_mib']:.0f} "
                        f"| {'yes' if f['peak_rss_mib'] <= bound else 'NO'} |",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--rounds", type=int, default=3, help="processes per case (median)")
    parser.add_argument(
        "--targets", nargs="+", choices=("memory", "local"), default=["memory", "local"]
    )
    parser.add_argument("--large", action="store_true", help="the 2 GiB peak-RSS cases")
    parser.add_argument("--before", type=Path, help="another checkout: its record size too")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    record = record_bytes(ROOT)
    rows.append({"record": record})
    print("| engine record (100 000 no-op requests) | held at the window's end | peak |")
    print("|---|---:|---:|")
    if args.before:
        before = record_bytes(args.before.resolve())
        rows.append({"record before": before})
        print(
            f"| {args.before} | {before['held']:.1f} B/request | {before['peak']:.1f} B/request |"
        )
    print(f"| this checkout | {record['held']:.1f} B/request | {record['peak']:.1f} B/request |")
    print()
    counts_table(args.counts, args.rounds, args.targets, rows)
    if args.large:
        print()
        large_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
