"""What happened: one probe's Result, the figures derived from its samples, and its JSON form.

Throughput of a sample is the payload bytes moved divided by its timed window (first
request's start to last request's end), never a mean of per-request rates. The headline
figures (``bytes_per_s``, ``kib_per_s``, ``mib_per_s``, ``mibit_per_s``) come from the
best (fastest) repeat, as published comparisons do; the ``median_*`` figures are there
too. All rates are 1024-based.

Warnings and errors are :class:`~storeprobe.notices.Notice` values (a stable code, the
message, what to do, the repeat). Results are written as a versioned JSON document
(:func:`dump_results`); :func:`load_results` reads this version and every earlier one.

One repeat's record, :class:`Sample`, is :mod:`storeprobe.sample`; the document's
envelope, schema version and history, and the upgrade of older versions are
:mod:`storeprobe.document`. Both are re-exported here.

Why one module (~490 lines): a Result stays on one page with the Fleet and Members of a
distributed probe: a Member holds a Result and a Result its Fleet, so the three are one
recursive value, and its figures and JSON form are read against its fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from attrs import field, frozen
from attrs.validators import instance_of, optional

from storeprobe import render
from storeprobe.cost import Cost, PriceSheet, bill
from storeprobe.document import READABLE_VERSIONS, SCHEMA_VERSION, read_records, write_document
from storeprobe.environment import Environment
from storeprobe.errors import ResultFormatError
from storeprobe.notices import Notice, NoticeLike, notices_of
from storeprobe.sample import Sample
from storeprobe.stats import Percentiles, Summary, percentiles, summarize
from storeprobe.step import Step
from storeprobe.strategy import Strategy
from storeprobe.subject import Subject
from storeprobe.timeline import Timeline
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

Operation = Literal["upload", "download", "backup", "restore", "head", "list", "delete"]
#: the operations of the seed probes: a workload's upload and download
Transfer = Literal["upload", "download"]
OPERATIONS: tuple[Transfer, ...] = ("upload", "download")


def _strategy(value: Strategy | str | dict[str, Any]) -> Strategy:
    return Strategy.of(value)


def _samples(value: Iterable[Sample]) -> tuple[Sample, ...]:
    return tuple(value)


@frozen(kw_only=True)
class Result:
    """The outcome of one probe: one operation of one workload on one target.

    ``subject`` says what the figure counts and in which unit (bytes/s, operations/s,
    seconds per step), how many operations a repeat made and the names tables show (see
    :mod:`storeprobe.subject`); renderers, plots and comparisons read it, never the
    operation's name. ``workload`` is the payload a seed probe (upload, download) moved,
    with the seed its bytes came from; None where no one payload workload describes the
    result (a metadata probe, a scenario step, a distributed probe's aggregate, whose
    members hold their own).

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
    subject: Subject = field(validator=instance_of(Subject))
    url: str
    protocol: str
    backend: str
    streams: int
    effective_streams: int
    strategy: Strategy = field(converter=_strategy)
    samples: tuple[Sample, ...] = field(converter=_samples)
    errors: tuple[Notice, ...] = field(default=(), converter=notices_of)
    warnings: tuple[Notice, ...] = field(default=(), converter=notices_of)
    environment: Environment
    #: the payload of a seed probe (its seed recorded); None for a metadata probe, a
    #: scenario step and a distributed probe's aggregate
    workload: Workload | None = field(default=None, validator=optional(instance_of(Workload)))
    #: the scenario step this result is (None for a seed probe); its ``subject`` counts
    #: the dataset version's files, of their mean size
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
        """``"upload small"``, ``"download 10 × 1 MiB"``: operation and subject's label."""
        return f"{self.operation} {self.subject.label}"

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
        """Objects moved (the subject's operations) per second in the best repeat."""
        return self.subject.operations / self.best_seconds

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
        return render.resolve_unit("workload", object_size=self.subject.object_size)

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
            "subject": self.subject.to_dict(),
            "workload": None if self.workload is None else self.workload.to_dict(),
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
                subject=Subject.from_dict(data["subject"]),
                workload=None if data["workload"] is None else Workload.from_dict(data["workload"]),
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
    """A versioned JSON document holding ``results`` (see :mod:`storeprobe.document`)."""
    return write_document([result.to_dict() for result in results])


def load_results(source: str | Path) -> list[Result]:
    """Parse a document written by :func:`dump_results`; unknown versions are refused.

    ``source`` is the document's JSON text, or the path (``str`` or ``Path``) of a file
    holding it. Every version in :data:`READABLE_VERSIONS` is read (see the schema
    history in :mod:`storeprobe.document`).
    """
    return [Result.from_dict(record) for record in read_records(source)]
