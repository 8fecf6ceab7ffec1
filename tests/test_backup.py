"""Backup and restore of evolving datasets against real storages (memory, local disk,
S3 through obstore and s3fs on ``rclone serve s3``, SFTP on OpenSSH)."""

from __future__ import annotations

import os
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from storeprobe import Probe
from storeprobe.backends import local as local_module
from storeprobe.backup import BackupMethod, Chunking, Files, Replay, Session
from storeprobe.backup import session as session_module
from storeprobe.backup.session import windows
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.errors import ConfigurationError, TargetPermissionError
from storeprobe.notices import Code
from storeprobe.request import Kind
from storeprobe.resultset import ResultSet
from tests.conftest import s3_options, ssh_options
from tests.helpers import StepClock, tree
from tests.http_proxy import CountingProxy
from tests.servers import Server

TREE = Tree.generate(60, Sizes.lognormal("6KiB", 1.2, "256KiB"), seed=3)
CHUNK = "16KiB"


def _counts(results: ResultSet) -> list[dict[str, int]]:
    return [result.requests_by_kind for result in results]


def _local(tmp_path: Path) -> tuple[Callable[..., Probe], Path]:
    root = tmp_path / "target"
    root.mkdir()
    return (lambda **kw: Probe.from_url(str(root), **kw)), root


@pytest.mark.parametrize("method", ["files", "chunks"])
def test_local_backup_and_restore_of_every_version(tmp_path: Path, method: str) -> None:
    make, root = _local(tmp_path)
    (root / "neighbour.bin").write_bytes(b"precious")
    before = tree(root)
    versions = [TREE, TREE.evolve(seed=1), TREE.evolve(seed=1).evolve(seed=2)]
    results = make(streams=4).backup_restore(
        versions[0], versions=versions, method=method, chunk_size=CHUNK
    )
    assert [r.step.label for r in results if r.step] == [
        "backup 1",
        "backup 2",
        "backup 3",
        "restore 1 (full)",
        "restore 2",
        "restore 3",
    ]
    assert all(r.ok for r in results), [r.errors for r in results]
    assert tree(root) == before  # every version cleaned up, the neighbour untouched
    # on the local disk the restores read evicted files: nothing to warn about
    assert not [w for r in results for w in r.warnings if w.code is Code.NO_CACHE_EVICTION]
    steps = [r.step for r in results if r.step is not None]
    backups, restores = steps[:3], steps[3:]
    changes = [versions[1].diff(versions[0]), versions[2].diff(versions[1])]
    # changed bytes: the whole first version, then what each evolve changed
    assert [s.changed_bytes for s in backups] == [
        TREE.total_bytes,
        changes[0].changed_bytes,
        changes[1].changed_bytes,
    ]
    assert [s.changed_bytes for s in restores] == [s.changed_bytes for s in backups]
    assert [s.dataset_bytes for s in steps] == [v.total_bytes for v in versions] * 2
    # space used grows with every backup, and restores leave it alone
    spaces = [s.space_used or 0 for s in steps]
    assert spaces[0] < spaces[1] < spaces[2] == spaces[3] == spaces[4] == spaces[5]
    assert spaces[0] >= TREE.total_bytes
    # incremental steps move about what changed (plus manifests), never the whole tree
    for step, change in zip(backups[1:], changes, strict=True):
        assert change.changed_bytes <= step.moved_bytes < TREE.total_bytes / 2
    counts = _counts(results)
    if method == "files":
        assert counts[:2] == _rclone_backups_on_disk(versions)
        assert counts[3:] == _rclone_restores_on_disk(versions)
    else:
        first = counts[0]
        assert first["head"] == first["put"] - 1  # every chunk checked, then all uploaded
        assert counts[1]["head"] > counts[1]["put"] - 1  # most chunks already there
        assert all(s.dedup_ratio is not None for s in backups)
        assert backups[1].dedup_ratio > 2  # type: ignore[operator]
    for result in results:
        assert result.step is not None
        assert set(result.step.seconds_by_kind) == set(result.requests_by_kind)


def _folders(paths: Iterable[str]) -> int:
    """Folders holding ``paths`` (their root included): what a file system keeps."""
    found = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        found.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return len(found)


def _state(dataset: Tree) -> dict[str, tuple[int, int]]:
    """What rclone compares: each path's size and modification time (its generation)."""
    return {file.path: (file.size, file.generation) for file in dataset.files}


def _rclone_backups_on_disk(versions: list[Tree]) -> list[dict[str, int]]:
    """``rclone sync --backup-dir`` onto a file system, backups 1 and 2: two root HEADs;
    a listing per folder of ``current/`` (folders stay once made); per changed or
    deleted file a HEAD of its backup name, a COPY (rclone renames) and a DELETE; a PUT
    per new or changed file (no HEADs to read modification times: listings carry them)."""
    first = {"head": 2, "list": 1, "put": len(versions[0].files)}
    change = versions[1].diff(versions[0])
    moved = len(change.changed) + len(change.deleted)
    second = {
        "head": 2 + moved,
        "list": _folders(f.path for f in versions[0].files),
        "copy": moved,
        "delete": moved,
        "put": len(change.added) + len(change.changed),
    }
    return [first, second]


