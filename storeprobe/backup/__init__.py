"""Backup and restore of an evolving dataset, replaying the request patterns of real tools.

A scenario (:func:`backup_restore`, :mod:`storeprobe.backup.scenario`) takes the versions
of a dataset (a :class:`~storeprobe.dataset.Tree` and its ``evolve``\\ d successors, or an
:class:`~storeprobe.dataset.Image`) and backs up each, then restores versions; every step
is a Result. What a step asks of the storage is decided by its method, one module each:

- ``files`` (:mod:`storeprobe.backup.files`): whole-file sync, a replay of ``rclone sync
  --backup-dir`` (rclone 1.6x–1.75);
- ``restic`` (:mod:`storeprobe.backup.restic`): restic 0.14's repository, chunks packed
  into pack files with an index, trees and a snapshot per backup, ranged pack reads;
- ``duplicity`` (:mod:`storeprobe.backup.duplicity`): duplicity 0.8's chain of tar
  volumes, librsync signatures and deltas, and manifests;
- ``chunks`` (:mod:`storeprobe.backup.chunks`): a generic per-file chunk store, one HEAD
  per chunk (models no particular tool);
- ``rdiff-backup`` (:mod:`storeprobe.backup.rdiff_backup`): a mirror of the newest
  version plus reverse increments (librsync deltas), file systems only;
- ``rsnapshot`` (:mod:`storeprobe.backup.rsnapshot`): a full tree per version, unchanged
  files hard links to the previous one (rsync ``--link-dest``), file systems only;
- ``duplicacy`` (:mod:`storeprobe.backup.duplicacy`): Duplicacy 3.2's pack-and-split
  chunks of one stream of all files, existence checks only for chunks the previous
  snapshot lacks, its snapshots stored as chunks.

A method is a :class:`BackupMethod` (its options, frozen) that makes a :class:`Replay`
for one scenario; the scenario owns timing, eviction, verification, Results and cleanup
(:class:`~storeprobe.backup.session.Session`).
"""

from __future__ import annotations

from typing import TypeAlias

from storeprobe.backup.chunks import Chunks
from storeprobe.backup.duplicacy import Duplicacy
from storeprobe.backup.duplicity import Duplicity
from storeprobe.backup.files import Files
from storeprobe.backup.method import BackupMethod, Replay
from storeprobe.backup.objects import Blob, Read
from storeprobe.backup.rdiff_backup import RdiffBackup
from storeprobe.backup.registry import METHODS, method_for
from storeprobe.backup.restic import Restic
from storeprobe.backup.rsnapshot import Rsnapshot
from storeprobe.backup.scenario import backup_restore
from storeprobe.backup.session import Session
from storeprobe.execution import Leftover
from storeprobe.manifest import Chunking

__all__ = [
    "METHODS",
    "BackupMethod",
    "Blob",
    "Chunking",
    "Chunks",
    "Duplicacy",
    "Duplicity",
    "Files",
    "Leftover",
    "Method",
    "RdiffBackup",
    "Read",
    "Replay",
    "Restic",
    "Rsnapshot",
    "Session",
    "backup_restore",
    "method_for",
]

#: what ``method=`` takes: a method's name, or a method with its options
Method: TypeAlias = str | BackupMethod
