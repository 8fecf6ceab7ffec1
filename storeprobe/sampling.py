"""Samples from runs: one window's records, several windows of one step combined, or the
windows of many clients put on one time base (:func:`aggregate`, with the clock offsets
of :func:`estimate_offset`).

Throughput stays bytes over time: a step made of several windows (a listing, then the
transfers, then a manifest) counts the sum of their spans as its time, never the gaps
between them, and keeps every request's record.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from attrs import frozen

from storeprobe.backends.attempts import Attempts
from storeprobe.request import KINDS
from storeprobe.result import Sample
from storeprobe.transfer import Run

__all__ = ["Window", "aggregate", "combine", "estimate_offset", "sample_of", "seconds_by_kind"]


def sample_of(run: Run, attempts: Attempts | None = None) -> Sample:
    """The sample of one window: its span, bytes and per-request records, and what the
    client's retry machinery saw in it (``attempts``; None: not observable)."""
    timings = run.timings
    opened = int(timings.start_ns.min())
    return Sample(
        nbytes=int(timings.nbytes.sum()),
        elapsed_ns=int(timings.end_ns.max()) - opened,
        latencies_ns=timings.end_ns - timings.start_ns,
        max_in_flight=timings.max_in_flight * run.inner,
        retries=None if attempts is None else attempts.retries,
        responses=None if attempts is None else attempts.responses,
        pushed_back=None if attempts is None else attempts.pushed_back,
        offsets_ns=timings.start_ns - opened,
        request_bytes=timings.nbytes,
        workers=timings.worker,
        ttfb_ns=timings.ttfb_ns[timings.ttfb_ns >= 0],
        cpu_ns=timings.cpu_ns,
        requests_by_kind=run.requests_by_kind(),
        bytes_sent=int(timings.sent.sum()),
        bytes_received=int(timings.received.sum()),
    )


def combine(runs: Sequence[Run], attempts: Attempts | None = None) -> Sample:
    """One sample for a step of several windows: their times added, their records kept,
    and what the client's retry machinery saw in them (``attempts``: the windows' counts
    summed; None: not observable)."""
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
        retries=None if attempts is None else attempts.retries,
        responses=None if attempts is None else attempts.responses,
        pushed_back=None if attempts is None else attempts.pushed_back,
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


def estimate_offset(readings: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """A worker's clock offset and its uncertainty (ns) from round trips, NTP-style.

    Each reading is (sent, worker, received): the coordinator's clock when it asked, the
    worker's clock when it answered, the coordinator's clock when the answer arrived.
    The reading with the shortest round trip wins: offset = worker − (sent + received)
    / 2, and the true offset lies within half that round trip of it, whatever the
    asymmetry of the two legs.
    """
    if not readings:
        raise ValueError("no readings")
    sent, worker, received = min(readings, key=lambda r: r[2] - r[0])
    if received < sent:
        raise ValueError(f"a reading ends before it starts: {sent} > {received}")
    return worker - (sent + received) // 2, (received - sent + 1) // 2


@frozen
class Window:
    """One worker's window of one repeat: first request start and last request end, ns
    on the coordinator's clock."""

    start_ns: int
    end_ns: int


def aggregate(samples: Sequence[Sample], windows: Sequence[Window]) -> tuple[Sample, int]:
    """One sample for a repeat run by several workers, and its start spread (ns).

    ``samples[i]`` is worker ``i``'s sample (its request offsets relative to its own
    window), ``windows[i]`` where that window lies on the common time base. The result
    moves every worker's bytes over (latest end − earliest start); its requests keep
    their latencies, start at their place on the common base, and carry the worker's
    number as their stream (so ``first_done_bytes_per_s`` is until the first *worker*
    finished). CPU time is not summed across machines (None).
    """
    if not samples or len(samples) != len(windows):
        raise ValueError("one window per sample, at least one")
    opened = min(w.start_ns for w in windows)
    closed = max(w.end_ns for w in windows)
    kinds: dict[str, int] = {}
    for sample in samples:
        for kind, count in sample.requests_by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + count
    offsets = np.concatenate(
        [s.offsets_ns + (w.start_ns - opened) for s, w in zip(samples, windows, strict=True)]
    )
    latencies = np.concatenate([s.latencies_ns for s in samples])
    retries = [s.retries for s in samples]
    responses = [s.responses for s in samples]
    pushed_back = [s.pushed_back for s in samples]
    starts = [w.start_ns for w in windows]
    return (
        Sample(
            nbytes=sum(s.nbytes for s in samples),
            elapsed_ns=closed - opened,
            latencies_ns=latencies,
            max_in_flight=sum(s.max_in_flight for s in samples),
            retries=None if None in retries else sum(r or 0 for r in retries),
            responses=None if None in responses else sum(r or 0 for r in responses),
            pushed_back=None if None in pushed_back else sum(r or 0 for r in pushed_back),
            offsets_ns=offsets,
            request_bytes=np.concatenate([s.request_bytes for s in samples]),
            workers=np.concatenate(
                [np.full(s.latencies_ns.size, i, np.int64) for i, s in enumerate(samples)]
            ),
            ttfb_ns=np.concatenate([s.ttfb_ns for s in samples]),
            cpu_ns=None,
            requests_by_kind=kinds,
            bytes_sent=sum(s.bytes_sent for s in samples),
            bytes_received=sum(s.bytes_received for s in samples),
        ),
        max(starts) - min(starts),
    )