def _rclone_restores_on_disk(versions: list[Tree]) -> list[dict[str, int]]:
    """Restores of versions 0, 1, 2 in turn into one directory: ``rclone copy`` of
    ``current`` and then of each later backup dir, newest first; per copy a HEAD of its
    root, a listing per folder, a GET per file that differs from the directory's."""
    states = [_state(v) for v in versions]
    # backup dir k holds version k-1's files that version k changed or deleted
    aside = {k: {p: s for p, s in states[k - 1].items() if states[k].get(p) != s} for k in (1, 2)}
    ever = {p for state in states for p in state}  # current/ keeps every folder made
    out = []
    local: dict[str, tuple[int, int]] = {}
    for index in range(3):
        roots = [(ever, states[2])] + [(set(aside[k]), aside[k]) for k in range(2, index, -1)]
        counts = {"head": len(roots), "list": 0, "get": 0}
        for paths, files in roots:
            counts["list"] += _folders(paths)
            counts["get"] += sum(1 for p, s in files.items() if local.get(p) != s)
            local.update(files)
        local = dict(states[index])  # the replay deletes what the version lacks
        out.append(counts)
    return out


def test_an_image_changing_in_place_dedups_in_chunks(tmp_path: Path) -> None:
    make, _ = _local(tmp_path)
    image = Image.create("4MiB", block_size="64KiB", seed=5)
    versions = [image, image.evolve(fraction=0.05, seed=1)]
    files = make(streams=2).backup_restore(image, versions=versions, method="files")
    chunks = make(streams=2).backup_restore(
        image, versions=versions, method="chunks", chunk_size=CHUNK
    )
    assert all(r.ok for r in (*files, *chunks))
    changed = versions[1].diff(versions[0]).changed_bytes
    files_moved = files[1].step.moved_bytes  # type: ignore[union-attr]
    chunks_moved = chunks[1].step.moved_bytes  # type: ignore[union-attr]
    assert files_moved >= image.total_bytes  # the whole image again
    assert changed <= chunks_moved < image.total_bytes / 2  # only chunks around the changes


def test_step_times_come_from_the_clock_exactly(tmp_path: Path) -> None:
    make, _ = _local(tmp_path)
    small = Tree.generate(5, Sizes.fixed("1KiB"), seed=1)
    results = make(streams=1, clock=StepClock(10)).backup_restore(small, versions=1, method="files")
    backup, restore = results
    # one stream, the clock 10 ns a reading. Backup: the two roots' HEADs, a list, 5
    # puts, in three windows (two readings per request); each window counts its own span
    assert backup.samples[0].elapsed_ns == 10 * (2 * 2 - 1) + 10 + 10 * (2 * 5 - 1)
    # restore: the root's HEAD, a list per folder, one window per depth, then 5 gets;
    # a local get reads the clock a third time, at its first byte
    folders = {
        "/".join(parts[:depth]): depth  # the root "" at depth 0
        for parts in (f.path.split("/") for f in small.files)
        for depth in range(len(parts))
    }
    depths = Counter(folders.values())
    listing = sum(10 * (2 * n - 1) for n in depths.values())
    assert restore.samples[0].elapsed_ns == 10 + listing + 10 * (3 * 5 - 1)
    assert restore.samples[0].ttfb_ns.tolist() == [10] * 5


def test_a_failing_step_stops_the_scenario_and_cleans_up(tmp_path: Path) -> None:
    make, root = _local(tmp_path)
    before = tree(root)
    probe = make(streams=2, timeout=30)
    broken = [TREE, TREE.evolve(seed=1)]

    # a second version whose content generation fails while its bodies are made
    class Failing(Tree):
        def fill(self, file: Any, start: int, out: Any) -> None:
            raise OSError("disk gone")

    failing = Failing(files=broken[1].files, seed=broken[1].seed, version=1, name=None)
    results = probe.backup_restore(TREE, versions=[TREE, failing], method="files")
    assert results[0].ok
    assert results[1].errors[0].code is Code.REQUEST_FAILED
    assert "disk gone" in results[1].errors[0].message
    assert [r.errors[0].code for r in results[2:]] == [Code.NOT_RUN] * 2
    assert tree(root) == before


def test_bad_scenarios_are_refused(tmp_path: Path) -> None:
    make, _ = _local(tmp_path)
    probe = make()
    with pytest.raises(ConfigurationError, match="method"):
        probe.backup_restore(TREE, versions=1, method="rsync")
    with pytest.raises(ConfigurationError, match="versions must be from 1"):
        probe.backup_restore(TREE, versions=0)
    with pytest.raises(ConfigurationError, match="successive"):
        probe.backup_restore(TREE, versions=[TREE, TREE])
    with pytest.raises(ConfigurationError, match="chunk average"):
        Chunking.of("16B")


