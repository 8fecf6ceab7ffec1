"""storeprobe against the clients people already use, on one local S3 server, in one run.

Against ``rclone serve s3`` (or moto: ``--server moto``) on 127.0.0.1, for the four seed
probes (256 × 16 KiB and 1 × 256 MiB, upload and download) at the given stream counts,
in ``--rounds`` interleaved rounds (storeprobe, obstore native, then obstore native,
storeprobe: the order alternates, so a drift of the machine hits both sides alike):

- storeprobe's default S3 path (``Probe.from_url("s3://...")``: obstore's fsspec store,
  create-only puts, byte ranges through s3fs where the server answers ranged GETs with
  200, as rclone does), one repeat per round, its timed window as the Result reports it;
- obstore native, like for like: the same create-only puts (``mode="create"``, the
  ``If-None-Match: *`` storeprobe sends), one after another or N at once on an asyncio
  semaphore; for the large upload at N streams a multipart upload with
  ``max_concurrency=N`` and storeprobe's part size (obstore makes a multipart upload
  only in its default overwrite mode, on both sides), N ranged GETs for the large
  download where the server answers them with 206; timed inside an event loop started
  before (no loop start-up in the window);
- with ``--others``: storeprobe forced to s3fs, a bare s3fs loop (fsspec batch calls at N)
  and ``rclone copy`` (its time includes starting the process) in the same rounds.

Every client downloads objects asked for once (a HEAD each, untimed) before its timed
download, as storeprobe does: rclone serve s3 hashes an object on its first access.

Prints, per probe, the median throughput of each client over the rounds (KiB/s small,
MiB/s large), the ratio of medians storeprobe ÷ obstore native with its bootstrap 95 %
interval (:func:`storeprobe.stats.compare`), and the spread: the range of the per-round
paired ratios and each side's (max − min) ÷ median, and each side's median CPU time
per object (this process, every thread, during the window: on a machine where client and
server share the cores, client CPU is taken from the server). ``--json`` writes every
round's figures. Client and server share this machine's cores.

    python benchmarks/compare_clients.py [--streams 1 8] [--rounds 7] [--others]
        [--server rclone|moto] [--only "upload small"] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import s3fs

from storeprobe import Probe, Workload
from storeprobe.planning import choose
from storeprobe.stats import compare
from tests.conftest import s3_options
from tests.servers import S3_KEY, S3_SECRET, Server, moto_s3, rclone_s3

SMALL, LARGE = Workload.small(), Workload.large()
PROBES = [("upload", SMALL), ("download", SMALL), ("upload", LARGE), ("download", LARGE)]
#: a round's figure: (seconds, CPU seconds of this process or None), or None where the
#: client cannot do the probe
Figure = tuple[float, float | None] | None
Timer = Callable[[], Figure]


def head_all(fs: s3fs.S3FileSystem, names: list[str]) -> None:
    """One HEAD per object (untimed), as storeprobe asks before its timed download."""
    for name in names:
        fs.invalidate_cache()
        fs.info(name)
    fs.invalidate_cache()


def payloads(workload: Workload) -> list[bytes]:
    return [workload.payload_bytes(i) for i in range(workload.count)]


class Clients:
    """Each client's one timed run of a probe (``timer``), set up and cleaned up untimed."""

    def __init__(self, endpoint: str, work: Path) -> None:
        self.endpoint = endpoint
        self.work = work
        self.options = s3_options(endpoint)
        self.data = {SMALL: payloads(SMALL), LARGE: payloads(LARGE)}
        self.loop = asyncio.new_event_loop()
        self.probes: dict[tuple[str, int], Probe] = {}
        self.ranges_206 = self._answers_ranges()

    def close(self) -> None:
        self.loop.close()

    def timer(self, client: str, operation: str, workload: Workload, streams: int) -> Timer:
        if client == "storeprobe":
            return lambda: self.storeprobe("auto", operation, workload, streams)
        if client == "storeprobe s3fs":
            return lambda: self.storeprobe("s3fs", operation, workload, streams)
        if client == "obstore native":
            return lambda: self.obstore_native(operation, workload, streams)
        if client == "bare s3fs":
            return lambda: self.bare_s3fs(operation, workload, streams)
        return lambda: self.rclone(operation, workload, streams)

    # -- storeprobe --------------------------------------------------------------
    def storeprobe(self, backend: str, operation: str, workload: Workload, streams: int) -> Figure:
        probe = self.probes.get((backend, streams))
        if probe is None:
            probe = Probe.from_url(
                "s3://bench/sp", self.options, client=backend, streams=streams, repeats=1
            )
            self.probes[backend, streams] = probe
        result = probe.measure(operation, workload)  # type: ignore[arg-type]
        if not result.samples:
            raise RuntimeError(f"storeprobe {operation} {workload.name}: {result.errors}")
        sample = result.samples[0]
        cpu = None if sample.cpu_ns is None else sample.cpu_ns / 1e9
        return sample.elapsed_ns / 1e9, cpu

    # -- obstore native ------------------------------------------------------------
    def _store(self) -> Any:
        from obstore.store import S3Store

        return S3Store(
            "bench",
            config={
                "access_key_id": S3_KEY,
                "secret_access_key": S3_SECRET,
                "endpoint": self.endpoint,
                "region": "us-east-1",
            },
            client_options={"allow_http": True},
        )

    def _answers_ranges(self) -> bool:
        """Does the server answer a ranged GET with 206 (else obstore refuses it)?"""
        import obstore

        store = self._store()
        key = f"range-check-{uuid.uuid4().hex}"
        obstore.put(store, key, b"0123456789")
        try:
            obstore.get_range(store, key, start=0, end=1)
        except Exception:
            return False
        finally:
            obstore.delete(store, key)
        return True

    def obstore_native(self, operation: str, workload: Workload, streams: int) -> Figure:
        import obstore

        split = workload.count == 1 and streams > 1
        if split and operation == "download" and not self.ranges_206:
            return None  # rclone answers ranged GETs with 200; obstore refuses them
        # the part size storeprobe chooses for this object and stream count
        layout = choose(self.probe_caps(), "obstore", "upload", workload, streams, stage_above=None)
        part = layout.part_size
        size = workload.size
        store = self._store()
        data = self.data[workload]
        prefix = f"bare-obstore-{uuid.uuid4().hex}"
        names = [f"{prefix}/{i}" for i in range(workload.count)]

        async def run() -> tuple[float, float]:
            semaphore = asyncio.Semaphore(streams)

            async def one(name: str, body: bytes) -> None:
                async with semaphore:
                    if operation == "upload":
                        if split:  # obstore's multipart puts cannot be create-only
                            await obstore.put_async(
                                store,
                                name,
                                body,
                                use_multipart=True,
                                chunk_size=part,
                                max_concurrency=streams,
                            )
                        else:
                            await obstore.put_async(
                                store, name, body, mode="create", use_multipart=False
                            )
                    else:
                        response = await obstore.get_async(store, name)
                        await response.bytes_async()

            async def ranged(name: str, start: int) -> None:
                async with semaphore:
                    await obstore.get_range_async(
                        store, name, start=start, end=min(start + part, size)
                    )

            if split and operation == "download":
                jobs = [ranged(names[0], start) for start in range(0, size, part)]
            else:
                jobs = [one(n, b) for n, b in zip(names, data, strict=True)]
            cpu = time.process_time()
            start = time.perf_counter()
            await asyncio.gather(*jobs)
            return time.perf_counter() - start, time.process_time() - cpu

        try:
            if operation == "download":
                for name, body in zip(names, data, strict=True):
                    obstore.put(store, name, body)
                for name in names:
                    obstore.head(store, name)
            else:  # connections opened before the window, as storeprobe's checks do
                next(iter(obstore.list(store, chunk_size=1)), None)
            return self.loop.run_until_complete(run())
        finally:
            obstore.delete(store, names)

    def probe_caps(self) -> Any:
        from storeprobe.backends.obstore import ObstoreBackend

        return ObstoreBackend.capabilities

    # -- bare s3fs -----------------------------------------------------------------
    def bare_s3fs(self, operation: str, workload: Workload, streams: int) -> Figure:
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options)
        data = self.data[workload]
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
            return time.perf_counter() - start, None
        finally:
            fs.rm(names)

    # -- rclone copy -----------------------------------------------------------------
    def rclone(self, operation: str, workload: Workload, streams: int) -> Figure:
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
        remote = f"p:bench/rclone-{uuid.uuid4().hex}"
        target = self.work / f"dst-{uuid.uuid4().hex}"
        try:
            if operation == "download":
                # written the way the other clients' objects are (no MD5 metadata), so the
                # server does the same work on first read for every client
                fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options)
                prefix = remote.removeprefix("p:")
                fs.pipe({f"{prefix}/{i:05d}": b for i, b in enumerate(self.data[workload])})
                head_all(fs, [f"{prefix}/{i:05d}" for i in range(workload.count)])
                argv = [binary, "copy", *flags, remote, str(target)]
            else:
                for i, body in enumerate(self.data[workload]):
                    (source / f"{i:05d}").write_bytes(body)
                argv = [binary, "copy", *flags, str(source), remote]
            start = time.perf_counter()
            subprocess.run(argv, env=env, check=True)
            return time.perf_counter() - start, None
        finally:
            subprocess.run([binary, "purge", remote], env=env, check=False, capture_output=True)
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(source, ignore_errors=True)


