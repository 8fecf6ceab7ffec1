"""Throughput over time within one timed window: payload bytes per time slice (numpy).

:func:`timeline` cuts a repeat's window into equal slices and says how many payload
bytes were completed in each, from the per-request records a Sample keeps (start
offsets, latencies, bytes); :class:`Timeline` holds the result, with the fastest,
median and slowest slice. :func:`stall_notice` warns when the slowest slice is far
below the median (a stall, or throttling). Like :mod:`storeprobe.stats`, this module
computes from arrays only: it never imports :mod:`storeprobe.result`
(``Sample.timeline()`` calls it).

Rules (also on ``docs/reports.md``):

- **Slice size** (:func:`slice_for`): 1 s when the window is at least 20 s long;
  otherwise the largest 1, 2 or 5 × 10ⁿ ns that gives at least 20 slices (a 3 s window
  gets 100 ms slices, a 10 s window 500 ms ones), never under 1 ns.
- **Apportioning**: a request's bytes are spread uniformly over its duration, from its
  start to its end, so a slice gets the share of each request that overlaps it. The
  payload's true arrival inside one request is not recorded; a stall inside a single
  long request is smoothed over its whole duration, and shows only when requests are
  short against the slice. A request of zero duration lands whole in the slice of its
  end. Bytes are conserved: the slices add up to the requests' bytes.
- **Figures**: a slice's rate is its bytes ÷ its length (the last slice may be shorter
  than the others: its own length is used). The first slice holds the ramp-up and the
  last one the tail (streams finishing at different moments), so fastest, median and
  slowest are taken over the slices between them; with fewer than 3 slices, over all.
- **Stall** (:func:`stall_notice`): with at least 10 slices between the first and the
  last, each at least 100 ms long (a window of about 2 s or more with the automatic
  size: shorter slices see the scheduler and the garbage collector, not the storage),
  the slowest of them below 25 % of their median.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code, Notice

__all__ = [
    "MAX_SLICES",
    "MIN_SLICES",
    "STALL_FRACTION",
    "STALL_MIN_SLICES",
    "STALL_MIN_SLICE_NS",
    "Timeline",
    "slice_for",
    "stall_notice",
    "timeline",
]

#: the automatic slice size gives at least this many slices (1 s slices from 20 s on)
MIN_SLICES = 20
#: the most slices a timeline may have (a finer ``slice_ns`` is refused)
MAX_SLICES = 1_000_000
#: a slice slower than this fraction of the median slice is a stall
STALL_FRACTION = 0.25
#: the stall rule needs at least this many slices between the first and the last
STALL_MIN_SLICES = 10
#: the stall rule needs slices at least this long (ns): shorter ones see scheduler noise
STALL_MIN_SLICE_NS = 100_000_000
_SECOND_NS = 1_000_000_000


def _float_array(value: object) -> np.ndarray:
    return np.asarray(value, dtype=np.float64).reshape(-1)


@frozen(kw_only=True)
class Timeline:
    """Payload bytes completed per time slice of one timed window.

    ``slice_ns`` is the length of every slice but the last, which ends with the window
    (``window_ns``) and may be shorter. ``slice_bytes`` holds the bytes apportioned to
    each slice (floats: a request's bytes are shared between the slices it spans).
    """

    slice_ns: int
    window_ns: int
    slice_bytes: np.ndarray = field(
        converter=_float_array, eq=attrs.cmp_using(eq=np.array_equal), hash=False
    )

    @property
    def slices(self) -> int:
        """Number of slices."""
        return int(self.slice_bytes.size)

    @property
    def starts_ns(self) -> np.ndarray:
        """Start of each slice, ns after the window opened."""
        return np.arange(self.slices, dtype=np.int64) * self.slice_ns

    @property
    def lengths_ns(self) -> np.ndarray:
        """Length of each slice in ns: ``slice_ns``, the last one up to the window's end."""
        starts = self.starts_ns
        lengths: np.ndarray = np.minimum(starts + self.slice_ns, max(self.window_ns, 1)) - starts
        return lengths

    @property
    def rates(self) -> np.ndarray:
        """Throughput of each slice, in bytes per second."""
        rates: np.ndarray = self.slice_bytes * 1e9 / self.lengths_ns
        return rates

    @property
    def steady(self) -> np.ndarray:
        """Rates (B/s) of the slices between the first and the last (all, under 3)."""
        rates = self.rates
        return rates[1:-1] if rates.size >= 3 else rates

    @property
    def fastest(self) -> float:
        """The fastest slice's rate (B/s), among :attr:`steady`'s slices."""
        return float(self.steady.max()) if self.slices else math.nan

    @property
    def median(self) -> float:
        """The median slice rate (B/s), among :attr:`steady`'s slices."""
        return float(np.median(self.steady)) if self.slices else math.nan

    @property
    def slowest(self) -> float:
        """The slowest slice's rate (B/s), among :attr:`steady`'s slices."""
        return float(self.steady.min()) if self.slices else math.nan

    @property
    def nbytes(self) -> float:
        """All bytes of the window (the sum of the slices)."""
        return float(self.slice_bytes.sum())

    def __repr__(self) -> str:
        return (
            f"Timeline({self.slices} slices of {self.slice_ns / 1e6:g} ms: "
            f"slowest {self.slowest:.4g}, median {self.median:.4g}, "
            f"fastest {self.fastest:.4g} B/s)"
        )


def slice_for(window_ns: int) -> int:
    """The automatic slice size (ns) for a window of ``window_ns`` (rule above)."""
    if window_ns >= MIN_SLICES * _SECOND_NS:
        return _SECOND_NS
    limit = window_ns / MIN_SLICES
    best = 1
    power = 1
    while power <= limit:
        for step in (1, 2, 5):
            if step * power <= limit:
                best = step * power
        power *= 10
    return best


def timeline(
    offsets_ns: npt.ArrayLike,
    latencies_ns: npt.ArrayLike,
    request_bytes: npt.ArrayLike,
    *,
    window_ns: int,
    slice_ns: int | None = None,
) -> Timeline:
    """Bytes per slice of a window from per-request records (rules above).

    ``offsets_ns`` is each request's start (ns after the window opened),
    ``latencies_ns`` its duration, ``request_bytes`` its payload bytes; ``window_ns`` the
    window's length (extended to the last request's end if that is later).
    ``slice_ns`` defaults to :func:`slice_for` of the window.
    """
    starts = np.asarray(offsets_ns, dtype=np.int64).reshape(-1)
    durations = np.asarray(latencies_ns, dtype=np.int64).reshape(-1)
    sizes = np.asarray(request_bytes, dtype=np.float64).reshape(-1)
    if not starts.size == durations.size == sizes.size:
        raise ConfigurationError(
            "a timeline needs one start, one latency and one byte count per request (got "
            f"{starts.size}, {durations.size} and {sizes.size}): this sample has no "
            "per-request records (a results file written before they were kept?)"
        )
    if starts.size and (int(starts.min()) < 0 or int(durations.min()) < 0):
        raise ConfigurationError("request starts and latencies must not be negative")
    ends = starts + durations
    window = max(int(window_ns), int(ends.max()) if ends.size else 0)
    size = slice_for(window) if slice_ns is None else int(slice_ns)
    if size <= 0:
        raise ConfigurationError(f"slice_ns must be positive, not {slice_ns}")
    count = max(1, -(-window // size))
    if count > MAX_SLICES:
        raise ConfigurationError(
            f"{count} slices of {size} ns are too many (at most {MAX_SLICES}): pass a "
            "larger slice_ns, or None for the automatic size"
        )
    totals = np.zeros(count, dtype=np.float64)
    instant = durations == 0
    # zero duration: whole, in the slice of its end
    np.add.at(totals, np.minimum(ends[instant] // size, count - 1), sizes[instant])
    spread = ~instant
    s, e, b, d = starts[spread], ends[spread], sizes[spread], durations[spread]
    first = s // size
    last = (e - 1) // size
    alone = first == last
    np.add.at(totals, first[alone], b[alone])
    many = ~alone
    s, e, b, d, first, last = s[many], e[many], b[many], d[many], first[many], last[many]
    per_ns = b / d
    np.add.at(totals, first, per_ns * ((first + 1) * size - s))
    np.add.at(totals, last, per_ns * (e - last * size))
    # the whole slices between: per_ns × size each, added through a difference array
    middle = np.zeros(count + 1, dtype=np.float64)
    np.add.at(middle, first + 1, per_ns * size)
    np.add.at(middle, last, -per_ns * size)
    totals += np.cumsum(middle)[:count]
    return Timeline(slice_ns=size, window_ns=window, slice_bytes=totals)


def stall_notice(line: Timeline, *, repeat: int | None = None) -> Notice | None:
    """A ``STALL`` notice when the slowest slice is far below the median, else None.

    With at least :data:`STALL_MIN_SLICES` slices between the first and the last, of at
    least :data:`STALL_MIN_SLICE_NS` each, a stall is the slowest of them under
    :data:`STALL_FRACTION` × their median.
    """
    if line.slices - 2 < STALL_MIN_SLICES or line.slice_ns < STALL_MIN_SLICE_NS:
        return None
    median, slowest = line.median, line.slowest
    if not median > 0 or slowest >= STALL_FRACTION * median:
        return None
    steady = line.steady
    at = (int(np.argmin(steady)) + 1) * line.slice_ns / 1e9
    return Notice(
        code=Code.STALL,
        message=f"throughput fell to {slowest / median:.0%} of the median slice "
        f"({line.slices} slices of {line.slice_ns / 1e6:g} ms; the slowest starts "
        f"{at:.3g} s into the window): a stall or throttling",
        fix="plot the timeline (storeprobe.plot.plot_timeline) and check the storage's "
        "rate limits, the network or other load; run again to see if it repeats",
        repeat=repeat,
    )
