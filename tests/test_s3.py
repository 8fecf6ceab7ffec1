"""storeprobe against a real S3 server (``rclone serve s3`` on 127.0.0.1), through both
S3 clients (obstore, the default when installed, and s3fs).

A counting HTTP proxy in front of the server proves, on the server side, how many
requests were in flight.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import s3fs

from storeprobe import (
    Probe,
    TargetNotFoundError,
    TargetPermissionError,
    TargetUnreachableError,
    Workload,
)
from storeprobe.measurement import Measurement
from storeprobe.notices import Code
from storeprobe.strategy import Fallback
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.helpers import payload, tree
from tests.http_proxy import CountingProxy, transfers
from tests.servers import S3_SECRET, Server, free_port

pytestmark = pytest.mark.s3

SMALLISH = Workload(count=32, size="16KiB")
ONE_OBJECT = Workload(count=1, size="24MiB")  # 5 parts of 5 MiB when split 4 ways


CLIENTS = pytest.mark.parametrize("client", ["obstore", "s3fs"])


@CLIENTS
@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("operation", ["upload", "download"])
@pytest.mark.parametrize("workload", [SMALLISH, ONE_OBJECT], ids=["many", "one"])
def test_in_flight_requests_counted_on_the_server_side(
    counting_proxy: CountingProxy,
    s3_bucket_dir: Path,
    streams: int,
    operation: str,
    workload: Workload,
    client: str,
    request: pytest.FixtureRequest,
) -> None:
    # each case writes under a folder of its own and checks only that one: what one
    # case leaves behind fails that case, never the ones after it
    folder = f"inflight-{request.node.callspec.id}"
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    probe = Probe.from_url(
        f"s3://bench/{folder}",
        options,
        client=client,
        streams=streams,
        repeats=2,
        prep_streams=streams,
    )
    assert probe.target.client == client
    counting_proxy.reset()
    # the first `streams` transfers wait at the proxy until all are in flight together
    counting_proxy.gather(streams, transfers(operation))
    result = probe.measure(operation, workload)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert counting_proxy.gathering is not None
    assert not counting_proxy.gathering.timed_out, "never had `streams` requests in flight"
    # with prep_streams=streams, everything the probe sends — setup, timed window,
    # cleanup — respects `streams` (the windows alone: test_prep_streams_stay_outside...)
    assert counting_proxy.max_in_flight == streams
    assert result.effective_streams == streams
    assert all(sample.max_in_flight == streams for sample in result.samples)
    if workload.count == 1 and streams == 4:
        assert str(result.strategy).startswith("one object in 5 parts of 5 MiB, 4 at a time")
        if operation == "upload":
            assert "POST" in counting_proxy.methods  # multipart create/complete
        elif client == "obstore":  # rclone answers ranged GETs with 200: obstore refuses
            assert result.strategy.reader == "s3fs"
            assert str(result.strategy).endswith("(ranges read with s3fs)")
            assert any(w.code is Code.RANGES_VIA_S3FS for w in result.warnings)
    assert tree(s3_bucket_dir / folder) == {}


def test_four_seed_probes_verified(s3_storage_options: dict[str, Any], s3_bucket_dir: Path) -> None:
    probe = Probe.from_url("s3://bench/seed", s3_storage_options, repeats=1)
    results = probe.run()
    assert [r.probe for r in results] == [
        "upload small",
        "download small",
        "upload large",
        "download large",
    ]
    for result in results:
        assert result.ok, result.errors
        assert result.samples[0].nbytes == payload(result).total_bytes
        assert result.protocol == "s3"
        assert result.url == "s3://bench/seed"
        assert result.kib_per_s > 0
    assert not any(name.startswith("seed") for name in tree(s3_bucket_dir))


def test_neighbour_object_untouched_by_normal_and_failed_runs(
    counting_proxy: CountingProxy, s3_bucket_dir: Path
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.pipe_file("bench/keep/neighbour.bin", b"precious bytes")
    fs.pipe_file("bench/keep-sibling.bin", b"also precious")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/keep", options, streams=4, repeats=2)

    assert probe.download(SMALLISH).ok
    assert tree(s3_bucket_dir) == before

    # the 20th PUT of the run is refused by the "server": a real mid-run failure
    counting_proxy.reset()
    counting_proxy.fail_when = lambda method, path, n: 403 if method == "PUT" and n == 20 else None
    failed = probe.upload(SMALLISH)
    counting_proxy.fail_when = None
    assert len(failed.errors) == 1
    assert failed.errors[0].repeat == 1
    assert failed.errors[0].code is Code.REQUEST_FAILED
    assert len(failed.samples) == 1
    assert tree(s3_bucket_dir) == before


@CLIENTS
@pytest.mark.parametrize("stage_above", ["1GiB", "8MiB"], ids=["in-memory", "staged"])
def test_failed_multipart_upload_is_aborted_and_cleaned(
    counting_proxy: CountingProxy,
    s3_bucket_dir: Path,
    client: str,
    stage_above: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where staging files go
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    probe = Probe.from_url(
        "s3://bench/mpu", options, client=client, streams=4, repeats=1, stage_above=stage_above
    )
    before = tree(s3_bucket_dir)
    counting_proxy.reset()
    counting_proxy.fail_when = lambda method, path, n: (
        403 if method == "PUT" and "partNumber=3" in path else None
    )
    result = probe.upload(ONE_OBJECT)
    counting_proxy.fail_when = None
    assert not result.ok
    refused = "PermissionError: injected" if client == "s3fs" else "PermissionDeniedError"
    assert refused in result.errors[0].message
    assert counting_proxy.methods.count("DELETE") >= 1  # AbortMultipartUpload
    assert tree(s3_bucket_dir) == before
    assert ("staged" in str(result.strategy)) == (stage_above == "8MiB")
    assert list(tmp_path.iterdir()) == []  # no staging file left


@CLIENTS
def test_missing_bucket(s3_storage_options: dict[str, Any], client: str) -> None:
    probe = Probe.from_url("s3://no-such-bucket/dir", s3_storage_options, client=client, repeats=1)
    with pytest.raises(TargetNotFoundError, match="no-such-bucket"):
        probe.upload(SMALLISH)


@CLIENTS
def test_wrong_credentials_never_echo_the_secret(s3_server: Server, client: str) -> None:
    options = {**s3_options(s3_server.endpoint), "secret": "wrong-secret-SENTINEL-42"}
    probe = Probe.from_url("s3://bench/x", options, client=client, repeats=1)
    with pytest.raises(TargetPermissionError) as info:
        probe.upload(SMALLISH)
    assert "credentials" in str(info.value)
    assert "SENTINEL" not in str(info.value)
    assert "SENTINEL" not in repr(probe.target)
    assert S3_SECRET not in repr(probe)


@CLIENTS
def test_unreachable_endpoint(client: str) -> None:
    port = free_port()
    options = s3_options(f"http://127.0.0.1:{port}")
    probe = Probe.from_url("s3://bench/x", options, client=client, repeats=1, timeout=20)
    with pytest.raises(TargetUnreachableError, match="endpoint") as info:
        probe.upload(SMALLISH)
    assert isinstance(info.value, ConnectionError)
    assert "***" not in str(info.value)  # an endpoint is not a secret: never hidden
    if client == "obstore":  # its message names the address it could not reach
        assert f"127.0.0.1:{port}" in str(info.value)


def test_own_obstore_store_against_a_server_answering_ranges_with_200(
    s3_server: Server, s3_bucket_dir: Path
) -> None:
    # a store the caller built has no s3fs options to fall back on: the Result says what
    # to do instead of reporting a single GET as 4 streams
    from tests.conftest import obstore_fs

    probe = Probe(obstore_fs(s3_server.endpoint), "bench/own", streams=4, repeats=1)
    result = probe.download(ONE_OBJECT)
    assert result.samples == ()
    assert "200 instead of 206" in result.errors[0].message
    assert "client='s3fs'" in result.errors[0].message
    assert not any(name.startswith("own") for name in tree(s3_bucket_dir))


def _aws_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, secret: str) -> None:
    """A profile 'bench' in a shared credentials file (with the ``no_aws_config`` fixture:
    nothing else from this machine)."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[bench]\naws_access_key_id = testkey\naws_secret_access_key = {secret}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))


