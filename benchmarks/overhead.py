"""storeprobe's own overhead above the backend calls it wraps.

For a filesystem where the calls are cheap (memory, and a local disk), times the same
requests twice in one run: a plain loop calling the backend's primitive directly (the
baseline), and storeprobe's timed window for the same workload. Prints both and the
overhead (window ÷ plain loop − 1), best of N.

    python benchmarks/overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe, Workload
from storeprobe.backends import evict_from_page_cache
from storeprobe.probe import _prefaulted


def plain(probe: Probe, operation: str, workload: Workload, repeats: int) -> float:
    """Best seconds of a plain loop over the backend's own calls (no storeprobe engine)."""
    backend = probe.target.backend
    root = probe.target.root
    best = float("inf")
    for repeat in range(repeats):
        names = [f"{root}/plain-{repeat}-{i}" for i in range(workload.count)]
        bodies = [backend.body(workload, i) for i in range(workload.count)]
        try:
            if operation == "download":
                for name, body in zip(names, bodies, strict=True):
                    backend.put(name, body)()
                if probe.target.protocol == "file":
                    for name in names:
                        evict_from_page_cache(name)
                out: list[object] = [
                    _prefaulted(workload.size) if backend.reads_into else None for _ in names
                ]
                start = time.perf_counter()
                for slot, name in enumerate(names):
                    backend.get(name, out, slot)()
            else:
                start = time.perf_counter()
                for name, body in zip(names, bodies, strict=True):
                    backend.put(name, body)()
            best = min(best, time.perf_counter() - start)
        finally:
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    backend.delete(name)()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| target | probe | plain loop (s) | storeprobe window (s) | overhead |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as directory:
        for url in ("memory://overhead", directory):
            probe = Probe.from_url(url, repeats=args.repeats)
            for workload in (Workload.small(), Workload(count=1, size="64MiB")):
                for operation in ("upload", "download"):
                    baseline = plain(probe, operation, workload, args.repeats)
                    result = probe.measure(operation, workload)  # type: ignore[arg-type]
                    window = result.best_seconds
                    overhead = 100 * (window / baseline - 1)
                    print(
                        f"| {probe.target.protocol} | {operation} {workload.describe()} "
                        f"| {baseline:.4f} | {window:.4f} | {overhead:+.1f} % |"
                    )


if __name__ == "__main__":
    main()
