"""What a Result's figure counts, and in which unit: the one place that knows.

A seed probe moves bytes: its figure is **bytes per second** (payload bytes ÷ window).
A metadata probe (HEAD, LIST, DELETE) moves no payload in its window: its figure is
**operations per second** (objects ÷ window; keys listed for a listing). A step of a
backup-and-restore scenario is told in **seconds per step** (its window) by the
scenario tables and plot; where it is ranked with others its rate is its payload bytes
per second. Renderers, plots and comparisons ask the subject for the unit and each
repeat's rate instead of testing operation names.

A Result stores its Subject (since schema 4), made by whoever makes the Result: a seed
probe's is :meth:`Subject.of` its :class:`~storeprobe.workload.Workload`; a metadata
probe's counts its objects, of their true size (0 B included); a distributed probe's
counts the whole fleet's objects; a scenario step's counts the dataset version's files,
of their mean size. :mod:`storeprobe.document` derives it for documents written before.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol

from attrs import field, frozen
from attrs.validators import ge, instance_of

from storeprobe.workload import Workload

__all__ = ["Subject", "Unit"]


class Unit(enum.Enum):
    """The unit a Result's figure is in (its base: rates are scaled by the renderers)."""

    #: payload bytes per second of the window (1024-based units when shown)
    BYTES_PER_S = "bytes/s"
    #: operations per second of the window (objects, or keys listed)
    OPERATIONS_PER_S = "operations/s"
    #: the step's window, in seconds
    SECONDS_PER_STEP = "seconds/step"


class _Window(Protocol):
    @property
    def nbytes(self) -> int: ...
    @property
    def elapsed_ns(self) -> int: ...


_COUNT = [instance_of(int), ge(0)]


@frozen(kw_only=True)
class Subject:
    """What one Result measured: its unit, how many operations (objects, files) a repeat
    made, and its names in tables (``label``: ``"small"``, what probe names show;
    ``shape``: ``"256 × 16 KiB"``; ``description``: ``"small (256 × 16 KiB)"``).
    ``object_size`` (bytes; 0 for empty objects; a distribution's median; a step's mean
    file size) picks KiB/s or MiB/s for the ``workload`` unit of byte rates."""

    unit: Unit = field(validator=instance_of(Unit))
    operations: int = field(validator=_COUNT)
    label: str = field(validator=instance_of(str))
    shape: str = field(validator=instance_of(str))
    description: str = field(validator=instance_of(str))
    object_size: int = field(validator=_COUNT)

    @classmethod
    def of(cls, workload: Workload) -> Subject:
        """A seed probe's subject: the payload bytes per second of ``workload``."""
        return cls.counted(
            Unit.BYTES_PER_S,
            workload.count,
            each=workload.size_label,
            object_size=workload.size,
            name=workload.name,
        )

    @classmethod
    def counted(
        cls, unit: Unit, count: int, *, each: str, object_size: int, name: str | None = None
    ) -> Subject:
        """``count`` objects of ``each`` (``"16 KiB"``, a distribution's label) in
        ``unit``: shaped ``"256 × 16 KiB"``, labelled ``name`` (else the shape) and
        described ``"name (256 × 16 KiB)"`` (else the shape), as a Workload names itself."""
        shape = f"{count} × {each}"
        return cls(
            unit=unit,
            operations=count,
            label=shape if name is None else name,
            shape=shape,
            description=shape if name is None else f"{name} ({shape})",
            object_size=object_size,
        )

    @property
    def per_operation(self) -> bool:
        """True when the figure counts operations, not bytes."""
        return self.unit is Unit.OPERATIONS_PER_S

    @property
    def rate_unit(self) -> Unit:
        """The unit of :meth:`rate`: operations/s, or bytes/s (a step's rate is its
        payload bytes per second; its tables and plot tell its seconds)."""
        return Unit.OPERATIONS_PER_S if self.per_operation else Unit.BYTES_PER_S

    def rate(self, sample: _Window) -> float:
        """One repeat's rate in :attr:`rate_unit`, higher is faster: what tables rank
        and comparisons test (a zero-length window is infinitely fast)."""
        if sample.elapsed_ns <= 0:
            return float("inf")
        if self.per_operation:
            return self.operations / (sample.elapsed_ns / 1e9)
        return sample.nbytes * 1e9 / sample.elapsed_ns

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``unit`` its value: ``"bytes/s"``...)."""
        return {
            "unit": self.unit.value,
            "operations": self.operations,
            "label": self.label,
            "shape": self.shape,
            "description": self.description,
            "object_size": self.object_size,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Subject:
        """Inverse of :meth:`to_dict`."""
        return cls(
            unit=Unit(data["unit"]),
            operations=data["operations"],
            label=data["label"],
            shape=data["shape"],
            description=data["description"],
            object_size=data["object_size"],
        )
