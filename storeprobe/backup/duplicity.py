"""``duplicity``: a chain of tar volumes, signatures and manifests, as duplicity 0.8 writes it.

Replays duplicity 0.8.22 (Debian's package), ``--no-encryption``, on its ``boto3+s3://``,
``file://`` and ``paramiko+sftp://`` backends (the requests as its S3 backend sends them;
on the others the same steps, whose requests nothing logs: bytes, objects and space are
compared there), with its local archive dir kept between runs (the default: a
user's ``~/.cache/duplicity``). Every rule below is read from that version's code
(``/usr/lib/python3/dist-packages/duplicity/``) and checked against the tool itself by
``tests/test_backup_duplicity.py``:

- **Volumes** (``diffdir.py``, ``DeltaTarBlockIter``; ``gpg.py``, ``GzipWriteFile``): the
  backup is one tar stream in path order (``collate2iters`` over sorted path tuples: a
  directory, then its entries by name), cut into volumes
  ``duplicity-full.<time>.vol<n>.difftar.gz``. A volume takes tar blocks while at least
  64 KiB (the block iterator's read size) remain below ``volume_size`` (``--volsize``,
  200 MiB by default), then ends with zeros up to tar's 10 240-byte record. A file is one
  block ``snapshot/<path>`` up to 64 KiB; a larger one is split into 64 KiB blocks
  ``multivol_snapshot/<path>/1``, ``/2``... (``get_read_size``), each with its own tar
  header, and its blocks continue into the next volume where one fills up (duplicity's
  multivol handling). Directories are header-only blocks ``snapshot/<dir>/``.
- **Signatures** (``diffdir.py``, ``SigTarBlockIter``, ``get_delta_path``): a full
  backup also writes ``duplicity-full-signatures.<time>.sigtar.gz``, a tar of
  ``signature/<path>``: the librsync signature of every file (MD4, 8-byte strong sums,
  the block length of ``get_block_size``: :meth:`storeprobe.delta.SignatureArgs.duplicity`),
  and ``snapshot/<dir>`` entries.
- **Incrementals** (``get_delta_iter``): a file whose mtime, size or mode changed is
  stored as ``diff/<path>`` (or ``multivol_diff/<path>/<n>``), the librsync delta of its
  new bytes against the previous signature, computed here by librsync itself
  (:mod:`storeprobe.delta`); a new file whole (``snapshot/``); a deleted one as a
  header-only ``deleted/<path>``; a directory whose entries changed (so its mtime did) as
  ``snapshot/<dir>/``. Volumes ``duplicity-inc.<t1>.to.<t2>.vol<n>.difftar.gz``, and
  ``duplicity-new-signatures.<t1>.to.<t2>.sigtar.gz`` with the new signatures of changed
  and new files and ``deleted/`` entries.
- **Manifest** (``manifest.py``; ``statistics.py``, ``add_delta_entries_file``):
  ``Hostname``, ``Localdir``, per volume its first and last path and block and a
  ``Hash SHA1`` line, then ``Filelist``: one line per regular file new, changed or
  deleted; written last, uncompressed.
- **Requests** (``dup_main.py``, ``backend.py``, ``backends/s3_boto3_backend.py``), as the
  logging S3 server saw them: every run lists the target twice (collection status);
  each volume is one PUT followed by two HEADs (``write_multivol``'s ``validate_block``:
  a size query, then a first attempt that queries again); then the
  signatures and the manifest, one PUT each. On S3 an object of
  ``s3_multipart_chunk_size`` or more (``--s3-multipart-chunk-size``, 25 MiB: boto3's
  ``upload_file`` with that threshold and chunk size) is a multipart upload instead:
  create, parts of that size, complete; a full backup lists once more at the end.
  An incremental first HEADs and GETs the previous backup's manifest
  (``check_last_manifest``: the remote copy against the archive dir's); it reads no
  signatures (the archive dir holds them). A restore of version ``k`` lists twice, then
  for every volume of the chain up to ``k`` (the full, then each incremental in turn)
  one HEAD and the GETs of boto3's ``download_file``: objects of 8 MiB or more in 8 MiB
  ranged GETs (boto3's default ``TransferConfig``), smaller ones whole; on other targets
  one whole read per volume. Manifests and signatures are not read (the archive dir).

gzip is modelled, not run (the content is incompressible, and compressing it would cost
what the storage does not see): tar headers and padding are deflated for real (zlib,
level 6, each run of them alone); file bytes and deltas are stored as they are, plus
gzip's framing on incompressible data, 18 bytes and 5 per 16 383-byte stored block
(measured: 5 138 bytes on 16 MiB of random bytes, 0.031 %). ``compression=False`` is
``--no-compression``: each volume is then exactly the tar stream. Signature archives are
real gzip of real tar. What it leaves out: GnuPG (the tests use ``--no-encryption``;
encryption adds a little per volume), the bucket HEAD each run starts with (a
bucket-level request, not an object's), the manifest's volume hashes (the line has its
length, not the volume's SHA1), the archive dir's resynchronisation when it is empty,
and the tool's CPU work (reading the source, hashing, compressing).

Memory: a backup holds the deltas of files up to 8 MiB of one volume at a time (each
volume is written as soon as it is full, as duplicity does; a larger file's delta is
spooled to a temporary file, read back as its volume is written) and the librsync
signature of every file of the last version (about 12 bytes per 512 to 2 048 bytes of a
file: the archive dir's copy); a restore lands each volume in a local file and collects
each delta in a file beside the file it patches, so it holds a window of reads.

Why one module (~690 lines, 75 of them the rules above): a backup method is one module
(``docs/architecture.md``), one tool's request pattern read top to bottom against
duplicity's code cited here; its helpers (tar volumes, signatures, manifests) serve
duplicity alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import shutil
import socket
import tarfile
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, ClassVar, Literal

from attrs import define, field, frozen

from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.objects import Blob, Read, Segment, Spooled
from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset, File
from storeprobe.dataset import content as file_content
from storeprobe.delta import (
    Signature,
    SignatureArgs,
    delta,
    signature,
    write_delta,
    write_patch,
)
from storeprobe.errors import ConfigurationError
from storeprobe.manifest import Piece
from storeprobe.staging import Staging
from storeprobe.units import format_size, parse_size

__all__ = ["Duplicity"]

MiB = 1024 * 1024
_BLOCK = 64 * 1024  # DeltaTarBlockIter.get_read_size: a tar block's data, at most
_RECORD = tarfile.RECORDSIZE  # 10 240: a volume's tar stream ends on a record
_GZIP_FRAME = 18  # gzip's header and trailer
_STORED_BLOCK = 16_383  # zlib level 6 on incompressible input: one stored block per 16 383 B
_STORED_HEADER = 5
_BOTO3_CHUNK = 8 * MiB  # boto3 TransferConfig: multipart_threshold = multipart_chunksize
_BOTO3_CONCURRENCY = 10  # boto3 TransferConfig: max_concurrency (parts in flight)
_S3 = ("s3", "s3a")
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

EntryKind = Literal["dir", "snapshot", "diff", "deleted"]


@frozen
class _Entry:
    """One tar block of a volume: where its data sits in the stored object."""

    path: str  # the dataset path ("" for the root directory)
    kind: EntryKind
    last: bool  # the file's last block (its data is complete after it)
    offset: int  # of the block's data in the stored volume
    length: int


@frozen
class _Volume:
    key: str
    size: int
    entries: tuple[_Entry, ...]


@frozen
class _Set:
    """One backup of the chain: its volumes and manifest."""

    volumes: tuple[_Volume, ...]
    manifest: str


@frozen
class _Block:
    """A tar block to write: its header's name, its data (or none), and what it is."""

    name: str
    path: str
    kind: EntryKind
    data: Segment | None
    length: int
    last: bool
    number: int | None  # the multivol block number; None for a single block
    mtime: int
    directory: bool


