"""Fixtures: real servers on loopback, started and stopped by the suite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs

from tests import quiet
from tests.http_proxy import CountingProxy
from tests.servers import (
    S3_KEY,
    S3_SECRET,
    Server,
    azure_connection_string,
    azurite,
    gcs_emulator,
    moto_s3,
    rclone_s3,
    sshd,
)

# pytester: the pytest plugin's tests run pytest in a subprocess (tests/test_pytest_plugin.py)
pytest_plugins = ["pytester"]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """xdist: each worker is given the run's lock folder (tests/quiet.py)."""
    quiet.hand_to(node, node.config)  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    quiet.close_run(config)


@pytest.fixture(autouse=True)
def _share_the_machine(request: pytest.FixtureRequest) -> Iterator[None]:
    """A ``quiet`` test runs with no other test running (tests/quiet.py)."""
    with quiet.share(request):
        yield


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real S3 server (``rclone serve s3``) with a bucket ``bench``."""
    with rclone_s3(tmp_path_factory.mktemp("s3root")) as server:
        yield server


def s3_options(endpoint: str, **extra: Any) -> dict[str, Any]:
    return {
        "key": S3_KEY,
        "secret": S3_SECRET,
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        **extra,
    }


@pytest.fixture
def s3_storage_options(s3_server: Server) -> dict[str, Any]:
    return s3_options(s3_server.endpoint)


@pytest.fixture
def counting_proxy(s3_server: Server) -> Iterator[CountingProxy]:
    """A request-counting HTTP proxy in front of the S3 server."""
    proxy = CountingProxy(s3_server.port).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def s3_bucket_dir(s3_server: Server) -> Path:
    assert s3_server.root is not None
    return s3_server.root / "bench"


# --- the other storages (issue: every storage the seeds compared) -------------------
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # else gcsfs hangs on writes
# botocore's credential chain must never ask an instance-metadata service: loopback only
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Server]:
    with moto_s3() as server:
        fs = s3fs.S3FileSystem(
            key=S3_KEY,
            secret=S3_SECRET,
            client_kwargs={"endpoint_url": server.endpoint},
            skip_instance_cache=True,
        )
        fs.mkdir("bench")  # no region_name here, or moto refuses the location constraint
        yield server


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[Server]:
    with gcs_emulator() as server:
        yield server


@pytest.fixture(scope="session")
def azure_server() -> Iterator[Server]:
    with azurite() as server:
        import adlfs

        fs = adlfs.AzureBlobFileSystem(
            connection_string=azure_connection_string(server.port), skip_instance_cache=True
        )
        fs.mkdir("bench")
        yield server


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def obstore_fs(endpoint: str) -> Any:
    from obstore.fsspec import FsspecStore

    store_class: Any = FsspecStore  # its overloads do not know fsspec's instance-cache switch
    return store_class(
        "s3",
        config={
            "access_key_id": S3_KEY,
            "secret_access_key": S3_SECRET,
            "endpoint": endpoint,
            "region": "us-east-1",
        },
        client_options={"allow_http": True},
        skip_instance_cache=True,
    )


def gcs_options(port: int) -> dict[str, Any]:
    return {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "test"}


def ssh_options(server: Server) -> dict[str, Any]:
    assert server.root is not None
    return {
        "host": "127.0.0.1",
        "port": server.port,
        "username": "root",
        "client_keys": [str(server.root.parent / "ssh" / "client")],
        "known_hosts": None,
    }


@pytest.fixture
def no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS configuration from this machine leaks into a test (files, region, keys)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
