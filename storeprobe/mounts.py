"""Which filesystem holds a local path, and the notice when it is memory, not a disk.

A temporary directory on ``tmpfs`` (the default ``TMPDIR`` of many containers and of
some distributions' ``/tmp``) holds its files in RAM: a probe of it measures memory
copies, not a disk. :func:`filesystem_type` reads ``/proc/self/mountinfo`` (Linux: the
mount whose mount point is the longest prefix of the resolved path);
:func:`memory_notice` turns a memory filesystem into a
:attr:`~storeprobe.notices.Code.MEMORY_FILESYSTEM` warning.
"""

from __future__ import annotations

from pathlib import Path

from storeprobe.notices import Code, Notice

__all__ = ["MEMORY_FILESYSTEMS", "filesystem_type", "memory_notice"]

#: filesystem types whose files live in RAM
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})

_MOUNTINFO = Path("/proc/self/mountinfo")


def filesystem_type(path: str | Path, mountinfo: Path = _MOUNTINFO) -> str | None:
    """The type of the filesystem holding ``path`` (``"ext4"``, ``"tmpfs"``), or None
    where ``mountinfo`` cannot be read (not Linux)."""
    resolved = str(Path(path).resolve())
    try:
        lines = mountinfo.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        fields = line.split()
        if "-" not in fields or len(fields) < 5:
            continue
        mount_point = fields[4].replace("\\040", " ")
        inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, fields[fields.index("-") + 1]
    return kind


def memory_notice(path: str | Path, mountinfo: Path = _MOUNTINFO) -> Notice | None:
    """A :attr:`~storeprobe.notices.Code.MEMORY_FILESYSTEM` warning when ``path`` is on
    a memory filesystem (its figures are RAM speed), else None."""
    kind = filesystem_type(path, mountinfo)
    if kind not in MEMORY_FILESYSTEMS:
        return None
    return Notice(
        code=Code.MEMORY_FILESYSTEM,
        message=f"{path} is on {kind}: its files live in RAM, so this is memory speed, "
        "not a disk's",
        fix="set TMPDIR to a directory on a disk (e.g. TMPDIR=/var/tmp), or give a "
        "directory on the disk to measure as the URL",
    )
