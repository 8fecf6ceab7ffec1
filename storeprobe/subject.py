"""What a Result's figure counts, and in which unit: the one place that knows.

A seed probe moves bytes: its figure is **bytes per second** (payload bytes ÷ window).
A metadata probe (HEAD, LIST, DELETE) moves no payload in its window: its figure is
**operations per second** (objects ÷ window; keys listed for a listing). A step of a
backup-and-restore scenario is told in **seconds per step** (its window) by the
scenario tables and plot; where it is ranked with others its rate is its payload bytes
per second. Renderers, plots and comparisons ask the subject for the unit and each
repeat's rate instead of testing operation names.
"""

from __future__ import annotations

import enum
from typing import Protocol

from attrs import frozen

__all__ = ["PER_OPERATION", "Subject", "Unit"]

#: the operations whose figure is operations per second (metadata probes); this module
#: is the one that says so, :attr:`storeprobe.result.Result.subject` reads it
PER_OPERATION: tuple[str, ...] = ("head", "list", "delete")


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


@frozen(kw_only=True)
class Subject:
    """What one Result measured: its unit, how many operations a repeat made, and its
    names in tables (``shape``: ``"256 × 16 KiB"``; ``description``: ``"small (256 ×
    16 KiB)"``). ``object_size`` (bytes) picks KiB/s or MiB/s for the ``workload`` unit
    of byte rates."""

    unit: Unit
    operations: int
    shape: str
    description: str
    object_size: int

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
