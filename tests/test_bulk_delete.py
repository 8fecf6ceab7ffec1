"""Bulk deletes on S3 (DeleteObjects, ≤ 1000 names a request), counted on the server side:
moto behind the request log (tests/s3_log.py) for how many requests carried how many
keys, and rclone serve s3 for a key the server refuses to delete (its file made
immutable on disk), behind a counting proxy."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeprobe import Probe, Workload
from storeprobe.backends.attempts import Attempts, between
from storeprobe.backends.bulk_delete import KeysNotDeletedError, refused_in
from storeprobe.execution import Leftover, delete_names
from storeprobe.planning import bulk_delete_plan
from storeprobe.request import Kind
from storeprobe.target import Target
from tests.conftest import s3_options
from tests.helpers import StepClock
from tests.http_proxy import CountingProxy
from tests.s3_log import LoggingS3, logging_s3

CLIENTS = pytest.mark.parametrize("client", ["obstore", "s3fs"])


@pytest.fixture(scope="module")
def moto_log() -> Iterator[LoggingS3]:
    with logging_s3() as s3:
        s3.create_bucket("bench")
        yield s3


def _deletes(s3: LoggingS3, mark: int) -> list[tuple[str, int]]:
    """(method, keys it deleted) of each delete request the server saw since ``mark``."""
    return [(r.method, r.deleted_keys) for r in s3.log.snapshot(mark).where(kind="delete")]


@CLIENTS
def test_a_probes_cleanup_deletes_its_names_in_one_delete_objects_request(
    moto_log: LoggingS3, client: str
) -> None:
    probe = Probe.from_url(
        f"s3://bench/probe-{client}", s3_options(moto_log.endpoint), client=client, repeats=2
    )
    mark = moto_log.log.mark()
    result = probe.measure("upload", Workload(count=32, size="16KiB"))
    assert result.ok, result.errors
    # each repeat's 32 objects go in one DeleteObjects request, not 32 DELETEs; around
    # them, the conditional-write check's object is deleted on its own (once after the
    # check, once more by the closing cleanup): obstore makes even a single delete a
    # DeleteObjects of one key, s3fs a DELETE
    single = "POST" if client == "obstore" else "DELETE"
    assert _deletes(moto_log, mark) == [(single, 1), ("POST", 32), ("POST", 32), (single, 1)]
    assert moto_log.objects("bench", f"probe-{client}") == ()


@CLIENTS
def test_n_names_go_in_ceil_n_over_1000_requests_and_names_already_gone_count_as_deleted(
    moto_log: LoggingS3, client: str
) -> None:
    target = Target.from_url(
        f"s3://bench/ceil-{client}", s3_options(moto_log.endpoint), client=client
    )
    written = [f"bench/ceil-{client}/run/{index}" for index in range(3)]
    for name in written:
        target.fs.pipe_file(name, b"x")
    gone = [f"bench/ceil-{client}/run/gone-{index}" for index in range(2000)]
    mark = moto_log.log.mark()
    left = delete_names(target, written + gone, streams=4, clock=StepClock(), timeout=30.0)
    assert left == []
    # ceil(2003 / 1000) = 3 requests, as even as can be (the last not left with 3)
    assert sorted(_deletes(moto_log, mark)) == [("POST", 667), ("POST", 668), ("POST", 668)]
    assert moto_log.objects("bench", f"ceil-{client}") == ()


@pytest.fixture
def immutable(s3_bucket_dir: Path) -> Iterator[list[Path]]:
    """Files of rclone's bucket made immutable (``chattr +i``): no process, not even
    root's, can delete them, so rclone refuses their deletes. Made mutable again after."""
    locked: list[Path] = []
    yield locked
    for path in locked:
        subprocess.run(["chattr", "-i", str(path)], check=True)
        path.unlink()


