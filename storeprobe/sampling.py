"""Samples from runs: one window's records, or several windows of one step combined.

Throughput stays bytes over time: a step made of several windows (a listing, then the
transfers, then a manifest) counts the sum of their spans as its time, never the gaps
between them, and keeps every request's record.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from storeprobe.request import KINDS
from storeprobe.result import Sample
from storeprobe.transfer import Run

__all__ = ["combine", "sample_of", "seconds_by_kind"]


def sample_of(run: Run, retries: int | None = None) -> Sample:
    """The sample of one window: its span, bytes and per-request records."""
    timings = run.timings
    opened = int(timings.start_ns.min())
    return Sample(
        nbytes=int(timings.nbytes.sum()),
        elapsed_ns=int(timings.end_ns.max()) - opened,
        latencies_ns=timings.end_ns - timings.start_ns,
        max_in_flight=timings.max_in_flight * run.inner,
        retries=retries,
        offsets_ns=timings.start_ns - opened,
        request_bytes=timings.nbytes,
        workers=timings.worker,
        ttfb_ns=timings.ttfb_ns[timings.ttfb_ns >= 0],
        cpu_ns=timings.cpu_ns,
        requests_by_kind=run.requests_by_kind(),
        bytes_sent=int(timings.sent.sum()),
        bytes_received=int(timings.received.sum()),
    )


def combine(runs: Sequence[Run]) -> Sample:
    """One sample for a step of several windows: their times added, their records kept."""
    if not runs:
        return Sample(nbytes=0, elapsed_ns=0, latencies_ns=np.zeros(0, np.int64))
    elapsed = 0
    offsets: list[np.ndarray] = []
    kinds: dict[str, int] = {}
    for run in runs:
        timings = run.timings
        opened = int(timings.start_ns.min())
        offsets.append(timings.start_ns - opened + elapsed)
        elapsed += int(timings.end_ns.max()) - opened
        for kind, count in run.requests_by_kind().items():
            kinds[kind] = kinds.get(kind, 0) + count
    every = [run.timings for run in runs]
    ttfb = np.concatenate([t.ttfb_ns for t in every])
    return Sample(
        nbytes=int(sum(int(t.nbytes.sum()) for t in every)),
        elapsed_ns=elapsed,
        latencies_ns=np.concatenate([t.end_ns - t.start_ns for t in every]),
        max_in_flight=max(t.max_in_flight * run.inner for t, run in zip(every, runs, strict=True)),
        offsets_ns=np.concatenate(offsets),
        request_bytes=np.concatenate([t.nbytes for t in every]),
        workers=np.concatenate([t.worker for t in every]),
        ttfb_ns=ttfb[ttfb >= 0],
        cpu_ns=sum(t.cpu_ns for t in every),
        requests_by_kind=kinds,
        bytes_sent=int(sum(int(t.sent.sum()) for t in every)),
        bytes_received=int(sum(int(t.received.sum()) for t in every)),
    )


def seconds_by_kind(runs: Sequence[Run]) -> dict[str, float]:
    """Seconds spent in requests of each kind: the sum of their latencies."""
    seconds: dict[str, float] = {}
    for run in runs:
        timings = run.timings
        for index, latency in zip(
            timings.kind.tolist(), (timings.end_ns - timings.start_ns).tolist(), strict=True
        ):
            name = KINDS[index].value
            seconds[name] = seconds.get(name, 0.0) + latency / 1e9
    return seconds
