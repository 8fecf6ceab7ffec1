"""What a backup method is: the replay of one named tool's requests, step by step.

A :class:`BackupMethod` is a frozen value (its options, validated at construction) that
says which tool it replays (:attr:`~BackupMethod.tool`, with the sources of its rules in
its module's docstring) and on which storages it can run (:attr:`~BackupMethod.protocols`;
empty: every one). For one scenario it makes a :class:`Replay`, the stateful part: what
the tool's repository holds so far (its index, its chain of volumes, its mirror), so each
backup step asks the storage exactly what the tool would, and each restore reads what the
tool would read.

A replay only asks a :class:`~storeprobe.backup.session.Session` for windows (list, head,
put, copy, get, delete) and writes the restored files into the directory it is given; timing,
cleanup, eviction of caches before a restore, verification of the restored bytes and the
step's Result belong to the scenario (:mod:`storeprobe.backup.scenario`).

Adding a method is adding one module with a :class:`BackupMethod` subclass and a
:class:`Replay` subclass, and one line in :mod:`storeprobe.backup.registry`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset

__all__ = ["BackupMethod", "Replay", "StepKind"]

StepKind = Literal["backup", "restore"]


class Replay(ABC):
    """One scenario's replay of a tool: its repository's state between steps."""

    @abstractmethod
    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        """Send the requests the tool sends to back up ``version`` (``previous`` is the
        version backed up before, None for the first backup)."""

    @abstractmethod
    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        """Read what the tool reads to restore ``version`` and write its files into
        ``directory``, which holds version ``held`` (restored before) or nothing."""


class BackupMethod(ABC):
    """A backup tool's request pattern (subclasses are frozen attrs classes)."""

    #: the name users pass (``method="restic"``, ``--method restic``)
    name: ClassVar[str]
    #: the tool and version whose requests it replays, e.g. ``"restic 0.14"``
    tool: ClassVar[str]
    #: fsspec protocols it can run on; empty: every storage
    protocols: ClassVar[tuple[str, ...]] = ()
    #: folders made under the run prefix before the first step (file systems need them)
    folders: ClassVar[tuple[str, ...]] = ()
    #: whether restores read byte ranges (the client that can is chosen before step 1)
    ranged_reads: ClassVar[bool] = False

    @abstractmethod
    def replay(self) -> Replay:
        """A fresh replay for one scenario."""

    @abstractmethod
    def strategy(self, kind: StepKind) -> str:
        """What a backup or restore step of this method does, in a sentence."""

    def restore_scratch(self, versions: Sequence[Dataset]) -> int:
        """Bytes a restore of any of ``versions`` writes on the local disk beside the
        version itself, at the most at once: by default twice the largest file (an object
        above the window budget landed in a staging file, or a file built under a
        temporary name from its basis). A method that lands more (rdiff-backup's chain of
        reverse deltas) says so; :func:`~storeprobe.backup.scenario.check_restore_room`
        adds it to the version's bytes before anything is written."""
        return 2 * max((f.size for version in versions for f in version.files), default=0)
