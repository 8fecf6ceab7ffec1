"""Statistics, warnings and comparisons: exact values from constructed samples and an
injected clock; time to first byte and CPU time from real probes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storeprobe import Environment, Probe, Result, Sample, Subject, Workload
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code
from storeprobe.stats import (
    compare,
    compare_runs,
    percentiles,
    stability_notices,
    student_t_quantile,
    summarize,
)
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
        subject=Subject.of(Workload(count=1, size=MiB)),
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


# -- the regression rule over runs (compare_runs) ------------------------------------------------
ORDER = {"slower": 0, "inconclusive": 1, "not slower": 2}


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [  # Student's t table
        (0.975, 1, 12.7062047),
        (0.975, 2, 4.3026527),
        (0.975, 4, 2.7764451),
        (0.975, 10, 2.2281389),
        (0.95, 5, 2.0150484),
        (0.025, 3, -3.1824463),
        (0.5, 7, 0.0),
    ],
)
def test_student_t_quantiles_match_the_table(p: float, df: int, expected: float) -> None:
    assert student_t_quantile(p, df) == pytest.approx(expected, abs=1e-6)


def test_identical_runs_are_not_slower_exactly() -> None:
    found = compare_runs([[100.0] * 3] * 5, [[100.0] * 3], threshold=0.05)
    assert (found.verdict, found.ratio, found.low, found.high) == ("not slower", 1.0, 1.0, 1.0)
    assert (found.base_runs, found.new_runs, found.run_spread) == (5, 1, 0.0)
    assert (found.base_runs_needed, found.new_runs_needed) == (None, None)
    assert found.reason == "5 base runs and 1 new run: the whole interval lies at or above 0.950"


def test_a_clearly_shifted_run_is_slower() -> None:
    base = [[1.00], [1.02], [0.98], [1.01], [0.99]]
    found = compare_runs(base, [[0.5]], threshold=0.05)
    assert found.verdict == "slower"
    assert found.ratio == pytest.approx(0.5, rel=1e-3)
    assert found.high is not None
    assert found.high < 0.95
    # the interval is a prediction interval for one new run: t(0.975, 4) · s · √(1 + 1/5)
    logs = np.log([1.00, 1.02, 0.98, 1.01, 0.99])
    spread = float(np.std(logs, ddof=1))
    assert found.run_spread == pytest.approx(spread)
    half = 2.7764451 * spread * math.sqrt(1 + 1 / 5)
    assert math.log(found.high / found.ratio) == pytest.approx(half, rel=1e-6)


def test_one_run_each_is_inconclusive_however_many_repeats_and_names_the_runs() -> None:
    # twice as slow, ten repeats each: one run on each side cannot show how runs differ
    found = compare_runs([[1.0, 1.1, 0.9] * 3], [[0.5, 0.55, 0.45] * 3], threshold=0.05)
    assert (found.verdict, found.low, found.high) == ("inconclusive", None, None)
    assert found.ratio == pytest.approx(0.5)
    # the least number: the spread within the runs is a floor for the spread between them
    within = np.var(np.log([1.0, 1.1, 0.9] * 3), ddof=1)
    floor = math.sqrt(math.pi / 2 * within / 9)
    assert found.run_spread == pytest.approx(floor)
    gap = math.log(0.95) - math.log(found.ratio)
    needed = found.base_runs_needed
    assert needed is not None
    assert student_t_quantile(0.975, needed - 1) * floor * math.sqrt(1 / needed + 1) < gap
    assert needed == 2  # the fewest there can be: one more base run
    assert f"at least {needed} base runs in all" in found.reason
    # without any spread (one repeat each) the rule cannot even guess a count
    blind = compare_runs([[1.0]], [[0.5]], threshold=0.05)
    assert (blind.verdict, blind.base_runs_needed, blind.run_spread) == ("inconclusive", None, None)
    assert "another run on either side" in blind.reason


def test_too_few_repeats_one_run_of_three_each_is_inconclusive_where_the_old_rule_alarmed() -> None:
    # issue 25's false alarm: one run of 3 repeats against one of 3, the new median 0.81 ×
    base, new = [1.00, 1.05, 0.95], [0.808, 0.85, 0.77]
    old = compare(new, base)  # the first release's rule: a bootstrap of 3 repeats each
    assert (old.verdict, old.high < 0.95) == ("slower", True)
    found = compare_runs([base], [new], threshold=0.05)
    assert (found.verdict, found.low, found.high) == ("inconclusive", None, None)
    assert found.ratio == pytest.approx(0.808)
    needed = found.base_runs_needed
    assert needed is not None
    assert needed >= 2
    assert f"at least {needed} base runs in all" in found.reason
    # the same figures as five base runs and one new run: now decided
    decided = compare_runs([[b] for b in base] + [[1.02], [0.98]], [[0.808]], threshold=0.05)
    assert decided.verdict == "slower"


def test_too_few_base_runs_is_inconclusive_with_the_runs_that_would_decide() -> None:
    base = [[1.00], [1.10], [0.92]]
    found = compare_runs(base, [[0.7]], threshold=0.05)
    assert found.verdict == "inconclusive"
    assert found.low is not None
    assert found.high is not None
    assert found.low < 0.95 < found.high
    needed = found.base_runs_needed
    assert needed is not None
    assert needed > 3
    spread = found.run_spread
    assert spread is not None
    gap = math.log(0.95) - math.log(found.ratio)

    def half(k: int) -> float:
        return student_t_quantile(0.975, k - 1) * spread * math.sqrt(1 / k + 1)

    assert half(needed) < gap <= half(needed - 1)
    assert f"about {needed} base runs in all" in found.reason


def test_a_ratio_at_the_threshold_is_never_decided() -> None:
    base = [[1.0], [1.05], [0.95], [1.0]]
    found = compare_runs(
        base, [[0.95 * math.exp(np.log([1.0, 1.05, 0.95, 1.0]).mean())]], threshold=0.05
    )
    assert found.verdict == "inconclusive"
    assert (found.base_runs_needed, found.new_runs_needed, found.each_runs_needed) == (
        None,
        None,
        None,
    )
    assert "no number of runs up to 1000 decides it" in found.reason


def test_a_false_alarm_rate_within_the_model_is_at_most_a_tail() -> None:
    # random effects: run level ~ lognormal(0, 0.1), repeats ~ lognormal(level, 0.05);
    # 400 A/A pairs with 5 base runs: "slower" at threshold 0 is the lower 2.5 % tail
    rng = np.random.default_rng(7)

    def run() -> np.ndarray:
        return np.exp(rng.normal(0, 0.1) + rng.normal(0, 0.05, size=3))

    verdicts = [compare_runs([run() for _ in range(5)], [run()]).verdict for _ in range(400)]
    assert verdicts.count("slower") <= 0.025 * 400 + 3 * math.sqrt(0.025 * 0.975 * 400)


runs_strategy = st.lists(
    st.lists(st.floats(1.0, 100.0), min_size=1, max_size=4), min_size=1, max_size=6
)


@given(
    base=runs_strategy,
    new=runs_strategy,
    scale=st.floats(1e-3, 1e3),
    threshold=st.sampled_from([0.0, 0.05, 0.2]),
)
def test_compare_runs_is_scale_free(
    base: list[list[float]], new: list[list[float]], scale: float, threshold: float
) -> None:
    found = compare_runs(base, new, threshold=threshold)
    scaled = compare_runs(
        [[v * scale for v in run] for run in base],
        [[v * scale for v in run] for run in new],
        threshold=threshold,
    )
    assert scaled.ratio == pytest.approx(found.ratio, rel=1e-9)
    limit = math.log(1 - threshold)
    bounds = [found.low, found.high]
    if all(b is None or abs(math.log(b) - limit) > 1e-9 for b in bounds):  # not on the edge
        assert scaled.verdict == found.verdict


@given(base=runs_strategy, new=runs_strategy, slower=st.floats(0.1, 1.0))
def test_a_slower_new_run_never_gets_a_better_verdict(
    base: list[list[float]], new: list[list[float]], slower: float
) -> None:
    found = compare_runs(base, new, threshold=0.05)
    shifted = compare_runs(base, [[v * slower for v in run] for run in new], threshold=0.05)
    assert shifted.ratio <= found.ratio * (1 + 1e-12)
    assert ORDER[shifted.verdict] <= ORDER[found.verdict]


@pytest.mark.parametrize(
    ("base", "new", "threshold", "match"),
    [
        ([[1.0]], [[1.0]], 1.0, "threshold"),
        ([[1.0]], [[1.0]], -0.1, "threshold"),
        ([], [[1.0]], 0.05, "at least one base run"),
        ([[]], [[1.0]], 0.05, "at least one base run"),
        ([[1.0]], [[0.0]], 0.05, "positive, finite"),
        ([[math.nan]], [[1.0]], 0.05, "positive, finite"),
    ],
)
def test_compare_runs_refuses_bad_input(
    base: list[list[float]], new: list[list[float]], threshold: float, match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        compare_runs(base, new, threshold=threshold)
