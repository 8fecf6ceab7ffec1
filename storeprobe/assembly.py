"""A restored version assembled on the local disk from the objects a restore fetched.

:func:`assemble` writes the files of a version that are new or changed into a local
directory from the objects a restore fetched (objects the directory already holds, in
files of the previous version, are read from there), patches in place a file whose
objects mostly stay where they were, and deletes files the version no longer has. It
runs outside the timed windows.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Set
from pathlib import Path

from attrs import define, field

from storeprobe.manifest import VersionMap

__all__ = ["assemble"]


def assemble(
    version: VersionMap,
    previous: VersionMap | None,
    directory: Path,
    unchanged: set[str],
    fetched: Iterable[tuple[str, bytes | memoryview]],
) -> None:
    """Write the restored version into ``directory`` (untimed): new and changed files from
    the fetched objects (objects held locally read from the files that hold them), files
    gone from this version deleted.

    A changed file whose objects stay where they were in the previous version's file,
    but for some (an image with blocks rewritten in place), is patched: only the objects
    that differ are written, over the old ones, and the file cut to its new length; any
    other file is written whole under a temporary name, then renamed over the old one.
    A patch writes only what changed where a whole file would write (and first read back)
    every byte: a 4 GiB image with 1 % of its blocks rewritten keeps about half its
    4 MiB chunks in place.

    ``fetched`` yields ``(key, bytes)`` in the order the version first uses each key,
    and is consumed as the files are written: an object is held only until it is written
    (a key used again is read back from the file it went into), so a restore that reads
    in windows holds about one window's bytes."""
    held = _Held()
    if previous is not None:
        for path, keys in previous.layout.items():
            held.place(directory / path, keys)
    arrivals = _Arrivals(iter(fetched))
    changing = [(path, keys) for path, keys in version.layout.items() if path not in unchanged]
    uses = Counter(key for _, keys in changing for key, _ in keys)
    kept = directory / ".storeprobe-kept"  # objects a later file needs, from one rewritten
    try:
        for path, keys in changing:
            destination = directory / path
            uses.subtract(key for key, _ in keys)
            _keep(
                held, destination, [key for key in held.lost_with(destination) if uses[key]], kept
            )
            old = None if previous is None else previous.layout.get(path)
            if old is not None and _patchable(destination, old, keys, held):
                _patch(destination, old, keys, held, arrivals)
            else:
                _rewrite(destination, keys, held, arrivals)
            held.place(destination, keys)
    finally:
        kept.unlink(missing_ok=True)
    if previous is not None:
        for path in set(previous.layout) - set(version.layout):
            (directory / path).unlink()


@define
class _Held:
    """Where each object the directory holds is: its places (file, offset, length), the
    first one found first; a file written again takes back every place it had."""

    places: dict[str, list[tuple[Path, int, int]]] = field(factory=dict)
    keys_of: dict[Path, list[str]] = field(factory=dict)

    def place(self, path: Path, keys: list[tuple[str, int]]) -> None:
        """``path`` now holds ``keys`` (its layout, in order), and nothing else."""
        for key in self.keys_of.pop(path, ()):
            kept = [place for place in self.places[key] if place[0] != path]
            if kept:
                self.places[key] = kept
            else:
                del self.places[key]
        offset = 0
        for key, length in keys:
            self.places.setdefault(key, []).append((path, offset, length))
            offset += length
        self.keys_of[path] = list(dict.fromkeys(key for key, _ in keys))

    def lost_with(self, path: Path) -> list[str]:
        """The keys held in ``path`` alone."""
        return [
            key
            for key in self.keys_of.get(path, ())
            if all(place[0] == path for place in self.places[key])
        ]

    def where(
        self, key: str, avoid: Path | None = None, stay: Set[int] = frozenset()
    ) -> tuple[Path, int, int] | None:
        """The first place of ``key`` outside the file ``avoid``, else inside it at an
        offset in ``stay``, or None."""
        places = self.places.get(key, ())
        outside = next((p for p in places if p[0] != avoid), None)
        return outside or next((p for p in places if p[0] == avoid and p[1] in stay), None)


@define
class _Arrivals:
    """The fetched objects, taken in the order the version first uses them."""

    arriving: Iterator[tuple[str, bytes | memoryview]]
    pending: dict[str, bytes | memoryview] = field(factory=dict)

    def take(self, key: str) -> bytes | memoryview:
        while key not in self.pending:
            try:
                arrived, body = next(self.arriving)
            except StopIteration:
                raise OSError(
                    f"object {key} is neither held in the directory nor among those fetched"
                ) from None
            self.pending[arrived] = body
        return self.pending.pop(key)


