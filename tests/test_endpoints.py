"""Every request goes to the endpoint the user named, whichever S3 client measures.

AWS profiles (in temporary ``AWS_CONFIG_FILE`` / ``AWS_SHARED_CREDENTIALS_FILE``, never
this machine's ``~/.aws``), environment variables and fsspec's configuration point at a
real S3 server (``rclone serve s3``) behind a counting proxy on 127.0.0.1; each way of
naming the endpoint is probed through obstore and s3fs, and the proxy counts the
requests (and the region each was signed for) on the server side.

Nothing here may leave loopback: a guard refuses every Python-level DNS lookup and
connect to any other address, and ``HTTP(S)_PROXY`` points at a trap on 127.0.0.1 that
catches any request obstore (Rust, outside Python's sockets) would send elsewhere; both
fail the test.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import fsspec.config
import pytest

from storeprobe import ConfigurationError, Probe, ResultSet, TargetPermissionError, Workload
from storeprobe.cli import main
from storeprobe.notices import Code
from tests.http_proxy import CountingProxy
from tests.servers import S3_KEY, S3_SECRET

pytestmark = pytest.mark.s3

WORKLOAD = Workload(count=4, size="1KiB")
REGION = "eu-central-1"
#: a loopback port nothing listens on: settings that must lose point here
DEAD = "http://127.0.0.1:1"
_AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
)


# --- nothing leaves loopback ------------------------------------------------------------
def _is_loopback(host: Any) -> bool:
    if host in (None, "", b"", "localhost", b"localhost"):
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class _Trap:
    """A proxy on 127.0.0.1 that answers nobody and remembers each request's first line."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(2)
                try:
                    self.seen.append(connection.recv(200).split(b"\r\n", 1)[0])
                except OSError:
                    self.seen.append(b"(nothing read)")

    def close(self) -> None:
        self._server.close()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse (and fail the test on) any attempt to reach a non-loopback address; yields
    the list of attempts refused."""
    refused: list[str] = []
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback(host):
            refused.append(f"getaddrinfo {host!r}")
            raise socket.gaierror(f"test guard: {host!r} is not loopback")
        return real_getaddrinfo(host, *args, **kwargs)

    def check(address: Any) -> None:
        if isinstance(address, tuple) and not _is_loopback(address[0]):
            refused.append(f"connect {address!r}")
            raise ConnectionRefusedError(f"test guard: {address!r} is not loopback")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    trap = _Trap()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{trap.port}")
        monkeypatch.setenv(name.lower(), f"http://127.0.0.1:{trap.port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost,::1")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost,::1")
    yield refused
    trap.close()
    assert refused == [], f"a request tried to leave loopback: {refused}"
    assert trap.seen == [], f"a request went to the proxy trap (not loopback): {trap.seen}"


def test_the_guard_refuses_other_addresses(loopback_only: list[str]) -> None:
    with pytest.raises(OSError, match="test guard"):
        socket.getaddrinfo("s3.eu-central-1.amazonaws.com", 443)
    with socket.socket() as sock, pytest.raises(OSError, match="test guard"):
        sock.connect(("192.0.2.1", 443))  # TEST-NET-1: documentation only, never routed
    assert loopback_only == [
        "getaddrinfo 's3.eu-central-1.amazonaws.com'",
        "connect ('192.0.2.1', 443)",
    ]
    loopback_only.clear()  # refused as they must be: this test is not failed for them
    assert socket.getaddrinfo("127.0.0.1", 1)


# --- AWS configuration of this test only --------------------------------------------------
@pytest.fixture
def aws_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, counting_proxy: CountingProxy
) -> str:
    """Profiles pointing at the counting proxy; the default profile points at a dead port
    (so a setting that must win over it is proven to). Returns the proxy's URL."""
    for name in _AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("FSSPEC_S3")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(fsspec.config, "conf", {})  # no fsspec config of this machine
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    proxy = f"http://127.0.0.1:{counting_proxy.port}"
    config = tmp_path / "aws-config"
    config.write_text(
        f"[default]\nendpoint_url = {DEAD}\nregion = us-west-2\n\n"
        f"[profile remote]\nendpoint_url = {proxy}\nregion = {REGION}\n\n"
        f"[profile via-services]\nservices = local-s3\nregion = {REGION}\n\n"
        f"[services local-s3]\ns3 =\n  endpoint_url = {proxy}\n"
    )
    keys = f"aws_access_key_id = {S3_KEY}\naws_secret_access_key = {S3_SECRET}\n"
    credentials = tmp_path / "aws-credentials"
    credentials.write_text(f"[default]\n{keys}\n[remote]\n{keys}\n[via-services]\n{keys}")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    return proxy


