"""Environment: the machine's fields, the endpoint's host:port and TCP round trip, JSON."""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storeprobe import ConfigurationError, Environment, Probe, Result, Workload
from storeprobe.environment import RTT_CONNECTS, RTT_TIMEOUT, endpoint_address, endpoint_of


class LoopbackServer:
    """A TCP server on 127.0.0.1 that accepts and closes connections, counting them."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.socket.getsockname()[1]
        self.accepted = 0
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:  # closed by stop()
                return
            with self._changed:
                self.accepted += 1
                self._changed.notify_all()
            connection.close()

    def wait_accepted(self, count: int, timeout: float = 10.0) -> int:
        """The accepted count once it reaches ``count`` (or after ``timeout`` s).

        A client's connect completes in the kernel's backlog before this server's thread
        calls ``accept()``, so the count lags the connects: wait for the state, never
        read it right after the client returns.
        """
        with self._changed:
            self._changed.wait_for(lambda: self.accepted >= count, timeout)
            return self.accepted

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self._thread.join(timeout=10)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    running = LoopbackServer().start()
    yield running
    running.stop()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that is bound but not listening: every connect is refused."""
    bound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    bound.bind(("127.0.0.1", 0))
    yield bound.getsockname()[1]
    bound.close()


# -- the machine ------------------------------------------------------------------------
def test_capture_fills_the_machine_fields() -> None:
    environment = Environment.capture("lab")
    assert environment.label == "lab"
    assert isinstance(environment.cpu_model, str)
    assert environment.cpu_model.strip()
    assert isinstance(environment.memory_bytes, int)
    assert environment.memory_bytes > 0
    assert environment.operating_system is not None
    assert platform.system() in environment.operating_system
    assert platform.release() in environment.operating_system
    # a local target: no endpoint, nothing measured, nothing to explain
    assert (environment.endpoint, environment.rtt_s, environment.rtt_note) == (None, None, None)


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="Linux /proc only")
def test_machine_fields_agree_with_independent_sources() -> None:
    environment = Environment.capture()
    # the kernel's sysinfo (behind sysconf) and /proc/meminfo's MemTotal are one figure
    assert environment.memory_bytes == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert environment.cpu_model is not None
    assert environment.cpu_model in Path("/proc/cpuinfo").read_text(errors="replace")


def test_capture_still_validates_the_label() -> None:
    with pytest.raises(ConfigurationError, match="label"):
        Environment.capture("x" * 65)


# -- the endpoint and its round trip ------------------------------------------------------
def test_round_trip_is_measured_against_a_loopback_server(server: LoopbackServer) -> None:
    environment = Environment.capture(endpoint=f"http://127.0.0.1:{server.port}")
    assert environment.endpoint == f"127.0.0.1:{server.port}"
    assert environment.rtt_note is None
    assert environment.rtt_s is not None
    assert math.isfinite(environment.rtt_s)
    assert environment.rtt_s > 0
    assert server.wait_accepted(RTT_CONNECTS) == RTT_CONNECTS


def test_the_connect_function_is_injectable(server: LoopbackServer) -> None:
    calls: list[tuple[tuple[str, int], float]] = []

    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        calls.append((address, timeout))
        return socket.create_connection(address, timeout=timeout)

    environment = Environment.capture(endpoint=f"localhost:{server.port}", connect=connect)
    assert environment.endpoint == f"localhost:{server.port}"
    assert environment.rtt_s is not None
    # the name is resolved once, before timing: every connect gets the same numeric address
    assert len(calls) == RTT_CONNECTS
    assert len({address for address, _ in calls}) == 1
    host, port = calls[0][0]
    assert port == server.port
    assert host in ("127.0.0.1", "::1")
    assert {timeout for _, timeout in calls} == {RTT_TIMEOUT}


def test_no_round_trip_when_nothing_listens(silent_port: int) -> None:
    environment = Environment.capture(endpoint=f"127.0.0.1:{silent_port}")
    assert environment.endpoint == f"127.0.0.1:{silent_port}"
    assert environment.rtt_s is None
    assert environment.rtt_note is not None
    assert "refused" in environment.rtt_note.lower()


def test_no_round_trip_when_the_endpoint_has_no_port() -> None:
    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        raise AssertionError("nothing to connect to")

    environment = Environment.capture(endpoint="storage.invalid", connect=connect)
    assert (environment.endpoint, environment.rtt_s) == (None, None)
    assert environment.rtt_note == "no host and port in the endpoint"


def test_no_connect_for_a_local_target() -> None:
    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        raise AssertionError("a local target has no endpoint")

    assert Environment.capture("local", connect=connect).rtt_s is None


def test_the_endpoint_keeps_only_host_and_port(server: LoopbackServer) -> None:
    secret_url = (
        f"https://AKIDSENTINEL:pw-SENTINEL@127.0.0.1:{server.port}/bucket-SENTINEL/key"
        "?X-Amz-Signature=sig-SENTINEL&token=tok-SENTINEL#frag-SENTINEL"
    )
    environment = Environment.capture(endpoint=secret_url)
    assert environment.endpoint == f"127.0.0.1:{server.port}"
    assert environment.rtt_s is not None
    assert "SENTINEL" not in json.dumps(environment.to_dict())
    assert "SENTINEL" not in repr(environment)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("http://127.0.0.1:9031", "127.0.0.1:9031"),
        ("127.0.0.1:9031", "127.0.0.1:9031"),
        ("https://s3.example.com", "s3.example.com:443"),
        ("http://s3.example.com/", "s3.example.com:80"),
        ("http://u:p@[::1]:9000/path?q=1", "[::1]:9000"),
        ("[::1]:22", "[::1]:22"),
        ("HTTPS://Storage.Example.COM", "storage.example.com:443"),
        ("storage.example.com", None),  # no scheme, no port: nothing to connect to
        ("http://host:99999", None),
        ("http://host:port", None),
        ("", None),
    ],
)
def test_endpoint_address(address: str, expected: str | None) -> None:
    assert endpoint_address(address) == expected


