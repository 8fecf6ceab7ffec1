"""``files``: a replay of ``rclone sync SRC remote:current --backup-dir remote:backup/v<k>``.

Each version is synced whole-file onto the target as rclone 1.6x–1.75 (``rclone
version``: v1.75.2 here) does with its defaults (``--transfers 4 --checkers 8``, compare
by size and modification time), keeping every file it replaces or deletes: the current
tree under ``current/<path>``, and what backup ``k`` replaced or deleted under
``backup/v<k>/<path>`` (``k`` numbers the versions from 0; backup 0 moves nothing). Rules,
each seen in the request log of real rclone against an S3 server
(``tests/test_backup_files.py``) and, where said, documented by rclone
(``docs/content/s3.md`` and ``docs/content/docs.md`` of ``rclone/rclone``):

- **Roots**: one HEAD of the destination root and one of the backup root (rclone asks
  whether each names a file).
- **Listing** (docs.md, ``--fast-list``): one LIST per directory of ``current/``
  (ListObjectsV2 with ``delimiter=/``, paged at 1000 entries), level by level;
  ``fast_list=True``: one recursive listing paged at 1000 keys, where the storage can
  list recursively (S3, GCS, Azure: rclone's ListR; on file systems rclone ignores the
  flag and lists per directory, and so does this replay).
- **Compare** (s3.md, "Avoiding HEAD requests to read the modification time"): a file
  whose size equals the stored object's needs the object's modification time, kept in
  metadata (``X-Amz-Meta-Mtime``) that listings do not return: one HEAD each on object
  stores. ``compare="checksum"`` (``--checksum``) compares size and MD5 instead (the
  listing's ETag), with no HEAD; objects uploaded in parts keep their MD5 in metadata
  and are HEADed. On file systems the listing carries modification times: no HEAD.
- **Moves** (``--backup-dir``): every file the version changed or deleted is moved into
  ``backup/v<k>/``: on object stores a HEAD of the object (its metadata, read once: not
  again if the compare read it), a HEAD of the backup key (absent), a server-side COPY,
  a HEAD of the copy, and a DELETE of the original. On file systems rclone renames (one
  request): the replay sends HEAD of the backup key, COPY (a hard link) and DELETE.
- **Uploads**: one PUT per new or changed file, then one HEAD of the new object on
  object stores (s3.md: rclone HEADs what it uploads to check it; ``no_head=True`` is
  ``--s3-no-head``). A file above ``upload_cutoff`` (``--s3-upload-cutoff``, 200 MiB) is
  a multipart upload on object stores (s3.md): create, parts of ``part_size``
  (``--s3-chunk-size``, 5 MiB, grown to stay within 10 000 parts), ``upload_concurrency``
  of them at once (``--s3-upload-concurrency``, 4), complete; such files go one after
  the other here (rclone runs up to ``--transfers`` of them at once).

A restore of version ``k`` replays what its rclone user runs: ``rclone copy
remote:current DIR``, then ``rclone copy remote:backup/v<n> DIR`` for every later backup
``n`` from the newest down to ``k + 1`` (each older file wins). Each copy: one HEAD of its
root, its listing as above, a HEAD per object whose size equals the local file's (its
modification time; object stores, ``compare="modtime"``), a HEAD per object uploaded in
parts that it downloads (its MD5 is in metadata, and rclone checks the download against
it; a server-side copy's ETag is an MD5 again, so copies in backup dirs need none), and
one GET per object that differs from the local file (absent, another size or another
modification time). rclone keeps no record of which files a version lacked, so files
added after version ``k`` are left in ``DIR`` by rclone; the replay deletes them
locally (no request) so that the restore is exactly the version, as the scenario checks.

What it leaves out: the bucket-creation check rclone makes once per backup that moves
files (a PUT of the bucket, answered "already yours"); multipart server-side copies of
objects above ``--s3-copy-cutoff`` (4.6 GiB: one COPY here); reading and hashing the
source files; the local disk's own work (stat, rename, writes).
rclone writes no manifest, and neither does this replay.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar, Literal

import attrs
from attrs import define, field, frozen

from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.objects import Blob, Read
from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset, File
from storeprobe.errors import ConfigurationError
from storeprobe.manifest import Piece
from storeprobe.restore import in_place, write_all
from storeprobe.units import GiB, MiB, parse_size

__all__ = ["OBJECT_STORES", "PART_SIZE", "UPLOAD_CUTOFF", "Files"]

#: rclone's ``--s3-upload-cutoff``: larger files are multipart uploads (MD5 in metadata)
UPLOAD_CUTOFF = 200 * MiB
#: rclone's ``--s3-chunk-size``: the parts of a multipart upload (S3's smallest part)
PART_SIZE = 5 * MiB
#: S3's most parts in one upload: rclone grows the part size to stay below it
_MAX_PARTS = 10_000
#: protocols whose storage lists recursively (rclone's ListR) and keeps modification
#: times in object metadata: object stores; every other protocol is a file system
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
_CURRENT = "current"
_BACKUP = "backup"

Compare = Literal["modtime", "checksum"]


def _parents(path: str) -> Iterable[str]:
    """Every folder above ``path``, relative to its root: ``a/b/c`` gives ``a/b``, ``a``, ``""``."""
    folder = posixpath.dirname(path)
    while folder:
        yield folder
        folder = posixpath.dirname(folder)
    yield ""


@define
class _Root:
    """What one root (``current`` or ``backup/v<k>``) holds: path → the file stored there."""

    name: str
    files: dict[str, File] = field(factory=dict)
    #: folders a file system keeps once made (object stores have none)
    made: set[str] = field(factory=lambda: {""})
    #: paths uploaded in parts: their ETag is no MD5 (a server-side copy's is again)
    parted: set[str] = field(factory=set)

    def folders(self, object_store: bool) -> set[str]:
        if not object_store:
            return set(self.made)
        found = {""}
        for path in self.files:
            found.update(_parents(path))
        return found

    def add(self, file: File, *, parted: bool = False) -> None:
        self.files[file.path] = file
        self.made.update(_parents(file.path))
        if parted:
            self.parted.add(file.path)
        else:
            self.parted.discard(file.path)


@define
class _FilesReplay(Replay):
    method: Files
    current: _Root = field(factory=lambda: _Root(_CURRENT))
    #: backup number → what it moved aside
    backups: dict[int, _Root] = field(factory=dict)
    #: the number of the last backup made (-1: none yet)
    last: int = -1

    # -- shared by backups and restores ---------------------------------------------------
    def _object_store(self, session: Session) -> bool:
        return session.target.protocol in OBJECT_STORES

    def _list(self, session: Session, root: _Root) -> None:
        """The listing of one root, checked against what the replay stored there."""
        store = self._object_store(session)
        if self.method.fast_list and store:
            (found,) = session.listing([session.key(root.name)])
            self._check(root.name, max(found, 0), len(root.files))
            return
        # each folder's subfolders and file count, found once (not once per folder listed)
        below: dict[str, list[str]] = {}
        for folder in root.folders(store):
            if folder:
                below.setdefault(posixpath.dirname(folder), []).append(folder)
        files = Counter(posixpath.dirname(p) for p in root.files)
        level = [""]
        while level:
            keys = [
                session.key(root.name, folder) if folder else session.key(root.name)
                for folder in level
            ]
            counts = session.listing(keys, one_level=True)
            deeper: list[str] = []
            for folder, found in zip(level, counts, strict=True):
                inside = sorted(below.get(folder, ()))
                expected = files[folder] + len(inside)
                self._check(posixpath.join(root.name, folder), max(found, 0), expected)
                deeper.extend(inside)
            level = deeper

    @staticmethod
    def _check(where: str, found: int, expected: int) -> None:
        if found != expected:
            raise OSError(
                f"the listing of {where}/ shows {found} entries where the replay stored {expected}"
            )

    def _needs_head(self, session: Session, root: _Root, path: str, other: int) -> bool:
        """Whether comparing the object at ``path`` of ``root`` with a file of ``other``
        bytes reads the object's metadata (a HEAD): for its modification time, or for
        its MD5 where it was uploaded in parts."""
        if not self._object_store(session) or root.files[path].size != other:
            return False
        return self.method.compare == "modtime" or path in root.parted

    # -- backup ---------------------------------------------------------------------------
    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        store = self._object_store(session)
        number = version.version
        aside = _Root(f"{_BACKUP}/v{number}")
        session.head([session.key(_CURRENT), session.key(aside.name)])
        self._list(session, self.current)
        wanted = {file.path: file for file in version.files}
        stored = self.current.files
        read = [
            p
            for p in stored
            if p in wanted and self._needs_head(session, self.current, p, wanted[p].size)
        ]
        session.head([session.key(_CURRENT, p) for p in read])
        changed = [p for p in wanted if p in stored and not _equal(stored[p], wanted[p])]
        deleted = [p for p in stored if p not in wanted]
        moved = changed + deleted
        if moved:
            seen = set(read)
            unread = [p for p in moved if p not in seen] if store else []
            targets = [session.key(aside.name, p) for p in moved]
            session.head([session.key(_CURRENT, p) for p in unread] + targets)
            session.copy([(session.key(_CURRENT, p), session.key(aside.name, p)) for p in moved])
            if store:
                session.head(targets)
            session.delete([session.key(_CURRENT, p) for p in moved])
            for path in moved:
                aside.add(stored.pop(path))
            self.backups[number] = aside
        self.last = number
        uploads = [p for p in wanted if p not in stored]
        blobs = [
            Blob(key=session.key(_CURRENT, p), segments=(_piece(version, wanted[p]),))
            for p in uploads
        ]
        cutoff = self.method.upload_cutoff
        parted = {p for p in uploads if store and wanted[p].size > cutoff}
        session.put([blob for path, blob in zip(uploads, blobs, strict=True) if path not in parted])
        for path, blob in zip(uploads, blobs, strict=True):
            if path in parted:
                part = max(self.method.part_size, -(-blob.size // _MAX_PARTS))
                session.put_parts(blob, part, self.method.upload_concurrency)
        if store and not self.method.no_head:
            session.head([session.key(_CURRENT, p) for p in uploads])
        for path in uploads:
            self.current.add(wanted[path], parted=path in parted)

    # -- restore --------------------------------------------------------------------------
    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        local: dict[str, File] = {} if held is None else {f.path: f for f in held.files}
        fetched: set[str] = set()
        roots = [self.current] + [
            self.backups.get(n, _Root(f"{_BACKUP}/v{n}"))
            for n in range(self.last, version.version, -1)
        ]
        store = self._object_store(session)
        for root in roots:
            session.head([session.key(root.name)])
            self._list(session, root)
            read = [
                p
                for p in root.files
                if p in local and self._needs_head(session, root, p, local[p].size)
            ]
            differ = [p for p, f in root.files.items() if p not in local or not _equal(f, local[p])]
            # an object uploaded in parts keeps its MD5 in metadata: rclone reads it to
            # check the download against it (once: not again if the compare read it)
            checked = set(read)
            parts = [p for p in differ if store and p in root.parted and p not in checked]
            session.head([session.key(root.name, p) for p in read + parts])
            remaining = iter(differ)
            # each window's files go to temporary names as they arrive (a later root's
            # copy replaces an earlier one's), several at once; they replace the
            # directory's files once the replay's copies are checked
            reads = [Read(key=session.key(root.name, p)) for p in differ]
            for bodies in session.get_staged_by_window(reads):
                paths = [next(remaining) for _ in bodies]
                places = [_temporary(directory / p) for p in paths]
                write_all(list(zip(places, bodies, strict=True)))
                for path in paths:
                    fetched.add(path)
                    local[path] = root.files[path]
        wanted = {file.path: file for file in version.files}
        for path, file in wanted.items():
            if path not in local or not _equal(local[path], file):
                for made in fetched:
                    _temporary(directory / made).unlink(missing_ok=True)
                raise OSError(
                    f"the replay's copies do not restore {path} of version {version.version}"
                )
        in_place(
            [(_temporary(directory / p), directory / p if p in wanted else None) for p in fetched]
        )
        for path in set(local) - set(wanted):
            (directory / path).unlink(missing_ok=True)


def _equal(stored: File, other: File) -> bool:
    """Whether rclone takes ``stored`` for ``other``: same size and modification time
    (files keep their generation's mtime: tests/backup_tools.py ``file_mtime``)."""
    return stored.size == other.size and stored.generation == other.generation


def _piece(version: Dataset, file: File) -> Piece:
    return Piece(version, file, 0, file.size)


def _temporary(path: Path) -> Path:
    return path.with_name(path.name + ".storeprobe-part")


def _flag(_: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{attribute.name} must be True or False, not {value!r}")


def _size(value: int | str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigurationError(f"a size must be bytes or a size such as '200MiB', not {value!r}")
    return parse_size(value)


def _cutoff(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= 5 * GiB:
        raise ConfigurationError(
            f"upload_cutoff must be from 0 to 5 GiB (rclone's --s3-upload-cutoff), not {value:,}"
        )


def _part(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not PART_SIZE <= value <= 5 * GiB:
        raise ConfigurationError(
            f"part_size must be from 5 MiB to 5 GiB (S3's part sizes; rclone's "
            f"--s3-chunk-size), not {value:,}"
        )


def _concurrency(_: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"upload_concurrency must be a whole number ≥ 1 (rclone's --s3-upload-concurrency), "
            f"not {value!r}"
        )


def _compare(_: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in ("modtime", "checksum"):
        raise ConfigurationError(
            f"compare must be 'modtime' (rclone's default: size and modification time) or "
            f"'checksum' (--checksum: size and MD5), not {value!r}"
        )


@frozen(kw_only=True)
class Files(BackupMethod):
    """``rclone sync --backup-dir`` (rclone 1.6x–1.75, its defaults): a mirror of the
    newest version plus the files each backup replaced or deleted.

    ``fast_list`` is ``--fast-list`` (one recursive listing on object stores instead of
    one per directory); ``compare="checksum"`` is ``--checksum`` (no HEAD per unchanged
    file); ``no_head`` is ``--s3-no-head`` (no HEAD after each upload);
    ``upload_cutoff``, ``part_size`` and ``upload_concurrency`` are
    ``--s3-upload-cutoff``, ``--s3-chunk-size`` and ``--s3-upload-concurrency`` (bytes,
    or sizes such as ``"200MiB"``).
    """

    name: ClassVar[str] = "files"
    tool: ClassVar[str] = "rclone sync --backup-dir (rclone 1.6x-1.75)"
    folders: ClassVar[tuple[str, ...]] = (_CURRENT, _BACKUP)

    fast_list: bool = field(default=False, validator=_flag)
    compare: Compare = field(default="modtime", validator=_compare)
    no_head: bool = field(default=False, validator=_flag)
    upload_cutoff: int = field(default=UPLOAD_CUTOFF, converter=_size, validator=_cutoff)
    part_size: int = field(default=PART_SIZE, converter=_size, validator=_part)
    upload_concurrency: int = field(default=4, validator=_concurrency)

    def replay(self) -> Replay:
        return _FilesReplay(self)

    def strategy(self, kind: StepKind) -> str:
        listing = "one recursive listing" if self.fast_list else "a listing per directory"
        if kind == "backup":
            return (
                f"files: {listing}, compare by {self.compare}, move replaced and deleted "
                "files into the backup dir, upload new and changed files"
            )
        return f"files: rclone copy of current and the later backup dirs ({listing})"
