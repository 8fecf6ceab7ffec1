"""``restic``: restic's repository on a storage, request for request (restic 0.14, format 2).

Replays Debian's restic 0.14.0 (``restic backup`` and ``restic restore`` with the local
cache a user has by default, ``~/.cache/restic``) on the layout of its repository. Each
rule and its source (restic's ``doc/design.rst``, "Repository Format", "Pack Format",
"Indexing", "Keys, Encryption and MAC", "Snapshots", "Trees and Data", "Locks"; the
0.14.0 changelog; requests and sizes seen from restic 0.14.0 on a logging S3 server,
``tests/test_backup_restic.py``):

- **Layout**: ``config``, ``keys/<id>``, ``locks/<id>``, ``snapshots/<id>``,
  ``index/<id>``, ``data/<first two hex digits>/<id>`` (design.rst, "Repository
  Format"). The first backup first makes the repository, as ``restic init`` does: it
  lists ``keys/`` (and ``key/``, the legacy layout's), checks that ``config`` does not
  exist, then writes one key file and ``config``.
- **Opening** (every backup and restore): lists ``keys/`` and ``key/`` (restic's S3
  layout detection), HEADs ``config``, lists ``keys/`` again, reads the key file, reads
  ``config``; then **the lock**: lists ``locks/``, writes ``locks/<id>``, lists
  ``locks/`` again (design.rst, "Locks"; seen on the wire); then lists ``snapshots/``
  (the parent) and ``index/``. With the cache, index files, snapshots and tree packs
  are never read back: restic wrote them into the cache when it saved them (design.rst,
  "Local Cache"). The lock is deleted at the end of the operation.
- **Chunks**: each file on its own is cut into content-defined chunks of at least
  512 KiB and at most 8 MiB, after the first byte at least 512 KiB into the chunk where
  the Rabin fingerprint of the last 64 bytes (modulo the repository's random
  irreducible polynomial of degree 53, ``config``'s ``chunker_polynomial``) has its low
  20 bits zero (design.rst, "Backups and Deduplication"; restic's ``chunker`` package),
  so a chunk is 512 KiB + 1 MiB on average. This replay computes the same fingerprint
  (numpy: the fingerprint is linear over GF(2), so a window's is the XOR of table
  terms), with ``polynomial=`` restic's (default: one restic 0.14 chose): given a
  repository's polynomial it cuts exactly restic's chunks (on 100 MB of random data all
  57 chunk IDs equal those restic stored). It runs at about 10 MB/s here, untimed.
  Files of 512 KiB or less are one chunk. A blob is named by the SHA-256 of its bytes;
  one the index already holds is not stored again, and no storage request asks whether
  it exists (the index answers).
- **Blobs in packs**: each blob is compressed (zstd; random data stays its size plus
  the zstd frame: 4 B magic, 1 B descriptor, 1–4 B content size, 3 B per 128 KiB
  block) and encrypted (16 B IV + 16 B MAC), then appended to a pack; a pack is
  finished once it reaches ``pack_size`` (restic's ``--pack-size``, 16 MiB by default
  since 0.14.0, "Allow pack size customization", #3731; packs may be larger by the last
  blob). Blobs enter packs in the order of the files' chunks, as restic's do with one
  blob saver (``GOMAXPROCS=1``; with more, concurrent savers reorder neighbouring blobs
  from run to run, and with them the ranges a restore reads). At the end of the pack
  comes the encrypted header, 41 B per compressed blob (type, length, uncompressed
  length, SHA-256) + 32 B, then its 4-byte length (design.rst, "Pack Format"). Data
  blobs and tree blobs go into separate packs.
- **Trees**: one tree blob per directory (its nodes as restic's JSON, with names,
  modes, times, sizes, inodes and content or subtree IDs), compressed and encrypted;
  an unchanged directory keeps its tree, a change makes new trees up to the root
  (design.rst, "Trees and Data").
- **Index and snapshot**: one index file per backup listing every new blob's pack,
  offset, length and uncompressed length, and one snapshot file (time, tree, paths,
  hostname, username, parent) per backup, both JSON compressed and encrypted
  (design.rst, "Indexing", "Snapshots"); restic writes the index after the packs and
  the snapshot last.
- **Restore**: after opening and locking, ranged GETs of each pack that holds a blob of
  the version's files: one from the first needed blob to the end of the last, split
  where more than 4 MiB of unneeded bytes lie between two needed blobs (restic 0.14's
  ``repository.StreamPack``, its ``maxUnusedRange``; seen on the wire: a 16 MiB pack read
  as 0–8.0 MB and 15.7–16.8 MB). restic 0.14 rewrites every file of the snapshot
  whatever the target directory holds, so every restore reads every blob the version
  needs.

Sizes of the JSON files (index, snapshot, trees, lock, key) are made from JSON shaped
like restic's with the same entries; it is compressed with zlib (level 6) standing in
for restic's zstd, so their sizes are close to, not exactly, restic's. IDs of packs,
snapshots, index files, locks and keys are SHA-256 digests of what the replay knows
(restic hashes the encrypted file); their length is restic's.

Which ``pack_size`` matches other tools' layouts: kopia combines contents into packs
of 20–40 MB (kopia.io, "Architecture"): ``pack_size="20MiB"``; borg writes segments of
500 MiB by default (borg docs, "Internals", ``max_segment_size``): ``pack_size="500MiB"``
gives borg's object count (borg's own requests on a repository differ). restic itself
accepts 4 to 128 MiB; this replay takes 1 MiB to 1 GiB.

What it leaves out: the CPU work of chunking, hashing, compression and encryption (the
replay computes hashes but the scenario does not time them), reads of the source disk,
``--no-cache`` (then restic reads the index files and the parent's trees again), index
files split during a long backup (restic writes one when 50 000 blobs or 10 minutes
have gathered), several packers writing at once, and restic's concurrency limits (the
scenario's ``streams`` bound the requests in flight).

Why one module (~720 lines, 80 of them the rules above): a backup method is one module
(``docs/architecture.md``), one tool's request pattern read top to bottom against
restic's ``design.rst``; its helpers (chunker, packer, JSON files) serve restic alone.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import posixpath
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from attrs import define, field, frozen

from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.objects import Blob, Read, Segment
from storeprobe.backup.session import Session
from storeprobe.dataset import Dataset, File
from storeprobe.errors import ConfigurationError
from storeprobe.manifest import Piece, cut_windows, filled_reads
from storeprobe.staging import Staging
from storeprobe.units import GiB, KiB, MiB, parse_size

__all__ = ["Restic"]

#: restic's chunker: at least 512 KiB, at most 8 MiB (design.rst)
CHUNK_MIN = 512 * KiB
CHUNK_MAX = 8 * MiB
#: a chunker polynomial restic 0.14 chose (``restic cat config``): irreducible, degree 53
POLYNOMIAL = 0x2F116E2CFBAA6B
_WINDOW = 64  # restic's Rabin window, in bytes
_SPLIT_MASK = (1 << 20) - 1  # a split where the fingerprint's low 20 bits are zero
_STEP = 256 * KiB  # fingerprints are computed this many positions at a time
_MAX_UNUSED = 4 * MiB  # a restore splits a pack's read at a gap larger than this
#: restic's default target pack size since 0.14.0
PACK_SIZE = 16 * MiB

_CRYPTO = 32  # 16 B IV + 16 B Poly1305-AES MAC around every encrypted blob and file
_IV = 16
_ENTRY = 41  # pack header entry of a compressed blob: type, length, raw length, SHA-256
_ZSTD_BLOCK = 128 * KiB
_EPOCH = 1_700_000_000  # the time base of the JSON the replay writes (restic writes now)
_HOST = "storeprobe"
_USER = "root"
_FOLDERS = ("data", "index", "keys", "locks", "snapshots")


def _zstd_overhead(size: int) -> int:
    """Bytes a zstd frame adds to ``size`` bytes that do not compress."""
    content = 1 if size < 256 else 2 if size < 65536 + 256 else 4
    return 4 + 1 + content + 3 * max(1, -(-size // _ZSTD_BLOCK))


def _sealed(plain: bytes, *, compress: bool) -> bytes:
    """A repository file's bytes: (version byte + compressed) JSON, encrypted (sizes only
    matter: the bytes are IV, the JSON compressed by zlib in zstd's place, and a MAC)."""
    body = b"\x02" + zlib.compress(plain, 6) if compress else plain
    iv = hashlib.sha256(plain).digest()[:_IV]
    return iv + body + hashlib.sha256(body).digest()[:16]


