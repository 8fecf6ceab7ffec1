"""Every storage the seed comparisons used, each against a real server on 127.0.0.1.

The matrix {S3 via s3fs, S3 via obstore, GCS via gcsfs, GCS via obstore, Azure via
adlfs, Azure via obstore, SFTP, file, memory} × {upload, download} × {many small objects,
one object} × {1, 4 streams} runs with verification on; each case checks that an object
beside the probe's root is untouched and nothing is left behind. GCS via obstore runs
against moto, which serves the XML API obstore speaks (gcp-storage-emulator serves only
the JSON API). Request counts in flight are proven server-side for Azure (both clients)
and obstore (the S3 module proves them for s3fs).
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import (
    Probe,
    StoreProbeWarning,
    TargetNotFoundError,
    TargetPermissionError,
    Workload,
)
from storeprobe.notices import Code
from storeprobe.request import Kind, Outcome, Part, Request
from storeprobe.units import MiB
from tests.conftest import gcs_options, obstore_fs, s3_options, ssh_options
from tests.helpers import gcs_emulator_seed
from tests.http_proxy import CountingProxy, transfers
from tests.servers import AZURE_KEY, Server, azure_connection_string

MANY = Workload(count=24, size="16KiB")
ONE = Workload(count=1, size="12MiB")  # splits into 3 parts of 5 MiB (S3) or 3 MiB elsewhere

# whole objects of MANY, ONE whole or in parts of 1 MiB (split 4 ways), two repeats
GCS_SEED = gcs_emulator_seed((MANY, 0), (ONE, 1 * MiB))

BACKENDS = [
    "s3fs",
    "obstore",
    "gcsfs",
    "obstore-gcs",
    "adlfs",
    "obstore-azure",
    "sshfs",
    "local",
    "memory",
]


@dataclass
class Storage:
    """How to reach one storage: a probe factory and a fresh filesystem to inspect it."""

    name: str
    make: Callable[..., Probe]
    inspect: fsspec.AbstractFileSystem
    root: str
    #: the client the Results name (the storage's name when empty)
    client: str = ""

    def snapshot(self) -> dict[str, str]:
        self.inspect.invalidate_cache()
        found = self.inspect.find(self.root)
        return {
            path: hashlib.sha256(self.inspect.cat_file(path)).hexdigest() for path in sorted(found)
        }


def _storage(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if name == "s3fs":
        server: Server = request.getfixturevalue("s3_server")
        options = s3_options(server.endpoint)
        return Storage(
            name,
            lambda **kw: Probe.from_url("s3://bench/matrix", options, client="s3fs", **kw),
            fsspec.filesystem("s3", skip_instance_cache=True, **options),
            "bench/matrix",
        )
    if name == "obstore":
        server = request.getfixturevalue("moto_server")
        return Storage(
            name,
            lambda **kw: Probe(obstore_fs(server.endpoint), "bench/matrix", **kw),
            fsspec.filesystem("s3", skip_instance_cache=True, **s3_options(server.endpoint)),
            "bench/matrix",
        )
    if name == "gcsfs":
        server = request.getfixturevalue("gcs_server")
        options = gcs_options(server.port)
        return Storage(
            name,
            # bytes the emulator keeps intact (it drops a body's trailing \r); the emulator
            # serves one request at a time with a backlog of 5 (SERVERS.md): the untimed
            # work at the default 32 in flight stalled it (a 24-object download took 3 s
            # instead of 0.3 s), so at most 4 in flight here too
            lambda **kw: Probe.from_url(
                "gs://bench/matrix", options, seed=GCS_SEED, **{"prep_streams": 4, **kw}
            ),
            fsspec.filesystem("gs", skip_instance_cache=True, **options),
            "bench/matrix",
        )
    if name == "obstore-gcs":
        server = request.getfixturevalue("moto_server")
        gcs = {"endpoint_url": server.endpoint, "token": "raw-oauth-token"}  # a bearer token
        return Storage(
            name,
            lambda **kw: Probe.from_url("gs://bench/matrix", gcs, client="obstore", **kw),
            fsspec.filesystem("s3", skip_instance_cache=True, **s3_options(server.endpoint)),
            "bench/matrix",
            client="obstore",
        )
    if name in ("adlfs", "obstore-azure"):
        server = request.getfixturevalue("azure_server")
        options = {"connection_string": azure_connection_string(server.port)}
        client = "adlfs" if name == "adlfs" else "obstore"
        return Storage(
            name,
            lambda **kw: Probe.from_url("abfs://bench/matrix", options, client=client, **kw),
            fsspec.filesystem("abfs", skip_instance_cache=True, **options),
            "bench/matrix",
            client=client,
        )
    if name == "sshfs":
        server = request.getfixturevalue("ssh_server")
        options = ssh_options(server)
        assert server.root is not None
        root = server.root / "matrix"
        root.mkdir(exist_ok=True)
        return Storage(
            name,
            lambda **kw: Probe.from_url(f"sftp://127.0.0.1{root}", options, **kw),
            fsspec.filesystem("file"),
            str(root),
        )
    if name == "local":
        return Storage(
            name,
            lambda **kw: Probe.from_url(f"file://{tmp_path}", **kw),
            fsspec.filesystem("file"),
            str(tmp_path),
        )
    MemoryFileSystem.store.clear()
    return Storage(
        name,
        lambda **kw: Probe.from_url("memory://matrix", **kw),
        MemoryFileSystem(skip_instance_cache=True),
        "/matrix",
    )


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    made = _storage(request.param, request, tmp_path)
    made.inspect.pipe_file(
        f"{made.root}/neighbour-{made.name}.bin", b"precious " + made.name.encode()
    )
    return made


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("operation", ["upload", "download"])
@pytest.mark.parametrize("workload", [MANY, ONE], ids=["many", "one"])
def test_matrix(storage: Storage, operation: str, workload: Workload, streams: int) -> None:
    before = storage.snapshot()
    probe = storage.make(streams=streams, repeats=1)
    cannot_split = (
        workload.count == 1 and streams > 1 and operation == "upload" and storage.name == "memory"
    )
    if cannot_split:
        with pytest.warns(StoreProbeWarning, match="cannot split"):
            result = probe.measure(operation, workload)  # type: ignore[arg-type]
    else:
        result = probe.measure(operation, workload)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert result.backend == (storage.client or storage.name) or storage.name == "memory"
    sample = result.samples[0]
    assert sample.nbytes == workload.total_bytes
    assert sample.requests >= 1
    if cannot_split:
        assert result.effective_streams == 1
        assert "cannot be split" in str(result.strategy)
    else:
        # S3 parts are at least 5 MiB: 12 MiB makes only 3 of them
        s3_parts = workload.count == 1 and storage.name in ("s3fs", "obstore", "obstore-gcs")
        assert result.effective_streams == (min(streams, 3) if s3_parts else streams)
    assert 1 <= sample.max_in_flight <= streams
    assert not [w for w in result.warnings if w.code is Code.CLEANUP_INCOMPLETE]
    assert storage.snapshot() == before


@pytest.fixture
def azure_proxy(azure_server: Server) -> Any:
    proxy = CountingProxy(azure_server.port).start()
    yield proxy
    proxy.stop()


@pytest.mark.parametrize("client", ["adlfs", "obstore"])
@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize(
    ("operation", "workload"),
    [
        ("upload", MANY),
        ("download", MANY),
        ("upload", Workload(count=1, size="8MiB")),
        ("download", Workload(count=1, size="8MiB")),
    ],
    ids=["up-many", "down-many", "up-one", "down-one"],
)
def test_azure_in_flight_counted_on_the_server_side(
    azure_proxy: CountingProxy, operation: str, workload: Workload, streams: int, client: str
) -> None:
    options = {"connection_string": azure_connection_string(azure_proxy.port)}
    probe = Probe.from_url(
        "abfs://bench/inflight",
        options,
        client=client,
        streams=streams,
        repeats=1,
        prep_streams=streams,  # the untimed upload and deletes too
    )
    azure_proxy.reset()
    # the first `streams` transfers wait at the proxy until all are in flight together
    azure_proxy.gather(streams, transfers(operation))
    result = probe.measure(operation, workload)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert azure_proxy.gathering is not None
    assert not azure_proxy.gathering.timed_out, "never had `streams` requests in flight"
    assert azure_proxy.max_in_flight == streams
    assert result.effective_streams == streams
    assert result.backend == client
    if workload.count == 1 and streams == 4 and operation == "upload":
        assert str(result.strategy) == "one object in 8 parts of 1 MiB, 4 at a time"
        # Put Block × 8, then Put Block List: no create request on Azure
        assert result.samples[0].requests_by_kind == {"put-part": 8, "complete-multipart": 1}


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("operation", ["upload", "download"])
def test_obstore_in_flight_counted_on_the_server_side(
    moto_server: Server, operation: str, streams: int
) -> None:
    proxy = CountingProxy(moto_server.port).start()
    try:
        probe = Probe(
            obstore_fs(f"http://127.0.0.1:{proxy.port}"),
            "bench/inflight",
            streams=streams,
            repeats=1,
            prep_streams=streams,  # the untimed upload and deletes too
        )
        proxy.reset()
        proxy.gather(streams, transfers(operation))
        result = probe.measure(operation, Workload(count=1, size="24MiB"))  # type: ignore[arg-type]
    finally:
        proxy.stop()
    assert result.ok, result.errors
    assert proxy.gathering is not None
    assert not proxy.gathering.timed_out, "never had `streams` requests in flight"
    # obstore's own multipart runs the parts of a split upload: the server sees them
    assert proxy.max_in_flight == streams
    assert result.effective_streams == streams


def test_missing_containers_and_buckets(
    gcs_server: Server, azure_server: Server, moto_server: Server
) -> None:
    cases = [
        Probe.from_url("gs://no-such-bucket/x", gcs_options(gcs_server.port), repeats=1),
        *(
            Probe.from_url(
                "abfs://no-such-container/x",
                {"connection_string": azure_connection_string(azure_server.port)},
                client=client,
                repeats=1,
            )
            for client in ("adlfs", "obstore")
        ),
        Probe.from_url(
            "gs://no-such-bucket/x",
            {"endpoint_url": moto_server.endpoint, "token": "raw-oauth-token"},
            client="obstore",
            repeats=1,
        ),
        Probe(obstore_fs(moto_server.endpoint), "no-such-bucket/x", repeats=1),
    ]
    for probe in cases:
        with pytest.raises(TargetNotFoundError, match="no-such"):
            probe.upload(MANY)


@pytest.mark.parametrize("client", ["adlfs", "obstore"])
def test_azure_wrong_key_is_a_permission_error_without_the_key(
    azure_server: Server, client: str
) -> None:
    wrong = base64.b64encode(b"a wrong key, SENTINEL " * 3).decode()  # valid base64
    options = {
        "connection_string": azure_connection_string(azure_server.port).replace(AZURE_KEY, wrong)
    }
    with pytest.raises(TargetPermissionError) as info:
        Probe.from_url("abfs://bench/x", options, client=client, repeats=1).upload(MANY)
    assert wrong not in str(info.value)
    assert "AccountKey=" not in str(info.value) or "AccountKey=***" in str(info.value)


def test_sftp_refused_login_and_unknown_host_key(ssh_server: Server) -> None:
    assert ssh_server.root is not None
    keys = ssh_server.root.parent / "ssh"
    refused = {**ssh_options(ssh_server), "client_keys": [str(keys / "other")]}
    with pytest.raises(TargetPermissionError, match="credentials"):
        Probe.from_url(f"sftp://127.0.0.1{ssh_server.root}", refused)
    known_hosts = keys / "known_hosts_wrong"
    known_hosts.write_text(f"[127.0.0.1]:{ssh_server.port} {(keys / 'other.pub').read_text()}")
    pinned = {**ssh_options(ssh_server), "known_hosts": str(known_hosts)}
    with pytest.raises(TargetPermissionError, match="known_hosts"):
        Probe.from_url(f"sftp://127.0.0.1{ssh_server.root}", pinned)


def test_sftp_never_trusts_an_unknown_host_key_by_default(
    ssh_server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/known_hosts
    options = {k: v for k, v in ssh_options(ssh_server).items() if k != "known_hosts"}
    with pytest.raises(TargetPermissionError, match="known_hosts"):
        Probe.from_url(f"sftp://127.0.0.1{ssh_server.root}", options)


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_staged_large_object(
    storage: Storage,
    operation: str,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one object split 4 ways and staged through a local file (stage_above lowered so a
    # 12 MiB object is staged): verified, the staging file deleted, the storage untouched
    staging_dir = tmp_path_factory.mktemp("staging")
    monkeypatch.setattr(tempfile, "tempdir", str(staging_dir))
    before = storage.snapshot()
    probe = storage.make(streams=4, repeats=2, stage_above="4MiB")
    if operation == "upload" and storage.name == "memory":
        with pytest.warns(StoreProbeWarning, match="cannot split"):
            result = probe.measure(operation, ONE)  # type: ignore[arg-type]
        assert "staged" not in str(result.strategy)  # one request: nothing to stage
    else:
        result = probe.measure(operation, ONE)  # type: ignore[arg-type]
        assert "(staged through a local file)" in str(result.strategy)
    assert result.ok, result.errors
    assert [sample.nbytes for sample in result.samples] == [ONE.total_bytes] * 2
    assert list(staging_dir.iterdir()) == []
    assert storage.snapshot() == before


def test_memory_writes_are_create_only_and_linear() -> None:
    from storeprobe.backends import MemoryBackend

    fs = MemoryFileSystem(skip_instance_cache=True)
    fs.pipe_file("/create-only/taken.bin", b"precious")
    backend = MemoryBackend(fs)

    def put(key: str, data: bytes) -> Outcome:
        request = Request(kind=Kind.PUT, key=key, body=Part(0, 0, len(data)))
        return backend.job(request, data, None, time.perf_counter_ns).call()

    with pytest.raises(FileExistsError):
        put("/create-only/taken.bin", b"other")
    assert fs.cat_file("/create-only/taken.bin") == b"precious"
    assert put("memory://create-only/new.bin", b"new") == Outcome(sent=3)
    assert fs.cat_file("/create-only/new.bin") == b"new"
    fs.rm("/create-only", recursive=True)
