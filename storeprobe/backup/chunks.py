"""``chunks``: content-defined chunks of each file, one object and one HEAD per chunk.

A generic model that replays no particular tool: every file is cut into content-defined
chunks on its own (FastCDC through the ``fastcdc`` package, :class:`Chunking`, about
4 MiB on average by default), each distinct chunk is one object named by its BLAKE2b-128
hash (``chunks/<hash>``); a backup asks the storage whether each of the version's chunks
exists (one HEAD per chunk, every backup), uploads the missing ones, then writes a
manifest listing each file's chunks. A restore reads the manifest, then the chunks the
local directory does not hold.

Real chunking tools differ in exactly what decides their cost on a storage: restic packs
chunks into pack files and keeps an index (no HEAD per chunk: the ``restic`` method),
Duplicacy cuts one stream of all files (chunks cross file boundaries) and checks only
chunks its previous snapshot lacks (the ``duplicacy`` method). ``chunks`` is kept as the
simplest chunk store: an upper bound on requests for a storage-per-chunk design.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from attrs import define, field, frozen

from storeprobe.backup._versions import put_version, restore_version
from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset
from storeprobe.manifest import Chunking, VersionMap, map_chunks

__all__ = ["Chunks"]


@define
class _ChunksReplay(Replay):
    chunking: Chunking
    maps: dict[int, VersionMap] = field(factory=dict)

    def _map(self, session: Session, version: Dataset) -> VersionMap:
        if version.version not in self.maps:
            self.maps[version.version] = map_chunks(
                session.prefix,
                version,
                self.chunking,
                lambda done: session.worked("chunked", done),
                previous=self.maps.get(version.version - 1),
            )
        return self.maps[version.version]

    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        laid = self._map(session, version)
        keys = list(laid.objects)
        sizes = session.head(keys)
        needed = [
            key for key, size in zip(keys, sizes, strict=True) if size != laid.objects[key].size
        ]
        put_version(session, laid, needed)

    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        previous = None if held is None else self._map(session, held)
        restore_version(session, self._map(session, version), previous, directory)


@frozen(kw_only=True)
class Chunks(BackupMethod):
    """Per-file content-defined chunks, one object and one existence check per chunk."""

    name: ClassVar[str] = "chunks"
    tool: ClassVar[str] = "no particular tool (a generic chunk store)"
    folders: ClassVar[tuple[str, ...]] = ("chunks", "manifests")

    chunking: Chunking = field(factory=Chunking)

    def replay(self) -> Replay:
        return _ChunksReplay(self.chunking)

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return "chunks: HEAD every chunk, upload the missing ones, write a manifest"
        return "chunks: read the manifest, download the chunks not held locally"
