"""The local-disk method, proven against the kernel rather than trusted.

Two promises of the ``file://`` backend (see docs/concepts.md):

- an upload counts until the data is on disk: every uploaded file is fsynced before the
  timed window closes;
- a download reads the disk, not the page cache: the files are evicted before the timed
  window opens.

The probe's clock is injectable, so the tests hand it a clock that looks at the probe's
directory each time it is read, then returns ``time.perf_counter_ns()``. The Result's
samples give each window's start (the first request's start) and end (the last request's
end) as readings of that clock, so the observation made at exactly those readings is
found again afterwards. The kernel is asked with ``mincore(2)`` whether a file's pages are
in the page cache, and with ``/proc/self/pagemap`` + ``/proc/kpageflags`` (root only)
whether they are dirty (written but not yet on disk).

Each check has a negative control: with ``os.fsync`` / ``os.posix_fadvise`` replaced by a
no-op, the same checker must report the files as not synced / still resident, so the
checks cannot pass vacuously. Only the public API (``Probe``, ``Workload``) and the ``os``
module are used or patched: the backends' own modules are free to move.

Eviction has no effect on tmpfs (the page cache is the storage), so these tests run in a
directory on a disk-backed filesystem: ``tmp_path`` when it is one (on the build machine
``/tmp`` is ext4 on ``/dev/vda``), else a directory under ``/var/tmp``.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storeprobe import Probe, Result, Workload

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="mincore, /proc and posix_fadvise: Linux"
)

#: Filesystems whose files live in memory: eviction cannot be observed there.
_MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "overlay", "squashfs"})
_KPF_DIRTY = 1 << 4  # include/uapi/linux/kernel-page-flags.h
_KPF_WRITEBACK = 1 << 8
_PFN_MASK = (1 << 55) - 1
_PAGE = mmap.PAGESIZE

#: (name, workload, streams): many objects one at a time, and one object split in parts
SHAPES = [
    pytest.param(Workload(count=4, size="256KiB"), 1, id="objects"),
    pytest.param(Workload(count=1, size="2MiB"), 2, id="one-object-in-parts"),
]


# -- where: a disk-backed directory -------------------------------------------------------
def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding ``path``, from /proc/self/mountinfo."""
    resolved = str(path.resolve())
    best, kind = "", "unknown"
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            mount_point = fields[4].replace("\\040", " ")
            fs_type = fields[fields.index("-") + 1]
            inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best):
                best, kind = mount_point, fs_type
    return kind