def _index(path: str) -> tuple[bytes, ...]:
    return tuple(part.encode() for part in path.split("/")) if path else ()


def _directories(files: Sequence[File]) -> set[str]:
    found = {""}
    for file in files:
        head = file.path
        while "/" in head:
            head = head.rsplit("/", 1)[0]
            found.add(head)
    return found


def _children(files: Sequence[File], directories: set[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {d: set() for d in directories}
    for name in [f.path for f in files] + [d for d in directories if d]:
        out[posixpath.dirname(name)].add(name)
    return out


def _header(block: _Block) -> tuple[bytes, int]:
    """The block's tar header (``TarInfo.tobuf``, as ``tarinfo2tarblock``) and the zeros
    that pad its data to 512 bytes."""
    info = tarfile.TarInfo(block.name)
    info.size = block.length
    info.mtime = block.mtime
    info.type = tarfile.DIRTYPE if block.directory else tarfile.REGTYPE
    info.mode = 0o755 if block.directory else 0o644
    info.uname = info.gname = "root"
    return info.tobuf(errors="replace", encoding="utf-8"), -block.length % tarfile.BLOCKSIZE


@define
class _VolumeWriter:
    """Lays tar blocks into volumes of about ``size`` stored bytes."""

    size: int
    compression: bool
    #: the volumes finished and not yet taken: their segments and entries
    volumes: list[tuple[list[Segment], list[_Entry]]] = field(factory=list)
    #: per finished volume: its first path and block, its last path and block
    bounds: list[tuple[str, int | None, str, int | None]] = field(factory=list)
    # the volume under way
    segments: list[Segment] = field(factory=list)
    entries: list[_Entry] = field(factory=list)
    pending: bytearray = field(factory=bytearray)  # literal tar bytes not yet deflated
    stored: int = 0  # stored bytes so far (deflated literal runs + raw data)
    raw: int = 0  # incompressible data bytes so far
    tar: int = 0  # uncompressed tar bytes so far
    first: tuple[str, int | None] | None = None
    last: tuple[str, int | None] | None = None

    def _deflated(self, data: bytes) -> bytes:
        if not self.compression or not data:
            return bytes(data)
        squeeze = zlib.compressobj(6, zlib.DEFLATED, -15)
        return squeeze.compress(data) + squeeze.flush()

    def _close_run(self) -> None:
        if self.pending:
            run = self._deflated(bytes(self.pending))
            self.segments.append(run)
            self.stored += len(run)
            self.pending = bytearray()

    def full(self) -> bool:
        """GzipWriteFile's test: fewer than 64 KiB left below the volume size."""
        return self.size - (self.stored + len(self.pending) // 4) < _BLOCK

    def add(self, block: _Block) -> None:
        header, pad = _header(block)
        self.pending += header
        self.tar += len(header) + block.length + pad
        offset = 0
        if block.data is not None and block.length:
            self._close_run()
            offset = self.stored
            self.segments.append(block.data)
            self.stored += block.length
            self.raw += block.length
        self.pending += b"\0" * pad
        self.entries.append(_Entry(block.path, block.kind, block.last, offset, block.length))
        # dup_main.write_multivol's get_indicies: a block's own number in a file with
        # more blocks to come, None after a file's last block
        where = (block.path or ".", None if block.last else block.number)
        self.first = self.first or where
        self.last = where

    def finish(self) -> None:
        """End the volume under way (tar's footer, gzip's framing)."""
        if not self.entries:
            return
        self.pending += b"\0" * (_RECORD - self.tar % _RECORD)
        self._close_run()
        if self.compression:
            framing = _GZIP_FRAME + _STORED_HEADER * -(-self.raw // _STORED_BLOCK)
            self.segments.append(b"\0" * framing)
        assert self.first is not None
        assert self.last is not None
        self.bounds.append((*self.first, *self.last))
        self.volumes.append((self.segments, self.entries))
        self.segments, self.entries = [], []
        self.stored = self.raw = self.tar = 0
        self.first = self.last = None


def _blocks(
    name: str, path: str, kind: EntryKind, data: Piece | bytes | Spooled, length: int, mtime: int
) -> Iterator[_Block]:
    """The tar blocks of one file's data (a snapshot or a delta), 64 KiB each."""
    if length < _BLOCK:
        yield _Block(f"{kind}/{name}", path, kind, data, length, True, None, mtime, False)
        return
    count = length // _BLOCK + 1  # a block of exactly 64 KiB is never the last one
    for number in range(1, count + 1):
        start = (number - 1) * _BLOCK
        size = min(_BLOCK, length - start)
        part: Segment
        if isinstance(data, Piece):
            part = Piece(data.dataset, data.file, data.offset + start, size)
        elif isinstance(data, Spooled):
            part = data.part(start, size)
        else:
            part = data[start : start + size]
        yield _Block(
            f"multivol_{kind}/{name}/{number}",
            path,
            kind,
            part,
            size,
            number == count,
            number,
            mtime,
            False,
        )


def _sigtar(entries: Sequence[tuple[str, bytes | None, bool, int]], compression: bool) -> bytes:
    """A signature archive: (tar name, signature bytes or None, directory?, mtime) each."""
    out = bytearray()
    for name, data, directory, mtime in entries:
        block = _Block(name, "", "snapshot", None, len(data or b""), True, None, mtime, directory)
        header, pad = _header(block)
        out += header + (data or b"") + b"\0" * pad
    out += b"\0" * (_RECORD - len(out) % _RECORD)
    return zlib.compress(bytes(out), 6, wbits=31) if compression else bytes(out)


@define
class _DuplicityReplay(Replay):
    method: Duplicity
    start: datetime
    chain: list[_Set] = field(factory=list)
    #: the archive dir's signatures: path → librsync signature of the last version backed up
    signatures: dict[str, Signature] = field(factory=dict)
    times: list[str] = field(factory=list)
    stored: int = 0  # objects written
    #: the temporary files of the backup under way's large deltas, oldest first
    spools: list[IO[bytes]] = field(factory=list)

    # -- names ------------------------------------------------------------------------
    def _time(self, number: int) -> str:
        return (self.start + timedelta(seconds=number)).strftime("%Y%m%dT%H%M%SZ")

    def _names(self, number: int) -> tuple[str, str, str]:
        """(volume name with {n}, signatures, manifest) of backup ``number``."""
        gz = ".gz" if self.method.compression else ""
        now = self._time(number)
        if number == 0:
            return (
                f"duplicity-full.{now}.vol{{n}}.difftar{gz}",
                f"duplicity-full-signatures.{now}.sigtar{gz}",
                f"duplicity-full.{now}.manifest",
            )
        span = f"{self._time(number - 1)}.to.{now}"
        return (
            f"duplicity-inc.{span}.vol{{n}}.difftar{gz}",
            f"duplicity-new-signatures.{span}.sigtar{gz}",
            f"duplicity-inc.{span}.manifest",
        )

    # -- what a backup stores ------------------------------------------------------------
    def _blocks_of(
        self,
        version: Dataset,
        previous: Dataset | None,
        sigs: list[tuple[str, bytes | None, bool, int]],
        listed: list[tuple[str, str]],
    ) -> Iterator[_Block]:
        """The version's tar blocks, in order, made as they are drawn (a delta when its
        file's turn comes, so one volume's deltas are in memory at a time); its
        signature entries and its manifest's file list are added to ``sigs`` and
        ``listed`` on the way."""
        new = {f.path: f for f in version.files}
        old = {} if previous is None else {f.path: f for f in previous.files}
        new_dirs = _directories(version.files)
        old_dirs = set() if previous is None else _directories(previous.files)
        new_children = _children(version.files, new_dirs)
        old_children = {} if previous is None else _children(previous.files, old_dirs)
        mtime = 946_684_800 + version.version * 86_400
        paths = sorted({*new, *old, *new_dirs, *old_dirs}, key=_index)
        for path in paths:
            name = path or "."
            if path in new_dirs:
                if path in old_dirs and new_children[path] == old_children[path]:
                    continue
                tar_name = f"{path}/" if path else "./"  # get_tarinfo: "." + "/"
                yield _Block(f"snapshot/{tar_name}", path, "dir", None, 0, True, None, mtime, True)
                sigs.append((f"snapshot/{path}", None, True, mtime))
            elif path in new:
                file = new[path]
                if path in old and old[path] == file:
                    continue
                sig = signature(
                    file_content(version, file), SignatureArgs.duplicity(file.size), size=file.size
                )
                base = self.signatures.get(path) if path in old else None
                if base is None:
                    piece = Piece(version, file, 0, file.size)
                    yield from _blocks(path, path, "snapshot", piece, file.size, mtime)
                    listed.append((name, "new"))
                else:
                    data = self._delta(base, version, file)
                    yield from _blocks(path, path, "diff", data, len(data), mtime)
                    listed.append((name, "changed"))
                self.signatures[path] = sig
                sigs.append((f"signature/{path}", sig.data, False, mtime))
            else:  # in the previous version only: deleted
                yield _Block(f"deleted/{path}", path, "deleted", None, 0, True, None, mtime, False)
                sigs.append((f"deleted/{path}", None, False, mtime))
                if path in old:  # a file (a deleted directory is not listed)
                    listed.append((name, "deleted"))
                self.signatures.pop(path, None)

    def _delta(self, base: Signature, version: Dataset, file: File) -> bytes | Spooled:
        """The delta of ``file`` against its last signature: held when the file is at
        most :data:`_HELD`, else written to a temporary file in ``TMPDIR`` (closed once
        the volumes holding its blocks are written), so a backup never holds a large
        file's delta."""
        if file.size <= _HELD:
            return delta(base, file_content(version, file))
        spool = tempfile.TemporaryFile(dir=Staging.check_room(file.size))  # noqa: SIM115
        self.spools.append(spool)  # closed by _release
        write_delta(base, file_content(version, file), spool.write)
        spool.flush()
        return Spooled(fd=spool.fileno(), length=spool.tell())

    def _release(self, keep: int) -> None:
        """Close the spooled deltas but the newest ``keep`` (the file whose blocks are
        being drawn may have some left for the next volume)."""
        while len(self.spools) > keep:
            self.spools.pop(0).close()

    def _manifest(
        self, listed: list[tuple[str, str]], bounds: list[tuple[str, int | None, str, int | None]]
    ) -> bytes:
        """As duplicity writes it while it runs: host and directory, each volume as it is
        finished, then the regular files new, changed or deleted (``manifest.py``;
        ``statistics.py``, ``add_delta_entries_file``: directories are not listed)."""
        lines = [f"Hostname {socket.gethostname()}", f"Localdir {self.method.localdir}"]
        for number, (start, start_block, end, end_block) in enumerate(bounds, start=1):
            digest = hashlib.sha1(f"{number}{start}{end}".encode()).hexdigest()
            lines.append(f"Volume {number}:")
            lines.append(f"    StartingPath   {start} {_block_number(start_block)}")
            lines.append(f"    EndingPath     {end} {_block_number(end_block)}")
            lines.append(f"    Hash SHA1 {digest}")
        lines.append(f"Filelist {len(listed)}")
        lines.extend(f"    {kind:<7}  {path}" for path, kind in listed)
        return ("\n".join(lines) + "\n").encode()

    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        number = len(self.chain)
        volume_name, sig_name, manifest_name = self._names(number)
        for _ in range(2):  # collection status: the target listed twice
            (listed,) = session.listing([session.prefix])
            if max(listed, 0) != self.stored:
                raise OSError(
                    f"the listing shows {max(listed, 0)} objects where the probe stored "
                    f"{self.stored}"
                )
        if self.chain:  # check_last_manifest: the previous manifest, read back
            last = session.key(self.chain[-1].manifest)
            session.head([last])
            session.get([Read(key=last)])
        sigs: list[tuple[str, bytes | None, bool, int]] = []
        files: list[tuple[str, str]] = []
        writer = _VolumeWriter(self.method.volume_size, self.method.compression)
        volumes: list[_Volume] = []

        def upload() -> None:  # the volume under way: finish it, PUT it, HEAD it twice
            writer.finish()
            segments, entries = writer.volumes.pop()
            key = session.key(volume_name.format(n=len(volumes) + 1))
            blob = Blob(key=key, segments=segments)
            self._put(session, blob)
            session.head([blob.key])
            session.head([blob.key])
            volumes.append(_Volume(blob.key, blob.size, tuple(entries)))
            self._release(keep=1)

        try:
            for block in self._blocks_of(version, previous, sigs, files):
                if writer.entries and writer.full():
                    upload()
                writer.add(block)
            if not writer.entries and not volumes:  # nothing changed: still one volume
                writer.add(_Block("snapshot/", "", "dir", None, 0, True, None, 0, True))
            if writer.entries:
                upload()
        finally:
            self._release(keep=0)
        sigtar = _sigtar(sigs, self.method.compression)
        self._put(session, Blob.of_bytes(session.key(sig_name), sigtar))
        manifest = self._manifest(files, writer.bounds)
        session.put([Blob.of_bytes(session.key(manifest_name), manifest)])
        if not self.chain:
            session.listing([session.prefix])
        self.stored += len(volumes) + 2
        self.chain.append(_Set(tuple(volumes), manifest_name))

    def _put(self, session: Session, blob: Blob) -> None:
        """boto3's ``upload_file`` on S3: a multipart upload from the threshold on (the
        chunk size); one PUT below it and on every other target."""
        chunk = self.method.s3_multipart_chunk_size
        if session.target.protocol in _S3 and blob.size >= chunk:
            session.put_parts(blob, chunk, _BOTO3_CONCURRENCY)
        else:
            session.put([blob])

    # -- restore ---------------------------------------------------------------------------
    def _reads(self, session: Session, volume: _Volume) -> list[Read]:
        if session.target.protocol not in _S3 or volume.size < _BOTO3_CHUNK:
            return [Read(key=volume.key)]
        return [
            Read(key=volume.key, start=start, stop=min(start + _BOTO3_CHUNK, volume.size))
            for start in range(0, volume.size, _BOTO3_CHUNK)
        ]

    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        if version.version >= len(self.chain):
            raise OSError(f"version {version.version} was not backed up")
        for child in directory.iterdir():  # duplicity restores into an empty directory
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        session.listing([session.prefix])
        session.listing([session.prefix])
        pending: dict[str, Path | None] = {}
        for backup in self.chain[: version.version + 1]:
            for volume in backup.volumes:
                session.head([volume.key])
                with _landed(session, self._reads(session, volume), volume) as body:
                    for entry in volume.entries:
                        _apply(directory, entry, body, pending)


@contextlib.contextmanager
def _landed(session: Session, reads: list[Read], volume: _Volume) -> Iterator[_Landed]:
    """The volume's bytes in a local file as they arrive (untimed writes between its
    reads): a whole volume above the window budget lands in a staging file during its
    GET, smaller ones and boto3's 8 MiB ranges are written to a temporary file one read
    at a time; so a restore holds a window of reads, never a volume."""
    with tempfile.TemporaryFile(prefix="storeprobe-volume-") as spool:
        staged: Staging | None = None
        try:
            size = 0
            if len(reads) == 1:
                for bodies in session.get_staged_windows(reads):
                    for body in bodies:
                        if isinstance(body, Staging):
                            staged, size = body, body.size
                        else:
                            size += spool.write(body)
            else:
                for read in session.get_each(reads):
                    size += spool.write(read)
                    del read
            if size != volume.size:
                raise OSError(f"{volume.key}: read {size} bytes, stored {volume.size}")
            spool.flush()
            yield _Landed(staged.fd if staged is not None else spool.fileno())
        finally:
            if staged is not None:
                staged.close()


class _Landed:
    """A volume landed in a local file: bytes read from it at offsets, never whole."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def pieces(self, offset: int, length: int) -> Iterator[bytes]:
        """``length`` bytes from ``offset``, :data:`_PIECE` at a time."""
        for start in range(offset, offset + length, _PIECE):
            yield self.read(start, min(_PIECE, offset + length - start))


#: bytes of a landed volume copied into a restored file at a time
_PIECE = 8 * MiB
#: a backup holds the delta of a file up to this size in memory and spools a larger
#: one to a temporary file
_HELD = 8 * MiB


def _block_number(number: int | None) -> str:
    return " " if number is None else str(number)  # manifest.py's bfmt


def _apply(directory: Path, entry: _Entry, body: _Landed, pending: dict[str, Path | None]) -> None:
    """Apply one tar block of a volume (landed in ``body``) to the restored directory: a
    snapshot's bytes copied 8 MiB at a time, a delta's collected in a file beside the
    file it patches until it is whole (``pending``: the paths whose snapshot or delta
    goes on in a next block, with the delta's file), then the patch streamed from it."""
    target = directory / entry.path if entry.path else directory
    if entry.kind == "dir":
        target.mkdir(parents=True, exist_ok=True)
    elif entry.kind == "deleted":
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    elif entry.kind == "snapshot":
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb" if entry.path not in pending else "ab") as out:
            for piece in body.pieces(entry.offset, entry.length):
                out.write(piece)
        if entry.last:
            pending.pop(entry.path, None)
        else:
            pending[entry.path] = None
    else:  # a delta, maybe in several blocks: patch once it is whole
        collected = pending.get(entry.path) or target.with_name(target.name + ".storeprobe-delta")
        with open(collected, "ab" if entry.path in pending else "wb") as out:
            for piece in body.pieces(entry.offset, entry.length):
                out.write(piece)
        pending[entry.path] = collected
        if entry.last:
            del pending[entry.path]
            part = target.with_name(target.name + ".storeprobe-part")
            with open(target, "rb") as basis, open(part, "wb") as out:
                write_patch(basis, _read_pieces(collected), out.write)
            os.replace(part, target)
            collected.unlink()


def _read_pieces(path: Path) -> Iterator[bytes]:
    """The bytes of ``path``, 1 MiB at a time."""
    with open(path, "rb") as source:
        while piece := source.read(MiB):
            yield piece


def _size_at_least(value: int | str, minimum: int, name: str, why: str, example: str) -> int:
    """A size option's bytes from ``value`` (bytes, or a size string such as "200MiB"), at
    least ``minimum``; anything else a ConfigurationError naming the option, ``why`` the
    minimum is what it is, and an ``example``."""
    size = parse_size(value) if isinstance(value, str) else value
    if isinstance(size, bool) or not isinstance(size, int) or size < minimum:
        raise ConfigurationError(
            f"{name} must be at least {format_size(minimum)} ({why}), "
            f"not {value!r}: e.g. {example!r}"
        )
    return size


def _volume_size(value: int | str) -> int:
    return _size_at_least(
        value, 1 * MiB, "volume_size", "duplicity's --volsize is in MiB", "200MiB"
    )


def _part_size(value: int | str) -> int:
    return _size_at_least(value, 5 * MiB, "s3_multipart_chunk_size", "S3's smallest part", "25MiB")


@frozen(kw_only=True)
class Duplicity(BackupMethod):
    """duplicity 0.8's chain: a full backup's tar volumes, signatures and manifest, then
    incrementals of librsync deltas; a restore reads the chain up to its version."""

    name: ClassVar[str] = "duplicity"
    tool: ClassVar[str] = "duplicity 0.8.22 (--no-encryption; boto3+s3://, file://, sftp://)"
    # restores on S3 read 8 MiB ranges (boto3's download): the client that can read
    # ranges from this server is chosen before the first step (obstore cannot read them
    # from a server that answers a range with 200, rclone serve s3: s3fs then reads them)
    ranged_reads: ClassVar[bool] = True

    #: ``--volsize``: a volume's size in bytes (duplicity's default 200 MiB)
    volume_size: int = field(default=200 * MiB, converter=_volume_size)
    #: ``--s3-multipart-chunk-size``: on S3, objects of this size or more are multipart
    #: uploads in parts of this size (boto3's threshold and chunk size; 25 MiB by default)
    s3_multipart_chunk_size: int = field(default=25 * MiB, converter=_part_size)
    #: gzip the volumes and signatures (duplicity's default); False: ``--no-compression``
    compression: bool = True
    #: the source directory the manifest names (its ``Localdir`` line)
    localdir: str = "/home/user"

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.compression, bool):
            raise ConfigurationError(f"compression must be True or False, not {self.compression!r}")

    def replay(self) -> Replay:
        return _DuplicityReplay(self, _EPOCH + timedelta(days=1))

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return (
                "duplicity: list twice, tar volumes (full) or delta volumes (incremental), "
                "each PUT and HEAD twice, then signatures and manifest"
            )
        return "duplicity: list twice, then HEAD and GET every volume of the chain up to it"
