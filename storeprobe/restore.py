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
from storeprobe.verification import VerificationError

__all__ = ["assemble", "verify_restore", "write_files"]


def assemble(
    version: VersionMap,
    previous: VersionMap | None,
    directory: Path,
    unchanged: set[str],
    fetched: dict[str, bytes],
) -> None:
    """Write the restored version into ``directory`` (untimed): new and changed files from
    the fetched objects (chunks held locally read from the previous version's files),
    files gone from this version deleted."""
    local: dict[str, tuple[str, int, int]] = {}  # key -> (path, offset, length) on disk
    if previous is not None:
        for path, keys in previous.layout.items():
            offset = 0
            for key, length in keys:
                local.setdefault(key, (path, offset, length))
                offset += length
    for path, keys in version.layout.items():
        if path in unchanged:
            continue
        parts: list[bytes] = []
        for key, length in keys:
            if key in fetched:
                parts.append(fetched[key])
            else:
                source, offset, size = local[key]
                with open(directory / source, "rb") as handle:
                    handle.seek(offset)
                    parts.append(handle.read(size))
                if size != length:
                    raise OSError(f"object {key} has {size} bytes locally, expected {length}")
        destination = directory / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.with_name(destination.name + ".storeprobe-part")
        temporary.write_bytes(b"".join(parts))
        os.replace(temporary, destination)
    if previous is not None:
        for path in set(previous.layout) - set(version.layout):
            (directory / path).unlink()


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
        data = (directory / path).read_bytes()
        if len(data) != file.size or (bad := dataset.mismatch(file, data)) is not None:
            where = "its length" if len(data) != file.size else f"byte {bad}"
            raise VerificationError(
                f"verification failed: {path} differs from version {dataset.version} at {where}"
            )