def _keep(held: _Held, path: Path, keys: list[str], kept: Path) -> None:
    """Copy ``keys`` from ``path`` (about to be written over) to the end of ``kept``,
    where a later file of the version reads them."""
    if not keys:
        return
    with open(kept, "ab") as out:
        for key in keys:
            place = held.where(key)
            assert place is not None
            offset = out.tell()
            out.write(_read(*place))
            held.places[key].append((kept, offset, place[2]))
            held.keys_of.setdefault(kept, []).append(key)


def _offsets(keys: list[tuple[str, int]]) -> dict[int, tuple[str, int]]:
    """Each object of a file's layout by its offset in the file."""
    at: dict[int, tuple[str, int]] = {}
    offset = 0
    for key, length in keys:
        at[offset] = (key, length)
        offset += length
    return at


def _patchable(
    destination: Path, old: list[tuple[str, int]], keys: list[tuple[str, int]], held: _Held
) -> bool:
    """True if ``destination`` holds ``old`` in full, keeps at least one object in place,
    and nothing it gets anew must be read from a place of its own that the patch writes
    over (those come fetched, from another file, or from where they stay)."""
    try:
        if os.stat(destination).st_size != sum(length for _, length in old):
            return False
    except FileNotFoundError:
        return False
    staying = _staying(old, keys)
    if not staying:
        return False
    earlier: set[str] = set()
    for offset, (key, _) in _offsets(keys).items():
        new = offset not in staying and key not in earlier and key in held.places
        if new and held.where(key, destination, staying) is None:
            return False
        earlier.add(key)
    return True


def _staying(old: list[tuple[str, int]], keys: list[tuple[str, int]]) -> set[int]:
    """The offsets where ``keys`` has the object ``old`` has there, of the same length."""
    before = _offsets(old)
    return {offset for offset, item in _offsets(keys).items() if before.get(offset) == item}


def _patch(
    destination: Path,
    old: list[tuple[str, int]],
    keys: list[tuple[str, int]],
    held: _Held,
    arrivals: _Arrivals,
) -> None:
    """Write over ``destination`` (holding ``old``) the objects of ``keys`` that are not
    already at their offset, then cut it to its new length (see :func:`_patchable`)."""
    staying = _staying(old, keys)
    fd = os.open(destination, os.O_RDWR)
    try:
        here: dict[str, tuple[int, int]] = {}
        offset = 0
        for key, length in keys:
            if offset not in staying:
                data = _source(key, length, (fd, here), held, (destination, staying), arrivals)
                _write_at(fd, data, offset)
            here.setdefault(key, (offset, length))
            offset += length
        os.ftruncate(fd, offset)
    finally:
        os.close(fd)


def _rewrite(
    destination: Path, keys: list[tuple[str, int]], held: _Held, arrivals: _Arrivals
) -> None:
    """Write ``destination`` whole under a temporary name, then rename it over the old."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    temporary = destination.with_name(destination.name + ".storeprobe-part")
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)  # read back: pread
    try:
        here: dict[str, tuple[int, int]] = {}
        offset = 0
        for key, length in keys:
            _write_at(fd, _source(key, length, (fd, here), held, None, arrivals), offset)
            here.setdefault(key, (offset, length))
            offset += length
    finally:
        os.close(fd)
    os.replace(temporary, destination)


def _source(
    key: str,
    length: int,
    written: tuple[int, dict[str, tuple[int, int]]],
    held: _Held,
    patched: tuple[Path, set[int]] | None,
    arrivals: _Arrivals,
) -> bytes | memoryview:
    """The bytes of ``key``: from the file being written (``written``: its descriptor
    and where it put each key) if it holds them already, else from a place held (in the
    file being ``patched``, only at the offsets that stay), else fetched; a local copy
    of another length is refused."""
    fd, here = written
    if key in here:
        at, size = here[key]
        return os.pread(fd, size, at)
    place = held.where(key) if patched is None else held.where(key, *patched)
    if place is None:
        return arrivals.take(key)
    data = _read(*place)
    if len(data) != length:
        raise OSError(f"object {key} has {len(data)} bytes locally, expected {length}")
    return data


def _write_at(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _read(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read(length)
