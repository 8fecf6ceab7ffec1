"""Scale and memory: time per object as the object count grows, and peak RSS.

Each case runs in its own process (so peak RSS is its own) against a temporary
directory on the local disk, one repeat:

- 1 000 and 10 000 objects of 4 KiB, upload and download: time per object (linear cost
  means the two agree);
- one object of 2 GiB, upload and download at 1 and 4 streams: peak RSS against the
  bytes the probe holds (the object, plus a prepared download buffer).

    python benchmarks/scale.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = """
import json, resource, sys, tempfile
sys.path.insert(0, {root!r})
from storeprobe import Probe, Workload
workload = Workload.parse({spec!r})
with tempfile.TemporaryDirectory(dir="/var/tmp") as directory:
    probe = Probe.from_url(directory, streams={streams}, repeats=1)
    result = probe.measure({operation!r}, workload)
print(json.dumps({{
    "ok": result.ok,
    "errors": list(result.errors),
    "seconds": result.best_seconds if result.samples else None,
    "per_object_us": result.best_seconds / workload.count * 1e6 if result.samples else None,
    "mib_per_s": result.mib_per_s if result.samples else None,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}}))
"""


def run(spec: str, operation: str, streams: int) -> dict[str, object]:
    code = CASE.format(root=str(ROOT), spec=spec, operation=operation, streams=streams)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    print("| workload | operation | streams | seconds | µs per object | MiB/s | peak RSS (MiB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    cases = [(f"{n}x4KiB", op, 1) for n in (1000, 10000) for op in ("upload", "download")]
    cases += [("1x2GiB", op, s) for s in (1, 4) for op in ("upload", "download")]
    for spec, operation, streams in cases:
        figures = run(spec, operation, streams)
        print(
            f"| {spec} | {operation} | {streams} | {figures['seconds']:.3f} "
            f"| {figures['per_object_us']:.1f} | {figures['mib_per_s']:.1f} "
            f"| {figures['peak_rss_mib']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
