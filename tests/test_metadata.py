"""Metadata probes (HEAD, LIST, DELETE in operations per second) against real storages:
memory://, the local disk, and S3 (``rclone serve s3``) through obstore and s3fs.

A counting proxy in front of the S3 server proves the requests of each kind on the
server side; the step clock makes every rate exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
import s3fs

from storeprobe import ConfigurationError, Probe
from storeprobe.backends import FsspecSyncBackend
from storeprobe.metadata import MAX_KEYS, median_ops_per_s, ops_per_s, pages_per_s
from storeprobe.notices import Code
from storeprobe.render import comparison_tables, render_tables, results_table
from storeprobe.request import Kind, Outcome, SyncJob
from storeprobe.subject import Subject, Unit
from storeprobe.units import significant
from tests.conftest import s3_options
from tests.helpers import StepClock, tree
from tests.http_proxy import CountingProxy

OPERATIONS = pytest.mark.parametrize("operation", ["head", "list", "delete"])
CLIENTS = pytest.mark.parametrize("client", ["obstore", "s3fs"])
STEP = 10  # ns per clock read


def exact_rate(operation: str, count: int) -> float:
    """ops/s under the step clock at one stream: each request reads the clock twice, so
    the window of n requests is (2n − 1) steps; a listing is one request of one step."""
    requests = 1 if operation == "list" else count
    return count * 1e9 / ((2 * requests - 1) * STEP)


def expected_kinds(operation: str, count: int, pages: int = 1) -> dict[str, int]:
    return {"list": pages} if operation == "list" else {operation: count}


# -- memory:// and the local disk -------------------------------------------------------
@pytest.fixture(params=["memory", "local"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A probe URL with a neighbour object beside the probe's root, and a snapshot."""
    if request.param == "local":
        root = tmp_path / "root"
        root.mkdir()
        (root / "neighbour.bin").write_bytes(b"precious")
        (tmp_path / "root-sibling.bin").write_bytes(b"also precious")
        yield str(root), lambda: tree(tmp_path)
        return
    fs = fsspec.filesystem("memory")
    base = f"/md-{request.node.name}".replace("[", "-").replace("]", "")
    fs.pipe_file(f"{base}/root/neighbour.bin", b"precious")
    fs.pipe_file(f"{base}/root-sibling.bin", b"also precious")
    yield f"memory://{base}/root", lambda: {p: fs.cat_file(p) for p in fs.find(base)}
    fs.rm(base, recursive=True)


@OPERATIONS
@pytest.mark.parametrize("size", [0, 3])
def test_rates_exact_and_nothing_left(target: tuple[str, Any], operation: str, size: int) -> None:
    url, snapshot = target
    before = snapshot()
    count = 37
    probe = Probe.from_url(url, repeats=3, clock=StepClock(STEP))
    result = probe.metadata(operation, count=count, size=size)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert result.operation == operation
    # the subject counts the objects, of their true size (0 B included); no payload
    assert result.subject == Subject(
        unit=Unit.OPERATIONS_PER_S,
        operations=count,
        label=f"{count} × {size} B",
        shape=f"{count} × {size} B",
        description=f"{count} × {size} B",
        object_size=size,
    )
    assert result.workload is None
    assert len(result.samples) == 3
    for sample in result.samples:
        assert sample.requests_by_kind == expected_kinds(operation, count)
        assert sample.nbytes == 0
    assert ops_per_s(result) == pytest.approx(exact_rate(operation, count), rel=1e-12)
    assert median_ops_per_s(result) == pytest.approx(exact_rate(operation, count), rel=1e-12)
    assert result.latency.p50 == STEP
    if operation == "list":
        assert pages_per_s(result) == pytest.approx(1e9 / STEP)
    else:
        assert math.isnan(pages_per_s(result))
    assert snapshot() == before  # the neighbours untouched, nothing of the probe left


@pytest.mark.parametrize("operation", ["head", "delete"])
def test_streams_bound_the_requests_in_flight(operation: str, tmp_path: Path) -> None:
    probe = Probe.from_url(str(tmp_path), streams=4, repeats=1)
    result = probe.metadata(operation, count=64)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert result.effective_streams == 4
    assert result.samples[0].max_in_flight <= 4
    assert f"one {operation.upper()} per object, 4 at a time" in str(result.strategy)
    assert list(tmp_path.iterdir()) == []


def test_list_at_several_streams_says_one_request_in_flight() -> None:
    result = Probe.from_url("memory://md-streams", streams=8, repeats=1).metadata("list", 10)
    assert result.ok, result.errors
    assert result.effective_streams == 1
    assert Code.FEW_REQUESTS in {notice.code for notice in result.warnings}