def _id(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()


def _time(seconds: float) -> str:
    whole = int(seconds)
    nanos = int((seconds - whole) * 1e9) or 123456789
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{nanos:09d}Z"


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@functools.cache
def _pair_tables(polynomial: int) -> tuple[npt.NDArray[np.uint32], ...]:
    """The low 20 bits of the Rabin fingerprint's terms, two window bytes at a time:
    table ``p`` maps ``b[i - 2p] | b[i - 2p - 1] << 8`` to the low bits of
    ``b[i - 2p] * x**(16p) + b[i - 2p - 1] * x**(16p + 8)`` mod ``polynomial`` over GF(2)
    (the fingerprint is linear, so a window's is the XOR of its terms)."""
    degree = np.uint64(polynomial.bit_length() - 1)
    modulus, one, zero = np.uint64(polynomial), np.uint64(1), np.uint64(0)
    terms = np.arange(256, dtype=np.uint64)
    singles = []
    for _ in range(_WINDOW):
        singles.append((terms & np.uint64(_SPLIT_MASK)).astype(np.uint32))
        for _ in range(8):  # times x**8, reduced one bit at a time
            terms = terms << one
            terms ^= np.where((terms >> degree) & one, modulus, zero)
    words = np.arange(65536)
    return tuple(
        singles[2 * p][words & 255] ^ singles[2 * p + 1][words >> 8] for p in range(_WINDOW // 2)
    )


@functools.cache
def _low_tables(polynomial: int) -> tuple[npt.NDArray[np.uint16], ...]:
    """:func:`_pair_tables` cut to the fingerprint's low 16 bits: half the bytes to
    gather and XOR, for the first pass of :func:`_splits`."""
    return tuple((table & 0xFFFF).astype(np.uint16) for table in _pair_tables(polynomial))


def _words(values: npt.NDArray[np.uint8], low: int, high: int) -> npt.NDArray[np.intp]:
    """``b[i] | b[i - 1] << 8`` for each ``i`` from ``low - 62`` to ``high - 1``: the
    indexes of the pair tables for the windows ending at ``low`` to ``high - 1``."""
    window = values[low - _WINDOW + 1 : high].astype(np.intp)
    return window[1:] | (window[:-1] << 8)


def _splits(
    values: npt.NDArray[np.uint8], low: int, high: int, polynomial: int
) -> npt.NDArray[np.intp]:
    """The positions from ``low`` to ``high - 1`` (``low >= 63``) where the fingerprint
    of the 64 bytes ending there has its low 20 bits zero (restic's split), ascending.

    Two passes: the low 16 bits at every position, in ``uint16`` (one in 65 536 is zero),
    then the 20 bits at those alone (about 1.4 times as fast as the 20 bits everywhere)."""
    words = _words(values, low, high)
    count = high - low
    found = np.zeros(count, dtype=np.uint16)
    term = np.empty(count, dtype=np.uint16)
    for pair, table in enumerate(_low_tables(polynomial)):
        start = _WINDOW - 2 - 2 * pair
        np.take(table, words[start : start + count], out=term)
        found ^= term
    candidates = np.flatnonzero(found == 0)
    if not len(candidates):
        return candidates
    full = np.zeros(len(candidates), dtype=np.uint32)
    for pair, wide in enumerate(_pair_tables(polynomial)):
        full ^= wide[words[_WINDOW - 2 - 2 * pair + candidates]]
    return low + candidates[full == 0]  # type: ignore[no-any-return]


def _cut(data: bytes | memoryview, polynomial: int) -> list[tuple[int, int]]:
    """(offset, length) of each chunk of one file, by restic's chunker: a chunk ends after
    the first byte at least 512 KiB into it where the window's fingerprint has its low 20
    bits zero, or at 8 MiB; the file's end ends the last."""
    total = len(data)
    if total <= CHUNK_MIN:
        return [(0, total)] if total else []
    values = np.frombuffer(data, dtype=np.uint8)
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < total:
        if total - start <= CHUNK_MIN:
            chunks.append((start, total - start))
            break
        position, limit, end = start + CHUNK_MIN - 1, min(start + CHUNK_MAX, total), 0
        while position < limit and not end:
            stop = min(position + _STEP, limit)
            splits = _splits(values, position, stop, polynomial)
            if len(splits):
                end = int(splits[0]) + 1
            position = stop
        end = end or limit
        chunks.append((start, end - start))
        start = end
    return chunks


@frozen
class _Located:
    """Where a blob is: its pack, its offset there, its stored length, and its plain
    bytes' offset inside the stored ones and length."""

    pack: str
    offset: int
    length: int
    lead: int
    size: int
    kind: str


@frozen
class _Pending:
    """A blob on its way into a pack: its ID, kind, and stored segments."""

    blob_id: str
    kind: str
    segments: tuple[Segment, ...]
    #: bytes before the plain ones in the stored blob (data blobs), and the plain length
    lead: int
    size: int

    @property
    def length(self) -> int:
        return sum(s.length if isinstance(s, Piece) else len(s) for s in self.segments)


def _data_blob(blob_id: str, piece: Piece) -> _Pending:
    extra = _zstd_overhead(piece.length)
    lead = _IV + extra
    head = bytes.fromhex(blob_id)[:_IV] + bytes(extra)
    tail = bytes.fromhex(blob_id)[-16:]
    return _Pending(blob_id, "data", (head, piece, tail), lead, piece.length)


def _tree_blob(blob_id: str, plain: bytes) -> _Pending:
    return _Pending(blob_id, "tree", (_sealed(plain, compress=True),), 0, len(plain))


@define
class _Packer:
    """Blobs of one kind gathering into packs of ``target`` bytes."""

    prefix: str
    target: int
    current: list[_Pending] = field(factory=list)
    size: int = 0
    done: list[tuple[Blob, list[tuple[_Pending, int]]]] = field(factory=list)

    def add(self, blob: _Pending) -> None:
        self.current.append(blob)
        self.size += blob.length
        if self.size >= self.target:
            self.finish()

    def finish(self) -> None:
        if not self.current:
            return
        pack_id = _id("pack", *(blob.blob_id for blob in self.current))
        key = posixpath.join(self.prefix, "data", pack_id[:2], pack_id)
        header = len(self.current) * _ENTRY + _CRYPTO
        segments: list[Segment] = []
        placed: list[tuple[_Pending, int]] = []
        offset = 0
        for blob in self.current:
            segments.extend(blob.segments)
            placed.append((blob, offset))
            offset += blob.length
        segments.append(bytes.fromhex(pack_id) * (header // 32) + bytes(header % 32))
        segments.append(header.to_bytes(4, "little"))
        self.done.append((Blob(key=key, segments=segments), placed))
        self.current, self.size = [], 0


@define
class _ResticReplay(Replay):
    pack_size: int
    polynomial: int
    #: the index (and the cache): every blob stored so far, by ID
    index: dict[str, _Located] = field(factory=dict)
    #: the chunks of each file content seen, by (path, generation): (blob ID, piece)
    chunks: dict[tuple[str, int], list[tuple[str, Piece]]] = field(factory=dict)
    #: the snapshots, by dataset version: their file ID
    snapshots: dict[int, str] = field(factory=dict)
    key_id: str = ""
    serial: int = 0

    # -- the requests every operation starts and ends with -------------------------------
    def _init(self, session: Session) -> None:
        session.listing([session.key("keys"), session.key("key")])
        session.head([session.key("config")])
        key = _key_file()
        self.key_id = _id("key", key)
        session.put(
            [
                Blob.of_bytes(session.key("keys", self.key_id), key),
                Blob.of_bytes(session.key("config"), _config()),
            ]
        )

    def _open(self, session: Session) -> str:
        """Open the repository and lock it (restic's requests); the lock's key."""
        session.listing([session.key("keys"), session.key("key")])
        session.head([session.key("config")])
        session.listing([session.key("keys")])
        session.get([Read(key=session.key("keys", self.key_id))])
        session.get([Read(key=session.key("config"))])
        session.listing([session.key("locks")])
        self.serial += 1
        lock = _sealed(_lock(self.serial), compress=False)
        lock_key = session.key("locks", _id("lock", str(self.serial), lock))
        session.put([Blob.of_bytes(lock_key, lock)])
        session.listing([session.key("locks")])
        session.listing([session.key("snapshots"), session.key("index")])
        return lock_key

    # -- backup ---------------------------------------------------------------------------
    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        if not self.key_id:
            self._init(session)
        lock = self._open(session)
        data = _Packer(session.prefix, self.pack_size)
        trees = _Packer(session.prefix, self.pack_size)
        queued: set[str] = set()
        contents: dict[str, list[str]] = {}
        for file in version.files:
            ids = []
            for blob_id, piece in self._chunks(version, file, session):
                ids.append(blob_id)
                if blob_id not in self.index and blob_id not in queued:
                    queued.add(blob_id)
                    data.add(_data_blob(blob_id, piece))
            contents[file.path] = ids
        root = self._trees(version, contents, trees, queued)
        data.finish()
        trees.finish()
        packs = [*data.done, *trees.done]
        session.put([pack for pack, _ in packs])
        entries = []
        for pack, placed in packs:
            pack_id = posixpath.basename(pack.key)
            blobs = []
            for blob, offset in placed:
                self.index[blob.blob_id] = _Located(
                    pack.key, offset, blob.length, blob.lead, blob.size, blob.kind
                )
                blobs.append(
                    {
                        "id": blob.blob_id,
                        "type": blob.kind,
                        "offset": offset,
                        "length": blob.length,
                        "uncompressed_length": blob.size,
                    }
                )
            entries.append({"id": pack_id, "blobs": blobs})
        index = _sealed(_json({"packs": entries}), compress=True)
        session.put([Blob.of_bytes(session.key("index", _id("index", index)), index)])
        snapshot: dict[str, object] = {
            "time": _time(_EPOCH + 86_400 * (version.version + 1) + 43_200.5),
        }
        if previous is not None and previous.version in self.snapshots:
            snapshot["parent"] = self.snapshots[previous.version]
        snapshot |= {
            "tree": root,
            "paths": ["/srv/data"],
            "hostname": _HOST,
            "username": _USER,
        }
        sealed = _sealed(_json(snapshot), compress=True)
        snapshot_id = _id("snapshot", sealed)
        session.put([Blob.of_bytes(session.key("snapshots", snapshot_id), sealed)])
        self.snapshots[version.version] = snapshot_id
        session.delete([lock])

    def _chunks(
        self, version: Dataset, file: File, session: Session | None = None
    ) -> list[tuple[str, Piece]]:
        known = self.chunks.get((file.path, file.generation))
        if known is not None:
            return known
        polynomial = self.polynomial

        def worked(amount: int) -> None:
            if session is not None:
                session.worked("chunked", amount)

        def cut_one(data: memoryview) -> list[tuple[int, int]]:
            return _cut(data, polynomial)

        # the file is read and cut a window at a time (the same chunks as the whole),
        # each window into the same buffer: each chunk is hashed as it is cut
        read = filled_reads(version, file, worked)
        cut = [
            (hashlib.sha256(chunk).hexdigest(), offset, len(chunk))
            for offset, chunk in cut_windows(cut_one, read, file.size)
        ]
        found = [(blob_id, Piece(version, file, offset, length)) for blob_id, offset, length in cut]
        self.chunks[(file.path, file.generation)] = found
        return found

    def _trees(
        self,
        version: Dataset,
        contents: dict[str, list[str]],
        packer: _Packer,
        queued: set[str],
    ) -> str:
        """Write the tree blobs the index lacks, deepest directories first; the root's ID."""
        children: dict[str, dict[str, File | None]] = {"": {}}
        for file in version.files:
            parts = file.path.split("/")
            for depth in range(len(parts) - 1):
                parent = "/".join(parts[:depth])
                here = "/".join(parts[: depth + 1])
                children.setdefault(parent, {})[parts[depth]] = None
                children.setdefault(here, {})
            children.setdefault("/".join(parts[:-1]), {})[parts[-1]] = file
        ids: dict[str, str] = {}
        for directory in sorted(children, key=lambda d: (-d.count("/") - bool(d), d)):
            nodes = []
            for name in sorted(children[directory]):
                entry = children[directory][name]
                path = f"{directory}/{name}" if directory else name
                if entry is None:
                    nodes.append(_dir_node(name, path, ids[path]))
                else:
                    nodes.append(_file_node(name, entry, contents[entry.path]))
            plain = _json({"nodes": nodes}) + b"\n"
            tree_id = hashlib.sha256(plain).hexdigest()
            ids[directory] = tree_id
            if tree_id not in self.index and tree_id not in queued:
                queued.add(tree_id)
                packer.add(_tree_blob(tree_id, plain))
        return ids[""]

    # -- restore --------------------------------------------------------------------------
    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        if version.version not in self.snapshots:
            raise OSError(f"no snapshot of version {version.version} in the repository")
        lock = self._open(session)
        layout = {
            file.path: [blob_id for blob_id, _ in self._chunks(version, file)]
            for file in version.files
        }
        needed: dict[str, set[tuple[int, int]]] = {}
        for ids in layout.values():
            for blob_id in ids:
                where = self.index[blob_id]
                needed.setdefault(where.pack, set()).add((where.offset, where.length))
        reads = [
            Read(key=pack, start=start, stop=stop)
            for pack in sorted(needed)
            for start, stop in _ranges(sorted(needed[pack]))
        ]
        _write(version, held, directory, layout, self.index, session, reads)
        session.delete([lock])

    def __repr__(self) -> str:
        return f"<restic replay: {len(self.index)} blobs, {len(self.snapshots)} snapshots>"


def _ranges(blobs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The byte ranges restic reads for a pack's needed blobs (offset, length; sorted):
    one, split where more than 4 MiB of unneeded bytes lie between two needed blobs."""
    ranges: list[tuple[int, int]] = []
    for offset, length in blobs:
        if ranges and offset - ranges[-1][1] <= _MAX_UNUSED:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], offset + length))
        else:
            ranges.append((offset, offset + length))
    return ranges


def _write(
    version: Dataset,
    held: Dataset | None,
    directory: Path,
    layout: dict[str, list[str]],
    index: dict[str, _Located],
    session: Session,
    reads: Sequence[Read],
) -> None:
    """Read ``reads`` (the pack ranges) and write every file of ``version`` from them
    (untimed between windows), as restic's restorer does: each range is cut into blobs
    and every blob is written at each place a file needs it as the range's window
    arrives, then the range is let go, so the restore holds one window of ranges (a range
    larger than :attr:`Session.stage_above` lands in a staging file during its GET, on
    the clients that can, and its blobs are read back from there); then the files
    replace the directory's, and the files ``held`` has and ``version`` does not are
    deleted."""
    places: dict[str, list[tuple[Path, int]]] = {}  # blob id -> (file, offset) it fills
    finished: list[tuple[Path, Path]] = []
    for file in version.files:
        destination = directory / file.path
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.with_name(destination.name + ".storeprobe-part")
        temporary.write_bytes(b"")
        offset = 0
        for blob_id in layout[file.path]:
            places.setdefault(blob_id, []).append((temporary, offset))
            offset += index[blob_id].size
        finished.append((temporary, destination))
    in_pack: dict[str, list[str]] = {}
    for blob_id in places:
        in_pack.setdefault(index[blob_id].pack, []).append(blob_id)
    arriving = iter(reads)
    for bodies in session.get_staged_windows(reads, ranges=True):
        while bodies:  # each range let go once written: none held while the next is read
            _place(next(arriving), bodies.pop(0), in_pack, index, places)
    for temporary, destination in finished:
        os.replace(temporary, destination)
    if held is not None:
        for gone in {f.path for f in held.files} - set(layout):
            (directory / gone).unlink(missing_ok=True)


def _place(
    read: Read,
    data: bytes | Staging,
    in_pack: dict[str, list[str]],
    index: dict[str, _Located],
    places: dict[str, list[tuple[Path, int]]],
) -> None:
    """The blobs of one fetched pack range (bytes, or a staging file read a blob at a
    time and closed) written at every place a file needs them."""
    base = read.start or 0
    size = data.size if isinstance(data, Staging) else len(data)
    try:
        for blob_id in in_pack.get(read.key, ()):
            where = index[blob_id]
            if not base <= where.offset < base + size:
                continue
            begin = where.offset + where.lead - base
            if isinstance(data, Staging):
                blob: bytes | memoryview = os.pread(data.fd, where.size, begin)
            else:
                blob = memoryview(data)[begin : begin + where.size]
            for path, offset in places[blob_id]:
                with open(path, "r+b") as handle:
                    handle.seek(offset)
                    handle.write(blob)
    finally:
        if isinstance(data, Staging):
            data.close()


# -- restic's JSON, shaped as restic 0.14 writes it --------------------------------------
def _inode(path: str) -> int:
    return 1_000_000 + int(hashlib.sha256(path.encode()).hexdigest()[:6], 16)


def _file_node(name: str, file: File, content: Sequence[str]) -> dict[str, object]:
    mtime = _time(_EPOCH + 86_400 * file.generation)
    changed = _time(_EPOCH + 86_400 * file.generation + 3_600.25)
    return {
        "name": name,
        "type": "file",
        "mode": 0o644,
        "mtime": mtime,
        "atime": mtime,
        "ctime": changed,
        "uid": 0,
        "gid": 0,
        "user": _USER,
        "group": _USER,
        "inode": _inode(file.path),
        "device_id": 65024,
        "size": file.size,
        "links": 1,
        "content": list(content),
    }


def _dir_node(name: str, path: str, subtree: str) -> dict[str, object]:
    stamp = _time(_EPOCH + int(subtree[:5], 16) % 86_400 + 0.5)
    return {
        "name": name,
        "type": "dir",
        "mode": 2147484141,
        "mtime": stamp,
        "atime": stamp,
        "ctime": stamp,
        "uid": 0,
        "gid": 0,
        "user": _USER,
        "group": _USER,
        "inode": _inode(path),
        "device_id": 65024,
        "content": None,
        "subtree": subtree,
    }


def _lock(serial: int) -> bytes:
    return _json(
        {
            "time": _time(_EPOCH + serial + 0.5),
            "exclusive": False,
            "hostname": _HOST,
            "username": _USER,
            "pid": 100_000 + serial,
        }
    )


def _config() -> bytes:
    plain = _json({"version": 2, "id": _id("config"), "chunker_polynomial": _id("polynomial")[:14]})
    return _sealed(plain, compress=False)


def _key_file() -> bytes:
    import base64

    salt = base64.b64encode(hashlib.sha512(b"salt").digest()).decode()
    data = base64.b64encode(hashlib.sha512(b"master").digest() * 3)[:200].decode()
    return _json(
        {
            "created": _time(_EPOCH + 0.5),
            "username": _USER,
            "hostname": _HOST,
            "kdf": "scrypt",
            "N": 32768,
            "r": 8,
            "p": 5,
            "salt": salt,
            "data": data,
        }
    )


def _pack_size(value: int | str) -> int:
    size = parse_size(value)
    if not MiB <= size <= GiB:
        raise ConfigurationError(
            f"pack_size must be from 1 MiB to 1 GiB, not {size:,} B: restic takes 4 to "
            "128 MiB (--pack-size), kopia's packs are about 20 MiB, borg's segments 500 MiB"
        )
    return size


def _polynomial(value: int | str) -> int:
    try:
        number = int(value, 16) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        number = -1
    if isinstance(value, bool) or number.bit_length() != 54:
        raise ConfigurationError(
            f"polynomial must be restic's chunker polynomial, of degree 53 (hex like "
            f"'{POLYNOMIAL:x}', from `restic cat config`), not {value!r}"
        )
    return number


@frozen(kw_only=True)
class Restic(BackupMethod):
    """restic 0.14's repository: chunks packed into pack files, trees, an index and a
    snapshot per backup, a lock per operation; restores read pack ranges."""

    name: ClassVar[str] = "restic"
    tool: ClassVar[str] = "restic 0.14 (repository format 2, with its local cache)"
    folders: ClassVar[tuple[str, ...]] = _FOLDERS
    ranged_reads: ClassVar[bool] = True

    #: the target size of a pack file in bytes (restic's ``--pack-size``, 16 MiB)
    pack_size: int = field(default=PACK_SIZE, converter=_pack_size)
    #: the chunker polynomial (``restic cat config``'s ``chunker_polynomial``, hex or int)
    polynomial: int = field(default=POLYNOMIAL, converter=_polynomial)

    def replay(self) -> Replay:
        return _ResticReplay(self.pack_size, self.polynomial)

    def strategy(self, kind: StepKind) -> str:
        if kind == "backup":
            return (
                "restic: open and lock the repository, pack new chunks and trees into "
                f"{self.pack_size // MiB} MiB packs, write an index and a snapshot, unlock"
            )
        return "restic: open and lock the repository, read each needed pack's range, unlock"
