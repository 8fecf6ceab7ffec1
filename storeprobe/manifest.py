"""What a backup stores for one dataset version, and where each stored byte comes from.

Two maps of a version onto objects, one per backup method:

- :func:`map_files`: one object per file and content generation,
  ``<prefix>/files/<quoted path>@<generation>`` (an unchanged file keeps its object);
- :func:`map_chunks`: every file cut into content-defined chunks (:class:`Chunking`,
  FastCDC through the ``fastcdc`` package), one object per distinct chunk named by its
  BLAKE2b-128 hash, ``<prefix>/chunks/<hash>``.

Both give a :class:`VersionMap`: the objects the version needs, each file's objects in
order, and the manifest (JSON) naming them. Bodies are never held: a :class:`Piece` says
which bytes of which file an object is, and :class:`Pieces` regenerates them on demand.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import quote

from attrs import frozen

from storeprobe.dataset import Dataset, File
from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.units import MiB, parse_size

__all__ = [
    "CUT_WINDOW",
    "HASH_THREADS",
    "HASH_TOGETHER",
    "Blobs",
    "Chunking",
    "Piece",
    "Pieces",
    "Stored",
    "VersionMap",
    "cut_windows",
    "digest_windows",
    "file_key",
    "filled_reads",
    "map_chunks",
    "map_files",
]


#: bytes of a file a chunker reads at a time
CUT_WINDOW = 64 * MiB
#: a window holding more bytes than this has its chunks hashed on several threads
HASH_TOGETHER = 8 * MiB
#: threads that hash a window's chunks at once: the machine's cores, at most 4
HASH_THREADS = min(4, os.cpu_count() or 1)

_Bytes = TypeVar("_Bytes", bytes, memoryview)


@frozen(kw_only=True)
class Chunking:
    """Content-defined chunk sizes for the ``chunks`` method, in bytes.

    ``average`` is FastCDC's target; chunks are at least ``average / 4`` and at most
    ``average × 4`` bytes (the end of a file makes a shorter last chunk).
    """

    average: int = 4 * MiB

    def __attrs_post_init__(self) -> None:
        if self.average < 256 or self.average > 256 * MiB:
            raise ConfigurationError(
                f"chunk average must be from 256 B to 256 MiB, not {self.average}"
            )

    @classmethod
    def of(cls, average: int | str) -> Chunking:
        """``Chunking.of("1MiB")``."""
        return cls(average=parse_size(average))

    def cut(self, data: bytes | memoryview) -> list[tuple[int, int]]:
        """(offset, length) of each chunk of ``data``."""
        try:
            from fastcdc import fastcdc
        except ImportError:
            raise MissingDependencyError(
                "the chunks method needs fastcdc, which is not installed: "
                "pip install 'storeprobe[backup]'"
            ) from None
        if not data:
            return [(0, 0)]
        return [
            (chunk.offset, chunk.length)
            for chunk in fastcdc(
                data,
                min_size=max(64, self.average // 4),
                avg_size=self.average,
                max_size=self.average * 4,
                fat=False,
            )
        ]

    def cut_windows(
        self, read: Callable[[int, int], _Bytes], size: int, window: int = CUT_WINDOW
    ) -> Iterator[tuple[int, _Bytes]]:
        """(offset, bytes) of each chunk of the ``size`` bytes ``read(start, stop)``
        gives, read ``window`` bytes at a time (at least eight average chunks): the chunks
        :meth:`cut` finds in the whole (see :func:`cut_windows`)."""
        if size == 0:
            yield 0, read(0, 0)
            return
        yield from cut_windows(self.cut, read, size, max(window, self.average * 8))

    def digest_windows(
        self,
        read: Callable[[int, int], _Bytes],
        size: int,
        digest: Callable[[_Bytes], str],
        pool: Executor | None,
    ) -> Iterator[tuple[int, int, str]]:
        """(offset, length, digest) of each chunk of :meth:`cut_windows`, a window's
        chunks hashed on ``pool`` (see :func:`digest_windows`)."""
        if size == 0:
            yield 0, 0, digest(read(0, 0))
            return
        window = max(CUT_WINDOW, self.average * 8)
        yield from digest_windows(self.cut, read, size, digest, pool, window)


def cut_windows(
    cut: Callable[[_Bytes], list[tuple[int, int]]],
    read: Callable[[int, int], _Bytes],
    size: int,
    window: int = CUT_WINDOW,
) -> Iterator[tuple[int, _Bytes]]:
    """(offset, bytes) of each chunk ``cut`` finds in the ``size`` bytes that
    ``read(start, stop)`` gives, read ``window`` bytes at a time (more than two of the
    chunker's largest chunks): a window's last chunk may end where the window does, so
    it is cut again from its start in the next window. The same chunks as ``cut`` of the
    whole, for a chunker whose cut depends only on the bytes since the chunk began
    (FastCDC, restic's Rabin chunker); one window is held."""
    for start, data, cuts in _windows(cut, read, size, window):
        for offset, length in cuts:
            yield start + offset, data[offset : offset + length]


def digest_windows(
    cut: Callable[[_Bytes], list[tuple[int, int]]],
    read: Callable[[int, int], _Bytes],
    size: int,
    digest: Callable[[_Bytes], str],
    pool: Executor | None,
    window: int = CUT_WINDOW,
) -> Iterator[tuple[int, int, str]]:
    """(offset, length, ``digest`` of its bytes) of each chunk :func:`cut_windows` gives;
    a window's chunks are hashed on ``pool``'s threads at once when the window holds more
    than :data:`HASH_TOGETHER` bytes (hashlib lets go of the GIL), else one by one here.

    A 64 MiB window of a disk image, FastCDC at 4 MiB: BLAKE2b took 1.15 s a GiB in one
    thread and 0.66 s on two cores; a tree's small files would pay more for the hand-off
    than they save."""
    for start, data, cuts in _windows(cut, read, size, window):
        views = [data[offset : offset + length] for offset, length in cuts]
        if pool is not None and len(views) > 1 and len(data) > HASH_TOGETHER:
            digests = pool.map(digest, views)
        else:
            digests = map(digest, views)
        for (offset, length), found in zip(cuts, digests, strict=True):
            yield start + offset, length, found
        del views


def _windows(
    cut: Callable[[_Bytes], list[tuple[int, int]]],
    read: Callable[[int, int], _Bytes],
    size: int,
    window: int,
) -> Iterator[tuple[int, _Bytes, list[tuple[int, int]]]]:
    """(start, bytes, cuts) of each window :func:`cut_windows` reads: its chunks'
    (offset, length) within the window, the last one left for the next window unless
    the file ends there."""
    start = 0
    while start < size:
        stop = min(start + window, size)
        data = read(start, stop)
        cuts = cut(data)
        if stop < size:
            cuts = cuts[:-1]
        yield start, data, cuts
        start += cuts[-1][0] + cuts[-1][1]
        del data  # before the next window is read: one window held, not two


def filled_reads(
    dataset: Dataset, file: File, worked: Callable[[int], None] | None = None
) -> Callable[[int, int], memoryview]:
    """``read(start, stop)`` for :func:`cut_windows`: bytes ``[start, stop)`` of ``file``
    generated into one buffer reused from read to read (grown when a read is longer),
    each valid until the next read; ``worked`` is told the bytes of each.

    A chunker's window read into a fresh buffer each time cost its allocation and its
    pages' first touch every window (40 ms for 64 MiB here); its chunks are hashed as
    they are cut, so one buffer serves every window of the file."""
    held = [memoryview(bytearray(0))]

    def read(start: int, stop: int) -> memoryview:
        if stop - start > len(held[0]):
            held[0] = memoryview(bytearray(stop - start))
        view = held[0][: stop - start]
        dataset.fill(file, start, view)
        if worked is not None:
            worked(stop - start)
        return view

    return read


# -- where the bytes come from ---------------------------------------------------------
@frozen
class Piece:
    """Bytes ``[offset, offset + length)`` of one file of one dataset version."""

    dataset: Dataset
    file: File
    offset: int
    length: int


class Pieces:
    """A :class:`~storeprobe.request.Payloads` over pieces of dataset files."""

    def __init__(self, pieces: Sequence[Piece]) -> None:
        self.pieces = list(pieces)

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        piece = self.pieces[index]
        piece.dataset.fill(piece.file, piece.offset + start, out)

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        return bytearray(self.payload_bytes(index, start, stop))

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        piece = self.pieces[index]
        stop = piece.length if stop is None else stop
        return piece.dataset.payload(piece.file, piece.offset + start, piece.offset + stop)


@frozen(kw_only=True)
class Stored:
    """One stored object a version needs: its key, size, and where its bytes come from."""

    key: str
    size: int
    piece: Piece


@frozen(kw_only=True)
class VersionMap:
    """What one version needs on the target, per method: its objects and each file's."""

    dataset: Dataset
    #: every object the version needs, by key (a file, or a distinct chunk)
    objects: dict[str, Stored]
    #: each file's objects in order: (key, length)
    layout: dict[str, list[tuple[str, int]]]
    manifest_key: str

    def manifest(self) -> bytes:
        """The manifest object: each file's size and objects (JSON)."""
        return json.dumps(
            {
                "version": self.dataset.version,
                "files": {
                    file.path: {"size": file.size, "objects": self.layout[file.path]}
                    for file in self.dataset.files
                },
            },
            sort_keys=True,
        ).encode()


def file_key(prefix: str, file: File) -> str:
    return f"{prefix}/files/{quote(file.path, safe='')}@{file.generation}"


def map_files(prefix: str, dataset: Dataset) -> VersionMap:
    objects: dict[str, Stored] = {}
    layout: dict[str, list[tuple[str, int]]] = {}
    for file in dataset.files:
        key = file_key(prefix, file)
        objects[key] = Stored(key=key, size=file.size, piece=Piece(dataset, file, 0, file.size))
        layout[file.path] = [(key, file.size)]
    return VersionMap(
        dataset=dataset,
        objects=objects,
        layout=layout,
        manifest_key=f"{prefix}/manifests/v{dataset.version:04d}.json",
    )


def map_chunks(
    prefix: str,
    dataset: Dataset,
    chunking: Chunking,
    worked: Callable[[int], None] | None = None,
    *,
    previous: VersionMap | None = None,
) -> VersionMap:
    """Each file of ``dataset`` cut into chunks, one object per distinct chunk (named by
    its BLAKE2b-128); ``worked`` is told the bytes of each window read and cut.

    ``previous`` (the map of an earlier version under the same prefix and chunking) only
    saves memory: a chunk it holds keeps its :class:`Stored` (the same hash, the same
    bytes), and a file whose chunks are the same keeps its list, so the maps of many
    versions of a mostly unchanged tree share what they have in common (a version then
    costs about a hundred bytes per unchanged file instead of about 550)."""
    objects: dict[str, Stored] = {}
    layout: dict[str, list[tuple[str, int]]] = {}
    known = {} if previous is None else previous.objects
    before = {} if previous is None else previous.layout
    pool = (
        ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="storeprobe-hash")
        if HASH_THREADS > 1
        else None  # one core: hashed here
    )
    try:
        for file in dataset.files:
            keys = _chunk_keys(prefix, dataset, file, chunking, (objects, known), worked, pool)
            same = before.get(file.path)
            layout[file.path] = same if same == keys else keys
    finally:
        if pool is not None:
            pool.shutdown()
    return VersionMap(
        dataset=dataset,
        objects=objects,
        layout=layout,
        manifest_key=f"{prefix}/manifests/v{dataset.version:04d}.json",
    )


def _chunk_keys(
    prefix: str,
    dataset: Dataset,
    file: File,
    chunking: Chunking,
    stores: tuple[dict[str, Stored], Mapping[str, Stored]],
    worked: Callable[[int], None] | None,
    pool: Executor | None,
) -> list[tuple[str, int]]:
    """``file``'s chunks as (key, length); each new one added to the version's objects
    (``stores[0]``), as the earlier version's :class:`Stored` (``stores[1]``) when the
    same."""
    objects, known = stores
    keys: list[tuple[str, int]] = []
    # each window's chunks hashed as it is cut: one buffer serves the file's windows
    read = filled_reads(dataset, file, worked)
    for offset, length, digest in chunking.digest_windows(read, file.size, _blake2b_128, pool):
        key = f"{prefix}/chunks/{digest}"
        if key not in objects:
            stored = known.get(key)
            objects[key] = (
                Stored(key=key, size=length, piece=Piece(dataset, file, offset, length))
                if stored is None or stored.size != length
                else stored
            )
        key = objects[key].key  # one string per chunk, whatever the versions
        keys.append((key, length))
    return keys


def _blake2b_128(chunk: memoryview) -> str:
    return hashlib.blake2b(chunk, digest_size=16).hexdigest()


class Blobs:
    """A :class:`~storeprobe.request.Payloads` over bytes already made (a manifest)."""

    def __init__(self, items: Sequence[bytes]) -> None:
        self.items = list(items)

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        out[:] = self.items[index][start : start + len(out)]

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        return bytearray(self.payload_bytes(index, start, stop))

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        return self.items[index][start:stop]
