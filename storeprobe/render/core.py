"""Rate units, operations per second, and the protocols renderers read Results through."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, get_args

from storeprobe.environment import Environment
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Notice
from storeprobe.strategy import Strategy
from storeprobe.subject import Subject
from storeprobe.units import MiB, auto_rate_unit, rate_in, significant

RateUnit = Literal["workload", "auto", "KiB/s", "MiB/s", "GiB/s", "Mibit/s"]
#: the rate units accepted by every renderer and by ``--unit``
RATE_UNITS: tuple[str, ...] = get_args(RateUnit)
Format = Literal["markdown", "csv", "html", "text"]
#: the table formats of :func:`render_tables`
FORMATS: tuple[str, ...] = get_args(Format)
#: the mark of a winner significantly faster than the runner-up: a word, so it needs no
#: emoji font and takes the same columns in every terminal
CROWN = "fastest"
#: the mark of the fastest figures when the runner-up is not significantly slower
TIE = "≈"
#: the unit of :func:`ops_per_s`
OPS_UNIT = "ops/s"

_USUAL_BACKEND = {
    "s3": "obstore",
    "s3a": "obstore",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "az": "adlfs",
    "abfss": "adlfs",
    "sftp": "sshfs",
    "ssh": "sshfs",
    "file": "local",
    "local": "local",
}


class _Rated(Protocol):
    @property
    def nbytes(self) -> int: ...
    @property
    def elapsed_ns(self) -> int: ...
    @property
    def bytes_per_s(self) -> float: ...
    @property
    def seconds(self) -> float: ...


class ResultLike(Protocol):
    """What the renderers read of a :class:`~storeprobe.result.Result`."""

    @property
    def operation(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def target_id(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def streams(self) -> int: ...
    @property
    def effective_streams(self) -> int: ...
    @property
    def strategy(self) -> Strategy: ...
    @property
    def subject(self) -> Subject: ...
    @property
    def samples(self) -> Sequence[_Rated]: ...
    @property
    def warmup_samples(self) -> Sequence[_Rated]: ...
    @property
    def errors(self) -> Sequence[Notice]: ...
    @property
    def warnings(self) -> Sequence[Notice]: ...
    @property
    def environment(self) -> Environment: ...
    @property
    def bytes_per_s(self) -> float: ...
    @property
    def median_bytes_per_s(self) -> float: ...
    @property
    def best_seconds(self) -> float: ...
    @property
    def median_seconds(self) -> float: ...


# -- units ---------------------------------------------------------------------------
def check_unit(unit: str) -> None:
    """Raise :class:`ConfigurationError` unless ``unit`` is one of :data:`RATE_UNITS`."""
    if unit not in RATE_UNITS:
        raise ConfigurationError(
            f"unknown rate unit {unit!r}: use one of {', '.join(RATE_UNITS)} "
            "(workload: KiB/s below 1 MiB per object, else MiB/s; auto: by magnitude)"
        )


def check_format(format: str) -> None:
    """Raise :class:`ConfigurationError` unless ``format`` is one of :data:`FORMATS`."""
    if format not in FORMATS:
        raise ConfigurationError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")


def resolve_unit(unit: str, rates_bps: Iterable[float] = (), *, object_size: int = 0) -> str:
    """The concrete unit (``"KiB/s"``, ``"MiB/s"``, ``"GiB/s"`` or ``"Mibit/s"``) of rates.

    ``"workload"``: KiB/s when ``object_size`` (bytes per object) is under 1 MiB, else
    MiB/s. ``"auto"``: by the largest of ``rates_bps`` (B/s): GiB/s from 1 GiB/s, MiB/s
    from 1 MiB/s, else KiB/s, so one column or line uses one unit.
    """
    check_unit(unit)
    if unit == "workload":
        return "KiB/s" if object_size < MiB else "MiB/s"
    if unit == "auto":
        finite = [value for value in rates_bps if value == value and value != float("inf")]
        return auto_rate_unit(max(finite)) if finite else "KiB/s"
    return unit


def scale(bytes_per_s: float, unit: str) -> float:
    """``bytes_per_s`` (B/s) in a concrete 1024-based ``unit`` (KiB/s, MiB/s, Mibit/s)."""
    return rate_in(bytes_per_s, unit)


def rate(bytes_per_s: float, unit: str = "auto", *, object_size: int = 0) -> str:
    """``"803.1 KiB/s"``: a rate in B/s, 3 to 4 significant digits
    (:func:`storeprobe.units.significant`), in ``unit`` (see :func:`resolve_unit`)."""
    concrete = resolve_unit(unit, [bytes_per_s], object_size=object_size)
    return f"{significant(scale(bytes_per_s, concrete))} {concrete}"


def unit_of(subject: Subject, unit: str, rates_bps: Iterable[float] = ()) -> str:
    """The concrete unit a subject's rates are shown in: ops/s for operations, else
    ``unit`` resolved for its byte rates (B/s) and object size (see :func:`resolve_unit`)."""
    if subject.per_operation:
        return OPS_UNIT
    return resolve_unit(unit, rates_bps, object_size=subject.object_size)


def _unit_of(result: ResultLike, unit: str) -> str:
    return unit_of(result.subject, unit, [result.bytes_per_s] if result.samples else [])


# -- operations per second ----------------------------------------------------------------
def ops_per_s(result: ResultLike) -> float:
    """Operations per second of the best repeat: the probe's objects ÷ its window.

    For ``head`` and ``delete`` one request per object (requests ÷ window); for ``list``
    keys listed ÷ window (the pages it took are in ``requests_by_kind``).
    """
    return result.subject.operations / result.best_seconds


def median_ops_per_s(result: ResultLike) -> float:
    """Operations per second over the median window (see :func:`ops_per_s`)."""
    return result.subject.operations / result.median_seconds


def _headline(result: ResultLike, concrete: str) -> tuple[float, float]:
    """The best and median figures of ``result`` in ``concrete`` (ops/s or a byte rate)."""
    if concrete == OPS_UNIT:
        return ops_per_s(result), median_ops_per_s(result)
    return scale(result.bytes_per_s, concrete), scale(result.median_bytes_per_s, concrete)


def _shape(result: ResultLike) -> str:
    """``"256 × 16 KiB"``: the subject's shape (see :class:`~storeprobe.subject.Subject`)."""
    return result.subject.shape


def _described(result: ResultLike) -> str:
    """``"small (256 × 16 KiB)"``: the subject's description."""
    return result.subject.description


def _rank(result: ResultLike) -> float:
    """What makes one result faster than another of the same probe: its best repeat's
    rate (ops/s or B/s, the subject's rate unit)."""
    return ops_per_s(result) if result.subject.per_operation else result.bytes_per_s


def _per_repeat(result: ResultLike) -> list[float]:
    """Each repeat's rate, in the subject's rate unit (for comparisons)."""
    return [result.subject.rate(sample) for sample in result.samples]
