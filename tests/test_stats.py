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
from storeprobe.stats import compare, percentiles, stability_warnings, summarize
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


def test_stability_warning_rules() -> None:
    steady = [sample(10**9, cpu_ns=10**8) for _ in range(3)]
    assert stability_warnings(steady, operation="upload", remote=True) == []
    varied = [sample(10**9), sample(2 * 10**9), sample(10**9)]
    assert any(
        "high variation" in w for w in stability_warnings(varied, operation="upload", remote=True)
    )
    cold = [sample(4 * 10**9), sample(10**9), sample(10**9)]
    assert any("warm-up" in w for w in stability_warnings(cold, operation="upload", remote=True))
    short = [sample(500_000)]
    assert any("too short" in w for w in stability_warnings(short, operation="upload", remote=True))
    busy = [sample(10**9, cpu_ns=950_000_000)]
    assert any(
        "client-bound" in w for w in stability_warnings(busy, operation="upload", remote=True)
    )
    cached = [sample(10**6, nbytes=10 * 1024**3)]
    assert any(
        "cache suspected" in w
        for w in stability_warnings(cached, operation="download", remote=True)
    )
    assert not any(
        "cache" in w for w in stability_warnings(cached, operation="download", remote=False)
    )


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