def test_profile_credentials_go_through_obstore(
    s3_server: Server,
    s3_bucket_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_aws_config: None,
) -> None:
    # no keys in storage_options: botocore's chain finds the profile; obstore measures,
    # and the ranged reads' s3fs fallback finds the same profile
    _aws_profile(monkeypatch, tmp_path, S3_SECRET)
    options = {"profile": "bench", "client_kwargs": {"endpoint_url": s3_server.endpoint}}
    probe = Probe.from_url("s3://bench/profile", options, streams=4, repeats=1)
    assert probe.target.client == "obstore"
    results = [probe.upload(SMALLISH), probe.download(ONE_OBJECT)]
    assert [r.ok for r in results] == [True, True], [r.errors for r in results]
    assert str(results[1].strategy).endswith("(ranges read with s3fs)")
    assert not any(name.startswith("profile") for name in tree(s3_bucket_dir))


def test_a_wrong_secret_from_a_profile_is_refused_and_never_shown(
    s3_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_aws_config: None
) -> None:
    _aws_profile(monkeypatch, tmp_path, "wrong-PROFILE-SENTINEL-77")
    options = {"profile": "bench", "client_kwargs": {"endpoint_url": s3_server.endpoint}}
    probe = Probe.from_url("s3://bench/x", options, repeats=1)
    with pytest.raises(TargetPermissionError) as info:
        probe.upload(SMALLISH)
    assert "SENTINEL" not in str(info.value)
    assert "SENTINEL" not in repr(probe)


