"""What happened: one probe's samples, figures derived from them, and their JSON form.

Throughput of a sample is the payload bytes moved divided by its timed window (first
request's start to last request's end), never a mean of per-request rates. The headline
figures (``bytes_per_s``, ``kib_per_s``, ``mib_per_s``, ``mibit_per_s``) come from the
best (fastest) repeat, as published comparisons do; the ``median_*`` figures are there
too. All rates are 1024-based.

Warnings and errors are :class:`~storeprobe.notices.Notice` values (a stable code, the
message, what to do, the repeat). Results are written as a versioned JSON document
(:func:`dump_results`); :func:`load_results` reads this version and every earlier one.

Why ~670 lines: a Sample, a Result (with the Fleet and Members of a distributed probe)
and the document they are written to change together (a new field is a schema bump),
so they stay on one page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from storeprobe import render
from storeprobe._version import __version__
from storeprobe.cost import Cost, PriceSheet, bill
from storeprobe.environment import Environment
from storeprobe.errors import ConfigurationError, ResultFormatError
from storeprobe.notices import Code, Notice
from storeprobe.stats import Percentiles, Summary, percentiles, summarize
from storeprobe.step import Step
from storeprobe.strategy import Strategy
from storeprobe.subject import PER_OPERATION, Subject, Unit
from storeprobe.timeline import Timeline, timeline
from storeprobe.units import kib_per_s, mib_per_s, mibit_per_s
from storeprobe.workload import Workload

__all__ = [
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "Fleet",
    "Member",
    "NoticeLike",
    "Operation",
    "Result",
    "Sample",
    "dump_results",
    "load_results",
]

# Schema history (bump on any change to the document's shape):
#   1 — 2026-11-30: first version: results with samples, errors, warnings, environment.
#   2 — 2026-11-30: warnings and errors are objects {code, message, fix, repeat}; samples
#       gain requests_by_kind, bytes_sent and bytes_received. Version 1 still loads: its
#       texts become notices with code "unclassified", its samples get the defaults.
#       Also in 2: environment gains cpu_model, memory_bytes, operating_system, endpoint,
#       rtt_s, rtt_note; operations backup, restore, head, list, delete; results of a
#       scenario step carry "step" (absent or null otherwise); results of a distributed
#       probe carry "fleet" (absent or null otherwise), holding each worker's result;
#       "target_name" (absent or null: the URL names the target) is the default local
#       target's name across runs, file://$TMPDIR.
#   3 — 2026-12-01: a workload may carry "sizes" (its distribution: kind and parameters,
#       sizes in bytes), "total_bytes" (the sum of the sizes drawn from its seed) and
#       "size_seed"; "size" is then the distribution's median. Absent: every object
#       "size" bytes, as in versions 1 and 2, which still load unchanged. Samples carry "responses"
#       and "pushed_back" (absent or null: not observable); "warmup_samples" (absent: none)
#       holds the samples of the warm-up repeats (Settings.warmup), counted in no figure.
#       "strategy" is an object (storeprobe.strategy.Strategy.to_dict: "shape", the
#       fields that are set, and "text", derived and ignored when read); a strategy
#       that is a string (every version-1 and -2 document) is parsed into that value
#       where it is one of the probe's own texts, else kept whole as a "described" one
#       holding the text, so it renders exactly as it was written.
#: the version of the results document that dump_results writes (history above)
SCHEMA_VERSION = 3
#: every version load_results reads
READABLE_VERSIONS = (1, 2, 3)
_SCHEMA_NAME = "storeprobe.results"

Operation = Literal["upload", "download", "backup", "restore", "head", "list", "delete"]
#: the operations of the seed probes: a workload's upload and download
Transfer = Literal["upload", "download"]
OPERATIONS: tuple[Transfer, ...] = ("upload", "download")


def _strategy(value: Strategy | str | dict[str, Any]) -> Strategy:
    return Strategy.of(value)


def _samples(value: Iterable[Sample]) -> tuple[Sample, ...]:
    return tuple(value)


NoticeLike = Notice | Mapping[str, Any]


def _notice(value: NoticeLike) -> Notice:
    if isinstance(value, Notice):
        return value
    if isinstance(value, Mapping):
        return Notice.from_dict(dict(value))
    if isinstance(value, str):
        raise ConfigurationError(
            f"a warning or error is a Notice, not the text {value!r}: use "
            "Notice(code=Code..., message=..., fix=...) (documents of schema 1 are "
            "converted by load_results)"
        )
    raise ConfigurationError(
        f"a warning or error is a Notice or its dict, not {type(value).__name__}"
    )


def _notices(value: Iterable[NoticeLike]) -> tuple[Notice, ...]:
    if isinstance(value, str | Notice | Mapping):  # one notice, or a text, not a sequence
        raise ConfigurationError(
            "warnings and errors are sequences of notices: wrap a single one in a tuple"
        )
    return tuple(_notice(item) for item in value)


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


def _int_array(value: npt.ArrayLike) -> np.ndarray:
    """An int64 array field's value: a flat int64 array of ``value`` (an array or a
    sequence of ints: the converter types the field's ``__init__`` argument)."""
    return np.asarray(value, dtype=np.int64).reshape(-1)


