"""A backup method defined in this file alone, outside the package: the house's proof
that a new method is one small module.

``_Archive`` replays an archiver that writes each version as one object (every file's
bytes, one after another: ``tar`` without headers) and restores by reading that object
whole. It is the skeleton's whole contract: a frozen :class:`BackupMethod` with a name,
a tool, a strategy sentence and a :class:`Replay` that asks its :class:`Session` for
windows. The scenario does the rest (run prefix, timing, retries counted, cache
eviction, verification byte for byte, cleanup) on every storage, here the local disk and
a real S3 server, counted request for request at a proxy.
"""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path
from typing import ClassVar

import attrs
import pytest

from storeprobe import Probe
from storeprobe.backup import BackupMethod, Replay, Session
from storeprobe.backup.method import StepKind
from storeprobe.backup.objects import Blob, Read
from storeprobe.dataset import Dataset, Sizes, Tree
from storeprobe.manifest import Piece
from storeprobe.restore import write_files
from tests.conftest import s3_options
from tests.helpers import tree
from tests.http_proxy import CountingProxy

TREE = Tree.generate(24, Sizes.lognormal("4KiB", 1.0, "64KiB"), seed=5)
VERSIONS = [TREE, TREE.evolve(changed=3, added=2, deleted=1, seed=2)]


# -- the method: everything a new one needs ------------------------------------------------
class _ArchiveReplay(Replay):
    def backup(self, session: Session, version: Dataset, previous: Dataset | None) -> None:
        pieces = tuple(Piece(version, file, 0, file.size) for file in version.files)
        session.put([Blob(key=session.key("archives", f"v{version.version}"), segments=pieces)])

    def restore(
        self, session: Session, version: Dataset, held: Dataset | None, directory: Path
    ) -> None:
        (data,) = session.get([Read(key=session.key("archives", f"v{version.version}"))])
        ends = itertools.accumulate(file.size for file in version.files)
        starts = itertools.chain([0], itertools.accumulate(f.size for f in version.files))
        files = {f.path: data[a:b] for f, a, b in zip(version.files, starts, ends, strict=False)}
        gone = [] if held is None else [f.path for f in held.files if f.path not in files]
        write_files(directory, files, gone)


@attrs.frozen
class _Archive(BackupMethod):
    """One object per version holding every file's bytes; a restore reads it whole."""

    name: ClassVar[str] = "archive"
    tool: ClassVar[str] = "none (an archiver without headers, for this test)"
    folders: ClassVar[tuple[str, ...]] = ("archives",)

    def replay(self) -> Replay:
        return _ArchiveReplay()

    def strategy(self, kind: StepKind) -> str:
        return "one object per version" if kind == "backup" else "read the version's object"


# -- what the house gives it -----------------------------------------------------------------
def test_the_new_method_is_a_few_dozen_lines() -> None:
    lines = sum(len(inspect.getsource(part).splitlines()) for part in (_ArchiveReplay, _Archive))
    assert lines <= 40, lines  # the note reports the count


def test_the_new_method_runs_on_the_local_disk(tmp_path: Path) -> None:
    root = tmp_path / "target"
    root.mkdir()
    probe = Probe.from_url(f"file://{root}", streams=2)
    results = probe.backup_restore(TREE, versions=VERSIONS, method=_Archive(), restore=[1, 0])
    assert all(r.ok for r in results), [r.errors for r in results]  # restores verified
    assert [r.step.method for r in results if r.step] == ["archive"] * 4
    for result, version in zip(results[:2], VERSIONS, strict=True):
        assert result.requests_by_kind == {"put": 1}
        assert result.samples[0].nbytes == version.total_bytes
    assert [r.requests_by_kind for r in results[2:]] == [{"get": 1}, {"get": 1}]
    assert tree(root) == {}  # the scenario deleted what the method wrote


@pytest.mark.s3
def test_the_new_method_runs_on_s3_counted_at_the_server(
    counting_proxy: CountingProxy, s3_bucket_dir: Path
) -> None:
    before = tree(s3_bucket_dir)
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    probe = Probe.from_url("s3://bench/archive", options, streams=2)
    counting_proxy.reset()
    results = probe.backup_restore(TREE, versions=VERSIONS, method=_Archive())
    assert all(r.ok for r in results), [r.errors for r in results]
    # the proxy saw each step's one request (and the run's own checks and cleanup)
    assert counting_proxy.methods.count("PUT") >= 2
    assert sum(r.requests_by_kind.get("put", 0) for r in results) == 2
    assert sum(r.requests_by_kind.get("get", 0) for r in results) == 2
    assert all(r.samples[0].retries == 0 for r in results)  # counted, and none here
    assert tree(s3_bucket_dir) == before