@pytest.fixture
def disk_dir(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` if it is on a disk-backed filesystem, else a fresh dir in /var/tmp."""
    if filesystem_type(tmp_path) not in _MEMORY_FILESYSTEMS:
        yield tmp_path
        return
    if filesystem_type(Path("/var/tmp")) in _MEMORY_FILESYSTEMS:
        pytest.skip("neither the temporary directory nor /var/tmp is on a disk")
    made = Path(tempfile.mkdtemp(prefix="storeprobe-truth-", dir="/var/tmp"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


# -- asking the kernel ----------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value


@contextlib.contextmanager
def _mapped(path: str, size: int) -> Iterator[int]:
    """``path`` mapped read-only and shared; mapping faults no page in by itself."""
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, _MAP_FAILED):
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), path)
        try:
            yield address
        finally:
            _libc.munmap(address, size)
    finally:
        os.close(fd)


def resident_pages(path: str) -> int:
    """How many of ``path``'s pages are in the page cache (``mincore``)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    pages = -(-size // _PAGE)
    vector = (ctypes.c_ubyte * pages)()
    with _mapped(path, size) as address:
        if _libc.mincore(address, size, vector) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), path)
    return sum(byte & 1 for byte in vector)


def kernel_page_flags_readable() -> bool:
    try:
        with open("/proc/kpageflags", "rb") as handle:
            handle.read(8)
    except OSError:
        return False
    return True


def unwritten_pages(path: str) -> int:
    """How many of ``path``'s cached pages are dirty or under writeback (not yet on disk).

    Each page is touched through a shared read-only mapping (which maps the page-cache
    page without changing its state), its frame found in /proc/self/pagemap and its
    flags read from /proc/kpageflags. Needs root.
    """
    size = os.path.getsize(path)
    if size == 0:
        return 0
    count = 0
    with (
        _mapped(path, size) as address,
        open("/proc/self/pagemap", "rb", buffering=0) as pagemap,
        open("/proc/kpageflags", "rb", buffering=0) as kpageflags,
    ):
        for offset in range(0, size, _PAGE):
            touched = ctypes.c_char.from_address(address + offset).value  # maps the page
            pagemap.seek((address + offset) // _PAGE * 8)
            (entry,) = struct.unpack("<Q", pagemap.read(8))
            frame = entry & _PFN_MASK
            assert touched is not None
            assert entry >> 63, f"page {offset // _PAGE} of {path} is not mapped after a read"
            assert frame, "no page frame numbers in /proc/self/pagemap: not root?"
            kpageflags.seek(frame * 8)
            (flags,) = struct.unpack("<Q", kpageflags.read(8))
            count += bool(flags & (_KPF_DIRTY | _KPF_WRITEBACK))
    return count


# -- when: a clock that looks before it answers ---------------------------------------------
class LookingClock:
    """A nanosecond clock that records ``look()`` of the directory at every reading."""

    def __init__(self, root: Path, look: Callable[[str], Any]) -> None:
        self.root = root
        self.look = look
        self.seen: dict[int, dict[str, Any]] = {}

    def files(self) -> list[str]:
        return [
            os.path.join(directory, name)
            for directory, _, names in os.walk(self.root)
            for name in names
        ]

    def __call__(self) -> int:
        observation = {}
        for path in self.files():
            with contextlib.suppress(FileNotFoundError):  # deleted by another stream
                observation[path] = (os.path.getsize(path), self.look(path))
        now = time.perf_counter_ns()
        self.seen[now] = observation
        return now

    def windows(self, result: Result) -> list[tuple[int, int]]:
        """(open, close) readings of each repeat's timed window, found from its sample."""
        found = []
        for sample in result.samples:
            openings = [
                start
                for start in self.seen
                if start + sample.elapsed_ns in self.seen
                and all(start + int(offset) in self.seen for offset in sample.offsets_ns)
            ]
            assert len(openings) == 1, f"{len(openings)} readings fit the window"
            found.append((openings[0], openings[0] + sample.elapsed_ns))
        return found

    def complete_files(self, reading: int, workload: Workload) -> dict[str, Any]:
        """Files holding a whole object at ``reading``, with what ``look`` saw."""
        return {
            path: seen for path, (size, seen) in self.seen[reading].items() if size == workload.size
        }


def _nothing(path: str) -> None:
    return None


# -- the checkers -----------------------------------------------------------------------------
Synced = list[tuple[str, int]]


def unsynced_uploads(
    result: Result, clock: LookingClock, synced: Synced, workload: Workload
) -> tuple[list[str], list[str]]:
    """(uploaded, not synced): the files complete when a window closed, and those of them
    with no completed fsync/fdatasync between that window's opening and its close."""
    uploaded: list[str] = []
    missing: list[str] = []
    for opened, closed in clock.windows(result):
        for path in clock.complete_files(closed, workload):
            uploaded.append(path)
            real = os.path.realpath(path)
            if not any(name == real and opened <= at <= closed for name, at in synced):
                missing.append(path)
    return uploaded, missing


def unwritten_at_close(result: Result, clock: LookingClock, workload: Workload) -> dict[str, int]:
    """Dirty or writeback pages of every uploaded file when its window closed."""
    found: dict[str, int] = {}
    for _, closed in clock.windows(result):
        found.update(clock.complete_files(closed, workload))
    return found


def resident_at_open(result: Result, clock: LookingClock, workload: Workload) -> dict[str, int]:
    """Page-cache pages of every file to be downloaded when its window opened."""
    found: dict[str, int] = {}
    for opened, _ in clock.windows(result):
        found.update(clock.complete_files(opened, workload))
    return found


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Synced:
    """Every completed fsync/fdatasync: (real path of the fd, perf_counter_ns after it)."""
    calls: Synced = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def record(fd: Any, real: Callable[[Any], None] = real) -> None:
            number = fd if isinstance(fd, int) else fd.fileno()
            path = os.readlink(f"/proc/self/fd/{number}")
            real(fd)
            calls.append((os.path.realpath(path), time.perf_counter_ns()))

        monkeypatch.setattr(os, name, record)
    return calls


def _skip_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the backend would do without its fsync: nothing reaches the disk on demand."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


def _probe(root: Path, clock: LookingClock, streams: int, repeats: int = 2) -> Probe:
    return Probe.from_url(str(root), streams=streams, repeats=repeats, clock=clock)


# -- uploads are on disk when the window closes -------------------------------------------------
@pytest.mark.parametrize(("workload", "streams"), SHAPES)
def test_every_upload_is_fsynced_inside_its_window(
    disk_dir: Path, synced: Synced, workload: Workload, streams: int
) -> None:
    clock = LookingClock(disk_dir, _nothing)
    result = _probe(disk_dir, clock, streams).upload(workload)
    assert not result.errors
    uploaded, missing = unsynced_uploads(result, clock, synced, workload)
    assert len(uploaded) == workload.count * len(result.samples) == workload.count * 2
    assert missing == []


def test_the_fsync_check_sees_a_missing_fsync(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: Synced = []  # nothing is recorded: the syncs are gone
    _skip_syncs(monkeypatch)
    clock = LookingClock(disk_dir, _nothing)
    workload = Workload(count=4, size="256KiB")
    result = _probe(disk_dir, clock, 1).upload(workload)
    uploaded, missing = unsynced_uploads(result, clock, synced, workload)
    assert len(uploaded) == 8
    assert missing == uploaded


needs_page_flags = pytest.mark.skipif(
    not kernel_page_flags_readable(), reason="/proc/kpageflags needs root"
)


@needs_page_flags
@pytest.mark.parametrize(("workload", "streams"), SHAPES)
def test_uploaded_pages_are_on_disk_when_the_window_closes(
    disk_dir: Path, workload: Workload, streams: int
) -> None:
    clock = LookingClock(disk_dir, unwritten_pages)
    result = _probe(disk_dir, clock, streams).upload(workload)
    assert not result.errors
    unwritten = unwritten_at_close(result, clock, workload)
    assert len(unwritten) == workload.count * 2
    assert unwritten == dict.fromkeys(unwritten, 0)


@needs_page_flags
def test_the_page_flag_check_sees_a_missing_fsync(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _skip_syncs(monkeypatch)
    clock = LookingClock(disk_dir, unwritten_pages)
    workload = Workload(count=4, size="256KiB")
    result = _probe(disk_dir, clock, 1).upload(workload)
    unwritten = unwritten_at_close(result, clock, workload)
    assert len(unwritten) == 8
    assert sum(unwritten.values()) > 0


# -- downloads start from the disk, not the page cache --------------------------------------------
@pytest.mark.parametrize(("workload", "streams"), SHAPES)
def test_downloads_start_with_no_page_cached(
    disk_dir: Path, workload: Workload, streams: int
) -> None:
    clock = LookingClock(disk_dir, resident_pages)
    result = _probe(disk_dir, clock, streams).download(workload)
    assert not result.errors
    resident = resident_at_open(result, clock, workload)
    assert len(resident) == workload.count * 2
    assert resident == dict.fromkeys(resident, 0)


def test_the_residency_check_sees_a_missing_eviction(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: None)
    clock = LookingClock(disk_dir, resident_pages)
    workload = Workload(count=4, size="256KiB")
    result = _probe(disk_dir, clock, 1).download(workload)
    resident = resident_at_open(result, clock, workload)
    assert len(resident) == 8
    assert sum(resident.values()) > 0


# -- restores read the disk, not the page cache --------------------------------------------------
def _restore_start_residency(disk_dir: Path) -> dict[str, int]:
    """Page-cache pages of every stored file at the first clock reading of the restore."""
    from storeprobe.dataset import Sizes, Tree

    count = 6
    tree = Tree.generate(count, Sizes.fixed("256KiB"), seed=4)
    clock = LookingClock(disk_dir, resident_pages)
    results = Probe.from_url(str(disk_dir), streams=1, clock=clock).backup_restore(
        tree, versions=1, method="files"
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    # the backup at one stream: the two roots' HEADs, a listing, one put per file, each
    # request two readings; the next reading opens the restore's first window
    readings = sorted(clock.seen)
    first = readings[2 * 2 + 2 + 2 * count]
    stored = {
        path: pages
        for path, (size, pages) in clock.seen[first].items()
        if "/current/" in path and size == 256 * 1024
    }
    assert len(stored) == count
    return stored


def test_restores_start_with_no_page_cached(disk_dir: Path) -> None:
    stored = _restore_start_residency(disk_dir)
    assert stored == dict.fromkeys(stored, 0)


def test_the_residency_check_sees_a_restore_without_eviction(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: None)
    stored = _restore_start_residency(disk_dir)
    assert sum(stored.values()) > 0


def _stored_after_each_eviction(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[dict[str, int], int, int]]:
    """For each restore of a three-version tree restored as v2, v0, v2 (the third
    reads again what the first read): right after the scenario's eviction, the page-
    cache pages of every stored file, the number of fsyncs the eviction made and the
    number of files under ``backup/`` (written by COPY: hard links here)."""
    from storeprobe.backup.session import Session
    from storeprobe.dataset import Sizes, Tree

    seen: list[tuple[dict[str, int], int, int]] = []
    evict, fsync = Session.evict, os.fsync
    syncs: list[int] = []

    def counting_fsync(fd: int) -> None:
        syncs.append(fd)
        fsync(fd)

    def looked(session: Session) -> None:
        syncs.clear()
        monkeypatch.setattr(os, "fsync", counting_fsync)
        try:
            evict(session)
        finally:
            monkeypatch.setattr(os, "fsync", fsync)
        stored = {
            str(path): resident_pages(str(path))
            for path in disk_dir.rglob("*")
            if path.is_file() and ("/current/" in str(path) or "/backup/" in str(path))
        }
        copies = sum("/backup/" in name for name in stored)
        seen.append((stored, len(syncs), copies))

    monkeypatch.setattr(Session, "evict", looked)
    tree = Tree.generate(24, Sizes.fixed("64KiB"), seed=4)
    results = Probe.from_url(str(disk_dir), streams=2).backup_restore(
        tree, versions=3, method="files", restore=[2, 0, 2]
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    return seen


def test_every_restore_starts_with_nothing_stored_in_the_page_cache(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each restore's eviction drops what the backups wrote and what earlier restores
    read (restore 3 reads again what restore 1 read), and flushes only the copies: a
    local PUT fsynced its file already."""
    seen = _stored_after_each_eviction(disk_dir, monkeypatch)
    assert len(seen) == 3
    for stored, _, _ in seen:
        assert len(stored) > 24
        assert stored == dict.fromkeys(stored, 0)
    (_, first_syncs, copies), *later = seen
    assert copies > 0
    assert first_syncs == copies
    assert [syncs for _, syncs, _ in later] == [0, 0]
