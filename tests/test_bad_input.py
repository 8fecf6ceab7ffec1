"""Bad input through the API and the command line: a clear typed error, nothing left behind.

``CASES`` is the table published in docs/bad-input.md (a test checks they agree).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from storeprobe import (
    ConfigurationError,
    Image,
    MissingDependencyError,
    Probe,
    ResultFormatError,
    ResultSet,
    Sizes,
    StoreProbeError,
    TargetNotFoundError,
    TargetPermissionError,
    TargetUnreachableError,
    UnitError,
    Workload,
)
from storeprobe.backends.s3_trust import CA_VARIABLES
from storeprobe.cli import main
from storeprobe.cli_output import check_output
from storeprobe.distributed import cluster
from storeprobe.rclone_config import RcloneConfig
from storeprobe.targets_file import TargetsFile
from tests.conftest import s3_options
from tests.helpers import tree
from tests.servers import S3_KEY, S3_SECRET, Server, free_port, rclone_config_create, rclone_s3
from tests.tls import make_certificates

DOCS = Path(__file__).parent.parent / "docs" / "bad-input.md"


@dataclass
class Env:
    s3: str  # endpoint of the writable S3 server
    readonly: str  # endpoint of a read-only S3 server
    tmp: Path
    readonly_dir: Path  # immutable (chattr +i): even root cannot create files in it
    tls: str  # endpoint of an HTTPS S3 server whose certificate a CA of its own signed


@dataclass
class Case:
    name: str
    api: Callable[[Env], Any]
    error: type[Exception]
    fragment: str
    cli: Callable[[Env], list[str]] | None = None
    exit_code: int = 2


def _s3(env: Env, endpoint: str, url: str = "s3://bench/bad", **kw: Any) -> Probe:
    return Probe.from_url(url, s3_options(endpoint), repeats=1, **kw)


def _cli_s3(
    endpoint: str, url: str = "s3://bench/bad", secret: str = S3_SECRET, **client_kwargs: Any
) -> list[str]:
    client = json.dumps({"endpoint_url": endpoint, "region_name": "us-east-1", **client_kwargs})
    return [
        "run",
        url,
        "--workload",
        "4x1KiB",
        "--repeats",
        "1",
        "-o",
        f"key={S3_KEY}",
        "-o",
        f"secret={secret}",
        "-o",
        f"client_kwargs={client}",
    ]


def _verify(endpoint: str, verify: Any) -> dict[str, Any]:
    options = s3_options(endpoint)
    return {**options, "client_kwargs": {**options["client_kwargs"], "verify": verify}}


def _no_gcsfs(env: Env) -> Any:
    return Probe.from_url("gs://bucket/x")


def _results(env: Env, text: str) -> Path:
    path = env.tmp / "results.json"
    path.write_text(text)
    return path


TINY = Workload(count=4, size="1KiB")

CASES = [
    Case(
        "unknown protocol",
        lambda e: Probe.from_url("gopher://host/x"),
        ConfigurationError,
        "unknown protocol",
        lambda e: ["run", "gopher://host/x"],
    ),
    Case(
        "malformed URL (one slash)",
        lambda e: Probe.from_url("s3:/bucket/x"),
        ConfigurationError,
        "malformed URL",
        lambda e: ["run", "s3:/bucket/x"],
    ),
    Case("empty URL", lambda e: Probe.from_url(""), ConfigurationError, "non-empty"),
    Case(
        "storage_options not a dict",
        lambda e: Probe.from_url("memory://x", "key=1"),  # type: ignore[arg-type]
        ConfigurationError,
        "must be a dict",
    ),
    Case(
        "path with a scheme given with a filesystem",
        lambda e: Probe(Probe.from_url("memory://x").fs, "s3://bucket"),
        ConfigurationError,
        "from_url",
    ),
    Case(
        "missing extra (gcsfs not installed)",
        _no_gcsfs,
        MissingDependencyError,
        "pip install 'storeprobe[gcs]'",
    ),
    Case(
        "missing bucket",
        lambda e: _s3(e, e.s3, "s3://no-such-bucket/x").upload(TINY),
        TargetNotFoundError,
        "no-such-bucket",
        lambda e: _cli_s3(e.s3, "s3://no-such-bucket/x"),
        1,
    ),
    Case(
        "missing local directory",
        lambda e: Probe.from_url(str(e.tmp / "absent")).upload(TINY),
        TargetNotFoundError,
        "does not exist",
        lambda e: ["run", str(e.tmp / "absent")],
        1,
    ),
    Case(
        "permission denied (wrong secret)",
        lambda e: Probe.from_url(
            "s3://bench/x", {**s3_options(e.s3), "secret": "wrong-0123456789"}
        ).upload(TINY),
        TargetPermissionError,
        "credentials",
        lambda e: _cli_s3(e.s3, secret="wrong-0123456789"),
        1,
    ),
    Case(
        "read-only directory",
        lambda e: Probe.from_url(str(e.readonly_dir)).upload(TINY),
        TargetPermissionError,
        "Operation not permitted",
        lambda e: ["run", str(e.readonly_dir)],
        1,
    ),
    Case(
        "S3 server that never answers writes (rclone --read-only, s3fs)",
        lambda e: _raise_errors(_s3(e, e.readonly, timeout=2, client="s3fs").upload(TINY)),
        StoreProbeError,
        "no answer within 2 s",
        lambda e: [*_cli_s3(e.readonly), "--client", "s3fs", "--timeout", "2"],
        1,
    ),
    Case(
        "S3 server that refuses writes (rclone --read-only, obstore)",
        lambda e: _raise_errors(_s3(e, e.readonly, timeout=2).upload(TINY)),
        StoreProbeError,
        "500 Internal Server Error",
        lambda e: [*_cli_s3(e.readonly), "--timeout", "2"],
        1,
    ),
    Case(
        "unknown S3 client",
        lambda e: _s3(e, e.s3, client="boto"),
        ConfigurationError,
        "client must be one of auto, obstore, s3fs",
        lambda e: [*_cli_s3(e.s3), "--client", "boto"],
    ),
    Case(
        "obstore asked for with options it cannot take",
        lambda e: Probe.from_url(
            "s3://bench/bad",
            {**s3_options(e.s3), "config_kwargs": {"connect_timeout": 5}},
            client="obstore",
        ),
        ConfigurationError,
        "storage option 'config_kwargs' has no obstore equivalent",
        lambda e: [
            *_cli_s3(e.s3),
            "-o",
            'config_kwargs={"connect_timeout": 5}',
            "--client",
            "obstore",
        ],
    ),
    Case(
        "AWS profile that does not exist",
        lambda e: Probe.from_url(
            "s3://bench/bad",
            {"profile": "storeprobe-no-such-profile", "client_kwargs": {"endpoint_url": e.s3}},
        ),
        ConfigurationError,
        "AWS profile 'storeprobe-no-such-profile' (argument profile) is in neither",
        lambda e: [*_cli_s3(e.s3), "-o", "profile=storeprobe-no-such-profile"],
    ),
    Case(
        "CA bundle that does not exist (client_kwargs verify)",
        lambda e: Probe.from_url("s3://bench/bad", _verify(e.tls, str(e.tmp / "no-ca.pem"))),
        ConfigurationError,
        "no-ca.pem' (argument client_kwargs.verify) cannot be read",
        lambda e: _cli_s3(e.tls, verify=str(e.tmp / "no-ca.pem")),
    ),
    Case(
        "CA bundle that holds no certificate (client_kwargs verify)",
        lambda e: Probe.from_url("s3://bench/bad", _verify(e.tls, str(_not_a_ca(e)))),
        ConfigurationError,
        "not-a-ca.pem' (argument client_kwargs.verify) holds no PEM certificate",
        lambda e: _cli_s3(e.tls, verify=str(_not_a_ca(e))),
    ),
    Case(
        "client_kwargs verify that is neither a path nor true or false",
        lambda e: Probe.from_url("s3://bench/bad", _verify(e.tls, 5)),
        ConfigurationError,
        "client_kwargs['verify'] must be a path to a PEM CA bundle, True or False, not int",
        lambda e: _cli_s3(e.tls, verify=5),
    ),
    Case(
        "CA bundle variable naming no file (AWS_CA_BUNDLE)",
        lambda e: _with_variable("AWS_CA_BUNDLE", str(e.tmp / "no-ca.pem"), lambda: _s3(e, e.tls)),
        ConfigurationError,
        "no-ca.pem' (env AWS_CA_BUNDLE) cannot be read",
    ),
    Case(
        "HTTPS server whose certificate the CA given did not sign (s3fs)",
        lambda e: Probe.from_url(
            "s3://bench/bad", _verify(e.tls, _PUBLIC_ROOTS), client="s3fs", repeats=1
        ).upload(TINY),
        TargetUnreachableError,
        "TLS certificate was not trusted: give the CA that signed the server's certificate "
        "with storage option client_kwargs={'verify': 'ca.pem'}",
        lambda e: [*_cli_s3(e.tls, verify=_PUBLIC_ROOTS), "--client", "s3fs"],
        exit_code=1,
    ),
    Case(
        "HTTPS server whose certificate no CA given signed",
        lambda e: _s3(e, e.tls).upload(TINY),
        TargetUnreachableError,
        "TLS certificate was not trusted: give the CA that signed the server's certificate "
        "with storage option client_kwargs={'verify': 'ca.pem'}",
        lambda e: _cli_s3(e.tls),
        exit_code=1,
    ),
    Case(
        "S3 key without a secret",
        lambda e: Probe.from_url(
            "s3://bench/bad", {"key": S3_KEY, "client_kwargs": {"endpoint_url": e.s3}}
        ),
        ConfigurationError,
        "storage option key is given without secret",
        lambda e: [
            "run",
            "s3://bench/bad",
            "-o",
            f"key={S3_KEY}",
            "-o",
            f"client_kwargs={json.dumps({'endpoint_url': e.s3})}",
        ],
    ),
    Case(
        "zero count",
        lambda e: Workload(count=0, size=1),
        ConfigurationError,
        "count",
        lambda e: ["run", "--workload", "0x1KiB"],
    ),
    Case(
        "negative count",
        lambda e: Workload(count=-3, size=1),
        ConfigurationError,
        "count",
        lambda e: ["run", "--workload", "-3x1KiB"],
    ),
    Case(
        "huge count",
        lambda e: Workload(count=10**9, size=1),
        ConfigurationError,
        "10,000,000",
        lambda e: ["run", "--workload", "1000000000x1KiB"],
    ),
    Case(
        "zero size",
        lambda e: Workload(count=1, size=0),
        ConfigurationError,
        "size",
        lambda e: ["run", "--workload", "1x0B"],
    ),
    Case(
        "huge size",
        lambda e: Workload(count=1, size="6TiB"),
        ConfigurationError,
        "5 TiB",
        lambda e: ["run", "--workload", "1x6TiB"],
    ),
    Case(
        "size '16 KB' (space, ambiguous unit)",
        lambda e: Workload(count=1, size="16 KB"),
        UnitError,
        "cannot parse",
        lambda e: ["run", "--workload", "1x16 KB"],
    ),
    Case(
        "size '16KB' (ambiguous unit)",
        lambda e: Workload(count=1, size="16KB"),
        UnitError,
        "ambiguous",
        lambda e: ["run", "--workload", "1x16KB"],
    ),
    Case(
        "size '1.5MiB' (fraction)",
        lambda e: Workload(count=1, size="1.5MiB"),
        UnitError,
        "cannot parse",
        lambda e: ["run", "--workload", "1x1.5MiB"],
    ),
    Case(
        "size 'MiB' (no number)",
        lambda e: Workload(count=1, size="MiB"),
        UnitError,
        "cannot parse",
        lambda e: ["run", "--workload", "1xMiB"],
    ),
    Case(
        "workload larger than the memory available",
        lambda e: Probe.from_url(str(e.tmp)).upload(Workload(count=1024, size="4GiB")),
        ConfigurationError,
        "of memory",
        lambda e: ["run", str(e.tmp), "--workload", "1024x4GiB"],
    ),
    Case(
        "one object larger than the free disk space for staging",
        lambda e: Probe.from_url(str(e.tmp)).upload(Workload(count=1, size="4TiB")),
        ConfigurationError,
        "free space",
        lambda e: ["run", str(e.tmp), "--workload", "1x4TiB"],
    ),
    Case(
        "backup dataset larger than the free space for its restores",
        lambda e: Probe.from_url(str(e.tmp)).backup_restore(
            Image.create("4TiB", block_size="64MiB"), versions=1
        ),
        ConfigurationError,
        "free space",
    ),
    Case(
        "streams 0",
        lambda e: Probe.from_url("memory://x", streams=0),
        ConfigurationError,
        "streams",
        lambda e: ["run", "--streams", "0"],
    ),
    Case(
        "streams 10 000",
        lambda e: Probe.from_url("memory://x", streams=10_000),
        ConfigurationError,
        "streams",
        lambda e: ["run", "--streams", "10000"],
    ),
    Case(
        "prep_streams 0",
        lambda e: Probe.from_url("memory://x", prep_streams=0),
        ConfigurationError,
        "prep",
        lambda e: ["run", "--prep-streams", "0"],
    ),
    Case(
        "prep_streams 10 000",
        lambda e: Probe.from_url("memory://x", prep_streams=10_000),
        ConfigurationError,
        "prep",
        lambda e: ["run", "--prep-streams", "10000"],
    ),
    Case(
        "repeats 0",
        lambda e: Probe.from_url("memory://x", repeats=0),
        ConfigurationError,
        "repeats",
        lambda e: ["run", "--repeats", "0"],
    ),
    Case(
        "warmup -1",
        lambda e: Probe.from_url("memory://x", warmup=-1),
        ConfigurationError,
        "warmup",
        lambda e: ["run", "--warmup", "-1"],
    ),
    Case(
        "timeout 0",
        lambda e: Probe.from_url("memory://x", timeout=0),
        ConfigurationError,
        "timeout",
        lambda e: ["run", "--timeout", "0"],
    ),
    Case(
        "stage_above 0",
        lambda e: Probe.from_url("memory://x", stage_above=0),
        ConfigurationError,
        "stage_above",
        lambda e: ["run", "--stage-above", "0"],
    ),
    Case(
        "part size below the S3 minimum",
        lambda e: _s3(e, e.s3, part_size="1MiB"),
        ConfigurationError,
        "minimum",
        lambda e: [*_cli_s3(e.s3), "--part-size", "1MiB"],
    ),
    Case(
        "part size above the S3 maximum (5 GiB)",
        lambda e: Probe.from_url("memory://x", part_size="6GiB"),
        ConfigurationError,
        "the largest part S3 accepts",
        lambda e: ["run", "--part-size", "6GiB"],
    ),
    Case(
        "part size that is not a size",
        lambda e: Probe.from_url("memory://x", part_size="five"),
        UnitError,
        "cannot parse",
        lambda e: ["run", "--part-size", "five"],
    ),
    Case(
        "lognormal sizes without a sigma",
        lambda e: Workload.parse("1000xlognormal:16KiB"),
        ConfigurationError,
        "'lognormal:16KiB,1.5'",
        lambda e: ["run", "--workload", "1000xlognormal:16KiB"],
    ),
    Case(
        "lognormal sigma that is not a number",
        lambda e: Workload.parse("1000xlognormal:16KiB,wide"),
        ConfigurationError,
        "is not a number",
        lambda e: ["run", "--workload", "1000xlognormal:16KiB,wide"],
    ),
    Case(
        "lognormal sigma above 10",
        lambda e: Workload(count=10, sizes=Sizes.lognormal("16KiB", 11)),
        ConfigurationError,
        "between 0 and 10",
        lambda e: ["run", "--workload", "10xlognormal:16KiB,11"],
    ),
    Case(
        "lognormal sizes that draw objects over 5 TiB",
        lambda e: Workload(count=1000, sizes=Sizes.lognormal("1GiB", 10)),
        ConfigurationError,
        "give a maximum",
        lambda e: ["run", "--workload", "1000xlognormal:1GiB,10"],
    ),
    Case(
        "uniform sizes without LOW-HIGH",
        lambda e: Workload.parse("100xuniform:4KiB"),
        ConfigurationError,
        "'uniform:4KiB-1MiB'",
        lambda e: ["run", "--workload", "100xuniform:4KiB"],
    ),
    Case(
        "uniform sizes from 0 bytes (empty objects)",
        lambda e: Workload(count=100, sizes=Sizes.uniform(0, "4KiB")),
        ConfigurationError,
        "empty objects",
        lambda e: ["run", "--workload", "100xuniform:0-4KiB"],
    ),
    Case(
        "unknown size distribution",
        lambda e: Workload.parse("100xgauss:16KiB,2"),
        ConfigurationError,
        "cannot parse sizes 'gauss:16KiB,2'",
        lambda e: ["run", "--workload", "100xgauss:16KiB,2"],
    ),
    Case(
        "workload given both size and sizes",
        lambda e: Workload(count=10, size="1KiB", sizes=Sizes.lognormal("16KiB", 1.5)),
        ConfigurationError,
        "not both",
    ),
    Case(
        "label with control characters",
        lambda e: Probe.from_url("memory://x", label="lab\x1b[31m"),
        ConfigurationError,
        "control characters",
        lambda e: ["run", "--label", "lab\x1b[31m"],
    ),
    Case(
        "workload spec that is not COUNTxSIZE",
        lambda e: Workload.parse("ten files"),
        ConfigurationError,
        "COUNTxSIZE",
        lambda e: ["run", "--workload", "ten files"],
    ),
    Case(
        "storage option without '='",
        lambda e: main(["run", "-o", "novalue"]) and _raise_cli(),
        ConfigurationError,
        "KEY=VALUE",
        lambda e: ["run", "-o", "novalue"],
    ),
    Case(
        "results file of another schema version",
        lambda e: ResultSet.load(
            _results(e, '{"schema": "storeprobe.results", "version": 99, "results": []}')
        ),
        ResultFormatError,
        "version 99",
        lambda e: [
            "report",
            str(_results(e, '{"schema": "storeprobe.results", "version": 99, "results": []}')),
        ],
    ),
    Case(
        "truncated results file",
        lambda e: ResultSet.load(_results(e, '{"schema": "storeprobe.results", "vers')),
        ResultFormatError,
        "bad JSON",
        lambda e: ["report", str(_results(e, '{"schema": "storeprobe.results", "vers'))],
    ),
    Case(
        "results file that does not exist",
        lambda e: ResultSet.load(e.tmp / "nope.json"),
        FileNotFoundError,
        "nope.json",
        lambda e: ["report", str(e.tmp / "nope.json")],
    ),
    Case(
        "results file that is not text (an image)",
        lambda e: ResultSet.load(_image(e)),
        ResultFormatError,
        "is not text",
        lambda e: ["report", str(_image(e))],
    ),
    Case(
        "port that is not a number",
        lambda e: Probe.from_url("sftp://127.0.0.1:abc/x"),
        ConfigurationError,
        "bad port 'abc'",
        lambda e: ["run", "sftp://127.0.0.1:abc/x"],
    ),
    Case(
        "URL with '::' (an fsspec chain)",
        lambda e: Probe.from_url("memory://x::"),
        ConfigurationError,
        "contains '::'",
        lambda e: ["run", "memory://x::"],
    ),
    Case(
        "--json into a missing directory",
        lambda e: check_output(e.tmp / "missing" / "r.json", "--json", "results"),
        ConfigurationError,
        "does not exist: create it first",
        lambda e: [*_cli_memory(), "--json", str(e.tmp / "missing" / "r.json")],
    ),
    Case(
        "--json naming a file that is not a results file",
        lambda e: check_output(_notes(e), "--json", "results"),
        ConfigurationError,
        "already exists and the results cannot be added to it",
        lambda e: [*_cli_memory(), "--json", str(_notes(e))],
    ),
    Case(
        "--plot with a suffix no chart is saved as",
        lambda e: check_output(e.tmp / "chart.txt", "--plot", "image"),
        ConfigurationError,
        "a chart is saved as .png, .svg or .pdf",
        lambda e: ["sweep", "memory://bad", "--plot", str(e.tmp / "chart.txt")],
    ),
    Case(
        "rclone remote that is not in rclone's config",
        lambda e: RcloneConfig.load(_rclone_conf(e)).target("nosuch:bench/x"),
        ConfigurationError,
        "no rclone remote 'nosuch'",
        lambda e: ["run", "nosuch:bench/x", "--rclone-config", str(_rclone_conf(e))],
    ),
    Case(
        "rclone remote of a type storeprobe does not open (b2)",
        lambda e: RcloneConfig.load(_rclone_conf(e)).target("native:bench/x"),
        ConfigurationError,
        "type 'b2', which storeprobe does not open",
        lambda e: ["run", "native:bench/x", "--rclone-config", str(_rclone_conf(e))],
    ),
    Case(
        "rclone remote naming a provider without an endpoint (Cloudflare R2)",
        lambda e: RcloneConfig.load(_rclone_conf(e)).target("r2:bench/x"),
        ConfigurationError,
        "add endpoint = https://ACCOUNT_ID.r2.cloudflarestorage.com",
        lambda e: ["run", "r2:bench/x", "--rclone-config", str(_rclone_conf(e))],
    ),
    Case(
        "encrypted rclone config (a remote not in the environment)",
        lambda e: RcloneConfig.load(_encrypted_conf(e)).target("any:bench/x"),
        ConfigurationError,
        "is encrypted, and storeprobe cannot ask for its password",
        lambda e: ["run", "any:bench/x", "--rclone-config", str(_encrypted_conf(e))],
    ),
    Case(
        "storeprobe.toml target with an unknown key",
        lambda e: TargetsFile.load(_toml(e)),
        ConfigurationError,
        "unknown key 'uri' in [targets.lab]",
        lambda e: ["run", "lab", "--config", str(_toml(e))],
    ),
    Case(
        "--config file that does not exist",
        lambda e: TargetsFile.load(e.tmp / "absent.toml"),
        ConfigurationError,
        "absent.toml' does not exist",
        lambda e: ["run", "lab", "--config", str(e.tmp / "absent.toml")],
    ),
    Case(
        "-o N:KEY=VALUE for a target not given",
        lambda e: _cli_raises([*_cli_memory(), "-o", "2:key=v"]),
        ConfigurationError,
        "names target 2, but 1 target was given",
        lambda e: [*_cli_memory(), "-o", "2:key=v"],
    ),
    Case(
        "Dask scheduler at a closed port",
        lambda e: _connect_scheduler(f"tcp://127.0.0.1:{free_port()}"),
        TargetUnreachableError,
        "Connection refused",
        lambda e: [*_cli_memory(), "--scheduler", f"tcp://127.0.0.1:{free_port()}"],
        1,
    ),
]


#: files the cases write as their input (never the output of a probe)
_INPUT_FILES = frozenset(
    {
        "results.json",
        "chart.png",
        "notes.txt",
        "rclone.conf",
        "encrypted.conf",
        "targets.toml",
        "not-a-ca.pem",
    }
)


def _rclone_conf(env: Env) -> Path:
    """An rclone config written by ``rclone config create``: a b2 remote, an R2 remote
    without its endpoint."""
    path = env.tmp / "rclone.conf"
    path.unlink(missing_ok=True)
    for name, kind, *pairs in (
        ("native", "b2", "account=keyid", "key=appkey"),
        ("r2", "s3", "provider=Cloudflare", "region=auto"),
    ):
        rclone_config_create(path, name, kind, *pairs)
    return path


def _encrypted_conf(env: Env) -> Path:
    # rclone's header of an encrypted config (fs/config/crypt.go), then its ciphertext
    path = env.tmp / "encrypted.conf"
    path.write_text("# Encrypted rclone configuration File\n\nRCLONE_ENCRYPT_V0:\nc2VjcmV0\n")
    return path


def _toml(env: Env) -> Path:
    path = env.tmp / "targets.toml"
    path.write_text('[targets.lab]\nuri = "s3://bench/x"\n')
    return path


def _cli_raises(argv: list[str]) -> None:
    """Run the command line; raise what it printed as the error of a usage error (exit 2)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    if code == 2:
        raise ConfigurationError(err.getvalue())


