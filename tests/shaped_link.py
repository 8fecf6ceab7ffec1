"""A loopback link of known speed: a network namespace whose ``lo`` has a tbf qdisc.

Used by the accuracy tests and ``benchmarks/accuracy.py``. Everything runs inside the
namespace (``ip netns exec``): the storage server, the raw-TCP reference transfer and
the probe itself. The namespace is deleted on exit, also after failures.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ShapedLink", "shaped_link"]

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


class ShapedLink:
    """A namespace name and the rate its loopback is shaped to, in Mbit/s."""

    def __init__(self, name: str, mbit: float) -> None:
        self.name = name
        self.mbit = mbit

    def exec(
        self, argv: list[str], *, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def popen(self, argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["ip", "netns", "exec", self.name, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_tcp(self, port: int, deadline_s: float = 30.0) -> None:
        """Wait until ``port`` accepts inside the namespace."""
        script = textwrap.dedent(
            f"""
            import socket, time
            deadline = time.monotonic() + {deadline_s}
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                raise SystemExit("port {port} never accepted")
            """
        )
        done = self.exec([sys.executable, "-c", script], timeout=deadline_s + 10)
        if done.returncode != 0:
            raise RuntimeError(done.stderr or done.stdout)

    @contextlib.contextmanager
    def rclone_s3(self, root: Path, port: int = 9000) -> Iterator[str]:
        """``rclone serve s3`` inside the namespace; yields its endpoint (namespace-local)."""
        import shutil

        (root / "bench").mkdir(parents=True, exist_ok=True)
        from tests.servers import S3_KEY, S3_SECRET

        binary = shutil.which("rclone") or str(Path(sys.executable).parent / "rclone")
        process = self.popen(
            [
                binary,
                "serve",
                "s3",
                "--auth-key",
                f"{S3_KEY},{S3_SECRET}",
                "--addr",
                f"127.0.0.1:{port}",
                str(root),
            ]
        )
        try:
            self.wait_tcp(port)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    def raw_tcp_rate(self, nbytes: int) -> float:
        """Payload bytes per second of one raw TCP transfer over the shaped loopback."""
        script = textwrap.dedent(
            f"""
            import socket, threading, time
            n = {nbytes}
            server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
            got = []
            def receive():
                conn, _ = server.accept()
                total = 0
                while total < n:
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
                got.append((total, time.perf_counter()))
                conn.close()
            thread = threading.Thread(target=receive); thread.start()
            client = socket.create_connection(server.getsockname())
            payload = bytes(1 << 20)
            start = time.perf_counter()
            sent = 0
            while sent < n:
                sent += client.send(payload[: min(len(payload), n - sent)])
            client.shutdown(socket.SHUT_WR)
            thread.join()
            total, end = got[0]
            print(total / (end - start))
            """
        )
        done = self.exec([sys.executable, "-c", script], timeout=600)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        return float(done.stdout.strip())

    def probe(
        self, endpoint: str, size: int, operation: str, repeats: int = 1
    ) -> dict[str, object]:
        """Run storeprobe inside the namespace against ``endpoint``; the Result as a dict."""
        script = textwrap.dedent(
            f"""
            import json, sys
            sys.path.insert(0, {str(ROOT)!r})
            from storeprobe import Probe, Workload
            from tests.conftest import s3_options
            probe = Probe.from_url("s3://bench/accuracy", s3_options({endpoint!r}),
                                   repeats={repeats}, timeout=600)
            result = probe.measure({operation!r}, Workload(count=1, size={size}))
            print(json.dumps(result.to_dict()))
            """
        )
        done = self.exec([sys.executable, "-c", script], timeout=1200)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@contextlib.contextmanager
def shaped_link(mbit: float) -> Iterator[ShapedLink]:
    """A fresh namespace whose loopback carries at most ``mbit`` Mbit/s (tbf)."""
    name = f"storeprobe-{os.getpid()}-{int(mbit)}"
    _run("ip", "netns", "add", name)
    try:
        _run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up", "mtu", "1500")
        _run(
            "ip",
            "netns",
            "exec",
            name,
            "tc",
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "tbf",
            "rate",
            f"{mbit}mbit",
            "burst",
            "32kbit",
            "latency",
            "400ms",
        )
        yield ShapedLink(name, mbit)
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)
