"""``duplicacy``: Duplicacy's pack-and-split chunks, lock-free deduplication, its snapshots.

Replays the requests of Duplicacy 3.2.4's CLI (``duplicacy backup`` and ``duplicacy
restore -r N -overwrite -delete``; gilbertchen/duplicacy at commit 065ae50, its wiki
pages "Chunk Size", "Lock Free Deduplication" and "Snapshot Format"). Duplicacy is not
packaged here, so this model is proven against that documented algorithm and code
(tests/test_backup_duplicacy.py), never against the tool itself. Each rule, with its
source:

- **Pack and split** (wiki "Chunk Size"; ``BackupManager.Backup`` calls
  ``fileChunkMaker.AddData`` file after file on one maker): the files a backup uploads are
  one stream in path order, cut into content-defined chunks by Duplicacy's buzhash chunk
  maker (:mod:`storeprobe.backup._buzhash`): 4 MiB on average, at least 1 MiB, at most
  16 MiB by default (``duplicacy init -c/-min/-max``; min = average / 4 and max =
  average × 4 are init's defaults, the :class:`~storeprobe.manifest.Chunking` ratios;
  ``chunk_size=`` sets the average, a power of two as the chunk maker demands). Chunks
  cross file boundaries.
- **Incremental backups pack only what changed** (``Backup`` with ``quickMode``, the
  default without ``-hash``): a file whose path, size and time match the previous
  snapshot's keeps its chunks there (``AddPreservedChunk``); only new and changed files
  are packed into the new stream. A changed file's generation stands for its mtime.
  With ``hash_all=True`` (``backup -hash``, as the scripts of Duplicacy's cloud
  comparison run it: ``linux-backup-cloud.sh``, ``vm-backup-cloud.sh``) every backup
  packs every file, and the unchanged stretches of the stream cut into the same chunks.
- **One object per chunk, named by its hash** (wiki "Lock Free Deduplication"): the
  chunk's hash is keyed BLAKE2b-256 of its bytes, its id the keyed BLAKE2b-256 of that
  hash (``Config.NewKeyedHasher``, ``GetChunkIDFromHash``; key ``"duplicacy"`` on an
  unencrypted storage), its object ``chunks/<first 2 hex>/<other 62>`` (nesting level 1
  of a storage made by 2.0.10+, ``StorageBase.SetNestingLevels``).
- **One existence check, and only for chunks the previous snapshot lacks**: before the
  upload, the chunks the previous snapshot references (file and metadata chunks) form a
  cache (``chunkCache`` in ``Backup``); any other chunk is looked up once
  (``ChunkOperator.UploadChunk`` → ``StorageBase.FindChunk`` → ``GetFileInfo``: a HEAD
  on S3, ``HeadObject`` in ``duplicacy_s3storage.go``; a ``stat`` on a local disk) and
  uploaded only if absent. On a storage with fast listing (S3, GCS, Azure, B2, SFTP…)
  the first backup lists ``chunks/`` instead of trusting an empty cache.
- **The snapshot is chunks too** (wiki "Snapshot Format"; ``UploadSnapshot``): the file
  list (each file's path, size, time, hash and chunk range, delta-encoded so unchanged
  stretches make the same bytes) is cut into "files" sequence chunks, the list of chunk
  hashes and of chunk lengths into "chunks" and "lengths" sequence chunks (metadata
  chunk maker: 1 MiB on average, ``-metadata-chunk-size``), each checked and uploaded as
  above; then the snapshot file ``snapshots/<id>/<revision>`` naming the three sequences.
- **Every command opens the storage** (``DownloadConfig``, ``SetNestingLevels``): a HEAD
  and a GET of ``config``, a HEAD of ``nesting``. The first backup is preceded by
  ``duplicacy init`` (``ConfigStorage``: a HEAD of ``config``, then its PUT), counted in
  backup 1.
- **A backup starts from the previous snapshot** (``downloadLatestSnapshot``,
  ``DownloadSnapshot``, ``DownloadSnapshotSequences``, ``ListRemoteFiles``): a LIST of
  ``snapshots/<id>/``, a HEAD of the newest snapshot file, its GET, and its sequences'
  chunks (a lookup and a GET each): chunks and lengths, and in quick mode the files
  sequence too (a ``-hash`` backup lists no remote files).
- **The local snapshot cache** (``SetupSnapshotCache``, ``SnapshotManager.DownloadFile``,
  ``ChunkOperator.DownloadChunk``/``UploadChunk``, ``CleanSnapshotCache``): on every
  storage but the local disk (``IsCacheNeeded``), snapshot files and metadata chunks
  are kept in ``.duplicacy/cache`` as they are uploaded; metadata chunks and snapshot
  files downloaded are kept on every storage; after each backup the cache keeps only the
  newest snapshot's. What the cache holds is read locally, not from the storage (the
  HEAD of the snapshot file is always sent). The scenario's backups and restores share
  one repository and so one cache.
- **A restore** (``BackupManager.Restore``, ``RestoreFile``, ``ChunkDownloader``): the
  storage is opened, the snapshot file read (a HEAD, then a GET unless cached) and its
  sequences (each uncached chunk a lookup and a GET); files whose size and time match
  the local ones are skipped; for every other file, a chunk is read from the local file
  when it lies wholly inside the file at the same offset and its bytes there hash to it
  (in-place restore), else it is looked up and downloaded (one HEAD and one GET per
  distinct chunk); files the revision lacks are deleted (``-delete``).

Left out: compression and encryption of chunks (a stored chunk here is its raw bytes;
Duplicacy's LZ4 frame and header add a few bytes per chunk of incompressible data) and
their CPU; directory and symlink entries in the file list (only files); msgpack (the file
list is JSON lines, about the same size); the snapshot cache's own storage lookups when
it lost a chunk; the chunk cache's keep-alive re-upload after 30 minutes without uploads;
reads of the source disk; pruning and fossils.

Why one module (~790 lines, 75 of them the rules above): a backup method is one module
(``docs/architecture.md``), one tool's request pattern read top to bottom against the
sources cited here; its helpers (chunk ids, the stream, the snapshot) serve Duplicacy
alone.
"""

