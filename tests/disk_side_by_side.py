"""A disk tool and its backup method side by side, step by step (rdiff-backup, rsnapshot).

On a disk the storage cannot count requests, so what the tool did is read from its
target before and after each backup (:func:`scan`): files (by inode and mtime) that
were not there before were written (their bytes, plus the growth of files kept, are the
bytes written), names added to files that were there are hard links, paths gone were
deleted, top-level directories now under another's name were moved (rsnapshot's
rotation); with ``du -sb``
(the space) and the regular files (objects) the harness reports. The method runs through
``Probe.from_url(dir).backup_restore(...)`` on the same versions; :class:`Pair` holds
both sides of one backup step and :func:`table` renders them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from stat import S_ISREG

import attrs
from attrs import define, frozen

from storeprobe import Probe
from storeprobe.dataset import Dataset, Image, Tree
from storeprobe.result import Result
from tests.backup_tools import (
    RdiffBackup,
    ToolStep,
    Workspace,
    backup_time,
    check_directory,
    du_bytes,
    materialize,
    tree_stats,
)

Scan = dict[str, tuple[tuple[int, int], int]]  # path → ((inode, mtime in ns), size)


@define
class RealRsnapshot:
    """rsnapshot itself (Debian's 1.4.5): ``rsnapshot -c CONF daily`` with ``link_dest 1``.

    The configuration (tab-separated, as rsnapshot requires) keeps ``retain daily 99``
    snapshots of ``backup SOURCE/ localhost/`` under ``path``; each backup rotates
    ``daily.<n>`` to ``daily.<n+1>``, then runs ``rsync -a --delete --numeric-ids
    --relative --delete-excluded --link-dest=daily.1/localhost/ SOURCE/ daily.0/localhost/``
    (``rsnapshot -t daily`` prints it). A restore of version ``k`` copies its snapshot
    (``rsync -a``, as a user restores from rsnapshot) into a fresh directory.
    """

    workspace: Workspace
    source: Path
    path: Path
    name: str = "rsnapshot"
    backups: int = 0

    def _config(self) -> Path:
        config = self.workspace.root / "rsnapshot.conf"
        rows = [
            ("config_version", "1.2"),
            ("snapshot_root", f"{self.path}/"),
            ("cmd_rsync", _which("rsync")),
            ("retain", "daily", "99"),
            ("link_dest", "1"),
            ("lockfile", str(self.workspace.root / "rsnapshot.pid")),
            ("backup", f"{self.source}/", "localhost/"),
        ]
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("".join("\t".join(row) + "\n" for row in rows))
        return config

    def _objects(self) -> int:
        return tree_stats(self.path)[0] if self.path.exists() else 0

    def _step(
        self, action: str, version: int, before: int, seconds: float, argv: list[str]
    ) -> ToolStep:
        objects, file_bytes = tree_stats(self.path)
        return ToolStep(
            tool=self.name,
            action=action,  # type: ignore[arg-type]
            version=version,
            target=f"file://{self.path}",
            requests=None,
            objects_before=before,
            objects=objects,
            space=du_bytes(self.path),
            file_bytes=file_bytes,
            seconds=seconds,
            commands=(tuple(argv),),
        )

    def backup(self, dataset: Dataset) -> ToolStep:
        argv = [_which("rsnapshot"), "-c", str(self._config()), "daily"]
        before = self._objects()
        _, seconds = self.workspace.run(argv)
        self.backups += 1
        return self._step("backup", self.backups - 1, before, seconds, argv)

    def snapshot(self, version: int) -> Path:
        """Where the files of ``version`` are (rsnapshot's ``--relative`` layout)."""
        held = self.path / f"daily.{self.backups - 1 - version}" / "localhost"
        return held / str(self.source).lstrip("/")

    def restore(self, version: int, into: Path) -> ToolStep:
        into.mkdir(parents=True, exist_ok=True)
        argv = [_which("rsync"), "-a", f"{self.snapshot(version)}/", f"{into}/"]
        before = self._objects()
        _, seconds = self.workspace.run(argv)
        return self._step("restore", version, before, seconds, argv)


@frozen(kw_only=True)
class Reads:
    """What a tool's restore read from its target, as ``strace -f`` saw it: the files it
    opened for reading (directories apart) and the bytes its reads of them returned."""

    files: int
    nbytes: int
    seconds: float


_OPEN = re.compile(r'openat\(.*?"(?P<path>[^"]*)", (?P<flags>[A-Z_|]+)[,)].*= \d+<(?P<real>[^>]*)>')
_READ = re.compile(r"\b(?:read|pread64)\(\d+<(?P<path>[^>]*)>.*= (?P<count>\d+)$")


def traced_reads(workspace: Workspace, argv: Sequence[str], target: Path) -> Reads:
    """Run ``argv`` under ``strace -ff`` (one log per process, so no call is split) and
    count its reads of files under ``target``."""
    logs = workspace.root / "strace"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    traced = [_which("strace"), "-ff", "-qq", "-y", "-e", "trace=openat,read,pread64"]
    _, seconds = workspace.run([*traced, "-o", str(logs / "log"), *argv])
    root = str(target.resolve()) + "/"
    opened: set[str] = set()
    nbytes = 0
    for log in logs.iterdir():
        for line in log.read_text(errors="replace").splitlines():
            found = _OPEN.search(line)
            if found and found["real"].startswith(root):
                flags = found["flags"]
                if not {"O_DIRECTORY", "O_WRONLY", "O_RDWR"} & set(flags.split("|")):
                    opened.add(found["real"])
                continue
            read = _READ.search(line)
            if read and read["path"].startswith(root):
                nbytes += int(read["count"])
    shutil.rmtree(logs)
    return Reads(files=len(opened), nbytes=nbytes, seconds=seconds)


def restore_traced(
    tool: RdiffBackup | RealRsnapshot,
    versions: Sequence[Dataset],
    restore: Sequence[int],
    into: Path,
) -> list[Reads]:
    """Restore ``restore`` in order into ``into`` with ``tool``, each traced and checked
    byte for byte: rsnapshot's first into an empty directory, each next one over it
    (``rsync -a --delete`` skips what the directory holds); rdiff-backup's each into an
    empty directory (it restores a whole tree whatever the directory holds, and warns
    about a directory that is not empty)."""
    found: list[Reads] = []
    for k in restore:
        if isinstance(tool, RealRsnapshot):
            into.mkdir(parents=True, exist_ok=True)
            argv = [_which("rsync"), "-a", "--delete", f"{tool.snapshot(k)}/", f"{into}/"]
        else:
            shutil.rmtree(into, ignore_errors=True)
            at = str(backup_time(k))
            argv = [_which("rdiff-backup"), "restore", "--at", at, str(tool.path), str(into)]
        found.append(traced_reads(tool.workspace, argv, tool.path))
        problems = check_directory(versions[k], into)
        assert not problems, problems
    return found


def _which(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: run tests/setup.sh (apt)")
    return found


def scan(root: Path) -> Scan:
    """Every regular file under ``root``: its identity (inode and mtime: a freed inode
    the file system reuses for a new file has another mtime) and its size."""
    found: Scan = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            stat = path.lstat()
            if S_ISREG(stat.st_mode):
                identity = (stat.st_ino, stat.st_mtime_ns)
                found[path.relative_to(root).as_posix()] = (identity, stat.st_size)
    return found


@frozen(kw_only=True)
class DiskStep:
    """One backup by the tool: the harness's step and what its target shows changed."""

    step: ToolStep
    created: int  # files that were not there before (by inode and mtime)
    written: int  # their bytes, plus the growth of files kept
    linked: int  # names added to files that were there before (hard links)
    deleted: int  # paths that were there before and are not any more
    #: top-level directories now under the name of another before (rsnapshot's rotation)
    moved_folders: int = 0


def _top_folders(root: Path) -> dict[str, int]:
    """The directories right under ``root``: name → inode."""
    if not root.exists():
        return {}
    return {entry.name: entry.inode() for entry in os.scandir(root) if entry.is_dir()}


def _compare(before: Scan, after: Scan, step: ToolStep) -> DiskStep:
    sizes = dict(before.values())
    names_before = Counter(identity for identity, _ in before.values())
    names_after = Counter(identity for identity, _ in after.values())
    new = {identity: size for identity, size in after.values() if identity not in sizes}
    grown = sum(max(0, size - sizes[i]) for i, size in after.values() if i in sizes)
    linked = sum(
        max(0, count - names_before[identity])
        for identity, count in names_after.items()
        if identity in sizes
    )
    return DiskStep(
        step=step,
        created=len(new),
        written=sum(new.values()) + grown,
        linked=linked,
        deleted=sum(1 for name in before if name not in after),
    )


def run_disk_tool(
    tool: RdiffBackup | RealRsnapshot,
    versions: Sequence[Dataset],
    source: Path,
    restore_dir: Path,
    restore: Sequence[int],
) -> tuple[list[DiskStep], list[Reads]]:
    """Back up each version with ``tool`` (scanning its target around each), then
    restore ``restore`` into ``restore_dir`` (:func:`restore_traced`)."""
    backups: list[DiskStep] = []
    for version in versions:
        materialize(version, source)
        with _held(tool.path):
            before = scan(tool.path) if tool.path.exists() else {}
            folders = _top_folders(tool.path)
            step = tool.backup(version)
            moved = sum(
                1
                for name, inode in _top_folders(tool.path).items()
                if any(inode == old and name != was for was, old in folders.items())
            )
            after = scan(tool.path)
        backups.append(attrs.evolve(_compare(before, after, step), moved_folders=moved))
    return backups, restore_traced(tool, versions, restore, restore_dir)


@contextlib.contextmanager
def _held(root: Path) -> Iterator[None]:
    """Hold every file and directory under ``root`` open while the tool runs, so the file
    system cannot give a freed inode to a file the tool creates: a new file on a reused
    inode, its mtime set to the source file's (materialize gives a generation's files one
    mtime), would have an old file's identity and its bytes would be counted as kept (a
    run's rdiff-backup backup 2 showed 582 491 bytes written, 64 071 short: one file)."""
    descriptors: list[int] = []
    try:
        if root.exists():
            for directory, _, names in os.walk(root):
                descriptors.append(os.open(directory, os.O_RDONLY))
                for name in names:
                    path = Path(directory) / name
                    if S_ISREG(path.lstat().st_mode):
                        descriptors.append(os.open(path, os.O_RDONLY))
        yield
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def run_method(
    url: str,
    versions: Sequence[Tree | Image],
    method: str,
    restore: Sequence[int],
    **options: object,
) -> list[Result]:
    """The method's scenario on ``url`` (every Result checked ok)."""
    results = list(
        Probe.from_url(url, options or None).backup_restore(
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
        "| created · linked · deleted · folders moved (tool) | requests (method) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(row.kinds.items()))
        lines.append(
            f"| {row.version + 1} | {row.tool.step.space:,} / {row.method_space:,} "
            f"| {row.tool.written:,} / {row.method_written:,} "
            f"| {row.tool.step.objects} / {row.method_objects} "
            f"| {row.tool.created} · {row.tool.linked} · {row.tool.deleted} "
            f"· {row.tool.moved_folders} | {kinds} |"
        )
    return "\n".join(lines)


def restore_table(title: str, order: Sequence[int], tool: list[Reads], method: list[Result]) -> str:
    """A markdown table: per restore, the files and bytes the tool read, and the
    method's reads."""
    restores = [r for r in method if r.operation == "restore"]
    lines = [
        title,
        "| restore | files read tool / method | bytes read tool / method | requests (method) |",
        "|---|---|---|---|",
    ]
    for k, reads, result in zip(order, tool, restores, strict=True):
        sample = result.samples[0]
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(sample.requests_by_kind.items()))
        lines.append(
            f"| v{k} | {reads.files} / {sample.requests_by_kind.get('get', 0)} "
            f"| {reads.nbytes:,} / {sample.bytes_received:,} | {kinds} |"
        )
    return "\n".join(lines)


def workspace(root: Path) -> Workspace:
    return Workspace(root / "ws")


def side_by_side(
    tool: RdiffBackup | RealRsnapshot,
    method: str,
    versions: Sequence[Tree | Image],
    root: Path,
    title: str,
) -> tuple[list[Pair], list[Result]]:
    """Run the real ``tool`` and the storeprobe ``method`` on the same versions (restoring
    the last, then the first), print both tables, check what both share — every name the
    method wrote deleted, restores read within 30 % (or 3) files and 10 % bytes of the
    tool's, each backup's space and bytes written within 10 % and objects within 30 % (or
    3) — and return the per-step rows and the method's Results for the tool's own checks."""
    order = [len(versions) - 1, 0]
    steps, reads = run_disk_tool(tool, list(versions), root / "source", root / "out", order)
    target = root / "method"
    target.mkdir()
    results = run_method(str(target), list(versions), method, order)
    assert list(target.iterdir()) == []  # every name and folder written, deleted
    rows = pairs(steps, results)
    print(table(title, rows))
    print(restore_table(title, order, reads, results))
    restores = [r for r in results if r.operation == "restore"]
    for traced, restored in zip(reads, restores, strict=True):
        sample = restored.samples[0]
        assert within(sample.requests_by_kind.get("get", 0), traced.files, 0.30, 3), traced
        assert within(sample.bytes_received, traced.nbytes, 0.10), (traced, sample)
    for row in rows:
        assert within(row.method_space, row.tool.step.space, 0.10), row
        assert within(row.method_written, row.tool.written, 0.10), row
        assert within(row.method_objects, row.tool.step.objects, 0.30, 3), row
    return rows, results