@attrs.frozen
class Case:
    """One way of naming the endpoint: options and environment ("{proxy}" is replaced)."""

    name: str
    options: dict[str, Any]
    env: dict[str, str]
    endpoint_source: str
    region_source: str


CASES = [
    Case("option profile", {"profile": "remote"}, {}, "profile remote", "profile remote"),
    Case("AWS_PROFILE", {}, {"AWS_PROFILE": "remote"}, "profile remote", "profile remote"),
    Case(
        "profile services section",
        {"profile": "via-services"},
        {},
        "profile via-services, services section local-s3",
        "profile via-services",
    ),
    Case(
        "AWS_ENDPOINT_URL",
        {},
        {"AWS_ENDPOINT_URL": "{proxy}", "AWS_DEFAULT_REGION": REGION},
        "env AWS_ENDPOINT_URL",
        "env AWS_DEFAULT_REGION",
    ),
    Case(
        "AWS_ENDPOINT_URL_S3",
        {},
        {"AWS_ENDPOINT_URL_S3": "{proxy}", "AWS_ENDPOINT_URL": DEAD, "AWS_REGION": REGION},
        "env AWS_ENDPOINT_URL_S3",
        "env AWS_REGION",
    ),
    Case(
        "FSSPEC_S3_ENDPOINT_URL with AWS_DEFAULT_REGION",
        {},
        {"FSSPEC_S3_ENDPOINT_URL": "{proxy}", "AWS_DEFAULT_REGION": REGION},
        "env FSSPEC_S3_ENDPOINT_URL",
        "env AWS_DEFAULT_REGION",
    ),
    Case(
        "explicit client_kwargs",
        {
            "key": S3_KEY,
            "secret": S3_SECRET,
            "client_kwargs": {"endpoint_url": "{proxy}", "region_name": REGION},
        },
        {"AWS_ENDPOINT_URL": DEAD},
        "argument client_kwargs.endpoint_url",
        "argument client_kwargs.region_name",
    ),
]


def _filled(value: Any, proxy: str) -> Any:
    if isinstance(value, str):
        return value.replace("{proxy}", proxy)
    if isinstance(value, dict):
        return {key: _filled(inner, proxy) for key, inner in value.items()}
    return value