@CLIENTS
def test_no_credentials_anywhere_is_a_clear_error(
    s3_server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_aws_config: None,
    client: str,
) -> None:
    _aws_profile(monkeypatch, tmp_path, S3_SECRET)
    options = {"client_kwargs": {"endpoint_url": s3_server.endpoint}}  # default profile: none
    probe = Probe.from_url("s3://bench/x", options, client=client, repeats=1)
    with pytest.raises(TargetPermissionError, match=r"(?i)no AWS credentials found") as info:
        probe.upload(SMALLISH)
    assert "AWS_ACCESS_KEY_ID" in str(info.value)  # what to set, whichever client


@CLIENTS
@pytest.mark.parametrize("operation", ["upload", "download"])
def test_storage_refusing_conditional_writes_gets_head_then_plain_put(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str, operation: str
) -> None:
    counting_proxy.refuse_header = "if-none-match"  # as a provider answering 501
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/plain", options, client=client, streams=4, repeats=2)
    counting_proxy.reset()
    result = probe.measure(operation, SMALLISH)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert [w.code for w in result.warnings].count(Code.NO_CONDITIONAL_WRITE) == 1
    if operation == "upload":
        assert result.strategy.fallbacks == (Fallback.ABSENCE_BY_HEAD,)
        assert "absence checked by HEAD" in str(result.strategy)
    else:  # the timed GETs are plain: the fallback touched only the untimed upload
        assert result.strategy.fallbacks == ()
    # the check's conditional PUT, then per repeat a HEAD of every name before its PUT
    assert counting_proxy.methods.count("HEAD") >= 2 * SMALLISH.count
    assert tree(s3_bucket_dir) == before  # the check object and every object deleted


