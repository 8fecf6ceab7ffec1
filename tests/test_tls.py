"""HTTPS S3 endpoints with a private CA, through obstore and s3fs, and S3 checksums.

``rclone serve s3 --cert --key`` on 127.0.0.1 serves HTTPS with a certificate signed by a
CA made for this test session (:mod:`tests.tls`). Each way of naming the CA
(``client_kwargs={"verify": ...}``, ``AWS_CA_BUNDLE``, ``REQUESTS_CA_BUNDLE``,
``SSL_CERT_FILE``) is probed through both clients; a wrong or missing CA is a
:class:`TargetUnreachableError` naming the option to set; ``verify=False`` measures with a
``tls-unverified`` notice. Through HTTPS, s3fs (current botocore) fails every PUT with
``MissingContentLength`` unless checksums are sent only when required, which storeprobe
does on an endpoint that is not AWS's, and says so.

GCS: gcp-storage-emulator serves plain HTTP only (Python's ``http.server``, no TLS
option), so a TLS-terminating proxy (:class:`tests.delay_proxy.DelayProxy` with ``tls``)
stands in front of it with the session's certificate; gcsfs trusts a private CA through
``SSL_CERT_FILE`` (aiohttp's default context), set as the process starts.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs

from storeprobe import ConfigurationError, Probe, TargetUnreachableError, Workload
from storeprobe.backends.s3_trust import CA_VARIABLES
from storeprobe.notices import Code
from tests.conftest import gcs_options
from tests.delay_proxy import DelayProxy
from tests.helpers import gcs_emulator_seed
from tests.servers import S3_KEY, S3_SECRET, Server, rclone_s3
from tests.tls import Certificates, make_certificates

pytestmark = pytest.mark.s3

WORKLOAD = Workload(count=3, size="1KiB")
#: gcp-storage-emulator drops a trailing \r from an upload's body: a seed whose objects it
#: stores intact, for the runs that read them back (its repeats: upload and download)
GCS_SEED = gcs_emulator_seed((WORKLOAD, 0), repeats=2)
CLIENTS = ("obstore", "s3fs")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("other-ca"), "another CA")


@pytest.fixture(scope="module")
def tls_server(
    tmp_path_factory: pytest.TempPathFactory, certificates: Certificates
) -> Iterator[Server]:
    extra = ("--cert", str(certificates.cert), "--key", str(certificates.key))
    with rclone_s3(tmp_path_factory.mktemp("tls-s3root"), extra=extra) as server:
        yield server


@pytest.fixture(autouse=True)
def no_ca_variables(monkeypatch: pytest.MonkeyPatch, no_aws_config: None) -> None:
    """This machine's CA variables (set to the system bundle here) are cleared."""
    for name in (*CA_VARIABLES, "AWS_REQUEST_CHECKSUM_CALCULATION"):
        monkeypatch.delenv(name, raising=False)


def _options(server: Server, **client: Any) -> dict[str, Any]:
    return {
        "key": S3_KEY,
        "secret": S3_SECRET,
        "client_kwargs": {
            "endpoint_url": f"https://127.0.0.1:{server.port}",
            "region_name": "us-east-1",
            **client,
        },
    }


def _probe(options: dict[str, Any], client: str) -> Probe:
    probe = Probe.from_url("s3://bench/tls", options, client=client, repeats=1)
    assert probe.target.client == client
    return probe


def _codes(result: Any) -> set[Code]:
    return {notice.code for notice in result.warnings}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_private_ca_given_as_verify(
    client: str, tls_server: Server, certificates: Certificates
) -> None:
    probe = _probe(_options(tls_server, verify=str(certificates.ca)), client)
    endpoint = probe.target.s3_endpoint
    assert endpoint is not None
    assert endpoint.trust.ca_bundle == str(certificates.ca)
    assert endpoint.trust.source == "argument client_kwargs.verify"

    up = probe.upload(WORKLOAD)
    down = probe.download(WORKLOAD)

    assert up.ok, up.errors
    assert down.ok, down.errors
    assert Code.TLS_UNVERIFIED not in _codes(up)
    # s3fs measured with checksums only when required, and the Result says so
    assert (Code.CHECKSUMS_WHEN_REQUIRED in _codes(up)) is (client == "s3fs")


