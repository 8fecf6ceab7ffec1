"""Faults against real servers: failing, hanging and dying servers, interrupted runs.

Every case checks that objects beside the probe's root are byte-identical afterwards,
that the probe ends (an error, never a hang) and that what could not be cleaned up is
named.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

import pytest
import s3fs

from storeprobe import Probe, TargetUnreachableError, Workload
from storeprobe.backends.base import Landing
from storeprobe.notices import Code
from storeprobe.request import Body, Kind, Outcome, Request, SyncJob
from storeprobe.transfer import Clock
from tests.conftest import s3_options
from tests.helpers import interruptible_children, tree
from tests.http_proxy import CountingProxy
from tests.servers import S3_KEY, S3_SECRET, Server, rclone_s3

SMALL = Workload(count=40, size="16KiB")


def _neighbours(endpoint: str) -> None:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
    fs.pipe_file("bench/faults/neighbour.bin", b"precious")
    fs.pipe_file("bench/faults-sibling.bin", b"also precious")


@pytest.fixture
def proxy(s3_server: Server) -> Iterator[CountingProxy]:
    proxy = CountingProxy(s3_server.port).start()
    _neighbours(s3_server.endpoint)
    yield proxy
    proxy.stop()


def test_intermittent_503s_are_retried_and_counted(
    proxy: CountingProxy, s3_bucket_dir: Path
) -> None:
    # s3fs: botocore's retries are counted through its event hooks
    before = tree(s3_bucket_dir)
    probe = Probe.from_url(
        "s3://bench/faults",
        s3_options(f"http://127.0.0.1:{proxy.port}"),
        client="s3fs",
        repeats=2,
    )
    proxy.fail_when = lambda method, path, n: 503 if method == "PUT" and n % 10 == 5 else None
    result = probe.upload(SMALL)
    proxy.fail_when = None
    assert result.ok, result.errors
    assert sum(sample.retries or 0 for sample in result.samples) >= 4
    assert any(warning.code is Code.RETRIED for warning in result.warnings)
    assert tree(s3_bucket_dir) == before


def test_obstore_503s_are_retried_and_counted(proxy: CountingProxy, s3_bucket_dir: Path) -> None:
    # obstore's stores retry nothing; storeprobe retries each refused request and counts it
    before = tree(s3_bucket_dir)
    probe = Probe.from_url(
        "s3://bench/faults", s3_options(f"http://127.0.0.1:{proxy.port}"), repeats=1
    )
    assert probe.target.client == "obstore"
    proxy.fail_when = lambda method, path, n: 503 if method == "PUT" and n % 10 == 5 else None
    result = probe.upload(SMALL)
    proxy.fail_when = None
    assert result.ok, result.errors
    assert proxy.methods.count("PUT") > SMALL.count  # the refused PUTs were sent again
    refused = sum(1 for n in range(1, proxy.requests + 1) if n % 10 == 5)
    assert result.samples[0].retries is not None
    assert 1 <= result.samples[0].retries <= refused
    assert any(warning.code is Code.RETRIED for warning in result.warnings)
    assert tree(s3_bucket_dir) == before


def test_clean_run_counts_zero_retries(proxy: CountingProxy) -> None:
    probe = Probe.from_url(
        "s3://bench/faults",
        s3_options(f"http://127.0.0.1:{proxy.port}"),
        client="s3fs",
        repeats=1,
    )
    result = probe.download(SMALL)
    assert [sample.retries for sample in result.samples] == [0]
    assert not any(warning.code is Code.RETRIED for warning in result.warnings)


def test_a_server_that_never_answers_mid_run_is_a_timeout(
    proxy: CountingProxy, s3_bucket_dir: Path
) -> None:
    before = tree(s3_bucket_dir)
    options = s3_options(f"http://127.0.0.1:{proxy.port}")
    probe = Probe.from_url("s3://bench/faults", options, repeats=1, timeout=2)
    gets = 0

    def hang(method: str, path: str, n: int) -> bool:
        nonlocal gets
        gets += method == "GET"
        return method == "GET" and gets == 10

    proxy.hang_when = hang
    result = probe.download(SMALL)
    proxy.hang_when = None
    assert not result.ok
    assert result.errors[0].code is Code.TIMEOUT
    assert "TimeoutError" in result.errors[0].message
    assert tree(s3_bucket_dir) == before  # cleanup still ran


def test_a_server_that_accepts_and_never_answers_fails_preparation() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1]
    try:
        probe = Probe.from_url("s3://bench/x", s3_options(f"http://127.0.0.1:{port}"), timeout=1)
        with pytest.raises(TargetUnreachableError, match="no answer within 1 s"):
            probe.upload(SMALL)
    finally:
        silent.close()


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_server_killed_mid_transfer(tmp_path: Path, operation: str) -> None:
    root = tmp_path / "s3root"
    with rclone_s3(root) as server:
        _neighbours(server.endpoint)
        before = tree(root / "bench")
        proxy = CountingProxy(server.port).start()
        method = "PUT" if operation == "upload" else "GET"
        seen = 0

        def kill(m: str, path: str, n: int) -> None:
            nonlocal seen
            seen += m == method
            if m == method and seen == 15:
                server.process.kill()
                server.process.wait(5)

        proxy.fail_when = kill
        probe = Probe.from_url(
            "s3://bench/faults", s3_options(f"http://127.0.0.1:{proxy.port}"), repeats=1, timeout=5
        )
        result = probe.measure(operation, SMALL)  # type: ignore[arg-type]
        proxy.stop()
    assert not result.ok
    cleanup = [str(w) for w in result.warnings if w.code is Code.CLEANUP_INCOMPLETE]
    assert cleanup, result.warnings
    prefix = cleanup[0].split(" under ", 1)[1].split(":", 1)[0]
    # everything left on disk is under the named prefix; the neighbours are untouched
    after = tree(root / "bench")
    assert {
        k: v for k, v in after.items() if not k.startswith(prefix.removeprefix("bench/"))
    } == before


@pytest.mark.parametrize(
    ("sent", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["sigint", "sigterm"],
)
def test_cli_interrupted_by_a_signal_cleans_up(
    proxy: CountingProxy, s3_bucket_dir: Path, sent: signal.Signals, code: int, said: str
) -> None:
    # The CLI uploads 2000 objects 4 at a time through the proxy, which holds the PUT of
    # object 5 of the first repeat and never answers it: that PUT is inside the upload's
    # timed window (the run's first probe), so the window cannot end on its own, and the
    # signal is sent once the proxy holds it (never after a count or a sleep). The three
    # other streams are still writing when it arrives: the window must be called off
    # before cleanup, or objects written beside the deletes stay behind.
    before = tree(s3_bucket_dir)
    held = threading.Event()
    seen: list[tuple[str, str]] = []  # every request, in the order the proxy got it

    def hold(method: str, path: str, n: int) -> bool:
        seen.append((method, path))
        if method == "PUT" and path.endswith("/r0-0000005") and not held.is_set():
            held.set()
            return True
        return False

    proxy.hang_when = hold
    endpoint = {"endpoint_url": f"http://127.0.0.1:{proxy.port}", "region_name": "us-east-1"}
    with interruptible_children():  # SIGINT at its default even if the suite ignores it
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "storeprobe",
                "run",
                "s3://bench/faults",
                "--workload",
                "2000x4KiB",
                "--streams",
                "4",
                "--repeats",
                "2",
                "--timeout",
                "60",
                "-o",
                f"key={S3_KEY}",
                "-o",
                f"secret={S3_SECRET}",
                "-o",
                f"client_kwargs={json.dumps(endpoint)}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        if not held.wait(60):
            process.kill()
            _, err = process.communicate(timeout=10)
            pytest.fail(f"the upload window never sent object 5 (exit {process.returncode}): {err}")
        assert process.poll() is None  # the window is open: its held PUT has no answer
        process.send_signal(sent)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    proxy.hang_when = None
    assert process.returncode == code, err
    assert f"{said}; cleanup ran for what was written" in err
    assert "Traceback" not in err
    assert tree(s3_bucket_dir) == before  # nothing under the run prefix; neighbours intact
    # the window was called off before cleanup began, its requests in flight let finish
    # first (a PUT whose body the server has lands even when the client cancels it: one
    # left r0-0000001 behind a fast bulk delete): once the first delete arrived, no PUT came
    held_at = seen.index(next(r for r in seen if r[0] == "PUT" and r[1].endswith("/r0-0000005")))
    first_delete = next(
        i
        for i, (method, path) in enumerate(seen)
        if i > held_at and (method == "DELETE" or "?delete" in path)
    )
    assert sum(method == "PUT" for method, _ in seen[first_delete:]) == 0, seen[first_delete:]


class _Interrupt(KeyboardInterrupt):
    """Ctrl-C, as raised by this module's own SIGINT handler (see below)."""