from __future__ import annotations

import hashlib
import json
import os
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import attrs
from attrs import define, field, frozen

from storeprobe.backup._buzhash import BLOCK, Cutter
from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.objects import Blob, Read, Segment
from storeprobe.backup.session import WINDOW_BUDGET, Session
from storeprobe.dataset import Dataset, File
from storeprobe.errors import ConfigurationError
from storeprobe.manifest import Chunking, Piece
from storeprobe.units import MiB, format_size, parse_size

__all__ = ["Duplicacy"]

#: the repository's snapshot id (``duplicacy init <snapshot id> <storage url>``)
SNAPSHOT_ID = "storeprobe"
#: the key of an unencrypted storage's hashes (``DEFAULT_KEY`` in duplicacy_config.go)
_KEY = b"duplicacy"
#: a snapshot's three sequences, in the order its file names them
_SEQUENCES = ("files", "chunks", "lengths")
#: bytes of chunks one window writes or fetches at most: a window's bodies are in memory
#: while it runs, so this bounds a step's memory (Duplicacy streams chunks as it cuts them)
_WINDOW = WINDOW_BUDGET


def _hash(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32, key=_KEY).digest()


def chunk_id(data: bytes) -> str:
    """The id (64 hex digits) Duplicacy names a chunk of ``data`` by."""
    return hashlib.blake2b(_hash(data), digest_size=32, key=_KEY).hexdigest()


def _power_of_two(name: str, value: int) -> None:
    if value & (value - 1):
        below = 1 << (value.bit_length() - 1)
        raise ConfigurationError(
            f"Duplicacy's {name} must be a power of two (its chunk maker refuses "
            f"{format_size(value)}): use {format_size(below)} or {format_size(below * 2)}"
        )


def _metadata_size(value: int | str) -> int:
    return parse_size(value)


