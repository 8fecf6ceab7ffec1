"""The client choice for URLs with two clients (``s3://``, ``gs://``, Azure Blob), the
translation of gcsfs and adlfs options to obstore's stores, and the transfers that only
one storage here can show: GCS's parallel composite upload through gcsfs (on
gcp-storage-emulator), cleaned up after success and after a failure.

The matrix in ``test_backends.py`` runs every client through uploads and downloads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
import pytest

from storeprobe import ConfigurationError, Probe, Workload
from storeprobe.backends.azure_choice import translate_adlfs
from storeprobe.backends.client_choice import CLIENTS, choose_client
from storeprobe.backends.gcs_choice import translate_gcsfs
from storeprobe.backends.obstore_stores import ObstoreAzureBackend, ObstoreGCSBackend
from storeprobe.notices import Code
from storeprobe.target import Target
from storeprobe.units import MiB
from tests.conftest import gcs_options
from tests.helpers import gcs_emulator_seed
from tests.http_proxy import CountingProxy
from tests.servers import AZURE_KEY, Server, azure_connection_string

AZURITE = azure_connection_string(10000)
ONE = Workload(count=1, size="6MiB")


# --- Azure: adlfs options → obstore's Azure store --------------------------------------
def test_azure_connection_string_translates() -> None:
    config, reason = translate_adlfs({"connection_string": AZURITE})
    assert reason is None
    assert config == {
        "account_name": "devstoreaccount1",
        "account_key": AZURE_KEY,
        "endpoint": "http://127.0.0.1:10000/devstoreaccount1",
    }


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {
                "connection_string": "AccountName=acct;AccountKey=k;"
                "EndpointSuffix=core.chinacloudapi.cn"
            },
            {
                "account_name": "acct",
                "account_key": "k",
                "endpoint": "https://acct.blob.core.chinacloudapi.cn",
            },
        ),
        (
            {"connection_string": "UseDevelopmentStorage=true"},
            {"use_emulator": True, "endpoint": "http://127.0.0.1:10000/devstoreaccount1"},
        ),
        (
            {"account_name": "acct", "sas_token": "?sv=1&sig=x"},
            {"account_name": "acct", "sas_key": "sv=1&sig=x"},
        ),
        ({"account_name": "acct", "anon": True}, {"account_name": "acct", "skip_signature": True}),
        (
            {"account_name": "a", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
            {"account_name": "a", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
        ),
        (
            {"account_name": "a", "account_key": "k", "account_host": "a.blob.example.net"},
            {"account_name": "a", "account_key": "k", "endpoint": "https://a.blob.example.net"},
        ),
    ],
    ids=["suffix", "development-storage", "sas", "anon", "service-principal", "account-host"],
)
def test_azure_options_translate(options: dict[str, Any], expected: dict[str, Any]) -> None:
    assert translate_adlfs({**options, "skip_instance_cache": True}) == (expected, None)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"account_name": "a", "account_key": "k", "credential": object()}, "'credential'"),
        ({"account_name": "a", "account_key": "k", "version_aware": True}, "'version_aware'"),
        ({"account_name": "a"}, "DefaultAzureCredential"),
        ({"account_key": "k"}, "no account_name"),
        ({"connection_string": "AccountName=a;AccountKey=k;Bogus=1"}, "'bogus'"),
    ],
)
def test_azure_options_obstore_lacks_keep_adlfs(options: dict[str, Any], named: str) -> None:
    config, reason = translate_adlfs(options)
    assert config == {}
    assert reason is not None
    assert named in reason
    chosen = choose_client("abfs", options, "auto")
    assert chosen.backend is None  # adlfs
    assert named in chosen.reason
    with pytest.raises(ConfigurationError, match="client='adlfs'"):
        choose_client("abfs", options, "obstore")


def test_azure_default_is_obstore_and_adlfs_can_be_asked() -> None:
    options = {"connection_string": AZURITE}
    target = Target.from_url("abfs://bench/x", options)
    assert isinstance(target.backend, ObstoreAzureBackend)
    assert (target.client, target.client_reason) == ("obstore", "the default")
    assert target.protocol == "abfs"
    assert target.root == "bench/x"
    forced = Target.from_url("az://bench/x", options, client="adlfs")
    assert (forced.client, forced.client_reason) == ("adlfs", "client='adlfs' was asked")
    assert AZURE_KEY not in repr(target.options) + repr(forced.options)


# --- GCS: gcsfs options → obstore's GCS store ------------------------------------------
def test_gcs_options_translate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    key_file = tmp_path / "key.json"
    key_file.write_text("{}")
    service = {"type": "service_account", "client_email": "x@y", "private_key": "k"}
    assert translate_gcsfs({"endpoint_url": "http://h:1/", "project": "p"})[:2] == (
        {"base_url": "http://h:1"},
        {},
    )
    assert translate_gcsfs({"token": "google_default"})[0] == {}
    assert translate_gcsfs({"token": str(key_file)})[0] == {
        "application_credentials": str(key_file)
    }
    assert translate_gcsfs({"token": "ya29.raw"})[0] == {"bearer_token": "ya29.raw"}
    assert translate_gcsfs({"token": service})[0] == {"service_account_key": json.dumps(service)}
    config, extra, reason = translate_gcsfs({"token": "anon"})
    assert (config, reason) == ({"skip_signature": True}, None)
    assert extra["credential_provider"]()["token"]  # a placeholder obstore sends with writes
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:9023")
    assert translate_gcsfs({})[0] == {"base_url": "http://127.0.0.1:9023"}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"requester_pays": True}, "'requester_pays'"),
        ({"token": "cloud"}, "'cloud'"),
        ({"token": {"type": "authorized_user"}}, "'dict'"),
        ({"version_aware": True}, "'version_aware'"),
    ],
)
def test_gcs_options_obstore_lacks(options: dict[str, Any], named: str) -> None:
    assert named in (translate_gcsfs(options)[2] or "")
    with pytest.raises(ConfigurationError, match=f"{named}.*client='gcsfs'"):
        Target.from_url("gs://bucket/x", options, client="obstore")


def test_gcs_default_is_gcsfs_and_obstore_can_be_asked() -> None:
    options = {"endpoint_url": "http://127.0.0.1:1", "token": "anon"}
    target = Target.from_url("gs://bench/x", {**options, "project": "p"})
    assert target.client == "gcsfs"
    assert "default" in target.client_reason
    chosen = Target.from_url("gs://bench/x", options, client="obstore")
    assert isinstance(chosen.backend, ObstoreGCSBackend)
    assert (chosen.client, chosen.client_reason) == ("obstore", "client='obstore' was asked")
    assert chosen.protocol == "gs"


# --- the choice itself -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "client", "match"),
    [
        ("gs://b/x", "s3fs", "must be one of auto, obstore, gcsfs for gs://"),
        ("abfs://c/x", "gcsfs", "must be one of auto, obstore, adlfs for abfs://"),
        ("s3://b/x", "adlfs", "must be one of auto, obstore, s3fs, not 'adlfs'"),
        ("memory://x", "adlfs", "leave client at 'auto'"),
        ("file:///tmp", "obstore", "leave client at 'auto'"),
    ],
)
def test_a_client_the_protocol_has_not_is_refused(url: str, client: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Target.from_url(url, client=client)


def test_every_protocol_with_two_clients_is_listed() -> None:
    assert set(CLIENTS) == {"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"}
    assert all(names[0] == "auto" and "obstore" in names for names in CLIENTS.values())


def test_a_filesystem_given_by_the_caller_has_no_reason() -> None:
    assert Target(fsspec.filesystem("memory"), "x").client_reason == ""


# --- GCS's parallel composite upload through gcsfs, on gcp-storage-emulator ----------------
def _gcs(server: Server) -> fsspec.AbstractFileSystem:
    return fsspec.filesystem("gs", skip_instance_cache=True, **gcs_options(server.port))


def test_gcs_split_upload_is_a_composite_upload_with_its_parts_deleted(gcs_server: Server) -> None:
    seed = gcs_emulator_seed((ONE, MiB), repeats=3)  # the emulator drops a trailing \r
    probe = Probe.from_url(
        "gs://bench/composite", gcs_options(gcs_server.port), streams=4, repeats=2, seed=seed
    )
    result = probe.upload(ONE)
    assert result.ok, result.errors
    assert result.backend == "gcsfs"
    assert result.effective_streams == 4
    assert str(result.strategy) == "one object in 6 parts of 1 MiB, 4 at a time"
    assert not [w for w in result.warnings if w.code.value == "cannot-split"]
    # six part uploads in flight four at a time, one compose, six deletions of the parts
    assert result.samples[0].requests_by_kind == {
        "put-part": 6,
        "complete-multipart": 1,
        "delete": 6,
    }
    assert result.samples[0].max_in_flight == 4
    assert _gcs(gcs_server).find("bench/composite") == []
    downloaded = probe.download(ONE)  # its setup upload is composite too: read back verified
    assert downloaded.ok, downloaded.errors
    assert _gcs(gcs_server).find("bench/composite") == []


def test_gcs_more_parts_than_one_compose_takes(gcs_server: Server) -> None:
    probe = Probe.from_url(
        "gs://bench/composite-many",
        gcs_options(gcs_server.port),
        streams=4,
        repeats=1,
        part_size="1MiB",
        seed=gcs_emulator_seed((Workload(count=1, size="40MiB"), MiB), repeats=1),
    )
    result = probe.download(Workload(count=1, size="40MiB"))  # 40 parts: two composes
    assert result.ok, result.errors
    assert _gcs(gcs_server).find("bench/composite-many") == []


def test_gcs_failed_composite_upload_leaves_no_part(gcs_server: Server) -> None:
    proxy = CountingProxy(gcs_server.port).start()
    try:
        options = {**gcs_options(gcs_server.port), "endpoint_url": f"http://127.0.0.1:{proxy.port}"}
        probe = Probe.from_url("gs://bench/composite-failed", options, streams=4, repeats=1)
        uploads: list[int] = []

        def fourth_part_refused(method: str, path: str, number: int) -> int | None:
            if method == "POST" and "uploadType" in path:  # a part's upload
                uploads.append(number)
                return 403 if len(uploads) == 4 else None
            return None

        proxy.fail_when = fourth_part_refused
        result = probe.upload(ONE)
    finally:
        proxy.stop()
    assert not result.ok
    assert result.errors[0].code.value == "request-failed"
    assert _gcs(gcs_server).find("bench/composite-failed") == []


@pytest.mark.parametrize("client", ["adlfs", "obstore"])
def test_cli_client_chooses_the_azure_client(
    azure_server: Server, client: str, tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "storeprobe", "run", "abfs://bench/cli-client", "memory://cli"),
            *("--client", client, "--workload", "4x1KiB", "--repeats", "1", "--no-progress"),
            *("-o", f"connection_string={azure_connection_string(azure_server.port)}"),
            *("--json", str(out)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    backends = {entry["url"]: entry["backend"] for entry in json.loads(out.read_text())["results"]}
    assert backends["abfs://bench/cli-client"] == client
    assert backends["memory://cli"] == "MemoryFileSystem"  # memory keeps auto: its one client


def test_a_fallback_from_obstore_is_a_warning_naming_the_option() -> None:
    s3 = {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:1", "requester_pays": True}
    chosen = choose_client("s3", s3, "auto")
    assert chosen.backend is None
    assert chosen.notice is not None
    assert chosen.notice.code is Code.CLIENT_FALLBACK
    assert "measured through s3fs, not obstore" in chosen.notice.message
    assert "'requester_pays'" in chosen.notice.message
    for asked in ("s3fs", "obstore"):  # asked for, or the default: no warning
        options = {k: v for k, v in s3.items() if k != "requester_pays"}
        assert choose_client("s3", options, asked).notice is None
    assert choose_client("gs", {}, "auto").notice is None  # gcsfs is the default there


def test_azure_fallback_to_adlfs_is_named_on_the_result(azure_server: Server) -> None:
    options = {"connection_string": azure_connection_string(azure_server.port)}
    probe = Probe.from_url("abfs://bench/fallback", {**options, "version_aware": False})
    result = probe.upload(Workload(count=4, size="1KiB"))
    assert result.ok, result.errors
    assert result.backend == "adlfs"
    [notice] = [w for w in result.warnings if w.code is Code.CLIENT_FALLBACK]
    assert "'version_aware'" in notice.message
    assert probe.target.client_reason == "storage option 'version_aware' has no obstore equivalent"
    default = Probe.from_url("abfs://bench/fallback", options).upload(Workload(count=4, size=1024))
    assert default.backend == "obstore"
    assert not [w for w in default.warnings if w.code is Code.CLIENT_FALLBACK]


def test_the_gcs_emulator_drops_a_trailing_carriage_return(gcs_server: Server) -> None:
    """Why every GCS test that reads its objects back pins a seed (``gcs_emulator_seed``):
    gcp-storage-emulator stores a simple upload's body without a trailing ``\\r``, so with
    a fresh seed 1 object in 256 comes back one byte short, and a download fails as it
    should (a short transfer), for the emulator's sake, not storeprobe's."""
    fs = _gcs(gcs_server)
    fs.pipe({"bench/carriage/cr": b"body\r", "bench/carriage/lf": b"body\n"})
    try:
        assert fs.cat("bench/carriage/cr") == b"body"  # the emulator's loss
        assert fs.cat("bench/carriage/lf") == b"body\n"
        workload = Workload(count=1, size="1KiB")
        seed = next(
            s
            for s in range(1, 10_000)
            if workload.with_seed(s).payload_bytes(0, 1023, 1024) == b"\r"
        )
        result = Probe.from_url(
            "gs://bench/carriage/probe", gcs_options(gcs_server.port), repeats=1, seed=seed
        ).download(workload)
        assert [error.message for error in result.errors] == [
            "ShortTransferError: moved 1023 bytes where the workload has 1024"
        ]
    finally:
        fs.rm("bench/carriage", recursive=True)
