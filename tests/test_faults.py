"""Faults against real servers: failing, hanging and dying servers, interrupted runs.

Every case checks that objects beside the probe's root are byte-identical afterwards,
that the probe ends (an error, never a hang) and that what could not be cleaned up is
named.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fs

from storeprobe import Probe, TargetUnreachableError, Workload
from storeprobe.notices import Code
from tests.conftest import s3_options
from tests.helpers import tree
from tests.http_proxy import CountingProxy
from tests.servers import Server, rclone_s3

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

        proxy.fail_when = kill  # type: ignore[assignment]
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


def test_cli_interrupted_by_sigint_cleans_up(tmp_path: Path) -> None:
    neighbour = tmp_path / "neighbour.bin"
    neighbour.write_bytes(b"precious")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "storeprobe",
            "run",
            str(tmp_path),
            "--workload",
            "3000x64KiB",
            "--repeats",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the probe has written something
        prefixes = [p for p in tmp_path.iterdir() if p.name.startswith("storeprobe-")]
        if prefixes and len(list(prefixes[0].iterdir())) > 50:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert os.listdir(tmp_path) == ["neighbour.bin"]
    assert neighbour.read_bytes() == b"precious"


def test_verification_failure_leaves_no_trace(tmp_path: Path) -> None:
    # a real local disk whose bytes change between write and read, as a bad disk would
    from fsspec.implementations.local import LocalFileSystem

    class FlippingDisk(LocalFileSystem):  # type: ignore[misc]
        pass

    neighbour = tmp_path / "neighbour.bin"
    neighbour.write_bytes(b"precious")
    probe = Probe(FlippingDisk(), str(tmp_path), repeats=1)
    backend = probe.target.backend
    original = backend.after_upload

    def corrupt(paths: list[str]) -> None:
        original(paths)
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

    _neighbours(s3_server.endpoint)
    before = tree(s3_server.root)
    if client == "s3fs":
        probe = Probe.from_url("s3://bench/faults", s3_options(s3_server.endpoint), repeats=1)
    else:
        probe = Probe(obstore_fs(s3_server.endpoint), "bench/faults", repeats=1)
    backend = probe.target.backend
    original = backend.after_upload

    other = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(s3_server.endpoint))

    def shorten(paths: list[str]) -> None:
        original(paths)
        other.pipe_file(paths[5], (s3_server.root / paths[5]).read_bytes()[:-7])

    backend.after_upload = shorten  # type: ignore[method-assign]
    result = probe.download(SMALL)
    assert result.samples == ()
    assert result.errors[0].code is Code.VERIFICATION_FAILED
    assert "holds 16377 bytes after the setup upload, expected 16384" in result.errors[0].message
    assert tree(s3_server.root) == before