@pytest.mark.parametrize("client", ["obstore", "s3fs"])
@pytest.mark.parametrize("method", ["files", "chunks"])
def test_s3_backup_restore_counts_requests_on_the_wire(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str, method: str
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/backup", options, client=client, streams=4)
    versions = [TREE, TREE.evolve(seed=1)]
    counting_proxy.reset()
    results = probe.backup_restore(TREE, versions=versions, method=method, chunk_size=CHUNK)
    assert all(r.ok for r in results), [r.errors for r in results]
    # what the steps report is what the server saw (plus untimed housekeeping)
    reported = dict.fromkeys(("put", "get", "head"), 0)
    for result in results:
        for kind, count in result.requests_by_kind.items():
            if kind in reported:
                reported[kind] += count
    assert counting_proxy.methods.count("PUT") >= reported["put"]
    assert counting_proxy.methods.count("GET") >= reported["get"]
    assert counting_proxy.methods.count("HEAD") >= reported["head"]
    assert tree(s3_bucket_dir) == before
    if method == "files":  # server-side copies of the replaced and deleted files
        change = versions[1].diff(versions[0])
        assert results[1].requests_by_kind["copy"] == len(change.changed) + len(change.deleted)
    space = [r.step.space_used for r in results if r.step]
    assert space[0] is not None
    assert space[0] >= TREE.total_bytes


@pytest.mark.parametrize("method", ["files", "chunks"])
def test_sftp_backup_restore_of_an_older_version(ssh_server: Server, method: str) -> None:
    assert ssh_server.root is not None
    root = ssh_server.root / "backup"
    root.mkdir(exist_ok=True)
    before = tree(root)
    probe = Probe.from_url(f"sftp://127.0.0.1{root}", ssh_options(ssh_server), streams=2)
    results = probe.backup_restore(TREE, versions=2, method=method, chunk_size=CHUNK)
    assert all(r.ok for r in results), [r.errors for r in results]
    assert tree(root) == before
    # the server's page cache holds what the backups wrote, and no client can evict it
    for result in results:
        codes = [w.code for w in result.warnings]
        assert result.step is not None
        assert (Code.NO_CACHE_EVICTION in codes) == (result.step.kind == "restore")
    if method == "files":  # the replaced and deleted files were linked into the backup dir
        change = TREE.evolve().diff(TREE)
        assert results[1].requests_by_kind["copy"] == len(change.changed) + len(change.deleted)


def test_memory_backup_restore(tmp_path: Path) -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    MemoryFileSystem.store.clear()
    results = Probe.from_url("memory://bk", streams=3).backup_restore(
        TREE, versions=2, method="chunks", chunk_size=CHUNK
    )
    assert all(r.ok for r in results)
    assert not [k for k in MemoryFileSystem.store if k.startswith("/bk/")]


@pytest.mark.parametrize("method", ["files", "chunks"])
def test_restore_the_latest_then_back_to_an_older_version(tmp_path: Path, method: str) -> None:
    make, root = _local(tmp_path)
    versions = [TREE, TREE.evolve(seed=1), TREE.evolve(seed=1).evolve(seed=2)]
    results = make(streams=2).backup_restore(
        TREE, versions=versions, method=method, chunk_size=CHUNK, restore=[2, 0]
    )
    assert all(r.ok for r in results), [r.errors for r in results]  # every byte verified
    restores = [r.step for r in results if r.step is not None and r.step.kind == "restore"]
    assert [(s.label, s.version) for s in restores] == [("restore 1 (full)", 2), ("restore 2", 0)]
    # going back fetches only what differs between the two versions
    back = versions[0].diff(versions[2])
    assert restores[1].changed_bytes == back.changed_bytes
    assert restores[1].moved_bytes < TREE.total_bytes / 2
    assert tree(root) == {}
    with pytest.raises(ConfigurationError, match="restore names version 3"):
        make().backup_restore(TREE, versions=versions, restore=[3])


# -- a method defined here, outside the package: the skeleton verifies what it restores ---------
@attrs.frozen
class _Corrupting(BackupMethod):
    """``files``, except that its restore flips one byte of the first file it writes."""

    name: ClassVar[str] = "corrupting"
    tool: ClassVar[str] = "none (a test)"
    folders: ClassVar[tuple[str, ...]] = Files.folders

    def replay(self) -> Replay:
        inner = Files().replay()

        class Flipping(Replay):
            def backup(self, session: Session, version: Any, previous: Any) -> None:
                inner.backup(session, version, previous)

            def restore(self, session: Session, version: Any, held: Any, directory: Path) -> None:
                inner.restore(session, version, held, directory)
                victim = directory / version.files[0].path
                data = bytearray(victim.read_bytes())
                data[0] ^= 0xFF
                victim.write_bytes(bytes(data))

        return Flipping()

    def strategy(self, kind: str) -> str:
        return "files, with a corrupted restore"


def test_a_restore_that_differs_fails_verification(tmp_path: Path) -> None:
    make, root = _local(tmp_path)
    before = tree(root)
    results = make(streams=2).backup_restore(TREE, versions=1, method=_Corrupting())
    backup, restore = results
    assert backup.ok
    assert backup.step is not None
    assert backup.step.method == "corrupting"
    assert [e.code for e in restore.errors] == [Code.VERIFICATION_FAILED]
    assert "differs from version 0" in restore.errors[0].message
    assert tree(root) == before


def test_methods_are_refused_before_any_io(tmp_path: Path) -> None:
    make, root = _local(tmp_path)
    before = tree(root)
    with pytest.raises(ConfigurationError, match="unknown backup method 'rsync': choose one of"):
        make().backup_restore(TREE, versions=1, method="rsync")
    with pytest.raises(ConfigurationError, match="runs on memory:// targets only, not file://"):
        make().backup_restore(TREE, versions=1, method=_OnlyMemory())
    assert tree(root) == before


@attrs.frozen
class _OnlyMemory(_Corrupting):
    name: ClassVar[str] = "only-memory"
    protocols: ClassVar[tuple[str, ...]] = ("memory",)


@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_s3_cleanup_runs_at_prep_streams_and_the_steps_at_streams(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/backup-prep", options, client=client, prep_streams=8)
    arrivals: list[tuple[bool, int]] = []  # (a delete?, requests in flight on its arrival)
    bulk: list[str] = []  # the DeleteObjects requests (POST ?delete)

    def record(method: str, path: str, number: int) -> None:
        arrivals.append((method == "DELETE" or path.endswith("?delete"), counting_proxy.in_flight))
        if method == "POST" and path.endswith("?delete"):
            bulk.append(path)

    counting_proxy.reset()
    counting_proxy.fail_when = record
    try:
        results = probe.backup_restore(TREE, versions=2, method="files")
    finally:
        counting_proxy.fail_when = None
    assert all(r.ok for r in results), [r.errors for r in results]
    assert all(r.samples[0].max_in_flight <= 1 for r in results)
    # every listing, check, write and read (the steps' windows, at streams=1) arrived
    # with nothing else in flight on the server side; the closing deletes of the files
    # written, at most prep_streams at a time, are DeleteObjects requests (≤ 1000 names
    # each), not one DELETE per file
    assert max(count for delete, count in arrivals if not delete) == 1
    assert max(count for delete, count in arrivals if delete) <= 8
    assert bulk
    assert sum(1 for delete, _ in arrivals if delete) < len(TREE.files)  # was one per file
    assert tree(s3_bucket_dir) == before


def test_windows_split_by_bytes_an_oversized_item_alone() -> None:
    assert windows([], 10) == []
    assert windows([4, 4, 4, 30, 1, 9, 1], 10) == [range(2), range(2, 3), range(3, 4),
                                                   range(4, 6), range(6, 7)]  # fmt: skip


@pytest.mark.parametrize("method", ["files", "chunks", "rsnapshot", "restic", "rdiff-backup"])
def test_a_small_window_budget_keeps_the_requests_and_restores_every_byte(
    tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Puts and gets split into windows of at most the budget's bytes: the same requests
    as with one window per call, more windows, and every version restored and verified."""
    versions = [TREE, TREE.evolve(seed=1)]
    window = Session._window
    made: list[int] = []

    def counted(self: Session, *args: Any, **kwargs: Any) -> Any:
        made[-1] += 1
        return window(self, *args, **kwargs)

    monkeypatch.setattr(Session, "_window", counted)

    def run(where: str) -> ResultSet:
        root = tmp_path / where
        root.mkdir()
        made.append(0)
        return Probe.from_url(str(root), streams=2).backup_restore(
            versions[0], versions=versions, method=method, chunk_size=CHUNK
        )

    whole = run("whole")
    monkeypatch.setattr(session_module, "WINDOW_BUDGET", 64 * 1024)
    split = run("split")
    assert all(r.ok for r in [*whole, *split]), [r.errors for r in split]
    assert _counts(split) == _counts(whole)
    assert made[1] > made[0]


@pytest.mark.parametrize("method", ["files", "rsnapshot"])
def test_many_small_requests_go_in_windows_of_at_most_window_requests(
    tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HEADs, listings, copies, links, renames and deletes of one call split into
    windows of at most WINDOW_REQUESTS requests: the same requests in the same order,
    every version restored and verified."""
    from storeprobe.execution import execute  # what the session calls

    sent: list[list[tuple[str, str]]] = []
    sizes: list[list[tuple[str, int]]] = []

    def recorded(backend: Any, plan: Any, **kwargs: Any) -> Any:
        requests = plan.requests
        sent[-1] += [(r.kind.value, r.key.rsplit("/storeprobe-", 1)[-1]) for r in requests]
        sizes[-1].append((requests[0].kind.value, len(requests)))
        return execute(backend, plan, **kwargs)

    monkeypatch.setattr(session_module, "execute", recorded)
    versions = [TREE, TREE.evolve(seed=1)]
    for where, most in (("whole", session_module.WINDOW_REQUESTS), ("split", 5)):
        monkeypatch.setattr(session_module, "WINDOW_REQUESTS", most)
        sent.append([])
        sizes.append([])
        (tmp_path / where).mkdir()
        results = Probe.from_url(str(tmp_path / where), streams=2).backup_restore(
            TREE, versions=versions, method=method
        )
        assert all(r.ok for r in results), [r.errors for r in results]
    assert [(k, key.split("/", 1)[-1]) for k, key in sent[0]] == [
        (k, key.split("/", 1)[-1]) for k, key in sent[1]
    ]
    small = [(kind, n) for kind, n in sizes[1] if kind not in ("put", "get")]
    assert max(n for kind, n in sizes[0] if kind not in ("put", "get")) > 5
    assert small
    assert all(n <= 5 for _, n in small)


@pytest.mark.parametrize("method", ["files", "chunks"])
def test_a_restore_holds_no_earlier_window_while_it_reads_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """A restore's windows one at a time: on the local disk a window's reads land in one
    buffer made before it, and while a window is read no earlier window's buffer is still
    alive (a caller's loop variable names the last view handed out through the next
    read, and an object waiting in the assembly may too: the session releases the
    window's views first)."""
    made: list[weakref.ref[bytearray]] = []

    class Tracked(bytearray):  # the local backend's buffers, weakly referenced
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(weakref.ref(self))

    held_during_reads: list[int] = []
    landed: list[int] = []
    received = Session._received

    def reading(self: Session, reads: Any, landings: Any) -> Any:
        current = {id(at.obj) for at in landings or () if isinstance(at, memoryview)}
        landed.append(len(current))
        held_during_reads.append(
            sum(1 for ref in made if (buffer := ref()) is not None and id(buffer) not in current)
        )
        return received(self, reads, landings)

    monkeypatch.setattr(local_module, "bytearray", Tracked, raising=False)
    monkeypatch.setattr(Session, "_received", reading)
    monkeypatch.setattr(session_module, "WINDOW_BUDGET", 64 * 1024)
    results = Probe.from_url(str(tmp_path)).backup_restore(
        TREE, versions=[TREE, TREE.evolve(seed=1)], method=method
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    assert landed.count(1) > 2  # several windows per restore, each in one buffer
    assert set(landed) <= {0, 1}
    assert set(held_during_reads) == {0}


def test_an_object_larger_than_a_window_is_staged_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image file above the budget goes as one PUT of a staged file (the client reads
    it as it sends) and comes back as one GET landing in a staged file: the same requests
    as in memory, and every byte restored."""
    import storeprobe.staging as staging_module

    staged: list[int] = []
    of_payloads = staging_module.Staging.of_payloads.__func__  # type: ignore[attr-defined]

    def counted(cls: type, payloads: Any, index: int, size: int, directory: Any = None) -> Any:
        staged.append(size)
        return of_payloads(cls, payloads, index, size, directory)

    blank = staging_module.Staging.blank.__func__  # type: ignore[attr-defined]
    landed: list[int] = []

    def counted_blank(cls: type, size: int, directory: Any = None) -> Any:
        landed.append(size)
        return blank(cls, size, directory)

    image = Image.create("1MiB", block_size="64KiB", seed=5)
    versions = [image, image.evolve(seed=1)]

    def run(where: str) -> ResultSet:
        root = tmp_path / where
        root.mkdir()
        return Probe.from_url(str(root)).backup_restore(
            versions[0], versions=versions, method="files"
        )

    whole = run("whole")
    assert staged == []
    monkeypatch.setattr(staging_module.Staging, "of_payloads", classmethod(counted))
    monkeypatch.setattr(staging_module.Staging, "blank", classmethod(counted_blank))
    monkeypatch.setattr(session_module, "WINDOW_BUDGET", 256 * 1024)
    split = run("split")
    assert all(r.ok for r in [*whole, *split]), [r.errors for r in split]
    assert _counts(split) == _counts(whole)
    assert staged == [image.total_bytes, image.total_bytes]  # the image, once per backup
    gets = sum(counts.get("get", 0) for counts in _counts(split))
    assert gets >= 2
    assert landed == [image.total_bytes] * gets  # and every GET of it lands in a file


def test_an_object_larger_than_a_window_lands_in_a_file_over_sftp(
    ssh_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SFTP too, a restore's GET of an object above the budget lands in a staging
    file block by block as it arrives (asyncssh's ``read_parallel``), never joined
    into one ``bytes``; every byte restored and checked."""
    import storeprobe.staging as staging_module

    blank = staging_module.Staging.blank.__func__  # type: ignore[attr-defined]
    landed: list[int] = []

    def counted_blank(cls: type, size: int, directory: Any = None) -> Any:
        landed.append(size)
        return blank(cls, size, directory)

    monkeypatch.setattr(staging_module.Staging, "blank", classmethod(counted_blank))
    monkeypatch.setattr(session_module, "WINDOW_BUDGET", 256 * 1024)
    assert ssh_server.root is not None
    root = ssh_server.root / "staged-restore"
    root.mkdir(exist_ok=True)
    image = Image.create("3MiB", block_size="64KiB", seed=6)
    versions = [image, image.evolve(seed=2)]
    probe = Probe.from_url(f"sftp://127.0.0.1{root}", ssh_options(ssh_server), streams=2)
    results = probe.backup_restore(versions[0], versions=versions, method="files")
    assert all(r.ok for r in results), [r.errors for r in results]
    gets = sum(counts.get("get", 0) for counts in _counts(results))
    assert gets >= 2
    assert landed == [image.total_bytes] * gets
    assert tree(root) == {}


def test_chunks_cut_window_by_window_are_the_chunks_of_the_whole() -> None:
    data = Image.create("3MiB", block_size="64KiB", seed=9).payload(
        Image.create("3MiB", block_size="64KiB", seed=9).file
    )
    chunking = Chunking(average=16 * 1024)
    whole = [(offset, data[offset : offset + length]) for offset, length in chunking.cut(data)]
    windowed = list(chunking.cut_windows(lambda a, b: data[a:b], len(data), window=200 * 1024 + 7))
    assert len(whole) > 100
    assert windowed == whole
    assert list(chunking.cut_windows(lambda a, b: b"", 0)) == [(0, b"")]


@pytest.mark.s3
@pytest.mark.parametrize("client", ["s3fs", "obstore"])
def test_a_file_above_the_part_threshold_is_a_multipart_upload_restored_byte_for_byte(
    s3_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """files on S3 with rclone's upload cutoff lowered to 8 MiB: a 24 MiB image is one
    multipart upload per backup (create, five parts of 5 MiB, complete; obstore's own
    multipart upload is one request of the client's), and each restore reads it back and
    checks every byte. With the window budget lowered below the image (16 MiB), the parts
    s3fs sends come from a staging file, not from memory: the same requests."""
    import storeprobe.staging as staging_module

    image = Image.create("24MiB", block_size="64KiB", seed=4)
    versions = [image, image.evolve(seed=1)]
    method = Files(upload_cutoff="8MiB")
    staged: list[int] = []
    of_payloads = staging_module.Staging.of_payloads.__func__  # type: ignore[attr-defined]

    def counted(cls: type, payloads: Any, index: int, size: int, directory: Any = None) -> Any:
        staged.append(size)
        return of_payloads(cls, payloads, index, size, directory)

    def run(bucket: str) -> ResultSet:
        url = f"s3://bench/{bucket}-{client}"
        probe = Probe.from_url(url, s3_options(s3_server.endpoint), client=client)
        return probe.backup_restore(image, versions=versions, method=method)

    whole = run("parts-memory")
    monkeypatch.setattr(staging_module.Staging, "of_payloads", classmethod(counted))
    monkeypatch.setattr(session_module, "WINDOW_BUDGET", 16 * 1024 * 1024)
    split = run("parts-staged")
    for results in (whole, split):
        assert all(r.ok for r in results), [r.errors for r in results]
        assert [r.step.kind for r in results if r.step] == ["backup"] * 2 + ["restore"] * 2
    assert _counts(split) == _counts(whole)
    backups = _counts(split)[:2]
    assert [c.get("put-part") for c in backups] == [5, 5], backups  # ⌈24 / 5⌉ parts each
    # s3fs: the image staged once per backup; obstore is handed the blob whole
    assert staged == ([image.total_bytes] * 2 if client == "s3fs" else [])


def test_the_local_scan_of_usage_sees_what_fsspec_find_sees(tmp_path: Path) -> None:
    """The space a step uses on the local disk is counted from a scan, entry by entry:
    the same files, sizes, inodes and link counts as fsspec's ``find`` (hard links,
    symbolic links to a file, to a folder and dangling)."""
    import fsspec

    from storeprobe.backup.session import _scanned

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "x").write_bytes(b"12345")
    os.link(tmp_path / "a" / "x", tmp_path / "a" / "b" / "y")
    (tmp_path / "z").write_bytes(b"1")
    os.symlink(tmp_path / "z", tmp_path / "a" / "l")
    os.symlink(tmp_path / "gone", tmp_path / "a" / "dangling")
    os.symlink(tmp_path / "a" / "b", tmp_path / "folder-link")
    found = fsspec.filesystem("file").find(str(tmp_path), detail=True)

    def seen(entries: Any) -> dict[str, tuple[int, int, int]]:
        return {name: (e["size"], e["ino"], e["nlink"]) for name, e in entries}

    assert len(found) == 6
    assert seen(_scanned(str(tmp_path))) == seen(found.items())


@pytest.mark.parametrize("method", ["files", "rsnapshot"])
def test_the_space_is_walked_after_a_step_that_changed_the_target_only(
    tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore reads, lists and HEADs: the space after it is the space the last
    backup left, found without walking the target again; each backup walks it once."""
    listed = Session._listed
    walks: list[int] = []

    def counted(self: Session) -> Any:
        walks.append(1)
        return listed(self)

    monkeypatch.setattr(Session, "_listed", counted)
    results = Probe.from_url(str(tmp_path)).backup_restore(TREE, versions=3, method=method)
    assert all(r.ok for r in results), [r.errors for r in results]
    assert len(walks) == 3
    backups = [r.step for r in results if r.step is not None and r.step.kind == "backup"]
    restores = [r.step for r in results if r.step is not None and r.step.kind == "restore"]
    assert len(backups) == len(restores) == 3
    last = backups[-1]
    assert last.space_used is not None
    assert last.space_used > 0
    assert {(s.space_used, s.objects_stored) for s in restores} == {
        (last.space_used, last.objects_stored)
    }


def _restores_in_staged_ranges(
    url: str,
    options: dict[str, Any],
    method: str | BackupMethod,
    versions: list[Image],
    monkeypatch: pytest.MonkeyPatch,
    client: str = "auto",
) -> list[bool]:
    """Run ``method`` on ``versions`` with the default budget and with a 256 KiB one (so
    a range above 256 KiB is staged); assert the same requests in the same order and
    every restore verified; return, per staged read of the small budget, whether it
    was a ranged read."""
    from storeprobe.execution import execute  # what the session calls
    from storeprobe.staging import Staging

    received = Session._received
    sent: list[list[tuple[str, str, int | None, int | None]]] = []
    staged: list[bool] = []

    def recorded(backend: Any, plan: Any, **kwargs: Any) -> Any:
        sent[-1] += [
            (r.kind.value, r.key.rsplit("/storeprobe-", 1)[-1].split("/", 1)[-1], r.start, r.stop)
            for r in plan.requests
        ]
        return execute(backend, plan, **kwargs)

    def landing(self: Session, reads: Any, landings: Any) -> Any:
        for read, into in zip(reads, landings or [], strict=False):
            if isinstance(into, Staging):  # not a view of a window's buffer
                staged.append(read.start is not None)
        return received(self, reads, landings)

    monkeypatch.setattr(session_module, "execute", recorded)
    monkeypatch.setattr(Session, "_received", landing)
    for where, budget in (("whole", session_module.WINDOW_BUDGET), ("staged", 256 * 1024)):
        monkeypatch.setattr(session_module, "WINDOW_BUDGET", budget)
        staged.clear()
        sent.append([])
        if "://" not in url:
            Path(url, where).mkdir()
        probe = Probe.from_url(f"{url}/{where}", options, client=client, streams=2)
        results = probe.backup_restore(versions[0], versions=versions, method=method)
        assert all(r.ok for r in results), [r.errors for r in results]  # verified
    assert sent[0] == sent[1]
    return staged


#: an image rewritten whole, then in a few runs: rdiff-backup's restores of the older
#: versions read a diff the image's size and the mirror's copied runs (about 1 MiB each),
#: restic's read whole 1 MiB packs
_RUNS = Image.create("4MiB", block_size="64KiB", seed=6)
_RUN_VERSIONS = [_RUNS, _RUNS.evolve(fraction=1.0, seed=1)]
_RUN_VERSIONS.append(_RUN_VERSIONS[-1].evolve(fraction=0.05, pattern="clustered", seed=2))


@pytest.mark.parametrize("method", ["rdiff-backup", "restic"])
def test_a_ranged_read_above_the_threshold_lands_in_a_staging_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """On the local disk, with the budget lowered to 256 KiB: rdiff-backup's diffs (a
    whole image rewritten: a diff of its size) and copied runs and restic's pack ranges
    land in staging files during their GETs, the same requests in the same order, and
    every restore byte for byte."""
    from storeprobe.backup.restic import Restic

    chosen: str | BackupMethod = Restic(pack_size="1MiB") if method == "restic" else method
    staged = _restores_in_staged_ranges(str(tmp_path), {}, chosen, _RUN_VERSIONS, monkeypatch)
    assert any(staged)  # ranged reads staged
    if method == "rdiff-backup":
        assert not all(staged)  # and whole ones: the mirror, the diffs


@pytest.mark.s3
@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_a_staged_pack_range_on_s3_restores_byte_for_byte(
    moto_server: Server, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """restic on S3 (moto answers ranges with 206, so obstore reads them itself) with
    the budget at 256 KiB: each 1 MiB pack's range lands in a staging file (obstore
    writes its buffer there, s3fs the body as it arrives), the same requests."""
    from storeprobe.backup.restic import Restic

    staged = _restores_in_staged_ranges(
        f"s3://bench/staged-ranges-{client}",
        s3_options(moto_server.endpoint),
        Restic(pack_size="1MiB"),
        _RUN_VERSIONS,
        monkeypatch,
        client=client,
    )
    assert staged
    assert all(staged)  # restic reads only ranges


@pytest.mark.parametrize("method", ["restic", "duplicity"])
def test_a_failed_range_check_raises_named_and_leaves_nothing(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, method: str
) -> None:
    # the scenario's one untimed check of how byte ranges are read, refused by the server
    # (403 to its ranged GET): the run stops before step 1 with the action named, the
    # check's object deleted and the run prefix removed
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/range-refused", options, client="obstore", streams=2)
    counting_proxy.reset()
    counting_proxy.fail_when = lambda verb, path, n: (
        403 if verb == "GET" and path.endswith("/range-check") else None
    )
    with pytest.raises(TargetPermissionError, match="checking how byte ranges are read on"):
        probe.backup_restore(TREE, versions=1, method=method, chunk_size=CHUNK)
    checks = [verb for verb, path in counting_proxy.targets if path.endswith("/range-check")]
    assert checks == ["PUT", "GET"]
    assert counting_proxy.targets[-1] == ("POST", "/bench?delete")  # the check's object
    assert tree(s3_bucket_dir) == before


@pytest.mark.parametrize("method", ["files", "chunks"])
def test_a_windows_buffers_are_released_once_it_has_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """A window's bodies and landings are released after it runs, though something still
    names them (here the wrapper below, as a client's lingering coroutine frame does): by
    the next window every view of the windows before is released, so their one buffer is
    freed rather than held beside the next."""
    from storeprobe.execution import execute  # what the session calls

    held: list[memoryview] = []
    windows = [0]

    def window(backend: Any, plan: Any, **kwargs: Any) -> Any:
        for view in held:
            with pytest.raises(ValueError, match="released"):
                len(view)
        made = [*(kwargs.get("bodies") or ()), *(kwargs.get("landings") or ())]
        held.extend(b for b in made if isinstance(b, memoryview))
        windows[0] += 1
        return execute(backend, plan, **kwargs)

    monkeypatch.setattr(session_module, "execute", window)
    results = Probe.from_url(str(tmp_path), streams=2).backup_restore(
        TREE, versions=[TREE, TREE.evolve(seed=1)], method=method
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    assert len(held) > 10  # views of writes and of reads were made
    assert windows[0] > 2
    for view in held:
        with pytest.raises(ValueError, match="released"):
            len(view)


def test_windows_of_writes_share_one_buffer_until_a_window_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consecutive windows of writes take their bodies from one buffer (the session's
    arena: its pages touched once, not once a window; a new one only for a window larger
    than all before); before a window of reads the arena lets it go, so the landings
    never sit beside it."""
    from storeprobe.arena import Arena
    from storeprobe.execution import execute  # what the session calls

    seen: list[tuple[str, tuple[object, int] | None]] = []  # windows, releases
    release = Arena.release

    def released(arena: Arena) -> None:
        seen.append(("release", None))
        release(arena)
        assert arena.size == 0

    def window(backend: Any, plan: Any, **kwargs: Any) -> Any:
        bodies = [b for b in kwargs.get("bodies") or () if isinstance(b, memoryview)]
        if bodies:
            assert len({id(b.obj) for b in bodies}) == 1  # slices of one buffer
            seen.append(("writes", (bodies[0].obj, sum(len(b) for b in bodies))))  # kept
        elif any(r.kind is Kind.GET for r in plan.requests):
            seen.append(("reads", None))
        return execute(backend, plan, **kwargs)

    landings = local_module.LocalBackend.landings

    def landed(backend: Any, sizes: Any, arena: Arena | None = None) -> Any:
        seen.append(("landings", None))  # made before their window, so checked here
        return landings(backend, sizes, arena)

    monkeypatch.setattr(session_module, "execute", window)
    monkeypatch.setattr(Arena, "release", released)
    monkeypatch.setattr(local_module.LocalBackend, "landings", landed)
    monkeypatch.setattr(session_module, "WINDOW_BUDGET", 256 * 1024)
    results = Probe.from_url(str(tmp_path), streams=2).backup_restore(
        TREE, versions=[TREE, TREE.evolve(seed=1)], method="chunks", chunk_size=CHUNK
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    kinds = [kind for kind, _ in seen]
    writes = [pair for kind, pair in seen if pair is not None]
    assert len(writes) >= 3  # several windows of writes
    largest, buffers = 0, 0
    for (buffer, size), (previous, _) in zip(writes, [(None, 0), *writes[:-1]], strict=True):
        if buffer is not previous:  # a new buffer only for a window larger than all before
            assert size > largest
            buffers += 1
        largest = max(largest, size)
    assert buffers < len(writes) / 2
    first_landings = kinds.index("landings")
    assert kinds[first_landings - 1] == "release"  # the buffer let go before landings
    assert "writes" not in kinds[first_landings:]  # (the restores follow every backup)
    assert "reads" in kinds[first_landings:]


def test_the_heap_is_given_back_between_windows_once_enough_went_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C heap's free memory is given back (``malloc_trim``) before a window once the
    windows since the last time moved GIVE_BACK_AFTER (bytes, plus REQUEST_WEIGHT a
    request), never sooner, and never while a window runs."""
    from storeprobe.execution import execute  # what the session calls

    events: list[tuple[str, int]] = []
    running = [False]

    def window(backend: Any, plan: Any, **kwargs: Any) -> Any:
        running[0] = True
        try:
            run = execute(backend, plan, **kwargs)
        finally:
            running[0] = False
        weight = session_module.REQUEST_WEIGHT * len(plan.requests)
        events.append(("window", int(run.timings.nbytes.sum()) + weight))
        return run

    def give_back() -> bool:
        assert not running[0], "given back inside a window"
        events.append(("give back", 0))
        return True

    monkeypatch.setattr(session_module, "execute", window)
    monkeypatch.setattr(session_module, "give_back", give_back)
    monkeypatch.setattr(session_module, "GIVE_BACK_AFTER", 256 * 1024)
    results = Probe.from_url(str(tmp_path), streams=2).backup_restore(
        TREE, versions=[TREE, TREE.evolve(seed=1)], method="files"
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    through = 0
    for kind, amount in events:
        if kind == "give back":
            assert through >= 256 * 1024  # never sooner
            through = 0
        else:
            assert through < 256 * 1024  # not later: a window after enough is preceded by one
            through += amount
    assert sum(kind == "give back" for kind, _ in events) >= 2
