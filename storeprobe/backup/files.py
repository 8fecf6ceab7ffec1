"""``files``: whole files synced onto the storage, one object per file content.

Replays a file-sync tool copying a tree onto object storage or a remote disk, as
``rclone sync`` or ``rsync`` do: each backup lists the target, then uploads every file
that is new or whose size or content generation changed, each as one object
``files/<quoted path>@<generation>`` (a changed file gets a new object, so older versions
stay restorable, as with ``rclone sync --backup-dir`` keeping replaced files), then one
small manifest naming the version's files. A restore reads the manifest, then every file
the local directory lacks or holds in another generation.

Which rclone flags it matches: ``--fast-list`` (one listing for the whole target instead
of one per directory) and ``--no-check-dest``-like decisions from that listing (no HEAD
per file). What it leaves out: rclone's per-file HEAD without ``--fast-list``, its
server-side COPY and DELETE of replaced files into ``--backup-dir``, hashing of the source
files, and reads of the source disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from attrs import define, field, frozen

from storeprobe.backup._versions import put_version, restore_version
from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset
from storeprobe.manifest import VersionMap, map_files

__all__ = ["Files"]


@define
class _FilesReplay(Replay):
    #: key → size of every file object stored so far
    stored: dict[str, int] = field(factory=dict)
    maps: dict[int, VersionMap] = field(factory=dict)

    def _map(self, session: Session, version: Dataset) -> VersionMap:
        if version.version not in self.maps:
            self.maps[version.version] = map_files(session.prefix, version)
        return self.maps[version.version]

    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        laid = self._map(session, version)
        (listed,) = session.listing([session.key("files")])
        if max(listed, 0) != len(self.stored):
            raise OSError(
                f"the listing shows {max(listed, 0)} objects where the probe stored "
                f"{len(self.stored)}"
            )
        needed = [key for key, entry in laid.objects.items() if self.stored.get(key) != entry.size]
        put_version(session, laid, needed)
        self.stored.update((key, laid.objects[key].size) for key in needed)

    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        previous = None if held is None else self._map(session, held)
        restore_version(session, self._map(session, version), previous, directory)


@frozen(kw_only=True)
class Files(BackupMethod):
    """Whole-file sync (rclone sync with ``--fast-list``, rsync onto object storage)."""

    name: ClassVar[str] = "files"
    tool: ClassVar[str] = "rclone sync --fast-list (1.6x), rsync"
    folders: ClassVar[tuple[str, ...]] = ("files", "manifests")

    def replay(self) -> Replay:
        return _FilesReplay()

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return "files: list the target, upload new and changed files, write a manifest"
        return "files: read the manifest, download the files that changed"