def test_an_interrupted_window_on_a_thread_pool_stops_before_cleanup(tmp_path: Path) -> None:
    # The local disk at 4 streams runs the window on a thread pool. The PUT of object 5
    # sends SIGINT to the main thread (where a terminal's Ctrl-C lands) and does not
    # return until it has been taken, so the interrupt lands inside the window while
    # three workers are writing.
    from fsspec.implementations.local import LocalFileSystem

    neighbour = tmp_path / "neighbour.bin"
    neighbour.write_bytes(b"precious")
    workload = Workload(count=2000, size="4KiB")
    probe = Probe(LocalFileSystem(), str(tmp_path), streams=4, repeats=1)
    backend = probe.target.backend
    original = backend.job
    taken = threading.Event()
    main = threading.main_thread().ident
    assert main is not None
    started: list[Kind] = []  # the kind of every request as it starts

    def job(request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        found = original(request, body, into, clock)
        assert isinstance(found, SyncJob)

        def call() -> Outcome:
            started.append(request.kind)
            outcome = found.call()
            if request.key.endswith("/r0-0000005"):
                signal.pthread_kill(main, signal.SIGINT)
                assert taken.wait(30)
            return outcome

        return SyncJob(found.kind, call, found.inner)

    def interrupt(signum: int, frame: object) -> None:
        taken.set()
        raise _Interrupt

    backend.job = job  # type: ignore[method-assign]
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        with pytest.raises(_Interrupt):
            probe.upload(workload)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert taken.is_set()
    # the workers stopped after their current request, and cleanup began only then: no
    # PUT started after the first delete (without that, they wrote on through the 2000
    # names while cleanup deleted them)
    first_delete = started.index(Kind.DELETE)
    assert Kind.PUT not in started[first_delete:]
    assert started.count(Kind.PUT) < workload.count
    assert os.listdir(tmp_path) == ["neighbour.bin"]
    assert neighbour.read_bytes() == b"precious"


def test_verification_failure_leaves_no_trace(tmp_path: Path) -> None:
    # a real local disk whose bytes change between write and read, as a bad disk would
    from fsspec.implementations.local import LocalFileSystem

    class FlippingDisk(LocalFileSystem):  # type: ignore[misc]  # fsspec ships no type hints
        pass

    neighbour = tmp_path / "neighbour.bin"
    neighbour.write_bytes(b"precious")
    probe = Probe(FlippingDisk(), str(tmp_path), repeats=1)
    backend = probe.target.backend
    original = backend.after_upload

    def corrupt(paths: Sequence[str], *, synced: Collection[str] = ()) -> None:
        original(paths, synced=synced)
        with open(paths[3], "r+b") as handle:
            handle.seek(100)
            byte = handle.read(1)[0]
            handle.seek(100)
            handle.write(bytes([byte ^ 0xFF]))

    backend.after_upload = corrupt  # type: ignore[method-assign]
    result = probe.download(SMALL)
    assert result.errors[0].code is Code.VERIFICATION_FAILED
    assert "verification failed: object 3" in result.errors[0].message
    assert os.listdir(tmp_path) == ["neighbour.bin"]
    assert neighbour.read_bytes() == b"precious"


@pytest.mark.parametrize("client", ["s3fs", "obstore"])
def test_an_object_shortened_after_the_setup_upload_is_caught_before_the_window(
    s3_server: Server, client: str
) -> None:
    # another client overwrites one object with a shorter body between the setup upload
    # and the download: the untimed size check names it, no timed sample is kept, and
    # cleanup runs
    from tests.conftest import obstore_fs

    root = s3_server.root
    assert root is not None
    _neighbours(s3_server.endpoint)
    before = tree(root)
    if client == "s3fs":
        probe = Probe.from_url("s3://bench/faults", s3_options(s3_server.endpoint), repeats=1)
    else:
        probe = Probe(obstore_fs(s3_server.endpoint), "bench/faults", repeats=1)
    backend = probe.target.backend
    original = backend.after_upload

    other = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(s3_server.endpoint))

    def shorten(paths: Sequence[str], *, synced: Collection[str] = ()) -> None:
        original(paths, synced=synced)
        other.pipe_file(paths[5], (root / paths[5]).read_bytes()[:-7])

    backend.after_upload = shorten  # type: ignore[method-assign]
    result = probe.download(SMALL)
    assert result.samples == ()
    assert result.errors[0].code is Code.VERIFICATION_FAILED
    assert "holds 16377 bytes after the setup upload, expected 16384" in result.errors[0].message
    assert tree(root) == before