def _no_ints() -> np.ndarray:
    return np.zeros(0, np.int64)


#: int64 array fields compare by value
_BY_VALUE = attrs.cmp_using(eq=np.array_equal)


@frozen(kw_only=True)
class Sample:
    """One repeat: payload bytes moved, the timed window in ns, and per-request latencies."""

    nbytes: int
    elapsed_ns: int
    latencies_ns: np.ndarray = field(converter=_int_array, eq=_BY_VALUE, hash=False)
    max_in_flight: int = 0
    #: failed attempts the client retried inside the window (None: not observable)
    retries: int | None = None
    #: HTTP answers the client received in the window, one per attempt (retried ones
    #: included); None: not observable (see :mod:`storeprobe.backends.attempts`)
    responses: int | None = None
    #: of those answers, the ones that pushed back: status 503 or 429 (None: not observable)
    pushed_back: int | None = None
    #: start of each request, ns after the window opened (same order as latencies_ns)
    offsets_ns: np.ndarray = field(factory=_no_ints, converter=_int_array, eq=_BY_VALUE, hash=False)
    #: payload bytes of each request
    request_bytes: np.ndarray = field(
        factory=_no_ints, converter=_int_array, eq=_BY_VALUE, hash=False
    )
    #: the stream (worker) that made each request
    workers: np.ndarray = field(factory=_no_ints, converter=_int_array, eq=_BY_VALUE, hash=False)
    #: time to first byte of each download request that could measure it, in ns
    ttfb_ns: np.ndarray = field(factory=_no_ints, converter=_int_array, eq=_BY_VALUE, hash=False)
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


