"""storeprobe, a bare obstore loop and ``rclone copy`` behind real round trips, HTTP and HTTPS.

Two ``rclone serve s3`` servers on 127.0.0.1, one plain HTTP and one HTTPS with a
certificate signed by a CA made for the run (:mod:`tests.tls`, as ``tests/test_tls.py``
does), each reached directly (0 ms) or through a proxy that holds every byte for half the
round trip in each direction (``tests/delay_proxy.py``: 20 ms and 100 ms of round trip).
For each scheme, round trip and stream count (1 and 8), the small-object upload and
download (128 × 16 KiB; 32 × 16 KiB at 100 ms, where 128 at one stream would take 13 s a
window per client) are timed by three clients, in alternating order each round:

- storeprobe's default S3 path (``Probe.from_url``: obstore, create-only PUTs), one
  repeat per round; its figure is the Result's timed window;
- a bare obstore loop (:mod:`tests.bare_obstore`): the same requests, one after another
  or N at once on an asyncio semaphore, timed from the first request's start to the
  last one's end;
- ``rclone copy`` (a remote configured through ``RCLONE_CONFIG_X_*`` variables,
  ``--transfers N --checkers N``, ``--no-check-dest --s3-no-check-bucket --s3-no-head``:
  one request per object, as the others send; without ``--s3-no-head`` rclone HEADs every
  object it uploaded), timed as the process's wall time: start-up, its connections'
  TCP and TLS handshakes (the two other clients reuse warm ones) and, for a download,
  one listing of the prefix are in its figure.

Before its first timed run at a stream count, storeprobe and the bare loop each upload
2 × N objects untimed, so both measure on open connections; rclone's connections are new
in every run. Every client's objects of a download are uploaded and asked for once (HEAD) before its
timed run (rclone serve s3 hashes an object on its first access). The table gives
each client's throughput (KiB/s; the best of ``--rounds``) and its ratio to the bare
loop's; a run that fails or hangs (``rclone copy`` is stopped after 120 s) is left out of
its client's figure and counted in the table. Client, proxy and servers share this
machine's cores: the load average at the start and end is printed beside the table.

    python benchmarks/latency.py [--rtt-ms 0 20 100] [--streams 1 8] [--rounds 3]
        [--count 128] [--count-far 32] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe, Workload
from tests.bare_obstore import BareObstore
from tests.delay_proxy import DelayProxy
from tests.servers import S3_KEY, S3_SECRET, Server, rclone_s3
from tests.tls import Certificates, make_certificates

Operation = Literal["upload", "download"]
CLIENTS = ("storeprobe", "bare obstore", "rclone copy")
#: from this round trip on (ms), the workload has ``--count-far`` objects
FAR_MS = 100.0
#: an ``rclone copy`` run taking longer is stopped and counted as failed (one was seen
#: waiting in its S3 SDK's retry of a GET for minutes, over HTTPS at 100 ms)
RCLONE_TIMEOUT_S = 120.0


class ClientFailedError(RuntimeError):
    """A client's run did not complete (the round is left out of its figure)."""


def rclone_binary() -> str:
    return shutil.which("rclone") or str(Path(sys.executable).parent / "rclone")


