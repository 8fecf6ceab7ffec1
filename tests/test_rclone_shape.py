"""The how-to "Matching the rclone blog comparison's figures" (docs/howto/rclone-comparison.md)
claims its storeprobe commands send what ``rclone copy`` sends with rclone's defaults.
Both run here against one logging S3 server (moto behind tests/s3_log.py's middleware),
which counts each request's kind and body bytes: the writes must match.

rclone's upload cutoff (200 MiB by default) is lowered to 12 MiB so that a 13 MiB file
takes the multipart path in seconds; every other setting is rclone's default (5 MiB
parts, 4 parts of a file at once, 4 files at once).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeprobe.cli import main
from storeprobe.units import MiB
from tests.s3_log import LoggingS3, Requests, logging_s3
from tests.servers import S3_KEY, S3_SECRET

pytestmark = pytest.mark.skipif(shutil.which("rclone") is None, reason="rclone not installed")


@pytest.fixture(scope="module")
def s3() -> Iterator[LoggingS3]:
    with logging_s3() as server:
        server.create_bucket("bench")
        yield server


def _rclone_copy(s3: LoggingS3, source: Path, destination: str, tmp_path: Path) -> None:
    remote = "RCLONE_CONFIG_P_"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "RCLONE_CONFIG": "/dev/null",
        remote + "TYPE": "s3",
        remote + "PROVIDER": "Other",
        remote + "ENDPOINT": s3.endpoint,
        remote + "REGION": "us-east-1",
        remote + "ACCESS_KEY_ID": S3_KEY,
        remote + "SECRET_ACCESS_KEY": S3_SECRET,
    }
    argv = ["rclone", "copy", str(source), f"p:bench/{destination}", "--s3-no-check-bucket"]
    argv += ["--s3-upload-cutoff", "12Mi"]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=120)


def _storeprobe(s3: LoggingS3, url: str, *extra: str) -> None:
    client_kwargs = f'{{"endpoint_url": "{s3.endpoint}", "region_name": "us-east-1"}}'
    argv = ["run", url, "-o", f"key={S3_KEY}", "-o", f"secret={S3_SECRET}"]
    argv += ["-o", f"client_kwargs={client_kwargs}", "--repeats", "1", "--no-progress"]
    assert main([*argv, *extra]) == 0


def _writes(requests: Requests) -> tuple[list[int], int]:
    """The part sizes sent (sorted) and the number of single-request PUTs of payload
    (not counting storeprobe's untimed checks before the run: the empty PUT that checks
    conditional writes, the small object a split download's ranged read is checked on)."""
    parts = sorted(r.payload_in for r in requests.where(kind="part"))
    checks = ("conditional-write-check", "range-read-check")
    puts = [r for r in requests.where(kind="put") if not r.key.endswith(checks)]
    return parts, len(puts)


def test_one_large_file_goes_in_the_same_parts(s3: LoggingS3, tmp_path: Path) -> None:
    source = tmp_path / "one"
    source.mkdir()
    (source / "big.bin").write_bytes(os.urandom(13 * MiB))
    before = s3.log.snapshot()
    _rclone_copy(s3, source, "rclone-one", tmp_path)
    rclone = _writes(s3.log.snapshot().after(before).where(prefix="rclone-one"))
    assert rclone == ([3 * MiB, 5 * MiB, 5 * MiB], 0)  # rclone's own 5 MiB parts

    before = s3.log.snapshot()
    _storeprobe(
        s3, "s3://bench/sp-one", "--workload", "1x13MiB", "--streams", "4", "--part-size", "5MiB"
    )
    log = s3.log.snapshot().after(before).where(prefix="sp-one")
    parts, puts = _writes(log)
    # the timed upload and the setup upload of the download each send rclone's parts
    assert parts == sorted(rclone[0] * 2)
    assert puts == 0


def test_many_files_go_one_request_each(s3: LoggingS3, tmp_path: Path) -> None:
    source = tmp_path / "many"
    source.mkdir()
    for index in range(8):
        (source / f"f{index}.bin").write_bytes(os.urandom(MiB))
    before = s3.log.snapshot()
    _rclone_copy(s3, source, "rclone-many", tmp_path)
    rclone = _writes(s3.log.snapshot().after(before).where(prefix="rclone-many"))
    assert rclone == ([], 8)

    before = s3.log.snapshot()
    _storeprobe(s3, "s3://bench/sp-many", "--workload", "8x1MiB", "--streams", "4")
    log = s3.log.snapshot().after(before).where(prefix="sp-many")
    puts = [r for r in log.where(kind="put") if r.payload_in == MiB]
    assert len(puts) == 2 * 8  # the timed upload, then the download's setup upload
    assert _writes(log)[0] == []
