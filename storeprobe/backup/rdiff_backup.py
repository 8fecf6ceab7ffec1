"""``rdiff-backup``: a mirror of the newest version plus reverse increments of older ones.

Replays rdiff-backup 2.2 (Debian's 2.2.2), ``rdiff-backup backup SRC DEST`` and
``rdiff-backup restore --at TIME DEST DIR``, onto a file system the storage holds. The
layout and every request below were read from its runs here (``find``, ``zcat`` of its
files, ``strace -f`` of a backup); the rules are in its code as Debian installs it
(``rdiff_backup/increment.py``: the ``.diff``, ``.snapshot``, ``.missing`` and ``.dir``
increments; ``backup.py``; ``restore.py``, ``set_relevant_incs``: which increments a
restore reads; ``Rdiff.py``, ``_find_blocksize``; ``rpath.py``: increments written
through ``gzip.GzipFile``, level 9; ``rdiffbackup/locations/fs_abilities.py``: the file
system check; ``rdiffbackup/meta/stdattr.py``: the metadata records):

- the destination holds the newest version's files at their paths (the *mirror*) and
  ``rdiff-backup-data/``; a backup names what it writes by the time of the backup before
  it (here a fixed clock: backup ``k`` at 2023-11-15T10:13:20Z + ``k`` days);
- a changed file (a different size or mtime; mtime here is the generation) is read from
  the mirror for its signature and again as the basis of the patch the source sends;
  the patched new file is written whole into ``rdiff-backup.tmp.<n>`` beside it and read
  back for its signature; the old file is read a third time for the *reverse* delta,
  stored gzipped as ``increments/<path>.<time>.diff.gz`` (librsync's delta of the old
  bytes against the new file's signature, block length as ``Rdiff._find_blocksize``;
  gzip as Python's ``GzipFile`` writes it, level 9 with the file's name in the header:
  the content is incompressible, so gzip stores it, the delta's size plus about 5 bytes
  per 16 KiB and the header; a 100 000-byte copy gzips to 100 086 bytes, in the tool's
  files and here);
  then the temporary file is renamed over the mirror's;
- a new file is written through a temporary file and renamed into place, and marked
  ``increments/<path>.<time>.missing`` (empty); a deleted file is read, stored whole and
  gzipped as ``increments/<path>.<time>.snapshot.gz`` and deleted from the mirror; every
  directory above a changed, new or deleted file gets an empty ``<dir>.<time>.dir``
  (``increments.<time>.dir`` for the top), a new directory ``<dir>.<time>.missing``;
- per session: ``mirror_metadata.<now>.snapshot.gz`` (a gzipped record of every file:
  type, size, SHA-1, mtime, owner, permissions), the previous one replaced by
  ``mirror_metadata.<time>.diff.gz`` (the records that changed), a new
  ``current_mirror.<now>.data`` (``PID n``) replacing the old one,
  ``file_statistics.<now>.data.gz``, ``session_statistics.<now>.data``, an empty
  ``error_log``, ``access_control_lists`` and ``extended_attributes`` snapshot; the
  first session also ``chars_to_quote``, ``special_escapes`` and ``backup.log``; each
  later one reads ``chars_to_quote``, ``special_escapes``, the ACL and EA snapshots and
  (twice) the previous mirror metadata first;
- each session checks the file system's abilities in ``rdiff-backup-data/
  rdiff-backup.tmp.0``: about a dozen empty files written, one hard link, all deleted.

A restore of version ``k`` first reads ``chars_to_quote``, ``special_escapes``, the
newest mirror metadata and the ACL and EA snapshots of ``k`` (as ``strace`` shows the
tool doing); the newest version is then every mirror file, read whole. An older one
also reads the metadata diffs back to ``k`` and lists the increments' directories; per
file it reads every ``.diff.gz`` from the newest back to ``k`` and, of the mirror's
copy, only the ranges the newest delta copies (librsync's patch reads its basis through
a copy callback, at the delta's COPY commands: one ranged read per run of copied
blocks), and applies them newest first (:func:`storeprobe.delta.patch`); where a
``.snapshot.gz`` lies on the way back (the file was deleted and came back), that copy is
the base and nothing newer is read (``set_relevant_incs``). Restores write every file of
the version (rdiff-backup restores a whole tree; it skips nothing the directory holds).
Every read lands in a file beside the file restored as its window arrives (the diffs
gzipped as stored) and the patches stream from those files, so a restore holds one
window of reads whatever the chain's length or the files' sizes.

Left out: rdiff-backup's appends to ``backup.log`` after the first session (a line of
about 80 bytes each), its ``chmod``, ``utime`` and ``fsync`` calls and per-file
``lstat``\\ s of the mirror (metadata requests with no kind here: about two stats per
file, the metadata file answers the rest), its hashing of the source and reads of the
source disk, the mkdir and rmdir of ``rdiff-backup.tmp.0`` (made once, like every
folder); the delta the source sends the mirror side (a local or ssh pipe, not the
storage).

Why one module (~700 lines, 60 of them the rules above): a backup method is one module
(``docs/architecture.md``), one tool's request pattern read top to bottom against
rdiff-backup's code cited here; its helpers (increments, metadata records, statistics
files) serve rdiff-backup alone.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import io
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import ClassVar, Literal

from attrs import define, field, frozen

from storeprobe import delta
from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.objects import Blob, Read, Spooled
from storeprobe.backup.session import WINDOW_BUDGET, Session, windows
from storeprobe.dataset import Dataset, File
from storeprobe.dataset import content as file_content
from storeprobe.manifest import Piece
from storeprobe.restore import write_fetched, write_files
from storeprobe.staging import Staging

__all__ = ["RdiffBackup"]

_DATA = "rdiff-backup-data"
_CLOCK = 1_700_043_200  # backup 0 at 2023-11-15T10:13:20Z, backup k k days later
_DAY = 86_400
_MTIME = 1_700_000_000  # a file's mtime: this + its generation in days
_PID = b"PID 12345\n"
#: the empty files rdiff-backup's file system check writes (2.2, ``fs_abilities.py``)
_PROBES = (
    "5-_ a.snapshot.gz",
    "unicode-check",
    "quoting-check",
    "A",
    "foo",
    "dir_inc_check",
    "regfile",
    "high_perms_file",
    "high_perms_dir",
    "symlinked_file1",
    "foo.",
    "hardlinked_file1",
)
_LOG = b"NOTE: Starting mirror from source path source to destination path target\n"
Increment = Literal["diff", "snapshot", "missing"]


def _stamp(version: int) -> str:
    moment = datetime.datetime.fromtimestamp(_CLOCK + version * _DAY, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _gzip(name: str, data: bytes) -> bytes:
    """``data`` gzipped as rdiff-backup writes ``name`` (Python's GzipFile, level 9)."""
    out = io.BytesIO()
    with gzip.GzipFile(name, "wb", 9, out, mtime=0) as handle:
        handle.write(data)
    return out.getvalue()


_WIDTHS = (1, 2, 4, 8)


def _copies(stream: gzip.GzipFile) -> list[tuple[int, int]]:
    """The ``(start, length)`` of each COPY command of a librsync delta read from
    ``stream`` (a gzipped increment opened with :func:`gzip.open`), runs of adjacent
    copies joined: the ranges of the basis a patch reads (librsync's ``prototab.c``
    opcodes: 0x01–0x40 literal of that length, 0x41–0x44 literal with a 1/2/4/8-byte
    length, 0x45–0x54 copy with 1/2/4/8-byte start and length, 0x00 the end; numbers
    big-endian). Literal bytes are read past :data:`_PIECE` at a time, never kept."""

    def number(width: int) -> int:
        raw = stream.read(width)
        if len(raw) != width:
            raise OSError("a librsync delta ends inside a command")
        return int.from_bytes(raw, "big")

    def skip(count: int) -> None:
        while count > 0:
            got = len(stream.read(min(count, _PIECE)))
            if not got:
                raise OSError("a librsync delta ends inside a literal")
            count -= got

    number(4)  # the magic
    found: list[tuple[int, int]] = []
    while op_byte := stream.read(1):
        op = op_byte[0]
        if op == 0:
            break
        if op <= 0x40:
            skip(op)
        elif op <= 0x44:
            skip(number(_WIDTHS[op - 0x41]))
        elif op <= 0x54:
            start = number(_WIDTHS[(op - 0x45) // 4])
            length = number(_WIDTHS[(op - 0x45) % 4])
            if found and found[-1][0] + found[-1][1] == start:
                found[-1] = (found[-1][0], found[-1][1] + length)
            else:
                found.append((start, length))
        else:
            raise OSError(f"not a librsync delta command: 0x{op:02x}")
    return found


def _folders(paths: list[str]) -> list[str]:
    """Every directory of ``paths``, the top ``"."`` first, parents before children."""
    found: dict[str, None] = {".": None}
    for path in paths:
        parents: list[str] = []
        folder = posixpath.dirname(path)
        while folder and folder not in found:
            parents.append(folder)
            folder = posixpath.dirname(folder)
        found.update((parent, None) for parent in reversed(parents))
    return list(found)


def _record(path: str, file: File | None, digest: str = "") -> str:
    """One entry of rdiff-backup's mirror metadata (``metadata.py``'s record format)."""
    if file is None:
        return (
            f"File {path}\n  Type dir\n  ModTime {_MTIME}\n  Uid 0\n  Uname root\n"
            "  Gid 0\n  Gname root\n  Permissions 493\n"
        )
    return (
        f"File {path}\n  Type reg\n  Size {file.size}\n  SHA1Digest {digest}\n"
        f"  ModTime {_MTIME + file.generation * _DAY}\n  Uid 0\n  Uname root\n"
        "  Gid 0\n  Gname root\n  Permissions 420\n"
    )


@define
class _RdiffReplay(Replay):
    #: the version the mirror holds (-1: none yet)
    latest: int = -1
    #: per backup's version: the increments it wrote, path → (kind, key)
    increments: dict[int, dict[str, tuple[Increment, str]]] = field(factory=dict)
    #: per version: the name of its mirror metadata (a snapshot, then a diff)
    metadata: dict[int, str] = field(factory=dict)
    digests: dict[File, str] = field(factory=dict)
    temporaries: int = 0

    # -- names -------------------------------------------------------------------------
    def _data(self, session: Session, *parts: str) -> str:
        return session.key(_DATA, *parts)

    def _increment(self, session: Session, path: str, stamp: str, suffix: str) -> str:
        if path == ".":
            return self._data(session, f"increments.{stamp}.{suffix}")
        return self._data(session, "increments", f"{path}.{stamp}.{suffix}")

    def _temporary(self, session: Session, path: str) -> str:
        self.temporaries += 1
        folder = posixpath.dirname(path)
        return session.key(folder, f"rdiff-backup.tmp.{self.temporaries}")

    def _digest(self, version: Dataset, file: File) -> str:
        if file not in self.digests:
            digest = hashlib.sha1(usedforsecurity=False)
            step = 8 << 20
            for start in range(0, file.size, step):
                digest.update(version.payload(file, start, min(file.size, start + step)))
            self.digests[file] = digest.hexdigest()
        return self.digests[file]

    def _metadata(self, version: Dataset) -> bytes:
        paths = [file.path for file in version.files]
        records = [_record(folder, None) for folder in _folders(paths)]
        records += [_record(f.path, f, self._digest(version, f)) for f in version.files]
        return "".join(records).encode()

    # -- backup --------------------------------------------------------------------------
    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        now = _stamp(version.version)
        then = None if previous is None else _stamp(previous.version)
        if then is not None:
            session.get(
                [
                    Read(key=self._data(session, "chars_to_quote")),
                    Read(key=self._data(session, "special_escapes")),
                    Read(key=self.metadata[self.latest]),
                    Read(key=self.metadata[self.latest]),
                    Read(key=self._data(session, f"access_control_lists.{then}.snapshot")),
                    Read(key=self._data(session, f"extended_attributes.{then}.snapshot")),
                ]
            )
        self._check_abilities(session)
        old = {} if previous is None else {file.path: file for file in previous.files}
        new = {file.path: file for file in version.files}
        changed = [f for f in version.files if f.path in old and old[f.path] != f]
        added = [f for f in version.files if f.path not in old]
        deleted = [] if previous is None else [f for f in previous.files if f.path not in new]
        written: dict[str, tuple[Increment, str]] = {}
        if changed and then is not None and previous is not None:
            written.update(self._changed(session, version, previous, changed, then))
        self._added(session, version, added, then, written)
        if deleted and then is not None and previous is not None:
            written.update(self._deleted(session, previous, deleted, then))
        if then is not None:
            markers = self._markers(session, old, new, [*written], then)
            session.put([Blob.of_bytes(key, b"") for key in markers])
        self.increments[version.version] = written
        self._session_files(session, version, previous, written, now, then)
        self.latest = version.version

    def _check_abilities(self, session: Session) -> None:
        probes = [self._data(session, "rdiff-backup.tmp.0", name) for name in _PROBES]
        session.put([Blob.of_bytes(key, b"") for key in probes])
        linked = self._data(session, "rdiff-backup.tmp.0", "hl", "hardlinked_file2")
        session.link([(linked, probes[-1])])
        session.delete([*probes, linked])

    def _changed(
        self,
        session: Session,
        version: Dataset,
        previous: Dataset,
        changed: list[File],
        then: str,
    ) -> dict[str, tuple[Increment, str]]:
        """The changed files, a window's worth at a time (a file larger than a window
        alone): the reads whose bytes the tool uses are dropped as they arrive, and the
        signature and reverse delta are computed over the versions' own bytes (what the
        mirror and the temporary file hold), 1 MiB at a time, never a whole file; what
        is kept is each reverse delta, gzipped, until its window is written."""
        written: dict[str, tuple[Increment, str]] = {}
        old = {file.path: file for file in previous.files}
        for run in windows([file.size for file in changed], session.budget):
            batch = [changed[i] for i in run]
            mirror = [Read(key=session.key(file.path)) for file in batch]
            session.read_through(mirror)  # the signature of the mirror's file, for the source
            session.read_through(mirror)  # the basis of the patch the source sends back
            temporaries = [self._temporary(session, file.path) for file in batch]
            session.put(
                [
                    Blob(key=key, segments=(Piece(version, file, 0, file.size),))
                    for key, file in zip(temporaries, batch, strict=True)
                ]
            )
            session.read_through([Read(key=key) for key in temporaries])  # its signature
            session.read_through(mirror)  # the old bytes once more, for the reverse delta
            with ExitStack() as spools:
                blobs: list[Blob] = []
                for file in batch:
                    signature = delta.signature(
                        _pieces(version, file), delta.SignatureArgs.rdiff_backup(file.size)
                    )
                    key = self._increment(session, file.path, then, "diff.gz")
                    reverse = partial(
                        delta.write_delta, signature, _pieces(previous, old[file.path])
                    )
                    size = max(file.size, old[file.path].size)
                    blobs.append(_gzipped(key, reverse, size, spools))
                    written[file.path] = ("diff", key)
                session.put(blobs)
                del blobs
            session.rename(
                [(session.key(f.path), key) for f, key in zip(batch, temporaries, strict=True)]
            )
        return written

    def _added(
        self,
        session: Session,
        version: Dataset,
        added: list[File],
        then: str | None,
        written: dict[str, tuple[Increment, str]],
    ) -> None:
        temporaries = [self._temporary(session, file.path) for file in added]
        session.put(
            [
                Blob(key=key, segments=(Piece(version, file, 0, file.size),))
                for key, file in zip(temporaries, added, strict=True)
            ]
        )
        session.rename(
            [(session.key(file.path), key) for file, key in zip(added, temporaries, strict=True)]
        )
        if then is not None:
            markers = {f.path: self._increment(session, f.path, then, "missing") for f in added}
            session.put([Blob.of_bytes(key, b"") for key in markers.values()])
            written.update((path, ("missing", key)) for path, key in markers.items())

    def _deleted(
        self, session: Session, previous: Dataset, deleted: list[File], then: str
    ) -> dict[str, tuple[Increment, str]]:
        """Deleted files, a window's worth at a time: each read (its bytes dropped), stored
        gzipped (gzip of the previous version's bytes, 1 MiB at a time), then deleted."""
        found: dict[str, tuple[Increment, str]] = {}
        for run in windows([file.size for file in deleted], session.budget):
            batch = [deleted[i] for i in run]
            mirror = [session.key(file.path) for file in batch]
            session.read_through([Read(key=key) for key in mirror])
            keys = [self._increment(session, file.path, then, "snapshot.gz") for file in batch]
            with ExitStack() as spools:
                blobs = [
                    _gzipped(key, partial(_write_all, _pieces(previous, file)), file.size, spools)
                    for key, file in zip(keys, batch, strict=True)
                ]
                session.put(blobs)
                del blobs
            session.delete(mirror)
            found.update((f.path, ("snapshot", key)) for f, key in zip(batch, keys, strict=True))
        return found

    def _markers(
        self,
        session: Session,
        old: dict[str, File],
        new: dict[str, File],
        touched: list[str],
        then: str,
    ) -> list[str]:
        """The ``.dir`` (or, for a new directory, ``.missing``) marker of every directory
        above a changed, new or deleted file."""
        if not touched:
            return []
        before = set(_folders(list(old)))
        markers: list[str] = []
        for folder in _folders(touched):
            suffix = "dir" if folder in before else "missing"
            markers.append(self._increment(session, folder, then, suffix))
        return markers

    def _session_files(
        self,
        session: Session,
        version: Dataset,
        previous: Dataset | None,
        written: dict[str, tuple[Increment, str]],
        now: str,
        then: str | None,
    ) -> None:
        snapshot = self._data(session, f"mirror_metadata.{now}.snapshot.gz")
        statistics = self._data(session, f"file_statistics.{now}.data.gz")
        sizes = dict.fromkeys(_folders([f.path for f in version.files]), "NA")
        blobs = [
            Blob.of_bytes(self._data(session, f"current_mirror.{now}.data"), _PID),
            Blob.of_bytes(statistics, _gzip(statistics, _file_statistics(version, written, sizes))),
            Blob.of_bytes(snapshot, _gzip(snapshot, self._metadata(version))),
            Blob.of_bytes(self._data(session, f"access_control_lists.{now}.snapshot"), b""),
            Blob.of_bytes(self._data(session, f"extended_attributes.{now}.snapshot"), b""),
        ]
        if then is None:
            blobs += [
                Blob.of_bytes(self._data(session, "chars_to_quote"), b""),
                Blob.of_bytes(self._data(session, "special_escapes"), b""),
                Blob.of_bytes(self._data(session, "backup.log"), _LOG),
            ]
        session.put(blobs)
        if then is not None and previous is not None:
            diff = self._data(session, f"mirror_metadata.{then}.diff.gz")
            session.put([Blob.of_bytes(diff, _gzip(diff, self._metadata_diff(previous, written)))])
            session.delete(
                [
                    self.metadata[previous.version],
                    self._data(session, f"current_mirror.{then}.data"),
                ]
            )
            self.metadata[previous.version] = diff
        self.metadata[version.version] = snapshot
        stats = _session_statistics(version, written).encode()
        session.put(
            [
                Blob.of_bytes(self._data(session, f"session_statistics.{now}.data"), stats),
                Blob.of_bytes(self._data(session, f"error_log.{now}.data"), b""),
            ]
        )

    def _metadata_diff(self, previous: Dataset, written: dict[str, tuple[Increment, str]]) -> bytes:
        files = {file.path: file for file in previous.files}
        records: list[str] = []
        for path, (kind, _) in sorted(written.items()):
            if kind == "missing":
                records.append(f"File {path}\n  Type None\n")
            else:
                records.append(_record(path, files[path], self._digest(previous, files[path])))
        return "".join(records).encode()

    # -- restore -------------------------------------------------------------------------
    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        k = version.version
        stamp = _stamp(k)
        session.get(
            [
                Read(key=self._data(session, "chars_to_quote")),
                Read(key=self._data(session, "special_escapes")),
                Read(key=self.metadata[self.latest]),
                Read(key=self._data(session, f"access_control_lists.{stamp}.snapshot")),
                Read(key=self._data(session, f"extended_attributes.{stamp}.snapshot")),
            ]
        )
        if k < self.latest:
            session.get([Read(key=self.metadata[j]) for j in range(self.latest - 1, k - 1, -1)])
            folders = _folders([file.path for file in version.files])
            session.listing(
                [
                    self._data(session, "increments", f)
                    if f != "."
                    else self._data(session, "increments")
                    for f in folders
                ]
            )
        bases: dict[str, tuple[str, bool]] = {}  # path → (key, gzipped)
        chains: dict[str, list[str]] = {}
        for file in version.files:
            base: tuple[str, bool] | None = (session.key(file.path), False)
            diffs: list[str] = []
            for j in range(self.latest, k, -1):
                found = self.increments.get(j, {}).get(file.path)
                if found is None:
                    continue
                kind, key = found
                if kind == "diff":
                    diffs.append(key)
                elif kind == "snapshot":
                    base, diffs = (key, True), []
                else:
                    base, diffs = None, []
            if base is None:
                raise OSError(f"no increment of {file.path} reaches version {k}")
            bases[file.path] = base
            chains[file.path] = diffs
        for run in windows([file.size for file in version.files], session.budget):
            batch = [version.files[i].path for i in run]
            _restore_batch(session, directory, batch, bases, chains)
        present = {file.path for file in version.files}
        gone = [] if held is None else [f.path for f in held.files if f.path not in present]
        write_files(directory, {}, gone)


def _restore_batch(
    session: Session,
    directory: Path,
    paths: list[str],
    bases: dict[str, tuple[str, bool]],
    chains: dict[str, list[str]],
) -> None:
    """Restore ``paths`` (about a window's bytes of files): their diffs, whole bases and
    copied ranges read as the tool reads them (the diffs, then whole files, then ranges),
    each written to a file beside its destination as its window arrives and let go (a
    whole object or a range larger than :attr:`Session.stage_above` lands in a staging
    file during its GET, on the clients that can); the patches then stream from file to
    file, the deltas unzipped :data:`_PIECE` at a time (librsync reads its basis at the
    offsets the delta copies), so memory holds a window of reads, never a chain of
    deltas or a whole file."""
    scratch = {path: _scratch(directory / path) for path in paths}
    diffs = {
        path: [_beside(scratch[path], f".{n}.diff.gz") for n in range(len(chains[path]))]
        for path in paths
    }
    _land(
        session,
        [Read(key=key) for path in paths for key in chains[path]],
        [(diff, None) for path in paths for diff in diffs[path]],
    )
    whole = _land_whole(session, scratch, paths, bases, chains)
    ranged = _land_ranged(session, scratch, diffs, [p for p in paths if p not in whole], bases)
    for path in paths:
        for diff in diffs[path][1:] if path in ranged else diffs[path]:
            patched = _beside(scratch[path], ".next")
            _patch_file(scratch[path], diff, patched)
            os.replace(patched, scratch[path])
        for diff in diffs[path]:
            diff.unlink()
        os.replace(scratch[path], directory / path)


def _land_whole(
    session: Session,
    scratch: dict[str, Path],
    paths: list[str],
    bases: dict[str, tuple[str, bool]],
    chains: dict[str, list[str]],
) -> set[str]:
    """Read the files restored from a whole base (a snapshot, or a mirror file with no
    delta above it) into their scratch files, a snapshot.gz unzipped :data:`_PIECE` at a
    time; the paths read."""
    whole = [path for path in paths if bases[path][1] or not chains[path]]
    landed = {
        path: _beside(scratch[path], ".gz") if bases[path][1] else scratch[path] for path in whole
    }
    _land(session, [Read(key=bases[p][0]) for p in whole], [(landed[p], None) for p in whole])
    for path in whole:
        if bases[path][1]:  # a snapshot.gz: unzipped _PIECE at a time
            with gzip.open(landed[path], "rb") as source, open(scratch[path], "wb") as out:
                shutil.copyfileobj(source, out, _PIECE)
            landed[path].unlink()
    return set(whole)


def _land_ranged(
    session: Session,
    scratch: dict[str, Path],
    diffs: dict[str, list[Path]],
    ranged: list[str],
    bases: dict[str, tuple[str, bool]],
) -> set[str]:
    """Patch each mirror file under a delta from the ranges the delta copies, read into a
    sparse basis file at their offsets (the rest of the basis is never read), into its
    scratch file; the paths patched."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for path in ranged:
        with gzip.open(diffs[path][0], "rb") as stream:
            spans[path] = _copies(stream)
        _beside(scratch[path], ".basis").write_bytes(b"")
    _land(
        session,
        [
            Read(key=bases[path][0], start=start, stop=start + length)
            for path in ranged
            for start, length in spans[path]
        ],
        [(_beside(scratch[path], ".basis"), start) for path in ranged for start, _ in spans[path]],
        ranges=True,
    )
    for path in ranged:
        basis = _beside(scratch[path], ".basis")
        _patch_file(basis, diffs[path][0], scratch[path])
        basis.unlink()
    return set(ranged)


def _land(
    session: Session,
    reads: list[Read],
    places: list[tuple[Path, int | None]],
    *,
    ranges: bool = False,
) -> None:
    """Each read's bytes written where its place says as its window arrives: ``(file,
    None)`` a new file of them, ``(file, offset)`` into an existing file at ``offset``;
    each let go once written, so memory holds one window of reads (a staged one not even
    that)."""
    at = iter(places)
    for bodies in session.get_staged_windows(reads, ranges=ranges):
        while bodies:
            body = bodies.pop(0)
            path, offset = next(at)
            if offset is None:
                write_fetched(path, body)
            else:
                _write_at(path, offset, body)
            del body  # not held while the next window is read


def _write_at(path: Path, offset: int, body: bytes | Staging) -> None:
    """``body`` written into the existing file ``path`` at ``offset`` (a staging file
    copied 1 MiB at a time, then closed)."""
    with open(path, "r+b") as out:
        if isinstance(body, bytes):
            out.seek(offset)
            out.write(body)
            return
        try:
            for start, chunk in body.chunks():
                out.seek(offset + start)
                out.write(chunk)
        finally:
            body.close()


#: a gzipped delta or snapshot of a file up to this size is held in memory; a larger
#: one is spooled to a temporary file in ``TMPDIR`` and read from it part by part
_HELD = 8 << 20


def _gzipped(
    key: str,
    write: Callable[[Callable[[bytes | memoryview], object]], object],
    size: int,
    spools: ExitStack,
) -> Blob:
    """The object ``key``: what ``write`` writes, gzipped at level 9 as rdiff-backup
    does (no name, mtime 0). Held in memory when the file it stands for (``size``
    bytes) is at most :data:`_HELD`; else written to a temporary file, which ``spools``
    closes (and the system deletes) once the object is written, so a backup holds no
    whole delta of a large file."""
    if size <= _HELD:
        held = io.BytesIO()
        with gzip.GzipFile(key, "wb", 9, held, mtime=0) as handle:
            write(handle.write)
        return Blob.of_bytes(key, held.getvalue())
    out = spools.enter_context(tempfile.TemporaryFile(dir=Staging.check_room(size)))  # noqa: SIM115 - closed by spools
    with gzip.GzipFile(key, "wb", 9, out, mtime=0) as handle:
        write(handle.write)
    out.flush()
    return Blob(key=key, segments=(Spooled(fd=out.fileno(), length=out.tell()),))


def _write_all(pieces: Iterator[memoryview], write: Callable[[bytes | memoryview], object]) -> None:
    for piece in pieces:
        write(piece)


#: bytes of a snapshot unzipped into a restore at a time
_PIECE = 8 << 20


def _pieces(version: Dataset, file: File) -> Iterator[memoryview]:
    """The bytes of ``file`` in ``version``, 1 MiB at a time in one reused buffer (each
    piece read before the next is drawn: librsync's jobs, gzip's ``write``)."""
    return file_content(version, file)


def _scratch(destination: Path) -> Path:
    """The temporary name a restored file is built under, beside ``destination``."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    return destination.with_name(destination.name + ".storeprobe-part")


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _patch_file(basis: Path, diff: Path, into: Path) -> None:
    """The gzipped delta in ``diff`` applied to the file ``basis``, written to ``into`` as
    it comes: the delta unzipped :data:`_DELTA_PIECE` at a time, its COPY commands read
    from ``basis`` at their offsets."""
    with (
        gzip.open(diff, "rb") as stream,
        open(basis, "rb") as source,
        open(into, "wb") as out,
    ):
        delta.write_patch(source, iter(lambda: stream.read(_DELTA_PIECE), b""), out.write)


#: bytes of a delta unzipped and handed to librsync at a time
_DELTA_PIECE = 1 << 20


def _file_statistics(
    version: Dataset, written: dict[str, tuple[Increment, str]], folders: dict[str, str]
) -> bytes:
    lines = [
        "# Format of each line in file statistics file:",
        "# Filename Changed SourceSize MirrorSize IncrementSize",
    ]
    lines += [f"{folder} 0 0 0 NA" for folder in folders]
    for file in version.files:
        changed = 1 if file.path in written else 0
        lines.append(f"{file.path} {changed} {file.size} {file.size} NA")
    return ("\n".join(lines) + "\n").encode()


def _session_statistics(version: Dataset, written: dict[str, tuple[Increment, str]]) -> str:
    size = version.total_bytes
    count = len(version.files)
    kinds = [kind for kind, _ in written.values()]
    return (
        f"StartTime 1700000000.00 (Tue Nov 14 22:13:20 2023)\n"
        f"EndTime 1700000001.00 (Tue Nov 14 22:13:21 2023)\n"
        f"ElapsedTime 1.00 (1 second)\n"
        f"SourceFiles {count}\nSourceFileSize {size} ({size} bytes)\n"
        f"MirrorFiles {count}\nMirrorFileSize {size} ({size} bytes)\n"
        f"NewFiles {kinds.count('missing')}\nNewFileSize 0 (0 bytes)\n"
        f"DeletedFiles {kinds.count('snapshot')}\nDeletedFileSize 0 (0 bytes)\n"
        f"ChangedFiles {kinds.count('diff')}\nChangedSourceSize 0 (0 bytes)\n"
        f"ChangedMirrorSize 0 (0 bytes)\nIncrementFiles {len(kinds)}\n"
        f"IncrementFileSize 0 (0 bytes)\nTotalDestinationSizeChange 0 (0 bytes)\nErrors 0\n"
    )


@frozen(kw_only=True)
class RdiffBackup(BackupMethod):
    """rdiff-backup 2.2: a mirror of the newest version, reverse increments of the rest."""

    name: ClassVar[str] = "rdiff-backup"
    tool: ClassVar[str] = "rdiff-backup 2.2"
    protocols: ClassVar[tuple[str, ...]] = ("file", "local", "sftp", "ssh")
    folders: ClassVar[tuple[str, ...]] = (_DATA, f"{_DATA}/increments")
    ranged_reads: ClassVar[bool] = True

    def replay(self) -> Replay:
        return _RdiffReplay()

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return (
                "rdiff-backup: update the mirror, store reverse deltas of changed files "
                "and copies of deleted ones, write the session's metadata"
            )
        return "rdiff-backup: read the mirror and every increment back to the version"

    def restore_scratch(self, versions: Sequence[Dataset]) -> int:
        """A restore lands a window's files (about :data:`WINDOW_BUDGET`, or one larger
        file) with every reverse delta of their chains beside them (at most one per
        version after it), then a patched copy (``.next``) and, for a ranged basis, the
        basis: at most ``max(largest file, window) × (versions + 1)`` bytes beside the
        version."""
        biggest = max((f.size for version in versions for f in version.files), default=0)
        return max(biggest, WINDOW_BUDGET) * (len(versions) + 1)