def _cli_memory() -> list[str]:
    return ["run", "memory://bad", "--workload", "2x1KiB", "--repeats", "1", "--no-progress"]


#: a real CA bundle (the system's public roots), none of which signed the test server's
#: certificate
_PUBLIC_ROOTS = "/etc/ssl/certs/ca-certificates.crt"


def _not_a_ca(env: Env) -> Path:
    path = env.tmp / "not-a-ca.pem"
    path.write_text("not a certificate\n")
    return path


def _with_variable(name: str, value: str, run: Callable[[], Any]) -> Any:
    """``run()`` with the environment variable ``name`` set to ``value``, then restored."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        return run()
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


def _image(env: Env) -> Path:
    path = env.tmp / "chart.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    return path


def _notes(env: Env) -> Path:
    path = env.tmp / "notes.txt"
    path.write_text("my notes, not results\n")
    return path


def _connect_scheduler(address: str) -> None:
    with cluster(scheduler=address):
        pass


def _raise_errors(result: Any) -> None:
    if result.errors:
        raise StoreProbeError(" / ".join(str(error) for error in result.errors))


def _raise_cli() -> NoReturn:
    raise ConfigurationError("storage option must be KEY=VALUE")


@pytest.fixture(scope="module")
def readonly_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with rclone_s3(tmp_path_factory.mktemp("readonly"), extra=("--read-only",)) as server:
        yield server


@pytest.fixture
def readonly_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("immutable")
    subprocess.run(["chattr", "+i", str(path)], check=True)
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    certificates = make_certificates(tmp_path_factory.mktemp("ca"))
    extra = ("--cert", str(certificates.cert), "--key", str(certificates.key))
    with rclone_s3(tmp_path_factory.mktemp("tls"), extra=extra) as server:
        yield server


@pytest.fixture
def env(
    s3_server: Server,
    readonly_server: Server,
    tls_server: Server,
    tmp_path: Path,
    readonly_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Env:
    for name in CA_VARIABLES:  # this machine's, naming its system bundle
        monkeypatch.delenv(name, raising=False)
    return Env(
        s3=s3_server.endpoint,
        readonly=readonly_server.endpoint,
        tmp=tmp_path,
        readonly_dir=readonly_dir,
        tls=f"https://127.0.0.1:{tls_server.port}",
    )


def test_the_table_has_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_api(case: Case, env: Env, s3_bucket_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if case.api is _no_gcsfs:
        monkeypatch.setitem(sys.modules, "gcsfs", None)
        for protocol in ("gs", "gcs"):
            monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, protocol, raising=False)

    def state() -> tuple[dict[str, str], dict[str, str]]:
        local = {k: v for k, v in tree(env.tmp).items() if k not in _INPUT_FILES}
        return tree(s3_bucket_dir), local

    before = state()
    with pytest.raises(case.error, match=_pattern(case.fragment)):
        case.api(env)
    assert state() == before  # nothing left behind


@pytest.mark.parametrize("case", [c for c in CASES if c.cli], ids=[c.name for c in CASES if c.cli])
def test_cli(case: Case, env: Env, s3_bucket_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert case.cli is not None
    argv = case.cli(env)
    before = tree(s3_bucket_dir)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse rejects some forms itself
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == case.exit_code, err
    assert "error" in err
    assert "Traceback" not in err
    assert S3_SECRET not in err
    assert tree(s3_bucket_dir) == before


def _pattern(fragment: str) -> str:
    import re

    return re.escape(fragment)


def test_docs_publish_the_table() -> None:
    text = DOCS.read_text()
    for case in CASES:
        assert f"| {case.name} |" in text, case.name
