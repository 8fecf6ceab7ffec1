"""A restored version on the local disk: written by a method, then checked.

:func:`write_fetched` writes one fetched object as a file (:func:`write_all` many at
once, :func:`in_place` moves them over the files they replace) and :func:`write_files`
whole files a method restored by itself (:func:`storeprobe.assembly.assemble` builds files
from objects); :func:`verify_restore` checks that the directory holds exactly the
version, byte for byte. All run outside the timed windows.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

from attrs import define, field

from storeprobe.dataset import Dataset, File, Tree
from storeprobe.staging import Staging
from storeprobe.verification import VerificationError

#: files a restore writes (or renames) at once, untimed: making a file is kernel work
#: of its own (ext4 on this machine's virtual disk: about 0.7 ms of system CPU per new
#: file; 5 600 files of 30 KB in 4.42 s from one thread, 2.07 s from 4, 1.90 s from 16
#: on 2 cores; tmpfs: 5 us a file)
WRITERS = 8
#: bytes of a restored file read and checked at a time
_VERIFY_CHUNK = 8 * 1024 * 1024
#: how a restored file is opened for writing: made or emptied
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC

__all__ = [
    "SETTLED_NS",
    "WRITERS",
    "Verified",
    "in_place",
    "verify_restore",
    "write_all",
    "write_fetched",
    "write_files",
]

_Item = TypeVar("_Item")


def write_fetched(path: Path, body: bytes | memoryview | Staging) -> None:
    """Write ``body`` (bytes, or a staging file a large read landed in, copied 1 MiB at
    a time and closed) to ``path``, making its folder when it is missing (untimed)."""
    try:
        try:
            fd = os.open(path, _CREATE, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, _CREATE, 0o644)
        try:
            chunks = [body] if not isinstance(body, Staging) else (c for _, c in body.chunks())
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    finally:
        if isinstance(body, Staging):
            body.close()


def write_all(files: Sequence[tuple[Path, bytes | memoryview | Staging]]) -> None:
    """:func:`write_fetched` each ``(path, body)``, :data:`WRITERS` at once (untimed);
    every body's staging file is closed, and the first error raised, once all are done."""
    _at_once(lambda item: write_fetched(*item), files)


def in_place(moves: Sequence[tuple[Path, Path | None]]) -> None:
    """Each ``(temporary, destination)``: the temporary file renamed over the
    destination, or deleted where the destination is None; :data:`WRITERS` at once."""
    _at_once(lambda move: _move(*move), moves)


def _move(temporary: Path, destination: Path | None) -> None:
    if destination is None:
        temporary.unlink(missing_ok=True)
    else:
        os.replace(temporary, destination)


def _at_once(work: Callable[[_Item], None], items: Sequence[_Item]) -> None:
    if len(items) < 2:
        for item in items:
            work(item)
        return
    threads = min(WRITERS, len(items))
    with ThreadPoolExecutor(threads, thread_name_prefix="storeprobe-write") as pool:
        # every item is done before an error is raised (Executor.map would cancel those
        # not yet started at the first error, leaving their staging files open)
        done = [pool.submit(work, item) for item in items]
        wait(done)
    for future in done:
        future.result()  # the first error, in the items' order


def write_files(directory: Path, files: Mapping[str, bytes], removed: Iterable[str]) -> None:
    """Write ``files`` (relative path → bytes) into ``directory``, each through a
    temporary name, and delete the ``removed`` paths (untimed)."""
    for path, data in files.items():
        destination = directory / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.with_name(destination.name + ".storeprobe-part")
        temporary.write_bytes(data)
        os.replace(temporary, destination)
    for path in removed:
        (directory / path).unlink()


#: how long before its check a file must have last changed for its stat to vouch for it
#: later (2 s: beyond any file system's timestamp granularity, FAT's 2 s included)
SETTLED_NS = 2_000_000_000