def _apply(case: Case, proxy: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Set the case's environment (and fsspec's configuration, as fsspec reads it at
    import); return its storage options."""
    for name, value in case.env.items():
        monkeypatch.setenv(name, _filled(value, proxy))
    fresh: dict[str, dict[str, Any]] = {}
    fsspec.config.set_conf_env(fresh)
    monkeypatch.setattr(fsspec.config, "conf", fresh)
    filled: dict[str, Any] = _filled(case.options, proxy)
    return filled


@pytest.mark.parametrize("client", ["auto", "obstore", "s3fs"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_way_of_naming_the_endpoint_reaches_it(
    case: Case,
    client: str,
    aws_files: str,
    counting_proxy: CountingProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = _apply(case, aws_files, monkeypatch)
    probe = Probe.from_url("s3://bench/endpoints", options, client=client, repeats=1)
    resolved = probe.target.s3_endpoint
    assert resolved is not None
    address = f"127.0.0.1:{counting_proxy.port}"
    assert resolved.address == address  # checked before any request is sent
    assert (resolved.endpoint_source, resolved.region_source) == (
        case.endpoint_source,
        case.region_source,
    )
    assert resolved.region == REGION
    assert probe.target.client == ("obstore" if client == "auto" else client)
    counting_proxy.reset()

    result = probe.upload(WORKLOAD)

    assert result.ok, result.errors
    assert result.backend == probe.target.client
    assert counting_proxy.methods.count("PUT") >= WORKLOAD.count  # counted server-side
    assert set(counting_proxy.signed_regions) == {REGION}  # every request signed for it
    assert result.environment.endpoint == address


@pytest.mark.parametrize("case", [c for c in CASES if "FSSPEC" not in c.name], ids=lambda c: c.name)
def test_the_endpoint_is_the_one_botocore_resolves(
    case: Case, aws_files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore's own client, built (no request sent) from what s3fs would pass it
    import botocore.session

    from storeprobe.backends.s3_endpoint import resolve_s3

    options = _apply(case, aws_files, monkeypatch)
    given = options.get("client_kwargs", {})
    botocore_client = botocore.session.Session(profile=options.get("profile")).create_client(
        "s3",
        endpoint_url=given.get("endpoint_url"),
        region_name=given.get("region_name"),
        aws_access_key_id="k",
        aws_secret_access_key="s",
    )
    resolved = resolve_s3(options)
    assert resolved.url == botocore_client.meta.endpoint_url == aws_files
    if case.region_source != "env AWS_REGION":  # botocore alone does not read AWS_REGION
        assert resolved.region == botocore_client.meta.region_name


def test_the_cli_with_a_profile_reaches_its_endpoint(
    aws_files: str, counting_proxy: CountingProxy, tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    argv = ["run", "s3://bench/cli", "-o", "profile=remote", "--workload", "4x1KiB"]
    code = main([*argv, "--repeats", "1", "--no-progress", "--json", str(out)])
    assert code == 0
    assert counting_proxy.methods.count("PUT") >= 4
    assert set(counting_proxy.signed_regions) == {REGION}
    results = ResultSet.from_json(out)
    assert results.results
    for result in results.results:
        assert result.backend == "obstore"
        assert result.environment.endpoint == f"127.0.0.1:{counting_proxy.port}"
    assert S3_SECRET not in out.read_text()
    assert json.loads(out.read_text())  # a complete document


def test_an_http_endpoint_from_the_environment_is_allowed_plain_http(
    aws_files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # obstore said "builder error" for an http:// AWS_ENDPOINT_URL it read by itself
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws_files)
    probe = Probe.from_url("s3://bench/http", client="obstore", repeats=1)
    options = probe.target.fs.storage_options
    assert options["config"]["endpoint"] == aws_files
    assert options["client_options"]["allow_http"] is True
    assert probe.upload(WORKLOAD).ok


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"AWS_ENDPOINT": DEAD}, "AWS_ENDPOINT"),
        (
            {"AWS_ENDPOINT_URL": DEAD, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
            "AWS_ENDPOINT_URL",
        ),
    ],
)
def test_an_endpoint_only_obstore_would_read_refuses_obstore(
    env: dict[str, str],
    variable: str,
    aws_files: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # a profile without an endpoint: botocore goes to AWS, obstore would read the variable
    config = tmp_path / "plain-config"
    config.write_text(f"[default]\nregion = {REGION}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=f"{variable} is set.*client='s3fs'"):
        Probe.from_url("s3://bench/x", client="obstore")
    target = Probe.from_url("s3://bench/x").target  # nothing is sent: construction only
    assert target.client == "s3fs"
    assert target.client_notice is not None
    assert target.client_notice.code is Code.CLIENT_FALLBACK
    assert variable in target.client_notice.message
    assert target.s3_endpoint is not None
    assert target.s3_endpoint.endpoint_url is None  # AWS, as botocore would
    assert target.endpoint == f"https://s3.{REGION}.amazonaws.com"


def test_the_resolved_value_never_shows_a_secret(aws_files: str) -> None:
    options = {
        "key": "AKIA-SENTINEL",
        "secret": "secret-SENTINEL",
        "token": "token-SENTINEL",
        "client_kwargs": {"endpoint_url": "http://user:pw-SENTINEL@127.0.0.1:9"},
    }
    target = Probe.from_url("s3://bench/x", options).target
    resolved = target.s3_endpoint
    assert resolved is not None
    for text in (repr(resolved), resolved.describe(), str(target.endpoint)):
        assert "SENTINEL" not in text
    assert "secret-SENTINEL" not in repr(target)
    assert "token-SENTINEL" not in repr(target)
    assert resolved.credentials.source == "argument key"
    assert resolved.describe().startswith("http://127.0.0.1:9 (argument client_kwargs")


def test_an_unknown_profile_is_refused_at_once(aws_files: str) -> None:
    with pytest.raises(ConfigurationError, match=r"AWS profile 'nowhere' \(argument profile\)"):
        Probe.from_url("s3://bench/x", {"profile": "nowhere"})


def test_a_key_without_a_secret_is_refused_at_once(aws_files: str) -> None:
    with pytest.raises(ConfigurationError, match="key is given without secret"):
        Probe.from_url("s3://bench/x", {"key": S3_KEY, "client_kwargs": {"endpoint_url": DEAD}})


def test_keys_from_fsspec_config_sign_and_are_scrubbed(
    aws_files: str, counting_proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSSPEC_S3_KEY", S3_KEY)
    monkeypatch.setenv("FSSPEC_S3_SECRET", "wrong-FSSPEC-SENTINEL-55")
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", aws_files)
    fresh: dict[str, dict[str, Any]] = {}
    fsspec.config.set_conf_env(fresh)
    monkeypatch.setattr(fsspec.config, "conf", fresh)
    for client in ("obstore", "s3fs"):
        probe = Probe.from_url("s3://bench/x", client=client, repeats=1)
        resolved = probe.target.s3_endpoint
        assert resolved is not None
        assert resolved.credentials.kind == "static"
        assert resolved.credentials.source == "env FSSPEC_S3_KEY"
        counting_proxy.reset()
        with pytest.raises(TargetPermissionError) as info:
            probe.upload(WORKLOAD)
        assert counting_proxy.requests > 0  # the wrong secret was sent to the local server
        assert "SENTINEL" not in str(info.value)
        assert "SENTINEL" not in repr(probe)


def test_an_aws_config_file_botocore_cannot_parse_is_refused_at_once(
    aws_files: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken-config"
    broken.write_text("[profile remote\nregion = eu-central-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(broken))
    with pytest.raises(
        ConfigurationError, match=r"cannot read the AWS configuration.*fix the file"
    ):
        Probe.from_url("s3://bench/x", {"profile": "remote"})


def test_the_profile_variables_in_botocores_order(
    aws_files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import botocore.session

    from storeprobe.backends.s3_endpoint import resolve_s3

    monkeypatch.setenv("AWS_PROFILE", "remote")
    monkeypatch.setenv("AWS_DEFAULT_PROFILE", "via-services")
    resolved = resolve_s3({})
    assert (resolved.profile, resolved.profile_source) == (
        "via-services",
        "env AWS_DEFAULT_PROFILE",
    )
    assert botocore.session.Session().get_config_variable("profile") == "via-services"
    assert resolved.endpoint_source == "profile via-services, services section local-s3"


@pytest.mark.parametrize(
    ("profile", "env", "setting"),
    [
        ("", {"AWS_USE_FIPS_ENDPOINT": "true"}, "use_fips_endpoint (env AWS_USE_FIPS_ENDPOINT)"),
        ("use_dualstack_endpoint = true\n", {}, "use_dualstack_endpoint (profile default)"),
        (
            "s3 =\n  use_accelerate_endpoint = true\n",
            {},
            "s3.use_accelerate_endpoint (profile default)",
        ),
        (
            "endpoint_url = https://127.0.0.1:9\ns3 =\n  addressing_style = virtual\n",
            {},
            "s3.addressing_style (profile default)",
        ),
    ],
)
def test_a_setting_only_botocore_applies_refuses_obstore(
    profile: str,
    env: dict[str, str],
    setting: str,
    aws_files: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    config = tmp_path / "setting-config"
    config.write_text(f"[default]\nregion = {REGION}\n{profile}")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pattern = re.escape(setting) + r" is a botocore setting obstore does not apply.*client='s3fs'"
    with pytest.raises(ConfigurationError, match=pattern):
        Probe.from_url("s3://bench/x", client="obstore")
    target = Probe.from_url("s3://bench/x").target  # construction only: nothing is sent
    assert target.client == "s3fs"
    assert target.client_notice is not None
    assert setting in target.client_notice.message


def test_settings_that_change_nothing_keep_obstore(
    aws_files: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # path-style addressing is what obstore sends; FIPS is for AWS's own endpoints only
    config = tmp_path / "harmless-config"
    config.write_text(
        f"[default]\nregion = {REGION}\nendpoint_url = {aws_files}\nuse_fips_endpoint = true\n"
        "s3 =\n  addressing_style = path\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    probe = Probe.from_url("s3://bench/harmless", repeats=1)
    assert probe.target.client == "obstore"
    assert probe.upload(WORKLOAD).ok
