"""Throughput per time slice: exact numbers from constructed Samples, the rules' bounds."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storeprobe import ConfigurationError, Probe, Sample, Settings, Workload
from storeprobe.measurement import Measurement
from storeprobe.notices import Code
from storeprobe.timeline import (
    MIN_SLICES,
    STALL_FRACTION,
    STALL_MIN_SLICE_NS,
    STALL_MIN_SLICES,
    Timeline,
    slice_for,
    stall_notice,
    timeline,
)

MS = 1_000_000
S = 1_000_000_000


def sample(offsets: list[int], latencies: list[int], sizes: list[int], window: int) -> Sample:
    return Sample(
        nbytes=sum(sizes),
        elapsed_ns=window,
        latencies_ns=latencies,
        offsets_ns=offsets,
        request_bytes=sizes,
    )


def steady(rates: list[float], slice_ns: int = S) -> Timeline:
    """A timeline whose slices run at ``rates`` (B/s), all of length ``slice_ns``."""
    return Timeline(
        slice_ns=slice_ns,
        window_ns=slice_ns * len(rates),
        slice_bytes=np.array(rates) * slice_ns / 1e9,
    )


# -- apportioning ---------------------------------------------------------------------------
def test_two_requests_shared_over_the_slices_they_span() -> None:
    # 300 B from 0 to 3 s (100 B/s), then 100 B from 3 s to 4 s
    line = sample([0, 3 * S], [3 * S, S], [300, 100], 4 * S).timeline(S)
    assert line.slice_ns == S
    assert line.slices == 4
    assert line.slice_bytes.tolist() == [100.0, 100.0, 100.0, 100.0]
    assert line.rates.tolist() == [100.0] * 4


def test_a_request_inside_one_slice_lands_there_whole() -> None:
    line = sample([100 * MS, 1200 * MS], [300 * MS, 500 * MS], [7, 11], 2 * S).timeline(S)
    assert line.slice_bytes.tolist() == [7.0, 11.0]


def test_partial_overlap_is_proportional_to_time() -> None:
    # 400 B from 0.5 s to 2.5 s: 100 B in slice 0, 200 B in slice 1, 100 B in slice 2
    line = sample([500 * MS], [2 * S], [400], 3 * S).timeline(S)
    assert np.allclose(line.slice_bytes, [100, 200, 100])


def test_zero_duration_lands_in_its_end_slice() -> None:
    line = sample([0, 1500 * MS], [S, 0], [10, 5], 2 * S).timeline(S)
    assert line.slice_bytes.tolist() == [10.0, 5.0]
    # at the window's very end: the last slice
    assert sample([0, 2 * S], [2 * S, 0], [10, 5], 2 * S).timeline(S).slice_bytes[-1] == 10.0


def test_the_last_slice_is_shorter_and_its_rate_uses_its_own_length() -> None:
    line = sample([0], [2500 * MS], [250], 2500 * MS).timeline(S)
    assert line.lengths_ns.tolist() == [S, S, 500 * MS]
    assert np.allclose(line.slice_bytes, [100, 100, 50])
    assert np.allclose(line.rates, [100, 100, 100])
    assert line.starts_ns.tolist() == [0, S, 2 * S]


def test_a_request_past_the_window_extends_it() -> None:
    line = timeline([0], [3 * S], [30], window_ns=2 * S, slice_ns=S)
    assert line.window_ns == 3 * S
    assert line.slice_bytes.tolist() == [10.0, 10.0, 10.0]


@given(
    st.lists(
        st.tuples(st.integers(0, 10 * S), st.integers(0, 5 * S), st.integers(0, 2**40)),
        min_size=1,
        max_size=60,
    ),
    st.one_of(st.none(), st.integers(10 * MS, 3 * S)),
)
def test_bytes_are_conserved(records: list[tuple[int, int, int]], slice_ns: int | None) -> None:
    offsets, latencies, sizes = (list(column) for column in zip(*records, strict=True))
    window = max(o + d for o, d, _ in records)
    one = sample(offsets, latencies, sizes, window)
    line = one.timeline(slice_ns)
    assert line.nbytes == pytest.approx(one.nbytes, rel=1e-9, abs=1e-3)
    assert (line.slice_bytes >= -1e-6 * max(1, one.nbytes)).all()
    assert line.slices == max(1, -(-window // line.slice_ns))


# -- slice size ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (3600 * S, S),
        (20 * S, S),
        (19 * S, 500 * MS),
        (10 * S, 500 * MS),
        (3 * S, 100 * MS),
        (2 * S, 100 * MS),
        (1 * S, 50 * MS),
        (400 * MS, 20 * MS),
        (19, 1),
        (0, 1),
    ],
)
def test_slice_size_rule(window: int, expected: int) -> None:
    assert slice_for(window) == expected


@given(st.integers(20, 10**13))
def test_automatic_slices_are_at_least_twenty_and_at_most_a_second(window: int) -> None:
    size = slice_for(window)
    assert size <= S
    assert window // size >= MIN_SLICES or size == S
    assert str(size).lstrip("125").strip("0") == ""  # 1, 2 or 5 × 10ⁿ


def test_default_slices_of_a_sample() -> None:
    line = sample([0], [3 * S], [3000], 3 * S).timeline()
    assert line.slice_ns == 100 * MS
    assert line.slices == 30


# -- figures --------------------------------------------------------------------------------
def test_fastest_median_slowest_skip_the_first_and_last_slice() -> None:
    line = steady([1, 50, 40, 60, 2])
    assert (line.fastest, line.median, line.slowest) == (60.0, 50.0, 40.0)
    assert steady([5, 7]).slowest == 5.0  # under 3 slices: all of them
    assert "slowest 40" in repr(line)


def test_records_missing() -> None:
    old = Sample(nbytes=10, elapsed_ns=S, latencies_ns=[S])
    assert not old.has_timeline
    with pytest.raises(ConfigurationError, match="per-request records"):
        old.timeline()
    with pytest.raises(ConfigurationError, match="one start"):
        timeline([0, 1], [1], [1, 1], window_ns=2)
    with pytest.raises(ConfigurationError, match="positive"):
        timeline([0], [1], [1], window_ns=2, slice_ns=0)
    with pytest.raises(ConfigurationError, match="too many"):
        timeline([0], [S], [1], window_ns=S, slice_ns=1)


# -- stall -----------------------------------------------------------------------------------
def test_stall_below_a_quarter_of_the_median() -> None:
    rates = [1.0] + [100.0] * STALL_MIN_SLICES + [1.0]
    assert stall_notice(steady(rates)) is None  # first and last slices are ignored
    rates[5] = 24.0
    notice = stall_notice(steady(rates), repeat=2)
    assert notice is not None
    assert notice.code is Code.STALL
    assert notice.repeat == 2
    assert "24%" in notice.message
    assert notice.fix
    rates[5] = 100 * STALL_FRACTION  # exactly a quarter: no stall
    assert stall_notice(steady(rates)) is None


def test_stall_needs_ten_slices_between_first_and_last() -> None:
    short = [100.0] * (STALL_MIN_SLICES + 1)  # 9 between the first and the last
    short[4] = 0.0
    assert stall_notice(steady(short)) is None
    assert stall_notice(steady([*short, 100.0])) is not None
    # slices under 100 ms are too short to judge
    assert stall_notice(steady([*short, 100.0], slice_ns=STALL_MIN_SLICE_NS)) is not None
    assert stall_notice(steady([*short, 100.0], slice_ns=STALL_MIN_SLICE_NS - 1)) is None


def test_a_stalled_sample_is_warned_about_by_the_measurement(tmp_path: Path) -> None:
    # 14 requests of 1 s each, 100 B, back to back; the 7th moved 1 B
    sizes = [100] * 14
    sizes[6] = 1
    stalled = sample([i * S for i in range(14)], [S] * 14, sizes, 14 * S)
    fine = sample([i * S for i in range(14)], [S] * 14, [100] * 14, 14 * S)
    probe = Probe.from_url(str(tmp_path))
    measurement = Measurement(
        target=probe.target,
        operation="upload",
        workload=Workload(count=1, size=1),
        settings=Settings(repeats=2, verify=False, timeout=None),
        clock=time.perf_counter_ns,
        callback=None,
    )
    stalls = [n for n in measurement._judge([fine, stalled]) if n.code is Code.STALL]
    assert [n.repeat for n in stalls] == [2]
    assert not [n for n in measurement._judge([fine]) if n.code is Code.STALL]
