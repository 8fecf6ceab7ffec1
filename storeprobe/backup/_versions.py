"""Shared by the methods that store a manifest per version (``files``, ``chunks``): the
manifest written after the objects, and a restore that reads it, then the objects the
directory lacks."""

from __future__ import annotations

import json
from pathlib import Path

from storeprobe.assembly import assemble
from storeprobe.backup.objects import Blob, Read
from storeprobe.backup.session import Session
from storeprobe.manifest import VersionMap

__all__ = ["put_version", "restore_version"]


def put_version(session: Session, version: VersionMap, needed: list[str]) -> None:
    """Upload the objects ``needed`` (one window), then the version's manifest (one)."""
    session.put([Blob(key=key, segments=(version.objects[key].piece,)) for key in needed])
    session.put([Blob.of_bytes(version.manifest_key, version.manifest())])


def restore_version(
    session: Session, version: VersionMap, previous: VersionMap | None, directory: Path
) -> None:
    """GET the manifest, then every object of a new or changed file that ``directory``
    (holding ``previous``) lacks, in windows of the session's budget; write the version's
    files as the windows arrive."""
    (body,) = session.get([Read(key=version.manifest_key)])
    if json.loads(body)["version"] != version.dataset.version:
        raise OSError(f"manifest {version.manifest_key} names another version")
    unchanged: set[str] = set()
    have: set[str] = set()
    if previous is not None:
        unchanged = {
            path for path, keys in previous.layout.items() if version.layout.get(path) == keys
        }
        have = {key for keys in previous.layout.values() for key, _ in keys}
    wanted: dict[str, None] = {}
    for path, keys in version.layout.items():
        if path not in unchanged:
            wanted.update((key, None) for key, _ in keys if key not in have)
    order = iter(wanted)
    # the objects arrive a window at a time and are written (and let go) as they arrive
    fetched = ((next(order), body) for body in session.get_each([Read(key=k) for k in wanted]))
    assemble(version, previous, directory, unchanged, fetched)