@pytest.mark.parametrize("variable", CA_VARIABLES)
@pytest.mark.parametrize("client", CLIENTS)
def test_a_private_ca_in_a_variable(
    client: str,
    variable: str,
    tls_server: Server,
    certificates: Certificates,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # a bundle of many certificates: the system's roots, then the private CA
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    bundle = tmp_path / "bundle.pem"
    roots = system.read_text() if system.exists() else ""
    bundle.write_text(roots + certificates.ca.read_text())
    monkeypatch.setenv(variable, str(bundle))

    probe = _probe(_options(tls_server), client)
    assert probe.target.s3_endpoint is not None
    assert probe.target.s3_endpoint.trust.source == f"env {variable}"
    result = probe.upload(WORKLOAD)

    assert result.ok, result.errors


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("given", ["wrong", "missing"])
def test_an_untrusted_certificate_names_the_option(
    client: str, given: str, tls_server: Server, other_ca: Certificates
) -> None:
    client_kwargs = {"verify": str(other_ca.ca)} if given == "wrong" else {}
    probe = _probe(_options(tls_server, **client_kwargs), client)

    with pytest.raises(TargetUnreachableError) as caught:
        probe.upload(WORKLOAD)

    message = str(caught.value)
    assert "TLS certificate was not trusted" in message
    assert "client_kwargs={'verify': 'ca.pem'}" in message
    assert S3_SECRET not in message


@pytest.mark.parametrize("client", CLIENTS)
def test_verify_false_measures_with_a_notice(client: str, tls_server: Server) -> None:
    probe = _probe(_options(tls_server, verify=False), client)

    result = probe.upload(WORKLOAD)

    assert result.ok, result.errors
    assert Code.TLS_UNVERIFIED in _codes(result)


def test_a_ca_bundle_that_is_not_one(tmp_path: Path, tls_server: Server) -> None:
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(ConfigurationError, match=r"nowhere\.pem.*cannot be read"):
        Probe.from_url("s3://bench/tls", _options(tls_server, verify=str(missing)))
    empty = tmp_path / "empty.pem"
    empty.write_text("not a certificate\n")
    with pytest.raises(ConfigurationError, match="holds no PEM certificate"):
        Probe.from_url("s3://bench/tls", _options(tls_server, verify=str(empty)))


def test_s3fs_alone_refuses_this_server_without_the_checksum_mode(
    tls_server: Server, certificates: Certificates
) -> None:
    # the reason for the mode: botocore's default (aws-chunked bodies with trailing
    # checksums) is refused by this server
    fs = s3fs.S3FileSystem(
        key=S3_KEY,
        secret=S3_SECRET,
        client_kwargs={
            "endpoint_url": f"https://127.0.0.1:{tls_server.port}",
            "region_name": "us-east-1",
            "verify": str(certificates.ca),
        },
        config_kwargs={"retries": {"max_attempts": 1}},
        skip_instance_cache=True,
    )
    with pytest.raises(OSError, match="MissingContentLength"):
        fs.pipe_file("bench/tls-alone", b"x" * 10)


def test_a_checksum_mode_given_is_kept(tls_server: Server, certificates: Certificates) -> None:
    options = {
        **_options(tls_server, verify=str(certificates.ca)),
        "config_kwargs": {"request_checksum_calculation": "when_supported"},
    }
    probe = Probe.from_url("s3://bench/tls", options, client="s3fs", repeats=1)
    endpoint = probe.target.s3_endpoint
    assert endpoint is not None
    assert endpoint.checksums == "when_supported"
    assert endpoint.checksums_source == "argument config_kwargs.request_checksum_calculation"

    result = probe.upload(WORKLOAD)

    assert not result.ok  # the server refuses it, as botocore's default
    assert "MissingContentLength" in str(result.errors)


def test_checksums_on_moto(moto_server: Server) -> None:
    options = {
        "key": S3_KEY,
        "secret": S3_SECRET,
        "client_kwargs": {"endpoint_url": moto_server.endpoint, "region_name": "us-east-1"},
    }
    probe = Probe.from_url("s3://bench/checksums", options, client="s3fs", repeats=1)

    result = probe.upload(WORKLOAD)

    assert result.ok, result.errors
    notice = next(n for n in result.warnings if n.code is Code.CHECKSUMS_WHEN_REQUIRED)
    assert "request_checksum_calculation='when_required'" in notice.message


_AWS = "botocore's default, on AWS"
_PRIVATE = "https://minio.example.internal"


@pytest.mark.parametrize(
    ("endpoint", "variable", "expected"),
    [
        (None, None, ("when_supported", _AWS)),
        ("https://s3.eu-west-1.amazonaws.com", None, ("when_supported", _AWS)),
        (_PRIVATE, "when_supported", ("when_supported", "env AWS_REQUEST_CHECKSUM_CALCULATION")),
        (_PRIVATE, None, ("when_required", "storeprobe's choice")),
    ],
)
def test_which_checksum_mode(
    endpoint: str | None,
    variable: str | None,
    expected: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from storeprobe.backends.s3_endpoint import resolve_s3

    if variable is not None:
        monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", variable)
    client = {"region_name": "eu-west-1"} | ({"endpoint_url": endpoint} if endpoint else {})
    resolved = resolve_s3({"anon": True, "client_kwargs": client})  # no I/O
    assert resolved.checksums == expected[0]
    assert resolved.checksums_source.startswith(expected[1])
    assert resolved.checksums_chosen is (expected[1] == "storeprobe's choice")


# --- Azure Blob over HTTPS (Azurite --cert --key) ---------------------------------------
@pytest.fixture(scope="module")
def azurite_tls(certificates: Certificates) -> Iterator[str]:
    """A connection string for Azurite over HTTPS, with a container ``bench``."""
    from azure.storage.blob import BlobServiceClient

    from tests.servers import AZURE_ACCOUNT, AZURE_KEY, azurite

    extra = ("--cert", str(certificates.cert), "--key", str(certificates.key))
    with azurite(extra) as server:
        connection = (
            f"DefaultEndpointsProtocol=https;AccountName={AZURE_ACCOUNT};AccountKey={AZURE_KEY};"
            f"BlobEndpoint=https://127.0.0.1:{server.port}/{AZURE_ACCOUNT};"
        )
        service = BlobServiceClient.from_connection_string(
            connection, connection_verify=str(certificates.ca)
        )
        service.create_container("bench")
        yield connection


@pytest.mark.parametrize("client", ["obstore", "adlfs"])
def test_azure_with_a_private_ca_in_ssl_cert_file(
    client: str, azurite_tls: str, certificates: Certificates, tmp_path: Path
) -> None:
    # a new process, as a user sets the variable: aiohttp (adlfs) builds its default SSL
    # context when it is imported, so a variable set later in a process is not read
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "storeprobe", "run", "abfs://bench/tls"),
            *("--client", client, "--workload", "3x1KiB", "--repeats", "1", "--no-progress"),
            *("-o", f"connection_string={azurite_tls}", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SSL_CERT_FILE": str(certificates.ca)},
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    entries = json.loads(out.read_text())["results"]
    assert {entry["operation"] for entry in entries} == {"upload", "download"}
    assert {entry["backend"] for entry in entries} == {client}
    assert not any(entry["errors"] for entry in entries)


def test_azure_without_the_ca_names_the_variable(azurite_tls: str) -> None:
    probe = Probe.from_url(
        "abfs://bench/tls", {"connection_string": azurite_tls}, client="obstore", repeats=1
    )

    with pytest.raises(TargetUnreachableError, match=r"SSL_CERT_FILE=ca\.pem for Azure"):
        probe.upload(WORKLOAD)


# --- GCS over HTTPS (gcp-storage-emulator behind a TLS-terminating proxy) ---------------
@pytest.fixture(scope="module")
def gcs_tls(gcs_server: Server, certificates: Certificates) -> Iterator[DelayProxy]:
    """HTTPS on 127.0.0.1 with the session CA's certificate, plain HTTP to the emulator."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates.cert, certificates.key)
    proxy = DelayProxy(gcs_server.port, delay_s=0, tls=context).start()
    yield proxy
    proxy.stop()


def _gcs_https(proxy: DelayProxy) -> dict[str, Any]:
    return {**gcs_options(proxy.port), "endpoint_url": f"https://127.0.0.1:{proxy.port}"}


def test_gcs_with_a_private_ca_in_ssl_cert_file(
    gcs_tls: DelayProxy, certificates: Certificates, tmp_path: Path
) -> None:
    # a new process, as a user sets the variable: aiohttp (gcsfs) builds its default SSL
    # context when it is imported
    out = tmp_path / "results.json"
    options = _gcs_https(gcs_tls)
    before = gcs_tls.connections
    done = subprocess.run(
        [
            *(sys.executable, "-m", "storeprobe", "run", "gs://bench/tls", "--client", "gcsfs"),
            *("--workload", "3x1KiB", "--repeats", "1", "--prep-streams", "4", "--no-progress"),
            *("--seed", str(GCS_SEED)),
            *(arg for name, value in options.items() for arg in ("-o", f"{name}={value}")),
            *("--json", str(out)),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SSL_CERT_FILE": str(certificates.ca)},
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    entries = json.loads(out.read_text())["results"]
    assert {entry["operation"] for entry in entries} == {"upload", "download"}
    assert {entry["backend"] for entry in entries} == {"gcsfs"}
    assert not any(entry["errors"] for entry in entries)
    assert all(entry["url"] == "gs://bench/tls" for entry in entries)
    assert gcs_tls.connections > before  # measured through HTTPS


@pytest.mark.parametrize("given", ["wrong", "missing"])
def test_gcs_with_an_untrusted_certificate_names_the_variable(
    given: str, gcs_tls: DelayProxy, other_ca: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    if given == "wrong":
        monkeypatch.setenv("SSL_CERT_FILE", str(other_ca.ca))
    probe = Probe.from_url("gs://bench/tls", _gcs_https(gcs_tls), client="gcsfs", repeats=1)

    with pytest.raises(TargetUnreachableError) as caught:
        probe.upload(WORKLOAD)  # at once: gcsfs would retry the handshake for ~30 s

    message = str(caught.value)
    assert "SSLCertVerificationError" in message
    assert "TLS certificate was not trusted" in message
    assert "SSL_CERT_FILE=ca.pem for Azure and gs://" in message


def test_the_gcs_certificate_check_passes_what_it_cannot_judge(gcs_server: Server) -> None:
    from storeprobe.backends.gcsfs import check_certificate
    from tests.servers import free_port

    check_certificate(f"http://127.0.0.1:{gcs_server.port}", {})  # no TLS: nothing to check
    check_certificate(f"https://127.0.0.1:{free_port()}", {})  # unreachable: gcsfs says so
    check_certificate("https://127.0.0.1:1", {"connector": object()})  # its own connector