@CLIENTS
def test_storage_taking_conditional_writes_keeps_them(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str
) -> None:
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/conditional", options, client=client, repeats=1)
    counting_proxy.reset()
    heads: list[str] = []
    counting_proxy.fail_when = lambda method, path, n: (
        heads.append(path) if method == "HEAD" else None
    )
    result = probe.upload(SMALLISH)
    counting_proxy.fail_when = None
    assert result.ok, result.errors
    assert Code.NO_CONDITIONAL_WRITE not in [w.code for w in result.warnings]
    # no absence checks (a HEAD per object name): the bucket check, and s3fs's HEAD of the
    # run prefix when the closing listing finds it empty
    assert not [path for path in heads if "/r0-" in path], heads
    assert len(heads) <= 2, heads
    assert tree(s3_bucket_dir) == before


@CLIENTS
@pytest.mark.parametrize("refused", [False, True], ids=["taken", "refused"])
def test_the_conditional_write_check_runs_once_per_backend(
    moto_server: Server, client: str, refused: bool
) -> None:
    # two round trips per probe call otherwise (0.2 s at 100 ms): the first call's answer
    # is kept, and every call still says what it did. On moto, which takes If-None-Match
    # (one GET of a download here once failed on rclone serve s3 with "request or
    # response body error" after a burst of first PUTs into a fresh folder; not this
    # test's subject)
    proxy = CountingProxy(moto_server.port).start()
    try:
        if refused:
            proxy.refuse_header = "if-none-match"
        options = s3_options(f"http://127.0.0.1:{proxy.port}")
        probe = Probe.from_url("s3://bench/once", options, client=client, repeats=1)
        proxy.reset()
        results = [probe.upload(SMALLISH), probe.download(SMALLISH), probe.upload(SMALLISH)]
        checks = [t for t in proxy.targets if "conditional-write-check" in t[1]]
    finally:
        proxy.stop()
    assert all(r.ok for r in results), [r.errors for r in results]
    assert [method for method, _ in checks if method == "PUT"] == ["PUT"]
    for result in results:
        said = Code.NO_CONDITIONAL_WRITE in [w.code for w in result.warnings]
        assert said is refused
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(moto_server.endpoint))
    assert not fs.find("bench/once")  # every call cleaned up after itself


_FOREIGN_THREADS = """
import _thread, threading, time
from storeprobe.backends.obstore import wait_for_foreign_threads

inside, release = threading.Event(), threading.Event()
finished = []

def foreign():  # started by _thread, as a tokio thread is unknown to threading
    inside.set()
    release.wait(10)
    time.sleep(0.05)  # the GIL released, as socket.send releases it
    finished.append(True)

_thread.start_new_thread(foreign, ())
assert inside.wait(10)
assert not wait_for_foreign_threads(0.05)  # bounded: gives up while it runs Python
release.set()
assert wait_for_foreign_threads(10)
assert finished == [True]  # returned only once the thread had left Python

# threading's own threads (fsspec's event loop, thread pools) stay in Python for good:
# they are never waited for
started = threading.Thread(target=release.wait, daemon=True)
release.clear()
started.start()
assert wait_for_foreign_threads(0)
release.set()
started.join(10)
print("ok")
"""