@frozen(kw_only=True)
class Result:
    """The outcome of one probe: one operation of one workload on one target.

    ``backend`` names the client that moved the bytes (``s3fs``, ``obstore``, ``gcsfs``,
    ``adlfs``, ``sshfs``, ``local``, or the fsspec class name). ``streams`` is what was
    asked; ``effective_streams`` the most requests the probe could keep in flight, and
    ``strategy`` says how (for example whether one object was split into parts): a
    :class:`~storeprobe.strategy.Strategy`, or its dict or text (read as
    :meth:`~storeprobe.strategy.Strategy.parse` reads older documents').
    ``samples`` has one entry per successful repeat; ``errors`` one
    :class:`~storeprobe.notices.Notice` per failed repeat; ``warnings`` notices that say
    what to check or do next. Both accept Notices or their dicts (texts are refused:
    :func:`load_results` turns the texts of schema-1 documents into notices with code
    ``unclassified``). ``warmup_samples`` has one entry per successful warm-up repeat
    (run first, exactly as the measured ones): kept for inspection, counted in no
    figure, statistic, warning or comparison.
    """

    operation: Operation
    workload: Workload
    url: str
    protocol: str
    backend: str
    streams: int
    effective_streams: int
    strategy: Strategy = field(converter=_strategy)
    samples: tuple[Sample, ...] = field(converter=_samples)
    errors: tuple[Notice, ...] = field(default=(), converter=_notices)
    warnings: tuple[Notice, ...] = field(default=(), converter=_notices)
    environment: Environment
    #: the scenario step this result is (None for a seed probe); for a step, ``workload``
    #: summarises the dataset version: its file count and mean file size
    step: Step | None = None
    #: how a distributed probe ran (None for one process): its workers, their clock
    #: offsets and each worker's own Result (see :mod:`storeprobe.distributed`)
    fleet: Fleet | None = None
    #: the target's name across runs where its URL is made afresh for each run: the
    #: default local target of ``storeprobe run`` (a new temporary directory every time)
    #: is ``file://$TMPDIR``; None: the URL names the target (see :attr:`target_id`)
    target_name: str | None = None
    #: the warm-up repeats' samples (``warmup`` of the probe's settings), in order; no
    #: figure, statistic, warning or comparison counts them
    warmup_samples: tuple[Sample, ...] = field(default=(), converter=_samples)

    # -- identity -----------------------------------------------------------------
    @property
    def target_id(self) -> str:
        """What names the target across runs: :attr:`target_name` when set, else
        :attr:`url`. Comparisons match on it and tables group by it; ``url`` stays the
        path that was written."""
        return self.url if self.target_name is None else self.target_name

    @property
    def probe(self) -> str:
        """``"upload small"``, ``"download 10 × 1 MiB"``: operation and workload."""
        return f"{self.operation} {self.workload.label}"

    @property
    def subject(self) -> Subject:
        """What the figure counts and in which unit (see :mod:`storeprobe.subject`):
        operations per second for ``head``, ``list`` and ``delete``, seconds per step
        for a scenario step, else payload bytes per second. Renderers, plots and
        comparisons read the unit here, never from the operation's name."""
        workload = self.workload
        if self.operation in PER_OPERATION:
            # a metadata workload's own label keeps empty objects' 0 B (a Workload
            # holds at least 1 byte per object)
            label = workload.label
            return Subject(
                unit=Unit.OPERATIONS_PER_S,
                operations=workload.count,
                shape=label,
                description=label,
                object_size=workload.size,
            )
        return Subject(
            unit=Unit.BYTES_PER_S if self.step is None else Unit.SECONDS_PER_STEP,
            operations=workload.count,
            shape=workload.shape,
            description=workload.describe(),
            object_size=workload.size,
        )

    @property
    def ok(self) -> bool:
        """True when every repeat succeeded."""
        return not self.errors and bool(self.samples)

    @property
    def notices(self) -> tuple[Notice, ...]:
        """Errors, then warnings."""
        return (*self.errors, *self.warnings)

    @property
    def requests_by_kind(self) -> dict[str, int]:
        """Requests made in the timed windows of all successful repeats, by kind."""
        total: dict[str, int] = {}
        for sample in self.samples:
            for kind, count in sample.requests_by_kind.items():
                total[kind] = total.get(kind, 0) + count
        return total

    @property
    def bytes_received(self) -> int:
        """Payload bytes received from the storage in the timed windows of all successful
        repeats (what a provider bills as egress)."""
        return sum(sample.bytes_received for sample in self.samples)

    def cost(self, prices: PriceSheet) -> Cost:
        """The bill these requests, received bytes and (for a scenario step) the space
        held after it imply at ``prices`` (see :mod:`storeprobe.cost`)."""
        return bill(self, prices)

    # -- figures --------------------------------------------------------------------
    def _elapsed(self) -> np.ndarray:
        return np.array([sample.elapsed_ns for sample in self.samples], dtype=np.int64)

    def _best(self) -> Sample:
        if not self.samples:
            raise ValueError(f"{self.probe} on {self.url} has no successful sample")
        return min(self.samples, key=lambda sample: sample.elapsed_ns)

    @property
    def best_seconds(self) -> float:
        """The shortest timed window among the repeats, in seconds."""
        return self._best().seconds

    @property
    def median_seconds(self) -> float:
        """The median timed window over the repeats, in seconds."""
        if not self.samples:
            raise ValueError(f"{self.probe} on {self.url} has no successful sample")
        return float(np.median(self._elapsed())) / 1e9

    @property
    def bytes_per_s(self) -> float:
        """Throughput of the best repeat in bytes per second."""
        return self._best().bytes_per_s

    @property
    def median_bytes_per_s(self) -> float:
        """Payload bytes moved ÷ median window, in bytes per second."""
        moved = float(np.median([sample.nbytes for sample in self.samples]))
        return moved / self.median_seconds

    @property
    def kib_per_s(self) -> float:
        """Best-repeat throughput in KiB/s (B/s ÷ 1024)."""
        return kib_per_s(self.bytes_per_s)

    @property
    def mib_per_s(self) -> float:
        """Best-repeat throughput in MiB/s (B/s ÷ 1024²)."""
        return mib_per_s(self.bytes_per_s)

    @property
    def mibit_per_s(self) -> float:
        """Best-repeat throughput in Mibit/s (8 · B/s ÷ 1024²)."""
        return mibit_per_s(self.bytes_per_s)

    @property
    def median_kib_per_s(self) -> float:
        """Median-repeat throughput in KiB/s."""
        return kib_per_s(self.median_bytes_per_s)

    @property
    def median_mib_per_s(self) -> float:
        """Median-repeat throughput in MiB/s."""
        return mib_per_s(self.median_bytes_per_s)

    @property
    def median_mibit_per_s(self) -> float:
        """Median-repeat throughput in Mibit/s."""
        return mibit_per_s(self.median_bytes_per_s)

    @property
    def objects_per_s(self) -> float:
        """Objects moved per second in the best repeat."""
        return self.workload.count / self.best_seconds

    @property
    def throughput(self) -> Summary:
        """Best, median, mean, std, MAD and CV of per-repeat throughput (B/s), with n."""
        if not self.samples:
            raise ValueError(f"{self.probe} on {self.url} has no successful sample")
        return summarize([sample.bytes_per_s for sample in self.samples])

    @property
    def busy_fraction(self) -> float | None:
        """Share of the answers the server pushed back (503 and 429 ÷ all answers) over
        every repeat, as azcopy bench's "Server Busy %" and s3-benchmark's "slowdowns":
        0.0 to 1.0; None when the client does not tell (see :attr:`Sample.responses`)."""
        counted = [s for s in self.samples if s.responses is not None]
        if not counted or len(counted) < len(self.samples):
            return None
        answers = sum(s.responses or 0 for s in counted)
        pushed = sum(s.pushed_back or 0 for s in counted)
        return pushed / answers if answers > 0 else None

    @property
    def latency(self) -> Percentiles:
        """Per-request latency percentiles (ns) over all repeats, with n."""
        values = [sample.latencies_ns for sample in self.samples]
        return percentiles(np.concatenate(values) if values else np.zeros(0))

    @property
    def ttfb(self) -> Percentiles:
        """Time-to-first-byte percentiles (ns) of download requests, with n (0: not measured)."""
        values = [sample.ttfb_ns for sample in self.samples]
        return percentiles(np.concatenate(values) if values else np.zeros(0))

    @property
    def first_done_bytes_per_s(self) -> float:
        """First-done throughput of the best repeat (see :class:`Sample`), in B/s."""
        return self._best().first_done_bytes_per_s

    @property
    def last_done_bytes_per_s(self) -> float:
        """Last-done throughput of the best repeat (its whole window), in B/s."""
        return self._best().last_done_bytes_per_s

    def timelines(self, slice_ns: int | None = None) -> tuple[Timeline, ...]:
        """One :meth:`Sample.timeline` per repeat that has per-request records."""
        return tuple(s.timeline(slice_ns) for s in self.samples if s.has_timeline)

    @property
    def rate_unit(self) -> str:
        """The unit people publish this workload in: KiB/s below 1 MiB per object, else MiB/s."""
        return render.resolve_unit("workload", object_size=self.workload.size)

    # -- text -------------------------------------------------------------------------
    def __str__(self) -> str:
        return render.result_line(self)

    def summary(self, unit: str = "workload") -> str:
        """The one-line :func:`str` in ``unit``, then one line per error and warning.

        ``unit``: ``"workload"`` (the default of ``str``), ``"auto"``, ``"KiB/s"``,
        ``"MiB/s"`` or ``"Mibit/s"`` (see :func:`storeprobe.render.resolve_unit`).
        """
        return render.result_summary(self, unit)

    def _repr_html_(self) -> str:
        """A compact HTML table for notebooks."""
        return render.result_html(self)

    def __repr__(self) -> str:
        return render.result_repr(self)

    # -- serialisation ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (no secrets: the URL is already redacted)."""
        return {
            "operation": self.operation,
            "workload": self.workload.to_dict(),
            "url": self.url,
            "protocol": self.protocol,
            "backend": self.backend,
            "streams": self.streams,
            "effective_streams": self.effective_streams,
            "strategy": self.strategy.to_dict(),
            "samples": [sample.to_dict() for sample in self.samples],
            "errors": [notice.to_dict() for notice in self.errors],
            "warnings": [notice.to_dict() for notice in self.warnings],
            "environment": self.environment.to_dict(),
            "step": None if self.step is None else self.step.to_dict(),
            "fleet": None if self.fleet is None else self.fleet.to_dict(),
            "target_name": self.target_name,
            "warmup_samples": [sample.to_dict() for sample in self.warmup_samples],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Inverse of :meth:`to_dict`; raises :class:`ResultFormatError` if malformed."""
        try:
            return cls(
                operation=data["operation"],
                workload=Workload.from_dict(data["workload"]),
                url=data["url"],
                protocol=data["protocol"],
                backend=data["backend"],
                streams=data["streams"],
                effective_streams=data["effective_streams"],
                strategy=data["strategy"],
                samples=tuple(Sample.from_dict(sample) for sample in data["samples"]),
                errors=tuple(Notice.from_dict(notice) for notice in data["errors"]),
                warnings=tuple(Notice.from_dict(notice) for notice in data["warnings"]),
                environment=Environment.from_dict(data["environment"]),
                step=None if data.get("step") is None else Step.from_dict(data["step"]),
                fleet=None if data.get("fleet") is None else Fleet.from_dict(data["fleet"]),
                target_name=data.get("target_name"),
                warmup_samples=tuple(
                    Sample.from_dict(sample) for sample in data.get("warmup_samples", ())
                ),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ResultFormatError(f"malformed result record: {exc!r}") from exc

    def to_json(self) -> str:
        """This result alone as a versioned JSON document (see :func:`dump_results`)."""
        return dump_results([self])

    @classmethod
    def from_json(cls, source: str | Path) -> Result:
        """Load a document holding exactly one result (JSON text or a file's path)."""
        results = load_results(source)
        if len(results) != 1:
            raise ResultFormatError(f"expected one result, the document holds {len(results)}")
        return results[0]


@frozen(kw_only=True)
class Member:
    """One worker of a distributed probe, and how its clock relates to the coordinator's.

    ``offset_ns`` is the worker's clock minus the coordinator's, measured NTP-style
    before the run from round trips through Dask; the true offset lies within
    ``uncertainty_ns`` of it (half the shortest round trip). ``drift_ns`` is the offset
    measured after the run minus the one before (None when the worker did not answer).
    ``result`` is the worker's own Result on its own clock (None: the worker was lost).
    """

    name: str
    address: str
    offset_ns: int
    uncertainty_ns: int
    drift_ns: int | None = None
    result: Result | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "name": self.name,
            "address": self.address,
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "drift_ns": self.drift_ns,
            "result": None if self.result is None else self.result.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        """Inverse of :meth:`to_dict`."""
        result = data.get("result")
        return cls(
            name=data["name"],
            address=data["address"],
            offset_ns=int(data["offset_ns"]),
            uncertainty_ns=int(data["uncertainty_ns"]),
            drift_ns=None if data.get("drift_ns") is None else int(data["drift_ns"]),
            result=None if result is None else Result.from_dict(result),
        )


def _members(value: Iterable[Member]) -> tuple[Member, ...]:
    return tuple(value)


def _ints(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(item) for item in value)


@frozen(kw_only=True)
class Fleet:
    """How a distributed probe ran: many workers, one time base (the coordinator's clock).

    Each aggregate sample of the Result is total bytes over (latest end − earliest
    start) of the workers' windows for that repeat, every time moved onto the
    coordinator's clock with the worker's offset. ``start_spread_ns`` gives, per
    aggregate sample, the latest actual window start minus the earliest (ns);
    ``coordinator_ns`` is what the coordinator added to the probe: its wall time minus
    the longest worker's own run (cluster lookup, clock offsets, barriers, results
    brought back, cleanup of the run prefix; ns).
    """

    members: tuple[Member, ...] = field(converter=_members)
    streams_per_worker: int
    start_spread_ns: tuple[int, ...] = field(converter=_ints)
    coordinator_ns: int = 0

    @property
    def workers(self) -> int:
        """How many workers took part."""
        return len(self.members)

    @property
    def max_uncertainty_ns(self) -> int:
        """The largest clock-offset uncertainty of any worker (ns): the time base's error."""
        return max((m.uncertainty_ns + abs(m.drift_ns or 0) for m in self.members), default=0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "members": [member.to_dict() for member in self.members],
            "streams_per_worker": self.streams_per_worker,
            "start_spread_ns": list(self.start_spread_ns),
            "coordinator_ns": self.coordinator_ns,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fleet:
        """Inverse of :meth:`to_dict`."""
        return cls(
            members=tuple(Member.from_dict(member) for member in data["members"]),
            streams_per_worker=int(data["streams_per_worker"]),
            start_spread_ns=tuple(int(value) for value in data["start_spread_ns"]),
            coordinator_ns=int(data.get("coordinator_ns", 0)),
        )


def dump_results(results: Iterable[Result]) -> str:
    """A versioned JSON document holding ``results``."""
    document = {
        "schema": _SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "storeprobe": __version__,
        "results": [result.to_dict() for result in results],
    }
    return json.dumps(document, indent=1, allow_nan=False)


def _upgrade_v1(record: Any) -> Any:
    """A schema-1 result record in schema-2 shape: texts become unclassified notices."""
    if not isinstance(record, dict):
        return record
    upgraded = dict(record)
    for key in ("errors", "warnings"):
        texts = record.get(key)
        if isinstance(texts, list):
            upgraded[key] = [
                {"code": Code.UNCLASSIFIED.value, "message": text}
                if isinstance(text, str)
                else text
                for text in texts
            ]
    return upgraded


def _read_file(path: Path) -> tuple[str, str]:
    """A results file's text and its name for messages; a file that is not UTF-8 text
    (an image, an archive) or a directory is refused as not a results document."""
    origin = f"file {str(path)!r}"
    if path.is_dir():
        raise ResultFormatError(
            f"not a storeprobe results document: {origin} is a directory: give the JSON "
            "file written by 'storeprobe run --json FILE'"
        )
    try:
        return path.read_text(encoding="utf-8"), origin
    except UnicodeDecodeError:
        raise ResultFormatError(
            f"not a storeprobe results document: {origin} is not text (a results file is "
            "JSON): give the file written by 'storeprobe run --json FILE'"
        ) from None


def _read(source: str | Path) -> tuple[str, str]:
    """The document's text and where it came from (for messages)."""
    if isinstance(source, Path):
        return _read_file(source)
    if not isinstance(source, str):
        raise ResultFormatError(
            f"load_results takes JSON text or a file's path, not {type(source).__name__}"
        )
    if source.lstrip().startswith(("{", "[")):
        return source, "the JSON text given"
    path = Path(source)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte: not a path
        is_file = False
    if is_file:
        return _read_file(path)
    shown = source if len(source) <= 80 else source[:77] + "..."
    raise ResultFormatError(
        f"not a storeprobe results document: {shown!r} is neither JSON text (it does not "
        "start with '{') nor the path of an existing file: check the file name"
    )


def load_results(source: str | Path) -> list[Result]:
    """Parse a document written by :func:`dump_results`; unknown versions are refused.

    ``source`` is the document's JSON text, or the path (``str`` or ``Path``) of a file
    holding it. Versions 1 and 2 are read (see the schema history above).
    """
    text, origin = _read(source)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFormatError(
            f"not a storeprobe results document (bad JSON in {origin}: {exc})"
        ) from None
    if not isinstance(document, dict) or document.get("schema") != _SCHEMA_NAME:
        raise ResultFormatError(
            f"not a storeprobe results document (no 'schema' field in {origin})"
        )
    version = document.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise ResultFormatError(
            f"results schema version {version!r} in {origin} is not supported by this "
            f"storeprobe (it reads versions {', '.join(map(str, READABLE_VERSIONS))}): "
            "upgrade storeprobe or re-run the probe"
        )
    records = document.get("results")
    if not isinstance(records, list):
        raise ResultFormatError(f"results document in {origin} has no 'results' list")
    if version == 1:
        records = [_upgrade_v1(record) for record in records]
    return [Result.from_dict(record) for record in records]
