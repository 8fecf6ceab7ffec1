"""A disk tool and its backup method side by side, step by step (rdiff-backup, rsnapshot).

On a disk the storage cannot count requests, so what the tool did is read from its
target before and after each backup (:func:`scan`): files whose inode is new were
written (their bytes, plus the growth of files kept, are the bytes written), new names
of inodes that existed before are hard links, names gone were deleted; with ``du -sb``
(the space) and the regular files (objects) the harness reports. The method runs through
``Probe.from_url(dir).backup_restore(...)`` on the same versions; :class:`Pair` holds
both sides of one backup step and :func:`table` renders them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from stat import S_ISREG

from attrs import frozen

from storeprobe import Probe
from storeprobe.dataset import Dataset
from storeprobe.result import Result
from tests.backup_tools import (
    RdiffBackup,
    Rsnapshot,
    ToolStep,
    Workspace,
    check_directory,
    materialize,
)

Scan = dict[str, tuple[int, int]]  # relative path → (inode, size)


def scan(root: Path) -> Scan:
    """Every regular file under ``root``: its inode and size."""
    found: Scan = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            stat = path.lstat()
            if S_ISREG(stat.st_mode):
                found[path.relative_to(root).as_posix()] = (stat.st_ino, stat.st_size)
    return found


@frozen(kw_only=True)
class DiskStep:
    """One backup by the tool: the harness's step and what its target shows changed."""

    step: ToolStep
    created: int  # files with a new inode (or one freed in the step and reused)
    written: int  # their bytes, plus the growth of files kept
    linked: int  # new names of inodes that were there before
    deleted: int  # names gone


def _compare(before: Scan, after: Scan, step: ToolStep) -> DiskStep:
    inodes = dict(before.values())
    # an inode of before still under one of its old names (a freed one may be reused)
    kept = {inode for name, (inode, _) in before.items() if after.get(name, (-1, 0))[0] == inode}
    new_inodes = {inode: size for inode, size in after.values() if inode not in kept}
    grown = sum(
        max(0, size - inodes[inode])
        for name, (inode, size) in after.items()
        if name in before and before[name][0] == inode
    )
    linked = sum(1 for name, (inode, _) in after.items() if name not in before and inode in kept)
    return DiskStep(
        step=step,
        created=len(new_inodes),
        written=sum(new_inodes.values()) + grown,
        linked=linked,
        deleted=sum(1 for name in before if name not in after),
    )


def run_disk_tool(
    tool: RdiffBackup | Rsnapshot,
    versions: Sequence[Dataset],
    source: Path,
    restore_dir: Path,
    restore: Sequence[int],
) -> tuple[list[DiskStep], list[ToolStep]]:
    """Back up each version with ``tool`` (scanning its target around each), then
    restore ``restore`` (each into a fresh directory, checked byte for byte)."""
    backups: list[DiskStep] = []
    for version in versions:
        materialize(version, source)
        before = scan(tool.path) if tool.path.exists() else {}
        step = tool.backup(version)
        backups.append(_compare(before, scan(tool.path), step))
    restores: list[ToolStep] = []
    for k in restore:
        into = restore_dir / str(k)
        step = tool.restore(k, into)
        problems = check_directory(versions[k], into)
        assert not problems, problems
        restores.append(step)
    return backups, restores


def run_method(
    url: str, versions: Sequence[Dataset], method: str, restore: Sequence[int], **options: object
) -> list[Result]:
    """The method's scenario on ``url`` (every Result checked ok)."""
    results = list(
        Probe.from_url(url, options or None).backup_restore(  # type: ignore[arg-type]
            versions[0], versions=list(versions), method=method, restore=restore
        )
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    return results


@frozen(kw_only=True)
class Pair:
    """One backup step: the tool's figures beside the method's."""

    version: int
    tool: DiskStep
    method: Result

    @property
    def kinds(self) -> dict[str, int]:
        return self.method.samples[0].requests_by_kind

    @property
    def method_written(self) -> int:
        return self.method.samples[0].bytes_sent

    @property
    def method_space(self) -> int:
        assert self.method.step is not None
        return self.method.step.space_used or 0

    @property
    def method_objects(self) -> int:
        assert self.method.step is not None
        return self.method.step.objects_stored or 0


def pairs(tool: list[DiskStep], method: list[Result]) -> list[Pair]:
    backups = [r for r in method if r.operation == "backup"]
    return [
        Pair(version=n, tool=t, method=m)
        for n, (t, m) in enumerate(zip(tool, backups, strict=True))
    ]


def within(method: int, tool: int, share: float, slack: int = 0) -> bool:
    """``method`` within ``share`` of ``tool`` (or within ``slack``)."""
    return abs(method - tool) <= max(share * tool, slack)


def table(title: str, rows: list[Pair]) -> str:
    """A markdown table: per backup, tool against method."""
    lines = [
        f"{title}",
        "| backup | space tool / method (B) | written tool / method (B) | files tool / method "
        "| created · linked · deleted (tool) | requests (method) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(row.kinds.items()))
        lines.append(
            f"| {row.version + 1} | {row.tool.step.space:,} / {row.method_space:,} "
            f"| {row.tool.written:,} / {row.method_written:,} "
            f"| {row.tool.step.objects} / {row.method_objects} "
            f"| {row.tool.created} · {row.tool.linked} · {row.tool.deleted} | {kinds} |"
        )
    return "\n".join(lines)


def workspace(root: Path) -> Workspace:
    return Workspace(root / "ws")
