"""One repeat's record: its payload bytes, timed window and per-request figures.

A :class:`Sample` is what one timed window of a probe left: payload bytes moved, the
window in nanoseconds, and for each request its start offset, latency, payload bytes,
stream and (for downloads) time to first byte, as int64 numpy arrays, plus the requests
by kind, bytes sent and received, retries and pushback the client saw, and the CPU time
of the window. Its throughput is bytes ÷ window (B/s, never a mean of per-request
rates); :meth:`Sample.timeline` slices the window. A
:class:`~storeprobe.result.Result` holds one Sample per successful repeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.timeline import Timeline, timeline

__all__ = ["Sample"]


def _kinds(value: Mapping[str, int]) -> dict[str, int]:
    kinds = dict(value)
    for kind, count in kinds.items():
        if not isinstance(kind, str) or isinstance(count, bool) or not isinstance(count, int):
            raise ConfigurationError(
                f"requests_by_kind maps a request kind (str) to a count (int), not "
                f"{kind!r}: {count!r}"
            )
        if count < 0:
            raise ConfigurationError(f"requests_by_kind[{kind!r}] is negative: {count}")
    return kinds


def _int_array(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.int64).reshape(-1)


def _array_field(*, required: bool = False) -> Any:
    """An int64 array field compared by value (empty by default unless ``required``)."""
    compare = attrs.cmp_using(eq=np.array_equal)
    if required:
        return field(converter=_int_array, eq=compare, hash=False)
    return field(
        factory=lambda: np.zeros(0, np.int64), converter=_int_array, eq=compare, hash=False
    )


@frozen(kw_only=True)
class Sample:
    """One repeat: payload bytes moved, the timed window in ns, and per-request latencies."""

    nbytes: int
    elapsed_ns: int
    latencies_ns: np.ndarray = _array_field(required=True)
    max_in_flight: int = 0
    #: failed attempts the client retried inside the window (None: not observable)
    retries: int | None = None
    #: HTTP answers the client received in the window, one per attempt (retried ones
    #: included); None: not observable (see :mod:`storeprobe.backends.attempts`)
    responses: int | None = None
    #: of those answers, the ones that pushed back: status 503 or 429 (None: not observable)
    pushed_back: int | None = None
    #: start of each request, ns after the window opened (same order as latencies_ns)
    offsets_ns: np.ndarray = _array_field()
    #: payload bytes of each request
    request_bytes: np.ndarray = _array_field()
    #: the stream (worker) that made each request
    workers: np.ndarray = _array_field()
    #: time to first byte of each download request that could measure it, in ns
    ttfb_ns: np.ndarray = _array_field()
    #: CPU time (user + system) of the probe's process during the window, in ns
    cpu_ns: int | None = None
    #: requests made in the window, by kind: {"put": 256}, or for a multipart upload
    #: {"create-multipart": 1, "put-part": 52, "complete-multipart": 1}
    requests_by_kind: dict[str, int] = field(factory=dict, converter=_kinds, hash=False)
    #: bytes sent to the storage in the window (payload as sent; 0: not recorded)
    bytes_sent: int = 0
    #: bytes received from the storage in the window (payload as read; 0: not recorded)
    bytes_received: int = 0

    @property
    def seconds(self) -> float:
        """The timed window in seconds."""
        return self.elapsed_ns / 1e9

    @property
    def bytes_per_s(self) -> float:
        """Payload bytes per second over the window (inf for a zero-length window)."""
        return self.nbytes * 1e9 / self.elapsed_ns if self.elapsed_ns > 0 else float("inf")

    @property
    def requests(self) -> int:
        """Number of requests timed in this repeat."""
        return int(self.latencies_ns.size)

    @property
    def busy_fraction(self) -> float | None:
        """Share of the window's answers the server pushed back (503, 429): 0.0 to 1.0;
        None when not observable or nothing was answered."""
        if self.responses is None or self.pushed_back is None or self.responses <= 0:
            return None
        return self.pushed_back / self.responses

    @property
    def cpu_fraction(self) -> float | None:
        """CPU time of the probe's process ÷ window (1.0 = one core busy all along)."""
        if self.cpu_ns is None or self.elapsed_ns <= 0:
            return None
        return self.cpu_ns / self.elapsed_ns

    @property
    def first_done_bytes_per_s(self) -> float:
        """Throughput up to the moment the first stream finished its share, in B/s.

        Bytes of the requests completed by then ÷ that moment. With one stream it
        equals :attr:`bytes_per_s`. ``nan`` when per-request data is missing.
        """
        if self.workers.size == 0 or self.workers.size != self.latencies_ns.size:
            return float("nan")
        ends = self.offsets_ns + self.latencies_ns
        finish = min(int(ends[self.workers == w].max()) for w in np.unique(self.workers))
        done = int(self.request_bytes[ends <= finish].sum())
        return done * 1e9 / finish if finish > 0 else float("inf")

    @property
    def last_done_bytes_per_s(self) -> float:
        """Throughput when the last stream finished: the whole window, in B/s."""
        return self.bytes_per_s

    @property
    def has_timeline(self) -> bool:
        """True when the per-request records a :meth:`timeline` needs are all here."""
        return (
            self.latencies_ns.size > 0
            and self.offsets_ns.size == self.latencies_ns.size == self.request_bytes.size
        )

    def timeline(self, slice_ns: int | None = None) -> Timeline:
        """Payload bytes and rates per time slice of the window (computed, not stored).

        From the per-request records (``offsets_ns``, ``latencies_ns``,
        ``request_bytes``); ``slice_ns`` defaults to 1 s, or finer for windows under 20 s
        (see :mod:`storeprobe.timeline` for the slice size and how bytes are shared).
        Raises :class:`~storeprobe.errors.ConfigurationError` when the records are
        missing (see :attr:`has_timeline`).
        """
        if not self.has_timeline:
            raise ConfigurationError(
                "this sample has no per-request records (offsets, latencies, bytes) to "
                "draw a timeline from: re-run the probe with this storeprobe"
            )
        return timeline(
            self.offsets_ns,
            self.latencies_ns,
            self.request_bytes,
            window_ns=self.elapsed_ns,
            slice_ns=slice_ns,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; latencies as a list of int nanoseconds."""
        return {
            "nbytes": self.nbytes,
            "elapsed_ns": self.elapsed_ns,
            "latencies_ns": self.latencies_ns.tolist(),
            "max_in_flight": self.max_in_flight,
            "retries": self.retries,
            "responses": self.responses,
            "pushed_back": self.pushed_back,
            "offsets_ns": self.offsets_ns.tolist(),
            "request_bytes": self.request_bytes.tolist(),
            "workers": self.workers.tolist(),
            "ttfb_ns": self.ttfb_ns.tolist(),
            "cpu_ns": self.cpu_ns,
            "requests_by_kind": dict(self.requests_by_kind),
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)