@define
class Verified:
    """What verification found over the restores of one scenario, so each next restore
    re-reads and regenerates only what could differ (tree files; an image is compared
    byte for byte every time).

    - ``digests``: the first 16 bytes of the SHA-256 of each tree file's bytes (keyed by
      its tree's seed and its :class:`File`, which fix its bytes) once checked byte for
      byte: a later version keeping the file is read and its digest compared instead of
      its bytes being generated again (a differing digest is searched byte for byte
      for the first bad byte);
    - ``settled``: each path checked whose file had not changed for :data:`SETTLED_NS`
      before it was checked, with a hash of the :class:`File` and its inode, size,
      modification and change times (ns): while they are the same, the file has not
      been written since (any write sets its change time) and it is not read again.
    """

    digests: dict[tuple[int, File], bytes] = field(factory=dict)
    settled: dict[str, int] = field(factory=dict)
    #: the wall clock in ns, as file times are kept (injected in tests)
    clock: Callable[[], int] = time.time_ns


def verify_restore(dataset: Dataset, directory: Path, verified: Verified | None = None) -> None:
    """Raise :class:`~storeprobe.verification.VerificationError` unless ``directory``
    holds exactly ``dataset``'s files, byte for byte. ``verified`` (kept by the caller
    across the restores of one scenario) spares a tree file what an earlier check
    already proved (see :class:`Verified`)."""
    expected = {file.path: file for file in dataset.files}
    found = set(_files_under(str(directory), ""))
    if found != set(expected):
        extra, missing = sorted(found - set(expected)), sorted(set(expected) - found)
        raise VerificationError(
            f"restore differs: {len(extra)} extra, {len(missing)} missing files"
        )
    known = verified if isinstance(dataset, Tree) else None
    # one buffer for every file, read 8 MiB at a time: a file of any size is checked in
    # bounded memory, and a tree's many small files make no buffer each
    buffer = memoryview(bytearray(_VERIFY_CHUNK))
    for path, file in expected.items():
        where = _checked(dataset, file, path, os.path.join(directory, path), buffer, known)
        if where is not None:
            raise VerificationError(
                f"verification failed: {path} differs from version {dataset.version} at {where}"
            )


def _checked(
    dataset: Dataset,
    file: File,
    name: str,
    path: str,
    buffer: memoryview,
    verified: Verified | None,
) -> str | None:
    """:func:`_check_file`, unless ``verified`` says the file at ``path`` (``name`` in
    the directory) is the one checked before and unchanged since; then remembered."""
    if verified is None:
        return _check_file(dataset, file, path, buffer, None)
    now = verified.clock()
    stat = os.stat(path)
    same = hash((file, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))
    if verified.settled.get(name) == same:
        return None
    verified.settled.pop(name, None)
    where = _check_file(dataset, file, path, buffer, verified.digests)
    if where is None and stat.st_ctime_ns < now - SETTLED_NS:
        verified.settled[name] = same
    return where


def _check_file(
    dataset: Dataset,
    file: File,
    path: str,
    buffer: memoryview,
    digests: dict[tuple[int, File], bytes] | None,
) -> str | None:
    """Where the file at ``path`` first differs from ``file`` (``"its length"``, ``"byte
    N"``), or None; by its digest where ``digests`` has one (see :class:`Verified`)."""
    key = (dataset.seed, file)
    known = None if digests is None else digests.get(key)
    digest = None if digests is None else hashlib.sha256()
    where = None
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.fstat(fd).st_size != file.size:
            return "its length"
        offset = 0
        while got := os.readv(fd, [buffer]):
            if digest is not None:
                digest.update(buffer[:got])
            if known is None and (bad := dataset.mismatch(file, buffer[:got], offset)) is not None:
                return f"byte {bad}"
            offset += got
    finally:
        os.close(fd)
    if digests is not None and digest is not None:
        if known is None:
            digests[key] = digest.digest()[:16]
        elif digest.digest()[:16] != known:  # differs: find the first bad byte
            where = _check_file(dataset, file, path, buffer, None) or "its digest"
    return where


def _files_under(folder: str, relative: str) -> Iterator[str]:
    """The relative path (``/``-separated) of every file under ``folder``, found with
    ``os.scandir`` (one call per folder, no stat per entry)."""
    with os.scandir(folder) as entries:
        for entry in entries:
            name = f"{relative}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                yield from _files_under(entry.path, name + "/")
            elif entry.is_file():
                yield name
