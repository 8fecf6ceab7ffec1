"""Fixtures: real servers on loopback, started and stopped by the suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http_proxy import CountingProxy
from tests.servers import S3_KEY, S3_SECRET, Server, rclone_s3


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
