"""Statistics, warnings and comparisons: exact values from constructed samples and an
injected clock; time to first byte and CPU time from real probes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storeprobe import Environment, Probe, Result, Sample, Workload
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code
from storeprobe.stats import compare, percentiles, stability_notices, summarize
from tests.conftest import s3_options
from tests.helpers import StepClock
from tests.servers import Server

MiB = 1024**2


def sample(elapsed_ns: int, nbytes: int = MiB, **kw: Any) -> Sample:
    return Sample(
        nbytes=nbytes,
        elapsed_ns=elapsed_ns,
        latencies_ns=kw.pop("latencies_ns", [elapsed_ns]),
        **kw,
    )


def result_of(samples: list[Sample], operation: str = "upload") -> Result:
    return Result(
        operation=operation,  # type: ignore[arg-type]
        workload=Workload(count=1, size=MiB),
        url="s3://b",
        protocol="s3",
        backend="s3fs",
        streams=1,
        effective_streams=1,
        strategy="x",
        samples=samples,
        environment=Environment(hostname="h", cpu_count=2, platform="p", python="3"),
    )


def test_summary_is_exact() -> None:
    summary = summarize([1.0, 2.0, 3.0, 4.0])
    assert summary.n == 4
    assert (summary.best, summary.median, summary.mean) == (4.0, 2.5, 2.5)
    assert summary.std == pytest.approx(math.sqrt(5 / 3))
    assert summary.mad == 1.0
    assert summary.cv == pytest.approx(math.sqrt(5 / 3) / 2.5)
    single = summarize([7.0])
    assert (single.std, single.mad, single.cv) == (0.0, 0.0, 0.0)


def test_result_throughput_statistics() -> None:
    # 1 MiB in 1 s, 2 s, 4 s
    result = result_of([sample(10**9), sample(2 * 10**9), sample(4 * 10**9)])
    stats = result.throughput
    assert stats.n == 3
    assert stats.best == MiB
    assert stats.median == MiB / 2
    assert stats.mean == pytest.approx(MiB * 7 / 12)


def test_percentiles_need_enough_samples() -> None:
    assert percentiles([5]) == percentiles([5])
    one = percentiles([5])
    assert (one.n, one.p50, one.p90, one.p99, one.max) == (1, None, None, None, 5.0)
    two = percentiles([1, 3])
    assert (two.p50, two.p90) == (2.0, None)
    ten = percentiles(list(range(1, 11)))
    assert ten.p90 == pytest.approx(9.1)
    assert ten.p99 is None
    hundred = percentiles(list(range(100)))
    assert hundred.p99 == pytest.approx(98.01)
    assert percentiles([]).max is None


@given(st.lists(st.integers(0, 10**12), min_size=100, max_size=300))
def test_percentiles_are_ordered(values: list[int]) -> None:
    p = percentiles(values)
    assert p.p50 is not None
    assert p.p90 is not None
    assert p.p99 is not None
    assert p.max is not None
    assert min(values) <= p.p50 <= p.p90 <= p.p99 <= p.max == max(values)


def test_first_done_and_last_done_throughput() -> None:
    # two streams: worker 0 moves 2 × 100 B ending at 10 and 20 ns; worker 1 moves
    # 100 B ending at 40 ns. First done at 20 ns with 200 B; last done at 40 ns with 300 B.
    s = Sample(
        nbytes=300,
        elapsed_ns=40,
        latencies_ns=[10, 10, 40],
        offsets_ns=[0, 10, 0],
        request_bytes=[100, 100, 100],
        workers=[0, 0, 1],
    )
    assert s.first_done_bytes_per_s == 200 * 1e9 / 20
    assert s.last_done_bytes_per_s == 300 * 1e9 / 40


def test_injected_clock_gives_exact_per_request_records() -> None:
    probe = Probe.from_url("memory://stats", repeats=1, clock=StepClock())
    result = probe.upload(Workload(count=4, size=1000))
    s = result.samples[0]
    assert s.offsets_ns.tolist() == [0, 20, 40, 60]
    assert s.latencies_ns.tolist() == [10, 10, 10, 10]
    assert s.request_bytes.tolist() == [1000] * 4
    assert s.workers.tolist() == [0, 0, 0, 0]
    assert s.first_done_bytes_per_s == s.bytes_per_s == 4000 * 1e9 / 70
    assert result.latency.p50 == 10.0
    assert result.latency.n == 4


def test_compare_verdicts() -> None:
    fast = result_of([sample(10**9), sample(int(1.02e9)), sample(int(0.98e9))])
    slow = result_of([sample(2 * 10**9), sample(int(2.04e9)), sample(int(1.96e9))])
    verdict = compare(fast, slow)
    assert verdict.verdict == "faster"
    assert verdict.ratio == pytest.approx(2.0)
    assert verdict.low > 1
    assert compare(slow, fast).verdict == "slower"
    noisy = result_of([sample(10**9), sample(3 * 10**9), sample(2 * 10**9)])
    same = result_of([sample(int(1.5e9)), sample(int(2.5e9)), sample(2 * 10**9)])
    assert compare(noisy, same).verdict == "no significant difference"
    assert compare(noisy, same) == compare(noisy, same)  # seeded: reproducible
    assert "CI" in str(verdict)


def codes(samples: list[Sample], *, operation: str = "upload", remote: bool = True) -> list[Code]:
    notices = stability_notices(
        np.array([s.bytes_per_s for s in samples]),
        np.array([s.elapsed_ns for s in samples]),
        np.array([math.nan if s.cpu_fraction is None else s.cpu_fraction for s in samples]),
        operation=operation,
        remote=remote,
        clock_resolution_s=1e-9,
    )
    return [notice.code for notice in notices]


def test_stability_notice_rules() -> None:
    steady = [sample(10**9, cpu_ns=10**8) for _ in range(3)]
    assert codes(steady) == []
    varied = [sample(10**9), sample(2 * 10**9), sample(10**9)]
    assert codes(varied) == [Code.HIGH_VARIATION]
    cold = [sample(4 * 10**9), sample(10**9), sample(10**9)]
    assert Code.WARM_UP in codes(cold)
    short = [sample(500_000)]
    assert codes(short) == [Code.WINDOW_TOO_SHORT]
    busy = [sample(10**9, cpu_ns=950_000_000)]
    assert codes(busy) == [Code.CLIENT_BOUND]
    cached = [sample(10**6, nbytes=10 * 1024**3)]
    assert codes(cached, operation="download") == [Code.CACHE_SUSPECTED]  # 1 ms: not too short
    assert Code.CACHE_SUSPECTED not in codes(cached, operation="download", remote=False)
    assert Code.CACHE_SUSPECTED not in codes(cached, operation="upload")


def test_stability_notice_thresholds_are_the_documented_ones() -> None:
    # coefficient of variation just above and below 10 %
    assert codes([sample(10**9), sample(int(1.25e9))]) == [Code.HIGH_VARIATION]
    assert codes([sample(10**9), sample(int(1.1e9))]) == []
    # the first repeat 1.5× the median of the rest is not yet a warm-up; 1.6× is
    rest = [sample(10**9)] * 3
    assert Code.WARM_UP not in codes([sample(int(1.5e9)), *rest])
    warm = stability_notices(
        np.array([1.0, 1.6, 1.6, 1.6]),
        np.array([1.6e9, 1e9, 1e9, 1e9]),
        np.full(4, math.nan),
        operation="upload",
        remote=False,
    )
    assert [(n.code, n.repeat) for n in warm if n.code == Code.WARM_UP] == [(Code.WARM_UP, 1)]
    # 1 ms, or 10 000 ticks of a coarse clock
    assert codes([sample(10**6)]) == []
    assert codes([sample(999_999)]) == [Code.WINDOW_TOO_SHORT]
    coarse = stability_notices(
        np.array([1.0]),
        np.array([5e6]),
        np.array([math.nan]),
        operation="upload",
        remote=False,
        clock_resolution_s=1e-6,
    )
    assert [n.code for n in coarse] == [Code.WINDOW_TOO_SHORT]
    # client-bound only when every known repeat is at ≥ 90 %; unknown (nan) is ignored
    half = stability_notices(
        np.ones(3),
        np.full(3, 1e9),
        np.array([0.95, math.nan, 0.89]),
        operation="upload",
        remote=False,
    )
    assert half == []
    busy = stability_notices(
        np.ones(2), np.full(2, 1e9), np.array([0.9, math.nan]), operation="upload", remote=False
    )
    assert [n.code for n in busy] == [Code.CLIENT_BOUND]
    assert all(n.message and n.fix for n in busy)


def test_stability_notices_refuse_arrays_of_different_lengths() -> None:
    with pytest.raises(ConfigurationError, match="equal length"):
        stability_notices(np.ones(2), np.ones(3), np.ones(2), operation="upload", remote=False)


def test_compare_takes_arrays_too() -> None:
    assert compare([2.0, 2.1, 1.9], [1.0, 1.05, 0.95]).verdict == "faster"
    assert compare(np.array([1.0, 1.05, 0.95]), [2.0, 2.1, 1.9]).verdict == "slower"


def test_s3_downloads_measure_time_to_first_byte_and_cpu(s3_server: Server) -> None:
    probe = Probe.from_url("s3://bench/stats", s3_options(s3_server.endpoint), repeats=2)
    result = probe.download(Workload(count=16, size="16KiB"))
    assert result.ok
    assert result.ttfb.n == 32
    for s in result.samples:
        assert np.all(s.ttfb_ns <= s.latencies_ns)
        assert np.all(s.ttfb_ns > 0)
        assert s.cpu_ns is not None
        assert s.cpu_ns > 0
    assert result.latency.p90 is not None
    assert result.latency.p99 is None  # 32 requests cannot support a p99
