"""The suite's S3 server keeps every object written while many requests create one folder.

``rclone serve s3`` alone loses some (see :mod:`tests.folder_gate`): 1 600 PUTs into 400
new folders from 8 threads failed 19, 74 and 79 times in three runs, and 1, 12 and 5
files stayed on disk after every key was deleted. Through the gate the suite puts in
front of it, none may fail and none may stay, also when the folders are made again after
the deletes emptied and removed them.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from tests.folder_gate import folder_of_write, is_delete
from tests.helpers import tree
from tests.servers import S3_KEY, S3_SECRET, Server


@pytest.mark.parametrize(
    ("method", "target", "folder"),
    [
        ("PUT", "/bench/a/b/r1-0000001", "/bench/a/b"),
        ("PUT", "/bench/a%20b/c", "/bench/a b"),
        ("PUT", "/bench/key", "/bench"),
        ("PUT", "/bench/a/b?partNumber=2&uploadId=x", None),  # a part: no folder made
        ("POST", "/bench/a/b?uploads", "/bench/a"),  # a multipart upload starts
        ("POST", "/bench/a/b?uploadId=x", None),  # completes in the folder made at start
        ("PUT", "/bench", None),  # a bucket
        ("PUT", "/bench/a/", None),  # a key naming a folder
        ("GET", "/bench/a/b", None),
        ("DELETE", "/bench/a/b", None),
    ],
)
def test_the_writes_that_make_folders(method: str, target: str, folder: str | None) -> None:
    assert folder_of_write(method, target) == folder


@pytest.mark.parametrize(
    ("method", "target", "deletes"),
    [
        ("DELETE", "/bench/a/b", True),
        ("DELETE", "/bench/a/b?uploadId=x", True),  # an aborted multipart upload
        ("POST", "/bench?delete", True),
        ("POST", "/bench?delete=", True),
        ("POST", "/bench/a/b?uploads", False),
        ("PUT", "/bench/a/b", False),
        ("GET", "/bench?list-type=2&delimiter=%2F", False),
    ],
)
def test_the_requests_that_delete(method: str, target: str, deletes: bool) -> None:
    assert is_delete(method, target) is deletes


def test_many_writers_into_new_folders_lose_nothing(s3_server: Server, s3_bucket_dir: Path) -> None:
    store = S3Store(
        "bench",
        endpoint=s3_server.endpoint,
        access_key_id=S3_KEY,
        secret_access_key=S3_SECRET,
        region="us-east-1",
        client_options={"allow_http": True},
        # no retries: a 500 from the server is a failure here, not hidden by a retry
        retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=1)},
    )
    before = tree(s3_bucket_dir)
    keys = [f"gate/f{folder}/run/r-{index}" for folder in range(400) for index in range(4)]
    failures: list[str] = []
    lock = threading.Lock()

    def put(key: str) -> None:
        try:
            obstore.put(store, key, b"x" * 16384)
        except Exception as error:  # each failure is collected and shown
            with lock:
                failures.append(f"{key}: {error}"[:200])

    for _ in range(2):  # the second round makes again the folders the deletes removed
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, keys))
        assert failures == []
        for key in keys:
            assert obstore.get(store, key).bytes().to_bytes() == b"x" * 16384
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: obstore.delete(store, key), keys))
        assert tree(s3_bucket_dir) == before
