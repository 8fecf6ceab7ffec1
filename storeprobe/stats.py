"""Statistics over repeats and requests, stability warnings, and comparisons (numpy).

- :func:`summarize`: best, median, mean, standard deviation, MAD and coefficient of
  variation of per-repeat throughputs (B/s), with their count.
- :func:`percentiles`: p50/p90/p99/max of per-request latencies (ns) with their count. A
  percentile needs enough samples to exist: p50 needs 2, p90 needs 10, p99 needs 100
  (``n ≥ 1 / (1 − q)``); below that it is ``None``, never a guess.
- :func:`compare`: the ratio of two results' median throughputs with a bootstrap
  confidence interval, and a verdict.
- :func:`stability_notices`: the warnings a careful tool prints, as
  :class:`~storeprobe.notices.Notice` values with a stable code, each saying what to do.

This module computes from numbers and numpy arrays only: it never imports
:mod:`storeprobe.result` (a Result is accepted by :func:`compare` through its
``samples``, by duck typing).
"""

from __future__ import annotations

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
    "Comparison",
    "Percentiles",
    "Summary",
    "compare",
    "percentiles",
    "stability_notices",
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


def stability_notices(
    rates_bps: np.ndarray,
    elapsed_ns: np.ndarray,
    cpu_fraction: np.ndarray,
    *,
    operation: str,
    remote: bool,
    clock_resolution_s: float | None = None,
) -> list[Notice]:
    """Notices about the repeats of one probe, each saying what to do next.

    The three arrays have one entry per successful repeat, in order: ``rates_bps`` the
    throughput (B/s), ``elapsed_ns`` the timed window (ns), ``cpu_fraction`` the probe
    process's CPU time ÷ window (``nan`` where unknown). ``clock_resolution_s`` is the
    timer's resolution in seconds (default: ``time.perf_counter``'s).

    Rules, by code (documented in docs/concepts.md):

    - ``HIGH_VARIATION``: coefficient of variation of throughput over ≥ 2 repeats > 10 %;
    - ``WARM_UP``: with ≥ 3 repeats, the first window is > 1.5 × the median of the rest;
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
    found: list[Notice] = []
    if rates.size == 0:
        return found
    if rates.size >= 2:
        summary = summarize(rates)
        if summary.cv > HIGH_VARIATION:
            more = summary.n < ADVISED_REPEATS  # never advise what the run already did
            found.append(
                Notice(
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
            )
    if elapsed.size >= 3:
        first = float(elapsed[0])
        rest = float(np.median(elapsed[1:]))
        if first > WARM_UP_FACTOR * rest:
            found.append(
                Notice(
                    code=Code.WARM_UP,
                    message=f"the first repeat took {first / rest:.1f}× the median of the "
                    "others: connections or caches were cold",
                    fix="discard it or add a warm-up repeat",
                    repeat=1,
                )
            )
    resolution = clock_resolution_s or time.get_clock_info("perf_counter").resolution
    shortest = float(elapsed.min()) / 1e9
    if shortest < max(MIN_TICKS * resolution, 1e-3):
        found.append(
            Notice(
                code=Code.WINDOW_TOO_SHORT,
                message=f"{shortest * 1e3:.3f} ms is too short to time reliably",
                fix="use a larger workload",
                repeat=int(np.argmin(elapsed)) + 1 if elapsed.size > 1 else None,
            )
        )
    known = cpu[~np.isnan(cpu)]
    if known.size and float(known.min()) >= CLIENT_BOUND_FRACTION:
        found.append(
            Notice(
                code=Code.CLIENT_BOUND,
                message=f"storeprobe's process was busy {float(known.min()):.0%} of the "
                "window on the CPU: the client, not the storage, limited this figure",
                fix="try more streams, a faster client (e.g. obstore) or a less loaded machine"
                if remote
                else "try more streams or a less loaded machine",
            )
        )
    if operation == "download" and remote and float(rates.max()) > IMPOSSIBLE_NETWORK_RATE:
        found.append(
            Notice(
                code=Code.CACHE_SUSPECTED,
                message="this download ran faster than a 100 Gbit/s network could carry it: "
                "something between the probe and the storage served it from memory",
                fix="probe another prefix or bypass the cache (a proxy, a CDN, a gateway)",
                repeat=int(np.argmax(rates)) + 1 if rates.size > 1 else None,
            )
        )
    return found
