"""Statistics over repeats and requests, stability warnings, and comparisons (numpy).

- :func:`summarize`: best, median, mean, standard deviation, MAD and coefficient of
  variation of per-repeat throughputs (B/s), with their count.
- :func:`percentiles`: p50/p90/p99/max of per-request latencies (ns) with their count. A
  percentile needs enough samples to exist: p50 needs 2, p90 needs 10, p99 needs 100
  (``n ≥ 1 / (1 − q)``); below that it is ``None``, never a guess.
- :func:`compare`: the ratio of two results' median throughputs with a bootstrap
  confidence interval, and a verdict (within one run: it knows nothing of how much
  separate runs differ).
- :func:`compare_runs`: the regression rule, over several runs on each side: slower,
  not slower, or inconclusive with the runs that would decide it (see its docstring and
  docs/regressions.md).
- :func:`stability_notices`: the warnings a careful tool prints, as
  :class:`~storeprobe.notices.Notice` values with a stable code, each saying what to do.

This module computes from numbers and numpy arrays only: it never imports
:mod:`storeprobe.result` (a Result is accepted by :func:`compare` through its
``samples``, by duck typing).

Why one module (~660 lines): every statistic a figure or a notice uses is computed here
and nowhere else (summaries, percentiles, the comparison of two probes, the comparison
of runs with its Student-t interval, the stability rules), on arrays only, under the one
contract that it never imports a Result.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np
from attrs import frozen

from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code, Notice

__all__ = [
    "CLIENT_BOUND_FRACTION",
    "MAX_RUNS_SUGGESTED",
    "Comparison",
    "Percentiles",
    "RunComparison",
    "RunVerdict",
    "Summary",
    "compare",
    "compare_runs",
    "percentiles",
    "stability_notices",
    "student_t_quantile",
    "summarize",
]

#: CPU time of the probe's process ÷ window at or above which the client is the bottleneck
CLIENT_BOUND_FRACTION = 0.9
#: coefficient of variation of throughput over repeats above which results are unstable
HIGH_VARIATION = 0.10
#: the repeats a high-variation notice advises (not advised to a run that had as many)
ADVISED_REPEATS = 10
#: first repeat this much slower than the median of the others: a warm-up effect
WARM_UP_FACTOR = 1.5
#: a window shorter than this many clock ticks is too short to time well
MIN_TICKS = 10_000
#: downloads faster than this over a network can only come from a cache (B/s; 100 Gbit/s)
IMPOSSIBLE_NETWORK_RATE = 100e9 / 8


@frozen(kw_only=True)
class Summary:
    """Per-repeat throughput statistics, in bytes per second."""

    n: int
    best: float
    median: float
    mean: float
    std: float
    mad: float
    cv: float


def summarize(values: Sequence[float] | np.ndarray) -> Summary:
    """Statistics of per-repeat throughputs (B/s); ``std`` is the sample (n−1) deviation."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ConfigurationError("no values to summarize")
    median = float(np.median(array))
    mean = float(array.mean())
    std = float(array.std(ddof=1)) if array.size > 1 else 0.0
    return Summary(
        n=int(array.size),
        best=float(array.max()),
        median=median,
        mean=mean,
        std=std,
        mad=float(np.median(np.abs(array - median))),
        cv=std / mean if mean > 0 else math.nan,
    )


@frozen(kw_only=True)
class Percentiles:
    """Latency percentiles in ns; ``None`` where ``n`` is too small to support one."""

    n: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None


def _supported(n: int, q: float) -> bool:
    return n >= math.ceil(1 / (1 - q) - 1e-9)


def percentiles(values: Sequence[int] | np.ndarray) -> Percentiles:
    """p50/p90/p99/max of ``values`` (ns), linear interpolation, with the count."""
    array = np.asarray(values, dtype=np.float64)
    n = int(array.size)

    def at(q: float) -> float | None:
        return float(np.percentile(array, 100 * q)) if n and _supported(n, q) else None

    return Percentiles(
        n=n, p50=at(0.50), p90=at(0.90), p99=at(0.99), max=float(array.max()) if n else None
    )