def test_a_listing_that_misses_keys_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    job = FsspecSyncBackend.job

    def short_listing(self: Any, request: Any, *args: Any) -> SyncJob:
        made = job(self, request, *args)
        if request.kind is not Kind.LIST:
            return made
        return SyncJob(Kind.LIST, lambda: Outcome(size=made.call().size - 1))

    monkeypatch.setattr(FsspecSyncBackend, "job", short_listing)
    fs = fsspec.filesystem("memory")
    result = Probe.from_url("memory://md-short", repeats=2).metadata("list", count=5)
    assert [error.code for error in result.errors] == [Code.VERIFICATION_FAILED] * 2
    assert "found 4 keys where 5 were written" in result.errors[0].message
    assert [error.repeat for error in result.errors] == [1, 2]
    assert fs.find("/md-short") == []


def _deletes_skipping(monkeypatch: pytest.MonkeyPatch, suffix: str, times: int) -> list[str]:
    """DELETEs of a name ending with ``suffix`` answer done without deleting, ``times``
    times (as rclone serve s3 answers for a file its view of the folder has lost)."""
    job = FsspecSyncBackend.job
    skipped: list[str] = []

    def answering(self: Any, request: Any, *args: Any) -> SyncJob:
        made = job(self, request, *args)
        if request.kind is not Kind.DELETE or not request.key.endswith(suffix):
            return made
        if len(skipped) >= times:
            return made
        skipped.append(request.key)
        return SyncJob(Kind.DELETE, Outcome)

    monkeypatch.setattr(FsspecSyncBackend, "job", answering)
    return skipped


