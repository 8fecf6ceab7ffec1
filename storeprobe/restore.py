"""A restored version on the local disk: written from fetched objects, then checked.

:func:`assemble` writes the files of a version that are new or changed into a local
directory from the objects a restore fetched (objects the directory already holds, in
files of the previous version, are read from there), and deletes files the version no
longer has; :func:`write_files` writes whole files a method restored by itself.
:func:`verify_restore` checks that the directory holds exactly the version,
byte for byte. Both run outside the timed windows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from storeprobe.dataset import Dataset
from storeprobe.manifest import VersionMap
from storeprobe.staging import Staging
from storeprobe.verification import VerificationError

#: bytes of a restored file read and checked at a time
_VERIFY_CHUNK = 8 * 1024 * 1024

__all__ = ["assemble", "verify_restore", "write_fetched", "write_files"]


def assemble(
    version: VersionMap,
    previous: VersionMap | None,
    directory: Path,
    unchanged: set[str],
    fetched: Iterable[tuple[str, bytes | memoryview]],
) -> None:
    """Write the restored version into ``directory`` (untimed): new and changed files from
    the fetched objects (chunks held locally read from the previous version's files),
    files gone from this version deleted.

    ``fetched`` yields ``(key, bytes)`` in the order the version first uses each key,
    and is consumed as the files are written: an object is held only until it is written
    (a key used again is read back from the file it went into), so a restore that reads
    in windows holds about one window's bytes."""
    local: dict[str, tuple[Path, int, int]] = {}  # key -> (file, offset, length) on disk
    if previous is not None:
        for path, keys in previous.layout.items():
            offset = 0
            for key, length in keys:
                local.setdefault(key, (directory / path, offset, length))
                offset += length
    arriving = iter(fetched)
    pending: dict[str, bytes | memoryview] = {}
    for path, keys in version.layout.items():
        if path in unchanged:
            continue
        destination = directory / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.with_name(destination.name + ".storeprobe-part")
        here: dict[str, tuple[int, int]] = {}  # keys already in this file
        with open(temporary, "wb") as out:
            offset = 0
            for key, length in keys:
                if key in here:
                    out.flush()
                    data: bytes | memoryview = _read(temporary, *here[key])
                elif key in local:
                    data = _read(*local[key])
                    if len(data) != length:
                        raise OSError(
                            f"object {key} has {len(data)} bytes locally, expected {length}"
                        )
                else:
                    while key not in pending:
                        arrived, body = next(arriving)
                        pending[arrived] = body
                    data = pending.pop(key)
                out.write(data)
                here.setdefault(key, (offset, len(data)))
                offset += len(data)
        os.replace(temporary, destination)
        for key, (at, length) in here.items():
            local.setdefault(key, (destination, at, length))
    if previous is not None:
        for path in set(previous.layout) - set(version.layout):
            (directory / path).unlink()


def _read(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read(length)


def write_fetched(path: Path, body: bytes | memoryview | Staging) -> None:
    """Write ``body`` (bytes, or a staging file a large read landed in, copied 1 MiB at
    a time and closed) to ``path``, making its folder (untimed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(body, bytes | memoryview):
        path.write_bytes(body)
        return
    try:
        with open(path, "wb") as out:
            for _, chunk in body.chunks():
                out.write(chunk)
    finally:
        body.close()


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


def verify_restore(dataset: Dataset, directory: Path) -> None:
    """Raise :class:`~storeprobe.verification.VerificationError` unless ``directory``
    holds exactly ``dataset``'s files, byte for byte."""
    expected = {file.path: file for file in dataset.files}
    found = {
        str(path.relative_to(directory)).replace(os.sep, "/")
        for path in directory.rglob("*")
        if path.is_file()
    }
    if found != set(expected):
        extra, missing = sorted(found - set(expected)), sorted(set(expected) - found)
        raise VerificationError(
            f"restore differs: {len(extra)} extra, {len(missing)} missing files"
        )
    for path, file in expected.items():
        # read 8 MiB at a time, so a file of any size is checked in bounded memory
        where = None
        with open(directory / path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size != file.size:
                where = "its length"
            offset = 0
            while where is None and (data := handle.read(_VERIFY_CHUNK)):
                if (bad := dataset.mismatch(file, data, offset)) is not None:
                    where = f"byte {bad}"
                offset += len(data)
        if where is not None:
            raise VerificationError(
                f"verification failed: {path} differs from version {dataset.version} at {where}"
            )