class _HasRate(Protocol):
    @property
    def bytes_per_s(self) -> float: ...


class _Measured(Protocol):
    """Anything with per-repeat samples that have a ``bytes_per_s`` (a Result)."""

    @property
    def samples(self) -> Sequence[_HasRate]: ...


def _rates(value: _Measured | Sequence[float] | np.ndarray) -> np.ndarray:
    if isinstance(value, np.ndarray | Sequence):
        return np.asarray(value, dtype=np.float64).reshape(-1)
    return np.array([sample.bytes_per_s for sample in value.samples], dtype=np.float64)


Verdict = Literal["faster", "slower", "no significant difference"]


@frozen(kw_only=True)
class Comparison:
    """``a`` relative to ``b``: ratio of median throughputs and its confidence interval."""

    ratio: float
    low: float
    high: float
    confidence: float
    verdict: Verdict

    def __str__(self) -> str:
        return (
            f"{self.ratio:.3f}× ({self.confidence:.0%} CI {self.low:.3f}–{self.high:.3f}): "
            f"{self.verdict}"
        )


def compare(
    a: _Measured | Sequence[float] | np.ndarray,
    b: _Measured | Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Is ``a`` faster than ``b``? Bootstrap the ratio of median throughputs.

    ``a`` and ``b`` are per-repeat throughputs (B/s, any array-like) or Results (their
    samples' ``bytes_per_s``).
    Each result's per-repeat throughputs are resampled with replacement ``resamples``
    times; the interval is the central ``confidence`` share of the resampled ratios.
    The verdict is "faster" when the whole interval lies above 1, "slower" when below,
    otherwise "no significant difference". With 3 repeats each the interval is coarse:
    more repeats make it tighter.
    """
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be in (0, 1), not {confidence}")
    rates_a = _rates(a)
    rates_b = _rates(b)
    if rates_a.size == 0 or rates_b.size == 0:
        raise ConfigurationError("compare needs results with at least one successful sample")
    rng = np.random.default_rng(seed)
    boot_a = np.median(rng.choice(rates_a, size=(resamples, rates_a.size)), axis=1)
    boot_b = np.median(rng.choice(rates_b, size=(resamples, rates_b.size)), axis=1)
    ratios = boot_a / boot_b
    tail = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(ratios, [tail, 1 - tail]))
    ratio = float(np.median(rates_a) / np.median(rates_b))
    verdict: Verdict = (
        "faster" if low > 1 else "slower" if high < 1 else "no significant difference"
    )
    return Comparison(ratio=ratio, low=low, high=high, confidence=confidence, verdict=verdict)


# -- the regression rule: several runs on each side --------------------------------------------
RunVerdict = Literal["slower", "not slower", "inconclusive"]
#: the most runs a suggestion ever names; beyond it, no number of runs decides the question
MAX_RUNS_SUGGESTED = 1000


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 ≤ x ≤ 1."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _student_t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


@functools.lru_cache(maxsize=4096)
def student_t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on
    the exact CDF, to 1e-12; numpy has no t distribution and scipy is no dependency)."""
    if not 0 < p < 1 or not df > 0:
        raise ConfigurationError(f"student_t_quantile needs 0 < p < 1 and df > 0, not {p}, {df}")
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while _student_t_cdf(high, df) < p:
        low, high = high, high * 2
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2
        low, high = (middle, high) if _student_t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


@frozen(kw_only=True)
class RunComparison:
    """The new runs of one probe against its base runs, by :func:`compare_runs`.

    ``ratio`` is the geometric mean of the new runs' medians ÷ that of the base runs'
    (above 1 is faster); ``low`` and ``high`` bound its ``confidence`` interval, None
    when the runs cannot show how much runs differ (one run on each side).
    ``run_spread`` is the standard deviation of log run medians used (≈ the relative
    run-to-run spread; None without an estimate). ``base_runs_needed`` and
    ``new_runs_needed`` say, for an inconclusive verdict, how many base runs (with the
    new runs as they are) or new runs (with the base runs as they are) would decide it
    at the spread seen; None when no number up to :data:`MAX_RUNS_SUGGESTED` would, or
    when the verdict is already decided. ``each_runs_needed``, given only when neither
    side alone would do, is the runs on each side that would.
    """

    ratio: float
    low: float | None
    high: float | None
    confidence: float
    threshold: float
    base_runs: int
    new_runs: int
    run_spread: float | None
    verdict: RunVerdict
    base_runs_needed: int | None
    new_runs_needed: int | None
    each_runs_needed: int | None = None

    @property
    def limit(self) -> float:
        """``1 − threshold``: a ratio below it is slower by more than the threshold."""
        return 1 - self.threshold

    @property
    def reason(self) -> str:
        """Why the verdict, and for ``inconclusive`` what would decide it."""
        runs = f"{_runs(self.base_runs, 'base')} and {_runs(self.new_runs, 'new')}"
        if self.verdict == "slower":
            return f"{runs}: the whole interval lies below {self.limit:.3f}"
        if self.verdict == "not slower":
            return f"{runs}: the whole interval lies at or above {self.limit:.3f}"
        if self.low is None:
            known = "how much separate runs differ is unknown"
        else:
            known = f"the interval straddles {self.limit:.3f}"
        needs = []
        if self.base_runs_needed is not None:
            needs.append(f"{_runs(self.base_runs_needed, 'base')} in all")
        if self.new_runs_needed is not None:
            needs.append(f"{_runs(self.new_runs_needed, 'new')} in all")
        if self.each_runs_needed is not None:
            needs.append(f"{self.each_runs_needed} runs on each side")
        if needs:
            spread = (
                ""
                if self.run_spread is None
                else f" at a run-to-run spread of {self.run_spread:.1%}"
            )
            at_least = "at least " if self.low is None else "about "
            decide = f"{at_least}{' or '.join(needs)} would decide it{spread}"
        elif self.low is None:
            decide = "another run on either side shows how much runs differ"
        else:
            decide = (
                f"no number of runs up to {MAX_RUNS_SUGGESTED} decides it at a run-to-run "
                f"spread of {self.run_spread or 0:.1%}: the ratio is too close to the threshold"
            )
        return f"{runs}: {known}; {decide}"

    def __str__(self) -> str:
        interval = (
            ""
            if self.low is None
            else f" ({self.confidence:.0%} interval {self.low:.3f}–{self.high:.3f})"
        )
        return f"{self.ratio:.3f}×{interval}: {self.verdict} ({self.reason})"


def _runs(n: int, side: str) -> str:
    return f"{n} {side} run{'s' if n != 1 else ''}"


def _log_medians(runs: Sequence[Sequence[float] | np.ndarray], side: str) -> list[np.ndarray]:
    logs = []
    for run in runs:
        figures = np.asarray(run, dtype=np.float64).reshape(-1)
        if figures.size == 0:
            continue
        if not (np.isfinite(figures).all() and (figures > 0).all()):
            raise ConfigurationError(
                f"compare_runs: every figure of the {side} runs must be a positive, finite rate, "
                f"not {figures.tolist()}"
            )
        logs.append(np.log(figures))
    if not logs:
        raise ConfigurationError(
            f"compare_runs needs at least one {side} run with a successful repeat"
        )
    return logs


def _bound_below(
    gap: float, spread: float, base: int, new: int, confidence: float, vary: str
) -> int | None:
    """The fewest runs on the ``vary`` side ("base", "new", or "each": that many on both)
    whose interval half-width falls below ``gap`` at ``spread``; None if no number up to
    MAX_RUNS_SUGGESTED does."""
    tail = 1 - (1 - confidence) / 2

    def decides(n: int) -> bool:
        k, m = (
            (n, new)
            if vary == "base"
            else (base, n)
            if vary == "new"
            else (max(base, n), max(new, n))
        )
        df = k + m - 2
        if df < 1:
            return False
        return student_t_quantile(tail, df) * spread * math.sqrt(1 / k + 1 / m) < gap

    start = base if vary == "base" else new if vary == "new" else min(base, new)
    if gap <= 0 or not decides(MAX_RUNS_SUGGESTED):
        return None
    low, high = start, MAX_RUNS_SUGGESTED  # decides(high); the answer lies in (low, high]
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if decides(middle) else (middle, high)
    return high


def _within_floor(base_logs: Sequence[np.ndarray], new_logs: Sequence[np.ndarray]) -> float:
    """The least squared run-to-run spread of log run medians that the spread within the
    runs alone gives a median of n repeats: π/2 · σ²_within / n (0 without a run of two
    repeats or more)."""
    within = [run for run in (*base_logs, *new_logs) if run.size >= 2]
    floor = 0.0
    if within:
        pooled = sum(float(((run - run.mean()) ** 2).sum()) for run in within) / sum(
            run.size - 1 for run in within
        )
        repeats = float(np.mean([run.size for run in (*base_logs, *new_logs)]))
        floor = math.pi / 2 * pooled / repeats
    return floor


def _interval(
    base_logs: Sequence[np.ndarray], new_logs: Sequence[np.ndarray], limit: float, confidence: float
) -> tuple[float, float | None, float | None, float | None, RunVerdict]:
    """Of :func:`compare_runs`: the log ratio of the mean log run medians, the run-to-run
    spread, the interval for the ratio (low, high) and the verdict against ``limit``
    (log of 1 − threshold); with k + m − 2 < 1 no interval and "inconclusive"."""
    k, m = len(base_logs), len(new_logs)
    base_medians = np.array([math.log(float(np.median(np.exp(run)))) for run in base_logs])
    new_medians = np.array([math.log(float(np.median(np.exp(run)))) for run in new_logs])
    difference = float(new_medians.mean() - base_medians.mean())
    floor = _within_floor(base_logs, new_logs)
    df = k + m - 2
    if df >= 1:
        squares = float(((base_medians - base_medians.mean()) ** 2).sum()) + float(
            ((new_medians - new_medians.mean()) ** 2).sum()
        )
        spread: float | None = math.sqrt(max(squares / df, floor))
        half = student_t_quantile(1 - (1 - confidence) / 2, df) * math.sqrt(
            max(squares / df, floor) * (1 / k + 1 / m)
        )
        verdict: RunVerdict = (
            "slower"
            if difference + half < limit
            else "not slower"
            if difference - half >= limit
            else "inconclusive"
        )
        low: float | None = math.exp(difference - half)
        high: float | None = math.exp(difference + half)
    else:
        spread = math.sqrt(floor) if floor > 0 else None
        low = high = None
        verdict = "inconclusive"
    return difference, spread, low, high, verdict


def compare_runs(
    base: Sequence[Sequence[float] | np.ndarray],
    new: Sequence[Sequence[float] | np.ndarray],
    *,
    threshold: float = 0.0,
    confidence: float = 0.95,
) -> RunComparison:
    """Is the new run slower than the base runs by more than ``threshold``? The rule.

    ``base`` and ``new`` are runs, each a sequence of per-repeat figures (B/s or ops/s,
    positive); a run without a figure is left out. The model (random effects): the log
    median of a run is the probe's true level plus a run effect, which varies from run
    to run (the machine, the storage, the time of day) with a spread that no repeat
    inside one run can show. So each run is reduced to its median, and

    - ``ratio`` = exp(mean log median of new − mean log median of base);
    - the run-to-run spread ``s`` is the pooled sample standard deviation of the log
      run medians of both sides (k + m − 2 degrees of freedom for k base and m new
      runs), never taken below what the spread within the runs alone gives a median of
      n repeats (π/2 · σ²_within / n);
    - the interval is ratio × exp(± t · s · √(1/k + 1/m)), ``t`` the two-sided
      ``confidence`` quantile of Student's t (a prediction interval for one new run when
      m = 1);
    - **slower** when the whole interval lies below ``1 − threshold``; **not slower**
      when it lies at or above; else **inconclusive**, also when k + m − 2 < 1 (one run
      on each side: how much runs differ is unknown, whatever the repeats). An
      inconclusive verdict names the base runs (or new runs) that would decide it at
      the spread seen (with one run on each side, the within-run spread gives the
      least number).

    Scale-free (all figures × c: the same verdict) and monotone (a slower new run never
    gets a better verdict). Its false-alarm rate on A/A pairs is at most (1 − confidence)/2
    when the model holds; docs/regressions.md has the rates measured on real storage.
    """
    _check_rule(threshold, confidence)
    base_logs = _log_medians(base, "base")
    new_logs = _log_medians(new, "new")
    k, m = len(base_logs), len(new_logs)
    limit = math.log(1 - threshold)
    difference, spread, low, high, verdict = _interval(base_logs, new_logs, limit, confidence)
    needed = _runs_needed(verdict, abs(difference - limit), spread, k, m, confidence)
    return RunComparison(
        ratio=math.exp(difference),
        low=low,
        high=high,
        confidence=confidence,
        threshold=threshold,
        base_runs=k,
        new_runs=m,
        run_spread=spread,
        verdict=verdict,
        base_runs_needed=needed[0],
        new_runs_needed=needed[1],
        each_runs_needed=needed[2],
    )


def _check_rule(threshold: float, confidence: float) -> None:
    if isinstance(threshold, bool) or not 0 <= threshold < 1:
        raise ConfigurationError(
            f"threshold is a fraction in [0, 1) such as 0.05, not {threshold!r}"
        )
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be in (0, 1), not {confidence}")


def _runs_needed(
    verdict: RunVerdict, gap: float, spread: float | None, k: int, m: int, confidence: float
) -> tuple[int | None, int | None, int | None]:
    """The base runs, else new runs, else runs on each side that would decide an
    inconclusive verdict at ``spread`` (None each where none would, or it is decided)."""
    base_needed = new_needed = each_needed = None
    if verdict == "inconclusive" and spread is not None:
        base_needed = _bound_below(gap, spread, k, m, confidence, "base")
        new_needed = _bound_below(gap, spread, k, m, confidence, "new")
        if base_needed is None and new_needed is None:
            each_needed = _bound_below(gap, spread, k, m, confidence, "each")
    return base_needed, new_needed, each_needed


def stability_notices(
    rates_bps: np.ndarray,
    elapsed_ns: np.ndarray,
    cpu_fraction: np.ndarray,
    *,
    operation: str,
    remote: bool,
    clock_resolution_s: float | None = None,
    warmup: int = 0,
) -> list[Notice]:
    """Notices about the repeats of one probe, each saying what to do next.

    The three arrays have one entry per successful repeat, in order: ``rates_bps`` the
    throughput (B/s), ``elapsed_ns`` the timed window (ns), ``cpu_fraction`` the probe
    process's CPU time ÷ window (``nan`` where unknown). ``clock_resolution_s`` is the
    timer's resolution in seconds (default: ``time.perf_counter``'s). ``warmup`` is how
    many warm-up repeats ran before these (their figures are not in the arrays).

    Rules, by code (documented in docs/concepts.md):

    - ``HIGH_VARIATION``: coefficient of variation of throughput over ≥ 2 repeats > 10 %;
    - ``WARM_UP``: with ≥ 3 repeats and no warm-up repeat (``warmup=0``), the first
      window is > 1.5 × the median of the rest; the fix advises ``warmup=1``;
    - ``WINDOW_TOO_SHORT``: the shortest window is under 10 000 clock ticks, or under 1 ms;
    - ``CLIENT_BOUND``: every repeat with a known CPU fraction used ≥ 90 % of one core
      (Python moves bytes on one core at a time), so the client, not the storage, is
      the limit;
    - ``CACHE_SUSPECTED``: a download from a remote storage faster than 100 Gbit/s.
    """
    rates = np.asarray(rates_bps, dtype=np.float64).reshape(-1)
    elapsed = np.asarray(elapsed_ns, dtype=np.float64).reshape(-1)
    cpu = np.asarray(cpu_fraction, dtype=np.float64).reshape(-1)
    if not rates.size == elapsed.size == cpu.size:
        raise ConfigurationError(
            "stability_notices needs one rate, one window and one CPU fraction per repeat "
            f"(got {rates.size}, {elapsed.size} and {cpu.size}): pass arrays of equal length, "
            "nan for an unknown CPU fraction"
        )
    if rates.size == 0:
        return []
    resolution = clock_resolution_s or time.get_clock_info("perf_counter").resolution
    found = (
        _high_variation(rates),
        _warm_up(elapsed, warmup),
        _window_too_short(elapsed, resolution),
        _client_bound(cpu, remote),
        _cache_suspected(rates, operation, remote),
    )
    return [notice for notice in found if notice is not None]


def _high_variation(rates: np.ndarray) -> Notice | None:
    """``HIGH_VARIATION``: over ≥ 2 repeats, a coefficient of variation above 10 %."""
    if rates.size < 2:
        return None
    summary = summarize(rates)
    if not summary.cv > HIGH_VARIATION:  # nan (a zero mean) is no variation either
        return None
    more = summary.n < ADVISED_REPEATS  # never advise what the run already did
    return Notice(
        code=Code.HIGH_VARIATION,
        message=f"throughput varies by {summary.cv:.0%} (coefficient of "
        f"variation) over {summary.n} repeats",
        fix=f"run more repeats (repeats={ADVISED_REPEATS}) and compare medians"
        if more
        else "the spread is real at this many repeats: compare medians, and look "
        "for what else loads the machine, the network or the storage",
        option="repeats" if more else "",
        value=str(ADVISED_REPEATS) if more else "",
    )


def _warm_up(elapsed: np.ndarray, warmup: int) -> Notice | None:
    """``WARM_UP``: ≥ 3 repeats, none to warm up, the first > 1.5 × the others' median."""
    if elapsed.size < 3 or warmup != 0:  # after a warm-up, its advice was followed
        return None
    first = float(elapsed[0])
    rest = float(np.median(elapsed[1:]))
    if not first > WARM_UP_FACTOR * rest:
        return None
    return Notice(
        code=Code.WARM_UP,
        message=f"the first repeat took {first / rest:.1f}× the median of the "
        "others: connections or caches were cold",
        fix="discard it or add a warm-up repeat (warmup=1)",
        repeat=1,
        option="warmup",
        value="1",
    )


def _window_too_short(elapsed: np.ndarray, resolution: float) -> Notice | None:
    """``WINDOW_TOO_SHORT``: the shortest window under 10 000 ticks of the clock, or 1 ms."""
    shortest = float(elapsed.min()) / 1e9
    if not shortest < max(MIN_TICKS * resolution, 1e-3):
        return None
    return Notice(
        code=Code.WINDOW_TOO_SHORT,
        message=f"{shortest * 1e3:.3f} ms is too short to time reliably",
        fix="use a larger workload",
        repeat=int(np.argmin(elapsed)) + 1 if elapsed.size > 1 else None,
    )


def _client_bound(cpu: np.ndarray, remote: bool) -> Notice | None:
    """``CLIENT_BOUND``: every known CPU fraction at least 90 % of one core."""
    known = cpu[~np.isnan(cpu)]
    if not (known.size and float(known.min()) >= CLIENT_BOUND_FRACTION):
        return None
    return Notice(
        code=Code.CLIENT_BOUND,
        message=f"storeprobe's process was busy {float(known.min()):.0%} of the "
        "window on the CPU: the client, not the storage, limited this figure",
        fix="try more streams, a faster client (e.g. obstore) or a less loaded machine"
        if remote
        else "try more streams or a less loaded machine",
    )


def _cache_suspected(rates: np.ndarray, operation: str, remote: bool) -> Notice | None:
    """``CACHE_SUSPECTED``: a remote download faster than a 100 Gbit/s network."""
    if not (operation == "download" and remote and float(rates.max()) > IMPOSSIBLE_NETWORK_RATE):
        return None
    return Notice(
        code=Code.CACHE_SUSPECTED,
        message="this download ran faster than a 100 Gbit/s network could carry it: "
        "something between the probe and the storage served it from memory",
        fix="probe another prefix or bypass the cache (a proxy, a CDN, a gateway)",
        repeat=int(np.argmax(rates)) + 1 if rates.size > 1 else None,
    )
