"""What a step of a scenario was: which step, of which dataset version, and what it left.

A scenario (backup and restore of an evolving dataset, metadata operations) is a
sequence of steps; each step's figures are a :class:`~storeprobe.result.Result` whose
``step`` says where it stands. Sizes are in bytes, times in seconds.
"""

from __future__ import annotations

from typing import Any, Literal

from attrs import field, frozen

__all__ = ["Step", "StepKind"]

StepKind = Literal["backup", "restore"]


def _seconds(value: dict[str, float]) -> dict[str, float]:
    return {str(kind): float(seconds) for kind, seconds in dict(value).items()}


@frozen(kw_only=True)
class Step:
    """One step of a backup-and-restore scenario.

    ``number`` is its 1-based place in the scenario; ``version`` the dataset version it
    backed up or restored (0 = the first). ``dataset_bytes`` is that version's size,
    ``changed_bytes`` what differs from the version before (all of it for the first
    backup or a full restore): the two bases people state rates against. ``moved_bytes``
    is what the step actually sent or received. ``space_used`` and ``objects_stored``
    are what the target holds under the scenario's prefix after the step (bytes,
    objects). ``dedup_ratio`` (backup steps) is the version's bytes divided by the bytes
    the step sent (None when it sent none).
    ``seconds_by_kind`` is the time spent in requests of each kind (the sum of their
    latencies, so it exceeds the wall time when requests overlap).
    """

    scenario: str
    method: str
    kind: StepKind
    number: int
    version: int
    dataset: str
    dataset_bytes: int
    changed_bytes: int
    moved_bytes: int
    incremental: bool
    space_used: int | None = None
    objects_stored: int | None = None
    dedup_ratio: float | None = None
    seconds_by_kind: dict[str, float] = field(factory=dict, converter=_seconds, hash=False)

    @property
    def label(self) -> str:
        """``"backup 2"``, ``"restore 1 (full)"``: the column title people publish."""
        full = " (full)" if self.kind == "restore" and not self.incremental else ""
        return f"{self.kind} {self.number}{full}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "scenario": self.scenario,
            "method": self.method,
            "kind": self.kind,
            "number": self.number,
            "version": self.version,
            "dataset": self.dataset,
            "dataset_bytes": self.dataset_bytes,
            "changed_bytes": self.changed_bytes,
            "moved_bytes": self.moved_bytes,
            "incremental": self.incremental,
            "space_used": self.space_used,
            "objects_stored": self.objects_stored,
            "dedup_ratio": self.dedup_ratio,
            "seconds_by_kind": dict(self.seconds_by_kind),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)