def _boolean(_: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{attribute.name} must be True or False, not {value!r}")


@frozen
class _Chunk:
    """One stored chunk: its id, size and bytes (pieces of files, or metadata)."""

    id: str
    size: int
    segments: tuple[Segment, ...]


@frozen
class _Entry:
    """A file's place in a snapshot: chunks ``start … end`` (indices in its chunk list),
    from ``start_offset`` in the first to ``end_offset`` (exclusive) in the last."""

    file: File
    hash: str
    start: int
    start_offset: int
    end: int
    end_offset: int


@frozen
class _Snapshot:
    """One revision: its file chunks in order, each file's entry, its metadata chunks."""

    revision: int
    dataset: Dataset
    chunks: tuple[str, ...]
    entries: dict[str, _Entry]
    sequences: dict[str, tuple[str, ...]]
    description: bytes

    @property
    def metadata(self) -> list[str]:
        """The ids of its sequence chunks, files then chunks then lengths."""
        return self.sequence_chunks(_SEQUENCES)

    def sequence_chunks(self, names: Sequence[str]) -> list[str]:
        """The ids of the chunks of the sequences ``names``, in order."""
        return [cid for name in names for cid in self.sequences[name]]

    @property
    def referenced(self) -> set[str]:
        """Every chunk id it references (``GetSnapshotChunks``)."""
        return {*self.chunks, *self.metadata}


def _windows(chunks: Sequence[_Chunk]) -> Iterator[list[_Chunk]]:
    """``chunks`` in runs of about ``_WINDOW`` bytes (at least one chunk each)."""
    run: list[_Chunk] = []
    held = 0
    for chunk in chunks:
        if run and held + chunk.size > _WINDOW:
            yield run
            run, held = [], 0
        run.append(chunk)
        held += chunk.size
    if run:
        yield run


def _blocks(pieces: Iterable[Piece]) -> Iterator[bytes]:
    """The bytes of ``pieces`` one after the other, gathered into blocks of ≈ BLOCK."""
    pending: list[bytes] = []
    held = 0
    for piece in pieces:
        offset, stop = piece.offset, piece.offset + piece.length
        while offset < stop:
            take = min(BLOCK, stop - offset)
            pending.append(piece.dataset.payload(piece.file, offset, offset + take))
            held += take
            offset += take
            if held >= BLOCK:
                yield b"".join(pending)
                pending, held = [], 0
    if pending:
        yield b"".join(pending)


class _Stream:
    """Files packed one after the other: where each stream byte comes from."""

    def __init__(self, dataset: Dataset, files: Sequence[File]) -> None:
        self.dataset = dataset
        self.files = [f for f in files if f.size > 0]
        self.starts: list[int] = []
        position = 0
        for file in self.files:
            self.starts.append(position)
            position += file.size
        self.size = position

    def pieces(self, start: int, stop: int) -> tuple[Piece, ...]:
        """The file pieces of stream bytes ``[start, stop)``."""
        found: list[Piece] = []
        index = bisect_right(self.starts, start) - 1
        while start < stop:
            file, begin = self.files[index], self.starts[index]
            end = min(stop, begin + file.size)
            found.append(Piece(self.dataset, file, start - begin, end - start))
            start = end
            index += 1
        return tuple(found)


def _cut(cutter: Cutter, blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks' bytes of a stream made of ``blocks``, in order."""
    held = bytearray()
    base = 0
    for block in blocks:
        held += block
        for end in cutter.feed(block):
            yield _take(held, end - base)
            base = end
    for end in cutter.finish():
        yield _take(held, end - base)
        base = end


def _take(held: bytearray, length: int) -> bytes:
    """The first ``length`` bytes of ``held``, removed from it (one copy, not two)."""
    with memoryview(held) as view:
        taken = bytes(view[:length])
    del held[:length]
    return taken


def _cut_stream(stream: _Stream, cutter: Cutter) -> tuple[list[_Chunk], dict[str, str]]:
    """The chunks of ``stream`` (CPU only) and the BLAKE2b-256 of each of its files.

    Each file's hash is fed while the stream passes through it and finished once its last
    byte is hashed: a few files' hash states are held at a time, not every file's."""
    made: list[_Chunk] = []
    hashes: dict[str, hashlib.blake2b] = {}
    digests: dict[str, str] = {}
    position = 0
    for data in _cut(cutter, _blocks(stream.pieces(0, stream.size))):
        pieces = stream.pieces(position, position + len(data))
        offset = 0
        view = memoryview(data)
        for piece in pieces:
            path = piece.file.path
            if path not in hashes:
                hashes[path] = hashlib.blake2b(digest_size=32)
            hashes[path].update(view[offset : offset + piece.length])
            offset += piece.length
            if piece.offset + piece.length == piece.file.size:
                digests[path] = hashes.pop(path).hexdigest()
        view.release()
        made.append(_Chunk(id=chunk_id(data), size=len(data), segments=pieces))
        position += len(data)
    return made, digests


def _kept_and_changed(
    version: Dataset, before: dict[str, _Entry]
) -> tuple[dict[str, _Entry], list[File]]:
    """The entries of ``before`` whose file is unchanged in ``version`` (quick mode keeps
    their chunks), and the other files that hold bytes, in path order."""
    kept: dict[str, _Entry] = {}
    changed: list[File] = []
    for file in version.files:
        old = before.get(file.path)
        if old is not None and old.file == file:
            kept[file.path] = old
        elif file.size > 0:
            changed.append(file)
    return kept, changed


def _entries(
    version: Dataset,
    kept: dict[str, _Entry],
    stream: _Stream,
    made: Sequence[_Chunk],
    digests: dict[str, str],
) -> tuple[list[tuple[str, int]], dict[str, _Entry]]:
    """The new revision's chunk list in path order, each chunk ``("kept", index in the
    last revision)`` or ``("made", index in made)`` (a chunk two neighbours share listed
    once), and each file's entry in it."""
    where = {f.path: i for i, f in enumerate(stream.files)}
    ends: list[int] = []
    total = 0
    for chunk in made:
        total += chunk.size
        ends.append(total)
    order: list[tuple[str, int]] = []
    entries: dict[str, _Entry] = {}
    last_ref: tuple[str, int] | None = None
    for file in version.files:
        if file.size == 0:
            entries[file.path] = _Entry(
                file=file,
                hash=hashlib.blake2b(b"", digest_size=32).hexdigest(),
                start=-1,
                start_offset=0,
                end=-1,
                end_offset=0,
            )
            continue
        if file.path in kept:
            old = kept[file.path]
            refs = [("kept", i) for i in range(old.start, old.end + 1)]
            start_offset, end_offset, digest = old.start_offset, old.end_offset, old.hash
        else:
            begin = stream.starts[where[file.path]]
            first = bisect_right(ends, begin)
            final = bisect_right(ends, begin + file.size - 1)
            refs = [("made", i) for i in range(first, final + 1)]
            start_offset = begin - (ends[first - 1] if first else 0)
            end_offset = begin + file.size - (ends[final - 1] if final else 0)
            digest = digests[file.path]
        if refs[0] != last_ref:
            order.append(refs[0])
        order.extend(refs[1:])
        last_ref = refs[-1]
        entries[file.path] = _Entry(
            file=file,
            hash=digest,
            start=len(order) - len(refs),
            start_offset=start_offset,
            end=len(order) - 1,
            end_offset=end_offset,
        )
    return order, entries


def _file_lines(entries: dict[str, _Entry]) -> list[bytes]:
    """The "files" sequence's text, one JSON line a file, its chunk range delta-encoded
    as ``UploadSnapshot`` does, so unchanged stretches repeat."""
    lines: list[bytes] = []
    last_end = 0
    for path, entry in entries.items():
        content = "0:0:0:0"
        if entry.start >= 0:
            start = entry.start - last_end
            content = f"{start}:{entry.start_offset}:{entry.end - entry.start}:{entry.end_offset}"
            last_end = entry.end
        lines.append(
            json.dumps(
                {
                    "path": path,
                    "size": entry.file.size,
                    "time": entry.file.generation,
                    "mode": 0o644,
                    "hash": entry.hash,
                    "content": content,
                },
                separators=(",", ":"),
            ).encode()
            + b"\n"
        )
    return lines


class _ChunkFeed:
    """The chunks a restore needs, each fetched once in the order first used, in windows
    of about ``_WINDOW`` bytes, and dropped after its last use (:meth:`take`)."""

    def __init__(
        self,
        todo: Sequence[tuple[_Entry, list[int]]],
        snapshot: _Snapshot,
        sizes: Callable[[str], int],
        fetch: Callable[[list[str]], list[bytes]],
    ) -> None:
        self.order: list[str] = []  # the chunks needed, in the order they are first used
        self.uses: dict[str, int] = {}
        for _, needed in todo:
            for index in needed:
                cid = snapshot.chunks[index]
                if cid not in self.uses:
                    self.order.append(cid)
                self.uses[cid] = self.uses.get(cid, 0) + 1
        self.fetched: dict[str, bytes] = {}
        self.ahead = 0  # order[:ahead] has been fetched
        self.sizes, self.fetch = sizes, fetch

    def take(self, cid: str) -> bytes:
        """The bytes of chunk ``cid``, the next window fetched first if it is not held."""
        order, fetched, uses = self.order, self.fetched, self.uses
        if cid not in fetched:
            if order[self.ahead] != cid:
                raise AssertionError(f"chunk {cid} is not the next to fetch")
            batch: list[str] = []
            budget = 0
            while self.ahead < len(order):
                size = self.sizes(order[self.ahead])
                if batch and budget + size > _WINDOW:
                    break
                batch.append(order[self.ahead])
                budget += size
                self.ahead += 1
            fetched.update(zip(batch, self.fetch(batch), strict=True))
        data = fetched[cid]
        uses[cid] -= 1
        if not uses[cid]:
            del fetched[cid]
        return data


@define
class _DuplicacyReplay(Replay):
    method: Duplicacy
    #: every chunk the storage holds, by id
    stored: dict[str, _Chunk] = field(factory=dict)
    #: snapshots by dataset version (revision = version + 1)
    snapshots: dict[int, _Snapshot] = field(factory=dict)
    #: the newest revision backed up
    latest: _Snapshot | None = None
    #: metadata chunks and snapshot revisions in the local snapshot cache
    cached_chunks: set[str] = field(factory=set)
    cached_snapshots: set[int] = field(factory=set)

    # -- keys ---------------------------------------------------------------------------
    @staticmethod
    def _chunk_key(session: Session, cid: str) -> str:
        return session.key("chunks", cid[:2], cid[2:])

    @staticmethod
    def _snapshot_key(session: Session, revision: int) -> str:
        return session.key("snapshots", SNAPSHOT_ID, str(revision))

    @staticmethod
    def _local(session: Session) -> bool:
        """Duplicacy's local-disk storage: no snapshot cache on upload, no fast listing."""
        return session.target.protocol in ("file", "local")

    # -- requests shared by backups and restores --------------------------------------
    def _open(self, session: Session) -> None:
        """``DownloadConfig`` and ``SetNestingLevels``: HEAD and GET config, HEAD nesting."""
        (size,) = session.head([session.key("config")])
        if size < 0:
            raise OSError("the storage has no Duplicacy config: it was not initialised")
        (body,) = session.get([Read(key=session.key("config"))])
        if json.loads(body)["average-chunk-size"] != self.method.chunking.average:
            raise OSError("the config read back is not the one written")
        session.head([session.key("nesting")])

    def _read_snapshot(
        self, session: Session, snapshot: _Snapshot, sequences: Sequence[str] = _SEQUENCES
    ) -> None:
        """``DownloadSnapshot`` and its ``sequences``: a HEAD of the snapshot file, its
        GET unless cached, then each uncached chunk of the sequences looked up and read."""
        key = self._snapshot_key(session, snapshot.revision)
        (size,) = session.head([key])
        if size < 0:
            raise OSError(f"snapshot {key} is missing")
        if not (snapshot.revision in self.cached_snapshots and not self._local(session)):
            (body,) = session.get([Read(key=key)])
            if json.loads(body)["revision"] != snapshot.revision:
                raise OSError(f"snapshot {key} names another revision")
            self.cached_snapshots.add(snapshot.revision)
        named = snapshot.sequence_chunks(sequences)
        wanted = list(dict.fromkeys(c for c in named if c not in self.cached_chunks))
        self._fetch(session, wanted)
        self.cached_chunks.update(wanted)

    def _fetch(self, session: Session, ids: Sequence[str]) -> list[bytes]:
        """``FindChunk`` then ``DownloadFile`` for each chunk: a HEAD window, a GET window;
        each body checked against its id."""
        keys = [self._chunk_key(session, cid) for cid in ids]
        for key, size in zip(keys, session.head(keys), strict=True):
            if size < 0:
                raise OSError(f"chunk {key} can't be found")
        bodies = session.get([Read(key=key) for key in keys])
        for cid, body in zip(ids, bodies, strict=True):
            if chunk_id(body) != cid:
                raise OSError(f"chunk {cid} read back has another hash")
        return bodies

    def _upload(self, session: Session, chunks: Sequence[_Chunk], known: set[str]) -> list[_Chunk]:
        """``UploadChunk`` for the chunks not in ``known`` (each once): a HEAD window, then
        PUT windows of the ones absent (about ``_WINDOW`` bytes each: a window's bodies
        are made before it runs); the chunks checked."""
        fresh = [c for c in {c.id: c for c in chunks}.values() if c.id not in known]
        known.update(c.id for c in fresh)
        sizes = session.head([self._chunk_key(session, c.id) for c in fresh])
        missing = [c for c, size in zip(fresh, sizes, strict=True) if size < 0]
        for window in _windows(missing):
            session.put(
                [Blob(key=self._chunk_key(session, c.id), segments=c.segments) for c in window]
            )
        for chunk in chunks:
            self.stored.setdefault(chunk.id, chunk)
        return fresh

    # -- a backup -------------------------------------------------------------------------
    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        local = self._local(session)
        if self.latest is None:  # duplicacy init
            (size,) = session.head([session.key("config")])
            if size >= 0:
                raise OSError("the run prefix already holds a Duplicacy config")
            session.put([Blob.of_bytes(session.key("config"), self.method.config())])
        self._open(session)
        (listed,) = session.listing([session.key("snapshots", SNAPSHOT_ID)])
        if max(listed, 0) != len(self.snapshots):
            raise OSError(
                f"the listing shows {max(listed, 0)} snapshots where {len(self.snapshots)} "
                "were written"
            )
        last = self.latest
        known: set[str] = set()
        if last is not None:
            # DownloadSnapshotSequences (chunks, lengths); in quick mode ListRemoteFiles
            # reads the files sequence too, a -hash backup does not
            wanted = ("chunks", "lengths") if self.method.hash_all else _SEQUENCES
            self._read_snapshot(session, last, wanted)
            known = last.referenced
        elif not local:  # IsFastListing and revision 0: list every chunk
            session.listing([session.key("chunks")])
        ids, entries, chunks = self._layout(version, last)
        self._upload(session, chunks, known)
        sequences, description, metadata = self._metadata(version, ids, entries)
        snapshot = _Snapshot(
            revision=version.version + 1,
            dataset=version,
            chunks=ids,
            entries=entries,
            sequences=sequences,
            description=description,
        )
        checked = self._upload(session, metadata, known)
        if not local:  # UploadChunk keeps a copy of each metadata chunk it is given
            self.cached_chunks.update(c.id for c in checked)
        key = self._snapshot_key(session, snapshot.revision)
        session.put([Blob.of_bytes(key, snapshot.description)])
        self.snapshots[version.version] = snapshot
        self.latest = snapshot
        # CleanSnapshotCache: only the newest snapshot's file and chunks stay cached
        self.cached_chunks &= snapshot.referenced
        self.cached_snapshots &= {snapshot.revision}
        if not local:
            self.cached_snapshots.add(snapshot.revision)

    def _layout(
        self, version: Dataset, last: _Snapshot | None
    ) -> tuple[tuple[str, ...], dict[str, _Entry], list[_Chunk]]:
        """The new revision (CPU only): unchanged files keep the previous chunks, the others
        are packed into one stream and cut; the chunk list rebuilt in path order."""
        before = {} if last is None or self.method.hash_all else last.entries
        kept, changed = _kept_and_changed(version, before)
        stream = _Stream(version, changed)
        cutter = self.method.cutter(self.method.chunking.average)
        made, digests = _cut_stream(stream, cutter)
        order, entries = _entries(version, kept, stream, made, digests)
        ids = tuple(
            made[i].id if source == "made" else last.chunks[i]  # type: ignore[union-attr]
            for source, i in order
        )
        return ids, entries, made

    def _metadata(
        self, version: Dataset, ids: tuple[str, ...], entries: dict[str, _Entry]
    ) -> tuple[dict[str, tuple[str, ...]], bytes, list[_Chunk]]:
        """``UploadSnapshot``: the three sequences cut into metadata chunks, and the
        snapshot file naming them (every file chunk is stored by now)."""
        lines = _file_lines(entries)
        made: list[_Chunk] = []
        sequences: dict[str, tuple[str, ...]] = {}
        for name in ("files", "chunks", "lengths"):
            # each sequence made when it is cut, and fed to the cutter a block at a time
            # (the cut does not depend on the blocks): its text held once beside its chunks
            if name == "files":
                text = b"".join(lines)
                lines.clear()
            elif name == "chunks":
                text = json.dumps(list(ids)).encode()
            else:
                text = json.dumps([self.stored[cid].size for cid in ids]).encode()
            cutter = self.method.cutter(self.method.metadata_chunk_size)
            blocks = (text[at : at + BLOCK] for at in range(0, len(text), BLOCK))
            chunks = [
                _Chunk(id=chunk_id(d), size=len(d), segments=(d,))
                for d in _cut(cutter, blocks)
                if d
            ]
            del text, blocks
            made.extend(chunks)
            sequences[name] = tuple(c.id for c in chunks)
        description = json.dumps(
            {
                "id": SNAPSHOT_ID,
                "revision": version.version + 1,
                "options": "",
                "tag": "",
                "file_size": version.total_bytes,
                "number_of_files": len(entries),
                **{name: list(ids) for name, ids in sequences.items()},
            },
            sort_keys=True,
        ).encode()
        return sequences, description, made

    # -- a restore -------------------------------------------------------------------------
    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        snapshot = self.snapshots[version.version]
        self._open(session)
        self._read_snapshot(session, snapshot)
        before = {} if held is None else {f.path: f for f in held.files}
        todo: list[tuple[_Entry, list[int]]] = []  # each file, and the chunk indices it needs
        for path, entry in snapshot.entries.items():
            if before.get(path) == entry.file:
                continue  # -overwrite with quick mode: same size and time, skipped
            target = directory / path
            if entry.start < 0:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(b"")
                continue
            todo.append((entry, self._needed(snapshot, entry, target)))
        self._restore_files(session, snapshot, todo, directory)
        if held is not None:
            for path in set(before) - set(snapshot.entries):
                (directory / path).unlink()

    def _spans(self, snapshot: _Snapshot, entry: _Entry) -> Iterator[tuple[int, int, int, int]]:
        """(chunk index, start in chunk, stop in chunk, offset in file) of ``entry``."""
        offset = 0
        for index in range(entry.start, entry.end + 1):
            length = self.stored[snapshot.chunks[index]].size
            start = entry.start_offset if index == entry.start else 0
            stop = entry.end_offset if index == entry.end else length
            yield index, start, stop, offset
            offset += stop - start

    def _needed(self, snapshot: _Snapshot, entry: _Entry, target: Path) -> list[int]:
        """The chunks of ``entry`` the local file cannot give (``RestoreFile`` in place):
        none if the file's hash matches, else those not wholly inside it at their offset
        with the same bytes."""
        spans = list(self._spans(snapshot, entry))
        if not target.is_file():
            return [index for index, *_ in spans]
        whole_file = hashlib.blake2b(digest_size=32)
        needed: list[int] = []
        with open(target, "rb") as handle:
            for index, start, stop, offset in spans:
                handle.seek(offset)
                data = handle.read(stop - start)
                whole_file.update(data)
                cid = snapshot.chunks[index]
                whole = start == 0 and stop == self.stored[cid].size
                if not (whole and chunk_id(data) == cid):
                    needed.append(index)
            if handle.read(1):
                whole_file.update(b"\0")  # longer than the file restored: not the same
        return [] if whole_file.hexdigest() == entry.hash else needed

    def _restore_files(
        self,
        session: Session,
        snapshot: _Snapshot,
        todo: list[tuple[_Entry, list[int]]],
        directory: Path,
    ) -> None:
        """Write the files of ``todo`` in path order, fetching the chunks they need (each
        once, in order) in windows of about ``_WINDOW`` bytes, each chunk dropped
        after its last use: memory stays near one window whatever the files' sizes."""
        feed = _ChunkFeed(
            todo,
            snapshot,
            lambda cid: self.stored[cid].size,
            lambda batch: self._fetch(session, batch),
        )
        take = feed.take
        for entry, needed in todo:
            target = directory / entry.file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            wanted = set(needed)
            temporary = target.with_name(target.name + ".storeprobe-part")
            old = open(target, "rb") if target.is_file() else None  # noqa: SIM115
            try:
                with open(temporary, "wb") as out:
                    for index, start, stop, offset in self._spans(snapshot, entry):
                        if index in wanted:
                            out.write(take(snapshot.chunks[index])[start:stop])
                        elif old is not None:
                            old.seek(offset)
                            out.write(old.read(stop - start))
                        else:
                            raise AssertionError(f"{entry.file.path} has no local copy")
            finally:
                if old is not None:
                    old.close()
            os.replace(temporary, target)


@frozen(kw_only=True)
class Duplicacy(BackupMethod):
    """Duplicacy 3.2: one stream of all files cut into chunks, one object per chunk,
    existence checks only for chunks the previous snapshot lacks."""

    name: ClassVar[str] = "duplicacy"
    tool: ClassVar[str] = "Duplicacy 3.2.4 CLI (its documented algorithm; not run here)"
    folders: ClassVar[tuple[str, ...]] = ("chunks", "snapshots", f"snapshots/{SNAPSHOT_ID}")

    #: the average chunk size (``init -c``); min = average / 4, max = average × 4
    chunking: Chunking = field(factory=Chunking)
    #: the average metadata chunk size (``backup -metadata-chunk-size``), bytes
    metadata_chunk_size: int = field(default=MiB, converter=_metadata_size)
    #: ``backup -hash``: pack every file into each backup's stream, not only the files
    #: whose size or time changed (the comparison's scripts back up this way)
    hash_all: bool = field(default=False, validator=_boolean)

    def __attrs_post_init__(self) -> None:
        _power_of_two("average chunk size", self.chunking.average)
        if self.metadata_chunk_size < 256:
            raise ConfigurationError(
                f"metadata_chunk_size must be at least 256 B, not {self.metadata_chunk_size}"
            )
        _power_of_two("metadata chunk size", self.metadata_chunk_size)

    @staticmethod
    def cutter(average: int) -> Cutter:
        """Duplicacy's chunk maker for ``average`` (min = average / 4, max = average × 4)."""
        return Cutter(average, average // 4, average * 4, seed=_KEY)

    def config(self) -> bytes:
        """The ``config`` file ``duplicacy init`` writes (its chunk parameters)."""
        average = self.chunking.average
        return json.dumps(
            {
                "compression-level": 100,
                "average-chunk-size": average,
                "max-chunk-size": average * 4,
                "min-chunk-size": average // 4,
                "chunk-seed": _KEY.hex(),
                "fixed-nesting": True,
            },
            sort_keys=True,
        ).encode()

    def replay(self) -> Replay:
        return _DuplicacyReplay(self)

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return (
                "duplicacy: read the last snapshot, pack new and changed files into one "
                "stream cut into chunks, HEAD the chunks it lacks, upload the absent ones, "
                "then the snapshot's chunks and file"
            )
        return (
            "duplicacy: read the snapshot and its chunks, download the chunks the "
            "directory's files cannot give (a HEAD and a GET each)"
        )
