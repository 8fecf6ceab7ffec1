"""``rsnapshot``: every version a full tree, unchanged files hard links to the one before.

Replays rsnapshot 1.4 (Debian's 1.4.5) with ``link_dest 1`` (and ``retain daily N``),
whose backup is a rotation, then one ``rsync -a --delete --numeric-ids --relative
--delete-excluded --link-dest=<previous snapshot> SRC <new snapshot>`` (``rsnapshot -t`` prints that
command; rsnapshot's man page, ``link_dest``: "If your version of rsync supports
--link-dest (2.5.7 or newer), you can enable this to let rsync handle some things that
GNU cp or the built-in subroutines would otherwise do"), onto a file system the storage
holds. Each backup first rotates the snapshots held (``mv daily.1 daily.2``, then
``mv daily.0 daily.1``: one RENAME each, oldest first, one at a time), then makes
``snapshots/daily.0/<path>`` for every file of the version; the space grows by the
bytes of the changed and new files only, but every changed file is stored whole again (a
1 % rewrite of a disk image stores the whole image once more).

What each backup asks of the storage, as ``strace -f`` shows rsync 3.x's receiver doing
here (rsync 3.5.0, local copy, so ``--whole-file``):

- a directory made for each directory of the version (``mkdir``; untimed, as every
  method's folders);
- per file, the generator's ``lstat`` of the new path (it does not exist yet: one HEAD
  answered "missing") and, from the second backup on, its ``lstat`` of the same path in
  the previous snapshot (one HEAD): a file whose size and mtime match is linked, the
  rest are sent (rsync's quick check; mtime here is the file's generation);
- per unchanged file, one ``link`` to the previous snapshot's file (a LINK request:
  ``os.link`` on disk, OpenSSH's ``hardlink@openssh.com`` over SFTP);
- per new or changed file, the receiver writes the whole file into a temporary
  ``.<name>.<random>`` beside it and renames it into place (one PUT of the whole file,
  one RENAME).

A restore of version ``k`` is ``rsync -a --delete snapshots/daily.<n>/ DIR/`` (``n``
backups after it): the sender lists each directory of the snapshot and ``lstat``\\ s
each file (one LIST per directory, one HEAD per file), then the files the directory
lacks or holds at another size or mtime (generation) are read whole (one GET each; a
local copy never sends deltas) and files the version lacks are deleted from the
directory.

Left out: the ``rm -rf`` of the snapshot past ``retain`` (here ``retain`` is at least
the scenario's versions: every one stays restorable), rsnapshot's lock file and the
``touch`` of the new snapshot; rsync's ``chmod`` and ``utimensat`` after each write and
per directory (metadata requests with no kind here); the sender's reads of the source
disk and rsync's checksums; a remote rsync's delta transfer over ssh (the receiver still
writes whole files, so the storage sees the same writes).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import ClassVar

from attrs import define, field, frozen

from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.objects import Blob, Read
from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset, File
from storeprobe.manifest import Piece
from storeprobe.restore import write_fetched, write_files

__all__ = ["Rsnapshot"]

_INTERVAL = "daily"  # the snapshots' interval name (``retain daily N``)


def _folders(paths: list[str]) -> list[str]:
    """Every directory of ``paths`` (relative, ``/``-separated), the root ``""`` first."""
    found: dict[str, None] = {"": None}
    for path in paths:
        folder = posixpath.dirname(path)
        parents: list[str] = []
        while folder and folder not in found:
            parents.append(folder)
            folder = posixpath.dirname(folder)
        found.update((parent, None) for parent in reversed(parents))
    return list(found)


@define
class _RsnapshotReplay(Replay):
    #: temporary names made so far (rsync's random suffix, numbered here)
    temporaries: int = 0
    #: the snapshots held, newest first (``daily.0``, ``daily.1``...): each one's
    #: version number and files by path
    held: list[tuple[int, dict[str, File]]] = field(factory=list)

    def _key(self, session: Session, index: int, path: str = "") -> str:
        return session.key("snapshots", f"{_INTERVAL}.{index}", path).rstrip("/")

    def _temporary(self, key: str) -> str:
        self.temporaries += 1
        folder, name = posixpath.split(key)
        return posixpath.join(folder, f".{name}.{self.temporaries:06d}")

    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        for index in range(len(self.held) - 1, -1, -1):  # rotation, oldest first, one by one
            session.rename([(self._key(session, index + 1), self._key(session, index))])
        files = version.files
        keys = [self._key(session, 0, file.path) for file in files]
        session.head(keys)  # the generator's lstat of each destination: none exists yet
        linked: list[tuple[str, str]] = []
        sent: list[tuple[str, File]] = []
        if not self.held:
            sent = list(zip(keys, files, strict=True))
        else:
            _, before = self.held[0]
            basis = [self._key(session, 1, file.path) for file in files]
            sizes = session.head(basis)  # its lstat of the file in --link-dest
            for key, old, file, size in zip(keys, basis, files, sizes, strict=True):
                if size == file.size and before.get(file.path) == file:
                    linked.append((key, old))
                else:
                    sent.append((key, file))
        session.link(linked)
        temporaries = [self._temporary(key) for key, _ in sent]
        session.put(
            [
                Blob(key=temporary, segments=(Piece(version, file, 0, file.size),))
                for temporary, (_, file) in zip(temporaries, sent, strict=True)
            ]
        )
        session.rename(
            [(key, temporary) for temporary, (key, _) in zip(temporaries, sent, strict=True)]
        )
        self.held.insert(0, (version.version, {file.path: file for file in files}))

    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        (index,) = [i for i, (number, _) in enumerate(self.held) if number == version.version]
        files = version.files
        session.listing(
            [self._key(session, index, folder) for folder in _folders([f.path for f in files])]
        )
        session.head([self._key(session, index, file.path) for file in files])
        have = {} if held is None else {file.path: file for file in held.files}
        wanted = [file for file in files if have.get(file.path) != file]
        reads = [Read(key=self._key(session, index, file.path)) for file in wanted]
        remaining = iter(wanted)
        # each window's files are written before the next window runs
        for bodies in session.get_staged_windows(reads):
            for body in bodies:
                destination = directory / next(remaining).path
                temporary = destination.with_name(destination.name + ".storeprobe-part")
                write_fetched(temporary, body)
                os.replace(temporary, destination)
        gone = [path for path in have if path not in {file.path for file in files}]
        write_files(directory, {}, gone)


@frozen(kw_only=True)
class Rsnapshot(BackupMethod):
    """rsnapshot (``link_dest 1``): full snapshot trees, unchanged files hard-linked."""

    name: ClassVar[str] = "rsnapshot"
    tool: ClassVar[str] = "rsnapshot 1.4 (link_dest 1: rsync 3.x --link-dest)"
    protocols: ClassVar[tuple[str, ...]] = ("file", "local", "sftp", "ssh")
    folders: ClassVar[tuple[str, ...]] = ("snapshots",)

    def replay(self) -> Replay:
        return _RsnapshotReplay()

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return (
                "rsnapshot: a new snapshot tree; unchanged files hard-linked to the previous "
                "snapshot, changed and new files written whole"
            )
        return "rsnapshot: list the snapshot, read the files the directory lacks"