def test_exit_waits_for_threads_foreign_to_threading_to_leave_python() -> None:
    """obstore's tokio threads hand results over in Python; at exit they are let finish
    (a thread killed by finalization there aborts the process), within a bound.

    In a fresh interpreter: a test worker's own foreign threads (execnet's, under
    pytest-xdist) stay in Python for good, and would be waited for."""
    done = subprocess.run(
        [sys.executable, "-c", _FOREIGN_THREADS], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


class _WindowCounter:
    """A :class:`~storeprobe.measurement.Gate` that reads the proxy's count of requests
    in flight at each window's edges: what came before a window (its preparation, and
    the previous repeat's deletes) and the window itself, apart."""

    def __init__(self, proxy: CountingProxy) -> None:
        self.proxy = proxy
        self.before: list[int] = []
        self.windows: list[int] = []

    def wait(self, repeat: int) -> None:
        self.before.append(self.proxy.max_in_flight)
        self.proxy.reset()  # nothing is in flight: the window's first request is next

    def opened(self, repeat: int, start_ns: int, end_ns: int) -> None:
        self.windows.append(self.proxy.max_in_flight)
        self.proxy.reset()

    def abandon(self, repeat: int) -> None:
        raise AssertionError(f"repeat {repeat} failed")


@CLIENTS
@pytest.mark.parametrize("operation", ["upload", "download"])
def test_prep_streams_stay_outside_the_windows(
    s3_server: Server, s3_bucket_dir: Path, operation: str, client: str
) -> None:
    # client → counting proxy → 5 ms each way → rclone serve s3: every request stays in
    # flight long enough for concurrent ones to overlap at the proxy
    delay = DelayProxy(s3_server.port, delay_s=0.005).start()
    counting = CountingProxy(delay.port).start()
    try:
        options = s3_options(f"http://127.0.0.1:{counting.port}")
        probe = Probe.from_url(
            "s3://bench/prep", options, client=client, streams=1, repeats=2, prep_streams=8
        )
        gate = _WindowCounter(counting)
        counting.reset()
        result = Measurement(
            target=probe.target,
            operation=operation,  # type: ignore[arg-type]
            workload=Workload(count=32, size="16KiB"),
            settings=probe.settings,
            clock=time.perf_counter_ns,
            callback=None,
            gate=gate,
        ).run()
        after = counting.max_in_flight  # the last repeat's deletes and the cleanup
    finally:
        counting.stop()
        delay.stop()
    assert result.ok, result.errors
    # each window, counted on the server side: one request at a time, as streams=1 says
    assert gate.windows == [1, 1]
    assert all(sample.max_in_flight == 1 for sample in result.samples)
    # the untimed work around them: a download's preparation upload and size checks
    # before each window, more than one at a time, at most prep_streams; the deletes (an
    # upload's of the repeat before, and every probe's after the last window) are one
    # DeleteObjects request for the 32 names (tests/test_bulk_delete.py), so one at a time
    if operation == "download":
        assert all(1 < count <= 8 for count in gate.before), gate.before
    else:
        assert gate.before[1:] == [1]
    assert after == 1
    assert result.streams == 1
    assert result.effective_streams == 1
    assert not any(name.startswith("prep") for name in tree(s3_bucket_dir))


def _is_listing(method: str, path: str) -> bool:
    return method == "GET" and "list-type=2" in path


@CLIENTS
@pytest.mark.parametrize("listing", ["answered", "refused"])
def test_a_download_checks_its_sizes_by_one_listing_and_heads_only_what_it_lacks(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str, listing: str
) -> None:
    # the objects a download reads are uploaded first (untimed) and their sizes checked:
    # one listing of their folder where it shows them all at their sizes, a HEAD each
    # only where it cannot (here: the listing refused with 403, as credentials without
    # s3:ListBucket refuse it)
    folder = f"sizes-{client}-{listing}"
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    probe = Probe.from_url(f"s3://bench/{folder}", options, client=client, repeats=1)
    workload = Workload(count=40, size="4KiB")
    refused: list[str] = []

    def refuse_first_listing(method: str, path: str, n: int) -> int | None:
        # the first listing of the run's folder (the bucket's own check lists no prefix)
        if listing == "refused" and not refused and _is_listing(method, path) and folder in path:
            refused.append(path)
            return 403
        return None

    counting_proxy.reset()
    counting_proxy.fail_when = refuse_first_listing
    try:
        result = probe.measure("download", workload)
    finally:
        counting_proxy.fail_when = None
    assert result.ok, result.errors
    objects = [
        path for method, path in counting_proxy.targets if method == "HEAD" and "/r0-" in path
    ]
    listings = [path for method, path in counting_proxy.targets if _is_listing(method, path)]
    assert len(listings) >= 2  # the size check's, then the cleanup's
    if listing == "answered":
        assert objects == []
    else:
        assert len(refused) == 1
        assert len(objects) == workload.count
        assert len(set(objects)) == workload.count
    assert tree(s3_bucket_dir / folder) == {}