_KEY = "c2VjcmV0LWtleS1TRU5USU5FTA=="  # an account key that must never come out
_CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={_KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
)


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("s3://bucket/dir", {"endpoint_url": "http://127.0.0.1:9031"}, "127.0.0.1:9031"),
        (
            "s3://bucket",
            {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "https://minio.lan"}},
            "minio.lan:443",
        ),
        ("s3://bucket", {}, "s3.amazonaws.com:443"),
        (
            "s3://bucket",
            {"client_kwargs": {"region_name": "eu-west-1"}},
            "s3.eu-west-1.amazonaws.com:443",
        ),
        ("s3a://bucket", {"endpoint_url": "http://user:pw@10.0.0.5:9000/x?y=z"}, "10.0.0.5:9000"),
        ("gs://bucket", {}, "storage.googleapis.com:443"),
        ("gcs://bucket", {"endpoint_url": "http://127.0.0.1:9023"}, "127.0.0.1:9023"),
        (
            "az://container",
            {"account_url": "https://acct.blob.core.windows.net/"},
            "acct.blob.core.windows.net:443",
        ),
        ("abfs://container", {"connection_string": _CONNECTION}, "127.0.0.1:10000"),
        (
            "az://container",
            {
                "connection_string": (
                    f"AccountName=acct;AccountKey={_KEY};EndpointSuffix=core.example"
                )
            },
            "acct.blob.core.example:443",
        ),
        ("az://container", {"connection_string": "UseDevelopmentStorage=true"}, "127.0.0.1:10000"),
        (
            "az://container",
            {"account_name": "acct", "account_key": _KEY},
            "acct.blob.core.windows.net:443",
        ),
        ("az://container", {}, None),
        ("sftp://user:pw@files.example.org/home/u", {}, "files.example.org:22"),
        ("sftp://files.example.org:2222/x", {"password": "pw"}, "files.example.org:2222"),
        ("ssh://ignored/x", {"host": "127.0.0.1", "port": 2022}, "127.0.0.1:2022"),
        ("https://data.example.org/files?token=t", {}, "data.example.org:443"),
        ("file:///tmp/x", {}, None),
        ("/tmp/x", {}, None),
        ("memory://bench", {}, None),
        ("ftp://files.example.org/x", {}, None),
    ],
)
def test_endpoint_of(url: str, options: dict[str, Any], expected: str | None) -> None:
    found = endpoint_of(url, options, environ={})
    assert found == expected
    assert _KEY not in str(found)


def test_endpoint_of_reads_the_clients_environment_variables() -> None:
    assert endpoint_of("s3://b", {}, environ={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}) == (
        "127.0.0.1:9"
    )
    assert endpoint_of("gs://b", {}, environ={"STORAGE_EMULATOR_HOST": "http://[::1]:4443"}) == (
        "[::1]:4443"
    )
    variables = {"AZURE_STORAGE_CONNECTION_STRING": _CONNECTION}
    assert endpoint_of("az://c", {}, environ=variables) == "127.0.0.1:10000"
    # options win over the environment
    assert endpoint_of("s3://b", {"endpoint_url": "http://h:1"}, environ=variables) == "h:1"


# -- JSON ---------------------------------------------------------------------------------
_NEW_FIELDS = ("cpu_model", "memory_bytes", "operating_system", "endpoint", "rtt_s", "rtt_note")


def test_to_dict_round_trips(server: LoopbackServer) -> None:
    environment = Environment.capture("lab", endpoint=f"127.0.0.1:{server.port}")
    data = json.loads(json.dumps(environment.to_dict()))
    assert Environment.from_dict(data) == environment


def test_a_document_from_before_the_new_fields_loads() -> None:
    first_release = {
        "hostname": "build",
        "cpu_count": 2,
        "platform": "Linux-6.1.0-x86_64-with-glibc2.36",
        "python": "3.11.7",
        "packages": {"storeprobe": "0.1.0"},
        "utc": "2026-11-30T12:00:00+00:00",
        "label": None,
    }
    environment = Environment.from_dict(first_release)
    assert environment.hostname == "build"
    assert {name: getattr(environment, name) for name in _NEW_FIELDS} == dict.fromkeys(_NEW_FIELDS)


def test_a_result_without_the_new_environment_fields_loads(tmp_path: Path) -> None:
    result = Probe.from_url(str(tmp_path), repeats=1).upload(Workload(count=2, size="4KiB"))
    document = json.loads(result.to_json())
    (record,) = document["results"]
    for name in _NEW_FIELDS:
        del record["environment"][name]
    loaded = Result.from_json(json.dumps(document))
    assert loaded.environment.hostname == result.environment.hostname
    assert {name: getattr(loaded.environment, name) for name in _NEW_FIELDS} == dict.fromkeys(
        _NEW_FIELDS
    )
