"""Statistics over repeats and requests, stability warnings, and comparisons (numpy).

- :func:`summarize`: best, median, mean, standard deviation, MAD and coefficient of
  variation of per-repeat throughputs (B/s), with their count.
- :func:`percentiles`: p50/p90/p99/max of per-request latencies (ns) with their count. A
  percentile needs enough samples to exist: p50 needs 2, p90 needs 10, p99 needs 100
  (``n ≥ 1 / (1 − q)``); below that it is ``None``, never a guess.
- :func:`compare`: the ratio of two results' median throughputs with a bootstrap
  confidence interval, and a verdict.
- :func:`stability_warnings`: the warnings a careful tool prints, each saying what to do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from attrs import frozen

from storeprobe.errors import ConfigurationError

if TYPE_CHECKING:
    from storeprobe.result import Result, Sample

__all__ = [
    "CLIENT_BOUND_FRACTION",
    "Comparison",
    "Percentiles",
    "Summary",
    "compare",
    "percentiles",
    "stability_warnings",
    "summarize",
]

#: CPU time of the probe's process ÷ window at or above which the client is the bottleneck
CLIENT_BOUND_FRACTION = 0.9
#: coefficient of variation of throughput over repeats above which results are unstable
HIGH_VARIATION = 0.10
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
    a: Result, b: Result, *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> Comparison:
    """Is ``a`` faster than ``b``? Bootstrap the ratio of median throughputs.

    Each result's per-repeat throughputs are resampled with replacement ``resamples``
    times; the interval is the central ``confidence`` share of the resampled ratios.
    The verdict is "faster" when the whole interval lies above 1, "slower" when below,
    otherwise "no significant difference". With 3 repeats each the interval is coarse:
    more repeats make it tighter.
    """
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be in (0, 1), not {confidence}")
    rates_a = np.array([s.bytes_per_s for s in a.samples], dtype=np.float64)
    rates_b = np.array([s.bytes_per_s for s in b.samples], dtype=np.float64)
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


def stability_warnings(
    samples: Sequence[Sample],
    *,
    operation: str,
    remote: bool,
    clock_resolution_s: float | None = None,
) -> list[str]:
    """Warnings about the samples of one probe, each saying what to do next.

    Rules (documented in docs/concepts.md):

    - high variation: coefficient of variation of throughput over repeats > 10 %;
    - warm-up: with ≥ 3 repeats, the first is > 1.5 × slower than the median of the rest;
    - window too short: shorter than 10 000 ticks of the clock, or than 1 ms;
    - client-bound: the probe's process used ≥ 90 % of one CPU core during the window
      (Python moves bytes on one core at a time), so the client, not the storage, is
      the limit;
    - cache suspected: a download from a remote storage faster than 100 Gbit/s.
    """
    found: list[str] = []
    if not samples:
        return found
    rates = np.array([s.bytes_per_s for s in samples], dtype=np.float64)
    if rates.size >= 2:
        summary = summarize(rates)
        if summary.cv > HIGH_VARIATION:
            found.append(
                f"high variation: throughput varies by {summary.cv:.0%} (coefficient of "
                f"variation) over {summary.n} repeats: run more repeats (repeats=10) and "
                "compare medians"
            )
    if len(samples) >= 3:
        first = samples[0].elapsed_ns
        rest = float(np.median([s.elapsed_ns for s in samples[1:]]))
        if first > WARM_UP_FACTOR * rest:
            found.append(
                f"warm-up: the first repeat took {first / rest:.1f}× the median of the others: "
                "connections or caches were cold; discard it or add a warm-up repeat"
            )
    resolution = clock_resolution_s or time.get_clock_info("perf_counter").resolution
    shortest = min(s.elapsed_ns for s in samples) / 1e9
    if shortest < max(MIN_TICKS * resolution, 1e-3):
        found.append(
            f"window too short: {shortest * 1e3:.3f} ms is too short to time reliably: "
            "use a larger workload"
        )
    fractions = [s.cpu_fraction for s in samples if s.cpu_fraction is not None]
    if fractions and min(fractions) >= CLIENT_BOUND_FRACTION:
        found.append(
            f"client-bound: storeprobe's process was busy {min(fractions):.0%} of the window "
            "on the CPU: the client, not the storage, limited this figure; try more streams, "
            "a faster client (e.g. obstore) or a less loaded machine"
        )
    if operation == "download" and remote and float(rates.max()) > IMPOSSIBLE_NETWORK_RATE:
        found.append(
            "cache suspected: this download ran faster than a 100 Gbit/s network could carry "
            "it; something between the probe and the storage served it from memory"
        )
    return found
