"""Payload generation rate, in GiB/s (issue: ≥ 1 GiB/s).

Generates 1 GiB of workload payload (four 256 MiB objects) three ways and prints the
best of 3 for each, with the ratio to a plain ``memcpy`` of the same size measured in
the same run (the baseline: generation cannot beat copying the bytes once):

- into a reused buffer whose pages are already mapped;
- into fresh memory (``payload()``: a new bytearray, page faults included);
- into fresh ``bytes`` (``payload_bytes()``, how most backends' bodies are made);
- into a staging file (``Staging.of_payload``: 1 MiB at a time through a reused buffer,
  how a large split object is prepared);
- memcpy baseline (numpy copy between two mapped buffers).

    python benchmarks/generate.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from storeprobe import Workload
from storeprobe.staging import Staging

GiB = 1024**3


def best(run, repeats: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    workload = Workload(count=4, size="256MiB")
    reused = bytearray(workload.size)
    np.frombuffer(reused, np.uint8)[::4096] = 0

    def into_reused() -> None:
        for index in range(workload.count):
            workload.fill(index, 0, reused)

    def fresh() -> None:
        for index in range(workload.count):
            workload.payload(index)

    def fresh_bytes() -> None:
        for index in range(workload.count):
            workload.payload_bytes(index)

    def staged() -> None:
        for index in range(workload.count):
            Staging.of_payload(workload, index).close()

    source = np.ones(workload.size, np.uint8)
    target = np.zeros(workload.size, np.uint8)

    def memcpy() -> None:
        for _ in range(workload.count):
            np.copyto(target, source)

    copy_s = best(memcpy)
    print(f"{'memcpy baseline:':31} {1 / copy_s:6.2f} GiB/s")
    for name, run in (
        ("into a reused buffer", into_reused),
        ("into fresh memory (bytearray)", fresh),
        ("into fresh bytes", fresh_bytes),
        ("into a staging file", staged),
    ):
        seconds = best(run)
        print(f"{name + ':':31} {1 / seconds:6.2f} GiB/s ({copy_s / seconds:.2f}× memcpy)")


if __name__ == "__main__":
    main()
