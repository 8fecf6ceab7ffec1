"""Secrets never leave: sentinel values through every output path.

repr, str, JSON, CSV, markdown, HTML, warnings, log records at WARNING and above,
exception messages (including errors raised by backends), and the command line.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import Probe, ResultSet, Workload
from tests.conftest import s3_options
from tests.servers import AZURE_KEY, S3_SECRET, Server, azure_connection_string

SENTINELS = {
    "password": "SENTINEL-password-1",
    "token": "SENTINEL-token-2",
    "connection_string": "AccountName=a;AccountKey=SENTINEL-accountkey-3;",
    "account_key": "SENTINEL-account-key-4",
    "sas_token": "sv=2024&sig=SENTINEL-sas-5",
    "credentials": {"client_secret": "SENTINEL-credentials-6"},
    "secret": "SENTINEL-secret-7",
    "key": "SENTINEL-key-8",
}
WORKLOADS = [Workload(count=8, size="4KiB"), Workload(count=1, size="2MiB")]


def _everything(results: ResultSet, probe: Probe) -> str:
    parts = [repr(probe), repr(probe.target), repr(results), results.to_json()]
    parts += [results.table(), results.table(by="probe"), results.table(format="csv")]
    parts += [results._repr_html_()]
    for result in results:
        parts += [str(result), repr(result), result._repr_html_(), json.dumps(result.to_dict())]
    return "\n".join(parts)


def _assert_clean(text: str, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in text


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


def test_sentinel_options_never_appear(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    MemoryFileSystem.store.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probe = Probe.from_url("memory://secrets", SENTINELS, streams=4, repeats=1)
        results = probe.run(WORKLOADS)
    text = _everything(results, probe)
    text += "\n".join(str(w.message) for w in caught) + caplog.text
    _assert_clean(text, _leaves(SENTINELS))
    assert "sig=***" not in text  # nothing was shown at all, not even redacted


class LeakyMemoryFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec ships no type hints
    """A backend whose error messages echo its credentials, as some SDKs' do."""

    def pipe_file(self, path: str, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        raise PermissionError(f"denied: token={self.storage_options['token']} for {path}")


def test_backend_errors_are_scrubbed() -> None:
    fs = LeakyMemoryFS(skip_instance_cache=True, token="SENTINEL-leaky-token")
    probe = Probe(fs, "/leaky", repeats=1)
    result = probe.upload(WORKLOADS[0])
    assert result.errors
    assert "SENTINEL" not in " ".join(map(str, result.errors)) + str(result) + result.to_json()
    assert "***" in result.errors[0].message


def test_s3_secret_never_appears(s3_server: Server, tmp_path: Path) -> None:
    probe = Probe.from_url("s3://bench/secrets", s3_options(s3_server.endpoint), repeats=1)
    results = probe.run(WORKLOADS)
    assert all(result.ok for result in results)
    _assert_clean(_everything(results, probe), [S3_SECRET])
    wrong = {**s3_options(s3_server.endpoint), "secret": "SENTINEL-wrong-secret"}
    with pytest.raises(PermissionError) as info:
        Probe.from_url("s3://bench/secrets", wrong, repeats=1).upload(WORKLOADS[0])
    assert "SENTINEL" not in str(info.value) + repr(info.value)


def test_azure_key_never_appears(azure_server: Server) -> None:
    options = {"connection_string": azure_connection_string(azure_server.port)}
    probe = Probe.from_url("abfs://bench/secrets", options, repeats=1)
    results = probe.run(WORKLOADS)
    assert all(result.ok for result in results)
    _assert_clean(_everything(results, probe), [AZURE_KEY])


def test_cli_output_and_files_never_carry_secrets(s3_server: Server, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    client = json.dumps({"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"})
    common = [sys.executable, "-m", "storeprobe"]
    ok = subprocess.run(
        [
            *common,
            "run",
            "s3://bench/secrets-cli",
            "--workload",
            "4x1KiB",
            "--repeats",
            "1",
            "-o",
            "key=testkey",
            "-o",
            f"secret={S3_SECRET}",
            "-o",
            f"client_kwargs={client}",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    bad = subprocess.run(
        [
            *common,
            "run",
            "s3://bench/secrets-cli",
            "--workload",
            "4x1KiB",
            "--repeats",
            "1",
            "-o",
            "key=testkey",
            "-o",
            "secret=SENTINEL-cli-secret",
            "-o",
            f"client_kwargs={client}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = subprocess.run(
        [*common, "report", str(out), "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (ok.returncode, bad.returncode, report.returncode) == (0, 1, 0)
    text = ok.stdout + ok.stderr + bad.stdout + bad.stderr + report.stdout + out.read_text()
    _assert_clean(text, [S3_SECRET, "SENTINEL"])


@pytest.mark.parametrize(
    "url",
    [
        "s3://user:SENTINEL-url-9@127.0.0.1:9000/bench",
        "s3a://SENTINEL-url-9@bench/dir",
        "gs://user:SENTINEL-url-9@bench",
        "GCS://SENTINEL-url-9:x@bench/dir?y=1",
    ],
)
def test_a_credential_in_a_bucket_url_is_refused_unseen(url: str) -> None:
    """A bucket URL names no user: ``user:password@`` is refused at construction, and
    nothing before the ``@`` is shown (fsspec took it for the bucket and botocore's error
    quoted it)."""
    from storeprobe import ConfigurationError, Target

    with pytest.raises(ConfigurationError, match="user or password before '@'") as info:
        Target.from_url(url)
    assert "SENTINEL" not in str(info.value) + repr(info.value)
    assert info.value.__cause__ is None
    assert "endpoint_url" in str(info.value)


@pytest.mark.parametrize("url", ["s3://bench/key@2026", "memory://user@bench/x"])
def test_an_at_sign_elsewhere_is_no_credential(url: str) -> None:
    """A key may hold ``@``, and protocols other than buckets keep their user part."""
    from storeprobe import Target

    assert Target.from_url(url, {"anon": True} if url.startswith("s3") else {}).root


def test_the_cli_refuses_a_credential_in_a_bucket_url_unseen() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "storeprobe", "run", "s3://key:SENTINEL-cli-10@127.0.0.1:9/b"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "user or password before '@'" in done.stderr
    assert "SENTINEL" not in done.stdout + done.stderr
