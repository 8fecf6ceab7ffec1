from __future__ import annotations

import sys

import pytest

from storeprobe import ConfigurationError, MissingDependencyError, Probe, Target
from storeprobe.redaction import redact_options, redact_url, scrub, secret_values


def test_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if gcsfs were not installed
    for protocol in ("gs", "gcs"):  # and not imported yet by an earlier test
        registry = sys.modules["fsspec.registry"]._registry
        monkeypatch.delitem(registry, protocol, raising=False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'storeprobe\[gcs\]'") as info:
        Probe.from_url("gs://bucket/dir")
    assert isinstance(info.value, ImportError)


@pytest.mark.parametrize("url", ["gopher://x/y", "nosuch://bucket"])
def test_unknown_protocol(url: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown protocol"):
        Target.from_url(url)


@pytest.mark.parametrize("url", ["", None, 42])
def test_url_must_be_a_string(url: object) -> None:
    with pytest.raises(ConfigurationError):
        Target.from_url(url)  # type: ignore[arg-type]


def test_backend_errors_are_translated_and_scrubbed() -> None:
    target = Target.from_url("memory://x", {"password": "SENTINEL-pw"})
    error = target.translate(PermissionError("denied for SENTINEL-pw"), "writing")
    assert isinstance(error, PermissionError)
    assert "SENTINEL" not in str(error)
    assert "credentials" in str(error)
    assert isinstance(target.translate(FileNotFoundError("x"), "reading"), FileNotFoundError)
    assert isinstance(target.translate(ConnectionRefusedError("x"), "reading"), ConnectionError)
    assert "SENTINEL" not in repr(target)


def test_run_prefix_is_fresh_and_under_the_root() -> None:
    target = Target.from_url("memory://bench/dir")
    first, second = target.new_prefix(), target.new_prefix()
    assert first != second
    assert first.startswith("/bench/dir/storeprobe-")


def test_redaction_by_allow_list() -> None:
    options = {
        "key": "AKIA-SENTINEL",
        "secret": "SENTINEL-secret",
        "token": "SENTINEL-token",
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"endpoint_url": "http://e", "aws_secret_access_key": "SENTINEL-nested"},
        "connection_string": "AccountKey=SENTINEL-cs;",
    }
    shown = redact_options(options)
    assert "SENTINEL" not in repr(shown)
    assert shown["endpoint_url"] == "http://127.0.0.1:9000"
    assert shown["client_kwargs"]["endpoint_url"] == "http://e"
    secrets = secret_values(options)
    assert "http://127.0.0.1:9000" not in secrets
    text = scrub("failed with SENTINEL-secret and SENTINEL-nested", secrets)
    assert "SENTINEL" not in text


def test_redact_url_drops_userinfo_and_query() -> None:
    assert redact_url("sftp://user:pw@host:22/dir") == "sftp://host:22/dir"
    assert redact_url("s3://bucket/x?token=abc#frag") == "s3://bucket/x"