@contextmanager
def server_of(kind: str, work: Path) -> Iterator[Server]:
    if kind == "rclone":
        with rclone_s3(work / "s3root") as server:
            yield server
        return
    with moto_s3() as server:
        s3fs.S3FileSystem(  # no region_name here, or moto refuses the location constraint
            key=S3_KEY, secret=S3_SECRET, client_kwargs={"endpoint_url": server.endpoint}
        ).mkdir("bench")
        yield server


def shown(workload: Workload, bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "n/a"
    scale = 1024 if workload is SMALL else 1024**2
    return f"{bytes_per_s / scale:,.0f}".replace(",", " ")


def spread(values: list[float]) -> str:
    """(max − min) ÷ median, in per cent."""
    return f"{(max(values) - min(values)) / statistics.median(values):.0%}"


def cpu_shown(seconds: list[float]) -> str:
    """The median client CPU time per object (µs, or ms above 10 ms)."""
    if not seconds:
        return "n/a"
    median = statistics.median(seconds)
    return f"{median * 1e3:.0f} ms" if median >= 0.01 else f"{median * 1e6:.0f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--server", choices=("rclone", "moto"), default="rclone")
    parser.add_argument("--others", action="store_true", help="s3fs, bare s3fs, rclone copy")
    parser.add_argument("--only", nargs="+", help='probes to run, e.g. "upload small"')
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    clients_run = ["storeprobe", "obstore native"]
    if args.others:
        clients_run += ["storeprobe s3fs", "bare s3fs", "rclone copy"]
    rounds: dict[str, dict[str, list[float | None]]] = {}  # B/s per round
    cpus: dict[str, dict[str, list[float]]] = {}  # client CPU seconds per object per round
    with (
        tempfile.TemporaryDirectory(dir="/var/tmp") as work,
        server_of(args.server, Path(work)) as server,
    ):
        clients = Clients(server.endpoint, Path(work))
        try:
            for streams in args.streams:
                for operation, workload in PROBES:
                    name = f"{operation} {'small' if workload is SMALL else 'large'}"
                    if args.only and name not in args.only:
                        continue
                    key = f"{name}, {streams} stream{'s' if streams > 1 else ''}"
                    rows = rounds[key] = {client: [] for client in clients_run}
                    cpu = cpus[key] = {client: [] for client in clients_run}
                    for number in range(args.rounds):
                        order = clients_run if number % 2 == 0 else clients_run[::-1]
                        for client in order:
                            figure = clients.timer(client, operation, workload, streams)()
                            if figure is None:
                                rows[client].append(None)
                                continue
                            rows[client].append(workload.total_bytes / figure[0])
                            if figure[1] is not None:
                                cpu[client].append(figure[1] / workload.count)
                    print(
                        f"  {key}: "
                        + ", ".join(
                            f"{c} {' '.join(shown(workload, v) for v in rows[c])}" for c in rows
                        ),
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            clients.close()
    print(
        f"Medians of {args.rounds} interleaved rounds on "
        f"{'rclone serve s3' if args.server == 'rclone' else 'moto'} "
        "(KiB/s small, MiB/s large); sp = storeprobe's default path"
    )
    print()
    others = clients_run[2:]
    print(
        "| probe | storeprobe | obstore native | sp ÷ native | 95 % interval "
        "| per-round ratios | spread sp / native | client CPU per object sp / native |"
        + "".join(f" {c} |" for c in others)
    )
    print("|---|---:|---:|---:|---|---|---|---|" + "---:|" * len(others))
    for key, rows in rounds.items():
        workload = SMALL if "small" in key else LARGE
        sp = [v for v in rows["storeprobe"] if v is not None]
        native = [v for v in rows["obstore native"] if v is not None]
        cells = [f"{shown(workload, statistics.median(sp))}"]
        if native:
            found = compare(sp, native)
            paired = [a / b for a, b in zip(sp, native, strict=True)]
            cells += [
                shown(workload, statistics.median(native)),
                f"{found.ratio:.2f}×",
                f"{found.low:.2f}–{found.high:.2f}",
                f"{min(paired):.2f}–{max(paired):.2f}",
                f"{spread(sp)} / {spread(native)}",
            ]
        else:
            cells += ["n/a", "n/a", "", "", f"{spread(sp)} / n/a"]
        cells.append(" / ".join(cpu_shown(cpus[key][c]) for c in ("storeprobe", "obstore native")))
        for client in others:
            values = [v for v in rows[client] if v is not None]
            cells.append(shown(workload, statistics.median(values)) if values else "n/a")
        print(f"| {key} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"rates": rounds, "cpu_per_object": cpus}, indent=1))


if __name__ == "__main__":
    main()
