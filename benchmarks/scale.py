"""Scale and memory: time per object as the object count grows, and peak RSS.

Each case runs in its own process (so peak RSS is its own), one repeat:

- 1 000 and 10 000 objects of 4 KiB, upload and download, on memory:// (storeprobe's
  own per-object cost) and on a local disk: time per object (linear cost means the two
  counts agree), with a bare loop of the same system calls on the same disk (O_EXCL
  write + fsync; read after eviction) as the reference for what the file system itself
  does as a directory grows;
- one object of 2 GiB, upload and download at 1 and 8 streams, on a local disk and on
  S3 (``rclone serve s3`` on 127.0.0.1, storeprobe's default client): peak RSS against
  the bound ``2 × bytes in flight + 64 MiB`` (at 1 stream the whole object is in flight;
  at 8 streams, 8 parts — the object is staged through a local file).

    python benchmarks/scale.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import s3_options
from tests.servers import rclone_s3

ROOT = Path(__file__).resolve().parent.parent
CASE = """
import json, sys, tempfile
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
    result = probe.measure({operation!r}, workload)
print(json.dumps({{
    "ok": result.ok,
    "errors": [str(error) for error in result.errors],
    "requests_by_kind": result.requests_by_kind,
    "strategy": result.strategy,
    "client": result.backend,
    "seconds": result.best_seconds if result.samples else None,
    "per_object_us": result.best_seconds / workload.count * 1e6 if result.samples else None,
    "mib_per_s": result.mib_per_s if result.samples else None,
    "baseline_rss_mib": baseline,
    "peak_rss_mib": high_water_mib(),
    "in_flight_mib": in_flight / 1024**2,
}}))
"""


def run(url: str, options: dict[str, object], spec: str, operation: str, streams: int) -> dict:
    code = CASE.format(
        root=str(ROOT), url=url, options=options, spec=spec, operation=operation, streams=streams
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{operation} {spec} at {streams} streams failed:\n{done.stderr}")
    figures: dict = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["seconds"] is None:
        raise RuntimeError(f"{operation} {spec} on {url or 'a local disk'}: {figures['errors']}")
    return figures


def bare_local(count: int, size: int = 4096) -> tuple[float, float]:
    """µs per file of a plain loop: O_EXCL write + fsync, then evict and read back."""
    import os

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work, rclone_s3(Path(work)) as server:
        s3 = ("s3://bench/scale", s3_options(server.endpoint))
        print("| target | workload | operation | streams | seconds | µs per object | MiB/s |")
        print("|---|---|---|---:|---:|---:|---:|")
        for name, (url, options) in (("memory", ("memory://scale", {})), ("local", ("", {}))):
            for count in (1000, 10000):
                for operation in ("upload", "download"):
                    f = run(url, options, f"{count}x4KiB", operation, 1)
                    rows.append({"target": name, "spec": f"{count}x4KiB", "op": operation, **f})
                    print(
                        f"| {name} | {count} × 4 KiB | {operation} | 1 | {f['seconds']:.3f} "
                        f"| {f['per_object_us']:.1f} | {f['mib_per_s']:.1f} |",
                        flush=True,
                    )
        for count in (1000, 10000):
            up, down = bare_local(count)
            rows.append(
                {"target": "bare local loop", "spec": f"{count}x4KiB", "up": up, "down": down}
            )
            print(f"| bare loop, local | {count} × 4 KiB | upload | 1 | | {up:.1f} | |")
            print(f"| bare loop, local | {count} × 4 KiB | download | 1 | | {down:.1f} | |")
        print()
        print(
            "| target | operation | streams | MiB/s | in flight (MiB) | bound (MiB) "
            "| peak RSS (MiB) | after imports (MiB) | within bound |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---|")
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
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