@pytest.mark.parametrize("operation", ["list", "delete"])
def test_a_delete_answered_but_not_done_is_found_by_listing(
    monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    skipped = _deletes_skipping(monkeypatch, "/r0/0000002", 1)
    fs = fsspec.filesystem("memory")
    probe = Probe.from_url(f"memory://md-answered-{operation}", streams=4, repeats=2)
    result = probe.metadata(operation, count=9)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert len(skipped) == 1
    assert Code.CLEANUP_INCOMPLETE not in {notice.code for notice in result.warnings}
    assert fs.find(f"/md-answered-{operation}") == []  # listed under the run prefix, deleted


def test_a_delete_never_done_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = _deletes_skipping(monkeypatch, "/r0/0000002", 10)
    fs = fsspec.filesystem("memory")
    result = Probe.from_url("memory://md-kept", repeats=1).metadata("head", count=5)
    assert result.ok, result.errors
    (notice,) = [n for n in result.warnings if n.code is Code.CLEANUP_INCOMPLETE]
    (kept,) = fs.find("/md-kept")
    assert kept.endswith("/r0/0000002")
    assert f"{kept} (still listed after its delete)" in notice.message
    assert len(skipped) == 2  # the repeat's cleanup, then clear_prefix's after its listing
    fs.rm("/md-kept", recursive=True)


def test_each_repeat_writes_its_first_object_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server keeping objects as files makes the folders on the first PUT under a
    prefix; concurrent first PUTs raced there (rclone serve s3)."""
    job = FsspecSyncBackend.job
    events: list[tuple[str, str]] = []

    def recorded(self: Any, request: Any, *args: Any) -> SyncJob:
        made = job(self, request, *args)
        if request.kind is not Kind.PUT:
            return made
        name = request.key.rsplit("/", 2)[-2:]

        def call() -> Outcome:
            events.append(("start", "/".join(name)))
            outcome = made.call()
            events.append(("end", "/".join(name)))
            return outcome

        return SyncJob(Kind.PUT, call)

    monkeypatch.setattr(FsspecSyncBackend, "job", recorded)
    result = Probe.from_url("memory://md-first", streams=4, repeats=2).metadata("head", count=16)
    assert result.ok, result.errors
    assert result.samples[0].max_in_flight <= 4
    for repeat in ("r0", "r1"):
        mine = [event for event in events if event[1].startswith(repeat + "/")]
        assert mine[:2] == [("start", f"{repeat}/0000000"), ("end", f"{repeat}/0000000")]
        assert len(mine) == 32


def test_rendered_in_operations_per_second() -> None:
    probe = Probe.from_url("memory://md-render", repeats=2, clock=StepClock(STEP))
    head = probe.metadata("head", count=10)
    listing = probe.metadata("list", count=10)
    line = str(head)
    rate = exact_rate("head", 10)
    assert f": {significant(rate)} ops/s best of 2 (median {significant(rate)} ops/s" in line
    assert line.startswith("head 10 × 0 B memory://md-render, 1 stream:")
    assert "KiB/s" not in line
    assert "KiB/s" not in repr(head)
    assert f"{significant(rate)} ops/s" in repr(head)
    assert "ops/s" in head._repr_html_()
    table = results_table([head, listing])
    assert [row[2].text for row in table.rows] == ["ops/s", "ops/s"]
    assert [row[1].text for row in table.rows] == ["10 × 0 B", "10 × 0 B"]
    assert table.rows[0][4].value == pytest.approx(rate)
    assert "ops/s" in render_tables([table], "text")
    (compared,) = comparison_tables([head, listing], by="probe")
    assert compared.units[1:] == ("ops/s", "ops/s")


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"operation": "stat"}, "operation must be one of head, list, delete"),
        ({"operation": "head", "count": 0}, "count must be an int from 1 to 1,000,000"),
        ({"operation": "head", "count": MAX_KEYS + 1}, "use e.g. 1000"),
        ({"operation": "head", "count": True}, "count must be an int"),
        ({"operation": "head", "count": "10"}, "count must be an int"),
        ({"operation": "head", "size": -1}, "size"),
        ({"operation": "head", "size": "6GiB"}, "from 0 bytes to 5 GiB"),
        ({"operation": "head", "size": "1XB"}, "size"),
        ({"operation": "head", "size": 1.5}, "size must be bytes"),
    ],
)
def test_bad_input(arguments: dict[str, Any], says: str) -> None:
    probe = Probe.from_url("memory://md-bad", repeats=1)
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        probe.metadata(**arguments)
    assert fsspec.filesystem("memory").find("/md-bad") == []


# -- S3 -------------------------------------------------------------------------------
@pytest.mark.s3
@CLIENTS
@OPERATIONS
def test_s3_requests_by_kind_on_the_server_side(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str, operation: str
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.pipe_file("bench/meta/neighbour.bin", b"precious bytes")
    fs.pipe_file("bench/meta-sibling.bin", b"also precious")
    before = tree(s3_bucket_dir)
    seen: list[tuple[str, str]] = []

    def record(method: str, path: str, number: int) -> None:
        seen.append((method, path))

    count = 1500 if operation == "list" else 40  # a listing of 2 pages
    pages = 2 if operation == "list" else 1
    probe = Probe.from_url(
        "s3://bench/meta",
        options,
        client=client,
        streams=4,
        repeats=2,
        prep_streams=4,  # the untimed writes and cleanup at the window's bound too
        clock=StepClock(STEP),
    )
    counting_proxy.reset()
    counting_proxy.fail_when = record
    try:
        result = probe.metadata(operation, count=count)  # type: ignore[arg-type]
    finally:
        counting_proxy.fail_when = None
    assert result.ok, result.errors
    assert result.backend == client
    on_keys = re.compile(r"/bench/meta/storeprobe-[^/?]+/r[01]/\d{7}")
    heads = [p for m, p in seen if m == "HEAD" and on_keys.match(p)]
    # obstore deletes one key per POST ?delete (the key is in the body); s3fs per DELETE
    deletes = [p for m, p in seen if (m == "DELETE" and on_keys.match(p)) or p == "/bench?delete"]
    listings = [p for m, p in seen if m == "GET" and "list-type=2" in p and "%2Fr" in p]
    # every object written is deleted: by the timed window, one request each (a delete
    # probe), or by each repeat's untimed cleanup, in DeleteObjects requests of at most
    # 1000 keys (head, list); with obstore two more POSTs: the conditional-write check
    # deletes its object, and the final cleanup deletes that name again in case the
    # check failed half-way
    per_repeat = count if operation == "delete" else math.ceil(count / 1000)
    assert len(deletes) == 2 * per_repeat + (2 if client == "obstore" else 0)
    assert len(heads) == (2 * count if operation == "head" else 0)
    assert len(listings) == (2 * pages if operation == "list" else 0)
    for sample in result.samples:
        assert sample.requests_by_kind == expected_kinds(operation, count, pages)
    if operation != "list":
        assert counting_proxy.max_in_flight <= 4
    assert tree(s3_bucket_dir) == before
    fs.rm_file("bench/meta/neighbour.bin")
    fs.rm_file("bench/meta-sibling.bin")


@pytest.mark.s3
@CLIENTS
def test_s3_rates_exact_with_the_step_clock(
    s3_storage_options: dict[str, Any], s3_bucket_dir: Path, client: str
) -> None:
    probe = Probe.from_url(
        "s3://bench/exact", s3_storage_options, client=client, repeats=1, clock=StepClock(STEP)
    )
    for operation in ("head", "list", "delete"):
        result = probe.metadata(operation, count=12, size=5)
        assert result.ok, result.errors
        assert ops_per_s(result) == pytest.approx(exact_rate(operation, 12), rel=1e-12)
    assert not any(name.startswith("exact") for name in tree(s3_bucket_dir))


@pytest.mark.s3
def test_s3_a_refused_delete_fails_the_repeat_and_cleanup_still_deletes(
    counting_proxy: CountingProxy, s3_bucket_dir: Path
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    refused: list[str] = []

    def refuse_one(method: str, path: str, number: int) -> int | None:
        if method == "DELETE" and "/r0/" in path and not refused:
            refused.append(path)
            return 403
        return None

    # s3fs: one DELETE per key, the key in the path (obstore's POST ?delete hides it)
    probe = Probe.from_url("s3://bench/refused", options, client="s3fs", streams=2, repeats=2)
    counting_proxy.fail_when = refuse_one
    try:
        result = probe.metadata("delete", count=20)
    finally:
        counting_proxy.fail_when = None
    assert [(e.code, e.repeat) for e in result.errors] == [(Code.REQUEST_FAILED, 1)]
    assert len(result.samples) == 1
    assert tree(s3_bucket_dir) == before