@CLIENTS
def test_a_key_the_server_refuses_to_delete_comes_back_as_a_leftover_with_its_reason(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, immutable: list[Path], client: str
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    target = Target.from_url(f"s3://bench/refused-{client}", options, client=client)
    names = [f"bench/refused-{client}/run/{index}" for index in range(4)]
    for name in names:
        target.fs.pipe_file(name, b"x")
    locked = s3_bucket_dir.parent / names[2]
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    immutable.append(locked)
    target.backend.check_root(target.root)  # s3fs counts from its first call on
    counting_proxy.reset()
    before = target.backend.attempts_seen()
    left = delete_names(target, names, streams=4, clock=StepClock(), timeout=10.0)
    # rclone answers the key it could not delete with code InternalError and no message
    reason = "KeyNotDeletedError: DeleteObjects answered InternalError"
    assert left == [Leftover(name=names[2], reason=reason)]
    assert counting_proxy.targets == [("POST", "/bench?delete")]  # one request, not four
    # that request was answered, and is not retried: the refusal is the key's, not a 5xx
    assert between(before, target.backend.attempts_seen()) == Attempts(responses=1)
    assert sorted(path.name for path in locked.parent.iterdir()) == ["2"]


@CLIENTS
def test_a_server_refusing_delete_objects_whole_gets_the_names_one_by_one(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    target = Target.from_url(f"s3://bench/whole-{client}", options, client=client)
    names = [f"bench/whole-{client}/run/{index}" for index in range(3)]
    for name in names:
        target.fs.pipe_file(name, b"x")
    counting_proxy.reset()
    # a provider without DeleteObjects: the proxy answers 501 NotImplemented to it
    counting_proxy.fail_when = lambda method, path, number: (
        501 if path.endswith("?delete") else None
    )
    try:
        left = delete_names(target, names, streams=3, clock=StepClock(), timeout=10.0)
    finally:
        counting_proxy.fail_when = None
    if client == "s3fs":  # then one DELETE per name
        assert left == []
        assert sorted(counting_proxy.methods) == ["DELETE"] * 3 + ["POST"]
        assert not (s3_bucket_dir / f"whole-{client}").exists()
    else:  # obstore deletes even one name by DeleteObjects: each name's own refusal
        assert [entry.name for entry in left] == names
        assert all("501" in entry.reason or "NotImplemented" in entry.reason for entry in left)
        assert counting_proxy.methods.count("DELETE") == 0
        target.fs.rm(names)  # through the proxy, no longer refusing


@CLIENTS
def test_a_bulk_delete_pushed_back_is_retried_whole_and_counted(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str
) -> None:
    # obstore's bulk deletes go through storeprobe's Retrier like every other request,
    # s3fs's through botocore's retries: a DeleteObjects answered 503 is sent again, and
    # the retry, the pushback and both answers are counted
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    target = Target.from_url(f"s3://bench/retried-{client}", options, client=client)
    names = [f"bench/retried-{client}/run/{index}" for index in range(5)]
    for name in names:
        target.fs.pipe_file(name, b"x")
    target.backend.check_root(target.root)  # s3fs counts from its first call on
    counting_proxy.reset()
    before = target.backend.attempts_seen()
    pushed: list[int] = []

    def slow_down_once(method: str, path: str, number: int) -> int | None:
        if path.endswith("?delete") and not pushed:
            pushed.append(number)
            return 503
        return None

    counting_proxy.fail_when = slow_down_once
    try:
        left = delete_names(target, names, streams=4, clock=StepClock(), timeout=30.0)
    finally:
        counting_proxy.fail_when = None
    assert left == []
    assert pushed  # the first DeleteObjects was pushed back
    assert counting_proxy.targets == [("POST", "/bench?delete")] * 2  # sent again, whole
    seen = between(before, target.backend.attempts_seen())
    assert seen == Attempts(retries=1, responses=2, pushed_back=1)
    assert not (s3_bucket_dir / f"retried-{client}").exists()


def test_a_delete_result_names_each_key_not_deleted_and_drops_those_already_gone() -> None:
    text = (
        "Generic S3 error: ... Server returned error response: "
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        "<Deleted><Key>run/0</Key></Deleted>"
        "<Error><Key>run/1</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
        "<Error><Key>run/2</Key><Code>NoSuchKey</Code></Error>"
        "</DeleteResult>\n\nDebug source: ..."
    )
    refused = refused_in(text)
    assert refused == [("run/1", "AccessDenied", "Access Denied"), ("run/2", "NoSuchKey", "")]
    failed = KeysNotDeletedError.of(refused, {"run/1": "bench/run/1", "run/2": "bench/run/2"})
    assert failed is not None
    [(name, why)] = failed.failures
    assert name == "bench/run/1"
    assert why.error_code == "AccessDenied"
    assert str(why) == "DeleteObjects answered AccessDenied: Access Denied"
    assert KeysNotDeletedError.of([("run/2", "NoSuchKey", "")], {}) is None
    assert refused_in("error sending request") is None


def test_a_bulk_delete_plan_carries_at_most_so_many_names_a_request() -> None:
    names = [f"b/{index}" for index in range(5)]
    plan = bulk_delete_plan(names, 2)
    assert [request.keys for request in plan.requests] == [("b/0", "b/1"), ("b/2", "b/3"), ("b/4",)]
    assert all(r.kind is Kind.DELETE and r.key == r.keys[0] for r in plan.requests)
    sizes = [len(r.keys) for r in bulk_delete_plan([str(i) for i in range(1001)], 1000).requests]
    assert sizes == [501, 500]
    assert len(bulk_delete_plan(names, 1000).phases) == 1  # all sent at once, up to streams
    with pytest.raises(ValueError, match="at least 1 name"):
        bulk_delete_plan(names, 0)
