"""The harness that runs the real backup tools (tests/backup_tools.py, tests/s3_log.py).

Each tool runs once on a tiny tree (about 300 KiB, two versions) against the logging S3
server or the local disk; the tests check that what the log saw matches what the tool
and the target say (restic's own repository listing, duplicity's files, rclone's moves)
and that every restore gives back the version byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config
from werkzeug.test import EnvironBuilder

from storeprobe.dataset import Image, Sizes, Tree
from tests.backup_tools import (
    S3_KEY,
    S3_SECRET,
    Duplicity,
    LoggingS3,
    RcloneSync,
    RdiffBackup,
    RequestLog,
    Requests,
    Restic,
    Rsnapshot,
    ToolStep,
    Workspace,
    check_directory,
    classify,
    file_mtime,
    logging_s3,
    materialize,
    run_tool,
)
from tests.s3_log import _logging_middleware

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

TREE = Tree.generate(48, Sizes.uniform("1KiB", "12KiB"), seed=7)
VERSIONS = (TREE, TREE.evolve(changed=6, added=3, deleted=2, seed=1))
CHANGES = VERSIONS[1].diff(VERSIONS[0])


@pytest.fixture(scope="module")
def s3() -> Iterator[LoggingS3]:
    with logging_s3() as server:
        yield server


@pytest.fixture(scope="module")
def workspace(s3: LoggingS3, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("harness"), s3)


def _run(
    tool: Restic | Duplicity | RdiffBackup | Rsnapshot | RcloneSync, source: Path
) -> list[ToolStep]:
    steps = []
    for version in VERSIONS:
        materialize(version, source)
        steps.append(tool.backup(version))
        # on S3 the log explains the target: written minus deleted is what it gained
        on_s3 = steps[-1].requests is not None
        assert steps[-1].log_consistent is (True if on_s3 else None)
    return steps


def _restore_checked(
    tool: Restic | Duplicity | RdiffBackup | Rsnapshot, into: Path
) -> list[ToolStep]:
    steps = []
    for index, version in enumerate(VERSIONS):
        steps.append(tool.restore(index, into / str(index)))
        assert check_directory(version, into / str(index)) == ()
        assert steps[-1].objects == steps[-1].objects_before
    return steps


# -- the request log ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "bucket", "key", "query", "copy", "kind"),
    [
        ("PUT", "b", "k", {}, False, "put"),
        ("PUT", "b", "k", {"partNumber": "1", "uploadId": "u"}, False, "part"),
        ("POST", "b", "k", {"uploads": ""}, False, "multipart"),
        ("POST", "b", "k", {"uploadId": "u"}, False, "multipart"),
        ("DELETE", "b", "k", {"uploadId": "u"}, False, "multipart"),
        ("PUT", "b", "k", {}, True, "copy"),
        ("GET", "b", "k", {}, False, "get"),
        ("HEAD", "b", "k", {}, False, "head"),
        ("GET", "b", "", {"list-type": "2", "prefix": "p/", "fetch-owner": "true"}, False, "list"),
        ("GET", "b", "", {}, False, "list"),
        ("GET", "b", "", {"uploads": ""}, False, "list"),
        ("GET", "", "", {}, False, "list"),
        ("DELETE", "b", "k", {}, False, "delete"),
        ("POST", "b", "", {"delete": ""}, False, "delete"),
        ("HEAD", "b", "", {}, False, "bucket"),
        ("GET", "b", "", {"location": ""}, False, "bucket"),
        ("PUT", "b", "", {}, False, "bucket"),
        ("PUT", "b", "k", {"tagging": ""}, False, "other"),
    ],
)
def test_classify(
    method: str, bucket: str, key: str, query: dict[str, str], copy: bool, kind: str
) -> None:
    assert classify(method, bucket, key, query, copy) == kind


def test_log_counts_requests_and_body_bytes(s3: LoggingS3) -> None:
    s3.create_bucket("logtest")
    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_SECRET,
        region_name="us-east-1",
        # plain bodies (no aws-chunked framing), so bytes in are the payload exactly
        config=Config(request_checksum_calculation="when_required"),
    )
    before = s3.log.snapshot()
    payload = os.urandom(100_000)
    client.put_object(Bucket="logtest", Key="a/one", Body=payload)
    client.put_object(Bucket="logtest", Key="a/two", Body=b"x" * 10)
    client.put_object(Bucket="logtest", Key="b/three", Body=b"y")
    assert client.get_object(Bucket="logtest", Key="a/one", Range="bytes=0-999")["Body"].read()
    client.head_object(Bucket="logtest", Key="a/two")
    client.list_objects_v2(Bucket="logtest", Prefix="a/")
    client.delete_objects(
        Bucket="logtest", Delete={"Objects": [{"Key": "a/one"}, {"Key": "a/two"}]}
    )
    seen = s3.log.snapshot().after(before).where(bucket="logtest")
    assert dict(seen.by_kind) == {
        "put": 3, "part": 0, "multipart": 0, "copy": 0, "get": 1, "head": 1, "list": 1,
        "delete": 1, "bucket": 0, "other": 0,
    }  # fmt: skip
    puts = seen.where(kind="put")
    assert [r.bytes_in for r in puts] == [100_000, 10, 1]
    assert puts.payload_in == puts.bytes_in == 100_011  # plain bodies: no framing
    get = seen.where(kind="get").records[0]
    assert (get.range, get.bytes_out, get.status) == ("bytes=0-999", 1000, 206)
    assert seen.ranged_gets == 1
    assert seen.keys_deleted == 2
    assert seen.objects_written == 3
    assert seen.where(prefix="a/").count("put") == 2
    assert seen.where(prefix="a/").count("list") == 1  # the listing's prefix matches
    assert dict(seen.by_class) == {
        "writes": 3, "reads": 1, "checks": 1, "listings": 1, "deletes": 1, "control": 0,
    }  # fmt: skip
    assert [o.key for o in s3.objects("logtest")] == ["b/three"]  # untracked
    assert len(s3.log.snapshot().after(before)) == len(seen)
    s3.delete_bucket("logtest")


def test_a_multipart_upload_is_create_parts_complete(s3: LoggingS3) -> None:
    s3.create_bucket("multipart")
    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_SECRET,
        region_name="us-east-1",
        config=Config(request_checksum_calculation="when_required"),
    )
    mark = s3.log.mark()
    upload = client.create_multipart_upload(Bucket="multipart", Key="big")["UploadId"]
    parts = []
    for number, size in ((1, 5 << 20), (2, 1000)):
        etag = client.upload_part(
            Bucket="multipart", Key="big", UploadId=upload, PartNumber=number, Body=b"z" * size
        )["ETag"]
        parts.append({"ETag": etag, "PartNumber": number})
    client.complete_multipart_upload(
        Bucket="multipart", Key="big", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    seen = s3.log.snapshot(mark)
    assert dict(seen.by_storeprobe_kind) == {
        "create-multipart": 1, "put-part": 2, "complete-multipart": 1,
    }  # fmt: skip
    assert seen.count("part") == 2
    assert seen.count("multipart") == 2
    assert seen.objects_written == 1
    assert seen.where(kind="part").bytes_in == (5 << 20) + 1000
    assert s3.objects("multipart")[0].size == (5 << 20) + 1000
    s3.delete_bucket("multipart")


def test_a_request_is_logged_before_its_response_is_sent() -> None:
    # so a client that has its answer (and a tool that has exited) never races the log
    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Length", "5")])
        yield b"hello"

    log = RequestLog()
    environ = EnvironBuilder(path="/b/k", method="GET").get_environ()
    response = _logging_middleware(app, log)(environ, lambda *args: lambda data: None)
    assert [r.describe() for r in log.snapshot()] == ["GET b/k [get] 0 B in, 5 B out (200)"]
    assert b"".join(response) == b"hello"


# -- datasets on disk ---------------------------------------------------------------------


def test_materialize_rewrites_only_what_changed(tmp_path: Path) -> None:
    first = materialize(VERSIONS[0], tmp_path)
    assert (first.written, first.removed, first.kept) == (len(TREE.files), 0, 0)
    kept = CHANGES.unchanged[0]
    inode = (tmp_path / kept.path).stat().st_ino
    second = materialize(VERSIONS[1], tmp_path)
    assert second.written == len(CHANGES.changed) + len(CHANGES.added)
    assert second.removed == len(CHANGES.deleted)
    assert second.kept == len(CHANGES.unchanged)
    assert (tmp_path / kept.path).stat().st_ino == inode
    assert check_directory(VERSIONS[1], tmp_path) == ()
    for file in VERSIONS[1].files:
        assert int((tmp_path / file.path).stat().st_mtime) == file_mtime(file)
    again = materialize(VERSIONS[1], tmp_path)
    assert (again.written, again.removed) == (0, 0)


def test_materialize_an_image_and_check_finds_a_changed_byte(tmp_path: Path) -> None:
    image = Image.create("256KiB", block_size="4KiB", seed=2)
    evolved = image.evolve(fraction=0.1)
    materialize(image, tmp_path)
    assert check_directory(evolved, tmp_path) != ()
    materialize(evolved, tmp_path)
    assert check_directory(evolved, tmp_path) == ()
    with open(tmp_path / "disk.img", "r+b") as disk:
        disk.seek(1000)
        byte = disk.read(1)
        disk.seek(1000)
        disk.write(bytes([byte[0] ^ 1]))
    assert check_directory(evolved, tmp_path) == ("disk.img: differs at byte 1000",)


# -- the tools ----------------------------------------------------------------------------


def _written_minus_deleted(steps: list[ToolStep]) -> int:
    requests = Requests(tuple(r for step in steps if step.requests for r in step.requests))
    return requests.objects_written - requests.keys_deleted


def test_restic_on_s3(workspace: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "src"
    restic = Restic.on_s3(workspace, source, bucket="t-restic")
    init = restic.init()
    backups = _run(restic, source)
    stored = workspace.require_s3().objects("t-restic", "repo/")
    # every object the log saw written and not deleted is in the repository, and only those
    assert backups[-1].objects == len(stored) == _written_minus_deleted([init, *backups])
    listed = restic.repository_objects()
    assert listed["locks"] == 0  # each operation deleted its lock
    assert len(stored) == 1 + sum(listed.values())  # + config
    for step in backups:
        assert step.requests is not None
        assert step.requests.count("put") >= 3  # data pack(s), index, snapshot (+ lock)
        assert step.requests.count("delete") == 1  # the lock
        assert step.requests.where(prefix="repo/snapshots/").count("put") == 1
    first, second = (step.requests for step in backups)
    assert first is not None
    assert second is not None
    assert second.bytes_in < first.bytes_in / 2  # unchanged files are not sent again
    # minio-go sends aws-chunked bodies; the content they carried is what the repository
    # holds, once the locks (written and deleted by each operation) are left out
    assert first.payload_in < first.bytes_in
    puts = Requests(tuple(r for s in [init, *backups] if s.requests for r in s.requests))
    puts = puts.where(kind="put")
    locks = puts.where(prefix="repo/locks/")
    assert puts.payload_in - locks.payload_in == sum(o.size for o in stored)
    restores = _restore_checked(restic, tmp_path / "out")
    for step in restores:
        assert step.requests is not None
        assert step.requests.count("get") >= 2  # the index, the packs
        assert step.requests.bytes_in < 1024  # only the lock


def test_duplicity_on_s3_and_disk(workspace: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "src"
    on_s3 = Duplicity.on_s3(workspace, source, bucket="t-duplicity")
    on_disk = Duplicity.on_disk(workspace, source, tmp_path / "dup")
    steps_s3, steps_disk = [], []
    for version in VERSIONS:
        materialize(version, source)
        steps_s3.append(on_s3.backup(version))
        steps_disk.append(on_disk.backup(version))
        assert steps_s3[-1].log_consistent is True
        assert steps_disk[-1].log_consistent is None
    # each step: one difftar volume, one signature archive, one manifest
    assert [step.objects for step in steps_s3] == [3, 6]
    assert [step.objects for step in steps_disk] == [3, 6]
    names = sorted(o.key.rsplit("/", 1)[-1] for o in workspace.require_s3().objects("t-duplicity"))
    assert sum(".manifest" in n for n in names) == 2
    assert sum(".sigtar" in n for n in names) == 2
    assert sum(".difftar" in n for n in names) == 2
    assert steps_s3[-1].objects == _written_minus_deleted(steps_s3)
    first, second = (step.requests for step in steps_s3)
    assert first is not None
    assert second is not None
    assert first.count("put") == second.count("put") == 3
    assert second.bytes_in < first.bytes_in / 2  # an incremental: deltas and new files
    _restore_checked(on_s3, tmp_path / "out-s3")
    _restore_checked(on_disk, tmp_path / "out-disk")


def test_rdiff_backup(workspace: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "src"
    rdiff = RdiffBackup(workspace, source, tmp_path / "rdiff")
    run = run_tool(rdiff, VERSIONS, source, tmp_path / "out")
    first, second = run.backups
    assert first.requests is None
    assert first.objects > len(TREE.files)  # the mirror plus rdiff-backup-data
    assert 0 < second.space - first.space < TREE.total_bytes / 2  # increments, not a copy
    assert [(step.version, step.problems) for step in run.restores] == [(0, ()), (1, ())]
    assert not (tmp_path / "out" / "0").exists()  # run_tool removes what it restored


def test_rsnapshot_links_unchanged_files(workspace: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "src"
    rsnapshot = Rsnapshot(workspace, source, tmp_path / "snaps")
    first, second = _run(rsnapshot, source)
    assert first.objects == len(VERSIONS[0].files)
    assert second.objects == len(VERSIONS[0].files) + len(VERSIONS[1].files)
    # du counts a hard-linked file once: the second snapshot adds only the new bytes
    new_bytes = CHANGES.changed_bytes
    assert second.file_bytes - first.file_bytes == new_bytes
    kept = CHANGES.unchanged[0].path
    snaps = tmp_path / "snaps"
    assert (snaps / "snap0" / kept).stat().st_ino == (snaps / "snap1" / kept).stat().st_ino
    _restore_checked(rsnapshot, tmp_path / "out")


def test_rclone_sync_backup_dir(workspace: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "src"
    rclone = RcloneSync.on_s3(workspace, source, bucket="t-rclone")
    first, second = _run(rclone, source)
    assert first.requests is not None
    assert second.requests is not None
    assert first.requests.count("put") == len(TREE.files)
    moved = len(CHANGES.changed) + len(CHANGES.deleted)
    # overwritten and deleted files are moved to the backup dir: a copy and a delete each
    assert second.requests.count("copy") == moved
    assert second.requests.keys_deleted == moved
    assert second.requests.count("put") == len(CHANGES.changed) + len(CHANGES.added)
    assert (
        second.objects == len(VERSIONS[1].files) + moved == _written_minus_deleted([first, second])
    )
    latest = rclone.restore(1, tmp_path / "latest")
    assert check_directory(VERSIONS[1], tmp_path / "latest") == ()
    assert latest.requests is not None
    assert latest.requests.bytes_out >= VERSIONS[1].total_bytes
    rclone.restore(0, tmp_path / "older")
    # files added after version 0 stay: rclone keeps no record of them
    extras = {f"extra {file.path}" for file in CHANGES.added}
    assert set(check_directory(VERSIONS[0], tmp_path / "older")) == extras