class Endpoint:
    """One way to reach one server: its URL, the CA to trust (HTTPS) and the clients."""

    def __init__(self, url: str, ca: Path | None, work: Path) -> None:
        self.url = url
        self.ca = ca
        self.work = work
        self.bare = BareObstore(url, ca=ca)
        self.probes: dict[int, Probe] = {}
        self.warm: set[int] = set()

    def close(self) -> None:
        self.bare.close()

    def storage_options(self) -> dict[str, Any]:
        client: dict[str, Any] = {"endpoint_url": self.url, "region_name": "us-east-1"}
        if self.ca is not None:
            client["verify"] = str(self.ca)
        return {"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": client}

    def storeprobe(self, operation: Operation, workload: Workload, streams: int) -> float:
        probe = self.probes.get(streams)
        if probe is None:
            probe = Probe.from_url(
                "s3://bench/latency", self.storage_options(), streams=streams, repeats=1
            )
            self.probes[streams] = probe
        result = probe.measure(operation, workload)
        if not result.ok:
            raise SystemExit(f"storeprobe {operation} failed: {result.errors}")
        return result.samples[0].seconds

    def warm_up(self, streams: int) -> None:
        """Once per stream count, untimed: 2 × ``streams`` objects uploaded by storeprobe
        and by the bare loop, so both measure on open connections (rclone cannot: each
        run is a new process)."""
        if streams in self.warm:
            return
        workload = Workload(count=2 * streams, size="16KiB")
        self.storeprobe("upload", workload, streams)
        payloads = [workload.payload_bytes(i) for i in range(workload.count)]
        self.bare_obstore("upload", payloads, streams)
        self.warm.add(streams)

    def bare_obstore(self, operation: Operation, payloads: list[bytes], streams: int) -> float:
        return self.bare.window(operation, payloads, streams).seconds

    def rclone_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "RCLONE_CONFIG": "/dev/null",
            "RCLONE_CONFIG_X_TYPE": "s3",
            "RCLONE_CONFIG_X_PROVIDER": "Other",
            "RCLONE_CONFIG_X_ACCESS_KEY_ID": S3_KEY,
            "RCLONE_CONFIG_X_SECRET_ACCESS_KEY": S3_SECRET,
            "RCLONE_CONFIG_X_ENDPOINT": self.url,
            "RCLONE_CONFIG_X_REGION": "us-east-1",
        }

    def rclone(self, operation: Operation, payloads: list[bytes], streams: int) -> float:
        binary, env = rclone_binary(), self.rclone_env()
        flags = [
            "--no-check-dest",
            "--s3-no-check-bucket",
            "--s3-no-head",
            f"--transfers={streams}",
            f"--checkers={streams}",
        ]
        if self.ca is not None:
            flags.append(f"--ca-cert={self.ca}")
        prefix = f"rclone-{uuid.uuid4().hex}"
        local = self.work / prefix
        local.mkdir()
        try:
            if operation == "download":
                names = [f"{prefix}/{i:05d}" for i in range(len(payloads))]
                self.bare.put_and_head(names, payloads)
                argv = [binary, "copy", *flags, f"x:bench/{prefix}", str(local)]
            else:
                for i, body in enumerate(payloads):
                    (local / f"{i:05d}").write_bytes(body)
                argv = [binary, "copy", *flags, str(local), f"x:bench/{prefix}"]
            start = time.perf_counter()
            try:
                done = subprocess.run(
                    argv, env=env, capture_output=True, text=True, timeout=RCLONE_TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                raise ClientFailedError(f"no answer within {RCLONE_TIMEOUT_S:g} s") from None
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                raise ClientFailedError(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
            return seconds
        finally:
            trust = [f"--ca-cert={self.ca}"] if self.ca is not None else []
            subprocess.run(
                [binary, "purge", *trust, f"x:bench/{prefix}"],
                env=env,
                check=False,
                capture_output=True,
            )
            shutil.rmtree(local, ignore_errors=True)


@contextlib.contextmanager
def reached(server: Server, rtt_ms: float) -> Iterator[int]:
    """The port to reach ``server`` at: its own at 0 ms, else a delay proxy's."""
    if rtt_ms == 0:
        yield server.port
        return
    proxy = DelayProxy(server.port, delay_s=rtt_ms / 2000).start()
    try:
        yield proxy.port
    finally:
        proxy.stop()


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def run_case(
    endpoint: Endpoint, operation: Operation, workload: Workload, streams: int, rounds: int
) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each client's best seconds over ``rounds`` (orders alternate round by round), and
    the failures of the rounds left out."""
    payloads = [workload.payload_bytes(i) for i in range(workload.count)]
    endpoint.warm_up(streams)
    best: dict[str, float] = {}
    failures: dict[str, list[str]] = {}
    for number in range(rounds):
        order = CLIENTS if number % 2 == 0 else CLIENTS[::-1]
        for client in order:
            try:
                if client == "storeprobe":
                    seconds = endpoint.storeprobe(operation, workload, streams)
                elif client == "bare obstore":
                    seconds = endpoint.bare_obstore(operation, payloads, streams)
                else:
                    seconds = endpoint.rclone(operation, payloads, streams)
            except ClientFailedError as exc:
                failures.setdefault(client, []).append(str(exc))
                print(f"  {client} failed: {exc}", file=sys.stderr, flush=True)
                continue
            best[client] = min(seconds, best.get(client, seconds))
    return best, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, nargs="+", default=[0.0, 20.0, 100.0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=128, help="objects below 100 ms")
    parser.add_argument("--count-far", type=int, default=32, help="objects from 100 ms on")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    began = time.perf_counter()
    load_before = load()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        work = Path(folder)
        certificates: Certificates = make_certificates(work / "ca")
        tls = ("--cert", str(certificates.cert), "--key", str(certificates.key))
        with (
            rclone_s3(work / "http-root") as http_server,
            rclone_s3(work / "https-root", extra=tls) as https_server,
        ):
            for scheme, server in (("http", http_server), ("https", https_server)):
                ca = certificates.ca if scheme == "https" else None
                for rtt in args.rtt_ms:
                    count = args.count_far if rtt >= FAR_MS else args.count
                    workload = Workload(count=count, size="16KiB")
                    with reached(server, rtt) as port:
                        endpoint = Endpoint(f"{scheme}://127.0.0.1:{port}", ca, work)
                        try:
                            for streams in args.streams:
                                for operation in ("upload", "download"):
                                    best, failures = run_case(
                                        endpoint, operation, workload, streams, args.rounds
                                    )
                                    row = {
                                        "scheme": scheme,
                                        "rtt_ms": rtt,
                                        "streams": streams,
                                        "operation": operation,
                                        "count": count,
                                        "seconds": best,
                                        "kib_per_s": {
                                            c: workload.total_bytes / s / 1024
                                            for c, s in best.items()
                                        },
                                        "failures": failures,
                                    }
                                    rows.append(row)
                                    if args.json is not None:  # kept as the run goes
                                        args.json.write_text(json.dumps(rows, indent=2) + "\n")
                                    print(
                                        f"  {scheme} {rtt:g} ms {streams} st {operation}: "
                                        + ", ".join(
                                            f"{c} {v:.1f}" for c, v in row["kib_per_s"].items()
                                        )
                                        + f" KiB/s (load {load()})",
                                        file=sys.stderr,
                                        flush=True,
                                    )
                        finally:
                            endpoint.close()
    print(
        f"\nrclone serve s3 on 127.0.0.1, 16 KiB objects ({args.count}; {args.count_far} from "
        f"{FAR_MS:g} ms of round trip), best of {args.rounds} round(s), KiB/s; "
        f"load average {load_before} at the start, {load()} at the end; "
        f"{time.perf_counter() - began:.0f} s in all\n"
    )
    print(
        "| scheme | round trip | streams | operation | objects | storeprobe | bare obstore "
        "| rclone copy | storeprobe ÷ bare | rclone ÷ bare |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        rate, failures = row["kib_per_s"], row["failures"]
        cells = []
        for client in CLIENTS:
            value = f"{rate[client]:.1f}" if client in rate else "failed"
            if client in failures:
                value += f" ({len(failures[client])} of {args.rounds} failed)"
            cells.append(value)
        bare = rate.get("bare obstore")
        ratios = [
            f"{rate[c] / bare:.3f}" if bare and c in rate else "n/a"
            for c in ("storeprobe", "rclone copy")
        ]
        print(
            f"| {row['scheme']} | {row['rtt_ms']:g} ms | {row['streams']} | {row['operation']} "
            f"| {row['count']} | " + " | ".join(cells + ratios) + " |"
        )


if __name__ == "__main__":
    main()
