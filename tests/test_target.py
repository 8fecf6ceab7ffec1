from __future__ import annotations

import sys
from pathlib import Path

import pytest

from storeprobe import ConfigurationError, MissingDependencyError, Probe, Target
from storeprobe.backends.obstore import ObstoreBackend
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


KEYS = {"key": "k", "secret": "s-SENTINEL"}


def test_region_from_the_profile_lets_obstore_measure(
    no_aws_config: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = eu-west-1\n[profile bare]\noutput = json\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    target = Target.from_url("s3://bucket", {"profile": "work"})
    assert target.client == "obstore"
    assert target.fs.storage_options["config"] == {"region": "eu-west-1"}
    assert target.s3_endpoint is not None
    assert target.s3_endpoint.region_source == "profile work"
    # no region anywhere: s3fs, which looks the bucket's region up
    assert Target.from_url("s3://bucket", {"profile": "bare"}).client == "s3fs"
    # a profile that does not exist: said at once, with the profiles there are
    with pytest.raises(
        ConfigurationError, match=r"AWS profile .other. .*\(profiles there: bare, work\)"
    ):
        Target.from_url("s3://bucket", {"profile": "other"})


ENDPOINT = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"}}


@pytest.mark.parametrize(
    ("options", "client"),
    [
        ({**KEYS, **ENDPOINT}, "obstore"),  # everything obstore needs is explicit
        ({**KEYS, "client_kwargs": {"region_name": "eu-west-1"}}, "obstore"),
        ({"anon": True, "endpoint_url": "http://127.0.0.1:9"}, "obstore"),
        (ENDPOINT, "obstore"),  # no keys: botocore's credential chain, read when signing
        ({**KEYS}, "s3fs"),  # no region, no endpoint: s3fs looks the bucket's region up
        ({**KEYS, **ENDPOINT, "profile": "work"}, "obstore"),  # explicit keys win
        ({**KEYS, **ENDPOINT, "config_kwargs": {}}, "s3fs"),  # no obstore equivalent
        # verify translates (obstore's allow_invalid_certificates / root_certificate)
        ({**KEYS, "client_kwargs": {"endpoint_url": "http://x", "verify": False}}, "obstore"),
    ],
)
def test_auto_chooses_obstore_only_when_the_options_translate(
    options: dict[str, object],
    client: str,
    no_aws_config: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile work]\noutput = json\n")  # a profile without keys or region
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    target = Target.from_url("s3://bucket/dir", options)
    assert target.client == client
    assert target.protocol == "s3"
    assert target.root == "bucket/dir"
    assert target.url == "s3://bucket/dir"
    assert "SENTINEL" not in repr(target)


def test_obstore_target_carries_the_translated_config() -> None:
    target = Target.from_url(
        "s3://bucket/dir", {**KEYS, "token": "t", **ENDPOINT}, client="obstore"
    )
    options = target.fs.storage_options
    assert options["config"] == {
        "access_key_id": "k",
        "secret_access_key": "s-SENTINEL",
        "session_token": "t",
        "endpoint": "http://127.0.0.1:9",
        "region": "us-east-1",
    }
    assert options["client_options"]["allow_http"] is True
    backend = target.backend
    assert isinstance(backend, ObstoreBackend)
    assert backend.range_fallback is not None  # s3fs for servers that answer 200
    assert backend.range_fallback().name == "s3fs"


def test_client_s3fs_forces_s3fs() -> None:
    assert Target.from_url("s3://bucket", {**KEYS, **ENDPOINT}, client="s3fs").client == "s3fs"


def test_client_is_only_for_s3() -> None:
    with pytest.raises(ConfigurationError, match="leave client at 'auto'"):
        Target.from_url("memory://x", client="obstore")


def test_client_obstore_without_obstore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "obstore" else real(name, *a)
    )
    with pytest.raises(MissingDependencyError, match=r"pip install 'storeprobe\[s3\]'"):
        Target.from_url("s3://bucket", {**KEYS, **ENDPOINT}, client="obstore")
    assert Target.from_url("s3://bucket", {**KEYS, **ENDPOINT}).client == "s3fs"  # auto
