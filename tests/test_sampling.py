"""storeprobe.sampling: a window's sample, several windows of one step combined, clock
offsets from round trips, and many workers' windows on one time base. Every figure here
is exact: the runs' marks are written out (nanoseconds), as an engine records them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from storeprobe.backends.attempts import Attempts
from storeprobe.request import Kind, Outcome, kind_index
from storeprobe.result import Sample
from storeprobe.sampling import (
    Window,
    aggregate,
    combine,
    estimate_offset,
    sample_of,
    seconds_by_kind,
)
from storeprobe.transfer import Run, Timings


def _run(
    marks: Sequence[tuple[int, int]],
    *,
    kinds: Sequence[Kind] | None = None,
    sent: Sequence[int] | None = None,
    received: Sequence[int] | None = None,
    ttfb: Sequence[int] | None = None,
    workers: Sequence[int] | None = None,
    max_in_flight: int = 1,
    cpu_ns: int = 0,
    inner: int = 1,
    outcomes: Sequence[Outcome] | None = None,
) -> Run:
    """A run of len(marks) requests, (start, end) each, in plan order."""
    count = len(marks)

    def array(values: Sequence[int] | None, default: int) -> np.ndarray:
        return np.array(values if values is not None else [default] * count, np.int64)

    return Run(
        timings=Timings(
            start_ns=np.array([start for start, _ in marks], np.int64),
            end_ns=np.array([end for _, end in marks], np.int64),
            sent=array(sent, 0),
            received=array(received, 0),
            worker=array(workers, 0),
            ttfb_ns=array(ttfb, -1),
            kind=np.array([kind_index(k) for k in (kinds or [Kind.GET] * count)], np.int64),
            position=np.arange(count, dtype=np.int64),
            max_in_flight=max_in_flight,
            cpu_ns=cpu_ns,
        ),
        outcomes=tuple(outcomes or [Outcome()] * count),
        inner=inner,
    )


# -- sample_of ----------------------------------------------------------------------------
def test_a_windows_sample_is_its_bytes_over_first_start_to_last_end() -> None:
    run = _run(
        [(1_000, 3_000), (1_500, 2_000), (2_000, 6_000)],
        received=[100, 200, 300],
        sent=[0, 0, 4],
        ttfb=[50, -1, 700],
        workers=[0, 1, 0],
        max_in_flight=2,
        cpu_ns=1234,
    )
    sample = sample_of(run)
    assert sample.nbytes == 604
    assert sample.elapsed_ns == 5_000  # 6 000 − 1 000, never a sum of latencies
    assert sample.latencies_ns.tolist() == [2_000, 500, 4_000]
    assert sample.offsets_ns.tolist() == [0, 500, 1_000]
    assert sample.request_bytes.tolist() == [100, 200, 304]
    assert sample.workers.tolist() == [0, 1, 0]
    assert sample.ttfb_ns.tolist() == [50, 700]  # -1: the client could not tell
    assert sample.max_in_flight == 2
    assert sample.cpu_ns == 1234
    assert sample.bytes_sent == 4
    assert sample.bytes_received == 600
    assert sample.requests_by_kind == {"get": 3}
    # not observable without the client's counts
    assert (sample.retries, sample.responses, sample.pushed_back) == (None, None, None)


def test_a_windows_sample_carries_what_the_clients_retries_saw() -> None:
    sample = sample_of(_run([(0, 10)]), Attempts(retries=2, responses=5, pushed_back=1))
    assert (sample.retries, sample.responses, sample.pushed_back) == (2, 5, 1)


def test_a_job_that_keeps_parts_in_flight_by_itself_multiplies_the_in_flight_count() -> None:
    """One obstore multipart upload job with 4 parts in flight: 4 requests in flight."""
    run = _run(
        [(0, 100)],
        kinds=[Kind.PUT],
        inner=4,
        outcomes=[Outcome(wire=((Kind.CREATE_MULTIPART, 1), (Kind.PUT_PART, 8)))],
    )
    sample = sample_of(run)
    assert sample.max_in_flight == 4
    assert sample.requests_by_kind == {"create-multipart": 1, "put-part": 8}


# -- combine ------------------------------------------------------------------------------
def test_a_step_of_several_windows_counts_their_spans_never_the_gaps() -> None:
    listing = _run([(1_000, 1_400)], kinds=[Kind.LIST], cpu_ns=10)
    transfers = _run(
        [(50_000, 51_000), (50_200, 52_000)],
        kinds=[Kind.PUT, Kind.PUT],
        sent=[700, 800],
        max_in_flight=2,
        cpu_ns=20,
    )
    manifest = _run([(90_000, 90_100)], kinds=[Kind.PUT], sent=[10])
    sample = combine([listing, transfers, manifest])
    assert sample.elapsed_ns == 400 + 2_000 + 100
    assert sample.nbytes == 1_510
    assert sample.bytes_sent == 1_510
    # each window's requests start where the windows before it ended, on the step's time
    assert sample.offsets_ns.tolist() == [0, 400, 600, 2_400]
    assert sample.latencies_ns.tolist() == [400, 1_000, 1_800, 100]
    assert sample.requests_by_kind == {"list": 1, "put": 3}
    assert sample.max_in_flight == 2
    assert sample.cpu_ns == 30


def test_a_step_of_no_windows_moved_nothing() -> None:
    sample = combine([])
    assert (sample.nbytes, sample.elapsed_ns, sample.latencies_ns.size) == (0, 0, 0)


# -- seconds_by_kind ----------------------------------------------------------------------
def test_seconds_by_kind_sums_each_kinds_latencies() -> None:
    runs = [
        _run([(0, 2_000_000_000), (0, 500_000_000)], kinds=[Kind.PUT, Kind.HEAD]),
        _run([(0, 1_000_000_000)], kinds=[Kind.PUT]),
    ]
    assert seconds_by_kind(runs) == {"put": 3.0, "head": 0.5}


# -- estimate_offset ----------------------------------------------------------------------
def test_the_shortest_round_trip_sets_the_offset_and_half_of_it_bounds_the_error() -> None:
    # (sent, worker's clock, received) on the coordinator's clock
    readings = [(0, 5_000, 1_000), (2_000, 6_150, 2_100), (3_000, 7_900, 3_900)]
    offset, uncertainty = estimate_offset(readings)
    assert offset == 6_150 - 2_050
    assert uncertainty == 50


def test_estimate_offset_refuses_no_readings_and_a_reading_that_ends_before_it_starts() -> None:
    with pytest.raises(ValueError, match="no readings"):
        estimate_offset([])
    with pytest.raises(ValueError, match="a reading ends before it starts: 10 > 5"):
        estimate_offset([(10, 0, 5)])


# -- aggregate ----------------------------------------------------------------------------
def _worker_sample(
    latencies: list[int], offsets: list[int], nbytes: int, retries: int | None
) -> Sample:
    return Sample(
        nbytes=nbytes,
        elapsed_ns=max(o + lat for o, lat in zip(offsets, latencies, strict=True)),
        latencies_ns=np.array(latencies, np.int64),
        offsets_ns=np.array(offsets, np.int64),
        request_bytes=np.full(len(latencies), nbytes // len(latencies), np.int64),
        workers=np.zeros(len(latencies), np.int64),
        ttfb_ns=np.zeros(0, np.int64),
        max_in_flight=len(latencies),
        retries=retries,
        responses=None if retries is None else len(latencies),
        pushed_back=None if retries is None else 0,
        cpu_ns=99,
        requests_by_kind={"get": len(latencies)},
        bytes_received=nbytes,
    )


def test_aggregate_puts_every_worker_on_one_time_base() -> None:
    first = _worker_sample([100, 200], [0, 50], nbytes=2_000, retries=1)
    second = _worker_sample([300], [0], nbytes=3_000, retries=2)
    windows = [Window(10_000, 10_250), Window(10_400, 10_700)]
    sample, spread = aggregate([first, second], windows)
    assert sample.elapsed_ns == 700  # latest end − earliest start
    assert sample.nbytes == 5_000
    assert sample.offsets_ns.tolist() == [0, 50, 400]
    assert sample.latencies_ns.tolist() == [100, 200, 300]
    assert sample.workers.tolist() == [0, 0, 1]  # each request carries its worker
    assert sample.max_in_flight == 3
    assert (sample.retries, sample.responses, sample.pushed_back) == (3, 3, 0)
    assert sample.cpu_ns is None  # CPU time is not summed across machines
    assert sample.requests_by_kind == {"get": 3}
    assert sample.bytes_received == 5_000
    assert spread == 400


def test_aggregate_counts_retries_only_when_every_worker_could_see_them() -> None:
    seen = _worker_sample([100], [0], nbytes=10, retries=4)
    unseen = _worker_sample([100], [0], nbytes=10, retries=None)
    sample, _ = aggregate([seen, unseen], [Window(0, 100), Window(0, 100)])
    assert (sample.retries, sample.responses, sample.pushed_back) == (None, None, None)


def test_aggregate_needs_one_window_per_sample() -> None:
    one = _worker_sample([100], [0], nbytes=10, retries=None)
    with pytest.raises(ValueError, match="one window per sample"):
        aggregate([one], [])
    with pytest.raises(ValueError, match="at least one"):
        aggregate([], [])
