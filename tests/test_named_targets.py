"""Named targets: rclone remotes, storeprobe.toml targets, options scoped to one target.

rclone configuration files are written by ``rclone config create`` itself (so the format
is rclone's), into this test's own directory (never this machine's rclone config), and
point at real servers on 127.0.0.1: moto behind a logging middleware (``tests/s3_log``)
counts every request server-side, so "a run through ``NAME:bucket/x`` reaches it" is
checked by the requests the server saw under ``x/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeprobe import ConfigurationError, MissingDependencyError, Probe, ResultSet, Workload
from storeprobe.cli import main
from storeprobe.named_target import NamedTarget
from storeprobe.named_targets import resolve
from storeprobe.rclone_config import RcloneConfig, default_rclone_config, reveal
from storeprobe.rclone_presets import S3_REGION_ENDPOINTS
from storeprobe.targets_file import TargetsFile
from tests.http_proxy import CountingProxy
from tests.s3_log import LoggingS3, logging_s3
from tests.servers import (
    AZURE_ACCOUNT,
    AZURE_KEY,
    S3_KEY,
    S3_SECRET,
    Server,
    _rclone,
    rclone_config_create,
)

RUN = ["--workload", "3x1KiB", "--repeats", "1", "--no-progress"]
SECRET = "SENTINEL-rclone-secret-0123456789"
TOML_SECRET = "SENTINEL-toml-secret-9876543210"


@pytest.fixture
def moto() -> Iterator[LoggingS3]:
    with logging_s3() as server:
        server.create_bucket("bench")
        yield server


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of this test's own, no rclone or AWS configuration of the machine."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RCLONE_CONFIG", "XDG_CONFIG_HOME", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    return work


def _s3_remote(config: Path, name: str, endpoint: str, secret: str = SECRET) -> None:
    rclone_config_create(
        config,
        name,
        "s3",
        "provider=Other",
        f"access_key_id={S3_KEY}",
        f"secret_access_key={secret}",
        f"endpoint={endpoint}",
        "region=us-east-1",
    )


# --- rclone remotes reach the server they name -------------------------------------------
@pytest.mark.parametrize("client", ["auto", "s3fs"])
def test_an_rclone_remote_reaches_its_server(
    client: str,
    moto: LoggingS3,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = isolated.parent / "rclone.conf"
    _s3_remote(config, "loop", moto.endpoint)
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    out = isolated / "r.json"
    code = main(["run", "loop:bench/x", *RUN, "--client", client, "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    seen = moto.log.snapshot().where(bucket="bench", prefix="x/storeprobe-")
    assert seen.count("put") >= 3  # the upload's three objects at least, under the path
    assert seen.count("get") >= 3  # the download read them back
    (result, *_) = ResultSet.load(out)
    assert result.url == "s3://bench/x"
    assert "target loop:bench/x: s3://bench/x" in captured.err
    for text in (captured.out, captured.err, out.read_text()):
        assert SECRET not in text


def test_a_refused_secret_from_rclone_config_is_never_shown(
    s3_server: Server,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # rclone serve s3 refuses a wrong secret: the error path must scrub it too
    config = isolated.parent / "rclone.conf"
    _s3_remote(config, "wrong", s3_server.endpoint, secret=SECRET)
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    out = isolated / "r.json"
    code = main(["run", "wrong:bench/x", *RUN, "--client", "s3fs", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert "credentials" in captured.err
    texts = [captured.out, captured.err] + ([out.read_text()] if out.exists() else [])
    for text in texts:
        assert SECRET not in text


def test_environment_remotes_are_rclones_too(
    moto: LoggingS3, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rclone's RCLONE_CONFIG_<NAME>_<KEY> variables (SERVERS.md's peer client) override
    # the file: here the file's endpoint is dead and the environment's is the server
    config = isolated.parent / "rclone.conf"
    _s3_remote(config, "peer", "http://127.0.0.1:1")
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    monkeypatch.setenv("RCLONE_CONFIG_PEER_ENDPOINT", moto.endpoint)
    assert main(["run", "peer:bench/env", *RUN]) == 0
    assert moto.log.snapshot().where(prefix="env/storeprobe-").count("put") >= 3


def test_an_encrypted_config_still_has_its_environment_remotes(
    moto: LoggingS3, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = isolated.parent / "rclone.conf"  # rclone's header (fs/config/crypt.go)
    config.write_text("# Encrypted rclone configuration File\n\nRCLONE_ENCRYPT_V0:\nc2VjcmV0\n")
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    with pytest.raises(ConfigurationError, match=r"is encrypted.*RCLONE_CONFIG_HIDDEN_<KEY>"):
        RcloneConfig.load().target("hidden:bench/x")
    for key, value in {
        "TYPE": "s3",
        "PROVIDER": "Other",
        "ACCESS_KEY_ID": S3_KEY,
        "SECRET_ACCESS_KEY": SECRET,
        "ENDPOINT": moto.endpoint,
    }.items():
        monkeypatch.setenv(f"RCLONE_CONFIG_ENV_{key}", value)
    assert main(["run", "env:bench/e", *RUN]) == 0
    assert moto.log.snapshot().where(prefix="e/storeprobe-").count("put") >= 3


def test_rclone_config_option_and_default_path(
    moto: LoggingS3, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolated.parent
    default = home / ".config" / "rclone" / "rclone.conf"
    default.parent.mkdir(parents=True)
    _s3_remote(default, "home", moto.endpoint)
    assert default_rclone_config() == default
    other = home / "other.conf"
    _s3_remote(other, "there", moto.endpoint)
    assert main(["run", "home:bench/d", *RUN]) == 0
    assert main(["run", "there:bench/o", *RUN, "--rclone-config", str(other)]) == 0
    log = moto.log.snapshot()
    assert log.where(prefix="d/storeprobe-").count("put") >= 3
    assert log.where(prefix="o/storeprobe-").count("put") >= 3


# --- the mapping of each type --------------------------------------------------------------
def test_a_provider_preset_gives_the_endpoint_of_the_region(tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(
        config, "w", "s3", "provider=Wasabi", "region=eu-central-1", "access_key_id=AKEXAMPLE0"
    )
    with config.open("a") as file:  # rclone config create asks no secret it was not given
        file.write("secret_access_key = example-secret-0\n")
    target = RcloneConfig.load(config).target("w:bench/probe")
    assert target.url == "s3://bench/probe"
    assert target.options["client_kwargs"] == {
        "endpoint_url": "https://s3.eu-central-1.wasabisys.com",
        "region_name": "eu-central-1",
    }
    assert "rclone's Wasabi preset for region eu-central-1" in target.notes[0]
    # the table holds what rclone lists: one endpoint per region, each naming its region
    for provider in ("Wasabi", "DigitalOcean", "Scaleway"):
        for region, endpoint in S3_REGION_ENDPOINTS[provider].items():
            assert region in endpoint or (provider, region) == ("Wasabi", "us-east-1")


def test_a_provider_whose_endpoint_is_per_account_says_what_to_add(tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(config, "r2", "s3", "provider=Cloudflare", "region=auto")
    with pytest.raises(ConfigurationError, match=r"ACCOUNT_ID\.r2\.cloudflarestorage\.com"):
        RcloneConfig.load(config).target("r2:bench/x")
    rclone_config_create(config, "w", "s3", "provider=Wasabi", "region=mars-1")
    with pytest.raises(ConfigurationError, match="region 'mars-1' is not one of rclone's Wasabi"):
        RcloneConfig.load(config).target("w:bench/x")


def test_an_endpoint_without_a_scheme_gets_https_as_in_rclone(tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(
        config,
        "do",
        "s3",
        "provider=DigitalOcean",
        "endpoint=fra1.digitaloceanspaces.com",
        "access_key_id=DOEXAMPLE",
        "secret_access_key=do-secret-0",
        "acl=private",
    )
    target = RcloneConfig.load(config).target("do:space/dir")
    assert target.options["client_kwargs"]["endpoint_url"] == "https://fra1.digitaloceanspaces.com"
    assert target.options["client_kwargs"]["region_name"] == "us-east-1"  # rclone's default
    assert any("acl" in note for note in target.notes)  # rclone's tuning: noted, not used


def test_reveal_is_rclones_own_algorithm() -> None:
    for plain in ("hunter22", "pässwörd with spaces", "x" * 100):
        obscured = subprocess.run(
            [_rclone(), "obscure", plain], check=True, capture_output=True, text=True
        ).stdout.strip()
        assert reveal(obscured) == plain
    with pytest.raises(ConfigurationError, match="not a value rclone obscured") as caught:
        reveal("plain-password-never-obscured")
    assert "plain-password" not in str(caught.value)


def test_without_cryptography_an_obscured_password_is_refused_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(config, "box", "sftp", "host=127.0.0.1", "pass=SENTINEL-pw-77")
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers", None)
    with pytest.raises(MissingDependencyError, match="pip install cryptography") as caught:
        RcloneConfig.load(config).target("box:/srv")
    assert "pass of rclone remote 'box'" in str(caught.value)
    assert "SENTINEL" not in str(caught.value)


def test_sftp_remote_reaches_sshd(ssh_server: Server, tmp_path: Path) -> None:
    assert ssh_server.root is not None
    keys = ssh_server.root.parent / "ssh"
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {(keys / 'host.pub').read_text()}")
    config = tmp_path / "rclone.conf"
    rclone_config_create(
        config,
        "box",
        "sftp",
        "host=127.0.0.1",
        f"port={ssh_server.port}",
        "user=root",
        f"key_file={keys / 'client'}",
        f"known_hosts_file={known}",
        "pass=SENTINEL-sftp-pass-42",  # rclone obscures it; the key logs in first
    )
    assert "SENTINEL-sftp-pass-42" not in config.read_text()
    target = RcloneConfig.load(config).target(f"box:{ssh_server.root}")
    assert target.url == f"sftp://127.0.0.1:{ssh_server.port}{ssh_server.root}"
    assert target.options["password"] == "SENTINEL-sftp-pass-42"
    probe = Probe.from_url(target.url, dict(target.options), repeats=1)
    result = probe.upload(Workload(count=2, size="1KiB"))
    assert result.ok, result.errors
    assert "SENTINEL-sftp-pass-42" not in repr(probe) + json.dumps(result.to_dict())
    with pytest.raises(ConfigurationError, match="relative to the login directory"):
        RcloneConfig.load(config).target("box:bench")


def test_azureblob_remote_reaches_azurite(azure_server: Server, tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(
        config,
        "blob",
        "azureblob",
        f"account={AZURE_ACCOUNT}",
        f"key={AZURE_KEY}",
        f"endpoint=http://127.0.0.1:{azure_server.port}/{AZURE_ACCOUNT}",
    )
    target = RcloneConfig.load(config).target("blob:bench/rc")
    assert target.url == "abfs://bench/rc"
    result = Probe.from_url(target.url, dict(target.options), repeats=1).upload(
        Workload(count=2, size="1KiB")
    )
    assert result.ok, result.errors


def test_gcs_remote_reaches_the_emulator(gcs_server: Server, tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(
        config,
        "gcs",
        "google cloud storage",
        "anonymous=true",
        f"endpoint=http://127.0.0.1:{gcs_server.port}",
        "project_number=test",
    )
    target = RcloneConfig.load(config).target("gcs:bench/rc")
    assert (target.url, target.options["token"]) == ("gs://bench/rc", "anon")
    result = Probe.from_url(target.url, dict(target.options), repeats=1).upload(
        Workload(count=2, size="1KiB")
    )
    assert result.ok, result.errors


def test_local_and_alias_remotes_are_paths(tmp_path: Path, isolated: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(config, "disk", "local")
    rclone_config_create(config, "scratch", "alias", f"remote=disk:{tmp_path}")
    disk = tmp_path / "probe"
    disk.mkdir()
    assert RcloneConfig.load(config).target(f"disk:{disk}").url == str(disk)
    assert RcloneConfig.load(config).target("scratch:probe").url == str(disk)
    assert main(["run", "scratch:probe", *RUN, "--rclone-config", str(config)]) == 0
    assert list(disk.iterdir()) == []  # the probe cleaned up after itself


def test_a_type_storeprobe_does_not_open_is_refused_with_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(config, "b2", "b2", "account=keyid", "key=appkey")
    with pytest.raises(ConfigurationError, match=r"type 'b2'.*s3\.REGION\.backblazeb2\.com"):
        RcloneConfig.load(config).target("b2:bucket/x")
    with pytest.raises(ConfigurationError, match=r"no rclone remote 'nope'.*its remotes: b2"):
        RcloneConfig.load(config).target("nope:bucket/x")


# --- what a target on the command line names ------------------------------------------------
def test_urls_and_drive_letters_are_never_remotes(tmp_path: Path) -> None:
    config = tmp_path / "rclone.conf"
    for name in ("s3", "memory", "file"):  # remotes named like protocols
        rclone_config_create(config, name, "local")
    rclone = RcloneConfig.load(config)
    none = TargetsFile()
    for url in ("s3://bench/x", "memory://bench", "file:///tmp/x", "/tmp/x", "relative/dir"):
        assert resolve(url, none, lambda: rclone) is None
    # a bare NAME:PATH whose NAME is a configured remote wins, even named like a protocol
    named = resolve("s3:/tmp/x", none, lambda: rclone)
    assert named is not None
    assert named.url == "/tmp/x"
    # a protocol or a drive letter that is no remote is left to the URL checks
    for spec in ("gs:/bucket/x", "C:/data"):
        assert resolve(spec, none, lambda: RcloneConfig(path="(none)")) is None
    with pytest.raises(ConfigurationError, match="no rclone remote 'wasabi'"):
        resolve("wasabi:bench/x", none, lambda: RcloneConfig(path="(none)"))


def test_memory_urls_keep_working_beside_a_remote_named_memory(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "rclone.conf"
    rclone_config_create(config, "memory", "local")
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    out = isolated / "r.json"
    assert main(["run", "memory://named", *RUN, "--json", str(out)]) == 0
    assert {r.url for r in ResultSet.load(out)} == {"memory://named"}


# --- storeprobe.toml -----------------------------------------------------------------------
def _toml_target(endpoint: str, **extra: str) -> str:
    lines = "".join(f'{key} = "{value}"\n' for key, value in extra.items())
    return (
        '[targets.loop]\nurl = "s3://bench/t"\nlabel = "lab-bench"\nclient = "s3fs"\n'
        f"{lines}"
        f'[targets.loop.options]\nkey = "{S3_KEY}"\nsecret = "{TOML_SECRET}"\n'
        f'client_kwargs = {{ endpoint_url = "{endpoint}", region_name = "us-east-1" }}\n'
    )


@pytest.mark.parametrize("how", ["positional", "--target"])
def test_a_toml_target_is_run_by_name(
    how: str, moto: LoggingS3, isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated / "storeprobe.toml").write_text(_toml_target(moto.endpoint))
    out = isolated / "r.json"
    argv = ["loop"] if how == "positional" else ["--target", "loop"]
    code = main(["run", *argv, *RUN, "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert moto.log.snapshot().where(prefix="t/storeprobe-").count("put") >= 3
    results = ResultSet.load(out)
    assert {r.environment.label for r in results} == {"lab-bench"}
    assert {r.backend for r in results} == {"s3fs"}
    for text in (captured.out, captured.err, out.read_text()):
        assert TOML_SECRET not in text


def test_pyproject_and_config_option(moto: LoggingS3, isolated: Path, tmp_path: Path) -> None:
    (isolated / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n'
        + _toml_target(moto.endpoint).replace("[targets.", "[tool.storeprobe.targets.")
    )
    assert main(["run", "loop", *RUN]) == 0
    elsewhere = tmp_path / "targets.toml"
    elsewhere.write_text(_toml_target(moto.endpoint).replace("bench/t", "bench/c"))
    assert main(["run", "loop", *RUN, "--config", str(elsewhere)]) == 0
    log = moto.log.snapshot()
    assert log.where(prefix="t/storeprobe-").count("put") >= 3
    assert log.where(prefix="c/storeprobe-").count("put") >= 3


def test_a_toml_target_may_name_an_rclone_remote(
    moto: LoggingS3, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = isolated.parent / "rclone.conf"
    _s3_remote(config, "loop", moto.endpoint)
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    (isolated / "storeprobe.toml").write_text(
        '[targets.nightly]\nurl = "loop:bench/n"\nclient = "s3fs"\nlabel = "ci"\n'
    )
    named = resolve("nightly", TargetsFile.load(), RcloneConfig.load)
    assert named is not None
    assert (named.url, named.client, named.label) == ("s3://bench/n", "s3fs", "ci")
    assert main(["run", "nightly", *RUN]) == 0
    assert moto.log.snapshot().where(prefix="n/storeprobe-").count("put") >= 3


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[targets.a]\nuri = "s3://b/x"\n', "unknown key 'uri' in [targets.a] in "),
        ('[target.a]\nurl = "s3://b/x"\n', "unknown key 'target' in "),
        ('[targets.a]\nclient = "s3fs"\n', "[targets.a] in "),
        ('[targets.a]\nurl = "s3://b/x"\nclient = "boto"\n', "client 'boto' of [targets.a]"),
        ('[targets.a]\nurl = "s3://b/x"\noptions = "key=1"\n', "options of [targets.a]"),
        ('[targets.a]\nurl = "s3://b/x"\nlabel = 3\n', "label of [targets.a]"),
        ("[targets.a\n", "is not valid TOML"),
    ],
)
def test_a_bad_toml_file_is_refused_naming_key_and_file(
    text: str, says: str, isolated: Path
) -> None:
    (isolated / "storeprobe.toml").write_text(text)
    with pytest.raises(ConfigurationError) as caught:
        TargetsFile.load()
    assert says in str(caught.value)
    assert "storeprobe.toml" in str(caught.value)


def test_named_target_repr_shows_no_secret() -> None:
    target = NamedTarget(
        name="n", url="sftp://user:pw-SENTINEL@host/x", options={"password": "SENTINEL-pw"}
    )
    assert "SENTINEL" not in repr(target)
    assert "password" in repr(target)


# --- -o scoped to one target ------------------------------------------------------------------
def test_options_scoped_to_one_url(
    moto: LoggingS3, counting_proxy: CountingProxy, isolated: Path
) -> None:
    rclone_endpoint = json.dumps(
        {"endpoint_url": f"http://127.0.0.1:{counting_proxy.port}", "region_name": "us-east-1"}
    )
    moto_endpoint = json.dumps({"endpoint_url": moto.endpoint, "region_name": "us-east-1"})
    out = isolated / "r.json"
    code = main(
        [
            *("run", "s3://bench/first", "s3://bench/second", *RUN, "--json", str(out)),
            *("-o", f"key={S3_KEY}", "-o", f"secret={S3_SECRET}"),  # both targets
            *("-o", f"1:client_kwargs={rclone_endpoint}"),  # the first only
            *("-o", f"2:client_kwargs={moto_endpoint}"),  # the second only
        ]
    )
    assert code == 0
    assert counting_proxy.requests > 0  # the first target went to rclone's server only
    log = moto.log.snapshot()
    assert log.where(prefix="second/storeprobe-").count("put") >= 3
    assert log.where(prefix="first/", kind="put").count("put") == 0
    assert log.where(prefix="first/", kind="get").count("get") == 0
    assert {r.url for r in ResultSet.load(out)} == {"s3://bench/first", "s3://bench/second"}


def test_a_scoped_option_for_a_target_not_given_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "memory://a", *RUN, "-o", "2:key=v"]) == 2
    assert "names target 2, but 1 target was given" in capsys.readouterr().err
